//! Language servers reconciled live by a real `watch` (SPEC §14), against the real
//! `vscode-json-language-server` (npm `vscode-langservers-extracted`, installed by
//! `scripts/setup.sh`): a settings edit is pushed to the same process, a seed edit restarts
//! it, a removed entry stops it, a project entry waits for its approval — and an edit of an
//! approved one waits for approval again while the approved config keeps running — a broken
//! `.lsp.json` keeps what runs, and a server that cannot start is retried with backoff.

use crate::common;

use std::path::PathBuf;

use common::*;
use serde_json::{json, Value};

/// The JSON language server from the repository's `node_modules`.
fn json_server() -> PathBuf {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../node_modules/.bin/vscode-json-language-server");
    assert!(
        path.exists(),
        "{} is missing: run `bash scripts/setup.sh` (it installs the pinned language servers)",
        path.display()
    );
    path
}

fn json_entry(settings: Value) -> Value {
    json!({
        "command": json_server().to_string_lossy(),
        "args": ["--stdio"],
        "extensionToLanguage": {".json": "json"},
        "settings": settings,
    })
}

fn lsp(status: &[Value], name: &str) -> Value {
    status
        .iter()
        .find(|s| s["kind"] == "lsp" && s["name"] == name)
        .cloned()
        .unwrap_or_default()
}

fn connected(status: &[Value], name: &str) -> bool {
    lsp(status, name)["state"] == "connected"
}

fn pid(status: &[Value], name: &str) -> u64 {
    lsp(status, name)["pid"].as_u64().unwrap_or(0)
}

#[test]
fn a_settings_edit_is_pushed_to_the_same_process_and_a_seed_edit_restarts_it() {
    let p = Project::new();
    let validate = |on: bool| json!({"json": {"validate": {"enable": on}}});
    p.write(&p.user_lsp(), &json!({"json": json_entry(validate(true))}));
    let watch = p.watch();
    let s = p.wait_for("the JSON server up", |s| connected(s, "json"));
    let first = pid(&s, "json");
    let entry = lsp(&s, "json");
    assert!(alive(first), "{entry:#}");
    assert_eq!(
        entry["settingsPushes"], 1,
        "pushed once after start: {entry:#}"
    );
    assert_eq!(entry["extensions"], json!([".json"]));
    assert_eq!(
        entry["approval"],
        Value::Null,
        "a user entry needs no approval"
    );

    // Live field: the same process gets the full new settings.
    p.write(&p.user_lsp(), &json!({"json": json_entry(validate(false))}));
    let s = p.wait_for("the settings pushed", |s| {
        lsp(s, "json")["settingsPushes"] == 2
    });
    assert_eq!(pid(&s, "json"), first, "no restart for a settings edit");
    watch.wait_output("the reconfigure line", |o| {
        o.contains("⟳ reconfigure json (settings changed)")
    });

    // Seed field: a new process; the old one is gone.
    let mut entry = json_entry(validate(false));
    entry["env"] = json!({"MCP_RECONCILE_TEST": "1"});
    p.write(&p.user_lsp(), &json!({"json": entry}));
    let s = p.wait_for("a new process", |s| {
        connected(s, "json") && pid(s, "json") != first && pid(s, "json") != 0
    });
    let second = pid(&s, "json");
    assert_eq!(
        lsp(&s, "json")["settingsPushes"],
        1,
        "a new process: {s:#?}"
    );
    watch.wait_output("the restart line", |o| {
        o.contains("~ restart json (env changed)")
    });
    wait_until(&format!("process {first} to exit"), || !alive(first));

    // The same program under another path is another `command`: a restart too.
    let real = std::fs::canonicalize(json_server()).expect("the server's real path");
    entry["command"] = json!(real.to_string_lossy());
    p.write(&p.user_lsp(), &json!({"json": entry}));
    let s = p.wait_for("a third process", |s| {
        connected(s, "json") && pid(s, "json") != second && pid(s, "json") != 0
    });
    watch.wait_output("the command restart line", |o| {
        o.contains("~ restart json (command changed)")
    });
    wait_until(&format!("process {second} to exit"), || !alive(second));
    let second = pid(&s, "json");

    // Removed: stopped (shutdown, exit), no process left.
    p.write(&p.user_lsp(), &json!({}));
    p.wait_for("the entry gone", |s| lsp(s, "json").is_null());
    wait_until(&format!("process {second} to exit"), || !alive(second));
    watch.stop();
}

#[test]
fn a_project_language_server_runs_only_as_approved_and_an_edit_waits_for_approval() {
    let p = Project::new();
    let validate = |on: bool| json!({"json": {"validate": {"enable": on}}});
    p.write(&p.lsp_json(), &json!({"proj": json_entry(validate(true))}));
    let watch = p.watch();
    let s = p.wait_for("the project entry pending", |s| {
        lsp(s, "proj")["reason"] == "pending_approval"
    });
    let entry = lsp(&s, "proj");
    assert_eq!(entry["state"], "skipped", "{entry:#}");
    assert_eq!(entry["approval"], "pending");
    assert_eq!(entry["spawns"], 0, "never spawned before approval");
    watch.wait_output("the approval hint", |o| {
        o.contains("language server \"proj\"") && o.contains("approve --lsp proj --hash")
    });
    // `approve` without --lsp points to it.
    let out = p.run(&["approve", "proj"]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("--lsp"));

    let out = p.run(&["approve", "--lsp", "proj"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s = p.wait_for("approved and running", |s| connected(s, "proj"));
    let first = pid(&s, "proj");
    assert_eq!(lsp(&s, "proj")["approval"], "approved");

    // An edit of its settings is not applied before it is approved: the approved config
    // keeps running untouched.
    p.write(&p.lsp_json(), &json!({"proj": json_entry(validate(false))}));
    let s = p.wait_for("the edit pending", |s| {
        lsp(s, "proj")["approval"] == "pending"
    });
    let entry = lsp(&s, "proj");
    assert_eq!(entry["state"], "connected", "{entry:#}");
    assert_eq!(entry["reason"], "pending_approval");
    assert_eq!(entry["settingsPushes"], 1, "nothing pushed before approval");
    assert_eq!(pid(&s, "proj"), first);

    let out = p.run(&["approve", "--lsp", "proj"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let s = p.wait_for("the edit applied", |s| {
        lsp(s, "proj")["settingsPushes"] == 2
    });
    assert_eq!(pid(&s, "proj"), first, "applied live, no restart");

    // A broken .lsp.json keeps what runs: the pass that read it stops nothing.
    let before = watch.passes();
    let errors = |o: &str| {
        o.lines()
            .filter(|l| l.starts_with("! ") && l.contains(".lsp.json"))
            .count()
    };
    let errors_before = errors(&watch.output());
    std::fs::write(p.lsp_json(), "{ \"proj\": ").expect("write");
    watch.wait_pass(before, ".lsp.json");
    assert_eq!(
        errors(&watch.output()),
        errors_before + 1,
        "the pass says the file is broken: {}",
        watch.output()
    );
    let s = p.status();
    assert_eq!(pid(&s, "proj"), first, "still running: {s:#?}");
    assert!(connected(&s, "proj"));
    watch.stop();
    wait_until(&format!("process {first} to exit"), || !alive(first));
}

#[test]
fn a_language_server_that_cannot_start_is_retried_with_backoff() {
    let p = Project::new();
    p.write(
        &p.user_lsp(),
        &json!({"broken": {"command": "/bin/sh", "args": ["-c", "echo no such server >&2; exit 3"]}}),
    );
    let watch = p.watch();
    let s = p.wait_for("failed and backing off", |s| {
        lsp(s, "broken")["reason"] == "backing_off"
    });
    let entry = lsp(&s, "broken");
    assert_eq!(entry["state"], "failed", "{entry:#}");
    assert!(entry["retryInMs"].as_u64().is_some(), "{entry:#}");
    assert!(
        entry["lastError"]
            .as_str()
            .unwrap_or("")
            .contains("no such server"),
        "the stderr tail says why: {entry:#}"
    );
    p.wait_for("a retry", |s| {
        lsp(s, "broken")["spawns"].as_u64() >= Some(2)
    });
    watch.stop();
}
