//! The connection layer against real servers: the workspace's fixture server (stdio and
//! streamable HTTP) and `@modelcontextprotocol/server-everything` (stdio, streamable HTTP and
//! legacy SSE). Every process a test starts is in its own process group, killed by a guard.
//!
//! The fixture is built on first use (`cargo build -p mcp-reconcile-fixture` into this test's
//! target dir). server-everything comes from `npm ci` at the repository root.

use crate::common;

use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use mcp_reconcile::transport::{connect, ConnEvent, ConnectErrorKind, ConnectOptions, Connection};
use mcp_reconcile_kernel::{json, ServerConfig, Value};
use serde_json::json;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::mpsc;

use common::{alive, wait_until_async, workspace_root, KillGroup};

/// Generous: the machine is shared and slow; nothing asserts on durations.
const PATIENCE: Duration = Duration::from_secs(30);
const HANDSHAKE: Duration = Duration::from_secs(30);

// ---------------------------------------------------------------------------------------------
// helpers

/// `target/<profile>/mcp-fixture-server` next to this test binary, built once per test run.
fn fixture() -> &'static str {
    static BIN: OnceLock<String> = OnceLock::new();
    BIN.get_or_init(|| {
        let exe = std::env::current_exe().expect("test executable path");
        let profile_dir = exe
            .parent()
            .and_then(Path::parent)
            .expect("target/<profile>/deps/<test>");
        let target_dir = profile_dir.parent().expect("target dir");
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
        let mut build = Command::new(cargo);
        build
            .args([
                "build",
                "--quiet",
                "-p",
                "mcp-reconcile-fixture",
                "--target-dir",
            ])
            .arg(target_dir)
            .current_dir(workspace_root());
        if profile_dir.file_name().is_some_and(|n| n == "release") {
            build.arg("--release");
        }
        let status = build.status().expect("running cargo build for the fixture");
        assert!(
            status.success(),
            "cargo build -p mcp-reconcile-fixture failed"
        );
        let bin = profile_dir.join("mcp-fixture-server");
        assert!(bin.exists(), "{} was not built", bin.display());
        bin.to_string_lossy().into_owned()
    })
}

/// server-everything's entry point; fails with what to do when `npm ci` was not run.
fn everything() -> String {
    let entry =
        workspace_root().join("node_modules/@modelcontextprotocol/server-everything/dist/index.js");
    assert!(
        entry.exists(),
        "{} is missing: run `npm ci` at the repository root ({}) first",
        entry.display(),
        workspace_root().display()
    );
    entry.to_string_lossy().into_owned()
}

fn config(value: serde_json::Value) -> ServerConfig {
    match json::parse(&value.to_string()).expect("valid json") {
        Value::Object(object) => ServerConfig::new(object),
        other => panic!("expected an object, got {other:?}"),
    }
}

fn fixture_config(args: &[&str]) -> ServerConfig {
    config(json!({"command": fixture(), "args": args}))
}

fn options(timeout: Duration) -> (ConnectOptions, mpsc::UnboundedReceiver<ConnEvent>) {
    let (events, rx) = mpsc::unbounded_channel();
    (
        ConnectOptions {
            generation: 7,
            events,
            handshake_timeout: timeout,
            base_dir: None,
            launch: None,
            tokens: None,
            elicitation: None,
        },
        rx,
    )
}

async fn connect_ok(
    name: &str,
    cfg: &ServerConfig,
) -> (Connection, mpsc::UnboundedReceiver<ConnEvent>) {
    let (opts, rx) = options(HANDSHAKE);
    match connect(name, cfg, opts).await {
        Ok(conn) => (conn, rx),
        Err(e) => panic!("connecting {name} failed ({:?}): {e}", e.kind),
    }
}

fn tool_names(conn: &Connection) -> Vec<String> {
    conn.catalog()
        .tools
        .iter()
        .map(|t| t.name.to_string())
        .collect()
}

async fn call_text(conn: &Connection, tool: &str, args: serde_json::Value) -> String {
    let serde_json::Value::Object(args) = args else {
        panic!("arguments must be an object")
    };
    let result = conn
        .call_tool(tool, Some(args))
        .await
        .unwrap_or_else(|e| panic!("calling {tool}: {e}"));
    assert_ne!(
        result.is_error,
        Some(true),
        "{tool} failed: {:?}",
        result.content
    );
    result
        .content
        .first()
        .and_then(|c| c.as_text())
        .map(|t| t.text.clone())
        .unwrap_or_else(|| panic!("{tool} returned no text: {:?}", result.content))
}

async fn next_event(rx: &mut mpsc::UnboundedReceiver<ConnEvent>) -> ConnEvent {
    tokio::time::timeout(PATIENCE, rx.recv())
        .await
        .expect("no event in time")
        .expect("event channel closed")
}

async fn closed_error(rx: &mut mpsc::UnboundedReceiver<ConnEvent>) -> String {
    loop {
        match next_event(rx).await {
            ConnEvent::Closed {
                server,
                generation,
                error,
            } => {
                eprintln!("Closed: {error}");
                assert_eq!(generation, 7);
                assert!(error.contains(&format!("`{server}`")), "{error}");
                return error;
            }
            ConnEvent::CatalogChanged { .. } => continue,
        }
    }
}

/// Live processes whose process group is `pgid`.
fn group_members(pgid: u32) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| {
            std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .ok()
                .and_then(|stat| {
                    let (_, rest) = stat.rsplit_once(')')?;
                    let mut fields = rest.split_whitespace();
                    let state = fields.next()?;
                    let pgrp: u32 = fields.nth(1)?.parse().ok()?;
                    Some(state != "Z" && pgrp == pgid)
                })
                .unwrap_or(false)
        })
        .collect()
}

/// The `child <pid>` / `server <pid>` lines of a fixture marker file.
fn marker_pid(marker: &Path, kind: &str) -> Option<u32> {
    std::fs::read_to_string(marker)
        .ok()?
        .lines()
        .find_map(|line| line.strip_prefix(&format!("{kind} "))?.trim().parse().ok())
}

async fn wait_for_marker(marker: &Path, kind: &str) -> u32 {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        if let Some(pid) = marker_pid(marker, kind) {
            return pid;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no `{kind}` line in {}",
            marker.display()
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// A server process started by a test, in its own group; the group is SIGKILLed on drop.
struct Spawned {
    child: tokio::process::Child,
    group: KillGroup,
}

impl Spawned {
    fn start(mut command: tokio::process::Command) -> Spawned {
        command
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .process_group(0)
            .kill_on_drop(true);
        let child = command.spawn().expect("spawning a test server");
        let group = KillGroup(child.id().expect("pid"));
        Spawned { child, group }
    }

    fn kill(&self) {
        self.group.kill();
    }
}

/// A loopback port that was free a moment ago.
fn free_port() -> u16 {
    TcpListener::bind((Ipv4Addr::LOCALHOST, 0))
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("binding an ephemeral port")
}

async fn wait_listening(port: u16, server: &mut Spawned) {
    let addr = SocketAddr::from((Ipv4Addr::LOCALHOST, port));
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while TcpStream::connect_timeout(&addr, Duration::from_millis(200)).is_err() {
        if let Ok(Some(status)) = server.child.try_wait() {
            panic!("the server exited before listening on {port}: {status}");
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "nothing listens on 127.0.0.1:{port}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// server-everything in `mode` (`sse` or `streamableHttp`) on a free loopback port.
async fn start_everything(mode: &str) -> (Spawned, u16) {
    let entry = everything();
    let port = free_port();
    let mut command = tokio::process::Command::new("node");
    command.arg(entry).arg(mode).env("PORT", port.to_string());
    let mut server = Spawned::start(command);
    wait_listening(port, &mut server).await;
    (server, port)
}

// ---------------------------------------------------------------------------------------------
// stdio fixture

#[tokio::test]
async fn stdio_fixture_lists_its_catalog_and_answers_with_env_cwd_and_pid() {
    let dir = tempfile::tempdir().expect("temp dir");
    std::fs::create_dir(dir.path().join("work")).expect("mkdir");
    let cfg = config(json!({
        "command": fixture(),
        "args": ["--tools", "echo,env,pid", "--prompts", "greet", "--resources", "2",
                 "--marker", "spawns.txt"],
        "env": {"GREETING": "hello from env"},
        "cwd": "work",
    }));
    let (mut opts, _rx) = options(HANDSHAKE);
    opts.base_dir = Some(dir.path().to_path_buf());
    let conn = connect("fx", &cfg, opts).await.expect("connects");

    assert_eq!(tool_names(&conn), ["echo", "env", "pid"]);
    assert_eq!(conn.catalog().prompts.len(), 1);
    assert_eq!(conn.catalog().resources.len(), 2);
    let pid = conn.pid().expect("stdio has a pid");
    assert_eq!(call_text(&conn, "pid", json!({})).await, pid.to_string());
    assert_eq!(
        call_text(&conn, "env", json!({"name": "GREETING"})).await,
        "hello from env"
    );
    assert!(
        call_text(&conn, "env", json!({"name": "PATH"}))
            .await
            .contains('/'),
        "env is merged over the host environment"
    );
    assert_eq!(call_text(&conn, "echo", json!({"text": "hi"})).await, "hi");
    // The relative marker path landed in the relative cwd, resolved against base_dir.
    assert_eq!(
        marker_pid(&dir.path().join("work/spawns.txt"), "server"),
        Some(pid)
    );

    conn.close().await;
    assert!(!alive(u64::from(pid)), "close() reaps the server");
}

#[tokio::test]
async fn a_server_without_tools_capability_has_an_empty_catalog() {
    let (conn, _rx) = connect_ok("none", &fixture_config(&["--tools", ""])).await;
    assert!(conn.catalog().prompts.is_empty());
    assert!(conn.catalog().resources.is_empty());
    assert!(conn.catalog().tools.is_empty());
    conn.close().await;
}

#[tokio::test]
async fn list_changed_sends_the_fresh_catalog() {
    let (conn, mut rx) =
        connect_ok("late", &fixture_config(&["--change-tools-after", "300"])).await;
    assert_eq!(tool_names(&conn), ["echo"]);
    match next_event(&mut rx).await {
        ConnEvent::CatalogChanged {
            server,
            generation,
            catalog,
        } => {
            assert_eq!(server, "late");
            assert_eq!(generation, 7);
            let names: Vec<_> = catalog.tools.iter().map(|t| t.name.to_string()).collect();
            assert_eq!(names, ["echo", "late"]);
        }
        other => panic!("expected CatalogChanged, got {other:?}"),
    }
    assert_eq!(call_text(&conn, "late", json!({})).await, "late");
    conn.close().await;
}

#[tokio::test]
async fn a_crash_is_reported_with_the_exit_status_and_stderr() {
    let (conn, mut rx) = connect_ok("crashy", &fixture_config(&["--crash-after", "2000"])).await;
    let pid = conn.pid().expect("pid");
    let error = closed_error(&mut rx).await;
    assert!(error.contains("fixture: crashing as asked"), "{error}");
    assert!(error.contains("exit status: 1"), "{error}");
    assert!(!alive(u64::from(pid)));
    let call = conn.call_tool("echo", None).await.expect_err("closed");
    assert!(call.message.contains("`crashy`"), "{call}");
    conn.close().await;
}

#[tokio::test]
async fn a_hung_handshake_times_out_and_leaves_no_process() {
    let dir = tempfile::tempdir().expect("temp dir");
    let marker = dir.path().join("marker");
    let marker_arg = marker.to_string_lossy().into_owned();
    let cfg = fixture_config(&[
        "--hang-handshake",
        "--stderr-lines",
        "2",
        "--marker",
        &marker_arg,
    ]);
    let (opts, _rx) = options(Duration::from_millis(4000));
    let error = connect("hang", &cfg, opts)
        .await
        .expect_err("must time out");
    eprintln!("{:?}: {error}", error.kind);
    assert_eq!(error.kind, ConnectErrorKind::Timeout, "{error}");
    assert!(
        error.message.contains("`hang`") && error.message.contains("4000 ms"),
        "{error}"
    );
    assert!(
        error.message.contains("fixture: stderr line 2 of 2"),
        "{error}"
    );
    let pid = marker_pid(&marker, "server").expect("the fixture started");
    assert!(
        !alive(u64::from(pid)),
        "the timed-out server {pid} is still running"
    );
}

#[tokio::test]
async fn a_server_that_exits_at_once_fails_the_handshake_with_its_stderr() {
    let cfg = fixture_config(&["--exit-immediately", "3", "--stderr-lines", "1"]);
    let (opts, _rx) = options(HANDSHAKE);
    let error = connect("quits", &cfg, opts).await.expect_err("must fail");
    eprintln!("{:?}: {error}", error.kind);
    assert_eq!(error.kind, ConnectErrorKind::Handshake, "{error}");
    assert!(error.message.contains("exit status: 3"), "{error}");
    assert!(
        error.message.contains("fixture: stderr line 1 of 1"),
        "{error}"
    );
}

#[tokio::test]
async fn close_kills_the_grandchild_too() {
    let dir = tempfile::tempdir().expect("temp dir");
    let marker = dir.path().join("marker");
    let marker_arg = marker.to_string_lossy().into_owned();
    let (conn, _rx) = connect_ok(
        "parent",
        &fixture_config(&["--spawn-child", "--marker", &marker_arg]),
    )
    .await;
    let pid = conn.pid().expect("pid");
    let child = wait_for_marker(&marker, "child").await;
    assert!(
        alive(u64::from(child)),
        "the grandchild runs while connected"
    );
    conn.close().await;
    assert!(!alive(u64::from(pid)));
    wait_until_async(&format!("process {child} to exit"), || {
        !alive(u64::from(child))
    })
    .await;
    assert!(group_members(pid).is_empty());
}

#[tokio::test]
async fn a_crash_also_takes_down_the_grandchild() {
    let dir = tempfile::tempdir().expect("temp dir");
    let marker = dir.path().join("marker");
    let marker_arg = marker.to_string_lossy().into_owned();
    let cfg = fixture_config(&[
        "--spawn-child",
        "--marker",
        &marker_arg,
        "--crash-after",
        "2000",
    ]);
    let (conn, mut rx) = connect_ok("orphaner", &cfg).await;
    let child = wait_for_marker(&marker, "child").await;
    closed_error(&mut rx).await;
    wait_until_async(&format!("process {child} to exit"), || {
        !alive(u64::from(child))
    })
    .await;
    conn.close().await;
}

#[tokio::test]
async fn a_dropped_connection_still_stops_its_server() {
    let (conn, _rx) = connect_ok("dropped", &fixture_config(&[])).await;
    let pid = conn.pid().expect("pid");
    drop(conn);
    wait_until_async(&format!("process {pid} to exit"), || !alive(u64::from(pid))).await;
}

#[tokio::test]
async fn garbage_instead_of_mcp_fails_and_leaves_no_process() {
    let dir = tempfile::tempdir().expect("temp dir");
    let marker = dir.path().join("marker");
    let marker_arg = marker.to_string_lossy().into_owned();
    let cfg = fixture_config(&["--garbage", "--marker", &marker_arg]);
    let (opts, _rx) = options(Duration::from_secs(3));
    let error = connect("noise", &cfg, opts).await.expect_err("must fail");
    eprintln!("{:?}: {error}", error.kind);
    assert!(
        matches!(
            error.kind,
            ConnectErrorKind::Handshake | ConnectErrorKind::Timeout
        ),
        "{error}"
    );
    let pid = marker_pid(&marker, "server").expect("the fixture started");
    assert!(!alive(u64::from(pid)));
}

#[tokio::test]
async fn close_escalates_to_sigkill_for_a_server_that_ignores_eof_and_sigterm() {
    // sh ignores SIGTERM (inherited by its children as ignored), runs the fixture, then sleeps
    // on after the fixture leaves at stdin EOF: only SIGKILL to the group ends it.
    let script = format!("trap '' TERM; '{}'; sleep 1000", fixture());
    let cfg = config(json!({"command": "sh", "args": ["-c", script]}));
    let (conn, _rx) = connect_ok("stubborn", &cfg).await;
    let pid = conn.pid().expect("pid");
    conn.close().await;
    assert!(!alive(u64::from(pid)));
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while !group_members(pid).is_empty() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "group {pid} survived"
        );
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

#[tokio::test]
async fn secrets_never_appear_in_errors() {
    let secret = "s3cr3t-value";
    // A server that prints its token to stderr and then crashes after the handshake.
    let script = format!(
        "echo \"fixture: token is $TOKEN\" >&2; exec '{}' --crash-after 2000",
        fixture()
    );
    let cfg = config(json!({"command": "sh", "args": ["-c", script], "env": {"TOKEN": secret}}));
    let (conn, mut rx) = connect_ok("leaky", &cfg).await;
    let error = closed_error(&mut rx).await;
    assert!(error.contains("fixture: token is ***"), "{error}");
    assert!(!error.contains(secret), "{error}");
    conn.close().await;

    // The same during the handshake.
    let cfg = config(json!({
        "command": "sh",
        "args": ["-c", "echo \"token is $TOKEN\" >&2; exit 4"],
        "env": {"TOKEN": secret},
    }));
    let (opts, _rx) = options(HANDSHAKE);
    let error = connect("leaky", &cfg, opts).await.expect_err("fails");
    assert!(error.message.contains("token is ***"), "{error}");
    assert!(!error.message.contains(secret), "{error}");
}

#[tokio::test]
async fn unsupported_and_unstartable_configs_are_errors_without_processes() {
    for (cfg, kind) in [
        (
            json!({"tcp": "ws://127.0.0.1:1"}),
            ConnectErrorKind::Unsupported,
        ),
        (
            json!({"type": "sdk", "command": "x"}),
            ConnectErrorKind::Unsupported,
        ),
        (
            json!({"description": "nothing"}),
            ConnectErrorKind::Unsupported,
        ),
        (
            json!({"command": "/nonexistent/mcp-server"}),
            ConnectErrorKind::Spawn,
        ),
        (
            json!({"httpUrl": "ftp://example.invalid/"}),
            ConnectErrorKind::Spawn,
        ),
        (
            json!({"httpUrl": "http://127.0.0.1:1/mcp", "headers": {"X-Bad": "a\nb"}}),
            ConnectErrorKind::Spawn,
        ),
    ] {
        let (opts, _rx) = options(HANDSHAKE);
        let error = connect("odd", &config(cfg.clone()), opts)
            .await
            .expect_err("must fail");
        eprintln!("{:?}: {error}", error.kind);
        assert_eq!(error.kind, kind, "{cfg}: {error}");
        assert!(error.message.contains("`odd`"), "{error}");
    }
}

// ---------------------------------------------------------------------------------------------
// HTTP fixture

#[tokio::test]
async fn http_fixture_connects_with_headers_and_reports_its_death() {
    let mut command = tokio::process::Command::new(fixture());
    command.args(["--http", "127.0.0.1:0", "--tools", "echo,add"]);
    let mut server = Spawned::start(command);
    let stdout = server.child.stdout.take().expect("stdout");
    let url = tokio::time::timeout(PATIENCE, BufReader::new(stdout).lines().next_line())
        .await
        .expect("the fixture printed its URL in time")
        .expect("reading stdout")
        .expect("a URL line");
    assert!(url.starts_with("http://127.0.0.1:"), "{url}");

    let cfg = config(json!({
        "httpUrl": url,
        "headers": {"Authorization": "Bearer tok-12345", "X-Api-Key": "key-67890"},
    }));
    let (conn, mut rx) = connect_ok("web", &cfg).await;
    assert_eq!(conn.pid(), None);
    assert_eq!(tool_names(&conn), ["echo", "add"]);
    assert_eq!(call_text(&conn, "add", json!({"a": 2, "b": 3})).await, "5");

    // The same server is no legacy SSE endpoint: the HTTP status says so.
    let (opts, _rx) = options(HANDSHAKE);
    let sse =
        config(json!({"url": url.replace("/mcp", "/nope"), "headers": {"X-Api-Key": "key-67890"}}));
    let error = connect("not-sse", &sse, opts)
        .await
        .expect_err("no SSE there");
    eprintln!("{:?}: {error}", error.kind);
    assert_eq!(error.kind, ConnectErrorKind::Handshake, "{error}");
    assert!(error.message.contains("HTTP 404"), "{error}");

    server.kill();
    let error = closed_error(&mut rx).await;
    assert!(error.contains("lost its connection"), "{error}");
    assert!(
        !error.contains("tok-12345") && !error.contains("key-67890"),
        "{error}"
    );
    conn.close().await;
}

#[tokio::test]
async fn an_http_server_that_never_answers_times_out() {
    let mut command = tokio::process::Command::new(fixture());
    command.args(["--http", "127.0.0.1:0", "--hang-handshake"]);
    let mut server = Spawned::start(command);
    let stdout = server.child.stdout.take().expect("stdout");
    let url = tokio::time::timeout(PATIENCE, BufReader::new(stdout).lines().next_line())
        .await
        .expect("URL in time")
        .expect("stdout")
        .expect("URL line");
    let (opts, _rx) = options(Duration::from_millis(800));
    let error = connect("slow", &config(json!({"httpUrl": url})), opts)
        .await
        .expect_err("must time out");
    eprintln!("{:?}: {error}", error.kind);
    assert_eq!(error.kind, ConnectErrorKind::Timeout, "{error}");
}

#[tokio::test]
async fn nothing_listening_is_a_handshake_error() {
    let port = free_port();
    let (opts, _rx) = options(HANDSHAKE);
    let cfg = config(json!({"httpUrl": format!("http://127.0.0.1:{port}/mcp")}));
    let error = connect("gone", &cfg, opts).await.expect_err("must fail");
    eprintln!("{:?}: {error}", error.kind);
    assert_eq!(error.kind, ConnectErrorKind::Handshake, "{error}");
    let (opts, _rx) = options(HANDSHAKE);
    let cfg = config(json!({"url": format!("http://127.0.0.1:{port}/sse")}));
    let error = connect("gone", &cfg, opts).await.expect_err("must fail");
    eprintln!("{:?}: {error}", error.kind);
    assert_eq!(error.kind, ConnectErrorKind::Handshake, "{error}");
}

// ---------------------------------------------------------------------------------------------
// server-everything

#[tokio::test]
async fn everything_over_stdio() {
    let cfg = config(json!({"command": "node", "args": [everything(), "stdio"]}));
    let (conn, _rx) = connect_ok("everything", &cfg).await;
    let pid = conn.pid().expect("pid");
    assert!(
        tool_names(&conn).iter().any(|n| n == "echo"),
        "{:?}",
        tool_names(&conn)
    );
    assert!(!conn.catalog().prompts.is_empty());
    assert!(!conn.catalog().resources.is_empty());
    assert_eq!(
        call_text(&conn, "echo", json!({"message": "over stdio"})).await,
        "Echo: over stdio"
    );
    conn.close().await;
    assert!(!alive(u64::from(pid)));
    assert!(group_members(pid).is_empty());
}

#[tokio::test]
async fn everything_over_streamable_http() {
    let (_server, port) = start_everything("streamableHttp").await;
    let cfg = config(json!({"httpUrl": format!("http://127.0.0.1:{port}/mcp")}));
    let (conn, _rx) = connect_ok("everything-http", &cfg).await;
    assert!(
        tool_names(&conn).iter().any(|n| n == "echo"),
        "{:?}",
        tool_names(&conn)
    );
    assert_eq!(
        call_text(&conn, "echo", json!({"message": "over http"})).await,
        "Echo: over http"
    );
    conn.close().await;
}

#[tokio::test]
async fn everything_over_legacy_sse() {
    let (server, port) = start_everything("sse").await;
    let cfg = config(json!({
        "url": format!("http://127.0.0.1:{port}/sse"),
        "headers": {"Authorization": "Bearer sse-token-1"},
    }));
    let (conn, mut rx) = connect_ok("everything-sse", &cfg).await;
    assert!(
        tool_names(&conn).iter().any(|n| n == "echo"),
        "{:?}",
        tool_names(&conn)
    );
    assert!(!conn.catalog().prompts.is_empty());
    assert_eq!(
        call_text(&conn, "echo", json!({"message": "over sse"})).await,
        "Echo: over sse"
    );

    server.kill();
    let error = closed_error(&mut rx).await;
    assert!(error.contains("lost its connection"), "{error}");
    assert!(!error.contains("sse-token-1"), "{error}");
    conn.close().await;
}

/// Claude Code's `{"type": "http", "url": …}` (and its other spellings) in a file of our format
/// is a `url` entry, legacy SSE: against a streamable HTTP server it fails, and the error says
/// where this format reads streamable HTTP from. Without such a `type`, no hint.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_url_entry_typed_as_streamable_http_fails_with_the_httpurl_hint() {
    let server = common::HttpFixture::start(&["--http", "127.0.0.1:0"]);
    let hint = "rename `url` to `httpUrl`";
    for kind in ["http", "streamable-http", "streamableHttp"] {
        let cfg = config(json!({"type": kind, "url": server.url}));
        let (opts, _rx) = options(HANDSHAKE);
        let error = connect("remote", &cfg, opts).await.expect_err("SSE fails");
        assert!(
            error.message.contains("could not open its SSE stream") && error.message.contains(hint),
            "{kind}: {error}"
        );
    }
    let (opts, _rx) = options(HANDSHAKE);
    let error = connect("remote", &config(json!({"url": server.url})), opts)
        .await
        .expect_err("SSE fails");
    assert!(!error.message.contains(hint), "{error}");
    // Under `httpUrl` the same server connects.
    let (conn, _rx) = connect_ok("remote", &config(json!({"httpUrl": server.url}))).await;
    conn.close().await;
}

/// Gemini CLI's `url` without a `type` (`--layout gemini` writes it as `httpUrl` with
/// `sseFallback`): streamable HTTP first, and legacy SSE at the same URL when that is refused.
/// Without the fallback the same entry fails against an SSE-only server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bare_gemini_url_falls_back_from_streamable_http_to_sse() {
    let (_sse, port) = start_everything("sse").await;
    let url = format!("http://127.0.0.1:{port}/sse");
    let (conn, _rx) = connect_ok(
        "legacy",
        &config(json!({"httpUrl": url, "sseFallback": true})),
    )
    .await;
    assert_eq!(
        call_text(&conn, "echo", json!({"message": "after the fallback"})).await,
        "Echo: after the fallback"
    );
    conn.close().await;
    let (opts, _rx) = options(HANDSHAKE);
    let error = connect("legacy", &config(json!({"httpUrl": url})), opts)
        .await
        .expect_err("streamable HTTP alone fails against an SSE-only server");
    assert_eq!(error.kind, ConnectErrorKind::Handshake, "{error}");

    // A streamable HTTP server is reached over HTTP: no fallback needed.
    let server = common::HttpFixture::start(&["--http", "127.0.0.1:0"]);
    let (conn, _rx) = connect_ok(
        "modern",
        &config(json!({"httpUrl": server.url, "sseFallback": true})),
    )
    .await;
    assert!(tool_names(&conn).contains(&"echo".to_owned()));
    conn.close().await;
}
