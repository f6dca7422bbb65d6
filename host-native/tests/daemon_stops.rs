//! End-to-end: what a daemon session's servers do when the session lets go of them, and what
//! an agent's reconnect may do to a process other sessions share. Real `mcp-reconcile daemon`
//! and `serve` processes (each in its own process group, killed on drop), rmcp clients on the
//! serves' stdio, real fixture servers behind the daemon, each daemon in a private
//! `XDG_RUNTIME_DIR` of the test.
//!
//! * The drain is for sessions that end (a client restarting re-attaches): a server the
//!   session's files no longer run — removed, or now in `mcp.excluded` — stops at once when no
//!   other session holds it.
//! * `mcp_reconcile_reconnect` (`serve --manage-tools`) acts for its own session only: a
//!   process another session holds keeps serving that session's calls, and an agent's loop of
//!   reconnects is rate-limited.

use crate::common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Instant;

use common::*;
use serde_json::json;

/// Far longer than any wait of these tests: a server stopped within it was not drained.
const LONG_DRAIN_MS: u64 = 120_000;

/// A private runtime dir with a daemon of the test's own whose drain is [`LONG_DRAIN_MS`].
fn long_drain_daemon(p: &Project) -> (PathBuf, Group) {
    let runtime = p.path("run");
    fs::create_dir_all(&runtime).expect("runtime dir");
    let daemon = start_daemon_with(p, &runtime, LONG_DRAIN_MS, PATIENCE);
    (runtime, daemon)
}

/// A `serve` attached to the daemon in `runtime`, with `extra` flags.
async fn attach(p: &Project, runtime: &Path, extra: &[&str]) -> Served {
    let (mut command, log) = serve_command(p, "project", 150);
    command
        .args(extra)
        .env("XDG_RUNTIME_DIR", runtime)
        .env("MCP_RECONCILE_LOG", "info");
    Served::spawn(command, log).await
}

/// `mcp-reconcile daemon --status` against the daemon in `runtime`.
fn daemon_status(runtime: &Path) -> String {
    let out = Command::new(cli())
        .args(["daemon", "--status"])
        .env("XDG_RUNTIME_DIR", runtime)
        .stdin(Stdio::null())
        .output()
        .expect("runs");
    output_text(&out)
}

/// Guards the drain's purpose: a server removed from the files or newly excluded stops at
/// once when no other session holds it; only a session that ends leaves its servers to drain.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_removed_or_excluded_server_stops_at_once_and_only_an_ended_session_drains() {
    let p = Project::new();
    let servers = json!({
        "keep": p.server("keep", "echo"),
        "gone": p.server("gone", "echo"),
        "off": p.server("off", "echo"),
    });
    p.write_settings(json!({"mcpServers": servers, "mcp": {"share": "project"}}));
    let (runtime, _daemon) = long_drain_daemon(&p);
    let served = attach(&p, &runtime, &[]).await;
    let all = |names: &[String]| {
        ["mcp__keep__echo", "mcp__gone__echo", "mcp__off__echo"]
            .iter()
            .all(|t| names.iter().any(|n| n == t))
    };
    served.wait_tools("all three servers", all).await;
    let pid = |name| pids(&p, name).first().copied().expect("started once");
    let (keep, gone, off) = (pid("keep"), pid("gone"), pid("off"));

    // Removed from the file: nobody else holds it, so it stops without the drain.
    let mut servers = servers;
    servers.as_object_mut().expect("an object").remove("gone");
    p.write_settings(json!({"mcpServers": servers, "mcp": {"share": "project"}}));
    wait_until_async("the removed server's process is gone", || !alive(gone)).await;

    // Excluded: the same.
    p.write_settings(
        json!({"mcpServers": servers, "mcp": {"excluded": ["off"], "share": "project"}}),
    );
    wait_until_async("the excluded server's process is gone", || !alive(off)).await;
    assert!(alive(keep), "a server still configured keeps running");

    // A session that ends leaves its server to the drain, for a client that comes back.
    served.close().await;
    wait_until("the ended session's server draining", || {
        daemon_status(&runtime).contains("server keep connected pid")
            && daemon_status(&runtime).contains("draining")
    });
    assert!(alive(keep), "{}", daemon_status(&runtime));
    let again = attach(&p, &runtime, &[]).await;
    again
        .wait_tools("keep again", |n| n.iter().any(|t| t == "mcp__keep__echo"))
        .await;
    assert_eq!(
        again
            .call_text("mcp__keep__echo", json!({"text": "back"}))
            .await,
        "back"
    );
    assert_eq!(
        pids(&p, "keep"),
        [keep],
        "the drained process was re-attached"
    );
}

/// Guards another session's calls: an agent's loop of `mcp_reconcile_reconnect` restarts no
/// process a second session holds — every call of that session succeeds — and after the first,
/// its reconnects are refused as too frequent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_agents_reconnect_loop_never_cuts_another_sessions_calls() {
    let p = Project::new();
    p.write_settings(
        json!({"mcp": {"share": "project"}, "mcpServers": {"a": p.server("a", "echo")}}),
    );
    let (runtime, _daemon) = long_drain_daemon(&p);
    let agent = attach(&p, &runtime, &["--manage-tools"]).await;
    let other = attach(&p, &runtime, &[]).await;
    let has_a = |names: &[String]| names.iter().any(|n| n == "mcp__a__echo");
    agent.wait_tools("a for the agent", has_a).await;
    other.wait_tools("a for the other session", has_a).await;
    assert_eq!(pids(&p, "a").len(), 1, "one process for both sessions");

    let asked = Instant::now();
    let (answers, calls) = {
        let done = std::sync::atomic::AtomicBool::new(false);
        let reconnects = async {
            let mut answers = Vec::new();
            for _ in 0..20 {
                answers.push(
                    agent
                        .call("mcp_reconcile_reconnect", json!({"server": "a"}))
                        .await,
                );
            }
            done.store(true, std::sync::atomic::Ordering::SeqCst);
            answers
        };
        let calls = async {
            let mut calls = Vec::new();
            while !done.load(std::sync::atomic::Ordering::SeqCst) || calls.len() < 20 {
                calls.push(other.call("mcp__a__echo", json!({"text": "on"})).await);
            }
            calls
        };
        tokio::join!(reconnects, calls)
    };
    let elapsed = asked.elapsed();

    for call in &calls {
        assert_ne!(call.is_error, Some(true), "{call:?}");
        assert_eq!(text(call), "on");
    }
    assert_eq!(
        pids(&p, "a").len(),
        1,
        "never restarted under the other session"
    );
    // One answer per 10 s window may be the limiter letting it through (it is still refused,
    // as shared); every other one says when to try again.
    let passed: Vec<String> = answers
        .iter()
        .map(text)
        .filter(|t| !t.contains("try again in"))
        .collect();
    let windows = 1 + usize::try_from(elapsed.as_secs() / 10).unwrap_or(usize::MAX);
    assert!(passed.len() <= windows, "{passed:#?} in {elapsed:?}");
    for answer in &answers {
        assert_eq!(answer.is_error, Some(true), "{answer:?}");
    }
    for refusal in &passed {
        assert!(
            refusal.contains("\"a\" is shared with 1 other session"),
            "{refusal}"
        );
    }
}
