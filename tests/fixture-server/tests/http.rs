//! The streamable HTTP transport on 127.0.0.1 (port 0), through rmcp's reqwest client.

mod common;

use std::time::Duration;

use anyhow::Context;
use common::{call_text, object, start_http, tool_names};
use rmcp::model::{GetPromptRequestParams, ReadResourceRequestParams};
use serde_json::json;

#[tokio::test]
async fn http_serves_tools_prompts_and_resources() -> anyhow::Result<()> {
    let f = start_http(&[
        "--tools",
        "echo,add",
        "--name",
        "web",
        "--prompts",
        "greet",
        "--resources",
        "1",
    ])
    .await?;
    f.raw
        .stderr
        .wait_for(&format!("fixture: listening on {}", f.url))
        .await?;
    let (client, _) = f.connect().await?;
    let info = client.peer_info().context("no initialize result")?;
    assert_eq!(
        info.server_info.as_ref().map(|s| s.name.as_str()),
        Some("web")
    );
    assert_eq!(tool_names(&client).await?, ["echo", "add"]);
    assert_eq!(
        call_text(&client, "echo", json!({"text": "over http"})).await?,
        "over http"
    );
    assert_eq!(
        call_text(&client, "add", json!({"a": 1, "b": 2})).await?,
        "3"
    );

    let prompt = client
        .get_prompt(
            GetPromptRequestParams::new("greet").with_arguments(object(json!({"name": "Bo"}))),
        )
        .await?;
    assert_eq!(prompt.messages.len(), 1);
    let read = client
        .read_resource(ReadResourceRequestParams::new("fixture://resources/1"))
        .await?;
    assert_eq!(read.contents.len(), 1);
    Ok(())
}

#[tokio::test]
async fn http_sessions_each_get_their_own_list_changed() -> anyhow::Result<()> {
    let f = start_http(&["--change-tools-after", "1000"]).await?;
    let (first, recorder) = f.connect().await?;
    tokio::time::timeout(common::PATIENCE, recorder.tools_changed.notified())
        .await
        .context("no notifications/tools/list_changed over HTTP")?;
    assert_eq!(tool_names(&first).await?, ["echo", "late"]);

    let (second, _) = f.connect().await?;
    assert_eq!(
        tool_names(&second).await?,
        ["echo"],
        "a new session starts over"
    );
    Ok(())
}

#[tokio::test]
async fn http_faults_hang_garbage_and_crash() -> anyhow::Result<()> {
    let hang = start_http(&["--hang-handshake"]).await?;
    let handshake = tokio::time::timeout(Duration::from_millis(300), hang.connect()).await;
    assert!(handshake.is_err(), "the handshake should time out");

    let garbage = start_http(&["--garbage"]).await?;
    let handshake = tokio::time::timeout(Duration::from_secs(1), garbage.connect()).await;
    assert!(!matches!(handshake, Ok(Ok(_))), "no handshake with garbage");

    let mut crash = start_http(&["--crash-after", "100"]).await?;
    assert_eq!(crash.raw.exit_code().await?, Some(1));
    crash
        .raw
        .stderr
        .wait_for("fixture: crashing as asked")
        .await?;
    Ok(())
}

#[tokio::test]
async fn http_exits_cleanly_on_sigterm() -> anyhow::Result<()> {
    let mut f = start_http(&[]).await?;
    let (client, _) = f.connect().await?;
    assert_eq!(tool_names(&client).await?, ["echo"]);
    f.raw.signal("TERM")?;
    assert_eq!(f.raw.exit_code().await?, Some(0));
    Ok(())
}
