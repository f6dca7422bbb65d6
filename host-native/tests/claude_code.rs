//! The real Claude Code (npm `@anthropic-ai/claude-code`, pinned in the root package.json)
//! in front of an installed gateway: `claude mcp list` starts and health-checks every server
//! Claude Code would start — after `mcp-reconcile install claude` only `reconcile`, which
//! connects, while the user's own server runs behind it; and `claude -p` (headless) offers a
//! server the user adds to `~/.claude.json` during the session to the model.
//!
//! No account and no network: `mcp list` never talks to a model, and `-p` talks to a fake
//! Anthropic Messages API on 127.0.0.1 (`ANTHROPIC_BASE_URL`) that answers from a script and
//! records every request.

use crate::common;

use std::fs;
use std::os::unix::process::CommandExt as _;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex, PoisonError};

use axum::response::Response;
use common::fake_model::{json_reply, not_found, sse_reply, FakeModel};
use common::*;
use serde_json::{json, Value};

#[test]
fn claude_code_starts_only_the_installed_gateway_and_it_connects() {
    let p = Project::new();
    let home = p.path("home");
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
    let out = claude_env(Command::new(cli()), &p, &home)
        .args(["install", "claude"])
        .output()
        .expect("install runs");
    assert!(out.status.success(), "{}", output_text(&out));

    // The session's servers live in a daemon of this test's own (its process group is
    // stopped when the guard drops).
    let _daemon = start_daemon_for_client(&p, &runtime);
    let mut list = claude_env(Command::new(claude()), &p, &home);
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

    let out = claude_env(Command::new(cli()), &p, &home)
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

/// One server that never answers its handshake costs Claude Code none of the others: the first
/// request of `claude -p` offers the healthy server's tool and the model's call of it goes
/// through. (The gateway's first listing waits for the start pass only its start grace; when it
/// waited for the hung server, Claude Code gave up on the gateway's tools and the model got
/// none.)
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_gets_the_healthy_servers_tools_beside_a_hung_one() {
    let p = Project::new();
    let home = p.path("home");
    let runtime = p.path("run");
    for dir in [&home, &runtime] {
        fs::create_dir_all(dir).expect("mkdir");
    }
    let mut hung = with_args(p.server("hung", "echo"), &["--hang-handshake"]);
    hung["discoveryTimeoutMs"] = json!(120_000);
    let state = json!({"mcpServers": {"notes": p.server("notes", "echo"), "hung": hung}});
    fs::write(home.join(".claude.json"), state.to_string()).expect("write");
    let install = claude_env(Command::new(cli()), &p, &home)
        .args(["install", "claude"])
        .output()
        .expect("install runs");
    assert!(install.status.success(), "{}", output_text(&install));

    let _daemon = start_daemon_for_client(&p, &runtime);
    let script: Script = Arc::new(|body: &Value| {
        let offered = tool_names(body);
        match offered.iter().find(|n| n.ends_with("notes__echo")) {
            Some(echo) if tool_results(body).is_empty() => tool_use(echo, json!({"text": ECHOED})),
            _ => json!({"type": "text", "text": DONE}),
        }
    });
    let model = fake_anthropic(script).await;
    let (output, requests) = claude_p(&p, &home, &model).await;
    let report = format!(
        "exit {}\nstdout:\n{}\nstderr:\n{}\nmodel requests:\n{}\ndaemon log:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr),
        serde_json::to_string_pretty(&requests).unwrap_or_default(),
        fs::read_to_string(p.path("daemon.log")).unwrap_or_default()
    );
    assert!(output.status.success(), "{report}");
    let turns: Vec<&Value> = requests
        .iter()
        .filter(|r| r["path"].as_str().is_some_and(is_messages))
        .map(|r| &r["body"])
        .collect();
    let first = turns.first().expect("a model request");
    assert!(
        tool_names(first)
            .iter()
            .any(|n| n == "mcp__reconcile__notes__echo"),
        "the healthy server's tool reaches the model: {report}"
    );
    assert!(
        turns
            .iter()
            .any(|body| tool_results(body).iter().any(|r| r.contains(ECHOED))),
        "the call of the healthy server's tool went through: {report}"
    );
    assert_eq!(p.spawns("hung"), 1, "the hung server was started: {report}");
}

/// What the fake model says to end the conversation.
const DONE: &str = "model-done";
/// The text the model asks the echo tool to return.
const ECHOED: &str = "hello-from-model";
/// What the model asks the new server's echo tool to return.
const FROM_EXTRA: &str = "hello-from-extra";
/// How many more echo calls the fake model makes while it waits for the new tool.
const WAITING_TURNS: usize = 15;

/// A server the user adds to `~/.claude.json` while `claude -p` runs reaches the model within
/// that turn: the installed gateway starts it and sends `notifications/tools/list_changed`;
/// Claude Code lists the gateway's tools again into its state and, before the next request of
/// the turn, takes the tools from there again (`refreshTools`), so that request offers
/// `mcp__reconcile__extra__echo`, and the model's call of it goes through (`--allowedTools
/// mcp__reconcile` allows every tool of the gateway, the new one included).
///
/// The fake model calls the echo tool first; when the request carrying its result arrives, it
/// edits `~/.claude.json` and waits until the gateway runs `extra`, then keeps the turn going
/// with more echo calls until a request offers the new tool, at most [`WAITING_TURNS`] of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn claude_code_offers_a_server_added_during_the_session() {
    let p = Arc::new(Project::new());
    let home = p.path("home");
    let runtime = p.path("run");
    for dir in [&home, &runtime] {
        fs::create_dir_all(dir).expect("mkdir");
    }
    let claude_json = home.join(".claude.json");
    let state = json!({"mcpServers": {"notes": p.server("notes", "echo")}});
    fs::write(&claude_json, state.to_string()).expect("write");
    let install = claude_env(Command::new(cli()), &p, &home)
        .args(["install", "claude"])
        .output()
        .expect("install runs");
    assert!(install.status.success(), "{}", output_text(&install));

    let _daemon = start_daemon_for_client(&p, &runtime);
    // `status` asks the gateway's session: the same files, seen with Claude Code's environment.
    let mut status = claude_env(Command::new(cli()), &p, &home);
    status.args(["status", "--json", "--layout", "claude"]);

    let edited = Arc::new(Mutex::new(None::<String>));
    let script: Script = {
        let (p, edited, status) = (p.clone(), edited.clone(), Mutex::new(status));
        Arc::new(move |body: &Value| {
            let offered = tool_names(body);
            let results = tool_results(body);
            if let Some(new) = offered.iter().find(|n| n.ends_with("extra__echo")) {
                if results.iter().any(|r| r.contains(FROM_EXTRA)) {
                    return json!({"type": "text", "text": DONE});
                }
                return tool_use(new, json!({"text": FROM_EXTRA}));
            }
            let Some(echo) = offered.iter().find(|n| n.ends_with("notes__echo")) else {
                return json!({"type": "text", "text": DONE});
            };
            if results.is_empty() {
                return tool_use(echo, json!({"text": ECHOED}));
            }
            let mut edited = edited.lock().unwrap_or_else(PoisonError::into_inner);
            if edited.is_none() {
                // The user adds a server while the turn runs (Claude Code's allow list keeps
                // `claude mcp add` from doing it); the model answers once the gateway runs it.
                let mut now: Value =
                    serde_json::from_str(&fs::read_to_string(&claude_json).expect("read"))
                        .expect("~/.claude.json is JSON");
                now["mcpServers"]["extra"] = p.server("extra", "echo");
                p.write(&claude_json, &now);
                let mut status = status.lock().unwrap_or_else(PoisonError::into_inner);
                *edited = Some(wait_connected(&mut status, "extra"));
            } else {
                // Claude Code has not listed again yet: give it a moment, as a slower model
                // would.
                std::thread::sleep(std::time::Duration::from_millis(500));
            }
            if results.len() > WAITING_TURNS {
                return json!({"type": "text", "text": DONE});
            }
            tool_use(echo, json!({"text": format!("waiting-{}", results.len())}))
        })
    };
    let model = fake_anthropic(script).await;

    let (output, requests) = claude_p(&p, &home, &model).await;
    let report = format!(
        "exit {}\nstdout:\n{}\nstderr:\n{}\nstatus after the edit: {:?}\nmodel requests:\n{}\ndaemon log:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr),
        edited.lock().unwrap_or_else(PoisonError::into_inner),
        serde_json::to_string_pretty(&requests).unwrap_or_default(),
        fs::read_to_string(p.path("daemon.log")).unwrap_or_default()
    );
    assert!(output.status.success(), "{report}");
    let turns: Vec<&Value> = requests
        .iter()
        .filter(|r| r["path"].as_str().is_some_and(is_messages))
        .map(|r| &r["body"])
        .collect();
    let offers = |body: &&Value| {
        tool_names(body)
            .iter()
            .any(|n| n == "mcp__reconcile__extra__echo")
    };
    let first = turns.first().expect("a model request");
    assert!(
        tool_names(first)
            .iter()
            .any(|n| n == "mcp__reconcile__notes__echo"),
        "the gateway's tools reach the model: {report}"
    );
    assert!(
        !offers(first),
        "extra is not there before the edit: {report}"
    );
    assert!(
        turns.iter().any(offers),
        "no request after the edit offered extra's tool: {report}"
    );
    assert!(
        turns
            .iter()
            .any(|body| tool_results(body).iter().any(|r| r.contains(FROM_EXTRA))),
        "the new tool's result did not reach the model: {report}"
    );
    assert!(
        String::from_utf8_lossy(&output.stdout).contains(DONE),
        "no final answer: {report}"
    );
}

/// `command` with the test's `HOME` (Claude Code's files in it), its own state, config and
/// runtime dirs, no update checks and no traffic but the model's, and nothing else of the
/// machine's environment (no credentials, no proxies).
fn claude_env(mut command: Command, p: &Project, home: &Path) -> Command {
    command
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("XDG_STATE_HOME", p.path("state"))
        .env("XDG_CONFIG_HOME", home.join(".config"))
        .env("XDG_RUNTIME_DIR", p.path("run"))
        .env("DISABLE_AUTOUPDATER", "1")
        .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
        .current_dir(p.path("project"))
        .stdin(Stdio::null());
    command
}

/// `claude -p` (asked to call the echo tool, every gateway tool allowed) against `model`, run to
/// its end in its own process group (killed with whatever it left): its output and what the
/// model was asked.
async fn claude_p(
    p: &Project,
    home: &Path,
    model: &FakeModel,
) -> (std::process::Output, Vec<Value>) {
    let mut command = claude_env(Command::new(claude()), p, home);
    command
        .args(["-p", "Call the echo tool.", "--output-format", "json"])
        .args(["--allowedTools", "mcp__reconcile"])
        .env("ANTHROPIC_BASE_URL", &model.url)
        .env("ANTHROPIC_API_KEY", "not-a-real-key")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let child = tokio::process::Command::from(command)
        .spawn()
        .expect("claude runs");
    let _group = KillGroup(child.id().expect("a pid"));
    let output = tokio::time::timeout(PATIENCE, child.wait_with_output())
        .await
        .expect("claude -p finishes")
        .expect("claude -p runs");
    (output, model.requests())
}

/// Whether `path` is the Messages API's create call (not `count_tokens`).
fn is_messages(path: &str) -> bool {
    path.split('?').next() == Some("/v1/messages")
}

/// The names of the tools a Messages request offers.
fn tool_names(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|tool| tool["name"].as_str().map(str::to_owned))
        .collect()
}

/// The `tool_result` blocks of a Messages request's conversation, as JSON text.
fn tool_results(body: &Value) -> Vec<String> {
    body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|message| message["content"].as_array().cloned().unwrap_or_default())
        .filter(|block| block["type"] == "tool_result")
        .map(|block| block.to_string())
        .collect()
}

fn tool_use(name: &str, input: Value) -> Value {
    json!({"type": "tool_use", "name": name, "input": input})
}

/// What the fake model answers to one Messages request (its body): the one content block of
/// its reply, `text` or `tool_use`. It runs on a blocking thread, so it may wait for the
/// gateway.
type Script = Arc<dyn Fn(&Value) -> Value + Send + Sync>;

/// An Anthropic Messages API on 127.0.0.1 that answers each request as `script` says.
async fn fake_anthropic(script: Script) -> FakeModel {
    FakeModel::start(Arc::new(move |path: &str, body: &Value| {
        answer(&script, path, body)
    }))
    .await
}

/// One turn of the model, as the script says: the message as SSE events (`message_start`,
/// the block's start, delta and stop, `message_delta` with the stop reason, `message_stop`)
/// when the request streams, else as one JSON message. `count_tokens` gets a count; anything
/// else (Claude Code's reachability check of the base URL) a 404.
fn answer(script: &Script, path: &str, body: &Value) -> Response {
    let route = path.split('?').next().unwrap_or(path);
    if route == "/v1/messages/count_tokens" {
        return json_reply(&json!({"input_tokens": 1}));
    }
    if route != "/v1/messages" {
        return not_found();
    }
    let streams = body["stream"] == true;
    let model = body["model"].clone();
    let block = script(body);
    let turn = TURN.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    let (start, delta, stop_reason) = if block["type"] == "tool_use" {
        let start = json!({"type": "tool_use", "id": format!("toolu_{turn}"),
            "name": block["name"], "input": {}});
        let delta = json!({"type": "input_json_delta",
            "partial_json": block["input"].to_string()});
        (start, delta, "tool_use")
    } else {
        let delta = json!({"type": "text_delta", "text": block["text"]});
        (json!({"type": "text", "text": ""}), delta, "end_turn")
    };
    let usage = json!({"input_tokens": 1, "output_tokens": 1});
    let message = json!({"id": format!("msg_{turn}"), "type": "message", "role": "assistant",
        "model": model, "content": [], "stop_reason": null, "stop_sequence": null,
        "usage": usage});
    if !streams {
        let mut whole = block;
        if whole["type"] == "tool_use" {
            whole["id"] = start["id"].clone();
        }
        let mut message = message;
        message["content"] = json!([whole]);
        message["stop_reason"] = json!(stop_reason);
        return json_reply(&message);
    }
    sse_reply([
        (
            Some("message_start"),
            json!({"type": "message_start", "message": message}),
        ),
        (
            Some("content_block_start"),
            json!({"type": "content_block_start", "index": 0, "content_block": start}),
        ),
        (
            Some("content_block_delta"),
            json!({"type": "content_block_delta", "index": 0, "delta": delta}),
        ),
        (
            Some("content_block_stop"),
            json!({"type": "content_block_stop", "index": 0}),
        ),
        (
            Some("message_delta"),
            json!({"type": "message_delta",
            "delta": {"stop_reason": stop_reason, "stop_sequence": null},
            "usage": {"output_tokens": 1}}),
        ),
        (Some("message_stop"), json!({"type": "message_stop"})),
    ])
}

/// Numbers the fake model's messages and tool calls (ids must be unique in a conversation).
static TURN: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
