//! A real client: Gemini CLI (npm `@google/gemini-cli`, pinned in the root `package.json`;
//! it speaks MCP 2025-06-18 through the TypeScript SDK it bundles) connected to
//! `mcp-reconcile serve --http` lists the gateway's tools and calls one of the fixture server's.
//!
//! Gemini CLI runs headless (`-p`) on the `node` of `PATH` (Node 20 or later) with a HOME of its
//! own (`~/.gemini/settings.json`: the gateway as an `httpUrl` server with the bearer token,
//! API-key auth, no telemetry, no usage statistics, no update checks). Its model API is a fake
//! one in this test, on 127.0.0.1 (`GOOGLE_GEMINI_BASE_URL`): it answers the first turn with a
//! call of the gateway's `mcp__notes__echo` and the next with text, and records every request,
//! so the test sees the tool declarations Gemini CLI offered and the tool's result it sent
//! back. Nothing leaves loopback.
//!
//! Gemini CLI 0.61 dropped every tool of `serve --http` while the gateway sent SSE priming
//! events to clients older than 2025-11-25 (issue #24): its SDK parsed the empty `data:` as
//! JSON, failed, and the CLI marked the server disconnected.

use crate::common;

use std::fs;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError};

use axum::response::Response;
use common::fake_model::{json_reply, sse_reply, FakeModel};
use common::*;
use serde_json::{json, Value};

/// What the model says to end the conversation.
const DONE: &str = "model-done";
/// The text the model asks the echo tool to return.
const ECHOED: &str = "hello-from-model";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gemini_cli_lists_and_calls_the_gateways_tools() {
    let gemini = gemini();
    let p = Project::new();
    p.write_settings(json!({"mcpServers": {"notes": p.server("notes", "echo,add")}}));
    let mut served = ServeHttp::start(&p);
    let model = fake_gemini(Arc::new(echo_once)).await;

    let home = p.path("gemini-home");
    let workspace = p.path("gemini-workspace");
    fs::create_dir_all(home.join(".gemini")).expect("gemini home");
    fs::create_dir_all(&workspace).expect("gemini workspace");
    let settings = json!({
        "security": {"auth": {"selectedType": "gemini-api-key"}},
        "privacy": {"usageStatisticsEnabled": false},
        "telemetry": {"enabled": false},
        "general": {"enableAutoUpdate": false, "enableAutoUpdateNotification": false},
        "mcpServers": {"gateway": {
            "httpUrl": served.url,
            "headers": {"Authorization": format!("Bearer {}", served.token())},
            "trust": true,
        }},
    });
    fs::write(home.join(".gemini/settings.json"), settings.to_string()).expect("settings");

    let command = gemini_command(&gemini, &home, &workspace, &model.url);
    let child = tokio::process::Command::from(command)
        .spawn()
        .expect("node starts Gemini CLI");
    // It may start a second node (to raise its heap limit): the whole group goes on failure.
    let group = KillGroup(child.id().expect("a pid"));
    let output = tokio::time::timeout(PATIENCE, child.wait_with_output())
        .await
        .unwrap_or_else(|_| panic!("Gemini CLI did not finish; serve log:\n{}", served.log()))
        .expect("Gemini CLI runs");
    group.disarm();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    let requests = model.requests();
    let report = format!(
        "exit {}\nstdout:\n{stdout}\nstderr:\n{stderr}\nmodel requests:\n{}\nserve log:\n{}",
        output.status,
        serde_json::to_string_pretty(&requests).unwrap_or_default(),
        served.log()
    );

    assert!(output.status.success(), "Gemini CLI failed: {report}");
    assert!(
        !stderr.contains("MCP issues detected"),
        "Gemini CLI had trouble with the gateway: {report}"
    );
    let first = requests.first().expect("Gemini CLI asked the model");
    let offered = declarations(&first["body"]);
    for tool in ["mcp__notes__echo", "mcp__notes__add"] {
        assert!(
            offered.iter().any(|name| name.ends_with(tool)),
            "{tool} was not offered to the model ({offered:?}): {report}"
        );
    }
    let answered = requests.iter().any(|request| {
        function_responses(&request["body"]).iter().any(|r| {
            r["name"]
                .as_str()
                .is_some_and(|n| n.ends_with("mcp__notes__echo"))
        }) && request["body"].to_string().contains(ECHOED)
    });
    assert!(
        answered,
        "the echo tool's result did not reach the model: {report}"
    );
    assert!(stdout.contains(DONE), "no final answer: {report}");
    served.stop();
}

/// Gemini CLI, headless, in `workspace` with `home`, against the fake model API at `model`.
fn gemini_command(
    gemini: &std::path::Path,
    home: &std::path::Path,
    workspace: &std::path::Path,
    model: &str,
) -> std::process::Command {
    let mut command = std::process::Command::new("node");
    command
        .arg(gemini)
        .args(["-m", "gemini-2.5-flash", "--yolo", "-p"])
        .arg("Call the echo tool of the gateway.")
        .current_dir(workspace)
        // Nothing of the machine's environment (proxies, Google credentials, a Vertex AI
        // switch) reaches it: only what it needs to run against the fake API.
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("GEMINI_API_KEY", "not-a-real-key")
        .env("GOOGLE_GEMINI_BASE_URL", model)
        .env("GEMINI_CLI_TRUST_WORKSPACE", "true")
        .env("GEMINI_TELEMETRY_ENABLED", "false")
        .env("NO_COLOR", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    command
}

/// `mcp-reconcile install gemini` over a user's own settings: Gemini CLI then starts only the
/// gateway (stdio, a session of a daemon of this test's own), whose tools reach the model as
/// `mcp_reconcile_notes__echo` (Gemini's prefix in front of `--tool-names short`); the call goes
/// through and the user's own server is not started by Gemini CLI itself.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gemini_cli_through_an_installed_gateway() {
    let gemini = gemini();
    let p = Project::new();
    let model = fake_gemini(Arc::new(echo_once)).await;
    let home = p.path("gemini-home");
    let workspace = p.path("gemini-workspace");
    let runtime = p.path("run");
    for dir in [home.join(".gemini"), workspace.clone(), runtime.clone()] {
        fs::create_dir_all(dir).expect("mkdir");
    }
    let settings = json!({
        "security": {"auth": {"selectedType": "gemini-api-key"}},
        "privacy": {"usageStatisticsEnabled": false},
        "telemetry": {"enabled": false},
        "general": {"enableAutoUpdate": false, "enableAutoUpdateNotification": false},
        "mcpServers": {"notes": p.server("notes", "echo,add")},
    });
    fs::write(home.join(".gemini/settings.json"), settings.to_string()).expect("settings");
    let install = std::process::Command::new(cli())
        .args(["install", "gemini"])
        .env("HOME", &home)
        .env("XDG_STATE_HOME", p.path("state"))
        .env_remove("GEMINI_CLI_HOME")
        .output()
        .expect("install runs");
    assert!(install.status.success(), "{}", output_text(&install));

    let _daemon = start_daemon_for_client(&p, &runtime);
    let mut command = gemini_command(&gemini, &home, &workspace, &model.url);
    command.env("XDG_RUNTIME_DIR", &runtime);
    let child = tokio::process::Command::from(command)
        .spawn()
        .expect("node starts Gemini CLI");
    let _group = KillGroup(child.id().expect("a pid"));
    let output = tokio::time::timeout(PATIENCE, child.wait_with_output())
        .await
        .expect("Gemini CLI finishes")
        .expect("Gemini CLI runs");
    let requests = model.requests();
    let report = format!(
        "exit {}\nstdout:\n{}\nstderr:\n{}\ndaemon log:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr),
        fs::read_to_string(p.path("daemon.log")).unwrap_or_default()
    );
    assert!(output.status.success(), "{report}");
    let offered = declarations(&requests.first().expect("a model request")["body"]);
    assert!(
        offered.iter().any(|n| n.ends_with("reconcile_notes__echo")),
        "the gateway's short names reach the model ({offered:?}): {report}"
    );
    assert!(
        offered
            .iter()
            .all(|n| !n.contains("mcp__notes__") && !n.starts_with("mcp_notes_")),
        "Gemini CLI does not start the user's server itself ({offered:?}): {report}"
    );
    let answered = requests.iter().any(|request| {
        function_responses(&request["body"]).iter().any(|r| {
            r["name"]
                .as_str()
                .is_some_and(|n| n.ends_with("notes__echo"))
        }) && request["body"].to_string().contains(ECHOED)
    });
    assert!(
        answered,
        "the echo result did not reach the model: {report}"
    );
}

/// A server the user adds to `~/.gemini/settings.json` while a headless Gemini CLI session
/// runs reaches the model within that session: the installed gateway starts it and sends
/// `notifications/tools/list_changed`, Gemini CLI lists the gateway's tools again and puts
/// them into its chat (`McpClient.refreshTools`, then `GeminiClient.setTools()`), so a later
/// request of the same turn offers `mcp_reconcile_extra__echo`, and the model's call of it
/// goes through.
///
/// The fake model calls the echo tool first; when the request carrying its result arrives, it
/// edits the settings file and waits until the gateway runs `extra`, then keeps the turn going
/// with more echo calls (each with other text: Gemini CLI stops a turn that repeats a call)
/// until a request offers the new tool, at most [`WAITING_TURNS`] of them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gemini_cli_offers_a_server_added_during_the_session() {
    let gemini = gemini();
    let p = Arc::new(Project::new());
    let home = p.path("gemini-home");
    let workspace = p.path("gemini-workspace");
    let runtime = p.path("run");
    for dir in [home.join(".gemini"), workspace.clone(), runtime.clone()] {
        fs::create_dir_all(dir).expect("mkdir");
    }
    let settings_file = home.join(".gemini/settings.json");
    let settings = json!({
        "security": {"auth": {"selectedType": "gemini-api-key"}},
        "privacy": {"usageStatisticsEnabled": false},
        "telemetry": {"enabled": false},
        "general": {"enableAutoUpdate": false, "enableAutoUpdateNotification": false},
        "mcpServers": {"notes": p.server("notes", "echo")},
    });
    fs::write(&settings_file, settings.to_string()).expect("settings");
    let install = std::process::Command::new(cli())
        .args(["install", "gemini"])
        .env("HOME", &home)
        .env("XDG_STATE_HOME", p.path("state"))
        .env_remove("GEMINI_CLI_HOME")
        .output()
        .expect("install runs");
    assert!(install.status.success(), "{}", output_text(&install));

    let _daemon = start_daemon_for_client(&p, &runtime);
    let mut command = gemini_command(&gemini, &home, &workspace, "");
    command.env("XDG_RUNTIME_DIR", &runtime);
    // `status` asks the gateway's session: the same files, seen with Gemini CLI's environment.
    let mut status = std::process::Command::new(cli());
    status
        .args(["status", "--json", "--layout", "gemini"])
        .current_dir(&workspace)
        .env_clear()
        .stdin(Stdio::null());
    for (key, value) in command.get_envs() {
        if let (key, Some(value)) = (key, value) {
            if key != "GOOGLE_GEMINI_BASE_URL" {
                status.env(key, value);
            }
        }
    }

    let edited = Arc::new(Mutex::new(None::<String>));
    let script: Script = {
        let (p, edited, status) = (p.clone(), edited.clone(), Mutex::new(status));
        Arc::new(move |body: &Value| {
            let offered = declarations(body);
            let results = function_responses(body);
            let answered = |tool: &str| {
                results
                    .iter()
                    .any(|r| r["name"].as_str().is_some_and(|n| n.ends_with(tool)))
            };
            if let Some(new) = offered.iter().find(|n| n.ends_with("extra__echo")) {
                if answered("extra__echo") {
                    return json!({"text": DONE});
                }
                return call(new, json!({"text": FROM_EXTRA}));
            }
            let Some(echo) = offered.iter().find(|n| n.ends_with("notes__echo")) else {
                return json!({"text": DONE});
            };
            if results.is_empty() {
                return call(echo, json!({"text": ECHOED}));
            }
            let mut edited = edited.lock().unwrap_or_else(PoisonError::into_inner);
            if edited.is_none() {
                // The user adds a server while the turn runs; the model answers once the
                // gateway runs it.
                let mut now: Value =
                    serde_json::from_str(&fs::read_to_string(&settings_file).expect("read"))
                        .expect("settings are JSON");
                now["mcpServers"]["extra"] = p.server("extra", "echo");
                p.write(&settings_file, &now);
                let mut status = status.lock().unwrap_or_else(PoisonError::into_inner);
                *edited = Some(wait_connected(&mut status, "extra"));
            } else {
                // Gemini CLI has not listed again yet: give it a moment, as a slower model
                // would.
                std::thread::sleep(std::time::Duration::from_millis(500));
            }
            if results.len() > WAITING_TURNS {
                return json!({"text": DONE});
            }
            call(echo, json!({"text": format!("waiting-{}", results.len())}))
        })
    };
    let model = fake_gemini(script).await;
    command.env("GOOGLE_GEMINI_BASE_URL", &model.url);
    let child = tokio::process::Command::from(command)
        .spawn()
        .expect("node starts Gemini CLI");
    let _group = KillGroup(child.id().expect("a pid"));
    let output = tokio::time::timeout(PATIENCE, child.wait_with_output())
        .await
        .expect("Gemini CLI finishes")
        .expect("Gemini CLI runs");
    let requests = model.requests();
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
    let offers = |request: &Value| {
        declarations(&request["body"])
            .iter()
            .any(|n| n.ends_with("reconcile_extra__echo"))
    };
    let first = requests.first().expect("a model request");
    assert!(
        !offers(first),
        "extra is not there before the edit: {report}"
    );
    assert!(
        requests.iter().any(offers),
        "no request after the edit offered extra's tool: {report}"
    );
    let added = requests.iter().any(|request| {
        function_responses(&request["body"]).iter().any(|r| {
            r["name"]
                .as_str()
                .is_some_and(|n| n.ends_with("extra__echo"))
                && r["response"].to_string().contains(FROM_EXTRA)
        })
    });
    assert!(
        added,
        "the new tool's result did not reach the model: {report}"
    );
    assert!(
        String::from_utf8_lossy(&output.stdout).contains(DONE),
        "no final answer: {report}"
    );
}

/// How many more echo calls the fake model makes while it waits for the new tool.
const WAITING_TURNS: usize = 15;
/// What the model asks the new server's echo tool to return. (Not `add`: Gemini CLI 0.61's
/// `McpComplianceTransport` parses a result's first text as JSON into `structuredContent`,
/// and its SDK then rejects the call when that is a number, such as `add`'s sum.)
const FROM_EXTRA: &str = "hello-from-extra";

/// Gemini CLI's entry point in `node_modules`, or a failure that says how to install it.
fn gemini() -> PathBuf {
    require_node_20("Gemini CLI");
    PathBuf::from(installed(
        "node_modules/@google/gemini-cli/bundle/gemini.js",
    ))
}

/// The names of the function declarations a `generateContent` request offers.
fn declarations(body: &Value) -> Vec<String> {
    let tools = body["tools"].as_array().cloned().unwrap_or_default();
    tools
        .iter()
        .flat_map(|tool| {
            tool["functionDeclarations"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .filter_map(|declaration| declaration["name"].as_str().map(str::to_owned))
        .collect()
}

/// The `functionResponse` parts of a request's conversation.
fn function_responses(body: &Value) -> Vec<Value> {
    let contents = body["contents"].as_array().cloned().unwrap_or_default();
    contents
        .iter()
        .flat_map(|content| content["parts"].as_array().cloned().unwrap_or_default())
        .filter_map(|part| part.get("functionResponse").cloned())
        .collect()
}

/// What the fake model answers to one request (its body): the one part of its reply, a
/// `functionCall` or a `text`. It runs on a blocking thread, so it may wait for the gateway.
type Script = Arc<dyn Fn(&Value) -> Value + Send + Sync>;

/// A Gemini model API on 127.0.0.1 that answers each request as `script` says.
async fn fake_gemini(script: Script) -> FakeModel {
    FakeModel::start(Arc::new(move |path: &str, body: &Value| {
        answer(&script, path, body)
    }))
    .await
}

/// A call of the echo tool while the conversation has no tool result, then text.
fn echo_once(body: &Value) -> Value {
    let echo = declarations(body)
        .into_iter()
        // `mcp__notes__echo` through `serve`; `mcp_reconcile_notes__echo` through an installed
        // gateway (Gemini CLI's own `mcp_<server>_` in front of `--tool-names short`).
        .find(|name| name.ends_with("notes__echo"));
    match echo {
        Some(name) if function_responses(body).is_empty() => call(&name, json!({"text": ECHOED})),
        _ => json!({"text": DONE}),
    }
}

fn call(name: &str, args: Value) -> Value {
    json!({"functionCall": {"name": name, "args": args}})
}

/// One turn of the model, as the script says. `…:streamGenerateContent?alt=sse` gets it as
/// one SSE event.
fn answer(script: &Script, path: &str, body: &Value) -> Response {
    let (route, query) = path.split_once('?').unwrap_or((path, ""));
    if route.ends_with(":countTokens") {
        return json_reply(&json!({"totalTokens": 1}));
    }
    let reply = json!({
        "candidates": [{
            "content": {"role": "model", "parts": [script(body)]},
            "finishReason": "STOP",
            "index": 0,
        }],
        "usageMetadata": {"promptTokenCount": 1, "candidatesTokenCount": 1, "totalTokenCount": 2},
    });
    if query.contains("alt=sse") {
        return sse_reply([(None, reply)]);
    }
    json_reply(&reply)
}
