//! The session engine on the in-memory connection kind ([`crate::testkit`]): real MCP
//! sessions over in-memory pipes, every timer on a manual clock, the settings in a temp dir
//! and reloads asked for (no watcher). Every host is made by [`crate::testkit::session::start_on`].

use std::time::Duration;

use rmcp::model::CallToolRequestParams;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::{Control, HostEvent, ServerStatus, State, Target};
use crate::testkit::session::{entry_json as entry, start, start_on, On};
use crate::testkit::{eventually, PATIENCE};
use mcp_reconcile_kernel::Reason;

fn connected(s: &ServerStatus) -> bool {
    s.state == State::Connected
}

/// An edited entry restarts that server alone: the other keeps its session — on the session's
/// own supervisor and on the shared pool alike.
#[tokio::test]
async fn a_config_change_restarts_only_the_changed_server() {
    for on in [On::Own, On::Pool] {
        a_config_change_restarts_only_the_changed_server_on(on).await;
    }
}

async fn a_config_change_restarts_only_the_changed_server_on(on: On) {
    let mut s = start_on(json!({"a": entry(1), "b": entry(1)}), on);
    s.pass("start").await;
    s.wait_server("a", connected).await;
    s.wait_server("b", connected).await;
    s.write(json!({"a": entry(2), "b": entry(1)}));
    s.handle.reload().await.expect("the session runs");
    s.pass("manual reload").await;
    let (a, b) = (s.servers.server("a"), s.servers.server("b"));
    s.wait_server("a", connected).await;
    assert_eq!(
        (a.starts(), b.starts()),
        (2, 1),
        "only a restarted ({on:?})"
    );
    eventually("a's old session closed", || a.live() == 1).await;
    assert_eq!(b.live(), 1, "b kept its session");
    s.stop().await;
}

/// A server that ends its session is failed with a retry at the kernel's backoff on the
/// session's clock; moving the clock there runs the retry pass, which starts it again — the
/// session's engine plans it on its own supervisor and on the shared pool alike.
#[tokio::test]
async fn a_server_crash_schedules_a_retry_at_the_manual_clocks_time() {
    for on in [On::Own, On::Pool] {
        a_server_crash_schedules_a_retry_on(on).await;
    }
}

async fn a_server_crash_schedules_a_retry_on(on: On) {
    let mut s = start_on(json!({"a": entry(1)}), on);
    s.pass("start").await;
    s.wait_server("a", connected).await;
    let a = s.servers.server("a");
    a.close();
    let failed = s
        .wait_server("a", |s| s.state == State::Failed && s.retry_in_ms.is_some())
        .await;
    assert_eq!(failed.reason, Some(Reason::BackingOff));
    let wait = failed.retry_in_ms.expect("a retry time");
    assert_eq!(a.starts(), 1, "no retry before the clock moves");
    s.time.advance(Duration::from_millis(wait));
    let retry = s.pass("retry").await;
    assert!(
        retry
            .steps
            .iter()
            .any(|step| step.action.name() == Some("a")),
        "the retry pass restarts a: {retry:#?}"
    );
    s.wait_server("a", connected).await;
    assert_eq!(a.starts(), 2);
    s.stop().await;
}

/// A server's own `tools/list_changed` reaches the session's merged catalog (re-listed over
/// the protocol), announced as a catalog change.
#[tokio::test]
async fn a_servers_list_changed_reaches_the_merged_catalog() {
    let mut s = start(json!({"a": entry(1)}));
    let a = s.servers.server("a");
    a.set_tools(&["one"]).await;
    s.pass("start").await;
    s.wait_server("a", |s| connected(s) && s.tools == 1).await;
    a.set_tools(&["one", "two"]).await;
    let changed = tokio::time::timeout(PATIENCE, async {
        loop {
            if let Some(HostEvent::CatalogChanged(change)) = s.events.recv().await {
                if change.tools {
                    return;
                }
            }
        }
    })
    .await;
    assert!(changed.is_ok(), "a catalog change was announced");
    let catalog = s
        .handle
        .ask(Control::Catalog)
        .await
        .expect("the session runs");
    let names: Vec<&str> = catalog.tools.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(names, ["mcp__a__one", "mcp__a__two"]);
    s.stop().await;
}

/// A qualified tool name is routed to its server's connection, which the call reaches under
/// the server's own name for the tool.
#[tokio::test]
async fn a_qualified_tool_is_routed_to_its_servers_connection() {
    let mut s = start(json!({"a": entry(1), "b": entry(1)}));
    s.servers.server("a").set_tools(&["echo"]).await;
    s.servers.server("b").set_tools(&["echo"]).await;
    s.pass("start").await;
    s.wait_server("a", connected).await;
    s.wait_server("b", connected).await;
    let route = s
        .handle
        .ask(|reply| Control::Route(Target::Tool("mcp__b__echo".into()), reply))
        .await
        .expect("the session runs")
        .expect("routed");
    assert_eq!((route.server.as_str(), route.name.as_str()), ("b", "echo"));
    let result = route
        .caller
        .call_tool(
            CallToolRequestParams::new("echo"),
            None,
            CancellationToken::new(),
        )
        .await
        .map_err(|_| "the call failed")
        .expect("answered");
    let text = serde_json::to_string(&result).expect("serializes");
    assert!(text.contains("b:echo"), "{text}");
    assert_eq!(s.servers.server("b").calls(), ["echo"]);
    assert!(s.servers.server("a").calls().is_empty());
    s.stop().await;
}

/// A hung server never holds back the first listing: once the start grace has passed on the
/// session's clock, the catalog is answered with the servers up, while the hung one still
/// waits (it is let go only after the answer).
#[tokio::test]
async fn a_hung_server_never_holds_back_the_first_listing() {
    let s = start(json!({"fast": entry(1), "slow": entry(1)}));
    s.servers.server("fast").set_tools(&["go"]).await;
    let slow = s.servers.server("slow");
    slow.hold();
    s.wait_server("fast", connected).await;
    eventually("slow's start waits", || slow.held() == 1).await;
    let handle = s.handle.clone();
    let listing = tokio::spawn(async move { handle.ask(Control::Catalog).await });
    s.time.advance(Duration::from_millis(super::START_GRACE.0));
    let catalog = tokio::time::timeout(PATIENCE, listing)
        .await
        .expect("answered after the grace")
        .expect("the task ran")
        .expect("the session runs");
    let names: Vec<&str> = catalog.tools.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(names, ["mcp__fast__go"]);
    assert_eq!(slow.live(), 0, "slow is still starting");
    slow.release();
    s.wait_server("slow", connected).await;
    s.stop().await;
}

/// A start that fails leaves the server failed with its message and a retry time, and offers
/// nothing of it.
#[tokio::test]
async fn a_failed_start_is_failed_with_its_message_and_a_retry() {
    let mut s = start(json!({"a": entry(1)}));
    s.servers
        .server("a")
        .fail_with(Some("cannot bind its port"));
    s.servers.server("a").set_prompts(&["hello"]);
    s.pass("start").await;
    let a = s
        .wait_server("a", |s| s.state == State::Failed && s.retry_in_ms.is_some())
        .await;
    let error = a.last_error.unwrap_or_default();
    assert!(error.contains("cannot bind its port"), "{error}");
    assert_eq!(a.prompts, 0);
    s.servers.server("a").fail_with(None);
    s.time
        .advance(Duration::from_millis(a.retry_in_ms.unwrap_or_default()));
    s.pass("retry").await;
    let a = s.wait_server("a", connected).await;
    assert_eq!(a.prompts, 1, "its prompt once up");
    s.stop().await;
}
