//! End-to-end: what `watch` shows a person and a tool (issue 12, item 4) — a real
//! `mcp-reconcile watch` on a temp project with real fixture servers and real file edits:
//! the question answered from a pipe while the plan keeps printing, field-by-field changes
//! with secrets hidden, the tool delta, one line per retry, and `--events json`.

use crate::common;

use std::io::Write as _;
use std::process::Stdio;

use common::*;
use serde_json::{json, Value};

/// The fixture entry of [`Project::server`] with an `env` block.
fn server_with_env(p: &Project, name: &str, tools: &str, token: &str) -> Value {
    let mut server = p.server(name, tools);
    server["env"] = json!({"API_TOKEN": token});
    server
}

#[test]
fn a_reconnect_says_what_changed_field_by_field_and_the_tool_delta() {
    let p = Project::new();
    p.write_settings(json!({"mcpServers": {
        "notes": server_with_env(&p, "notes", "echo,add", "s3cr3t-first"),
        "other": p.server("other", "echo"),
    }}));
    let watch = p.watch();
    p.wait_for("both connected", |s| all_connected(s, &["notes", "other"]));
    p.write_settings(json!({"mcpServers": {
        "notes": server_with_env(&p, "notes", "echo,add,sleep", "s3cr3t-second"),
        "other": p.server("other", "echo"),
    }}));
    watch.wait_output("the reconnect line", |o| o.contains("~ reconnect notes:"));
    let output = watch.stop();
    let line = output
        .lines()
        .find(|l| l.contains("~ reconnect notes:"))
        .unwrap_or_default();
    assert!(
        line.contains(r#"args[3] "echo,add" → "echo,add,sleep""#),
        "{output}"
    );
    assert!(
        line.contains("env.API_TOKEN changed (value hidden)"),
        "{output}"
    );
    assert!(line.contains("tools 2 → 3: +sleep"), "{output}");
    assert!(!output.contains("s3cr3t"), "a secret was printed: {output}");
}

#[test]
fn a_failing_server_retries_in_one_line_each() {
    let p = Project::new();
    let mut bad = p.server("bad", "echo");
    if let Some(args) = bad["args"].as_array_mut() {
        args.extend([
            json!("--exit-immediately"),
            json!("--stderr-lines"),
            json!("2"),
        ]);
    }
    p.write_settings(json!({"mcpServers": {"ok": p.server("ok", "echo"), "bad": bad}}));
    let watch = p.watch();
    watch.wait_output("three retries", |o| o.contains("↻ bad (attempt 4)"));
    let output = watch.stop();
    assert_eq!(
        output.matches("fixture: stderr line 1 of 2").count(),
        1,
        "the stderr tail is printed once, not per retry: {output}"
    );
    let lines: Vec<&str> = output.lines().collect();
    for (i, line) in lines.iter().enumerate() {
        if line.starts_with("reconcile #") && line.contains("(retry)") {
            assert!(
                line.contains("↻ bad (attempt ") && line.contains("failed again"),
                "a retry is one line that says how it went: {line}\n{output}"
            );
            let next = lines.get(i + 1).copied().unwrap_or("");
            assert!(
                !next.contains("keep ok") && !next.contains("skip"),
                "a retry does not print the whole plan: {output}"
            );
        }
    }
}

/// stdin is a pipe: the question is answered with a line, and the plan of the servers that
/// do not wait is printed while it waits.
#[test]
fn the_question_is_answered_from_a_pipe_while_the_plan_prints() {
    let p = Project::new();
    p.write_settings(json!({"mcpServers": {"a": p.server("a", "echo")}}));
    p.write(
        &p.mcp_json(),
        &json!({"mcpServers": {"proj": p.server("proj", "echo")}}),
    );
    let mut watch = p.watch_stdio(&[], Stdio::piped());
    watch.wait_output("the plan printed under the open question", |o| {
        o.split_once(r#"? approve "proj": "#)
            .is_some_and(|(_, after)| after.contains("+ connect a"))
    });
    assert_eq!(p.spawns("proj"), 0, "nothing starts before the answer");
    let mut stdin = watch.child.stdin.take().expect("stdin is piped");
    stdin.write_all(b"a\n").expect("answer");
    stdin.flush().expect("flush");
    watch.wait_output("the decision", |o| o.contains(r#"? "proj": approved"#));
    p.wait_for("proj connected", |s| state_of(s, "proj") == "connected");
    // End of input: a later question is not asked, its approve command is printed.
    drop(stdin);
    p.write(
        &p.mcp_json(),
        &json!({"mcpServers": {"proj": p.server("proj", "echo"), "late": p.server("late", "echo")}}),
    );
    watch.wait_output("the hint after end of input", |o| {
        o.contains(r#"? approve "late": "#) && o.contains(r#""late" needs approval"#)
    });
    assert_eq!(p.spawns("late"), 0);
}

#[test]
fn events_json_is_one_object_per_line_to_the_end() {
    let p = Project::new();
    p.write_settings(json!({"mcpServers": {
        "notes": server_with_env(&p, "notes", "echo,add", "s3cr3t-first"),
    }}));
    let watch = p.watch_stdio(&["--events", "json"], Stdio::null());
    p.wait_for("notes connected", |s| state_of(s, "notes") == "connected");
    p.write_settings(json!({"mcpServers": {
        "notes": server_with_env(&p, "notes", "echo,add,sleep", "s3cr3t-second"),
    }}));
    watch.wait_output("the reconnect event", |o| {
        o.contains(r#""action":"reconnect""#)
    });
    let output = watch.stop();
    assert!(!output.contains("s3cr3t"), "a secret was printed: {output}");
    let events: Vec<Value> = output
        .lines()
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("{e}: {l:?}\n{output}")))
        .collect();
    assert!(events.iter().all(|e| e["event"].is_string()), "{output}");
    let start = events
        .iter()
        .find(|e| e["event"] == "plan")
        .unwrap_or_else(|| panic!("no plan event: {output}"));
    assert_eq!(
        (&start["event"], &start["run"]),
        (&json!("plan"), &json!(1))
    );
    assert_eq!(start["steps"][0]["action"], "connect");
    assert_eq!(start["steps"][0]["tools"]["after"], json!(["echo", "add"]));
    let reconnect = events
        .iter()
        .flat_map(|e| e["steps"].as_array().cloned().unwrap_or_default())
        .find(|s| s["action"] == "reconnect")
        .unwrap_or_default();
    assert_eq!(reconnect["name"], "notes");
    assert_eq!(
        reconnect["changes"],
        json!([
            {"field": "args[3]", "before": "\"echo,add\"", "after": "\"echo,add,sleep\"", "hidden": false},
            {"field": "env.API_TOKEN", "before": null, "after": null, "hidden": true},
        ])
    );
    assert_eq!(
        reconnect["tools"],
        json!({"before": ["echo", "add"], "after": ["echo", "add", "sleep"]})
    );
    assert!(
        events.iter().any(|e| e["event"] == "catalog_changed"),
        "{output}"
    );
    assert_eq!(
        events.last(),
        Some(&json!({"event": "stopped"})),
        "{output}"
    );
}
