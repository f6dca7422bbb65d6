//! [`RunningSession`](mcp_reconcile::host::RunningSession), what [`Host::spawn`] returns: the
//! session stops its servers however it ends, by `shutdown` or by being dropped.

use crate::common;

use std::time::Instant;

use common::*;
use mcp_reconcile::host::{Host, HostOptions, State};
use mcp_reconcile::inputs::Inputs;
use mcp_reconcile::session::Session;
use serde_json::json;

/// Guards the session's drop guard: a session dropped without `shutdown` (an early return, a
/// `?`, a panic in its owner) still stops its servers, each with its whole process group —
/// even while a handle to it (a gateway's) is still held.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_dropped_without_shutdown_stops_its_servers() {
    let p = Project::new();
    let pidfile = p.path("grandchild.pid");
    p.write_settings(json!({"mcpServers": {"g": server_with_grandchild(&pidfile)}}));
    let inputs = Inputs::new(&p.options()).expect("inputs");
    let session = Host::new(inputs, HostOptions::default())
        .spawn()
        .expect("the session starts");
    let handle = session.handle().clone();
    let start = Instant::now();
    let leader = loop {
        let status = handle.status().await.expect("the session runs");
        let g = status.servers.iter().find(|s| s.name == "g").expect("g");
        if let (State::Connected, Some(pid)) = (g.state, g.pid) {
            break u64::from(pid);
        }
        assert!(start.elapsed() < PATIENCE, "g never connected: {g:?}");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    };
    let grandchild = read_pid(&pidfile);
    assert!(alive(leader) && alive(grandchild));

    drop(session);

    wait_until_async("the server and its group to be stopped", || {
        !alive(leader) && !alive(grandchild)
    })
    .await;
    // The session is gone for whoever still holds a handle to it.
    let asked = tokio::time::timeout(PATIENCE, handle.status()).await;
    assert!(
        matches!(asked, Ok(Err(_))),
        "the dropped session still answers"
    );
}
