//! The host's MCP client over streamable HTTP (`transport::connect` with an `httpUrl`) against
//! the official MCP conformance suite, client mode, non-auth core scenarios
//! (`@modelcontextprotocol/conformance` 0.1.13, pinned in the root `package.json`; `npm ci`
//! first). The client is `examples/conformance_client.rs`; `scripts/conformance.sh` runs this.

use std::path::{Path, PathBuf};
use std::process::Command;

const SCENARIOS: [&str; 4] = [
    "initialize",
    "tools_call",
    "elicitation-sep1034-client-defaults",
    "sse-retry",
];

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .map(Path::to_path_buf)
        .expect("workspace root")
}

/// Builds the example client next to this test's binaries.
fn client() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary");
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .expect("target/<profile>");
    let target_dir = profile_dir.parent().expect("target dir");
    let status = Command::new(env!("CARGO"))
        .args([
            "build",
            "-q",
            "-p",
            "mcp-reconcile",
            "--example",
            "conformance_client",
        ])
        .env("CARGO_TARGET_DIR", target_dir)
        .status()
        .expect("cargo runs");
    assert!(status.success(), "building the conformance client failed");
    profile_dir.join("examples/conformance_client")
}

#[test]
fn the_streamable_http_client_passes_the_core_client_scenarios() {
    let suite = workspace_root().join("node_modules/.bin/conformance");
    assert!(
        suite.exists(),
        "{} is missing: run `npm ci` at the repository root ({}) first",
        suite.display(),
        workspace_root().display()
    );
    let client = client();
    let mut failed = Vec::new();
    for scenario in SCENARIOS {
        let out = Command::new(&suite)
            .args(["client", "--command"])
            .arg(&client)
            .args(["--scenario", scenario, "--timeout", "60000"])
            .current_dir(workspace_root())
            .output()
            .expect("the conformance suite runs (Node 20+)");
        let log = String::from_utf8_lossy(&out.stderr);
        let summary = log
            .lines()
            .find(|l| l.starts_with("Passed:"))
            .unwrap_or("no summary");
        println!("{scenario}: {summary}");
        if !out.status.success() {
            failed.push(format!("{scenario}:\n{log}"));
        }
    }
    assert!(
        failed.is_empty(),
        "failed scenarios:\n{}",
        failed.join("\n")
    );
}
