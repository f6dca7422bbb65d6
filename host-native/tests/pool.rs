//! The shared pool as a Rust host embeds it: several sessions in one process, each the session
//! engine on a lease of the pool ([`Host::in_pool`]), over real fixture servers (spawn markers
//! count processes). A test drives a session as an embedding host would: it rewrites a file,
//! asks the session to reload and reads the pass that follows from the session's events.

use crate::common;

use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use common::{alive, fixture, PATIENCE};
use mcp_reconcile::host::{
    Host, HostEvent, HostHandle, HostOptions, PlanReport, RunningSession, Target,
};
use mcp_reconcile::inputs::{Inputs, Options};
use mcp_reconcile::pool::{PoolOptions, PooledStatus, SharedPool};
use mcp_reconcile::session::Session;
use mcp_reconcile::transport::CallToolResult;
use mcp_reconcile::watcher::Change;
use mcp_reconcile_kernel::{Action, Decision, Reason};
use serde_json::{json, Value};
use tokio::sync::mpsc;

struct Dir(tempfile::TempDir);

impl Dir {
    fn new() -> Dir {
        let dir = Dir(tempfile::tempdir().expect("temp dir"));
        fs::create_dir_all(dir.path("project")).expect("project dir");
        dir
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.0.path().join(rel)
    }

    /// The files of session `session`: its own user settings; project, approvals shared.
    fn inputs(&self, session: &str) -> Inputs {
        let flags = Options {
            user_settings: Some(self.path(&format!("{session}-settings.json"))),
            workspace_settings: Some(self.path(&format!("{session}-workspace.json"))),
            system_settings: Some(self.path("no-system.json")),
            system_defaults: Some(self.path("no-defaults.json")),
            project: Some(self.path("project")),
            approvals: Some(self.path("approvals.json")),
            state_dir: Some(self.path("state")),
            ..Options::default()
        };
        Inputs::new(&flags).expect("inputs")
    }

    fn marker(&self, name: &str) -> PathBuf {
        self.path(&format!("{name}.marker"))
    }

    fn server(&self, name: &str, tools: &str) -> Value {
        json!({
            "command": fixture().to_string_lossy(),
            "args": ["--name", name, "--tools", tools, "--marker", self.marker(name).to_string_lossy()],
        })
    }

    fn write(&self, path: &Path, value: &Value) {
        let tmp = path.with_extension("tmp~");
        fs::write(&tmp, serde_json::to_string_pretty(value).expect("json")).expect("write");
        fs::rename(&tmp, path).expect("rename");
    }

    /// Session `session`'s user settings with `servers`, shared by the sessions that would
    /// start them identically (`mcp.share: project`: these tests are about sharing; the
    /// default, one process per session, is `tests/sharing.rs`').
    fn settings(&self, session: &str, servers: Value) {
        self.write(
            &self.path(&format!("{session}-settings.json")),
            &json!({"mcp": {"share": "project"}, "mcpServers": servers}),
        );
    }

    fn pids(&self, name: &str) -> Vec<u64> {
        fs::read_to_string(self.marker(name))
            .unwrap_or_default()
            .lines()
            .filter_map(|l| l.strip_prefix("server "))
            .filter_map(|p| p.trim().parse().ok())
            .collect()
    }

    /// Decides `server`'s approval for its config as `inputs` read it now.
    fn decide(&self, inputs: &mut Inputs, server: &str, decision: Decision) {
        let snapshot = inputs.load(None);
        let config = snapshot
            .assembled()
            .servers
            .get(server)
            .cloned()
            .unwrap_or_else(|| panic!("{server} is configured"));
        let root = inputs.project_root().to_owned();
        inputs
            .approvals_store()
            .decide(&root, server, &config, decision)
            .expect("decide");
    }
}

/// One session of the pool: the engine on a lease, what it tells, its task.
struct Run {
    handle: HostHandle,
    events: mpsc::UnboundedReceiver<HostEvent>,
    session: RunningSession,
    /// Never sent on: a test asks for a reload itself after it rewrites a file.
    _files: mpsc::UnboundedSender<Change>,
}

/// What one pass told: its report, and the servers it asked a decision about.
struct Pass {
    report: PlanReport,
    asked: Vec<String>,
}

impl Pass {
    /// Whether the pass did a `kind` action (`connect`, `disconnect`, …) for `server`.
    fn did(&self, kind: &str, server: &str) -> bool {
        self.report
            .steps
            .iter()
            .any(|s| s.action.kind() == kind && s.action.name() == Some(server))
    }

    /// Whether the pass started (or tried to start) `server`.
    fn started(&self, server: &str) -> bool {
        self.report
            .steps
            .iter()
            .any(|s| s.action.starts() && s.action.name() == Some(server))
    }

    /// The steps that failed, with why (a refused acquire says `not admitted: <reason>`).
    fn errors(&self) -> Vec<String> {
        self.report
            .steps
            .iter()
            .filter_map(|s| {
                s.error
                    .as_ref()
                    .map(|e| format!("{}: {e}", s.action.kind()))
            })
            .collect()
    }
}

impl Run {
    /// Session `name` of `pool` over `inputs`, running.
    fn start(pool: &SharedPool, inputs: Inputs, name: &str) -> Run {
        let (files, file_rx) = mpsc::unbounded_channel();
        let mut host = Host::in_pool(inputs, HostOptions::default(), pool, name);
        let events = host.subscribe();
        let session = host.spawn_fed(file_rx);
        Run {
            handle: session.handle().clone(),
            events,
            session,
            _files: files,
        }
    }

    /// The next event, or `None` when none comes within `wait`.
    async fn event_within(&mut self, wait: Duration) -> Option<HostEvent> {
        let event = tokio::time::timeout(wait, self.events.recv()).await.ok()?;
        Some(event.expect("the session runs"))
    }

    async fn event(&mut self, what: &str) -> HostEvent {
        self.event_within(PATIENCE)
            .await
            .unwrap_or_else(|| panic!("timed out waiting for {what}"))
    }

    /// Reads events until the next pass (not the pool's retry) is applied.
    async fn pass(&mut self, what: &str) -> Pass {
        let mut asked = Vec::new();
        loop {
            match self.event(what).await {
                HostEvent::PlanApplied(report) if report.trigger != "retry" => {
                    return Pass { report, asked };
                }
                HostEvent::ApprovalNeeded(requests) => {
                    asked.extend(requests.into_iter().map(|r| r.name));
                }
                _ => {}
            }
        }
    }

    /// Reloads the files now and reads the pass that follows.
    async fn reload(&mut self, what: &str) -> Pass {
        self.handle.reload().await.expect("the session runs");
        self.pass(what).await
    }

    /// The tool names the session offers.
    async fn tools(&self) -> Vec<String> {
        let catalog = self.handle.catalog().await.expect("the session runs");
        catalog
            .tools
            .into_iter()
            .map(|t| t.name.into_owned())
            .collect()
    }

    /// Stops the session: it releases everything it holds; returns once the pool took that.
    async fn stop(self) {
        self.session.shutdown().await.expect("the session task");
    }
}

async fn wait_status(
    pool: &SharedPool,
    what: &str,
    pred: impl Fn(&[PooledStatus]) -> bool,
) -> Vec<PooledStatus> {
    let start = Instant::now();
    loop {
        let status = pool.status().await.expect("pool runs");
        if pred(&status) {
            return status;
        }
        assert!(
            start.elapsed() < PATIENCE,
            "timed out waiting for {what}: {status:#?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Waits until process `pid` has exited.
async fn wait_gone(pid: u64, what: &str) {
    let start = Instant::now();
    while alive(pid) && start.elapsed() < PATIENCE {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(!alive(pid), "{what} (pid {pid})");
}

fn connected(status: &[PooledStatus], server: &str) -> bool {
    status
        .iter()
        .any(|s| s.server == server && s.state == "connected")
}

fn text(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect()
}

fn with_args(mut server: Value, extra: &[&str]) -> Value {
    if let Some(args) = server["args"].as_array_mut() {
        args.extend(extra.iter().map(|a| json!(a)));
    }
    server
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_sessions_share_one_process_each_with_its_own_view_and_it_drains_after_the_last() {
    let d = Dir::new();
    let x = d.server("x", "echo,add");
    let mut narrowed = x.clone();
    narrowed["includeTools"] = json!(["echo"]);
    narrowed["trust"] = json!(true);
    d.settings("a", json!({"x": x}));
    d.settings("b", json!({"x": narrowed}));
    let pool = SharedPool::start(PoolOptions {
        drain: Duration::from_millis(1500),
        ..PoolOptions::default()
    });
    // Both start at once: concurrent acquires of one id spawn once.
    let mut a = Run::start(&pool, d.inputs("a"), "a");
    let mut b = Run::start(&pool, d.inputs("b"), "b");
    let (pa, pb) = tokio::join!(a.pass("a's start"), b.pass("b's start"));
    for pass in [&pa, &pb] {
        assert!(pass.did("connect", "x"), "{:#?}", pass.report);
        assert!(
            pass.errors().is_empty(),
            "none refused: {:?}",
            pass.errors()
        );
    }
    let s = wait_status(&pool, "x connected", |s| connected(s, "x")).await;
    assert_eq!(s.len(), 1, "one shared connection: {s:#?}");
    let mut holders = s[0].holders.clone();
    holders.sort();
    assert_eq!(holders, ["a", "b"]);
    assert_eq!(d.pids("x").len(), 1, "spawned once");
    let pid = d.pids("x")[0];

    // Each session's own view of the one process.
    assert_eq!(a.tools().await, ["mcp__x__echo", "mcp__x__add"]);
    assert_eq!(b.tools().await, ["mcp__x__echo"]);
    let hidden = b
        .handle
        .route(Target::Tool("mcp__x__add".into()))
        .await
        .expect("the session runs");
    assert!(hidden.is_err(), "b's includeTools hides add");
    let route = a
        .handle
        .route(Target::Tool("mcp__x__add".into()))
        .await
        .expect("the session runs")
        .expect("a sees add");
    let params = rmcp::model::CallToolRequestParams::new(route.name.clone()).with_arguments(
        json!({"a": 2, "b": 3})
            .as_object()
            .cloned()
            .unwrap_or_default(),
    );
    let result = route
        .caller
        .call_tool(params, None, tokio_util::sync::CancellationToken::new())
        .await
        .expect("forwarded");
    assert_eq!(text(&result), "5");

    // One releases: still alive, held by the other.
    a.stop().await;
    let s = pool.status().await.expect("pool runs");
    assert_eq!(s[0].holders, ["b"]);
    assert!(alive(pid));

    // The last releases: draining, still alive for now; gone after the drain delay.
    b.stop().await;
    let s = pool.status().await.expect("pool runs");
    assert!(s[0].draining, "{s:#?}");
    assert!(alive(pid), "kept through the drain delay");
    wait_status(&pool, "the drained connection closed", |s| s.is_empty()).await;
    wait_gone(pid, "the server stopped after the drain delay").await;
    assert_eq!(d.pids("x").len(), 1);
    pool.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reacquire_during_the_drain_keeps_the_process() {
    let d = Dir::new();
    d.settings("a", json!({"x": d.server("x", "echo")}));
    let pool = SharedPool::start(PoolOptions {
        drain: Duration::from_secs(30),
        ..PoolOptions::default()
    });
    let mut a = Run::start(&pool, d.inputs("a"), "a");
    let pass = a.pass("a's start").await;
    assert!(pass.did("connect", "x") && pass.errors().is_empty());
    wait_status(&pool, "x connected", |s| connected(s, "x")).await;
    a.stop().await;
    let s = pool.status().await.expect("pool runs");
    assert_eq!((s.len(), s[0].draining), (1, true), "{s:#?}");

    // Another session of the same files, during the drain: it attaches to the process.
    let mut again = Run::start(&pool, d.inputs("a"), "a2");
    let pass = again.pass("a2's start").await;
    assert!(pass.did("connect", "x") && pass.errors().is_empty());
    let s = pool.status().await.expect("pool runs");
    assert_eq!((s.len(), s[0].draining), (1, false), "{s:#?}");
    assert_eq!(s[0].holders, ["a2"]);
    assert_eq!(d.pids("x").len(), 1, "not respawned");
    let pid = d.pids("x")[0];
    pool.shutdown().await;
    assert!(!alive(pid), "shutdown stops every server");
    again.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_approval_gate_runs_before_any_acquire() {
    let d = Dir::new();
    let mcp_json = d.path("project/.mcp.json");
    d.write(
        &mcp_json,
        &json!({"mcpServers": {"proj": d.server("proj", "echo")}}),
    );
    d.settings("a", json!({}));
    d.settings("b", json!({}));
    let pool = SharedPool::start(PoolOptions {
        drain: Duration::from_millis(200),
        ..PoolOptions::default()
    });
    // The approvals as a person decides them (same files as session a).
    let mut files = d.inputs("a");
    let mut a = Run::start(&pool, d.inputs("a"), "a");
    let skipped_pending = |pass: &Pass| {
        pass.report.steps.iter().any(|s| {
            matches!(&s.action, Action::Skip { name, reason: Reason::PendingApproval } if name == "proj")
        })
    };

    // Pending: never acquired, never spawned; asked about.
    let pass = a.pass("a's start").await;
    assert_eq!(pass.asked, ["proj"]);
    assert!(skipped_pending(&pass), "{:#?}", pass.report);
    assert!(pool.status().await.expect("pool runs").is_empty());
    assert_eq!(
        a.handle
            .reconnect(Some("proj".into()))
            .await
            .expect("the session runs"),
        Ok(Vec::new())
    );
    let refused = a
        .handle
        .route(Target::Tool("mcp__proj__echo".into()))
        .await
        .expect("the session runs")
        .expect_err("not available");
    assert!(refused.contains("approv"), "{refused}");

    // Rejected: still never; not asked again for the same config.
    d.decide(&mut files, "proj", Decision::Rejected);
    let pass = a.reload("the rejection").await;
    assert!(pass.asked.is_empty(), "{:?}", pass.asked);
    assert_eq!(pass.report.rejected, ["proj"]);
    assert!(!pass.started("proj"), "{:#?}", pass.report);
    assert_eq!(
        a.handle.reconnect(None).await.expect("the session runs"),
        Ok(Vec::new())
    );
    assert!(pool.status().await.expect("pool runs").is_empty());
    assert!(
        d.pids("proj").is_empty(),
        "a rejected server is never spawned"
    );
    let refused = a
        .handle
        .route(Target::Tool("mcp__proj__echo".into()))
        .await
        .expect("the session runs")
        .expect_err("not available");
    assert!(refused.contains("rejected"), "{refused}");

    // Its config edited: asked again, still not spawned.
    d.write(
        &mcp_json,
        &json!({"mcpServers": {"proj": d.server("proj", "echo,add")}}),
    );
    let pass = a.reload("the edit").await;
    assert_eq!(pass.asked, ["proj"]);
    assert!(skipped_pending(&pass), "{:#?}", pass.report);
    assert!(pool.status().await.expect("pool runs").is_empty());
    assert!(d.pids("proj").is_empty());

    // Approved: acquired; a second session attaches to the same process.
    d.decide(&mut files, "proj", Decision::Approved);
    let pass = a.reload("the approval").await;
    assert!(pass.did("connect", "proj"), "{:#?}", pass.report);
    assert!(pass.errors().is_empty(), "{:?}", pass.errors());
    wait_status(&pool, "proj connected", |s| connected(s, "proj")).await;
    let mut b = Run::start(&pool, d.inputs("b"), "b");
    let pass = b.pass("b's start").await;
    assert!(pass.did("connect", "proj") && pass.errors().is_empty());
    let s = pool.status().await.expect("pool runs");
    assert_eq!(s[0].holders, ["a", "b"]);
    assert_eq!(d.pids("proj").len(), 1);

    // Rejected again: both release it; it closes and no path brings it back.
    d.decide(&mut files, "proj", Decision::Rejected);
    let pa = a.reload("a, rejected again").await;
    let pb = b.reload("b, rejected again").await;
    assert!(pa.did("disconnect", "proj"), "{:#?}", pa.report);
    assert!(pb.did("disconnect", "proj"), "{:#?}", pb.report);
    wait_status(&pool, "proj closed", |s| s.is_empty()).await;
    assert_eq!(
        a.handle.reconnect(None).await.expect("the session runs"),
        Ok(Vec::new())
    );
    let pass = a.reload("a reload after the rejection").await;
    assert!(!pass.started("proj"), "{:#?}", pass.report);
    assert!(pool.status().await.expect("pool runs").is_empty());
    assert_eq!(d.pids("proj").len(), 1, "never spawned again");
    a.stop().await;
    b.stop().await;
    pool.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pool_retries_a_crashing_server_into_crash_loop_and_reconnect_clears_it() {
    let d = Dir::new();
    let crashy = with_args(d.server("crashy", "echo"), &["--crash-after", "150"]);
    d.settings("a", json!({"crashy": crashy.clone()}));
    d.settings("b", json!({"crashy": crashy}));
    let time = mcp_reconcile::clock::ManualClock::new();
    let pool = SharedPool::start(PoolOptions {
        clock: time.clock(),
        ..PoolOptions::default()
    });
    let mut a = Run::start(&pool, d.inputs("a"), "a");
    let mut b = Run::start(&pool, d.inputs("b"), "b");
    let (pa, pb) = tokio::join!(a.pass("a's start"), b.pass("b's start"));
    assert!(pa.did("connect", "crashy") && pb.did("connect", "crashy"));
    // Each retry comes when the pool's clock passes its time.
    for attempts in 1..8 {
        let s = wait_status(&pool, &format!("failure {attempts}"), |s| {
            s.len() == 1 && s[0].state == "failed" && s[0].attempts == attempts
        })
        .await;
        assert_eq!(s[0].reason, Some(Reason::BackingOff), "{s:#?}");
        time.advance(Duration::from_secs(120));
    }
    let s = wait_status(&pool, "crash loop", |s| {
        s.iter().any(|x| x.reason == Some(Reason::CrashLoop))
    })
    .await;
    assert_eq!((s.len(), s[0].attempts, s[0].spawns), (1, 8, 8), "{s:#?}");
    assert!(s[0]
        .last_error
        .as_deref()
        .is_some_and(|e| e.contains("crashing as asked")));
    // One process per attempt, shared by both sessions: the pool retried, not each session.
    assert_eq!(d.pids("crashy").len(), 8);
    assert_eq!(
        b.handle
            .reconnect(Some("crashy".into()))
            .await
            .expect("the session runs"),
        Ok(vec!["crashy".to_owned()])
    );
    wait_status(&pool, "a fresh start", |s| s[0].spawns > 8).await;
    a.stop().await;
    b.stop().await;
    pool.shutdown().await;
    // A retry may still have been starting when the pool shut down; its
    // process is stopped as the start completes. None may outlive that.
    for pid in d.pids("crashy") {
        wait_gone(pid, "a crashing server outlived the pool").await;
    }
}

/// A session on the pool reads the pool's clock: a pooled server's `retryInMs` is its backoff,
/// however long the pool ran before the session started (a daemon's pool and a session each
/// had a clock from zero of their own, so the pool's retry time read as hours away).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_shows_the_pools_retry_time_however_late_it_started() {
    let d = Dir::new();
    let missing = d.path("no-such-program");
    d.settings(
        "a",
        json!({"broken": {"command": missing.to_string_lossy()}}),
    );
    let time = mcp_reconcile::clock::ManualClock::new();
    // The pool has run for an hour when the session starts on a clock of its own.
    time.advance(Duration::from_secs(3600));
    let pool = SharedPool::start(PoolOptions {
        clock: time.clock(),
        ..PoolOptions::default()
    });
    let mut a = Run::start(&pool, d.inputs("a"), "a");
    a.pass("a's start").await;
    let start = Instant::now();
    let retry_in_ms = loop {
        let report = a.handle.status().await.expect("the session runs");
        let broken = report.servers.iter().find(|s| s.name == "broken");
        if let Some(ms) = broken.and_then(|s| s.retry_in_ms) {
            break ms;
        }
        assert!(start.elapsed() < PATIENCE, "no retry time: {report:#?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    // The first backoff is 1 s less up to 20 % jitter; the pool's clock does not move.
    assert!(
        (800..=1000).contains(&retry_in_ms),
        "retryInMs {retry_in_ms}: the pool's retry time read on another clock"
    );
    a.stop().await;
    pool.shutdown().await;
}

/// Only stdio is shared by default: a streamable HTTP server gets one private connection per
/// session (shared once the host opts in), and an `sdk` server is never pooled (nor run).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn remote_servers_are_per_session_unless_opted_in_and_sdk_never_pooled() {
    use std::os::unix::process::CommandExt;
    use tokio::io::AsyncBufReadExt;

    let d = Dir::new();
    let mut command = std::process::Command::new(fixture());
    command
        .args(["--http", "127.0.0.1:0", "--name", "web"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .process_group(0);
    let mut web = tokio::process::Command::from(command)
        .kill_on_drop(true)
        .spawn()
        .expect("fixture starts");
    let _group = Group(web.id().unwrap_or(0));
    let mut lines = tokio::io::BufReader::new(web.stdout.take().expect("stdout")).lines();
    let url = tokio::time::timeout(PATIENCE, lines.next_line())
        .await
        .expect("URL in time")
        .expect("stdout")
        .expect("URL");
    let servers = json!({
        "web": {"httpUrl": url},
        "inproc": {"type": "sdk", "command": "x"},
    });
    d.settings("a", servers.clone());
    d.settings("b", servers);

    for (pool_remote, expected_web) in [(false, 2), (true, 1)] {
        let pool = SharedPool::start(PoolOptions {
            pool_remote,
            drain: Duration::from_millis(100),
            ..PoolOptions::default()
        });
        let mut a = Run::start(&pool, d.inputs("a"), "a");
        let mut b = Run::start(&pool, d.inputs("b"), "b");
        let (pa, pb) = tokio::join!(a.pass("a's start"), b.pass("b's start"));
        for pass in [&pa, &pb] {
            assert!(pass.did("connect", "web"), "{:#?}", pass.report);
            let failed: Vec<&str> = pass
                .report
                .steps
                .iter()
                .filter(|s| s.error.is_some())
                .filter_map(|s| s.action.name())
                .collect();
            assert_eq!(failed, ["inproc"], "{:#?}", pass.report);
        }
        let s = wait_status(&pool, "web connected", |s| {
            s.iter()
                .filter(|x| x.server == "web" && x.state == "connected")
                .count()
                == expected_web
        })
        .await;
        let web: Vec<&PooledStatus> = s.iter().filter(|x| x.server == "web").collect();
        assert_eq!(web.len(), expected_web, "{s:#?}");
        assert!(web.iter().all(|x| x.private != pool_remote), "{s:#?}");
        let inproc: Vec<&PooledStatus> = s.iter().filter(|x| x.server == "inproc").collect();
        assert_eq!(inproc.len(), 2, "one per session: {s:#?}");
        assert!(inproc.iter().all(|x| x.private));
        // The kernel's supervision view, as the session host shows it: an
        // in-process server can never run here.
        wait_status(&pool, "sdk servers refused to run", |s| {
            s.iter()
                .filter(|x| x.server == "inproc")
                .all(|x| x.reason == Some(Reason::UnsupportedTransport))
        })
        .await;
        a.stop().await;
        b.stop().await;
        wait_status(&pool, "all closed", |s| s.is_empty()).await;
        pool.shutdown().await;
    }
}

/// Kills a process group on drop.
struct Group(u32);

impl Drop for Group {
    fn drop(&mut self) {
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(self.0 as i32),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}

/// The gateway serves a session on the shared pool as it serves any session (one `Session`
/// trait): an MCP client sees the session's own view, calls are forwarded to the shared
/// process, status shows the pool's connection and the policy of the session's files.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_fronts_a_session_on_the_shared_pool() {
    use mcp_reconcile::gateway::Gateway;
    use rmcp::ServiceExt;

    let d = Dir::new();
    let mut x = d.server("x", "echo,add");
    x["includeTools"] = json!(["echo"]);
    d.write(
        &d.path("a-settings.json"),
        &json!({
            "mcp": {"excluded": ["off"]},
            "mcpServers": {"x": x, "off": {"command": "never-started"}},
        }),
    );
    let pool = SharedPool::start(PoolOptions::default());
    let mut a = Run::start(&pool, d.inputs("a"), "a");
    let pass = a.pass("a's start").await;
    assert!(pass.did("connect", "x") && pass.errors().is_empty());
    wait_status(&pool, "x connected", |s| connected(s, "x")).await;

    let gateway = Gateway::new(a.handle.clone());
    let (client_end, server_end) = tokio::io::duplex(64 * 1024);
    let served = gateway.clone();
    let server = tokio::spawn(async move {
        let running = served
            .serve(tokio::io::split(server_end))
            .await
            .expect("gateway handshake");
        let _ = running.waiting().await;
    });
    let client = tokio::time::timeout(PATIENCE, ().serve(tokio::io::split(client_end)))
        .await
        .expect("handshake in time")
        .expect("client handshake");
    let tools: Vec<String> = client
        .list_all_tools()
        .await
        .expect("tools/list")
        .into_iter()
        .map(|t| t.name.to_string())
        .collect();
    assert_eq!(tools, ["mcp__x__echo"], "the session's own includeTools");
    let params = rmcp::model::CallToolRequestParams::new("mcp__x__echo").with_arguments(
        json!({"text": "through the pool"})
            .as_object()
            .cloned()
            .expect("object"),
    );
    let result = client.call_tool(params).await.expect("tools/call");
    assert!(
        text(&result).contains("through the pool"),
        "forwarded to the pooled process: {result:?}"
    );
    let hidden = rmcp::model::CallToolRequestParams::new("mcp__x__add");
    let result = client.call_tool(hidden).await.expect("tools/call");
    assert_eq!(result.is_error, Some(true), "{result:?}");

    let status = Session::status(gateway.session())
        .await
        .expect("the session runs");
    let by_name = |name: &str| {
        status
            .servers
            .iter()
            .find(|s| s.name == name)
            .unwrap_or_else(|| panic!("{name} in {status:#?}"))
    };
    assert_eq!(by_name("x").state, "connected");
    assert_eq!(by_name("x").tools, 1, "the session's view");
    assert_eq!(
        by_name("x").pid,
        d.pids("x").first().copied().map(|p| p as u32)
    );
    assert_eq!(by_name("off").state, "skipped");
    assert_eq!(by_name("off").reason, Some(Reason::Excluded));
    let restarted = Session::reconnect(gateway.session(), Some("x".into()))
        .await
        .expect("the session runs")
        .expect("reconnect");
    assert_eq!(restarted, ["x"]);

    client.cancel().await.expect("client closes");
    server.await.expect("gateway task");
    drop(gateway);
    a.stop().await;
    pool.shutdown().await;
    // The reconnect's new process may still have been starting at shutdown; it is stopped as
    // its start completes. None may outlive that.
    for pid in d.pids("x") {
        wait_gone(pid, "a server outlived the pool").await;
    }
}

/// Make before break in the pool, as in a single session: a changed server's new process
/// starts beside the old one, which keeps serving — its tools stay in the session's view and a
/// slow call routed to it before the switch still gets its answer — until the new one is up;
/// then the old one is stopped (not left draining). A replacement that cannot come up beside
/// it gets the old one stopped and is started once more.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_changed_server_keeps_serving_until_its_replacement_is_up() {
    let d = Dir::new();
    let server = |extra: &[&str]| {
        let mut s = with_args(d.server("x", "echo,sleep"), extra);
        s["discoveryTimeoutMs"] = json!(3000);
        s
    };
    d.settings("a", json!({"x": server(&[])}));
    let pool = SharedPool::start(PoolOptions::default());
    let mut a = Run::start(&pool, d.inputs("a"), "a");
    let pass = a.pass("a's start").await;
    assert!(pass.did("connect", "x") && pass.errors().is_empty());
    let s = wait_status(&pool, "x connected", |s| connected(s, "x")).await;
    let (old_id, old_pid) = (s[0].id.clone(), d.pids("x")[0]);

    // A slow call on the old process, in flight across the switch.
    let route = a
        .handle
        .route(Target::Tool("mcp__x__sleep".into()))
        .await
        .expect("the session runs")
        .expect("routed");
    let params = rmcp::model::CallToolRequestParams::new(route.name.clone())
        .with_arguments(json!({"ms": 4000}).as_object().cloned().unwrap_or_default());
    let call = tokio::spawn(async move {
        route
            .caller
            .call_tool(params, None, tokio_util::sync::CancellationToken::new())
            .await
    });

    d.settings("a", json!({"x": server(&["--resources", "1"])}));
    a.handle.reload().await.expect("the session runs");
    // Until the new process is up the old one serves: the tools never leave the view, and the
    // old connection is never left draining (it serves under the new key until the switch).
    let start = Instant::now();
    let switched = loop {
        let names = a.tools().await;
        assert!(names.contains(&"mcp__x__echo".to_owned()), "{names:?}");
        let s = pool.status().await.expect("pool runs");
        assert!(s.iter().all(|c| !c.draining), "{s:#?}");
        if s.iter().any(|c| c.id != old_id) {
            assert!(s.iter().all(|c| c.id != old_id), "{s:#?}");
        }
        match a.event_within(Duration::from_millis(20)).await {
            Some(HostEvent::PlanApplied(report)) => break report,
            Some(HostEvent::CatalogChanged(change)) => {
                assert!(!change.tools, "the tools left the view during the switch");
            }
            _ => {}
        }
        assert!(start.elapsed() < PATIENCE, "the new process never came up");
    };
    let step = switched
        .steps
        .iter()
        .find(|s| s.action.name() == Some("x"))
        .expect("a step for x");
    assert_eq!(
        (step.action.kind(), step.error.as_deref()),
        ("reconnect", None)
    );
    let s = pool.status().await.expect("pool runs");
    assert!(connected(&s, "x"), "{s:#?}");
    assert!(s.iter().all(|c| c.id != old_id && !c.draining), "{s:#?}");
    assert_eq!(d.pids("x").len(), 2);
    // The old process was stopped only after answering (stopping it mid-call fails the call
    // with "closed its connection before answering").
    let answer = call.await.expect("call task").expect("the call answered");
    assert_eq!(text(&answer), "slept 4000 ms");
    wait_gone(old_pid, "the old process is stopped after the switch").await;

    // A replacement that never finishes its handshake: the old one serves until it gives up,
    // then is stopped, and the new one is started once more.
    let serving = *d.pids("x").last().expect("pid");
    let mut hanging = server(&["--hang-handshake"]);
    // Long enough to see the retry's status before it too gives up.
    hanging["discoveryTimeoutMs"] = json!(8000);
    d.settings("a", json!({"x": hanging}));
    a.handle.reload().await.expect("the session runs");
    let start = Instant::now();
    let s = loop {
        // Read before the status: while the pool has not given up, the old process served.
        let names = a.tools().await;
        let s = pool.status().await.expect("pool runs");
        let fell_back = s.iter().any(|c| {
            c.last_error
                .as_deref()
                .is_some_and(|e| e.contains("could not start beside the running one"))
        });
        if fell_back {
            break s;
        }
        assert!(names.contains(&"mcp__x__echo".to_owned()), "{names:?}");
        assert!(start.elapsed() < PATIENCE, "never fell back: {s:#?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    assert_eq!(s.len(), 1, "{s:#?}");
    wait_gone(serving, "the old process was stopped for the retry").await;
    a.stop().await;
    pool.shutdown().await;
    for pid in d.pids("x") {
        wait_gone(pid, "a server outlived the pool").await;
    }
}

/// A changed server whose old process another session also uses: this session keeps seeing
/// the old one until its new one is up (the other session keeps it). With
/// `"stopBeforeRestart": true`, the old one is let go — and stopped, when nobody else holds
/// it — before the new one starts.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_shared_changed_server_switches_without_a_gap_and_stop_before_restart_opts_out() {
    let d = Dir::new();
    let x = d.server("x", "echo");
    d.settings("a", json!({"x": x.clone()}));
    d.settings("b", json!({"x": x.clone()}));
    let pool = SharedPool::start(PoolOptions::default());
    let mut a = Run::start(&pool, d.inputs("a"), "a");
    let mut b = Run::start(&pool, d.inputs("b"), "b");
    let (pa, pb) = tokio::join!(a.pass("a's start"), b.pass("b's start"));
    assert!(pa.errors().is_empty() && pb.errors().is_empty());
    wait_status(&pool, "x connected", |s| connected(s, "x")).await;
    let shared = d.pids("x")[0];

    d.settings(
        "a",
        json!({"x": with_args(x.clone(), &["--resources", "1"])}),
    );
    a.handle.reload().await.expect("the session runs");
    let start = Instant::now();
    let switched = loop {
        assert_eq!(a.tools().await, ["mcp__x__echo"], "no gap");
        match a.event_within(Duration::from_millis(20)).await {
            Some(HostEvent::PlanApplied(report)) => break report,
            Some(HostEvent::CatalogChanged(change)) => assert!(!change.tools, "a gap"),
            _ => {}
        }
        assert!(start.elapsed() < PATIENCE, "never switched");
    };
    assert!(
        switched
            .steps
            .iter()
            .any(|s| s.action.kind() == "reconnect" && s.error.is_none()),
        "{switched:#?}"
    );
    let s = pool.status().await.expect("pool runs");
    let mine = s.iter().find(|c| c.holders == ["a"]).expect("a's own");
    assert_eq!(mine.state, "connected", "{s:#?}");
    assert_eq!(s.len(), 2, "b keeps the old one: {s:#?}");
    assert!(alive(shared), "b's process runs on");
    b.stop().await;

    // Opted out: the old connection is stopped at once, not kept beside the new one.
    let mut opted = with_args(x, &["--resources", "2"]);
    opted["stopBeforeRestart"] = json!(true);
    d.settings("a", json!({"x": opted}));
    let before: Vec<_> = pool.status().await.expect("pool runs");
    let old = before
        .iter()
        .find(|c| c.holders == ["a"])
        .map(|c| (c.id.clone(), c.pid))
        .expect("a holds one");
    a.handle.reload().await.expect("the session runs");
    // The pass lets go of the old connection before it starts the new one: the tools leave the
    // view at once, and the pool, which took the release before it hears the next question,
    // no longer has it — not even draining.
    loop {
        match a.event("the old connection let go").await {
            HostEvent::CatalogChanged(change) if change.tools => break,
            HostEvent::PlanApplied(report) => {
                panic!("switched without letting go first: {report:#?}")
            }
            _ => {}
        }
    }
    let s = pool.status().await.expect("pool runs");
    assert!(s.iter().all(|c| c.id != old.0), "stopped first: {s:#?}");
    let pass = a.pass("the opted-out server back").await;
    assert!(pass.did("reconnect", "x"), "{:#?}", pass.report);
    assert!(pass.errors().is_empty(), "{:?}", pass.errors());
    let s = pool.status().await.expect("pool runs");
    assert!(
        s.iter()
            .any(|c| c.holders == ["a"] && c.state == "connected"),
        "{s:#?}"
    );
    assert!(s.iter().all(|c| c.pid != old.1), "{s:#?}");
    a.stop().await;
    pool.shutdown().await;
}

/// A standby serves only the session it stands in for: while a's changed server starts (its
/// old process serving a under the new config's key, make before break), session c, which
/// asked for the new config, is not served by a's old process — it sees the server starting
/// (no tools, no route) — while a keeps its tools.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_standby_serves_only_the_session_it_stands_in_for() {
    let d = Dir::new();
    let old = with_args(d.server("x", "echo"), &[]);
    // The new config never finishes its handshake: the standby stands in for as long as the
    // test looks.
    let mut new = with_args(d.server("x", "echo"), &["--hang-handshake"]);
    new["discoveryTimeoutMs"] = json!(120_000);
    d.settings("a", json!({"x": old}));
    d.settings("c", json!({"x": new.clone()}));
    let pool = SharedPool::start(PoolOptions::default());
    let mut a = Run::start(&pool, d.inputs("a"), "a");
    let pass = a.pass("a's start").await;
    assert!(pass.did("connect", "x") && pass.errors().is_empty());
    let s = wait_status(&pool, "x connected", |s| connected(s, "x")).await;
    let old_id = s[0].id.clone();

    d.settings("a", json!({"x": new}));
    a.handle.reload().await.expect("the session runs");
    // a's pass never ends (its new process hangs): the pool shows the standby under the new key.
    let s = wait_status(&pool, "a's standby", |s| s.iter().any(|c| c.id != old_id)).await;
    assert_eq!(s.len(), 1, "{s:#?}");
    let c = Run::start(&pool, d.inputs("c"), "c");
    let s = wait_status(&pool, "c attached", |s| {
        s.iter().any(|x| x.holders.len() == 2)
    })
    .await;
    assert_eq!(s.len(), 1, "c attached to a's new key: {s:#?}");
    assert_eq!(s[0].holders, ["a", "c"], "{s:#?}");

    assert_eq!(a.tools().await, ["mcp__x__echo"], "a's standby serves a");
    // c's start pass never ends either: its catalog and routes are answered at the start
    // deadline with what serves it.
    let (c_tools, refused) = tokio::join!(
        c.tools(),
        c.handle.route(Target::Tool("mcp__x__echo".into()))
    );
    assert!(
        c_tools.is_empty(),
        "c asked for the new config and is not served by a's old process: {c_tools:?}"
    );
    let refused = refused
        .expect("the session runs")
        .expect_err("not routed to the standby");
    assert!(!refused.is_empty());
    let status = c.handle.status().await.expect("the session runs");
    let x = status.servers.iter().find(|s| s.name == "x").expect("x");
    assert_eq!(x.state, "connecting", "{status:#?}");
    assert_eq!(x.tools, 0, "{status:#?}");
    a.stop().await;
    c.stop().await;
    pool.shutdown().await;
}

/// An approved project server that lists a resource's exact URI does not capture a read that a
/// user server's template matches: the read goes to the user server.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_project_servers_listing_never_captures_a_user_servers_template() {
    let d = Dir::new();
    d.settings(
        "a",
        json!({"user": with_args(d.server("user", "echo"), &["--resource-template", "fixture://resources/{n}"])}),
    );
    d.write(
        &d.path("project/.mcp.json"),
        &json!({"mcpServers": {"proj": with_args(d.server("proj", "echo"), &["--resources", "1"])}}),
    );
    let pool = SharedPool::start(PoolOptions::default());
    let mut files = d.inputs("a");
    d.decide(&mut files, "proj", Decision::Approved);
    let mut a = Run::start(&pool, files, "a");
    let pass = a.pass("a's start").await;
    assert!(pass.did("connect", "user") && pass.did("connect", "proj"));
    assert!(pass.errors().is_empty(), "{:?}", pass.errors());
    wait_status(&pool, "both connected", |s| {
        connected(s, "user") && connected(s, "proj")
    })
    .await;

    let route = a
        .handle
        .route(Target::Resource("fixture://resources/1".into()))
        .await
        .expect("the session runs")
        .expect("routed");
    assert_eq!(route.server, "user", "the user server's template wins");
    let read = route
        .caller
        .read_resource(rmcp::model::ReadResourceRequestParams::new(
            "fixture://resources/1",
        ))
        .await
        .expect("read");
    let text = serde_json::to_string(&read).expect("json");
    assert!(
        text.contains("fixture template: fixture://resources/1"),
        "{text}"
    );
    a.stop().await;
    pool.shutdown().await;
}

/// In pool mode a tool-filter edit keeps the process (its connection id does not change) and
/// the session sees the running server through its new entry at once: `includeTools` narrows
/// the catalog and `status` counts the tools offered, without a restart.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_filter_edit_changes_the_view_without_a_restart() {
    let dir = Dir::new();
    let pool = SharedPool::start(PoolOptions::default());
    dir.settings("a", json!({"x": dir.server("x", "echo,add")}));
    let mut a = Run::start(&pool, dir.inputs("a"), "a");
    a.pass("start").await;
    assert_eq!(a.tools().await, ["mcp__x__echo", "mcp__x__add"]);
    let before = dir.pids("x");
    let mut narrowed = dir.server("x", "echo,add");
    narrowed["includeTools"] = json!(["echo"]);
    dir.settings("a", json!({ "x": narrowed }));
    let pass = a.reload("the filter edit").await;
    assert!(!pass.started("x"), "no restart: {:?}", pass.report.steps);
    assert_eq!(a.tools().await, ["mcp__x__echo"]);
    let status = a.handle.status().await.expect("the session runs");
    let x = status.servers.iter().find(|s| s.name == "x").expect("x");
    assert_eq!(
        (x.state, x.tools),
        (mcp_reconcile::host::State::Connected, 1)
    );
    assert_eq!(dir.pids("x"), before, "the same process");
    a.stop().await;
    pool.shutdown().await;
}
