//! End-to-end: the per-user daemon (issue 12, item 1). Real `mcp-reconcile daemon` and `serve`
//! processes (a stdio `serve` attaches to the daemon by default; each in its own process
//! group, killed on drop), rmcp clients on the serves' stdio, real fixture servers behind the daemon. Every daemon runs in a private
//! `XDG_RUNTIME_DIR` of the test.

use crate::common;

use std::fs;
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::*;
use rmcp::model::CallToolRequestParams;
use rmcp::service::{NotificationContext, RunningService};
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use serde_json::{json, Value};

/// A private runtime dir: where the test's daemon listens.
struct Runtime {
    dir: PathBuf,
}

impl Runtime {
    fn new(p: &Project) -> Runtime {
        let dir = p.path("run");
        fs::create_dir_all(&dir).expect("runtime dir");
        Runtime { dir }
    }

    fn socket(&self) -> PathBuf {
        self.dir.join("mcp-reconcile/daemon.sock")
    }

    /// One request line to the daemon, its answer.
    fn ask(&self, request: &Value) -> Value {
        let mut stream = std::os::unix::net::UnixStream::connect(self.socket()).expect("daemon");
        stream
            .write_all(format!("{request}\n").as_bytes())
            .expect("send");
        let mut line = String::new();
        BufReader::new(stream).read_line(&mut line).expect("answer");
        serde_json::from_str(&line).expect("JSON answer")
    }
}

fn start_daemon(p: &Project, rt: &Runtime) -> Group {
    common::start_daemon(p, &rt.dir)
}

/// A `serve` (a daemon session: the default runtime of a stdio `serve`) with a client on its
/// stdio.
async fn attach(p: &Project, rt: &Runtime, env: &[(&str, &str)]) -> Served {
    attach_in(p, rt, env, "project").await
}

/// [`attach`] for the project directory `project` (same user settings).
async fn attach_in(p: &Project, rt: &Runtime, env: &[(&str, &str)], project: &str) -> Served {
    let (mut command, log) = serve_command(p, project, 150);
    command
        .env("XDG_RUNTIME_DIR", &rt.dir)
        .env("MCP_RECONCILE_LOG", "info")
        .envs(env.iter().copied());
    Served::spawn(command, log).await
}

/// A one-shot CLI command with the project's flags, against the test's daemon.
fn run_cli(p: &Project, rt: &Runtime, args: &[&str], flags: bool) -> (bool, String) {
    let out = cli_command(p, rt, args, flags).output().expect("runs");
    (out.status.success(), output_text(&out))
}

/// The CLI with `args` (and the project's flags when `flags`), for the test's daemon.
fn cli_command(p: &Project, rt: &Runtime, args: &[&str], flags: bool) -> std::process::Command {
    let mut command = std::process::Command::new(cli());
    command.args(args);
    if flags {
        command.args(p.flags());
    }
    command.env("XDG_RUNTIME_DIR", &rt.dir).stdin(Stdio::null());
    command
}

/// Runs the CLI with its stdout a pipe nobody reads any more: whether it succeeded, and its
/// stderr.
fn run_cli_into_closed_pipe(
    p: &Project,
    rt: &Runtime,
    args: &[&str],
    flags: bool,
) -> (bool, String) {
    let (reader, writer) = std::io::pipe().expect("pipe");
    drop(reader);
    let out = cli_command(p, rt, args, flags)
        .stdout(writer)
        .stderr(Stdio::piped())
        .output()
        .expect("runs");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_serves_share_one_server_process_and_the_last_client_stops_it() {
    let p = Project::new();
    let rt = Runtime::new(&p);
    p.write_settings(json!({"mcp": {"share": "project"}, "mcpServers": {
        "a": p.server("a", "echo,env"),
        "b": p.server("b", "echo"),
    }}));
    let mut daemon = start_daemon(&p, &rt);
    let mut one = attach(&p, &rt, &[("SESSION_MARK", "same")]).await;
    let mut two = attach(&p, &rt, &[("SESSION_MARK", "same")]).await;
    let watch_out = p.path("watch.out");
    let mut watch = Group::new(
        std::process::Command::new(cli())
            // `watch` joins the daemon by default.
            .arg("watch")
            .args(p.flags())
            .args(["--debounce-ms", "150"])
            .env("XDG_RUNTIME_DIR", &rt.dir)
            .env("SESSION_MARK", "same")
            .stdin(Stdio::null())
            .stdout(fs::File::create(&watch_out).expect("watch output"))
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .expect("watch starts"),
    );
    let watched = || fs::read_to_string(&watch_out).unwrap_or_default();
    let both = |names: &[String]| {
        names.iter().any(|n| n == "mcp__a__echo") && names.iter().any(|n| n == "mcp__b__echo")
    };
    one.wait_tools("a and b in the first session", both).await;
    two.wait_tools("a and b in the second session", both).await;
    // The session's start pass, as an in-process `watch` prints it: both connected, one tool
    // each.
    wait_until_async("watch shows a and b", || {
        let out = watched();
        out.contains("+ connect a") && out.contains("+ connect b") && out.contains("tools 1")
    })
    .await;
    assert!(
        watched().contains("+ connect a") && watched().contains("+ connect b"),
        "watch --daemon prints its session's plan: {}",
        watched()
    );
    assert_eq!(
        pids(&p, "a").len(),
        1,
        "one process of a for all three sessions"
    );
    assert_eq!(
        pids(&p, "b").len(),
        1,
        "one process of b for all three sessions"
    );
    // The server runs with the session's environment, not the daemon's.
    let seen = one
        .call_text("mcp__a__env", json!({"name": "SESSION_MARK"}))
        .await;
    assert!(seen.contains("same"), "{seen}");

    let status = rt.ask(&json!({"cmd": "status"}));
    let sessions = status["ok"]["sessions"].as_array().expect("sessions");
    assert_eq!(sessions.len(), 3, "{status}");
    for session in sessions {
        let servers: Vec<&str> = session["servers"]
            .as_array()
            .expect("servers")
            .iter()
            .filter_map(Value::as_str)
            .collect();
        assert_eq!(servers, ["a", "b"], "{status}");
    }
    let a_conn = status["ok"]["connections"]
        .as_array()
        .expect("connections")
        .iter()
        .find(|c| c["server"] == "a")
        .cloned()
        .expect("a is pooled");
    assert_eq!(
        a_conn["holders"].as_array().map(Vec::len),
        Some(3),
        "{status}"
    );

    // The commands with the same flags reach the daemon's sessions.
    let (ok, out) = run_cli(&p, &rt, &["status", "--json"], true);
    assert!(ok, "{out}");
    let servers: Vec<Value> =
        serde_json::from_str(out.lines().next().unwrap_or("[]")).expect("JSON");
    assert_eq!(
        pid_of(&servers, "a"),
        pids(&p, "a").first().copied(),
        "{out}"
    );
    assert_eq!(state_of(&servers, "a"), "connected", "{out}");
    let a_status = servers.iter().find(|s| s["name"] == "a").expect("a");
    assert_eq!(a_status["share"], "project", "{out}");
    assert_eq!(a_status["sessions"], 3, "{out}");
    // A dry run from the session's state: everything it holds is kept.
    let (ok, out) = run_cli(&p, &rt, &["plan", "--json"], true);
    assert!(ok, "{out}");
    assert!(out.contains("keep") && !out.contains("connect"), "{out}");
    let (ok, out) = run_cli(&p, &rt, &["reload"], true);
    assert!(ok && out.contains("reload requested"), "{out}");
    let (ok, out) = run_cli(&p, &rt, &["status"], true);
    assert!(ok, "{out}");
    assert_eq!(out.matches("daemon session serve-").count(), 2, "{out}");
    assert!(out.contains("holds: a, b"), "{out}");
    let (ok, out) = run_cli(&p, &rt, &["daemon", "--status"], false);
    assert!(ok, "{out}");
    assert_eq!(out.matches("session serve-").count(), 2, "{out}");
    assert_eq!(out.matches("session watch-").count(), 1, "{out}");
    assert!(out.contains("server a connected"), "{out}");
    // A reader that stops reading (`| head`) ends the command quietly, not with a panic.
    for (args, flags) in [
        (&["daemon", "--status", "--json"][..], false),
        (&["status", "--json"], true),
    ] {
        let (ok, err) = run_cli_into_closed_pipe(&p, &rt, args, flags);
        assert!(ok && !err.contains("panicked"), "{args:?}: {err}");
    }

    // Removing b: both clients hear list_changed and b's process stops after the drain.
    let b_pid = pids(&p, "b")[0];
    p.write_settings(
        json!({"mcp": {"share": "project"}, "mcpServers": { "a": p.server("a", "echo,env") }}),
    );
    one.tools_changed().await;
    two.tools_changed().await;
    let only_a = |names: &[String]| {
        names.iter().any(|n| n == "mcp__a__echo")
            && !names.iter().any(|n| n.starts_with("mcp__b__"))
    };
    one.wait_tools("b gone from the first session", only_a)
        .await;
    two.wait_tools("b gone from the second session", only_a)
        .await;
    wait_until_async("watch shows b gone", || {
        watched().contains("- disconnect b (removed)")
    })
    .await;
    assert!(
        watched().contains("change in "),
        "the pass says what triggered it, as an in-process watch does: {}",
        watched()
    );

    wait_until_async("b's process stops after the drain", || !alive(b_pid)).await;
    let a_pid = pids(&p, "a")[0];
    assert!(alive(a_pid), "a keeps running while it is held");

    // Closing every client stops every server after the drain, then the daemon exits.
    watch.signal(nix::sys::signal::Signal::SIGTERM);
    assert!(watch.wait_exit(), "watch stops on SIGTERM");
    one.close().await;
    assert!(alive(a_pid), "the second session still holds a");
    two.close().await;
    wait_until_async("a's process stops after the drain", || !alive(a_pid)).await;
    assert!(
        daemon.wait_exit(),
        "the daemon exits once it has no session"
    );
    assert!(!rt.socket().exists(), "the daemon removes its socket");
    assert_eq!(pids(&p, "a").len(), 1, "a was never started twice");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sessions_with_another_environment_get_their_own_process() {
    let p = Project::new();
    let rt = Runtime::new(&p);
    p.write_settings(json!({"mcpServers": { "a": p.server("a", "env") }}));
    let _daemon = start_daemon(&p, &rt);
    let one = attach(&p, &rt, &[("SESSION_MARK", "one")]).await;
    let two = attach(&p, &rt, &[("SESSION_MARK", "two")]).await;
    let has_a = |names: &[String]| names.iter().any(|n| n == "mcp__a__env");
    // The first listing is complete: the attach waits for the session's servers to start.
    assert!(has_a(&one.tool_names().await));
    assert!(has_a(&two.tool_names().await));
    assert_eq!(
        pids(&p, "a").len(),
        2,
        "another environment is another process"
    );
    let mark = json!({"name": "SESSION_MARK"});
    assert!(one
        .call_text("mcp__a__env", mark.clone())
        .await
        .contains("one"));
    assert!(two.call_text("mcp__a__env", mark).await.contains("two"));

    // A project server waits for approval in every session; `approve` with the same flags
    // admits it in each (the daemon's sessions watch the approvals file).
    p.write(
        &p.mcp_json(),
        &json!({"mcpServers": { "p": p.server("p", "echo") }}),
    );
    // Each serve prints the review and the approve command on its stderr (hints never reach
    // the MCP client).
    wait_until_async("both serves print the approval hint", || {
        let log = fs::read_to_string(p.path("serve.log")).unwrap_or_default();
        log.matches("\"p\" needs approval").count() == 2
    })
    .await;
    let (ok, out) = run_cli(&p, &rt, &["approve", "p"], true);
    assert!(ok, "{out}");
    let has_p = |names: &[String]| names.iter().any(|n| n == "mcp__p__echo");
    one.wait_tools("p approved in the first session", has_p)
        .await;
    two.wait_tools("p approved in the second session", has_p)
        .await;

    // `reconnect` restarts the server in the daemon's sessions.
    let before = pids(&p, "a").len();
    let (ok, out) = run_cli(&p, &rt, &["reconnect", "a"], true);
    assert!(ok, "{out}");
    wait_until_async("a restarted", || pids(&p, "a").len() > before).await;
    one.wait_tools("a back in the first session", has_a).await;
    two.wait_tools("a back in the second session", has_a).await;

    // A deleted settings file is held for a grace period, then read as empty: a goes.
    fs::remove_file(p.user_settings()).expect("delete the user settings");
    let without_a = |names: &[String]| {
        !names.iter().any(|n| n == "mcp__a__env") && names.iter().any(|n| n == "mcp__p__echo")
    };
    one.wait_tools("a gone from the first session", without_a)
        .await;
    two.wait_tools("a gone from the second session", without_a)
        .await;
}

#[test]
fn the_daemon_directory_and_socket_are_private() {
    use std::os::unix::fs::PermissionsExt;
    let p = Project::new();
    let rt = Runtime::new(&p);
    let dir = rt.dir.join("mcp-reconcile");
    // A directory of ours left open to others is tightened before the socket is bound.
    fs::create_dir_all(&dir).expect("dir");
    fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)).expect("chmod");
    let _daemon = start_daemon(&p, &rt);
    let mode = |path: &PathBuf| fs::metadata(path).expect("exists").permissions().mode() & 0o777;
    assert_eq!(mode(&dir), 0o700);
    assert_eq!(mode(&rt.socket()), 0o600);
    // A second daemon for the same directory leaves at once.
    let second = std::process::Command::new(cli())
        .arg("daemon")
        .env("XDG_RUNTIME_DIR", &rt.dir)
        .stdin(Stdio::null())
        .output()
        .expect("runs");
    assert!(second.status.success());
    assert!(
        String::from_utf8_lossy(&second.stderr).contains("already running"),
        "{second:?}"
    );
    // A malformed request gets an error, not a crash.
    let answer = rt.ask(&json!({"cmd": "nope"}));
    assert!(answer["error"].is_string(), "{answer}");
    assert!(rt.ask(&json!({"cmd": "status"}))["ok"].is_object());
    // A session the daemon cannot make is refused at once, with the reason.
    let missing = p.path("no-such-project");
    let (ok, out) = run_cli(
        &p,
        &rt,
        &["serve", "--daemon", "--project", &missing.to_string_lossy()],
        false,
    );
    assert!(!ok, "{out}");
    assert!(out.contains("no-such-project"), "{out}");
}

/// The daemon a `serve` started again in `rt`, once it answers; killed with its group when the
/// test ends (this test did not start it itself).
async fn restarted_daemon(rt: &Runtime) -> KillGroup {
    let start = Instant::now();
    loop {
        if let Ok(mut stream) = std::os::unix::net::UnixStream::connect(rt.socket()) {
            let _ = stream.write_all(b"{\"cmd\":\"status\"}\n");
            let mut line = String::new();
            let _ = BufReader::new(stream).read_line(&mut line);
            let pid = serde_json::from_str::<Value>(&line)
                .ok()
                .and_then(|answer| answer["ok"]["pid"].as_u64())
                .and_then(|pid| u32::try_from(pid).ok());
            if let Some(pid) = pid {
                return KillGroup(pid);
            }
        }
        assert!(start.elapsed() < PATIENCE, "no daemon came back");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_serve_restarts_a_dead_daemon_and_its_client_hears_list_changed() {
    let p = Project::new();
    let rt = Runtime::new(&p);
    p.write_settings(json!({"mcpServers": { "a": p.server("a", "echo,sleep") }}));
    let daemon = start_daemon(&p, &rt);
    let mut one = attach(&p, &rt, &[]).await;
    let has_a = |names: &[String]| names.iter().any(|n| n == "mcp__a__echo");
    one.wait_tools("a", has_a).await;
    let first = pids(&p, "a");
    assert_eq!(first.len(), 1);

    // The daemon dies (its servers with it) during a call; the call is answered with an
    // error, serve starts a new daemon and re-attaches.
    let client = one.client().peer().clone();
    let call = tokio::spawn(async move {
        let params = CallToolRequestParams::new("mcp__a__sleep").with_arguments(
            json!({"ms": 600_000})
                .as_object()
                .cloned()
                .unwrap_or_default(),
        );
        client.call_tool(params).await
    });
    // Running upstream once its progress arrives.
    one.progress().await;
    drop(daemon);
    let answered = tokio::time::timeout(PATIENCE, call)
        .await
        .expect("a call in flight is answered when the daemon dies")
        .expect("joined");
    assert!(answered.is_err(), "{answered:?}");
    wait_until_async("a stops with its daemon", || !alive(first[0])).await;
    one.tools_changed().await;
    let _restarted = restarted_daemon(&rt).await;
    one.wait_tools("a again in the new daemon", has_a).await;
    assert_eq!(pids(&p, "a").len(), 2, "the new daemon started a again");
    let echoed = one
        .call_text("mcp__a__echo", json!({"text": "still here"}))
        .await;
    assert!(echoed.contains("still here"), "{echoed}");
    one.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_without_cwd_runs_in_its_sessions_project_root() {
    let p = Project::new();
    let rt = Runtime::new(&p);
    let other = p.path("other");
    fs::create_dir_all(&other).expect("other project");
    let mut fixed = p.server("fixed", "echo");
    fixed["cwd"] = json!(p.dir.path().to_string_lossy());
    p.write_settings(json!({"mcp": {"share": "project"}, "mcpServers": { "a": p.server("a", "echo"), "fixed": fixed }}));
    let _daemon = start_daemon(&p, &rt);
    let one = attach(&p, &rt, &[]).await;
    let two = attach_in(&p, &rt, &[], "other").await;
    for session in [&one, &two] {
        session
            .wait_tools("a and fixed", |names| {
                names.iter().any(|n| n == "mcp__a__echo")
                    && names.iter().any(|n| n == "mcp__fixed__echo")
            })
            .await;
    }
    // Two project roots: two working directories for a, so two processes, each in its root.
    let cwd = |pid: u64| fs::read_link(format!("/proc/{pid}/cwd")).expect("cwd of a live pid");
    let mut dirs: Vec<PathBuf> = pids(&p, "a").into_iter().map(cwd).collect();
    dirs.sort();
    let mut roots = vec![
        p.path("project").canonicalize().expect("root"),
        other.canonicalize().expect("root"),
    ];
    roots.sort();
    assert_eq!(dirs, roots);
    // An absolute `cwd` is the same directory from either root: one process.
    assert_eq!(pids(&p, "fixed").len(), 1);
}

/// Language servers in a daemon session (SPEC §14): the language tools are offered and answer
/// from a real `vscode-json-language-server` that runs with the session's environment, `status`
/// shows it, removing its entry takes the tools away with `list_changed`, and a closed client
/// stops it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemon_session_runs_its_own_language_servers() {
    let server = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../node_modules/.bin/vscode-json-language-server");
    assert!(
        server.exists(),
        "{} is missing: run `bash scripts/setup.sh`",
        server.display()
    );
    let p = Project::new();
    let rt = Runtime::new(&p);
    fs::write(p.path("project/broken.json"), "{\"a\": 1,,}\n").expect("write");
    p.write_settings(json!({"mcpServers": {"a": p.server("a", "echo")}}));
    p.write(
        &p.user_lsp(),
        &json!({"json": {
            "command": server.to_string_lossy(),
            "args": ["--stdio"],
            "extensionToLanguage": {".json": "json"},
            "settings": {"json": {"validate": {"enable": true}}},
        }}),
    );
    let _daemon = start_daemon(&p, &rt);
    let mut one = attach(&p, &rt, &[("SESSION_MARK", "lsp-session")]).await;
    one.wait_tools("the language tools", |names| {
        names.iter().any(|n| n == "lsp_diagnostics") && names.iter().any(|n| n == "mcp__a__echo")
    })
    .await;
    let found = one
        .call_text("lsp_diagnostics", json!({"path": "broken.json"}))
        .await;
    let found: Value = serde_json::from_str(&found).expect("JSON diagnostics");
    assert!(
        found.as_array().is_some_and(|d| !d.is_empty()),
        "a syntax error is reported: {found}"
    );

    let (ok, out) = run_cli(&p, &rt, &["status", "--json"], true);
    assert!(ok, "{out}");
    let servers: Vec<Value> =
        serde_json::from_str(out.lines().next().unwrap_or("[]")).expect("JSON");
    let lsp = servers
        .iter()
        .find(|s| s["kind"] == "lsp" && s["name"] == "json")
        .cloned()
        .unwrap_or_else(|| panic!("the language server in status: {out}"));
    assert_eq!(lsp["state"], "connected", "{out}");
    let pid = lsp["pid"].as_u64().expect("a pid");
    let environ = fs::read(format!("/proc/{pid}/environ")).expect("environ");
    assert!(
        environ
            .split(|b| *b == 0)
            .any(|var| var == b"SESSION_MARK=lsp-session"),
        "the language server runs with the session's environment"
    );

    p.write(&p.user_lsp(), &json!({}));
    let start = Instant::now();
    loop {
        one.tools_changed().await;
        if !one.tool_names().await.iter().any(|n| n.starts_with("lsp_")) {
            break;
        }
        assert!(start.elapsed() < PATIENCE, "the language tools never left");
    }
    wait_until_async("the removed language server stops", || !alive(pid)).await;
    one.close().await;
}

/// A stdio `serve` whose daemon cannot be started (its runtime directory cannot be made) says
/// so and runs the session in its own process: the client is served all the same, and the
/// servers stop with it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_serve_without_a_usable_daemon_runs_the_session_itself() {
    let p = Project::new();
    p.write_settings(json!({"mcpServers": {"a": p.server("a", "echo")}}));
    // A file where the runtime directory should be: nothing can be created under it.
    let not_a_dir = p.path("not-a-dir");
    fs::write(&not_a_dir, "").expect("write");
    let rt = Runtime { dir: not_a_dir };
    let one = attach(&p, &rt, &[]).await;
    one.wait_tools("a's tools", |names| {
        names.iter().any(|n| n == "mcp__a__echo")
    })
    .await;
    let said = fs::read_to_string(p.path("serve.log")).unwrap_or_default();
    assert!(
        said.contains("the per-user daemon is not available"),
        "{said}"
    );
    let pid = pids(&p, "a")[0];
    one.close().await;
    assert!(!alive(pid), "the session's own server stops with it");
}

/// `watch --daemon` asks about a project server that waits for approval, as `watch` does (here
/// from a pipe): the answer is stored, the daemon's session starts the server, and its tools
/// show up — for a `serve` of the same files too.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn watch_daemon_asks_and_the_answer_starts_the_server() {
    let p = Project::new();
    let rt = Runtime::new(&p);
    p.write_settings(json!({"mcpServers": {"a": p.server("a", "echo")}}));
    p.write(
        &p.mcp_json(),
        &json!({"mcpServers": {"proj": p.server("proj", "echo")}}),
    );
    let _daemon = start_daemon(&p, &rt);
    let one = attach(&p, &rt, &[]).await;
    one.wait_tools("a's tools", |names| {
        names.iter().any(|n| n == "mcp__a__echo")
    })
    .await;
    assert_eq!(p.spawns("proj"), 0, "not before it is approved");
    let watch_out = p.path("watch.out");
    let (_watch, mut stdin) = asking_watch(&p, &rt, &watch_out);
    let watched = || fs::read_to_string(&watch_out).unwrap_or_default();
    wait_until_async("the question", || watched().contains("proj")).await;
    stdin.write_all(b"a\n").expect("answer");
    stdin.flush().expect("flush");
    wait_until_async("the answer is stored", || {
        watched().contains("\"proj\": approved")
    })
    .await;
    one.wait_tools("proj's tools in the serve", |names| {
        names.iter().any(|n| n == "mcp__proj__echo")
    })
    .await;
    wait_until_async("watch shows proj connected with its tools", || {
        watched()
            .lines()
            .any(|l| l.contains("+ connect proj") && l.contains("tools 1"))
    })
    .await;
    one.close().await;
}

// Relays of a shared server's own requests (issue 22): a server's elicitation, sampling, roots
// and log messages go only to the session whose call they belong to, and a server cannot make
// the daemon hold without bound what it sends its clients.

/// A client of one daemon session that answers elicitation with its own name and roots with its
/// own root, and keeps everything the gateway relayed to it.
#[derive(Clone)]
struct Answering {
    who: &'static str,
    heard: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl Answering {
    fn note(&self, what: String) {
        self.heard
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(what);
    }

    fn heard(&self) -> Vec<String> {
        self.heard
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .clone()
    }
}

#[allow(deprecated)] // roots and logging: deprecated by protocol 2026-07-28, relayed all the same
impl ClientHandler for Answering {
    async fn create_elicitation(
        &self,
        request: rmcp::model::ElicitRequestParams,
        _context: rmcp::service::RequestContext<RoleClient>,
    ) -> Result<rmcp::model::ElicitResult, rmcp::ErrorData> {
        let message = match &request {
            rmcp::model::ElicitRequestParams::FormElicitationParams { message, .. } => {
                message.clone()
            }
            other => format!("{other:?}"),
        };
        self.note(format!("elicitation: {message}"));
        Ok(
            rmcp::model::ElicitResult::new(rmcp::model::ElicitationAction::Accept)
                .with_content(json!({"name": self.who})),
        )
    }

    async fn list_roots(
        &self,
        _context: rmcp::service::RequestContext<RoleClient>,
    ) -> Result<rmcp::model::ListRootsResult, rmcp::ErrorData> {
        self.note("roots/list".to_owned());
        Ok(rmcp::model::ListRootsResult::new(vec![
            rmcp::model::Root::new(format!("file:///{}", self.who)),
        ]))
    }

    async fn on_logging_message(
        &self,
        params: rmcp::model::LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        self.note(format!("log: {}", params.data));
    }

    fn get_info(&self) -> rmcp::model::ClientConfig {
        let mut capabilities = rmcp::model::ClientCapabilities::default();
        capabilities.elicitation = Some(rmcp::model::ElicitationCapability::default());
        capabilities.roots = Some(Default::default());
        rmcp::model::ClientConfig::new(
            capabilities,
            rmcp::model::Implementation::new(self.who, "0"),
        )
    }
}

/// A `serve` attached to the test's daemon with its stdio piped (not yet read).
fn spawn_serve(
    p: &Project,
    rt: &Runtime,
) -> (Group, std::process::ChildStdout, std::process::ChildStdin) {
    let log = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(p.path("serve.log"))
        .expect("log");
    let mut child = std::process::Command::new(cli())
        .arg("serve")
        .args(p.flags())
        .env("XDG_RUNTIME_DIR", &rt.dir)
        .env("MCP_RECONCILE_LOG", "info")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(log)
        .process_group(0)
        .spawn()
        .expect("serve starts");
    let stdout = child.stdout.take().expect("stdout");
    let stdin = child.stdin.take().expect("stdin");
    (Group::new(child), stdout, stdin)
}

/// A daemon session whose client is an [`Answering`] named `who`.
struct Asker {
    _group: Group,
    client: RunningService<RoleClient, Answering>,
}

impl Asker {
    async fn start(p: &Project, rt: &Runtime, who: &'static str) -> Asker {
        let (group, stdout, stdin) = spawn_serve(p, rt);
        let handler = Answering {
            who,
            heard: Default::default(),
        };
        let transport = (
            tokio::process::ChildStdout::from_std(stdout).expect("async stdout"),
            tokio::process::ChildStdin::from_std(stdin).expect("async stdin"),
        );
        let client = tokio::time::timeout(PATIENCE, handler.serve(transport))
            .await
            .expect("handshake in time")
            .expect("the daemon's session completes the MCP handshake");
        Asker {
            _group: group,
            client,
        }
    }

    fn heard(&self) -> Vec<String> {
        self.client.service().heard()
    }

    /// Calls `name` in a task of its own; its text when it ends.
    fn call(&self, name: &str, args: Value) -> tokio::task::JoinHandle<String> {
        let peer = self.client.peer().clone();
        let name = name.to_owned();
        tokio::spawn(async move { text(&call(&peer, &name, args).await) })
    }
}

async fn joined(call: tokio::task::JoinHandle<String>) -> String {
    tokio::time::timeout(PATIENCE, call)
        .await
        .expect("the call ends in time")
        .expect("joined")
}

/// Two sessions (two `serve`s, same files and environment) share one fixture process. A
/// server's question, roots request and log message during B's call never reach A's client —
/// not while A's own call runs on the same process too (the daemon cannot tell whose it is:
/// declined, no roots, dropped), and not when the process asks later with nothing running
/// (both sessions have used it: declined). B's question while only B's call runs is B's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shared_servers_questions_never_reach_another_session() {
    let p = Project::new();
    let rt = Runtime::new(&p);
    p.write_settings(json!({"mcp": {"share": "project"}, "mcpServers": {"a": p.server("a", "echo,ask,ask_later,roots")}}));
    let _daemon = start_daemon(&p, &rt);
    let alpha = Asker::start(&p, &rt, "alpha").await;
    let beta = Asker::start(&p, &rt, "beta").await;
    assert_eq!(pids(&p, "a").len(), 1, "both sessions share one process");
    let go = |name: &str| p.path(name).to_string_lossy().into_owned();

    // Only B's call runs: its question is B's, answered by B.
    let alone = joined(beta.call("mcp__a__ask", json!({"text": "B alone"}))).await;
    assert_eq!(alone, "action=accept name=beta");

    // B's call waits to ask; then A's call starts and waits too ...
    let marker = || fs::read_to_string(p.marker("a")).unwrap_or_default();
    let b_call = beta.call(
        "mcp__a__ask",
        json!({"text": "B during A", "wait_for": go("go-b")}),
    );
    wait_until_async("B's call runs", || marker().contains("waiting B during A")).await;
    let a_call = alpha.call(
        "mcp__a__ask",
        json!({"text": "A's own", "wait_for": go("go-a")}),
    );
    wait_until_async("A's call runs", || marker().contains("waiting A's own")).await;
    // ... and B's asks while both run: the daemon cannot tell whose it is, so it is nobody's
    // (it used to go to the newest call's client: A).
    fs::write(go("go-b"), "").expect("go");
    assert_eq!(joined(b_call).await, "action=decline name=");
    let roots = joined(beta.call("mcp__a__roots", json!({"wait_for": go("go-b")}))).await;
    assert_eq!(roots, "no roots");
    // A's own question, once B's calls are over, is A's.
    fs::write(go("go-a"), "").expect("go");
    assert_eq!(joined(a_call).await, "action=accept name=alpha");

    // Asked with nothing running, after both used the process: nobody's.
    let scheduled = beta.call(
        "mcp__a__ask_later",
        json!({"text": "B later", "wait_for": go("go-later")}),
    );
    assert_eq!(joined(scheduled).await, "scheduled");
    let echoed = joined(alpha.call("mcp__a__echo", json!({"text": "A last"}))).await;
    assert_eq!(echoed, "A last");
    fs::write(go("go-later"), "").expect("go");
    wait_until_async("the late question is answered", || {
        marker().contains("asked B later:")
    })
    .await;
    assert!(
        marker().contains("asked B later: action=decline name="),
        "{}",
        marker()
    );

    let heard = alpha.heard();
    assert!(
        !heard.iter().any(|h| h.contains('B') || h == "roots/list"),
        "nothing of B's calls reached A's client: {heard:?}"
    );
    assert!(
        heard.contains(&"elicitation: A's own".to_owned()),
        "{heard:?}"
    );
    let heard = beta.heard();
    assert!(
        heard.contains(&"elicitation: B alone".to_owned()),
        "{heard:?}"
    );
    assert!(!heard.iter().any(|h| h.contains("A's own")), "{heard:?}");
}

/// A process's resident memory in kB (`VmRSS` of `/proc/PID/status`).
fn rss_kb(pid: u32) -> u64 {
    fs::read_to_string(format!("/proc/{pid}/status"))
        .expect("the process is alive")
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS")
}

/// A server that floods its caller — 100 000 log messages of 200 bytes, then 2 000
/// elicitations at once — to a client that reads nothing cannot grow the daemon without bound
/// (it used to hold every message and every question): log messages past the client's queue
/// are dropped, and past 16 questions waiting for an answer the rest are declined at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_flooding_server_cannot_grow_the_daemon_without_bound() {
    const LOGS: usize = 100_000;
    const ASKS: usize = 2_000;
    const PENDING_CAP: usize = 16;
    let p = Project::new();
    let rt = Runtime::new(&p);
    p.write_settings(json!({"mcpServers": {"a": p.server("a", "flood")}}));
    let daemon = start_daemon(&p, &rt);
    // A client that sends and never reads: serve's stdout fills, and so does the daemon's way
    // to it.
    let (_serve, _stdout, mut stdin) = spawn_serve(&p, &rt);
    let mut send = |message: Value| {
        stdin
            .write_all(format!("{message}\n").as_bytes())
            .and_then(|()| stdin.flush())
            .expect("serve reads its stdin");
    };
    send(
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {"elicitation": {}},
        "clientInfo": {"name": "never-reads", "version": "0"}}}),
    );
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    wait_until_async("a starts", || pids(&p, "a").len() == 1).await;
    let before = rss_kb(daemon.id());
    send(
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "mcp__a__flood",
        "arguments": {"logs": LOGS, "size": 200, "elicitations": ASKS}}}),
    );

    let marker = || fs::read_to_string(p.marker("a")).unwrap_or_default();
    let declined = || marker().matches("elicitation action=decline").count();
    let start = Instant::now();
    while declined() < ASKS - PENDING_CAP {
        assert!(
            start.elapsed() < PATIENCE * 4,
            "the questions past the cap are declined at once: {} of {ASKS} declined, {}",
            declined(),
            if marker().contains("flooded") {
                "every log message sent"
            } else {
                "log messages still going"
            }
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let grown_mb = rss_kb(daemon.id()).saturating_sub(before) / 1024;
    assert!(
        grown_mb < 200,
        "the daemon grew by {grown_mb} MB while relaying the flood"
    );
    assert_eq!(
        declined(),
        ASKS - PENDING_CAP,
        "16 wait for the client, the rest are declined"
    );
}

/// Two sessions share a server with a resource and one with logging: one session's
/// `resources/unsubscribe` does not end the other's subscription at the server (it reaches the
/// server with the last holder's), and each session's `logging/setLevel` is its own — the
/// server logs at the most verbose level asked for, and a session that asked for errors only
/// hears none of the info messages the other asked for (before, the last setLevel won for
/// both).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(deprecated)] // subscriptions and logging: deprecated by protocol 2026-07-28
async fn subscriptions_and_log_levels_are_each_sessions_own() {
    use rmcp::model::{
        LoggingLevel, SetLevelRequestParams, SubscribeRequestParams, UnsubscribeRequestParams,
    };
    let p = Project::new();
    let rt = Runtime::new(&p);
    let mut a = p.server("a", "echo");
    if let Some(args) = a["args"].as_array_mut() {
        args.extend([json!("--resources"), json!("1")]);
    }
    let reference = json!({"command": fixture(), "args": ["--conformance-reference"]});
    p.write_settings(
        json!({"mcp": {"share": "project"}, "mcpServers": {"a": a, "ref": reference}}),
    );
    let _daemon = start_daemon(&p, &rt);
    let alpha = Asker::start(&p, &rt, "alpha").await;
    let beta = Asker::start(&p, &rt, "beta").await;
    assert_eq!(pids(&p, "a").len(), 1, "both sessions share one process");
    let uri = "fixture://resources/1";
    let unsubscribed = || {
        fs::read_to_string(p.marker("a"))
            .unwrap_or_default()
            .contains(&format!("unsubscribe {uri}"))
    };
    for session in [&alpha, &beta] {
        session
            .client
            .subscribe(SubscribeRequestParams::new(uri))
            .await
            .expect("subscribe");
    }
    alpha
        .client
        .unsubscribe(UnsubscribeRequestParams::new(uri))
        .await
        .expect("unsubscribe");
    assert!(!unsubscribed(), "B still holds the subscription");
    beta.client
        .unsubscribe(UnsubscribeRequestParams::new(uri))
        .await
        .expect("unsubscribe");
    assert!(
        unsubscribed(),
        "the last holder's unsubscribe reaches the server"
    );

    beta.client
        .set_level(SetLevelRequestParams::new(LoggingLevel::Debug))
        .await
        .expect("setLevel");
    alpha
        .client
        .set_level(SetLevelRequestParams::new(LoggingLevel::Error))
        .await
        .expect("setLevel");
    let logs = |session: &Asker| {
        session
            .heard()
            .iter()
            .filter(|h| h.starts_with("log:"))
            .count()
    };
    for (session, expected) in [(&beta, 3), (&alpha, 0), (&beta, 6)] {
        let said = joined(session.call("mcp__ref__test_tool_with_logging", json!({}))).await;
        assert_eq!(said, "Logging test completed");
        if expected > 0 {
            let start = Instant::now();
            while logs(&beta) < expected {
                assert!(
                    start.elapsed() < PATIENCE,
                    "B asked for debug and hears the info messages: {:?}",
                    beta.heard()
                );
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }
    assert_eq!(
        logs(&alpha),
        0,
        "A asked for errors only: {:?}",
        alpha.heard()
    );
    assert_eq!(logs(&beta), 6, "{:?}", beta.heard());
}

/// Two projects' sessions share one process (an absolute `cwd`): `reconnect` from one project
/// does not restart it under the other project's session — it is refused with a message that
/// says how many other sessions hold it (it used to restart it) — and once the other session
/// has gone, the same `reconnect` restarts it.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reconnect_leaves_a_process_another_project_shares_running() {
    let p = Project::new();
    let rt = Runtime::new(&p);
    let other = p.path("other");
    fs::create_dir_all(&other).expect("other project");
    let mut shared = p.server("a", "echo");
    shared["cwd"] = json!(p.dir.path().to_string_lossy());
    p.write_settings(json!({"mcp": {"share": "project"}, "mcpServers": {"a": shared}}));
    let _daemon = start_daemon(&p, &rt);
    let one = attach(&p, &rt, &[]).await;
    let two = attach_in(&p, &rt, &[], "other").await;
    let has_a = |names: &[String]| names.iter().any(|n| n == "mcp__a__echo");
    one.wait_tools("a in the first project", has_a).await;
    two.wait_tools("a in the other project", has_a).await;
    assert_eq!(pids(&p, "a").len(), 1, "one process for both projects");

    let (ok, out) = run_cli(&p, &rt, &["reconnect", "a"], true);
    assert!(!ok, "{out}");
    assert!(
        out.contains("\"a\" is shared with 1 other session"),
        "{out}"
    );
    assert_eq!(
        pids(&p, "a").len(),
        1,
        "not restarted under the other project"
    );
    let echoed = two
        .call_text("mcp__a__echo", json!({"text": "still"}))
        .await;
    assert_eq!(echoed, "still");

    two.close().await;
    let (ok, out) = run_cli(&p, &rt, &["reconnect", "a"], true);
    assert!(ok, "{out}");
    wait_until_async("a restarted", || pids(&p, "a").len() == 2).await;
    one.wait_tools("a back", has_a).await;
}

/// A `serve` whose daemon died puts its new session where the client left the old one: the
/// client's resource subscription reaches the new server process and its log level holds
/// (before, both were silently lost with the daemon).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
#[allow(deprecated)] // subscriptions and logging: deprecated by protocol 2026-07-28
async fn a_restarted_daemon_gets_the_clients_subscriptions_and_log_level_again() {
    use rmcp::model::{LoggingLevel, SetLevelRequestParams, SubscribeRequestParams};
    let p = Project::new();
    let rt = Runtime::new(&p);
    let mut a = p.server("a", "echo");
    if let Some(args) = a["args"].as_array_mut() {
        args.extend([json!("--resources"), json!("1")]);
    }
    let reference = json!({"command": fixture(), "args": ["--conformance-reference"]});
    p.write_settings(json!({"mcpServers": {"a": a, "ref": reference}}));
    let daemon = start_daemon(&p, &rt);
    let alpha = Asker::start(&p, &rt, "alpha").await;
    let uri = "fixture://resources/1";
    alpha
        .client
        .subscribe(SubscribeRequestParams::new(uri))
        .await
        .expect("subscribe");
    alpha
        .client
        .set_level(SetLevelRequestParams::new(LoggingLevel::Error))
        .await
        .expect("setLevel");
    let subscribes = || {
        fs::read_to_string(p.marker("a"))
            .unwrap_or_default()
            .matches(&format!("subscribe {uri}"))
            .count()
    };
    assert_eq!(subscribes(), 1);

    drop(daemon);
    let _restarted = restarted_daemon(&rt).await;
    wait_until_async("the new a process gets the subscription again", || {
        subscribes() == 2
    })
    .await;
    assert_eq!(pids(&p, "a").len(), 2, "a new process of a");

    let start = Instant::now();
    loop {
        let tools = alpha.client.list_all_tools().await.unwrap_or_default();
        if tools
            .iter()
            .any(|t| t.name == "mcp__ref__test_tool_with_logging")
        {
            break;
        }
        assert!(start.elapsed() < PATIENCE, "ref never came back");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let said = joined(alpha.call("mcp__ref__test_tool_with_logging", json!({}))).await;
    assert_eq!(said, "Logging test completed");
    let logs: Vec<String> = alpha
        .heard()
        .into_iter()
        .filter(|h| h.starts_with("log:"))
        .collect();
    assert!(
        logs.is_empty(),
        "the client asked for errors only: {logs:?}"
    );
}

/// On a process two sessions use, the `roots/list` a server sends in answer to one client's
/// `notifications/roots/list_changed` (nothing running) gets that client's roots — not none
/// (nobody's, as any other idle request of a shared process), and never the other client's.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn roots_asked_after_a_clients_list_changed_are_that_clients() {
    let p = Project::new();
    let rt = Runtime::new(&p);
    p.write_settings(
        json!({"mcp": {"share": "project"}, "mcpServers": {"a": p.server("a", "echo,roots")}}),
    );
    let _daemon = start_daemon(&p, &rt);
    let alpha = Asker::start(&p, &rt, "alpha").await;
    let beta = Asker::start(&p, &rt, "beta").await;
    assert_eq!(pids(&p, "a").len(), 1, "both sessions share one process");
    for session in [&alpha, &beta] {
        let echoed = joined(session.call("mcp__a__echo", json!({"text": "used"}))).await;
        assert_eq!(echoed, "used");
    }
    let answers = || {
        fs::read_to_string(p.marker("a"))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.strip_prefix("roots after list_changed: "))
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    for (n, (session, root)) in [(&alpha, "file:///alpha"), (&beta, "file:///beta")]
        .into_iter()
        .enumerate()
    {
        session
            .client
            .notify_roots_list_changed()
            .await
            .expect("roots/list_changed");
        wait_until_async("the server asks for the roots again", || {
            answers().len() > n
        })
        .await;
        assert_eq!(answers()[n], root, "{:?}", answers());
    }
}

/// The default stdio `serve` (a daemon session) says on its stderr what `serve --no-daemon`
/// says: a settings file that is not JSON, and a server whose command does not exist.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_serve_says_what_is_wrong_with_the_files_on_stderr() {
    let p = Project::new();
    let rt = Runtime::new(&p);
    fs::write(p.user_settings(), "{ \"mcpServers\": { not json").expect("broken settings");
    let _daemon = start_daemon(&p, &rt);
    let one = attach(&p, &rt, &[]).await;
    let log = || fs::read_to_string(p.path("serve.log")).unwrap_or_default();
    wait_until_async("the broken settings file on stderr", || {
        log()
            .lines()
            .any(|l| l.starts_with("! ") && l.contains("user-settings.json"))
    })
    .await;
    p.write_settings(json!({"mcpServers": {
        "gone": {"command": p.path("no-such-program").to_string_lossy()},
    }}));
    wait_until_async("the missing command on stderr", || {
        log().contains("gone") && log().contains("no-such-program")
    })
    .await;
    one.close().await;
}

/// A `watch` that cannot reach or start the daemon says so and runs the session itself.
#[test]
fn a_watch_without_a_usable_daemon_runs_the_session_itself() {
    let p = Project::new();
    p.write_settings(json!({"mcpServers": {"a": p.server("a", "echo")}}));
    // The runtime directory cannot be made: a file stands where its parent should be.
    fs::write(p.path("not-a-dir"), "").expect("file");
    let out = p.path("watch.out");
    let err = p.path("watch.err");
    let _watch = Group::new(
        std::process::Command::new(cli())
            .arg("watch")
            .args(p.flags())
            .arg("--no-prompt")
            .env("XDG_RUNTIME_DIR", p.path("not-a-dir/run"))
            .stdin(Stdio::null())
            .stdout(fs::File::create(&out).expect("watch output"))
            .stderr(fs::File::create(&err).expect("watch errors"))
            .process_group(0)
            .spawn()
            .expect("watch starts"),
    );
    wait_until("the session runs here", || {
        fs::read_to_string(&out)
            .unwrap_or_default()
            .contains("+ connect a")
    });
    let said = fs::read_to_string(&err).unwrap_or_default();
    assert!(
        said.contains("running the session in this process"),
        "{said}"
    );
}

/// Through the default `serve` (a daemon session), a tool of a server that keeps failing says
/// what the session knows — backing off, when it is retried, its stderr — as it does with
/// `--no-daemon`, not a bare "not found".
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_default_serve_says_a_failing_servers_tool_is_backing_off() {
    let p = Project::new();
    let rt = Runtime::new(&p);
    let mut failing = p.server("failing", "echo");
    if let Some(args) = failing["args"].as_array_mut() {
        args.extend([
            json!("--stderr-lines"),
            json!("1"),
            json!("--exit-immediately"),
        ]);
    }
    p.write_settings(json!({"mcpServers": {"failing": failing}}));
    let _daemon = start_daemon(&p, &rt);
    let one = attach(&p, &rt, &[]).await;
    one.backing_off("failing", "mcp__failing__echo").await;
    one.close().await;
}

/// `watch` on the daemon prints what `watch --no-daemon` prints for a deleted settings file
/// (`file missing`, not `removed`) and for language servers, and `[A]ll` approves every later
/// server too.
#[test]
fn watch_on_the_daemon_says_file_missing_and_remembers_approve_all() {
    let p = Project::new();
    let rt = Runtime::new(&p);
    p.write_settings(json!({"mcpServers": {"a": p.server("a", "echo")}}));
    p.write(
        &p.user_lsp(),
        &json!({"json": {
            "command": workspace_root()
                .join("node_modules/.bin/vscode-json-language-server")
                .to_string_lossy(),
            "args": ["--stdio"],
            "extensionToLanguage": {".json": "json"},
        }}),
    );
    p.write(
        &p.mcp_json(),
        &json!({"mcpServers": {"p1": p.server("p1", "echo")}}),
    );
    let _daemon = start_daemon(&p, &rt);
    let watch_out = p.path("watch.out");
    let (_watch, mut stdin) = asking_watch(&p, &rt, &watch_out);
    let watched = || fs::read_to_string(&watch_out).unwrap_or_default();
    wait_until("the language server's plan", || {
        watched().contains("language servers:") && watched().contains("connect json")
    });
    wait_until("the question about p1", || watched().contains("p1"));
    stdin.write_all(b"A\n").expect("answer");
    stdin.flush().expect("flush");
    wait_until("p1 approved", || {
        watched().contains("\"p1\": approved (and every later one)")
    });
    // A later project server is approved without a question.
    p.write(
        &p.mcp_json(),
        &json!({"mcpServers": {"p1": p.server("p1", "echo"), "p2": p.server("p2", "echo")}}),
    );
    wait_until("p2 approved too", || watched().contains("\"p2\": approved"));
    wait_until("p2 connected", || watched().contains("+ connect p2"));
    // The user settings deleted for good: `file missing` once the grace has passed.
    fs::remove_file(p.user_settings()).expect("delete");
    wait_until("a stopped as file missing", || {
        watched().contains("- disconnect a (file missing)")
    });
}

/// A `watch` for `p`'s files (a session of the daemon in `rt`, as by default) whose questions are
/// answered on the returned stdin; its stdout goes to `out`.
fn asking_watch(
    p: &Project,
    rt: &Runtime,
    out: &std::path::Path,
) -> (Group, std::process::ChildStdin) {
    let mut watch = std::process::Command::new(cli())
        .arg("watch")
        .args(p.flags())
        .args(["--debounce-ms", "150"])
        .env("XDG_RUNTIME_DIR", &rt.dir)
        .stdin(Stdio::piped())
        .stdout(fs::File::create(out).expect("watch output"))
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .expect("watch starts");
    let stdin = watch.stdin.take().expect("stdin");
    (Group::new(watch), stdin)
}

/// `serve` never adopts itself on the daemon either: the session's files are read there, and an
/// entry that runs this binary's `serve` is skipped with the same line, never started.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_daemon_session_skips_an_entry_that_runs_serve_itself() {
    let p = Project::new();
    let rt = Runtime::new(&p);
    p.write_settings(json!({"mcpServers": {
        "notes": p.server("notes", "echo"),
        // Its own HOME and runtime dir keep a regression inside this test.
        "reconcile": {"command": cli().to_string_lossy(), "args": ["serve", "--layout", "qwen"],
                      "env": {"HOME": p.path("home").to_string_lossy(),
                              "XDG_RUNTIME_DIR": rt.dir.to_string_lossy()}},
    }}));
    let daemon = start_daemon(&p, &rt);
    let one = attach(&p, &rt, &[]).await;
    wait_until_async("notes connects", || p.spawns("notes") == 1).await;
    let tools = one.tool_names().await;
    assert!(tools.contains(&"mcp__notes__echo".to_owned()), "{tools:?}");
    assert!(
        tools.iter().all(|t| !t.starts_with("mcp__reconcile__")),
        "{tools:?}"
    );
    let log = || fs::read_to_string(p.path("serve.log")).unwrap_or_default();
    wait_until_async("the skip on the client's stderr", || {
        log().contains("server `reconcile` runs this gateway itself")
    })
    .await;
    assert_eq!(nested_serves(daemon.id()), Vec::<u32>::new(), "{}", log());
    one.close().await;
}
