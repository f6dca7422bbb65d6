//! The gateway keeps the routes of the tools it forwarded while the session says they are
//! current (issue 41, the gateway tax): a tool called again does not cost a round trip through
//! the session's loop, and once the session changed anything a call goes where the session
//! sends it now — never to a connection it replaced.

use crate::common;

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Instant;

use common::*;
use mcp_reconcile::gateway::Gateway;
use mcp_reconcile::host::{
    Host, HostHandle, HostOptions, MergedCatalog, Route, StatusReport, Target,
};
use mcp_reconcile::inputs::Inputs;
use mcp_reconcile::session::{Session, SessionGone};
use rmcp::model::CallToolRequestParams;
use rmcp::ServiceExt;
use serde_json::json;

/// A session that counts the routes asked of it.
struct Counting {
    inner: HostHandle,
    routes: Arc<AtomicUsize>,
}

impl Session for Counting {
    async fn catalog(&self) -> Result<MergedCatalog, SessionGone> {
        self.inner.catalog().await
    }

    async fn route(&self, target: Target) -> Result<Result<Route, String>, SessionGone> {
        self.routes.fetch_add(1, Ordering::SeqCst);
        self.inner.route(target).await
    }

    async fn status(&self) -> Result<StatusReport, SessionGone> {
        Session::status(&self.inner).await
    }

    async fn reload(&self) -> Result<(), SessionGone> {
        Session::reload(&self.inner).await
    }

    async fn reconnect(
        &self,
        server: Option<String>,
    ) -> Result<Result<Vec<String>, String>, SessionGone> {
        Session::reconnect(&self.inner, server).await
    }
}

fn server_with_tag(p: &Project, tag: &str) -> serde_json::Value {
    let mut entry = p.server("a", "echo,env");
    entry["env"] = json!({ "ROUTE_TAG": tag });
    entry
}

/// A tool called again is routed by the session once, not per call; after the session
/// replaced the server (its entry was edited), the next call reaches the new process.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_called_again_is_routed_once_until_the_session_changes() {
    let p = Project::new();
    p.write_settings(json!({"mcpServers": {"a": server_with_tag(&p, "one")}}));
    let inputs = Inputs::new(&p.options()).expect("inputs");
    let session = Host::new(inputs, HostOptions::default())
        .spawn()
        .expect("the session starts");
    let handle = session.handle().clone();
    let routes = Arc::new(AtomicUsize::new(0));
    let gateway = Gateway::new(Counting {
        inner: handle.clone(),
        routes: Arc::clone(&routes),
    });
    let (client_end, server_end) = tokio::io::duplex(64 * 1024);
    let served = tokio::spawn(async move {
        let running = gateway
            .serve(tokio::io::split(server_end))
            .await
            .expect("gateway handshake");
        let _ = running.waiting().await;
    });
    let client = tokio::time::timeout(PATIENCE, ().serve(tokio::io::split(client_end)))
        .await
        .expect("handshake in time")
        .expect("client handshake");
    let tag = || async {
        let params = CallToolRequestParams::new("mcp__a__env").with_arguments(
            json!({"name": "ROUTE_TAG"})
                .as_object()
                .cloned()
                .expect("object"),
        );
        text(&client.call_tool(params).await.expect("tools/call"))
    };

    const CALLS: usize = 50;
    for _ in 0..CALLS {
        assert_eq!(tag().await, "one");
    }
    let asked = routes.load(Ordering::SeqCst);
    // Once, unless the session happened to change meanwhile (a timer of its own): far fewer
    // than one per call either way.
    assert!(asked < CALLS / 5, "{asked} routes asked for {CALLS} calls");

    // The entry changes: the session replaces the process.
    let first_pid = pids(&p, "a");
    p.write_settings(json!({"mcpServers": {"a": server_with_tag(&p, "two")}}));
    let start = Instant::now();
    loop {
        let status = Session::status(&handle).await.expect("the session runs");
        let a = status.servers.iter().find(|s| s.name == "a").expect("a");
        let replaced = a
            .pid
            .is_some_and(|pid| !first_pid.contains(&u64::from(pid)));
        if a.state == "connected" && replaced {
            break;
        }
        assert!(start.elapsed() < PATIENCE, "a was never replaced: {a:?}");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    // The first call after the change goes to the new process, asked of the session again.
    let before = routes.load(Ordering::SeqCst);
    assert_eq!(tag().await, "two");
    assert_eq!(routes.load(Ordering::SeqCst), before + 1);

    client.cancel().await.expect("client closes");
    let _ = served.await;
    session.shutdown().await.expect("the session task");
}
