//! End-to-end: a client of MCP 2026-07-28 (SPEC §16) — rmcp's own client started with
//! `server/discover`, never `initialize` — in front of `serve` over stdio, in-process
//! (`--no-daemon`) and through the daemon: it discovers the gateway, lists and calls tools
//! of a legacy upstream server, gets complete results with cache hints, and hears a hot
//! reload's new tool on a `subscriptions/listen` stream that asked for tool changes only.

mod common;

use std::fs;
use std::os::unix::process::CommandExt;
use std::process::Stdio;
use std::time::Duration;

use common::*;
use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ClientConfig, Implementation,
    PaginatedRequestParams, ProtocolVersion, ServerNotification, SubscriptionFilter,
};
use rmcp::service::{ClientLifecycleMode, ClientServiceExt};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_modern_client_uses_serve_in_process_and_hears_a_hot_reload_on_its_listen_stream() {
    modern_client_round(&["--no-daemon"]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_modern_client_uses_a_daemon_session_and_hears_a_hot_reload_on_its_listen_stream() {
    modern_client_round(&[]).await;
}

async fn modern_client_round(serve_flags: &[&str]) {
    let p = Project::new();
    p.write_settings(json!({"mcpServers": {"a": p.server("a", "echo")}}));
    let log = p.path("serve.log");
    let mut command = std::process::Command::new(cli());
    command
        .arg("serve")
        .args(serve_flags)
        .args(p.flags())
        .args(["--debounce-ms", "150"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(fs::File::create(&log).expect("log file"))
        .process_group(0);
    let mut child = tokio::process::Command::from(command)
        .spawn()
        .expect("serve starts");
    let _group = KillGroup(child.id().expect("a pid"));
    let stdout = child.stdout.take().expect("stdout");
    let stdin = child.stdin.take().expect("stdin");

    let config = ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new("modern-test", "0"),
    )
    .with_protocol_version(ProtocolVersion::V_2026_07_28);
    let lifecycle = ClientLifecycleMode::Discover {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
    };
    let client = tokio::time::timeout(
        PATIENCE,
        config.serve_with_lifecycle((stdout, stdin), lifecycle),
    )
    .await
    .expect("discovery in time")
    .unwrap_or_else(|e| {
        panic!(
            "serve answers server/discover: {e}; log:\n{}",
            fs::read_to_string(&log).unwrap_or_default()
        )
    });
    let info = client.peer_info().expect("the gateway's discover result");
    assert_eq!(info.protocol_version, ProtocolVersion::V_2026_07_28);

    // Lists carry cache hints; the legacy upstream's tool is there, and answers.
    let tools = client
        .list_tools(Some(PaginatedRequestParams::default()))
        .await
        .expect("tools/list");
    let names: Vec<&str> = tools.tools.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(names, ["mcp__a__echo"]);
    assert_eq!(tools.ttl_ms, Some(1_000), "{tools:?}");
    assert!(tools.cache_scope.is_some(), "{tools:?}");
    let echoed = client
        .call_tool(
            CallToolRequestParams::new("mcp__a__echo").with_arguments(
                json!({"text": "hi"})
                    .as_object()
                    .cloned()
                    .unwrap_or_default(),
            ),
        )
        .await
        .expect("tools/call");
    assert_ne!(echoed.is_error, Some(true), "{echoed:?}");
    assert!(
        serde_json::to_string(&echoed.content)
            .unwrap_or_default()
            .contains("hi"),
        "{echoed:?}"
    );

    // A listen stream for tool changes only: an edit that adds a server is announced on it.
    let mut filter = SubscriptionFilter::default();
    filter.tools_list_changed = Some(true);
    let mut stream = client.listen(filter).await.expect("subscriptions/listen");
    assert_eq!(stream.acknowledged().tools_list_changed, Some(true));
    assert_eq!(stream.acknowledged().prompts_list_changed, None);
    p.write_settings(json!({"mcpServers": {
        "a": p.server("a", "echo"),
        "b": p.server("b", "add"),
    }}));
    let heard = tokio::time::timeout(PATIENCE, stream.next())
        .await
        .expect("a change on the listen stream in time")
        .expect("the stream is open")
        .expect("a notification");
    assert!(
        matches!(heard, ServerNotification::ToolListChangedNotification(_)),
        "{heard:?}"
    );
    let mut names = Vec::new();
    for _ in 0..50 {
        let tools = client
            .list_tools(Some(PaginatedRequestParams::default()))
            .await
            .expect("tools/list");
        names = tools.tools.iter().map(|t| t.name.to_string()).collect();
        if names.len() == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(names, ["mcp__a__echo", "mcp__b__add"]);
    assert_eq!(p.spawns("a"), 1, "the untouched server kept its process");

    let _ = stream.cancel().await;
    let _ = client.cancel().await;
}
