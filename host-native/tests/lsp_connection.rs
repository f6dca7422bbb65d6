//! `lsp::connection` against real language servers (SPEC §14.4): vscode-json-language-server
//! and yaml-language-server from the root `node_modules`, pylsp from `.venv-test/`, all
//! installed by `bash scripts/setup.sh`. A missing server fails the test with that advice.
//!
//! What each server needs to show a settings change (read from their sources):
//! * the JSON server validates only while the pushed `json.validate.enable` is true (absent
//!   reads as false), and pushes diagnostics only to a client that does not declare pull
//!   diagnostics; on a push it re-validates open documents after a 500 ms debounce;
//! * the YAML server ignores the pushed value and pulls `yaml`, `http`, `[yaml]`, `editor` with
//!   `workspace/configuration` on every `didChangeConfiguration`; `yaml.schemaStore.enable:
//!   false` keeps it off the network;
//! * pylsp reads `pylsp.plugins.*` from the push and re-lints open documents.

use crate::common;

use std::path::Path;
use std::time::Duration;

use common::{installed, KillGroup};

use lsp_types::{Diagnostic, Url};
use mcp_reconcile::lsp::connection::{LspConnection, LspEvent, LspStart};
use mcp_reconcile_kernel::json::{self, Object, Value};
use serde_json::json;
use tokio::sync::mpsc;

/// Bound on any diagnostics wait (generous: CI is noisy; servers debounce 0.5 s).
const WAIT: Duration = Duration::from_secs(20);

struct Started {
    connection: LspConnection,
    events: mpsc::UnboundedReceiver<LspEvent>,
    guard: Option<KillGroup>,
}

fn entry(value: serde_json::Value) -> Object {
    match json::parse(&value.to_string()).expect("valid json") {
        Value::Object(object) => object,
        other => panic!("expected an object, got {other:?}"),
    }
}

async fn start(name: &str, mut entry_json: serde_json::Value, project: &Path) -> Started {
    // Node and Python start slowly on a loaded CI machine; the default is 10 s.
    if entry_json.get("startupTimeout").is_none() {
        entry_json["startupTimeout"] = json!(60_000);
    }
    let start = LspStart::from_entry(&entry(entry_json), project).expect("a valid entry");
    let (tx, events) = mpsc::unbounded_channel();
    let connection = LspConnection::start(name, start, 7, tx)
        .await
        .unwrap_or_else(|e| panic!("{name} did not start: {e}"));
    let guard = connection.pid().map(KillGroup);
    Started {
        connection,
        events,
        guard,
    }
}

/// Stops the server and checks that its process and group are gone.
async fn stop_and_check(started: Started) {
    let Started {
        connection,
        mut events,
        guard,
    } = started;
    let pid = connection.pid().expect("a stdio server has a pid");
    connection.stop().await;
    assert!(
        gone(pid).await,
        "process group {pid} still exists after stop"
    );
    // Stopped: nothing for the guard to kill (its group id may be reused from now on).
    if let Some(guard) = guard {
        guard.disarm();
    }
    assert!(
        events.try_recv().is_err(),
        "a requested stop is not reported as a crash"
    );
}

/// Whether the group led by `pid` has no live process left (waits briefly for the kill to land;
/// a zombie waiting for its reaper counts as gone).
async fn gone(pid: u32) -> bool {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(5);
    loop {
        if live_members(pid).is_empty() {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The processes of group `pgid` that are not zombies, from `/proc/*/stat`.
fn live_members(pgid: u32) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
                return false;
            };
            // `pid (comm) state ppid pgrp ...`; comm may contain spaces and parentheses.
            let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
            let fields: Vec<&str> = after.split_whitespace().collect();
            fields.first() != Some(&"Z") && fields.get(2) == Some(&pgid.to_string().as_str())
        })
        .collect()
}

async fn diagnostics(started: &Started, path: &Path, language: &str) -> Vec<Diagnostic> {
    started
        .connection
        .diagnostics(path, language, WAIT)
        .await
        .unwrap_or_else(|e| panic!("diagnostics of {}: {e}", path.display()))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn json_server_validation_follows_pushed_settings_without_a_restart() {
    let server = installed("node_modules/.bin/vscode-json-language-server");
    let project = tempfile::tempdir().expect("temp dir");
    // Characters servers may encode differently in the URI they publish.
    let file = project.path().join("sub dir/broken @file+é.json");
    std::fs::create_dir_all(file.parent().expect("parent")).expect("mkdir");
    std::fs::write(&file, "{\"a\": 1,, \"b\": }\n").expect("write");

    let started = start(
        "json",
        json!({
            "command": server,
            "args": ["--stdio"],
            "settings": {"json": {"validate": {"enable": true}}},
        }),
        project.path(),
    )
    .await;
    let pid = started.connection.pid();
    assert_eq!(started.connection.settings_pushes(), 1);

    let before = diagnostics(&started, &file, "json").await;
    assert!(!before.is_empty(), "a syntax error is reported: {before:?}");

    started
        .connection
        .reconfigure(json!({"json": {"validate": {"enable": false}}}))
        .expect("reconfigure");
    let after = diagnostics(&started, &file, "json").await;
    assert!(after.is_empty(), "validation is off: {after:?}");
    assert_eq!(started.connection.pid(), pid, "the same process");
    assert_eq!(started.connection.settings_pushes(), 2);

    // A fixed file on disk is re-sent and re-validated once validation is back on.
    started
        .connection
        .reconfigure(json!({"json": {"validate": {"enable": true}}}))
        .expect("reconfigure");
    std::fs::write(&file, "{\"a\": 1}\n").expect("write");
    let fixed = diagnostics(&started, &file, "json").await;
    assert!(fixed.is_empty(), "the fixed file is clean: {fixed:?}");
    std::fs::write(&file, "{\"a\": }\n").expect("write");
    let broken = diagnostics(&started, &file, "json").await;
    assert!(!broken.is_empty(), "the edit on disk is seen: {broken:?}");

    stop_and_check(started).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn yaml_server_pulls_its_settings() {
    let server = installed("node_modules/.bin/yaml-language-server");
    let project = tempfile::tempdir().expect("temp dir");
    let file = project.path().join("broken.yaml");
    std::fs::write(&file, "key: [unclosed\nother: : :\n").expect("write");

    let started = start(
        "yaml",
        json!({
            "command": server,
            "args": ["--stdio"],
            "settings": {"yaml": {"schemaStore": {"enable": false}}},
        }),
        project.path(),
    )
    .await;
    let before = diagnostics(&started, &file, "yaml").await;
    assert!(!before.is_empty(), "a syntax error is reported: {before:?}");

    started
        .connection
        .reconfigure(json!({"yaml": {"validate": false, "schemaStore": {"enable": false}}}))
        .expect("reconfigure");
    let after = diagnostics(&started, &file, "yaml").await;
    assert!(after.is_empty(), "validation is off: {after:?}");
    assert_eq!(started.connection.settings_pushes(), 2);

    stop_and_check(started).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn pylsp_drops_pyflakes_when_the_plugin_is_disabled() {
    let server = installed(".venv-test/bin/pylsp");
    let project = tempfile::tempdir().expect("temp dir");
    let file = project.path().join("unused.py");
    std::fs::write(&file, "import os\n").expect("write");

    let started = start(
        "python",
        json!({"command": server, "settings": {"pylsp": {"plugins": {"pyflakes": {"enabled": true}}}}}),
        project.path(),
    )
    .await;
    let pyflakes = |found: &[Diagnostic]| {
        found
            .iter()
            .filter(|d| d.source.as_deref() == Some("pyflakes"))
            .count()
    };
    let before = diagnostics(&started, &file, "python").await;
    assert_eq!(pyflakes(&before), 1, "`import os` is unused: {before:?}");

    started
        .connection
        .reconfigure(json!({"pylsp": {"plugins": {"pyflakes": {"enabled": false}}}}))
        .expect("reconfigure");
    let after = diagnostics(&started, &file, "python").await;
    assert_eq!(pyflakes(&after), 0, "pyflakes is off: {after:?}");

    stop_and_check(started).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_dies_is_reported_with_its_generation() {
    let server = installed("node_modules/.bin/vscode-json-language-server");
    let project = tempfile::tempdir().expect("temp dir");
    let mut started = start(
        "json",
        json!({"command": server, "args": ["--stdio"]}),
        project.path(),
    )
    .await;
    let pid = started.connection.pid().expect("pid");
    started
        .guard
        .as_ref()
        .expect("a stdio server's group")
        .kill();
    let event = tokio::time::timeout(WAIT, started.events.recv())
        .await
        .expect("reported in time")
        .expect("an event");
    let LspEvent::Closed { generation, error } = event;
    assert_eq!(generation, 7);
    assert!(
        error.starts_with("language server `json` exited (signal: 9 (SIGKILL))"),
        "{error}"
    );
    let file = project.path().join("a.json");
    std::fs::write(&file, "{}").expect("write");
    let late = started
        .connection
        .diagnostics(&file, "json", WAIT)
        .await
        .expect_err("a dead server answers nothing");
    assert!(late.contains("`json`"), "{late}");
    assert!(gone(pid).await);
    started.connection.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_reports_the_exit_status_and_the_redacted_stderr_tail() {
    let project = tempfile::tempdir().expect("temp dir");
    let mut entry_json = edge_server("crash");
    entry_json["env"] = json!({"TOKEN": "sk-live-secret-value"});
    let mut started = start("crashy", entry_json, project.path()).await;
    let event = tokio::time::timeout(WAIT, started.events.recv())
        .await
        .expect("reported in time")
        .expect("an event");
    let LspEvent::Closed { generation, error } = event;
    assert_eq!(generation, 7);
    assert!(
        error.starts_with("language server `crashy` exited (exit status: 3)"),
        "{error}"
    );
    assert!(error.contains("boom: cannot use token ***"), "{error}");
    assert!(!error.contains("sk-live-secret-value"), "{error}");
    let pid = started.connection.pid().expect("pid");
    assert!(gone(pid).await);
    started.connection.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_missing_program_and_a_silent_one_fail_to_start_and_leave_nothing() {
    let project = tempfile::tempdir().expect("temp dir");
    let (tx, _events) = mpsc::unbounded_channel();
    let missing = LspStart::from_entry(
        &entry(json!({"command": "/nonexistent/language-server"})),
        project.path(),
    )
    .expect("entry");
    let error = LspConnection::start("ghost", missing, 1, tx.clone())
        .await
        .expect_err("no such program");
    assert!(
        error.contains("`ghost`") && error.contains("could not start"),
        "{error}"
    );

    // `sleep` reads nothing and never answers `initialize`.
    // A length no other test process uses, to find this one in /proc afterwards.
    let nap = format!("{}", 1_000_000 + std::process::id());
    let silent = LspStart::from_entry(
        &entry(
            json!({"command": "sleep", "args": [nap.clone()], "startupTimeout": 300,
                      "env": {"TOKEN": "hunter2-secret"}}),
        ),
        project.path(),
    )
    .expect("entry");
    let began = std::time::Instant::now();
    let error = LspConnection::start("mute", silent, 1, tx)
        .await
        .expect_err("no answer");
    assert!(error.contains("within 300 ms"), "{error}");
    assert!(!error.contains("hunter2-secret"));
    assert!(began.elapsed() < Duration::from_secs(10), "bounded");
    let left: Vec<String> = std::fs::read_dir("/proc")
        .expect("/proc")
        .filter_map(|entry| std::fs::read(entry.ok()?.path().join("cmdline")).ok())
        .filter(|cmdline| *cmdline == format!("sleep\0{nap}\0").into_bytes())
        .map(|cmdline| String::from_utf8_lossy(&cmdline).into_owned())
        .collect();
    assert!(
        left.is_empty(),
        "the silent server was not stopped: {left:?}"
    );
}

#[test]
fn entries_are_read_with_defaults_and_checked() {
    let root = Path::new("/project");
    let start = LspStart::from_entry(&entry(json!({"command": "srv"})), root).expect("minimal");
    assert_eq!(start.workspace_folder, root);
    assert_eq!(start.startup_timeout, Duration::from_millis(10_000));
    assert_eq!(start.shutdown_timeout, Duration::from_millis(5_000));
    assert_eq!(start.settings, json!({}));
    assert_eq!(start.initialization_options, None);

    let full = LspStart::from_entry(
        &entry(json!({
            "command": "srv", "args": ["--stdio"], "env": {"A": "1"},
            "workspaceFolder": "sub/./dir/..", "initializationOptions": {"n": 1},
            "settings": {"x": {"y": 2}}, "startupTimeout": 250, "shutdownTimeout": 0,
        })),
        root,
    )
    .expect("full");
    assert_eq!(full.args, ["--stdio"]);
    assert_eq!(full.env, [("A".to_owned(), "1".to_owned())]);
    assert_eq!(full.workspace_folder, Path::new("/project/sub"));
    assert_eq!(full.initialization_options, Some(json!({"n": 1})));
    assert_eq!(full.settings, json!({"x": {"y": 2}}));
    assert_eq!(full.startup_timeout, Duration::from_millis(250));
    assert_eq!(full.shutdown_timeout, Duration::ZERO);

    let inside = LspStart::from_entry(
        &entry(json!({"command": "srv", "workspaceFolder": "/project/a"})),
        root,
    )
    .expect("absolute inside");
    assert_eq!(inside.workspace_folder, Path::new("/project/a"));

    for (bad, field) in [
        (
            json!({"command": "srv", "workspaceFolder": "../other"}),
            "workspaceFolder",
        ),
        (
            json!({"command": "srv", "workspaceFolder": "/elsewhere"}),
            "workspaceFolder",
        ),
        (
            json!({"command": "srv", "workspaceFolder": "/projectx"}),
            "workspaceFolder",
        ),
        (json!({"args": []}), "command"),
        (json!({"command": "srv", "args": [1]}), "args"),
        (json!({"command": "srv", "settings": []}), "settings"),
        (
            json!({"command": "srv", "startupTimeout": "1s"}),
            "startupTimeout",
        ),
        (
            json!({"transport": "tcp", "socket": {"host": "h", "port": 1}}),
            "transport",
        ),
        (
            json!({"command": "srv", "transport": "socket", "socket": "/s"}),
            "transport",
        ),
    ] {
        let error = LspStart::from_entry(&entry(bad.clone()), root).expect_err("invalid");
        assert!(error.contains(&format!("`{field}`")), "{bad}: {error}");
    }
    let tcp = LspStart::from_entry(&entry(json!({"transport": "tcp"})), root).expect_err("tcp");
    assert!(tcp.contains("unsupported_transport"), "{tcp}");
}

/// The scripted edge server, run with the venv's Python.
fn edge_server(mode: &str) -> serde_json::Value {
    let python = installed(".venv-test/bin/python");
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/lsp_edge_server.py");
    json!({"command": python, "args": [script, mode]})
}

/// The answers the edge server got for its latest round of questions, as it reports them.
async fn edge_report(started: &Started, file: &Path) -> serde_json::Value {
    let found = diagnostics(started, file, "plaintext").await;
    assert_eq!(found.len(), 1, "{found:?}");
    serde_json::from_str(&found[0].message).expect("the report is JSON")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn server_requests_are_answered_and_unknown_notifications_ignored() {
    let project = tempfile::tempdir().expect("temp dir");
    let file = project.path().join("doc.txt");
    std::fs::write(&file, "text").expect("write");
    let mut entry_json = edge_server("normal");
    entry_json["settings"] = json!({"a": {"b": [1, 2]}, "other": true});
    entry_json["initializationOptions"] = json!({"provideFormatter": true, "n": 1});
    let started = start("edge", entry_json, project.path()).await;

    let report = edge_report(&started, &file).await;
    assert_eq!(report["pushes"], 1);
    assert_eq!(
        report["settings"],
        json!({"a": {"b": [1, 2]}, "other": true})
    );
    let answers = &report["answers"];
    let whole = json!({"a": {"b": [1, 2]}, "other": true});
    assert_eq!(
        answers[0]["result"],
        json!([[1, 2], whole, whole, null, null]),
        "dotted sections; empty or absent = everything; missing = null"
    );
    for accepted in 1..=3 {
        assert_eq!(answers[accepted], json!({"result": null}), "{answers}");
    }
    let folder = Url::from_file_path(project.path()).expect("url");
    assert_eq!(answers[4]["result"][0]["uri"], folder.as_str(), "{answers}");
    assert_eq!(
        answers[5]["error"]["code"], -32601,
        "MethodNotFound: {answers}"
    );

    // A push: the next pull sees the new settings whole, and the document is re-sent.
    started
        .connection
        .reconfigure(json!({"a": {"b": "new"}}))
        .expect("reconfigure");
    let report = edge_report(&started, &file).await;
    assert_eq!(report["pushes"], 2);
    assert_eq!(report["settings"], json!({"a": {"b": "new"}}));
    assert_eq!(
        report["answers"][0]["result"],
        json!(["new", {"a": {"b": "new"}}, {"a": {"b": "new"}}, null, null])
    );
    assert_eq!(started.connection.settings_pushes(), 2);

    stop_and_check(started).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_will_not_die_is_killed_with_its_group_in_bounded_time() {
    let project = tempfile::tempdir().expect("temp dir");
    let mut entry_json = edge_server("stubborn");
    entry_json["shutdownTimeout"] = json!(300);
    let started = start("stubborn", entry_json, project.path()).await;
    let pid = started.connection.pid().expect("pid");
    // The `sleep` grandchild shares the group.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while live_members(pid).len() < 2 && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(live_members(pid).len() >= 2, "{:?}", live_members(pid));

    let began = std::time::Instant::now();
    stop_and_check(started).await;
    // shutdown 0.3 s + stdin grace 1 s + SIGTERM grace 1 s + SIGKILL, with room for a slow CI.
    assert!(
        began.elapsed() < Duration::from_secs(10),
        "{:?}",
        began.elapsed()
    );
}
