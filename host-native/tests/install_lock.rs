//! `install claude` / `uninstall claude` while Claude Code writes `~/.claude.json` too: install
//! takes Claude Code's own lock (`~/.claude.json.lock`, a directory made with `mkdir`, as
//! `proper-lockfile` makes it) around its read, its change and its rename, so no write of a
//! concurrent writer is lost — neither one from writers that lock the way Claude Code does, nor
//! one from the real `claude mcp add`.

use crate::common;
use crate::install_home;

use std::fs;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use common::*;
use install_home::{read, Home};
use serde_json::{json, Value};

/// Claude Code's lock directory for `file`.
fn lock_dir(file: &Path) -> PathBuf {
    PathBuf::from(format!("{}.lock", file.display()))
}

/// What Claude Code's `saveConfigWithLock` does, for one server: take the lock (`mkdir`,
/// waiting while it is held), re-read the file, add the server, write a temporary file, rename
/// it over the file, release the lock.
fn add_locked(file: &Path, name: &str) {
    let lock = lock_dir(file);
    loop {
        match fs::create_dir(&lock) {
            Ok(()) => break,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(e) => panic!("lock: {e}"),
        }
    }
    let mut value: Value = serde_json::from_str(&read(file)).expect("JSON under the lock");
    value["mcpServers"][name] = json!({
        "type": "stdio", "command": "server", "args": [],
        "env": {"TOKEN": format!("secret-{name}")}
    });
    let tmp = file.with_file_name(format!(".claude.json.{name}.tmp"));
    fs::write(&tmp, serde_json::to_string_pretty(&value).expect("json")).expect("tmp");
    fs::rename(&tmp, file).expect("rename");
    fs::remove_dir(&lock).expect("unlock");
}

/// Sets its flag when dropped — also when an assertion fails — so the churn ends.
struct Stop<'a>(&'a AtomicBool);

impl Drop for Stop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

/// Installs and uninstalls Claude Code again and again until `done`, each run successful.
fn churn(h: &Home, done: &AtomicBool) -> usize {
    let mut runs = 0;
    while !done.load(Ordering::SeqCst) || runs < 4 {
        let verb = if runs % 2 == 0 {
            "install"
        } else {
            "uninstall"
        };
        let (ok, said) = h.run(&[verb, "claude"]);
        assert!(ok, "{verb}: {said}");
        runs += 1;
    }
    runs
}

/// After the race: one more install leaves the gateway and every server, uninstall every
/// server and no gateway.
fn assert_every_server_kept(h: &Home, file: &Path, names: &[String]) {
    for verb in ["install", "uninstall"] {
        let (ok, said) = h.run(&[verb, "claude"]);
        assert!(ok, "{verb}: {said}");
        let value: Value = serde_json::from_str(&read(file)).expect("JSON");
        let lost: Vec<&String> = names
            .iter()
            .filter(|n| value["mcpServers"].get(n.as_str()).is_none())
            .collect();
        assert!(
            lost.is_empty(),
            "after {verb}, these writes were lost: {lost:?}"
        );
        assert_eq!(
            value["mcpServers"].get("reconcile").is_some(),
            verb == "install",
            "{verb}: {value}"
        );
    }
    assert!(!lock_dir(file).exists(), "no lock is left behind");
}

/// Writers that lock `~/.claude.json` as Claude Code does add servers while install and
/// uninstall run over and over: not one of their writes is lost.
#[test]
fn claude_codes_lock_keeps_every_concurrent_write() {
    let h = Home::new();
    let file = h.write(".claude.json", "{\n  \"mcpServers\": {}\n}\n");
    let done = Arc::new(AtomicBool::new(false));
    let names: Vec<String> = (0..3)
        .flat_map(|w| (0..40).map(move |i| format!("w{w}-{i}")))
        .collect();
    let writers: Vec<_> = (0..3)
        .map(|w| {
            let file = file.clone();
            std::thread::spawn(move || {
                for i in 0..40 {
                    add_locked(&file, &format!("w{w}-{i}"));
                    std::thread::sleep(Duration::from_millis(3));
                }
            })
        })
        .collect();
    let churned = std::thread::scope(|s| {
        let churn = s.spawn(|| churn(&h, &done));
        {
            let _stop = Stop(&done);
            for writer in writers {
                writer.join().expect("writer");
            }
        }
        churn.join().expect("churn")
    });
    assert!(churned >= 4);
    assert_every_server_kept(&h, &file, &names);
}

/// Runs `claude mcp add NAME` (with a secret in its env) until Claude Code adds it: while the
/// gateway is installed, Claude Code refuses a server its `allowedMcpServers` does not name, so
/// the add is tried again — as a user would — until it lands after an uninstall.
fn claude_mcp_add(h: &Home, name: &str) {
    let said = h.path(&format!("{name}.out"));
    for _ in 0..200 {
        let mut command = h.command_of(&claude());
        command
            .args(["mcp", "add", "-s", "user", name, "-e"])
            .arg(format!("TOKEN=secret-{name}"))
            .args(["--", "echo", "hi"])
            .env("DISABLE_AUTOUPDATER", "1")
            .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
            .stdout(fs::File::create(&said).expect("out"))
            .stderr(fs::File::options().append(true).open(&said).expect("err"))
            .process_group(0);
        let mut add = Group::new(command.spawn().expect("claude runs"));
        assert!(add.wait_exit(), "claude mcp add exits");
        let out = read(&said);
        if out.contains(&format!("Added stdio MCP server {name} ")) {
            return;
        }
        assert!(out.contains("not allowed"), "claude mcp add {name}: {out}");
    }
    panic!("claude mcp add {name} was refused 200 times");
}

/// Real `claude mcp add` runs (no network: `mcp add` only writes `~/.claude.json`), one after
/// the other, race install and uninstall running over and over: every server Claude Code said
/// it added, with its secret, is there at the end. (One add at a time: concurrent `claude mcp
/// add` runs lose each other's writes without any help — a run that finds the lock taken
/// saves without it.)
#[test]
fn real_claude_mcp_add_runs_racing_install_are_never_lost() {
    let h = Home::new();
    let file = h.write(".claude.json", "{\n  \"mcpServers\": {}\n}\n");
    let names: Vec<String> = (0..6).map(|i| format!("added{i}")).collect();
    let done = AtomicBool::new(false);
    std::thread::scope(|s| {
        s.spawn(|| churn(&h, &done));
        let _stop = Stop(&done);
        for name in &names {
            claude_mcp_add(&h, name);
        }
    });
    assert_every_server_kept(&h, &file, &names);
    let value: Value = serde_json::from_str(&read(&file)).expect("JSON");
    for name in &names {
        assert_eq!(
            value["mcpServers"][name]["env"]["TOKEN"],
            format!("secret-{name}")
        );
    }
}
