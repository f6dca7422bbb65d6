//! `serve` never adopts itself: an entry that runs this binary's `serve`, in any file the
//! session reads, is skipped with a message, never started — through the real binary.

use crate::common;

use std::path::Path;

use common::*;
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_skips_its_own_entry_in_the_settings_it_reads() {
    let p = Project::new();
    p.write_settings(json!({"mcpServers": {
        "notes": p.server("notes", "echo"),
        // What `qwen mcp add reconcile mcp-reconcile serve --layout qwen` puts in the very file
        // `--layout qwen` reads, here by absolute path.
        // (`--no-daemon` and its own HOME keep a regression inside this test.)
        "reconcile": {"command": cli().to_string_lossy(),
                      "args": ["serve", "--no-daemon", "--layout", "qwen"],
                      "env": {"HOME": p.path("home").to_string_lossy()}},
    }}));
    let served = Served::start(&p).await;
    wait_until_async("notes connects", || p.spawns("notes") == 1).await;
    let tools = served.tool_names().await;
    assert!(tools.contains(&"mcp__notes__echo".to_owned()), "{tools:?}");
    assert!(
        tools.iter().all(|t| !t.starts_with("mcp__reconcile__")),
        "{tools:?}"
    );
    let log = served.log();
    assert!(
        log.contains(
            "server `reconcile` runs this gateway itself (mcp-reconcile serve) and is skipped"
        ) && log.contains(&p.user_settings().display().to_string()),
        "the skip is said, naming the file:\n{log}"
    );
    assert_eq!(
        nested_serves(served.pid()),
        Vec::<u32>::new(),
        "no nested serve: {log}"
    );
    assert!(
        p.status().iter().all(|s| s["name"] != "reconcile"),
        "the entry is not a server of the session"
    );
}

/// After an upgrade the client's installed entry names another file than the running binary
/// (a new inode at the same path, or another path); a session still knows it as the gateway
/// by its install mark, skips it without a word, and never starts it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_installed_entry_naming_another_binary_is_still_the_gateway() {
    let p = Project::new();
    // The "new version": another file that would run a nested serve if it were started.
    let upgraded = p.path("new-install/mcp-reconcile");
    std::fs::create_dir_all(upgraded.parent().expect("dir")).expect("mkdir");
    std::fs::write(
        &upgraded,
        format!("#!/bin/sh\nexec '{}' \"$@\"\n", cli().display()),
    )
    .expect("write");
    std::fs::set_permissions(
        &upgraded,
        std::os::unix::fs::PermissionsExt::from_mode(0o755),
    )
    .expect("chmod");
    p.write_settings(json!({"mcpServers": {
        "notes": p.server("notes", "echo"),
        "reconcile": {"command": upgraded.to_string_lossy(),
                      "args": ["serve", "--no-daemon", "--layout", "qwen"],
                      "env": {"MCP_RECONCILE_INSTALLED": "qwen",
                              "HOME": p.path("home").to_string_lossy()}},
    }}));
    let served = Served::start(&p).await;
    wait_until_async("notes connects", || p.spawns("notes") == 1).await;
    let tools = served.tool_names().await;
    assert!(
        tools.iter().all(|t| !t.starts_with("mcp__reconcile__")),
        "{tools:?}"
    );
    let log = served.log();
    assert!(
        !log.contains("runs this gateway itself"),
        "the installed entry is skipped without a word:\n{log}"
    );
    assert_eq!(nested_serves(served.pid()), Vec::<u32>::new(), "{log}");
    assert!(
        p.status().iter().all(|s| s["name"] != "reconcile"),
        "the entry is not a server of the session"
    );
}

#[test]
fn a_project_entry_found_through_path_is_skipped_and_never_approved() {
    let p = Project::new();
    let bin_dir = cli()
        .parent()
        .map(Path::to_path_buf)
        .expect("the binary's directory");
    let link_dir = p.path("bin");
    std::fs::create_dir_all(&link_dir).expect("bin dir");
    // Another name for the same file: the identity is the file, not its path.
    std::os::unix::fs::symlink(cli(), link_dir.join("gateway")).expect("link");
    p.write(
        &p.mcp_json(),
        &json!({"mcpServers": {
            "reconcile": {"command": "mcp-reconcile", "args": ["serve"],
                          "env": {"PATH": bin_dir.to_string_lossy()}},
            "linked": {"command": "gateway", "args": ["serve", "--quiet-ms", "5"],
                       "env": {"PATH": link_dir.to_string_lossy()}},
            "proj": p.server("proj", "echo"),
        }}),
    );
    for name in ["reconcile", "linked"] {
        let out = p.run(&["approve", name]);
        assert!(
            !out.status.success(),
            "{name} cannot be approved: {}",
            output_text(&out)
        );
    }
    // `approve --all` approves what is there to approve, and these are not.
    let out = p.run(&["approve", "--all"]);
    assert!(out.status.success(), "{}", output_text(&out));
    let approvals = std::fs::read_to_string(p.path("approvals.json")).unwrap_or_default();
    assert!(
        approvals.contains("proj")
            && !approvals.contains("reconcile")
            && !approvals.contains("linked"),
        "{approvals}"
    );
    let out = p.run(&["status"]);
    let text = output_text(&out);
    assert!(
        text.contains("server `reconcile` runs this gateway itself")
            && text.contains("server `linked` runs this gateway itself"),
        "status says why both are skipped:\n{text}"
    );
}
