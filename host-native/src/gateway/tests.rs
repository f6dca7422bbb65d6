//! The gateway in front of a session on in-memory servers ([`crate::testkit`]): an rmcp client
//! talks to it over an in-memory pipe, as `serve`'s client does over stdio.

use rmcp::model::{CallToolRequestParams, CallToolResult};
use rmcp::service::RunningService;
use rmcp::{RoleClient, ServiceExt};
use serde_json::json;

use super::{Gateway, ToolNames};
use crate::host::HostHandle;
use crate::testkit::session::{entry_json as entry, start, Session};

/// A client of `gateway`, connected over an in-memory pipe.
async fn client(gateway: Gateway<HostHandle>) -> RunningService<RoleClient, ()> {
    let (near, far) = tokio::io::duplex(1 << 16);
    tokio::spawn(async move {
        if let Ok(served) = gateway.serve(far).await {
            let _ = served.waiting().await;
        }
    });
    ().serve(near)
        .await
        .expect("the gateway answers initialize")
}

/// A session whose servers `a` and `b` both offer `echo`, and both up.
async fn two_echoes() -> Session {
    let mut s = start(json!({"a": entry(1), "b": entry(1)}));
    s.servers.server("a").set_tools(&["echo"]).await;
    s.servers.server("b").set_tools(&["echo"]).await;
    s.pass("start").await;
    s.wait_server("a", |s| s.tools == 1).await;
    s.wait_server("b", |s| s.tools == 1).await;
    s
}

/// The text of a call's result.
fn text(result: &CallToolResult) -> String {
    serde_json::to_value(&result.content)
        .ok()
        .and_then(|v| v[0]["text"].as_str().map(str::to_owned))
        .unwrap_or_default()
}

async fn tool_names(client: &RunningService<RoleClient, ()>) -> Vec<String> {
    let tools = client.list_all_tools().await.expect("tools/list");
    tools.into_iter().map(|t| t.name.to_string()).collect()
}

/// A client's `tools/call` of a qualified name reaches that server's connection, under the
/// server's own name for the tool.
#[tokio::test]
async fn a_tool_call_reaches_the_server_its_qualified_name_names() {
    let s = two_echoes().await;
    let client = client(Gateway::new(s.handle.clone())).await;
    assert_eq!(tool_names(&client).await, ["mcp__a__echo", "mcp__b__echo"]);
    let result = client
        .call_tool(CallToolRequestParams::new("mcp__b__echo"))
        .await
        .expect("tools/call");
    assert_eq!(text(&result), "b:echo");
    assert_eq!(s.servers.server("b").calls(), ["echo"]);
    assert!(s.servers.server("a").calls().is_empty());
    let _ = client.cancel().await;
    s.stop().await;
}

/// A call of a tool no server offers is answered as a tool error with the session's message,
/// not as a protocol error, and reaches no server.
#[tokio::test]
async fn a_call_of_a_tool_nobody_offers_is_a_tool_error_with_the_sessions_message() {
    let s = two_echoes().await;
    let client = client(Gateway::new(s.handle.clone())).await;
    let result = client
        .call_tool(CallToolRequestParams::new("mcp__c__echo"))
        .await
        .expect("a result, not a protocol error");
    assert_eq!(result.is_error, Some(true));
    assert!(text(&result).contains("mcp__c__echo"), "{}", text(&result));
    assert!(s.servers.server("a").calls().is_empty());
    assert!(s.servers.server("b").calls().is_empty());
    let _ = client.cancel().await;
    s.stop().await;
}

/// `serve --passthrough b` offers only `b`'s tools, under their own names, and a call of one
/// goes to `b`.
#[tokio::test]
async fn passthrough_offers_one_servers_tools_under_their_own_names() {
    let s = two_echoes().await;
    let client = client(Gateway::passthrough(s.handle.clone(), "b")).await;
    assert_eq!(tool_names(&client).await, ["echo"]);
    let result = client
        .call_tool(CallToolRequestParams::new("echo"))
        .await
        .expect("tools/call");
    assert_eq!(text(&result), "b:echo");
    assert!(s.servers.server("a").calls().is_empty());
    let _ = client.cancel().await;
    s.stop().await;
}

/// `--tool-names short` drops the leading `mcp__` on the way out and puts it back on the way
/// in: the call still reaches the right server.
#[tokio::test]
async fn short_tool_names_go_out_without_the_prefix_and_route_back_with_it() {
    let s = two_echoes().await;
    let gateway = Gateway::new(s.handle.clone()).with_tool_names(ToolNames::Short);
    let client = client(gateway).await;
    assert_eq!(tool_names(&client).await, ["a__echo", "b__echo"]);
    let result = client
        .call_tool(CallToolRequestParams::new("a__echo"))
        .await
        .expect("tools/call");
    assert_eq!(text(&result), "a:echo");
    assert!(s.servers.server("b").calls().is_empty());
    let _ = client.cancel().await;
    s.stop().await;
}

/// A route the gateway kept for a tool is not used once the session changed: after the
/// server restarted for an edit, the next call reaches its new connection.
#[tokio::test]
async fn a_kept_route_is_dropped_when_the_session_changes() {
    let mut s = two_echoes().await;
    let client = client(Gateway::new(s.handle.clone())).await;
    let call = || client.call_tool(CallToolRequestParams::new("mcp__a__echo"));
    assert_eq!(text(&call().await.expect("tools/call")), "a:echo");
    let a = s.servers.server("a");
    s.write(json!({"a": entry(2), "b": entry(1)}));
    s.handle.reload().await.expect("the session runs");
    s.pass("manual reload").await;
    crate::testkit::eventually("a's first session closed", || {
        a.starts() == 2 && a.live() == 1
    })
    .await;
    let again = call().await.expect("tools/call");
    assert_ne!(again.is_error, Some(true), "{again:?}");
    assert_eq!(text(&again), "a:echo");
    assert_eq!(a.calls(), ["echo", "echo"]);
    let _ = client.cancel().await;
    s.stop().await;
}
