//! The real Claude Code (npm `@anthropic-ai/claude-code`, pinned in the root package.json)
//! in front of an installed gateway: `claude mcp list` starts and health-checks every server
//! Claude Code would start — after `mcp-reconcile install claude` only `reconcile`, which
//! connects, while the user's own server runs behind it. No account and no network: `mcp list`
//! never talks to a model.

mod common;

use std::fs;
use std::os::unix::process::CommandExt as _;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use common::*;
use serde_json::json;

fn claude() -> PathBuf {
    let bin = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../node_modules/@anthropic-ai/claude-code/bin/claude.exe");
    assert!(
        bin.exists(),
        "Claude Code is not installed: run `npm ci` at the repository root (scripts/setup.sh does)"
    );
    bin
}

#[test]
fn claude_code_starts_only_the_installed_gateway_and_it_connects() {
    let p = Project::new();
    let home = p.path("home");
    let project = p.path("project");
    let runtime = p.path("run");
    for dir in [&home, &runtime] {
        fs::create_dir_all(dir).expect("mkdir");
    }
    let state = json!({"mcpServers": {"notes": {
        "type": "stdio",
        "command": fixture().to_string_lossy(),
        "args": ["--name", "notes", "--tools", "echo", "--marker", p.marker("notes").to_string_lossy()],
    }}});
    let claude_json = home.join(".claude.json");
    fs::write(
        &claude_json,
        serde_json::to_string_pretty(&state).expect("json"),
    )
    .expect("write");
    let env = |command: &mut Command| {
        command
            .env("HOME", &home)
            .env("XDG_STATE_HOME", p.path("state"))
            .env("XDG_CONFIG_HOME", home.join(".config"))
            .env("XDG_RUNTIME_DIR", &runtime)
            .env("DISABLE_AUTOUPDATER", "1")
            .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
            .env_remove("CLAUDE_CONFIG_DIR")
            .env_remove("ANTHROPIC_API_KEY")
            .current_dir(&project)
            .stdin(Stdio::null());
    };

    let mut install = Command::new(cli());
    env(&mut install);
    let out = install
        .args(["install", "claude"])
        .output()
        .expect("install runs");
    assert!(out.status.success(), "{}", output_text(&out));

    // The session's servers live in a daemon of this test's own (its process group is
    // stopped when the guard drops).
    let _daemon = start_daemon_for_client(&p, &runtime);
    let mut list = Command::new(claude());
    env(&mut list);
    list.args(["mcp", "list"]).process_group(0);
    let child = list
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("claude runs");
    // Whatever Claude Code left in its group goes when the guard drops.
    let _group = KillGroup(child.id());
    let out = child.wait_with_output().expect("claude mcp list");
    let said = output_text(&out);
    assert!(
        said.contains("reconcile:") && said.contains("Connected"),
        "Claude Code connects to the gateway:\n{said}"
    );
    assert!(
        !said.contains("notes:"),
        "Claude Code no longer starts the user's server itself:\n{said}"
    );
    assert!(
        p.spawns("notes") >= 1,
        "the gateway started the user's server: {said}"
    );

    let mut uninstall = Command::new(cli());
    env(&mut uninstall);
    let out = uninstall
        .args(["uninstall", "claude"])
        .output()
        .expect("uninstall");
    assert!(out.status.success(), "{}", output_text(&out));
    // Claude Code rewrote its state file while it ran (start time, ids), so uninstall takes
    // out only what install added; the byte-identical round trip without a client run in
    // between is install.rs's.
    let left: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(&claude_json).expect("read")).expect("json");
    assert!(left["mcpServers"].get("reconcile").is_none(), "{left}");
    assert_eq!(left["mcpServers"]["notes"], state["mcpServers"]["notes"]);
    assert!(!home.join(".claude/settings.json").exists());
}
