//! One engine, two backends: the same session, run on its own processes (`watch`,
//! `serve --no-daemon`) and on a lease of the shared pool (a daemon session), must tell its
//! observers the same things — the same plans, approvals, tool-not-found texts and status —
//! through add, edit, remove, a failing server, a pending server approved, a settings file
//! deleted and restored inside the grace and left deleted past it, and a `reload`; a crashing
//! server's planned retries, crash loop, manual reconnect and reload; and a dev-mode server
//! restarted for a source edit.

use crate::common;

use std::fs;
use std::time::{Duration, Instant};

use common::{Project, PATIENCE};
use mcp_reconcile::clock::{Clock, ManualClock};
use mcp_reconcile::host::{
    Host, HostEvent, HostHandle, HostOptions, RunningSession, ServerStatus, State, Target,
};
use mcp_reconcile::inputs::Inputs;
use mcp_reconcile::pool::{PoolOptions, SharedPool};
use mcp_reconcile::session::Session;
use mcp_reconcile_kernel::Reason;
use serde_json::json;
use tokio::sync::mpsc;

#[derive(Clone, Copy, Debug)]
enum Backend {
    Own,
    Pool,
}

/// A running session and what it has told so far.
struct Run {
    handle: HostHandle,
    events: mpsc::UnboundedReceiver<HostEvent>,
    /// What a person would read of it, normalized (no timings, no pids).
    transcript: Vec<String>,
    session: RunningSession,
    /// The passes [`Run::pass`] left out (another trigger than the step's), for a timeout's
    /// message.
    skipped: Vec<String>,
    pool: Option<SharedPool>,
    /// The test's directory, blanked in the transcript.
    root: String,
}

impl Run {
    async fn start(p: &Project, backend: Backend) -> Run {
        Run::start_on(p, backend, Clock::tokio()).await
    }

    /// [`Run::start`] with every timer of the session (and of the pool) on `clock`.
    async fn start_on(p: &Project, backend: Backend, clock: Clock) -> Run {
        let options = HostOptions {
            clock: clock.clone(),
            ..HostOptions::default()
        };
        let inputs = Inputs::new(&p.options()).expect("inputs");
        let (events, session, pool) = match backend {
            Backend::Own => {
                let mut host = Host::new(inputs, options);
                let events = host.subscribe();
                (events, host.spawn().expect("the session starts"), None)
            }
            Backend::Pool => {
                let pool = SharedPool::start(PoolOptions {
                    drain: Duration::from_millis(50),
                    clock,
                    ..PoolOptions::default()
                });
                let mut host = Host::in_pool(inputs, options, &pool, "parity");
                let events = host.subscribe();
                (
                    events,
                    host.spawn().expect("the session starts"),
                    Some(pool),
                )
            }
        };
        Run {
            handle: session.handle().clone(),
            events,
            transcript: Vec::new(),
            session,
            skipped: Vec::new(),
            pool,
            root: p
                .path("")
                .to_string_lossy()
                .trim_end_matches('/')
                .to_owned(),
        }
    }

    /// Reads events until a pass that is not a retry is applied, noting what a person reads.
    /// The session's next event, bounded.
    async fn next_event(&mut self, what: &str, deadline: Instant) -> HostEvent {
        let left = deadline.saturating_duration_since(Instant::now());
        tokio::time::timeout(left, self.events.recv())
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "timed out waiting for {what}: {:#?}\nleft out: {:#?}",
                    self.transcript, self.skipped
                )
            })
            .expect("the session runs")
    }

    /// Reads events until a pass whose trigger mentions `trigger` (`"start"`, `"user
    /// settings"` as in `change in user settings`, `"manual reload"`) is applied, noting it.
    async fn pass(&mut self, what: &str, trigger: &str) {
        self.pass_of(what, Some(trigger)).await;
    }

    /// Reads events until a pass triggered by a due retry is applied, noting it.
    async fn retry_pass(&mut self, what: &str) {
        self.pass_of(what, None).await;
    }

    /// [`Run::pass`] (`None`: only a pass a due retry triggered). Retries are the engine's on
    /// both backends — the pool reports each connection's supervision to the session — so a
    /// retry step is compared wherever it is planned; only the passes the real clock's
    /// retries trigger are left out of a scenario timed by it, since how many fall between two
    /// edits depends on the machine's speed. A pass of another trigger is left out too: under
    /// load a pass of an earlier write (or of a file the session itself touched) can land
    /// between two steps, and taking it for the step's own would pair the wrong passes.
    async fn pass_of(&mut self, what: &str, trigger: Option<&str>) {
        let deadline = Instant::now() + PATIENCE;
        let wanted = |got: &str| match trigger {
            Some(trigger) => got != "retry" && got.contains(trigger),
            None => got == "retry",
        };
        loop {
            match self.next_event(what, deadline).await {
                HostEvent::PlanApplied(report) if !wanted(&report.trigger) => {
                    // Kept out of the transcript (the backends may differ in such passes),
                    // but shown if the wanted pass never comes.
                    self.skipped
                        .push(format!("{what}: skipped a pass ({})", report.trigger));
                }
                HostEvent::PlanApplied(report) => {
                    let mut line = format!("{what} ({}): plan", report.trigger);
                    for step in &report.steps {
                        let kind = step.action.kind();
                        if matches!(kind, "keep" | "noop" | "skip") {
                            continue;
                        }
                        line.push_str(&format!(" {kind} {}", step.action.name().unwrap_or("")));
                        if let Some(tools) = &step.tools {
                            line.push_str(&format!(" {:?}", tools.after));
                        }
                        if let Some(reason) = &step.reason {
                            line.push_str(&format!(" ({reason})"));
                        }
                        if step.error.is_some() {
                            line.push_str(" failed");
                        }
                    }
                    line.push_str(&format!(" missing={:?}", report.file_missing));
                    self.note(line);
                    return;
                }
                HostEvent::ApprovalNeeded(requests) => {
                    for request in requests {
                        self.note(format!("{what}: asks about {}", request.name));
                    }
                }
                HostEvent::ReloadFailed(message) => {
                    self.note(format!("{what}: reload failed: {message}"));
                }
                HostEvent::LspPlanApplied(actions) => {
                    self.note(format!("{what}: lsp {actions:?}"));
                }
                HostEvent::ClientUpdate(_)
                | HostEvent::CatalogChanged(_)
                | HostEvent::LspUpdate(_)
                | HostEvent::Idle { .. } => {}
            }
        }
    }

    /// What a client calling `tool` is told, retry times blanked.
    fn note(&mut self, line: String) {
        let line = line.replace(&self.root, "<project>");
        self.transcript.push(line);
    }

    async fn call(&mut self, what: &str, tool: &str) {
        let routed = self
            .handle
            .route(Target::Tool(tool.to_owned()))
            .await
            .expect("the session runs");
        let said = match routed {
            Ok(route) => format!("routed to {}", route.server),
            Err(message) => blank_digits(&message.replace(&self.root, "<project>")),
        };
        self.note(format!("{what}: {tool} → {said}"));
    }

    async fn status(&mut self, what: &str) {
        let report = self.handle.status().await.expect("the session runs");
        let servers: Vec<String> = report
            .servers
            .iter()
            .map(|s| format!("{} {} tools={}", s.name, s.state, s.tools))
            .collect();
        self.note(format!("{what}: status {}", servers.join(", ")));
    }

    async fn stop(self) -> Vec<String> {
        self.session.shutdown().await.expect("the session task");
        if let Some(pool) = self.pool {
            pool.shutdown().await;
        }
        self.transcript
    }
}

/// Runs `scenario` on a session's own processes, then on the shared pool; asserts both tell the
/// same and returns what they told.
async fn same_on_both<F: std::future::Future<Output = Vec<String>>>(
    scenario: impl Fn(Backend) -> F,
) -> Vec<String> {
    let own = scenario(Backend::Own).await;
    let pooled = scenario(Backend::Pool).await;
    assert_eq!(
        own, pooled,
        "\nown processes:\n{own:#?}\nshared pool:\n{pooled:#?}"
    );
    own
}

fn blank_digits(text: &str) -> String {
    text.chars()
        .map(|c| if c.is_ascii_digit() { '#' } else { c })
        .collect()
}

async fn scenario(backend: Backend) -> Vec<String> {
    let p = Project::new();
    let missing = json!({"command": p.path("no-such-program").to_string_lossy()});
    p.write_settings(json!({"mcpServers": {"a": p.server("a", "echo")}}));
    p.write(
        &p.mcp_json(),
        &json!({"mcpServers": {"proj": p.server("proj", "echo")}}),
    );
    let mut run = Run::start(&p, backend).await;
    run.pass("start", "start").await;
    run.status("start").await;
    run.call("start", "mcp__proj__echo").await;

    p.write_settings(json!({"mcpServers": {
        "a": p.server("a", "echo,add"),
        "broken": missing,
    }}));
    run.pass("edit a, add broken", "user settings").await;
    run.call("edit", "mcp__a__add").await;
    run.call("edit", "mcp__broken__x").await;

    let approved = p.run(&["approve", "proj"]);
    assert!(approved.status.success(), "{approved:?}");
    run.pass("approve proj", "approvals").await;
    run.call("approved", "mcp__proj__echo").await;

    run.handle.reload().await.expect("the session runs");
    run.pass("reload", "manual reload").await;
    // The reload restarts the failed server (the session's pass, or the pool for its holders):
    // once that start has failed again, its tool says so.
    run.wait_server("broken failed again", "broken", |s| {
        s.state == State::Failed && s.retry_in_ms.is_some()
    })
    .await;
    run.call("reload", "mcp__broken__x").await;

    p.write_settings(json!({"mcpServers": {"broken": missing}}));
    run.pass("remove a", "user settings").await;
    run.call("removed", "mcp__a__echo").await;

    // Deleted and written again inside the grace: nothing is stopped.
    let settings = fs::read(p.user_settings()).expect("settings");
    fs::remove_file(p.user_settings()).expect("delete");
    run.pass("deleted, held", "user settings").await;
    fs::write(p.user_settings(), &settings).expect("restore");
    run.pass("restored inside the grace", "user settings").await;
    run.status("restored").await;

    // Deleted for good: its servers go once the grace has passed, as `file missing`.
    fs::remove_file(p.user_settings()).expect("delete");
    run.pass("deleted", "user settings").await;
    run.pass("past the grace", "user settings").await;
    run.status("past the grace").await;
    run.stop().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_says_the_same_on_its_own_processes_and_on_the_shared_pool() {
    same_on_both(scenario).await;
}

/// A server that crashes `after` ms after it starts.
fn crashing(p: &Project, name: &str, after: u64) -> serde_json::Value {
    let mut server = p.server(name, "echo");
    if let Some(args) = server["args"].as_array_mut() {
        args.push(json!("--crash-after"));
        args.push(json!(after.to_string()));
    }
    server
}

impl Run {
    /// What `find` picks from the session's status, once it picks something.
    async fn wait_report<T>(
        &self,
        what: &str,
        find: impl Fn(&mcp_reconcile::host::StatusReport) -> Option<T>,
    ) -> T {
        let start = Instant::now();
        loop {
            let report = self.handle.status().await.expect("the session runs");
            if let Some(found) = find(&report) {
                return found;
            }
            assert!(
                start.elapsed() < PATIENCE,
                "timed out waiting for {what}: {report:#?}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// `name`'s status once `pred` holds for it.
    async fn wait_server(
        &self,
        what: &str,
        name: &str,
        pred: impl Fn(&ServerStatus) -> bool,
    ) -> ServerStatus {
        self.wait_report(what, |report| {
            report
                .servers
                .iter()
                .find(|s| s.name == name && pred(s))
                .cloned()
        })
        .await
    }
}

/// A crashing server backs off on the kernel's schedule into a crash loop; a call to its tool
/// says so; a manual `reconnect` clears it, and so does `reload`. On the session's own supervisor and on the pool's alike, with
/// every timer on one [`ManualClock`].
async fn crash_scenario(backend: Backend) -> Vec<String> {
    let p = Project::new();
    p.write_settings(json!({"mcpServers": {"crashy": crashing(&p, "crashy", 150)}}));
    let time = ManualClock::new();
    let mut run = Run::start_on(&p, backend, time.clock()).await;
    let mut schedule = Vec::new();
    loop {
        let attempt = schedule.len() as u32 + 1;
        let s = run
            .wait_server(&format!("failure {attempt}"), "crashy", |s| {
                s.state == State::Failed && s.attempts == attempt
            })
            .await;
        if s.reason == Some(Reason::CrashLoop) {
            run.note(format!(
                "crash loop after {} attempts, {} spawns, retry {:?}, stderr kept: {}",
                s.attempts,
                s.spawns,
                s.retry_in_ms,
                s.last_error
                    .unwrap_or_default()
                    .contains("crashing as asked")
            ));
            break;
        }
        let wait = s.retry_in_ms.expect("a retry time while backing off");
        schedule.push(format!("attempt {} backs off {wait} ms", s.attempts));
        time.advance(Duration::from_millis(wait));
        // The session's engine plans the retry on both backends.
        run.retry_pass(&format!("retry {}", attempt + 1)).await;
    }
    for line in schedule {
        run.note(line);
    }
    run.call("crash loop", "mcp__crashy__echo").await;
    // A manual reconnect: the kernel's `decide_restart` forgives it and stops what runs first,
    // whoever executes it (the session's pass, or the pool for its holders).
    let restarted = run
        .handle
        .reconnect(Some("crashy".into()))
        .await
        .expect("the session runs");
    run.note(format!("reconnect: {restarted:?}"));
    let s = run
        .wait_server("a fresh first failure after reconnect", "crashy", |s| {
            s.state == State::Failed && s.attempts == 1 && s.spawns == 9
        })
        .await;
    run.note(format!(
        "after reconnect: {} attempt {} reason {:?}",
        s.state, s.attempts, s.reason
    ));
    run.handle.reload().await.expect("the session runs");
    let s = run
        .wait_server("a fresh first failure after reload", "crashy", |s| {
            s.state == State::Failed && s.attempts == 1 && s.spawns == 10
        })
        .await;
    run.note(format!(
        "after reload: {} attempt {} reason {:?}",
        s.state, s.attempts, s.reason
    ));
    run.stop().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_loop_runs_and_clears_alike_on_both_backends() {
    let own = same_on_both(crash_scenario).await;
    assert!(
        own.iter().any(|l| l
            .starts_with("crash loop after 8 attempts, 8 spawns, retry None, stderr kept: true")),
        "{own:#?}"
    );
    assert!(
        own.iter()
            .any(|l| l == "after reconnect: failed attempt 1 reason Some(BackingOff)"),
        "{own:#?}"
    );
    let retries = own
        .iter()
        .filter(|l| l.starts_with("retry ") && l.contains("(retry): plan retry crashy "))
        .count();
    assert_eq!(retries, 7, "one planned retry per backoff: {own:#?}");
}

/// The JSON language server from the repository's `node_modules` (`scripts/setup.sh`).
fn json_server(settings: serde_json::Value, args: &[&str]) -> serde_json::Value {
    let path = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../node_modules/.bin/vscode-json-language-server");
    assert!(
        path.exists(),
        "{} is missing: run `bash scripts/setup.sh`",
        path.display()
    );
    json!({
        "command": path.to_string_lossy(),
        "args": args,
        "extensionToLanguage": {".json": "json"},
        "settings": settings,
    })
}

impl Run {
    /// Reads events until a language-server plan arrives; notes its actions.
    async fn lsp_pass(&mut self, what: &str) {
        let deadline = Instant::now() + PATIENCE;
        loop {
            if let HostEvent::LspPlanApplied(actions) = self.next_event(what, deadline).await {
                let kinds: Vec<String> = actions
                    .iter()
                    .map(|a| serde_json::to_value(a).expect("serializes").to_string())
                    .collect();
                self.note(format!("{what}: lsp {}", kinds.join(" ")));
                return;
            }
        }
    }
}

/// A user language server: started, a settings edit pushed live (same process), a seed edit
/// restarting it, its removal stopping it — in a session on its own processes and in one on
/// the pool (language servers are the session's own either way).
async fn lsp_scenario(backend: Backend) -> Vec<String> {
    let p = Project::new();
    let validate = |on: bool| json!({"json": {"validate": {"enable": on}}});
    p.write(
        &p.user_lsp(),
        &json!({"json": json_server(validate(true), &["--stdio"])}),
    );
    let mut run = Run::start(&p, backend).await;
    run.lsp_pass("start").await;
    let up =
        |s: &mcp_reconcile::host::LspServerStatus| s.name == "json" && s.state == State::Connected;
    let first = run.wait_lsp("json up", up).await;
    p.write(
        &p.user_lsp(),
        &json!({"json": json_server(validate(false), &["--stdio"])}),
    );
    run.lsp_pass("settings edit").await;
    let pushed = run
        .wait_lsp("the settings pushed", |s| up(s) && s.settings_pushes == 2)
        .await;
    run.note(format!(
        "settings edit: same process {}",
        pushed.pid == first.pid
    ));
    p.write(
        &p.user_lsp(),
        &json!({"json": json_server(validate(false), &["--stdio", "--clientProcessId", "1"])}),
    );
    run.lsp_pass("seed edit").await;
    let restarted = run
        .wait_lsp("a new process", |s| {
            up(s) && s.pid != first.pid && s.pid.is_some()
        })
        .await;
    run.note(format!("seed edit: pushes {}", restarted.settings_pushes));
    p.write(&p.user_lsp(), &json!({}));
    run.lsp_pass("removed").await;
    run.stop().await
}

impl Run {
    async fn wait_lsp(
        &self,
        what: &str,
        pred: impl Fn(&mcp_reconcile::host::LspServerStatus) -> bool,
    ) -> mcp_reconcile::host::LspServerStatus {
        self.wait_report(what, |report| {
            report.language_servers.iter().find(|s| pred(s)).cloned()
        })
        .await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn language_servers_restart_and_reconfigure_alike_on_both_backends() {
    let own = same_on_both(lsp_scenario).await;
    assert!(
        own.iter().any(|l| l == "settings edit: same process true"),
        "{own:#?}"
    );
}

/// Dev mode: a source file the entry's `dev.watch` names is edited; the server is restarted
/// (a reconnect that says which file), the other keeps its process — on the session's own
/// supervisor and on the pool alike.
async fn dev_scenario(backend: Backend) -> Vec<String> {
    let p = Project::new();
    let app = p.path("app");
    fs::create_dir_all(app.join("src")).expect("mkdir");
    fs::write(app.join("src/x.ts"), "// v0").expect("write");
    let mut dev = p.server("dev", "echo");
    dev["cwd"] = json!(app.to_string_lossy());
    dev["dev"] = json!({"watch": ["src/*.ts"]});
    p.write_settings(json!({"mcpServers": {"dev": dev, "plain": p.server("plain", "echo")}}));
    let mut run = Run::start(&p, backend).await;
    run.pass("start", "start").await;
    let up = |s: &ServerStatus| s.state == State::Connected && s.pid.is_some();
    let dev = run.wait_server("dev up", "dev", up).await.pid;
    let plain = run.wait_server("plain up", "plain", up).await.pid;
    let tmp = app.join("src/x.ts.tmp~");
    fs::write(&tmp, "// v1").expect("write");
    fs::rename(&tmp, app.join("src/x.ts")).expect("rename");
    run.pass("source changed", "source changed: src/x.ts").await;
    run.wait_server("dev up again", "dev", |s| up(s) && s.pid != dev)
        .await;
    let now = run.wait_server("plain", "plain", up).await.pid;
    run.note(format!("plain kept its process: {}", now == plain));
    run.stop().await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_source_edit_restarts_a_dev_server_alike_on_both_backends() {
    let own = same_on_both(dev_scenario).await;
    assert!(
        own.iter().any(|l| {
            l
            == "source changed (source changed: src/x.ts): plan reconnect dev [\"echo\"] (source changed: src/x.ts) missing=[]"
        }),
        "{own:#?}"
    );
    assert!(
        own.iter().any(|l| l == "plain kept its process: true"),
        "{own:#?}"
    );
}
