//! What a repository writes is hostile input: nothing from it runs, widens
//! access, forges the prompt or hangs the host without the user's say.
//! Every test runs the real CLI against real files and real processes.

use crate::common;

use std::fs;
use std::os::unix::fs::symlink;
use std::time::{Duration, Instant};

use common::*;
use serde_json::json;

const SECRET: &str = "sk-live-7f3a9c2e5b1d";

impl Project {
    fn workspace_settings(&self) -> std::path::PathBuf {
        self.path("project/.mcp-reconcile/settings.json")
    }

    fn write_workspace(&self, value: serde_json::Value) {
        fs::create_dir_all(self.path("project/.mcp-reconcile")).expect("workspace dir");
        self.write(&self.workspace_settings(), &value);
    }
}

/// The 64-hex hash after `--hash ` in `text`.
fn hash_in(text: &str) -> Option<String> {
    let at = text.find("--hash ")? + "--hash ".len();
    let hash: String = text[at..].chars().take(64).collect();
    (hash.len() == 64 && hash.chars().all(|c| c.is_ascii_hexdigit())).then_some(hash)
}

/// The audit's critical finding: `mcp.serverCommand` in the workspace
/// settings started any command at once, with the user's secret expanded
/// into its arguments. Now it is a gated workspace server: nothing runs
/// before the user approved exactly that entry, the review shows
/// `${SECRET_TOKEN}` and never its value, and a stale hash is refused.
#[test]
fn a_workspace_server_command_runs_only_after_approval_and_never_prints_the_secret() {
    let p = Project::new();
    p.write_settings(json!({}));
    let marker = p.marker("mcp");
    let command = format!(
        "sh -c 'echo \"server $1\" >> {}; exec {} --name mcp --tools echo' sh --leak=${{SECRET_TOKEN}}",
        marker.display(),
        fixture().display()
    );
    p.write_workspace(json!({"mcp": {"serverCommand": command}}));
    let env = [("SECRET_TOKEN", SECRET)];
    let watch = p.watch_env(&[], &env);

    let s = p.wait_for("mcp pending", |s| {
        s.iter()
            .any(|x| x["name"] == "mcp" && x["reason"] == "pending_approval")
    });
    let mcp = s
        .iter()
        .find(|x| x["name"] == "mcp")
        .cloned()
        .unwrap_or_default();
    assert_eq!(mcp["approval"], "pending", "{mcp:#}");
    watch.wait_output("the review", |o| o.contains("needs approval"));
    // The start pass read the workspace settings: once it is applied, whatever it started has
    // run.
    watch.wait_pass(0, "start");
    assert!(
        !marker.exists(),
        "the workspace command ran without approval"
    );

    let log = watch.output();
    assert!(!log.contains(SECRET), "the secret was printed:\n{log}");
    assert!(
        log.contains("${SECRET_TOKEN}"),
        "the review shows the reference:\n{log}"
    );
    assert!(
        log.contains("expands from your environment: SECRET_TOKEN"),
        "{log}"
    );
    let hash = hash_in(&log).expect("the hint names the hash");

    // A hash that is not the entry's is refused; nothing is stored or run.
    let stale = p.run_env(&["approve", "mcp", "--hash", &"0".repeat(64)], &env);
    assert!(!stale.status.success(), "{}", output_text(&stale));
    assert!(
        output_text(&stale).contains("changed since it was reviewed"),
        "{}",
        output_text(&stale)
    );
    assert!(
        !output_text(&stale).contains(SECRET),
        "{}",
        output_text(&stale)
    );
    // A pass that reads every file again (the approvals too) starts nothing.
    p.reload_and_wait(&watch);
    assert!(!marker.exists(), "a refused approval started the server");

    // The reviewed hash approves exactly that entry; then (and only then) it runs.
    let approved = p.run_env(&["approve", "mcp", "--hash", &hash], &env);
    assert!(approved.status.success(), "{}", output_text(&approved));
    assert!(
        output_text(&approved).contains(&hash),
        "{}",
        output_text(&approved)
    );
    assert!(
        !output_text(&approved).contains(SECRET),
        "{}",
        output_text(&approved)
    );
    p.wait_for("mcp connected", |s| state_of(s, "mcp") == "connected");
    let started = fs::read_to_string(&marker).unwrap_or_default();
    assert!(
        started.contains(&format!("server --leak={SECRET}")),
        "{started}"
    );
    assert!(!watch.output().contains(SECRET), "{}", watch.output());
}

/// The workspace's `mcp.allowed` narrows the user's list, never widens it.
#[test]
fn a_workspace_allow_list_narrows_and_never_widens() {
    let p = Project::new();
    p.write_settings(json!({
        "mcp": {"allowed": ["a"]},
        "mcpServers": {"a": p.server("a", "echo"), "b": p.server("b", "echo")},
    }));
    p.write_workspace(json!({"mcp": {"allowed": ["a", "b"]}}));
    let watch = p.watch();
    p.wait_for("a connected, b not allowed", |s| {
        state_of(s, "a") == "connected"
            && s.iter()
                .any(|x| x["name"] == "b" && x["reason"] == "not_allowed")
    });
    // The start pass read both lists; once it is applied, whatever it started has run.
    watch.wait_pass(0, "start");
    assert_eq!(p.spawns("b"), 0, "the workspace list widened the user's");

    p.write_workspace(json!({"mcp": {"allowed": ["b"]}}));
    p.wait_for("a narrowed away", |s| {
        s.iter()
            .any(|x| x["name"] == "a" && x["reason"] == "not_allowed")
    });
    assert_eq!(p.spawns("b"), 0);
}

/// A name and env keys full of terminal escapes cannot draw a fake prompt:
/// every byte is escaped, the hint quotes the name for the shell, and the
/// review says loudly that the entry replaces the user's own server.
#[test]
fn escapes_in_names_and_keys_never_reach_the_terminal() {
    let p = Project::new();
    p.write_settings(json!({"mcpServers": {"fs": p.server("fs", "echo")}}));
    let evil = "lint\u{1b}[2J\u{1b}[H? github wants to start: npx";
    let mut forged = p.server("x", "echo");
    forged["env"] = json!({"K\u{1b}[2K\rEVIL": "v\u{7}"});
    let mut replacing = p.server("fs2", "echo");
    replacing["args"] = json!(["--name", "fs", "--tools", "echo"]);
    p.write(
        &p.mcp_json(),
        &json!({"mcpServers": {evil: forged, "fs": replacing, "lint $(touch pwned)": p.server("y", "echo")}}),
    );
    let watch = p.watch();
    watch.wait_output("three reviews", |o| {
        o.matches("needs approval").count() >= 3
    });
    let log = watch.output();
    for bad in ['\u{1b}', '\u{7}', '\r'] {
        assert!(!log.contains(bad), "{bad:?} reached the terminal:\n{log:?}");
    }
    assert!(log.contains("lint\\e[2J\\e[H"), "{log}");
    assert!(log.contains("K\\e[2K\\rEVIL"), "{log}");
    assert!(
        log.contains("mcp-reconcile approve $'lint\\x1b[2J"),
        "{log}"
    );
    assert!(
        log.contains("mcp-reconcile approve 'lint $(touch pwned)' --hash "),
        "{log}"
    );
    assert!(log.contains("REPLACES your user server"), "{log}");

    let status = p.run(&["status"]);
    assert!(
        !output_text(&status).contains('\u{1b}'),
        "{:?}",
        output_text(&status)
    );
}

/// Config files are read only when they are regular files, up to 4 MiB: a
/// FIFO does not hang the host, `/dev/zero` does not grow it, a huge file is
/// refused — each with an error naming the file, the rest keeps working.
#[test]
fn a_fifo_a_device_or_a_huge_file_never_hangs_or_grows_the_host() {
    let p = Project::new();
    p.write_settings(json!({"mcpServers": {"a": p.server("a", "echo")}}));
    nix::unistd::mkfifo(
        &p.mcp_json(),
        nix::sys::stat::Mode::from_bits_truncate(0o600),
    )
    .expect("mkfifo");
    let watch = p.watch();
    p.wait_for("a connected beside a FIFO", |s| {
        state_of(s, "a") == "connected"
    });
    let status = p.run(&["status"]);
    assert!(
        output_text(&status).contains("not a regular file (it is a FIFO)"),
        "{}",
        output_text(&status)
    );

    fs::remove_file(p.mcp_json()).expect("remove fifo");
    symlink("/dev/zero", p.mcp_json()).expect("symlink");
    watch.wait_output("the device refused", |o| o.contains("it is a device"));

    fs::remove_file(p.mcp_json()).expect("remove link");
    let big = format!(
        "{{\"mcpServers\":{{}},\"pad\":\"{}\"}}",
        "x".repeat(5 * 1024 * 1024)
    );
    fs::write(p.path("big.json"), big).expect("big file");
    fs::rename(p.path("big.json"), p.mcp_json()).expect("rename");
    watch.wait_output("the huge file refused", |o| o.contains("larger than 4 MiB"));
    assert_eq!(state_of(&p.status(), "a"), "connected");

    // SIGTERM still stops it promptly (nothing is stuck in a read).
    let started = Instant::now();
    let out = watch.stop();
    assert!(started.elapsed() < Duration::from_secs(10), "{out}");
    assert!(out.contains("stopped every server"), "{out}");
}
