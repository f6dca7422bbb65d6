//! No server holds another back (issue 41): a session's first listing has the servers that are
//! ready once its start pass finished or its start grace passed, a server ready later is
//! announced, and a call waits only for the server that serves it.
//!
//! Real processes: the fixture server, one of them held back by `--wait-for GATE` until the
//! test creates the gate — only after it got the answer it checks, so nothing here depends on
//! how long anything takes. In the engine on both backends (its own processes, a shared pool)
//! with every timer on a `ManualClock`: the grace ends when the test moves the clock, never by
//! itself; and end to end through `serve` on both backends (`--no-daemon`, a daemon session).

use crate::common;

use std::fs;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use common::*;
use mcp_reconcile::clock::ManualClock;
use mcp_reconcile::host::{
    Control, Host, HostEvent, HostOptions, MergedCatalog, Route, RunningSession, State,
    StatusReport, Target, STARTUP_WAIT, START_GRACE,
};
use mcp_reconcile::inputs::Inputs;
use mcp_reconcile::pool::{PoolOptions, SharedPool};
use serde_json::json;
use tokio::sync::{mpsc, oneshot};

const OK_TOOL: &str = "mcp__ok__echo";
const SLOW_TOOL: &str = "mcp__slow__echo";

/// A project with a healthy server `ok` and a server `slow` that answers nothing until the
/// gate file exists; the gate's path.
fn held_back_project() -> (Project, PathBuf) {
    held_back_project_sharing(None)
}

/// [`held_back_project`] with `mcp.share` set: a warm start needs the sessions to share (each
/// session has processes of its own by default).
fn held_back_project_sharing(share: Option<&str>) -> (Project, PathBuf) {
    let p = Project::new();
    let gate = p.path("gate");
    let slow = with_args(
        p.server("slow", "echo"),
        &["--wait-for", gate.to_str().expect("utf-8 path")],
    );
    let mut settings = json!({"mcpServers": {"ok": p.server("ok", "echo"), "slow": slow}});
    if let Some(share) = share {
        settings["mcp"] = json!({ "share": share });
    }
    p.write_settings(settings);
    (p, gate)
}

/// Where a session's connections live.
#[derive(Clone, Copy)]
enum Backend {
    Own,
    Pool,
}

/// A session driven through its control channel, every timer on `time`.
struct Session {
    session: RunningSession,
    events: mpsc::UnboundedReceiver<HostEvent>,
    time: ManualClock,
    pool: Option<SharedPool>,
    _files: mpsc::UnboundedSender<mcp_reconcile::watcher::Change>,
}

impl Session {
    fn start(p: &Project, backend: Backend) -> Session {
        Session::start_on(p, backend, None, "slow-start")
    }

    /// A session named `name`; on the pool `on` (a session of it already runs) or a new one.
    fn start_on(p: &Project, backend: Backend, on: Option<&Session>, name: &str) -> Session {
        let time = on.map_or_else(ManualClock::new, |s| s.time.clone());
        let options = HostOptions {
            clock: time.clock(),
            ..HostOptions::default()
        };
        let inputs = Inputs::new(&p.options()).expect("inputs");
        let (files, files_rx) = mpsc::unbounded_channel();
        let (events, session, pool) = match backend {
            Backend::Own => {
                let mut host = Host::new(inputs, options);
                let events = host.subscribe();
                (events, host.spawn_fed(files_rx), None)
            }
            Backend::Pool => {
                let pool = on.and_then(|s| s.pool.clone()).unwrap_or_else(|| {
                    SharedPool::start(PoolOptions {
                        clock: time.clock(),
                        ..PoolOptions::default()
                    })
                });
                let mut host = Host::in_pool(inputs, options, &pool, name);
                let events = host.subscribe();
                (events, host.spawn_fed(files_rx), Some(pool))
            }
        };
        Session {
            session,
            events,
            time,
            pool,
            _files: files,
        }
    }

    /// Sends the request `make` builds; its answer, when it comes.
    fn send<T>(&self, make: impl FnOnce(oneshot::Sender<T>) -> Control) -> oneshot::Receiver<T> {
        let (tx, rx) = oneshot::channel();
        self.session
            .handle()
            .send(make(tx))
            .expect("the session runs");
        rx
    }

    /// The session's status. Requests are handled in order: once this is answered, every
    /// request sent before it has been handled (answered, or set waiting).
    async fn status(&self) -> StatusReport {
        answer(self.send(Control::Status), "status").await
    }

    async fn wait_state(&self, server: &str, state: State) {
        let start = Instant::now();
        loop {
            let status = self.status().await;
            if status
                .servers
                .iter()
                .any(|s| s.name == server && s.state == state)
            {
                return;
            }
            assert!(
                start.elapsed() < PATIENCE,
                "{server} never {state:?}: {status:?}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Waits for a catalog change that touches the tools.
    async fn tools_changed(&mut self) {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match tokio::time::timeout(left, self.events.recv()).await {
                Ok(Some(HostEvent::CatalogChanged(change))) if change.tools => return,
                Ok(Some(_)) => {}
                _ => panic!("no catalog change of the tools"),
            }
        }
    }

    async fn stop(self) {
        self.session.shutdown().await.expect("the session task");
        if let Some(pool) = self.pool {
            pool.shutdown().await;
        }
    }

    /// Ends the session, leaving the pool it shares running.
    async fn leave(self) {
        self.session.shutdown().await.expect("the session task");
    }
}

/// The answer on `rx` (bounded by [`PATIENCE`]).
async fn answer<T>(rx: oneshot::Receiver<T>, what: &str) -> T {
    tokio::time::timeout(PATIENCE, rx)
        .await
        .unwrap_or_else(|_| panic!("no answer to {what}"))
        .unwrap_or_else(|_| panic!("the session dropped {what}"))
}

fn names(catalog: &MergedCatalog) -> Vec<String> {
    catalog.tools.iter().map(|t| t.name.to_string()).collect()
}

fn route_to(routed: Result<Route, String>) -> String {
    routed
        .map(|r| r.server)
        .unwrap_or_else(|e| panic!("not routed: {e}"))
}

/// Guards a session's start against a slow server, with the clock standing still but for the
/// start grace: a call to the ready server is routed at once, the first listing comes at the
/// grace's end with the ready server's tools only, a call to the held-back server waits for
/// it (and goes through once it is up), and its tools are announced and listed then.
async fn a_held_back_server_holds_back_nothing_else(backend: Backend) {
    let (p, gate) = held_back_project();
    let mut session = Session::start(&p, backend);
    session.wait_state("ok", State::Connected).await;

    // The ready server's tool is routed while the other one is held back.
    let routed = answer(
        session.send(|tx| Control::Route(Target::Tool(OK_TOOL.into()), tx)),
        "route",
    )
    .await;
    assert_eq!(route_to(routed), "ok");

    // The first listing waits for the grace (the pass cannot end: `slow` is held back)…
    let mut catalog = session.send(Control::Catalog);
    let mut call = session.send(|tx| Control::Route(Target::Tool(SLOW_TOOL.into()), tx));
    session.status().await;
    assert!(
        catalog.try_recv().is_err(),
        "the listing waits for the grace"
    );
    assert!(call.try_recv().is_err(), "a call to slow waits for slow");
    // … and not a millisecond of the clock longer; then it has what is ready.
    session.time.advance(Duration::from_millis(START_GRACE.0));
    let listed = names(&answer(catalog, "the first listing").await);
    assert!(listed.contains(&OK_TOOL.to_owned()), "{listed:?}");
    assert!(!listed.contains(&SLOW_TOOL.to_owned()), "{listed:?}");
    session.status().await;
    assert!(
        call.try_recv().is_err(),
        "the call still waits for slow: {STARTUP_WAIT:?}"
    );

    // Let slow start: the waiting call goes to it, and its tools are announced.
    fs::write(&gate, "go").expect("gate");
    assert_eq!(route_to(answer(call, "the call to slow").await), "slow");
    session.tools_changed().await;
    let listed = names(&answer(session.send(Control::Catalog), "a listing").await);
    assert!(
        listed.contains(&OK_TOOL.to_owned()) && listed.contains(&SLOW_TOOL.to_owned()),
        "{listed:?}"
    );
    session.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_back_server_holds_back_nothing_else_in_a_session_of_its_own() {
    a_held_back_server_holds_back_nothing_else(Backend::Own).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_held_back_server_holds_back_nothing_else_on_a_shared_pool() {
    a_held_back_server_holds_back_nothing_else(Backend::Pool).await;
}

/// `serve` on `daemon` or in its own process, a client on its stdio; the daemon's guard after
/// it, so `serve` goes first.
async fn serve(p: &Project, daemon: bool) -> (Served, Option<Group>) {
    let log = p.path("serve.log");
    let mut command = std::process::Command::new(cli());
    command
        .arg("serve")
        .args(p.flags())
        .env("MCP_RECONCILE_LOG", "info")
        .stderr(fs::File::create(&log).expect("log"));
    let daemon = on_backend(p, &mut command, daemon);
    (Served::spawn(command, log).await, daemon)
}

/// Guards a client's first session end to end: the handshake and the first `tools/list` are
/// answered while a server is held back, with the ready server's tools, which can be called;
/// once the held-back server is up the client hears `tools/list_changed` and lists its tools.
async fn a_client_gets_the_ready_servers_while_one_is_held_back(daemon: bool) {
    let (p, gate) = held_back_project();
    let (mut served, _daemon) = serve(&p, daemon).await;
    let listed = served.tool_names().await;
    assert!(listed.contains(&OK_TOOL.to_owned()), "{listed:?}");
    assert!(!listed.contains(&SLOW_TOOL.to_owned()), "{listed:?}");
    let echoed = served.call_text(OK_TOOL, json!({"text": "ready"})).await;
    assert!(echoed.contains("ready"), "{echoed}");

    fs::write(&gate, "go").expect("gate");
    served.tools_changed().await;
    let listed = served.tool_names().await;
    assert!(listed.contains(&SLOW_TOOL.to_owned()), "{listed:?}");
    let echoed = served.call_text(SLOW_TOOL, json!({"text": "late"})).await;
    assert!(echoed.contains("late"), "{echoed}");
    served.close().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_gets_the_ready_servers_while_one_is_held_back_in_process() {
    a_client_gets_the_ready_servers_while_one_is_held_back(false).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_client_gets_the_ready_servers_while_one_is_held_back_on_a_daemon() {
    a_client_gets_the_ready_servers_while_one_is_held_back(true).await;
}

/// Guards the warm start: a session of a pool that already runs its servers has its complete
/// first listing from the pool's listings, with no new process and no wait — the clock stands
/// still (no grace ends), and the held-back server's gate is gone, so a process started anew
/// for it would never answer.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_of_a_pool_that_runs_its_servers_lists_them_at_once() {
    let (p, gate) = held_back_project_sharing(Some("project"));
    fs::write(&gate, "go").expect("gate");
    let first = Session::start(&p, Backend::Pool);
    first.wait_state("slow", State::Connected).await;
    fs::remove_file(&gate).expect("gate gone");

    let second = Session::start_on(&p, Backend::Pool, Some(&first), "warm");
    let listed = names(&answer(second.send(Control::Catalog), "the warm listing").await);
    assert!(
        listed.contains(&OK_TOOL.to_owned()) && listed.contains(&SLOW_TOOL.to_owned()),
        "{listed:?}"
    );
    assert_eq!(p.spawns("slow"), 1, "one process for both sessions");
    second.leave().await;
    first.stop().await;
}

/// Guards the warm start end to end: a second client of the daemon, while the first one's
/// session runs the servers, is handed every server's tools in its first `tools/list` — the
/// held-back server's gate is gone by then, so only its running process can offer them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_second_client_of_the_daemon_lists_every_running_server_at_once() {
    let (p, gate) = held_back_project_sharing(Some("project"));
    fs::write(&gate, "go").expect("gate");
    let (first, daemon) = serve(&p, true).await;
    first.wait_tool(SLOW_TOOL).await;
    fs::remove_file(&gate).expect("gate gone");

    let log = p.path("second.log");
    let mut command = std::process::Command::new(cli());
    command
        .arg("serve")
        .args(p.flags())
        .env("XDG_RUNTIME_DIR", p.path("run"))
        .env("MCP_RECONCILE_LOG", "info")
        .stderr(fs::File::create(&log).expect("log"));
    let second = Served::spawn(command, log).await;
    let listed = second.tool_names().await;
    assert!(
        listed.contains(&OK_TOOL.to_owned()) && listed.contains(&SLOW_TOOL.to_owned()),
        "{listed:?}"
    );
    assert_eq!(p.spawns("slow"), 1, "one process for both sessions");
    second.close().await;
    first.close().await;
    drop(daemon);
}

/// Guards the cold start: every server of a session starts at once, so servers that hold back
/// their start — more of them than the start limit of 8 there was — delay no other server's,
/// and none of theirs waits for a turn.
async fn more_held_back_servers_than_the_old_start_limit_delay_nothing(backend: Backend) {
    let p = Project::new();
    let gate = p.path("gate");
    let mut servers = serde_json::Map::new();
    for i in 0..9 {
        let name = format!("a{i}");
        let mut held = with_args(
            p.server(&name, "echo"),
            &["--wait-for", gate.to_str().expect("utf-8 path")],
        );
        // Held past the test's patience, not given up on meanwhile.
        held["discoveryTimeoutMs"] = json!(120_000);
        servers.insert(name, held);
    }
    servers.insert("z".into(), p.server("z", "echo"));
    p.write_settings(json!({ "mcpServers": servers }));
    let session = Session::start(&p, backend);
    // Nine starts held back at once, beside a tenth that is up: with a limit of 8 at most eight
    // of the ten could ever be under way.
    wait_until_async("every held-back server spawned", || {
        (0..9).all(|i| p.spawns(&format!("a{i}")) == 1)
    })
    .await;
    session.wait_state("z", State::Connected).await;
    let status = session.status().await;
    assert!(
        status
            .servers
            .iter()
            .filter(|s| s.name.starts_with('a'))
            .all(|s| s.state == State::Connecting),
        "the held-back ones still start: {status:?}"
    );
    fs::write(&gate, "go").expect("gate");
    session.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn more_held_back_servers_than_the_old_start_limit_delay_nothing_in_a_session_of_its_own() {
    more_held_back_servers_than_the_old_start_limit_delay_nothing(Backend::Own).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn more_held_back_servers_than_the_old_start_limit_delay_nothing_on_a_shared_pool() {
    more_held_back_servers_than_the_old_start_limit_delay_nothing(Backend::Pool).await;
}
