//! The real OpenCode (npm `opencode-linux-x64` 1.18.33, the binary of `opencode-ai`) in front of an
//! installed gateway: headless `opencode run` starts only `reconcile`, offers the user's
//! servers' tools behind it to the model (OpenCode names them `reconcile_SERVER__TOOL`) and
//! calls one; a server added while a run goes on is offered in that same run (OpenCode
//! refreshes a server's tools on `notifications/tools/list_changed`); an edit of a server's
//! entry reaches the next run; two runs at once share one process of the server.
//!
//! No account and no network: the model is a fake OpenAI Chat Completions API on 127.0.0.1,
//! reached through OpenCode's bundled `@ai-sdk/openai-compatible` provider (nothing is
//! downloaded for it); models.dev, updates, sharing and LSP downloads are off by OpenCode's
//! own variables, and its background `npm install` of `@opencode-ai/plugin` into its config
//! directory is held offline by npm's own `npm_config_offline` (it fetched from
//! registry.npmjs.org otherwise).

use crate::common;

use std::fs;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use common::fake_chat::{fake_chat_completions, tool_names, tool_outputs, Script, Turn};
use common::*;
use serde_json::{json, Value};

/// What the fake model says to end a run.
const DONE: &str = "model-done";
/// The env tool of `notes`, as OpenCode names it behind the gateway.
const ENV_TOOL: &str = "reconcile_notes__env";
/// The tool of the server added mid-run.
const LATE_TOOL: &str = "reconcile_late__echo";

/// What the fake model saw: every request's offered tools and tool results, per run (its
/// prompt).
#[derive(Default)]
struct Seen {
    /// (run, offered tool names, tool results).
    requests: Vec<(String, Vec<String>, Vec<String>)>,
    /// `status --json` while the two concurrent runs were both at their call.
    status: Option<Value>,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn opencode_runs_only_the_gateway_and_sees_edits_and_shares_servers() {
    let opencode = PathBuf::from(installed("node_modules/opencode-linux-x64/bin/opencode"));
    let p = Arc::new(Project::new());
    let home = p.path("home");
    let runtime = p.path("run");
    let config = home.join(".config/opencode");
    for dir in [config.clone(), runtime.clone()] {
        fs::create_dir_all(dir).expect("mkdir");
    }
    let seen = Arc::new(Mutex::new(Seen::default()));
    let arrived = Arc::new(AtomicUsize::new(0));
    let sidecar = config.join("mcp-reconcile.json");
    let script: Script = {
        let (p, seen, arrived, sidecar) =
            (p.clone(), seen.clone(), arrived.clone(), sidecar.clone());
        Arc::new(move |body: &Value| script(body, &p, &seen, &arrived, &sidecar))
    };
    let model = fake_chat_completions(script, None).await;
    let mut notes = opencode_server(&p, "notes", "echo,env", "before-the-edit");
    // Sessions of one project share its process once the user says so (DAEMON.md); OpenCode
    // ignores this host's key.
    notes["share"] = json!("project");
    let user = json!({
        "$schema": "https://opencode.ai/config.json",
        "model": "fake/fake-model",
        "autoupdate": false,
        "share": "disabled",
        "provider": {"fake": {
            "npm": "@ai-sdk/openai-compatible",
            "name": "Fake",
            "options": {"baseURL": format!("{}/v1", model.url), "apiKey": "not-a-real-key"},
            "models": {"fake-model": {"name": "Fake model", "tool_call": true}},
        }},
        "mcp": {"notes": notes},
    });
    fs::write(config.join("opencode.json"), user.to_string()).expect("opencode.json");
    let install = opencode_env(Command::new(cli()), &p, &home)
        .args(["install", "opencode"])
        .output()
        .expect("install runs");
    assert!(install.status.success(), "{}", output_text(&install));
    let _daemon = start_daemon_for_client(&p, &runtime);

    // One run: only the gateway, the user's tools behind it, a call, a server added mid-run.
    let first = run(&opencode, &p, &home, "first").await;
    let report = || report(&first, &seen, &p);
    assert!(first.status.success(), "{}", report());
    let requests = seen
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .requests
        .clone();
    let offered: Vec<&String> = requests.iter().flat_map(|(_, tools, _)| tools).collect();
    for tool in ["reconcile_notes__echo", ENV_TOOL] {
        assert!(
            offered.iter().any(|t| *t == tool),
            "{tool} offered: {}",
            report()
        );
    }
    assert!(
        !offered.iter().any(|t| t.starts_with("notes_")),
        "OpenCode no longer starts the user's server itself: {}",
        report()
    );
    let results: Vec<&String> = requests.iter().flat_map(|(_, _, r)| r).collect();
    assert!(
        results.iter().any(|r| r.contains("before-the-edit")),
        "the call reached notes: {}",
        report()
    );
    assert!(
        offered.iter().any(|t| *t == LATE_TOOL),
        "the server added mid-run is offered in that run: {}",
        report()
    );

    // The user edits `notes` where install moved it; two runs at once then both reach the
    // edited server, through one process of it.
    let before = p.spawns("notes");
    let mut moved: Value =
        serde_json::from_str(&fs::read_to_string(&sidecar).expect("sidecar")).expect("json");
    moved["mcp"]["notes"]["environment"]["GREETING"] = json!("after-the-edit");
    p.write(&sidecar, &moved);
    let (a, b) = tokio::join!(
        run(&opencode, &p, &home, "second"),
        run(&opencode, &p, &home, "third")
    );
    assert!(a.status.success() && b.status.success(), "{}", report());
    let requests = seen
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .requests
        .clone();
    for name in ["second", "third"] {
        assert!(
            requests
                .iter()
                .any(|(run, _, r)| run == name && r.iter().any(|r| r.contains("after-the-edit"))),
            "{name} reached the edited notes: {}",
            report()
        );
    }
    let status = seen
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .status
        .clone();
    let notes_status = status
        .as_ref()
        .and_then(Value::as_array)
        .and_then(|servers| servers.iter().find(|s| s["name"] == "notes"))
        .cloned()
        .unwrap_or_default();
    assert_eq!(notes_status["sessions"], 2, "{}", report());
    assert_eq!(
        p.spawns("notes") - before,
        1,
        "the two runs shared one process of the edited notes: {}",
        report()
    );
}

/// A fixture server as OpenCode's local entry, its `GREETING` set.
fn opencode_server(p: &Project, name: &str, tools: &str, greeting: &str) -> Value {
    let entry = p.server(name, tools);
    let argv: Vec<Value> = std::iter::once(entry["command"].clone())
        .chain(entry["args"].as_array().into_iter().flatten().cloned())
        .collect();
    json!({"type": "local", "command": argv, "environment": {"GREETING": greeting}})
}

/// `command` with only the test home's environment, and OpenCode's and npm's switches that
/// keep it on 127.0.0.1.
fn opencode_env(command: Command, p: &Project, home: &Path) -> Command {
    let mut command = client_env(command, p, home);
    command
        .env("XDG_CONFIG_HOME", home.join(".config"))
        .env("XDG_DATA_HOME", home.join(".local/share"))
        .env("XDG_CACHE_HOME", home.join(".cache"))
        .env("OPENCODE_DISABLE_AUTOUPDATE", "1")
        .env("OPENCODE_DISABLE_MODELS_FETCH", "1")
        .env("OPENCODE_DISABLE_SHARE", "1")
        .env("OPENCODE_DISABLE_LSP_DOWNLOAD", "1")
        .env("OPENCODE_DISABLE_DEFAULT_PLUGINS", "1")
        .env("OPENCODE_DISABLE_CLAUDE_CODE", "1")
        .env("OPENCODE_DISABLE_EXTERNAL_SKILLS", "1")
        .env("npm_config_offline", "true")
        .env("npm_config_registry", "http://127.0.0.1:9/");
    command
}

/// `opencode run NAME` to its end.
async fn run(opencode: &Path, p: &Project, home: &Path, name: &str) -> std::process::Output {
    let mut command = opencode_env(Command::new(opencode), p, home);
    command
        .env("NO_COLOR", "1")
        .args([
            "run",
            &format!("Run {name}: ask the notes server for GREETING."),
        ])
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let child = tokio::process::Command::from(command)
        .spawn()
        .expect("opencode runs");
    let _group = KillGroup(child.id().expect("a pid"));
    tokio::time::timeout(PATIENCE * 2, child.wait_with_output())
        .await
        .expect("opencode run finishes")
        .expect("opencode run runs")
}

/// What a failure shows: the run's output, what the model saw, the daemon's log.
fn report(out: &std::process::Output, seen: &Mutex<Seen>, p: &Project) -> String {
    let seen = seen.lock().unwrap_or_else(PoisonError::into_inner);
    format!(
        "exit {}\nstdout:\n{}\nstderr:\n{}\nmodel saw:\n{:#?}\nstatus: {:#?}\ndaemon log:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr),
        seen.requests,
        seen.status,
        fs::read_to_string(p.path("daemon.log")).unwrap_or_default()
    )
}

/// The fake model's part of a run. A request without the gateway's tools (OpenCode's title
/// request) gets a plain answer. The first run's first call adds the server `late` beside
/// `notes` and asks again until `late`'s tool is offered; the other two runs wait for each
/// other before their call (so both sessions are attached at once).
fn script(
    body: &Value,
    p: &Project,
    seen: &Mutex<Seen>,
    arrived: &AtomicUsize,
    sidecar: &Path,
) -> Turn {
    let tools = tool_names(body);
    let prompt = body["messages"].to_string();
    let run = ["first", "second", "third"]
        .into_iter()
        .find(|r| prompt.contains(&format!("Run {r}:")))
        .unwrap_or("?")
        .to_owned();
    let results = tool_outputs(body);
    seen.lock()
        .unwrap_or_else(PoisonError::into_inner)
        .requests
        .push((run.clone(), tools.clone(), results.clone()));
    if !tools.iter().any(|t| t == ENV_TOOL) {
        return Turn::Say(DONE.into());
    }
    let call = Turn::Call(ENV_TOOL, json!({"name": "GREETING"}));
    match (run.as_str(), results.len()) {
        ("first", 0) => {
            let mut moved: Value =
                serde_json::from_str(&fs::read_to_string(sidecar).expect("sidecar")).expect("json");
            moved["mcp"]["late"] = opencode_server(p, "late", "echo", "late");
            p.write(sidecar, &moved);
            call
        }
        ("first", n) if !tools.iter().any(|t| t == LATE_TOOL) && n < 20 => {
            // Not listed yet: give the gateway a moment, as a slower model would.
            std::thread::sleep(Duration::from_millis(500));
            call
        }
        (_, 0) => {
            if arrived.fetch_add(1, Ordering::SeqCst) == 1 {
                // Both runs are attached now: ask the gateway's sessions what they share.
                let out = opencode_env(Command::new(cli()), p, &p.path("home"))
                    .args(["status", "--json", "--layout", "opencode"])
                    .output()
                    .expect("status runs");
                seen.lock().unwrap_or_else(PoisonError::into_inner).status =
                    serde_json::from_slice(&out.stdout).ok();
                arrived.fetch_add(1, Ordering::SeqCst);
            }
            let start = Instant::now();
            while arrived.load(Ordering::SeqCst) < 3 && start.elapsed() < PATIENCE {
                std::thread::sleep(Duration::from_millis(50));
            }
            call
        }
        _ => Turn::Say(DONE.into()),
    }
}
