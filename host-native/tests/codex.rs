//! The real Codex CLI (npm `@openai/codex`, pinned in the root package.json: the native
//! binary the package ships) in front of an installed gateway: `codex exec` (headless) starts
//! only `reconcile`, offers the user's servers' tools behind it to the model, calls one, and —
//! Codex lists tools once per session and ignores `notifications/tools/list_changed`, so for
//! its users the hot reload of an *existing* server is what counts — a call after the user
//! edited that server's entry in `~/.codex/config.toml` reaches the edited server, in the same
//! session.
//!
//! No account and no network: the model is a fake OpenAI Responses API on 127.0.0.1 (a
//! `[model_providers]` entry of the test's config) that answers from a script and records
//! every request.

use crate::common;

use std::fs;
use std::os::unix::process::CommandExt as _;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};

use axum::response::Response;
use common::fake_model::{not_found, sse_reply, FakeModel};
use common::*;
use serde_json::{json, Value};

/// What the fake model says to end the conversation.
const DONE: &str = "model-done";
/// How many more calls the fake model makes while it waits for the edit to apply.
const WAITING_TURNS: usize = 15;

fn codex() -> PathBuf {
    PathBuf::from(installed(
        "node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex",
    ))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn codex_calls_through_the_installed_gateway_and_sees_its_server_edited() {
    let p = Arc::new(Project::new());
    let home = p.path("home");
    let runtime = p.path("run");
    for dir in [home.join(".codex"), runtime.clone()] {
        fs::create_dir_all(dir).expect("mkdir");
    }
    let config = home.join(".codex/config.toml");

    // The user edits `notes`' environment while the turn runs; the model asks `notes` for the
    // variable until the edited server answers.
    let outputs_seen = Arc::new(Mutex::new(Vec::<String>::new()));
    let script: Script = {
        let (config, seen) = (config.clone(), outputs_seen.clone());
        Arc::new(move |body: &Value| {
            let outputs = call_outputs(body);
            *seen.lock().unwrap_or_else(PoisonError::into_inner) = outputs.clone();
            let Some(env) = offered(body)
                .into_iter()
                .find(|(namespace, name)| namespace == "mcp__reconcile" && name == "notes__env")
            else {
                return Turn::Say(DONE.into());
            };
            let Some(last) = outputs.last() else {
                return Turn::Call(env, json!({"name": "GREETING"}));
            };
            if last.contains("after-the-edit") || outputs.len() > WAITING_TURNS {
                return Turn::Say(DONE.into());
            }
            if outputs.len() == 1 {
                let text = fs::read_to_string(&config).expect("read the config");
                let edited = text.replace("before-the-edit", "after-the-edit");
                assert_ne!(text, edited, "the config holds the greeting");
                let tmp = config.with_extension("tmp~");
                fs::write(&tmp, edited).expect("write");
                fs::rename(&tmp, &config).expect("rename");
            } else {
                // Not applied yet: give the gateway a moment, as a slower model would.
                std::thread::sleep(std::time::Duration::from_millis(500));
            }
            Turn::Call(env, json!({"name": "GREETING"}))
        })
    };
    let model = fake_responses(script).await;

    let user_config = format!(
        "model = \"gpt-5\"\nmodel_provider = \"fake\"\n\n\
         [model_providers.fake]\nname = \"fake model on loopback\"\nbase_url = {}\n\
         wire_api = \"responses\"\nenv_key = \"FAKE_MODEL_KEY\"\n\n\
         [mcp_servers.notes]\ncommand = {}\nargs = [\"--name\", \"notes\", \"--tools\", \"echo,env\", \"--marker\", {}]\n\
         env = {{ GREETING = \"before-the-edit\" }}\n",
        toml_string(&format!("{}/v1", model.url)),
        toml_string(&fixture().to_string_lossy()),
        toml_string(&p.marker("notes").to_string_lossy()),
    );
    fs::write(&config, user_config).expect("write the config");
    let install = client_env(Command::new(cli()), &p, &home)
        .args(["install", "codex"])
        .output()
        .expect("install runs");
    assert!(install.status.success(), "{}", output_text(&install));
    // Codex passes its servers only a short list of variables; the test's daemon lives in a
    // runtime dir of its own, so the gateway's entry passes that one through as well.
    let installed = fs::read_to_string(&config).expect("read");
    let passed = installed.replace(
        "[mcp_servers.reconcile]\n",
        "[mcp_servers.reconcile]\nenv_vars = [\"XDG_RUNTIME_DIR\"]\n",
    );
    assert_ne!(
        installed, passed,
        "install wrote the gateway's table:\n{installed}"
    );
    fs::write(&config, passed).expect("write");

    let _daemon = start_daemon_for_client(&p, &runtime);
    let mut command = client_env(Command::new(codex()), &p, &home);
    command
        // No prompts in a headless run: MCP tool calls go through without asking.
        .args([
            "exec",
            "--skip-git-repo-check",
            "--dangerously-bypass-approvals-and-sandbox",
        ])
        .arg("Ask the notes server for GREETING.")
        .env("FAKE_MODEL_KEY", "not-a-real-key")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let child = tokio::process::Command::from(command)
        .spawn()
        .expect("codex runs");
    // Whatever Codex left in its group goes when the guard drops.
    let _group = KillGroup(child.id().expect("a pid"));
    let output = tokio::time::timeout(PATIENCE, child.wait_with_output())
        .await
        .expect("codex exec finishes")
        .expect("codex exec runs");
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
    let turns: Vec<&Value> = requests
        .iter()
        .filter(|r| {
            r["path"]
                .as_str()
                .is_some_and(|p| p.ends_with("/responses"))
        })
        .map(|r| &r["body"])
        .collect();
    let first = offered(turns.first().expect("a model request"));
    for tool in ["notes__echo", "notes__env"] {
        assert!(
            first
                .iter()
                .any(|(ns, name)| ns == "mcp__reconcile" && name == tool),
            "{tool} reaches the model behind the gateway ({first:?}): {report}"
        );
    }
    assert!(
        first.iter().all(|(ns, _)| ns != "mcp__notes"),
        "Codex no longer starts the user's server itself ({first:?}): {report}"
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

/// A TOML basic string (a JSON string is one, for the paths and URLs used here).
fn toml_string(text: &str) -> String {
    Value::from(text).to_string()
}

/// The MCP tools a Responses request offers: `(namespace, name)` for every function in a
/// `mcp__…` namespace (Codex 0.171 groups each MCP server's tools in one).
fn offered(body: &Value) -> Vec<(String, String)> {
    body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|tool| tool["type"] == "namespace")
        .filter_map(|ns| Some((ns["name"].as_str()?.to_owned(), ns["tools"].as_array()?)))
        .filter(|(ns, _)| ns.starts_with("mcp__"))
        .flat_map(|(ns, tools)| {
            tools
                .iter()
                .filter_map(|t| t["name"].as_str())
                .map(|name| (ns.clone(), name.to_owned()))
                .collect::<Vec<_>>()
        })
        .collect()
}

/// The `function_call_output` items of a request's input, as JSON text.
fn call_outputs(body: &Value) -> Vec<String> {
    body["input"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|item| item["type"] == "function_call_output")
        .map(|item| item["output"].to_string())
        .collect()
}

/// One reply of the fake model.
enum Turn {
    /// Call the tool `(namespace, name)` with these arguments.
    Call((String, String), Value),
    Say(String),
}

/// What the fake model answers to one Responses request (its body). It runs on a blocking
/// thread, so it may wait for the gateway.
type Script = Arc<dyn Fn(&Value) -> Turn + Send + Sync>;

/// An OpenAI Responses API on 127.0.0.1 (`POST /v1/responses`, streamed) that answers each
/// request as `script` says.
async fn fake_responses(script: Script) -> FakeModel {
    FakeModel::start(Arc::new(move |path: &str, body: &Value| {
        answer(&script, path, body)
    }))
    .await
}

/// One response as Codex reads it: `response.created`, the one output item
/// (`response.output_item.done`: a namespaced `function_call` or an assistant message),
/// `response.completed`.
fn answer(script: &Script, path: &str, body: &Value) -> Response {
    if path.split('?').next() != Some("/v1/responses") {
        return not_found();
    }
    let turn = TURN.fetch_add(1, Ordering::SeqCst);
    let id = format!("resp_{turn}");
    let item = match script(body) {
        Turn::Call((namespace, name), arguments) => json!({
            "type": "function_call", "id": format!("fc_{turn}"), "call_id": format!("call_{turn}"),
            "namespace": namespace, "name": name, "arguments": arguments.to_string(),
        }),
        Turn::Say(text) => json!({
            "type": "message", "role": "assistant", "id": format!("msg_{turn}"),
            "content": [{"type": "output_text", "text": text}],
        }),
    };
    let usage = json!({"input_tokens": 1, "input_tokens_details": null, "output_tokens": 1,
        "output_tokens_details": null, "total_tokens": 2});
    sse_reply([
        (
            Some("response.created"),
            json!({"type": "response.created", "response": {"id": id}}),
        ),
        (
            Some("response.output_item.done"),
            json!({"type": "response.output_item.done", "item": item}),
        ),
        (
            Some("response.completed"),
            json!({"type": "response.completed", "response": {"id": id, "usage": usage}}),
        ),
    ])
}

/// Numbers the fake model's responses and calls (ids must be unique in a conversation).
static TURN: AtomicUsize = AtomicUsize::new(0);
