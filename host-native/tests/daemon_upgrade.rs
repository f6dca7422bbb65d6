//! Upgrades while sessions run, end to end: a `serve` of a newer version makes the running
//! daemon retire — the new version's daemon takes the socket, the old one keeps serving the
//! sessions it has until the last of them ends. One build plays both releases through
//! `MCP_RECONCILE_TEST_VERSION`; real `serve`s start their daemons themselves, as a client's do.

use crate::common;

use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};

use common::*;
use serde_json::{json, Value};

/// A `serve` of `version` attached to (or starting) the daemon in `runtime`.
async fn serve_of(p: &Project, runtime: &Path, version: &str, log: &str) -> Served {
    let log = p.path(log);
    let err = fs::File::create(&log).expect("log");
    let mut command = Command::new(cli());
    command
        .arg("serve")
        .args(p.flags())
        .env("XDG_RUNTIME_DIR", runtime)
        .env("MCP_RECONCILE_TEST_VERSION", version)
        .env("MCP_RECONCILE_LOG", "info")
        .stderr(err);
    Served::spawn(command, log).await
}

/// `daemon --status --json` of the daemon in `runtime`, or `None` when none answers.
fn daemon_status(runtime: &Path) -> Option<Value> {
    let out = Command::new(cli())
        .args(["daemon", "--status", "--json"])
        .env("XDG_RUNTIME_DIR", runtime)
        .stdin(Stdio::null())
        .output()
        .expect("runs");
    serde_json::from_slice(&out.stdout).ok()
}

/// A newer `serve` retires the older daemon without taking anything from its session: the
/// old session keeps its tools and its calls are answered, the new session runs on a daemon of
/// the new version, and the old daemon exits with its last session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_newer_serve_retires_the_old_daemon_and_its_session_keeps_every_tool() {
    let p = Project::new();
    let runtime = p.path("run");
    fs::create_dir_all(&runtime).expect("runtime dir");
    p.write_settings(json!({"mcpServers": {"notes": p.server("notes", "echo")}}));

    let old = serve_of(&p, &runtime, "1.0.0", "old.log").await;
    old.wait_tool("mcp__notes__echo").await;
    let before = daemon_status(&runtime).expect("the old daemon answers");
    assert_eq!(before["version"], "1.0.0", "{before}");
    let old_daemon = before["pid"].as_u64().expect("pid") as u32;
    let _old_daemon = KillGroup(old_daemon);

    let new = serve_of(&p, &runtime, "2.0.0", "new.log").await;
    new.wait_tool("mcp__notes__echo").await;
    let after = daemon_status(&runtime).expect("the new daemon answers");
    assert_eq!(after["version"], "2.0.0", "{after}");
    let new_daemon = after["pid"].as_u64().expect("pid") as u32;
    let _new_daemon = KillGroup(new_daemon);
    assert_ne!(new_daemon, old_daemon, "a daemon of the new version runs");

    // The old session runs on, on the old daemon, with every tool it had.
    assert!(
        alive(old_daemon.into()),
        "the old daemon still serves its session"
    );
    assert!(old
        .tool_names()
        .await
        .contains(&"mcp__notes__echo".to_owned()));
    let echoed = old
        .call_text("mcp__notes__echo", json!({"text": "still here"}))
        .await;
    assert!(echoed.contains("still here"), "{echoed}");
    let echoed = new
        .call_text("mcp__notes__echo", json!({"text": "new here"}))
        .await;
    assert!(echoed.contains("new here"), "{echoed}");

    // Its last session gone, the retired daemon stops its servers and exits; the new one
    // stays.
    drop(old);
    wait_until("the retired daemon exits", || !alive(old_daemon.into()));
    assert!(alive(new_daemon.into()), "the new daemon runs on");
    assert_eq!(
        daemon_status(&runtime).map(|s| s["pid"].clone()),
        Some(json!(new_daemon))
    );
}

/// An older `serve` (a binary still installed somewhere) attaches to a newer daemon as it is:
/// nothing retires.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_older_serve_attaches_to_a_newer_daemon() {
    let p = Project::new();
    let runtime = p.path("run");
    fs::create_dir_all(&runtime).expect("runtime dir");
    p.write_settings(json!({"mcpServers": {"notes": p.server("notes", "echo")}}));

    let new = serve_of(&p, &runtime, "2.0.0", "new.log").await;
    new.wait_tool("mcp__notes__echo").await;
    let status = daemon_status(&runtime).expect("the daemon answers");
    let daemon = status["pid"].as_u64().expect("pid") as u32;
    let _daemon = KillGroup(daemon);

    let old = serve_of(&p, &runtime, "1.0.0", "old.log").await;
    old.wait_tool("mcp__notes__echo").await;
    let status = daemon_status(&runtime).expect("the daemon answers");
    assert_eq!(status["pid"], json!(daemon), "{status}");
    assert_eq!(
        status["sessions"].as_array().map(Vec::len),
        Some(2),
        "{status}"
    );
}
