//! The MCP behaviour over stdio, through rmcp's child-process client: what the options offer
//! and what the tools, prompts and resources return.

mod common;

use anyhow::Context;
use common::{call_text, connect_stdio, connect_stdio_cmd, fixture_command, object, tool_names};
use rmcp::model::{
    CallToolRequestParams, ClientRequest, GetPromptRequestParams, ReadResourceRequestParams,
    Request, ResourceContents, ServerResult,
};
use rmcp::service::PeerRequestOptions;
use serde_json::json;

#[tokio::test]
async fn initialize_reports_the_name_and_offers_echo_by_default() -> anyhow::Result<()> {
    let f = connect_stdio(&[]).await?;
    let info = f.client.peer_info().context("no initialize result")?;
    assert_eq!(
        info.server_info.as_ref().map(|s| s.name.as_str()),
        Some("mcp-fixture-server")
    );
    assert!(info.capabilities.tools.is_some());
    assert!(info.capabilities.prompts.is_none());
    assert!(info.capabilities.resources.is_none());
    assert_eq!(tool_names(&f.client).await?, ["echo"]);
    Ok(())
}

#[tokio::test]
async fn the_tool_list_follows_args_env_and_prefix() -> anyhow::Result<()> {
    let f = connect_stdio(&[
        "--tools",
        "add,pid,echo",
        "--tool-prefix",
        "v2_",
        "--name",
        "renamed",
    ])
    .await?;
    assert_eq!(
        tool_names(&f.client).await?,
        ["v2_add", "v2_pid", "v2_echo"]
    );
    let info = f.client.peer_info().context("no initialize result")?;
    assert_eq!(
        info.server_info.as_ref().map(|s| s.name.as_str()),
        Some("renamed")
    );

    let mut cmd = fixture_command(&[]);
    cmd.env("FIXTURE_TOOLS", "sleep,env");
    let from_env = connect_stdio_cmd(cmd).await?;
    assert_eq!(tool_names(&from_env.client).await?, ["sleep", "env"]);

    let none = connect_stdio(&["--tools", ""]).await?;
    assert!(tool_names(&none.client).await?.is_empty());
    Ok(())
}

#[tokio::test]
async fn echo_and_add_answer_and_bad_calls_are_errors() -> anyhow::Result<()> {
    let f = connect_stdio(&["--tools", "echo,add"]).await?;
    let c = &f.client;
    assert_eq!(
        call_text(c, "echo", json!({"text": "hi there"})).await?,
        "hi there"
    );
    assert_eq!(call_text(c, "add", json!({"a": 2, "b": 40})).await?, "42");
    assert_eq!(
        call_text(c, "add", json!({"a": 0.5, "b": 0.25})).await?,
        "0.75"
    );

    assert!(
        call_text(c, "add", json!({"a": 1})).await.is_err(),
        "missing b"
    );
    assert!(
        call_text(c, "sleep", json!({"ms": 0})).await.is_err(),
        "not offered"
    );
    assert!(call_text(c, "nope", json!({})).await.is_err(), "unknown");
    Ok(())
}

#[tokio::test]
async fn env_and_pid_report_the_server_process() -> anyhow::Result<()> {
    let mut cmd = fixture_command(&["--tools", "env,pid"]);
    cmd.env("MCP_FIXTURE_TEST_VALUE", "passed through");
    let f = connect_stdio_cmd(cmd).await?;
    let c = &f.client;
    let value = call_text(c, "env", json!({"name": "MCP_FIXTURE_TEST_VALUE"})).await?;
    assert_eq!(value, "passed through");
    assert_eq!(call_text(c, "pid", json!({})).await?, f.pid.to_string());

    let unset = c
        .call_tool(
            CallToolRequestParams::new("env")
                .with_arguments(object(json!({"name": "MCP_FIXTURE_TEST_UNSET"}))),
        )
        .await?;
    assert_eq!(
        unset.is_error,
        Some(true),
        "an unset variable is a tool error"
    );
    Ok(())
}

#[tokio::test]
async fn prompts_are_listed_and_rendered() -> anyhow::Result<()> {
    let f = connect_stdio(&["--prompts", "greet,farewell"]).await?;
    let names: Vec<_> = f
        .client
        .list_all_prompts()
        .await?
        .into_iter()
        .map(|p| p.name)
        .collect();
    assert_eq!(names, ["greet", "farewell"]);

    let greet = f
        .client
        .get_prompt(
            GetPromptRequestParams::new("greet").with_arguments(object(json!({"name": "Ada"}))),
        )
        .await?;
    let text = greet.messages[0].content.as_text().context("not text")?;
    assert_eq!(text.text, "Say hello to Ada.");

    let missing_arg = f
        .client
        .get_prompt(GetPromptRequestParams::new("greet"))
        .await;
    assert!(missing_arg.is_err());
    let unknown = f
        .client
        .get_prompt(GetPromptRequestParams::new("nope"))
        .await;
    assert!(unknown.is_err());
    Ok(())
}

#[tokio::test]
async fn resources_are_listed_and_read() -> anyhow::Result<()> {
    let f = connect_stdio(&["--resources", "3"]).await?;
    let uris: Vec<_> = f
        .client
        .list_all_resources()
        .await?
        .into_iter()
        .map(|r| r.uri)
        .collect();
    assert_eq!(
        uris,
        [
            "fixture://resources/1",
            "fixture://resources/2",
            "fixture://resources/3"
        ]
    );
    let read = f
        .client
        .read_resource(ReadResourceRequestParams::new("fixture://resources/2"))
        .await?;
    match &read.contents[..] {
        [ResourceContents::TextResourceContents { text, .. }] => {
            assert_eq!(text, "fixture resource 2");
        }
        other => panic!("unexpected contents {other:?}"),
    }
    let missing = f
        .client
        .read_resource(ReadResourceRequestParams::new("fixture://resources/4"))
        .await;
    assert!(missing.is_err());
    Ok(())
}

#[tokio::test]
async fn change_tools_after_adds_a_tool_and_notifies() -> anyhow::Result<()> {
    let f = connect_stdio(&["--tool-prefix", "p_", "--change-tools-after", "1000"]).await?;
    let info = f.client.peer_info().context("no initialize result")?;
    let tools_cap = info
        .capabilities
        .tools
        .clone()
        .context("no tools capability")?;
    assert_eq!(tools_cap.list_changed, Some(true));
    assert_eq!(tool_names(&f.client).await?, ["p_echo"]);

    tokio::time::timeout(common::PATIENCE, f.recorder.tools_changed.notified())
        .await
        .context("no notifications/tools/list_changed")?;
    assert_eq!(tool_names(&f.client).await?, ["p_echo", "p_late"]);
    assert_eq!(call_text(&f.client, "p_late", json!({})).await?, "late");
    Ok(())
}

fn sleep_request(ms: u64) -> ClientRequest {
    ClientRequest::CallToolRequest(Request::new(
        CallToolRequestParams::new("sleep").with_arguments(object(json!({"ms": ms}))),
    ))
}

#[tokio::test]
async fn sleep_reports_progress_for_its_token() -> anyhow::Result<()> {
    let f = connect_stdio(&["--tools", "sleep"]).await?;
    let handle = f
        .client
        .send_cancellable_request(sleep_request(200), PeerRequestOptions::no_options())
        .await?;
    let token = handle.progress_token.clone();
    let response = handle.await_response().await?;
    assert!(
        matches!(response, ServerResult::CallToolResult(_)),
        "{response:?}"
    );

    // Notification handlers may still be running when the response arrives.
    let deadline = tokio::time::Instant::now() + common::PATIENCE;
    while f.recorder.progress.lock().expect("progress lock").len() < 10 {
        assert!(
            tokio::time::Instant::now() < deadline,
            "fewer than 10 progress notifications"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    let progress = f.recorder.progress.lock().expect("progress lock").clone();
    assert_eq!(progress.len(), 10, "{progress:?}");
    assert!(progress.iter().all(|p| p.progress_token == token));
    assert!(progress.windows(2).all(|w| w[0].progress < w[1].progress));
    let last = progress.last().context("no progress")?;
    assert_eq!((last.progress, last.total), (200.0, Some(200.0)));
    Ok(())
}

#[tokio::test]
async fn sleep_stops_when_cancelled() -> anyhow::Result<()> {
    let f = connect_stdio(&["--tools", "sleep"]).await?;
    let handle = f
        .client
        .send_cancellable_request(sleep_request(60_000), PeerRequestOptions::no_options())
        .await?;
    // Once progress arrives the server is certainly inside the sleep.
    let deadline = tokio::time::Instant::now() + common::PATIENCE;
    while f
        .recorder
        .progress
        .lock()
        .expect("progress lock")
        .is_empty()
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "no progress from sleep"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    handle.cancel(Some("test".into())).await?;
    f.stderr.wait_for("fixture: sleep cancelled").await?;

    // The connection is still usable after the cancellation.
    assert_eq!(
        call_text(&f.client, "sleep", json!({"ms": 0})).await?,
        "slept 0 ms"
    );
    Ok(())
}
