//! End-to-end: a failing server's last words reach the model (the status tool, the
//! instructions) with every secret of the environment it ran in masked — the variables it
//! inherited from the session, not only those its entry configures — in-process and on a
//! daemon, whose servers inherit the environment of the client's `serve`.

use crate::common;

use std::fs;
use std::time::{Duration, Instant};

use common::*;
use serde_json::json;

/// What the session's environment holds, and the failing server echoes on stderr.
const TOKEN: &str = "ghp_inheritedTokenValue0123456789";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_inherited_token_a_failing_server_echoes_is_masked_in_process() {
    inherited_token_is_masked(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_inherited_token_a_failing_server_echoes_is_masked_on_a_daemon() {
    inherited_token_is_masked(true).await;
}

/// `bad` prints the `GITHUB_TOKEN` it inherited to stderr and exits; its entry configures
/// no env. The status tool shows its stderr with the token masked, and neither the
/// instructions nor `serve`'s or the daemon's log have it.
async fn inherited_token_is_masked(daemon: bool) {
    let p = Project::new();
    p.write_settings(json!({"mcpServers": {
        "ok": p.server("ok", "echo"),
        "bad": {
            "command": "/bin/sh",
            "args": ["-c", "echo \"auth with $GITHUB_TOKEN refused\" >&2; exit 3"],
        },
    }}));
    let log = p.path("serve.log");
    let mut command = std::process::Command::new(cli());
    command
        .arg("serve")
        .args(p.flags())
        .args(["--debounce-ms", "150"])
        .env("GITHUB_TOKEN", TOKEN)
        .env("MCP_RECONCILE_LOG", "debug")
        .stderr(fs::File::create(&log).expect("log"));
    let _daemon = on_backend(&p, &mut command, daemon);
    let served = Served::spawn(command, log).await;

    let start = Instant::now();
    let status = loop {
        let status = served.call_text("mcp_reconcile_status", json!({})).await;
        if status.contains("refused") {
            break status;
        }
        assert!(
            start.elapsed() < PATIENCE,
            "bad's stderr in the status: {status}"
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    };
    assert!(
        !status.contains(TOKEN) && status.contains("auth with *** refused"),
        "the inherited token is masked in bad's stderr: {status}"
    );
    let instructions = served
        .client()
        .peer_info()
        .and_then(|info| info.instructions.clone())
        .unwrap_or_default();
    assert!(!instructions.contains(TOKEN), "{instructions}");
    served.close().await;
    for file in ["serve.log", "daemon.log"] {
        let text = fs::read_to_string(p.path(file)).unwrap_or_default();
        assert!(!text.contains(TOKEN), "the token in {file}:\n{text}");
    }
}
