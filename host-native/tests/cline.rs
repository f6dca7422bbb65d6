//! The real Cline CLI (npm `cline` 3.0.65: `node_modules/@cline/cli-linux-x64/bin/cline`) in
//! front of an installed gateway: headless `cline --json PROMPT` (act mode, tools
//! auto-approved) starts only `reconcile`, offers the user's servers' tools behind it to the
//! model (as `reconcile__SERVER__TOOL`), calls one, and a call after the user edited that
//! server's entry (in `mcp-reconcile.json` beside `cline_mcp_settings.json`, where install
//! moved it) reaches the edited server in the same session; two Cline sessions at once share
//! one process per server in the daemon's pool. (Cline lists a server's tools once per session
//! and handles no `list_changed`: a server added mid-session is offered from the next one, so
//! `install cline` gives the gateway's first listing the longer start grace.)
//!
//! No account and no network: the model is a fake OpenAI Chat Completions API on 127.0.0.1,
//! set up as Cline's `openai-compatible` provider in its `providers.json` (what `cline auth -p
//! openai -b URL` writes); telemetry is opted out in its `global-settings.json` and by
//! `CLINE_TELEMETRY_DISABLED`, update checks are off, and `CLINE_SESSION_BACKEND_MODE=local`
//! keeps the run in the CLI's own process (otherwise it starts a detached hub daemon).

use crate::common;

use std::fs;
use std::os::unix::process::CommandExt as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use common::fake_chat::{fake_chat_completions, tool_names, tool_outputs, Script, Turn};
use common::fake_model::FakeModel;
use common::*;
use serde_json::{json, Value};

/// What the fake model says to end the conversation.
const DONE: &str = "model-done";
/// How many more calls the fake model makes while it waits for the edit to apply.
const WAITING_TURNS: usize = 15;
/// The tool the model calls, as Cline names it (server `reconcile`, tool `notes__env`).
const ENV_TOOL: &str = "reconcile__notes__env";
/// The echo tool of the same server.
const ECHO_TOOL: &str = "reconcile__notes__echo";

/// The Cline CLI binary.
fn cline() -> PathBuf {
    PathBuf::from(installed("node_modules/@cline/cli-linux-x64/bin/cline"))
}

/// `command` with Cline's telemetry, update checks and notices off, and its sessions run in
/// its own process (no detached hub daemon).
fn cline_env(mut command: Command) -> Command {
    command
        .env("NO_COLOR", "1")
        .env("CLINE_TELEMETRY_DISABLED", "1")
        .env("CLINE_NO_AUTO_UPDATE", "1")
        .env("NO_UPDATE_NOTIFIER", "1")
        .env("CLINE_DISABLE_CLINE_PASS_NOTICE", "1")
        .env("CLINE_SESSION_BACKEND_MODE", "local");
    command
}

/// A home with Cline set up against the fake model at `model_url` and the user's `notes`
/// server in `cline_mcp_settings.json`, then `install cline` run: the settings file.
fn cline_home(p: &Project, model_url: &str) -> PathBuf {
    let home = p.path("home");
    let settings = home.join(".cline/data/settings");
    for dir in [settings.clone(), p.path("run")] {
        fs::create_dir_all(dir).expect("mkdir");
    }
    let write = |name: &str, value: Value| {
        fs::write(settings.join(name), value.to_string()).expect("write");
    };
    write(
        "global-settings.json",
        json!({"telemetryOptOut": true, "autoUpdateEnabled": false}),
    );
    // Cline's own setup of an OpenAI-compatible provider (it writes `providers.json`).
    let auth = cline_env(client_env(Command::new(cline()), p, &home))
        .args([
            "auth",
            "-p",
            "openai",
            "-k",
            "not-a-real-key",
            "-m",
            "fake-model",
            "-b",
        ])
        .arg(format!("{model_url}/v1"))
        .output()
        .expect("cline auth runs");
    assert!(auth.status.success(), "{}", output_text(&auth));
    let mut notes = p.server("notes", "echo,env");
    notes["env"] = json!({"GREETING": "before-the-edit"});
    write(
        "cline_mcp_settings.json",
        json!({"mcpServers": {"notes": notes}}),
    );
    let install = client_env(Command::new(cli()), p, &home)
        .args(["install", "cline"])
        .output()
        .expect("install runs");
    assert!(install.status.success(), "{}", output_text(&install));
    settings
}

/// `cline --json PROMPT` in `project` under `p`'s home, in its own process group (its output
/// in `<project>.out` / `.err` beside the project): its output, once it exits; a run that
/// does not finish in time fails with what it said so far.
async fn cline_run(p: &Project, project: &Path, prompt: &str) -> std::process::Output {
    fs::create_dir_all(project).expect("project dir");
    let (out, err) = (project.with_extension("out"), project.with_extension("err"));
    let mut command = cline_env(client_env(Command::new(cline()), p, &p.path("home")));
    command.args(["--json", "-c", &project.to_string_lossy(), prompt]);
    command
        .current_dir(project)
        .stdout(fs::File::create(&out).expect("out"))
        .stderr(fs::File::create(&err).expect("err"))
        .process_group(0);
    let mut child = tokio::process::Command::from(command)
        .spawn()
        .expect("cline runs");
    let _group = KillGroup(child.id().expect("a pid"));
    let finished = tokio::time::timeout(PATIENCE, child.wait()).await;
    let read = |path: &Path| fs::read(path).unwrap_or_default();
    let mut stderr = read(&err);
    let status = match finished {
        Ok(status) => status.expect("cline --json runs"),
        Err(_) => {
            stderr.extend_from_slice(b"\n[the test stopped it: it did not finish in time]");
            child.kill().await.expect("kill");
            child.wait().await.expect("reaped")
        }
    };
    std::process::Output {
        status,
        stdout: read(&out),
        stderr,
    }
}

/// What went on, for a failed assertion.
fn report(p: &Project, outputs: &[&std::process::Output], model: &FakeModel) -> String {
    let mut text = String::new();
    for output in outputs {
        text.push_str(&format!(
            "exit {}\nstdout:\n{}\nstderr:\n{}\n",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    text.push_str(&format!(
        "model requests:\n{}\ndaemon log:\n{}",
        serde_json::to_string_pretty(&model.requests()).unwrap_or_default(),
        fs::read_to_string(p.path("daemon.log")).unwrap_or_default()
    ));
    text
}

/// Cline starts only the installed gateway, offers the user's server's tools behind it and
/// calls one; an edit of that server's entry reaches the next call in the same session.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cline_calls_through_the_installed_gateway_and_sees_its_server_edited() {
    let p = Arc::new(Project::new());
    let seen = Arc::new(Mutex::new(Vec::<String>::new()));
    let sidecar = p.path("home/.cline/data/settings/mcp-reconcile.json");
    let script: Script = {
        let (p, sidecar, seen) = (p.clone(), sidecar.clone(), seen.clone());
        Arc::new(move |body: &Value| {
            if !tool_names(body).iter().any(|t| t == ENV_TOOL) {
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
                    serde_json::from_str(&fs::read_to_string(&sidecar).expect("read"))
                        .expect("the sidecar is JSON");
                now["mcpServers"]["notes"]["env"]["GREETING"] = json!("after-the-edit");
                p.write(&sidecar, &now);
            } else {
                // Not applied yet: give the gateway a moment, as a slower model would.
                std::thread::sleep(Duration::from_millis(500));
            }
            Turn::Call(ENV_TOOL, json!({"name": "GREETING"}))
        })
    };
    let model = fake_chat_completions(script, None).await;
    let settings = cline_home(&p, &model.url);
    let installed = fs::read_to_string(settings.join("cline_mcp_settings.json")).expect("read");
    assert!(
        installed.contains("\"reconcile\"") && !installed.contains("\"notes\""),
        "{installed}"
    );
    let _daemon = start_daemon_for_client(&p, &p.path("run"));
    let output = cline_run(&p, &p.path("project"), "Ask the notes server for GREETING.").await;
    let report = report(&p, &[&output], &model);
    assert!(output.status.success(), "{report}");
    let requests = model.requests();
    let first = &requests.first().expect("a model request")["body"];
    let names = tool_names(first);
    assert!(
        names.iter().any(|t| t == ECHO_TOOL) && names.iter().any(|t| t == ENV_TOOL),
        "the user's tools reach the model behind the gateway: {names:?}\n{report}"
    );
    assert!(
        !names.iter().any(|t| t.starts_with("notes__")),
        "Cline no longer starts the user's server itself: {names:?}"
    );
    let outputs = seen.lock().unwrap_or_else(PoisonError::into_inner).clone();
    assert_edit_reached_the_server(&outputs, &p, "notes", &report);
    assert!(
        String::from_utf8_lossy(&output.stdout).contains(DONE),
        "no final answer: {report}"
    );
}

/// Two Cline sessions at once, in two projects, each call the user's server: shared per user
/// (`"share": "user"`), one process of it serves both (the daemon's shared pool), where Cline alone
/// starts one per session.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_cline_sessions_share_one_process_per_server() {
    let p = Arc::new(Project::new());
    // Each session calls `echo` once, then waits (bounded) until the other has called too,
    // so both hold the server at the same time.
    let answered = Arc::new(AtomicUsize::new(0));
    let script: Script = {
        let answered = answered.clone();
        Arc::new(move |body: &Value| {
            if !tool_names(body).iter().any(|t| t == ECHO_TOOL) {
                return Turn::Say(DONE.into());
            }
            if tool_outputs(body).is_empty() {
                return Turn::Call(ECHO_TOOL, json!({"text": "from a session"}));
            }
            answered.fetch_add(1, Ordering::SeqCst);
            let start = Instant::now();
            while answered.load(Ordering::SeqCst) < 2 && start.elapsed() < PATIENCE / 2 {
                std::thread::sleep(Duration::from_millis(100));
            }
            Turn::Say(DONE.into())
        })
    };
    let model = fake_chat_completions(script, None).await;
    let settings = cline_home(&p, &model.url);
    // Sharing is the user's to say (each session has its own by default): `notes` in every
    // project, set where install moved it.
    let sidecar = settings.join("mcp-reconcile.json");
    let mut servers: Value =
        serde_json::from_str(&fs::read_to_string(&sidecar).expect("read")).expect("JSON");
    servers["mcpServers"]["notes"]["share"] = json!("user");
    p.write(&sidecar, &servers);
    let _daemon = start_daemon_for_client(&p, &p.path("run"));
    let (dir_a, dir_b) = (p.path("project-a"), p.path("project-b"));
    let prompt = "Echo something with the notes server.";
    let (a, b) = tokio::join!(cline_run(&p, &dir_a, prompt), cline_run(&p, &dir_b, prompt));
    let report = report(&p, &[&a, &b], &model);
    assert!(a.status.success() && b.status.success(), "{report}");
    assert_eq!(
        answered.load(Ordering::SeqCst),
        2,
        "both sessions called: {report}"
    );
    assert_eq!(
        p.spawns("notes"),
        1,
        "one process served both sessions: {report}"
    );
}
