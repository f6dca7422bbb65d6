//! Real clients: the official Python MCP SDK (PyPI `mcp`, pinned in
//! `scripts/mcp-client-test-requirements.txt`, installed into `.venv-test/` by
//! `scripts/setup.sh`) drives `mcp-reconcile serve` over stdio and over `serve --http`:
//! list, call, settings edits while it is connected, the removal of a server and the
//! `list_changed` that follows (the scenario is `tests/python/client.py`).
//!
//! Two clients at once: two SDK sessions, each starting its own stdio `serve` in one project,
//! share one server process through the per-user daemon (the default runtime of a stdio
//! `serve`).

use crate::common;

use std::fs;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};

use common::*;
use serde_json::json;

/// The repository root (`host-native/..`).
/// The test venv's Python with the SDK, or a failure that says how to get it.
fn python() -> PathBuf {
    let python = workspace_root().join(".venv-test/bin/python");
    let sdk = Command::new(&python)
        .args(["-c", "import mcp.client.streamable_http"])
        .output();
    assert!(
        sdk.is_ok_and(|o| o.status.success()),
        "{} cannot import the Python MCP SDK: run `bash scripts/setup.sh` at the repository \
         root ({}) first (it installs scripts/mcp-client-test-requirements.txt into .venv-test/)",
        python.display(),
        workspace_root().display()
    );
    python
}

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/python/client.py")
}

/// The settings of the scenario: before, after the first edit (notes gains `sleep`), after
/// the second (other is removed); written to `scenario.json` for the script.
fn scenario(p: &Project) -> PathBuf {
    let settings = |notes: &str, other: bool| {
        let mut servers = json!({"notes": p.server("notes", notes)});
        if other {
            servers["other"] = p.server("other", "echo");
        }
        // Shared by the sessions that start it alike (the pair of clients shares one process).
        json!({"mcp": {"share": "project"}, "mcpServers": servers})
    };
    p.write_settings(settings("echo,add", true));
    let plan = json!({
        "settings": p.user_settings(),
        "edited": settings("echo,add,sleep", true),
        "removed": settings("echo,add,sleep", false),
    });
    let path = p.path("scenario.json");
    fs::write(&path, plan.to_string()).expect("scenario");
    path
}

/// The command the SDK starts: `serve` with the project's flags and `extra`, its stderr (the
/// plan lines) appended to `log` through a shell redirect so a failure can show it.
fn serve_command(p: &Project, log: &Path, extra: &[&str]) -> Vec<String> {
    let mut serve = vec![
        "sh".to_owned(),
        "-c".to_owned(),
        format!("exec \"$0\" serve \"$@\" 2>>'{}'", log.display()),
        cli().to_string_lossy().into_owned(),
    ];
    serve.extend(extra.iter().map(|&f| f.to_owned()));
    serve.extend(p.flags());
    serve.extend(["--debounce-ms".to_owned(), "150".to_owned()]);
    serve
}

/// Runs the script in its own process group (killed if the test fails) and returns its
/// output once it exits.
fn run_client(args: &[&std::ffi::OsStr]) -> Output {
    run_client_with(args, &[])
}

/// [`run_client`] with more environment variables (inherited by the `serve`s it starts).
fn run_client_with(args: &[&std::ffi::OsStr], env: &[(&str, &std::ffi::OsStr)]) -> Output {
    let child = Command::new(python())
        .arg(script())
        .args(args)
        .envs(env.iter().copied())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .spawn()
        .expect("python starts");
    let guard = KillGroup(child.id());
    let output = child.wait_with_output().expect("python runs");
    // Reaped: its pid may be reused, so the guard must not signal it any more.
    guard.disarm();
    output
}

fn assert_scenario_passed(output: &Output, log: &str) {
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.lines().any(|l| l == "done"),
        "the Python client failed ({})\nstdout:\n{stdout}\nstderr:\n{}\nserve log:\n{log}",
        output.status,
        String::from_utf8_lossy(&output.stderr),
    );
    for step in ["listed:", "called:", "edited:", "removed:"] {
        assert!(stdout.contains(step), "no {step} step:\n{stdout}");
    }
}

/// Every fixture process this project started has exited (serve stopped them).
fn wait_all_stopped(p: &Project) {
    let pids: Vec<u64> = ["notes", "other"]
        .iter()
        .flat_map(|name| pids(p, name))
        .collect();
    assert!(!pids.is_empty(), "the servers never started");
    wait_until(&format!("the fixture processes {pids:?} to stop"), || {
        pids.iter().all(|pid| !alive(*pid))
    });
}

#[test]
fn the_python_sdk_over_stdio_lists_calls_and_follows_edits() {
    let p = Project::new();
    let plan = scenario(&p);
    let log = p.path("serve.log");
    // The session in serve's own process: its servers stop when it exits.
    let serve = serve_command(&p, &log, &["--no-daemon"]);
    let mut args: Vec<&std::ffi::OsStr> = vec!["stdio".as_ref(), plan.as_os_str(), "--".as_ref()];
    args.extend(serve.iter().map(std::ffi::OsStr::new));
    let output = run_client(&args);
    let log = fs::read_to_string(&log).unwrap_or_default();
    assert_scenario_passed(&output, &log);
    // The client closed stdin: serve stopped every server before it exited.
    wait_all_stopped(&p);
}

#[test]
fn the_python_sdk_over_http_lists_calls_and_follows_edits() {
    let p = Project::new();
    let plan = scenario(&p);
    let mut served = ServeHttp::start(&p);
    let output = run_client(&[
        "http".as_ref(),
        plan.as_os_str(),
        served.url.as_ref(),
        served.token_file.as_os_str(),
    ]);
    assert_scenario_passed(&output, &served.log());
    let token = fs::read_to_string(&served.token_file).unwrap_or_default();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        !token.trim().is_empty() && !stdout.contains(token.trim()),
        "the token was printed"
    );
    served.stop();
    wait_all_stopped(&p);
}

/// Two Python SDK clients, each starting `serve` (the default runtime: a session of the per-user
/// daemon) for the same project at once: one process per server for both, both hear
/// `list_changed` when a server is removed, and once both are gone every server stops after the
/// drain and the daemon exits.
#[test]
fn two_python_sdk_clients_in_one_project_share_one_server_process() {
    let p = Project::new();
    let plan = scenario(&p);
    let mut with_marker: serde_json::Value =
        serde_json::from_str(&fs::read_to_string(&plan).expect("scenario")).expect("JSON");
    with_marker["marker"] = json!(p.marker("notes"));
    fs::write(&plan, with_marker.to_string()).expect("scenario");
    let runtime = p.path("run");
    fs::create_dir_all(&runtime).expect("runtime dir");
    // The daemon first, with a short drain, so the test sees the servers stop; its idle exit
    // outlasts the Python clients' start (it counts from the daemon's start too).
    let daemon = Command::new(cli())
        .args(["daemon", "--drain-ms", "300", "--idle-exit-ms", "10000"])
        .env("XDG_RUNTIME_DIR", &runtime)
        .env("MCP_RECONCILE_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(fs::File::create(p.path("daemon.log")).expect("log"))
        .process_group(0)
        .spawn()
        .expect("daemon starts");
    let mut daemon = Group::new(daemon);
    let socket = runtime.join("mcp-reconcile/daemon.sock");
    wait_until("the daemon to listen", || {
        std::os::unix::net::UnixStream::connect(&socket).is_ok()
    });
    let log = p.path("serve.log");
    let serve = serve_command(&p, &log, &[]);
    let mut args: Vec<&std::ffi::OsStr> = vec!["pair".as_ref(), plan.as_os_str(), "--".as_ref()];
    args.extend(serve.iter().map(std::ffi::OsStr::new));
    let output = run_client_with(&args, &[("XDG_RUNTIME_DIR", runtime.as_os_str())]);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.lines().any(|l| l == "done"),
        "the Python clients failed ({})\nstdout:\n{stdout}\nstderr:\n{}\nserve log:\n{}\ndaemon log:\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr),
        fs::read_to_string(&log).unwrap_or_default(),
        fs::read_to_string(p.path("daemon.log")).unwrap_or_default(),
    );
    for step in ["listed and called in both:", "shared:", "removed:"] {
        assert!(stdout.contains(step), "no {step} step:\n{stdout}");
    }
    // Both serves attached to the test's daemon (not to one of their own).
    let daemon_log = fs::read_to_string(p.path("daemon.log")).unwrap_or_default();
    assert_eq!(
        daemon_log.matches(": attached session=").count(),
        2,
        "both sessions in the test's daemon:\n{daemon_log}"
    );
    // Both clients gone: every server stops after the drain, then the daemon exits.
    wait_all_stopped(&p);
    assert!(daemon.wait_exit(), "the daemon never exited");
}
