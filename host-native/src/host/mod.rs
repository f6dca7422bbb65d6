//! The live session: keeps real MCP connections equal to the settings files.
//!
//! # Drive loop
//! The drive loop (`Host::run`, started by [`Host::spawn`]) owns all state and reacts to one input at a time:
//! 1. start: load every input, then reconcile (run #1 of the kernel's
//!    [`ReloadScheduler`]);
//! 2. a watched file changes → `handle_file_arrival` (whether the file parses now, and whether
//!    it was renamed into place or closed by its writer); the scheduler applies a rename save
//!    and a closed write in place at once, waits its quiet window after a write in place that
//!    parses but is not closed yet, and its trailing debounce while a file does not parse
//!    (edits during a run → exactly one follow-up);
//! 3. a run reloads only the changed files, asks the kernel whether anything
//!    MCP-relevant changed ([`hot_reload`](mcp_reconcile_kernel::hot_reload::hot_reload)) and for a [`plan`], tears down
//!    what the plan removes (purging its tools first) and starts the rest in
//!    all at once, without blocking the loop: status requests are
//!    answered while servers are still connecting;
//! 4. the connections live in the shared connection supervisor
//!    (`crate::supervisor`, keyed by server name): its reports (a start
//!    ended, a crash, `list_changed`) update status and the catalog; a due
//!    retry runs a pass of its own;
//! 5. control requests (status, reload, reconnect, dry-run plan) come from the
//!    CLI over the session socket ([`crate::ipc`]); a gateway asks for the
//!    merged catalog and where a request goes ([`Control::Catalog`],
//!    [`Control::Route`]; `waiters`: the first listing waits for the start pass at most
//!    the start grace ([`START_GRACE`]), a route only for a server still starting) and
//!    forwards it itself, so a slow call never blocks the loop;
//! 6. a source file a server's `dev.watch` globs name changed (`dev`): that server joins
//!    the scheduler's next run like a changed file, and the run restarts it make before
//!    break;
//! 7. after any of these, when the merged catalog (qualified tools, prompts,
//!    resources of connected servers) differs from the last one announced,
//!    [`HostEvent::CatalogChanged`] says which lists changed.
//!
//! # Parts
//! `Host` holds the decision state (inputs, scheduler, the desired servers and their gating,
//! the run in flight) and owned parts, each with its data and the methods that touch only it:
//! the announcer (`announcer`: observers, what was announced), the start waiters (`waiters`),
//! the missing-file grace (`missing`), the restart requests between passes (`restart`), dev
//! watches (`dev`), lazy servers (`lazy`), the language servers (`lsp`) and the connections
//! (`backend`).
//!
//! # Files
//! `running` ([`Host::spawn`] and the [`RunningSession`] it returns), `control` (the requests
//! of handles), `pass` (one run, as named stages), `reports` (what the connections report, the
//! end of a pass), `restart` (the restart requests between passes; which restart request a
//! plan action is, for the kernel's `decide_restart`), `announcer` (the events and the catalog
//! announcements), `missing` (the missing-file grace), `backend` (where the MCP connections live: [`Own`] or the pool's lease),
//! `waiters` (what a gateway's early requests wait for), `catalog` (the merged catalog,
//! prefix owners, routing), `status`, `dev` (dev mode), `lazy` (lazy servers), `lsp` (the
//! language servers, on a second supervisor), `handle` ([`HostHandle`]), `blocking` (file work
//! off the async loop).

mod announcer;
mod backend;
mod blocking;
mod catalog;
mod control;
mod dev;
mod handle;
mod lazy;
mod lsp;
mod missing;
mod pass;
mod pinned;
mod reports;
mod restart;
mod running;
mod status;
#[cfg(test)]
mod tests;
mod waiters;

use mcp_reconcile_kernel::hot_reload::Previous;
use mcp_reconcile_kernel::lsp::LspAction;
use mcp_reconcile_kernel::plan::{plan, Mode, Online, Plan};
use mcp_reconcile_kernel::reload::{Arrival, FileSource, ReloadScheduler};
use mcp_reconcile_kernel::{assemble, Gating, Millis, Servers};
use tokio::sync::{mpsc, oneshot};

pub use self::backend::{Backend, Held, Own, Restart};
pub(crate) use self::catalog::{adopt, PrefixOwners};
pub use self::catalog::{CatalogChange, MergedCatalog, Route, Target};
pub(crate) use self::handle::ask;
pub use self::handle::{HostHandle, SessionGone};
pub(crate) use self::lsp::LanguageServers;
use self::reports::Running;
pub use self::reports::{PlanReport, Step, ToolDelta};
pub use self::running::RunningSession;
pub use self::status::{LspServerStatus, ServerStatus, State, StatusReport};
use crate::clock::Clock;
use crate::inputs::{Inputs, Snapshot};
use crate::launch::Launch;
use crate::lsp::tools::{LspRoute, LspUnavailable};
use crate::review::ApprovalRequest;
use crate::supervisor::{Mcp, Supervisor};
use crate::watcher::{Change, Landing};

/// How long a call to a tool of a server still starting in the start pass waits for that
/// server before it is answered with what the session knows of it ("still connecting").
pub const STARTUP_WAIT: Millis = Millis(10_000);

/// How long after a session starts its first listing ([`Control::Catalog`]: a client's
/// `initialize` and first `tools/list`) waits for servers still starting: the start pass's end
/// or this, whichever comes first. A server ready later is announced (`list_changed`). Short
/// enough that a client has its listing within a second of the session's start however slow
/// or hung a server is; long enough that the usual stdio server (tens of milliseconds) is in
/// the first listing, for a client that never re-lists.
pub const START_GRACE: Millis = Millis(750);

/// The variable that sets a `serve` session's start grace in milliseconds (at most
/// [`STARTUP_WAIT`]): for a client that lists tools once per session and never re-lists on
/// `list_changed` (Codex, qwen-code), whose first listing may then wait longer for slow servers.
pub const START_GRACE_VAR: &str = "MCP_RECONCILE_START_GRACE_MS";

/// How many servers start at once: all of them. A start is one spawn (from the one forker
/// thread) and an async handshake, so starting every server of a session together costs no
/// thread per server; the pool starts one process per id however many sessions acquire it at
/// once, and the benchmarks start 200 servers in one pass. A bound here only made a hung
/// server hold back the servers queued behind it.
pub const DEFAULT_PARALLELISM: usize = usize::MAX;

/// Host settings that are not read from files.
#[derive(Clone, Debug)]
pub struct HostOptions {
    /// `session` (identity = session key) or `pool`.
    pub mode: Mode,
    /// Servers started at once ([`DEFAULT_PARALLELISM`]: all).
    pub parallelism: usize,
    /// How long the first listing waits for the start pass ([`START_GRACE`]).
    pub start_grace: Millis,
    /// Baseline for benchmarks: restart every server on every change, as
    /// most clients do on reload.
    pub full_restart: bool,
    /// The clock everything the host schedules reads (debounce, §9 retries, the healthy
    /// window): tokio's by default; tests pass a [`ManualClock`](crate::clock::ManualClock)'s.
    pub clock: Clock,
}

impl HostOptions {
    /// These options with the start grace [`START_GRACE_VAR`] sets in `env` (a whole number of
    /// milliseconds, at most [`STARTUP_WAIT`]); unchanged when it is not set or not a number.
    #[must_use]
    pub fn start_grace_from(mut self, env: &crate::inputs::HostEnv) -> Self {
        let set = env.vars.get(START_GRACE_VAR);
        if let Some(ms) = set.and_then(|v| v.trim().parse::<u64>().ok()) {
            self.start_grace = Millis(ms.min(STARTUP_WAIT.0));
        }
        self
    }
}

impl Default for HostOptions {
    fn default() -> Self {
        HostOptions {
            mode: Mode::Session,
            parallelism: DEFAULT_PARALLELISM,
            start_grace: START_GRACE,
            full_restart: false,
            clock: Clock::tokio(),
        }
    }
}

/// What the host tells observers (the `watch` printer, tests); a daemon session sends each to
/// its client as one [`EVENT`](crate::daemon::attached::EVENT) notification.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
#[serde(tag = "event", content = "data", rename_all = "snake_case")]
pub enum HostEvent {
    /// A reconcile pass finished.
    PlanApplied(PlanReport),
    /// Gated servers wait for a decision (map order): each with the config a
    /// decision would be bound to and what its review shows.
    ApprovalNeeded(Vec<ApprovalRequest>),
    /// A reload could not be applied as a whole; what is broken.
    ReloadFailed(String),
    /// A server's state changed outside a pass (crash, catalog change).
    ClientUpdate(ServerStatus),
    /// The merged catalog ([`Control::Catalog`]) changed since it was last
    /// announced (after a pass, a crash, or a server's own `list_changed`).
    CatalogChanged(CatalogChange),
    /// A pass changed language servers (SPEC §14.2): the actions that start, restart or
    /// reconfigure one, or stop one.
    LspPlanApplied(Vec<LspAction>),
    /// A language server's state changed outside a pass (it failed to start, or crashed).
    LspUpdate(LspServerStatus),
    /// The session went idle: no pass runs or is asked for and no debounce is pending, so no
    /// pass follows until something new arrives (a file change, a request, a due retry).
    /// `passes`: how many ran so far. Said once each time it becomes idle.
    Idle {
        /// Passes run so far.
        passes: u64,
    },
}

/// Requests to a running host.
#[derive(Debug)]
pub enum Control {
    /// Current status of every configured server.
    Status(oneshot::Sender<StatusReport>),
    /// Reload now (no debounce; same queue as file events); clears crash loops.
    Reload(oneshot::Sender<()>),
    /// Clear failure state and restart `server` (all when `None`), asked together with the
    /// sessions `also` (the daemon's sessions of one file set: a process they share restarts
    /// once).
    Reconnect {
        /// The server, or every one.
        server: Option<String>,
        /// Other sessions of the pool asking together.
        also: Vec<String>,
        /// The servers restarted, or why none was.
        reply: oneshot::Sender<Result<Vec<String>, String>>,
    },
    /// What a reconcile would do now from the live state (nothing executed).
    Plan(oneshot::Sender<Result<Plan, String>>),
    /// The merged catalog; answered once the start pass has finished or the start grace
    /// ([`START_GRACE`] from the session's start) passed, whichever is first, with the
    /// servers connected by then (the later ones are announced as they come).
    Catalog(oneshot::Sender<MergedCatalog>),
    /// Where a tool call, prompt or resource read goes. `Err` carries the
    /// message for the caller: for a tool, the §4 tool-not-found message
    /// (removed, not allowed, excluded, awaiting approval, rejected, or not
    /// connected). Answered at once, but while the start pass runs, a request for what a
    /// server still starting would serve waits for that server (a client that calls a tool
    /// it remembers from an earlier session gets it, not "not found"), at most
    /// [`STARTUP_WAIT`].
    Route(Target, oneshot::Sender<Result<Route, String>>),
    /// The running language server for files with this extension (`.json`), or the message
    /// for the caller (SPEC §14.5).
    Language(String, oneshot::Sender<Result<LspRoute, LspUnavailable>>),
}

/// The live session. See the module docs for the drive loop. `B` is where its MCP
/// connections live ([`Backend`]): its own processes ([`Own`]) or its holds on the daemon's
/// shared pool (the pool's `Lease`).
pub struct Host<B = Own> {
    inputs: Inputs,
    options: HostOptions,
    scheduler: ReloadScheduler,
    snapshot: Option<Snapshot>,
    desired: Servers,
    gating: Gating,
    previous: Previous,
    /// The connections, by server name.
    backend: B,
    /// The language servers.
    lsp: LanguageServers,
    /// The pass in flight: its plan and the starts still connecting.
    running: Option<Running>,
    /// Passes run so far, scheduled and retry passes alike: the number a
    /// report carries.
    passes: u64,
    /// The requests from handles ([`HostHandle`]), until [`Host::spawn`] hands them to the loop.
    control: running::ControlChannel,
    /// The observers and what was announced to them.
    announcer: announcer::Announcer,
    /// The start pass's end, the start grace, and the requests waiting for them.
    waiters: waiters::StartWaiters,
    /// Files missing and held, and the servers of those given up.
    missing: missing::MissingFiles,
    /// Manual reconnects and crash-loop clearing asked since the last pass.
    restarts: restart::Restarts,
    /// Dev mode: the source files of servers with `dev.watch`.
    dev: dev::Dev,
    /// Advanced whenever what a route is may have changed ([`Route::is_current`]).
    routes: catalog::RouteEpoch,
    /// Lazy servers: their kept listings, the ones a request woke, their idle times (`lazy`).
    lazy: lazy::Lazy,
    /// Pinned definitions: each offered listing against its baseline (issue 40).
    pins: crate::pins::Pins,
}

impl Host<Own> {
    /// A host over `inputs` that runs its own processes; nothing runs until [`Host::spawn`].
    pub fn new(inputs: Inputs, options: HostOptions) -> Self {
        let kind = Mcp {
            base_dir: Some(inputs.project_dir().to_path_buf()),
            tokens: Some(inputs.paths().oauth_tokens.clone()),
        };
        let supervisor = Supervisor::new(kind, options.parallelism, options.clock.clone());
        Host::with_backend(inputs, options, Own::new(supervisor), None)
    }
}

impl<B: Backend> Host<B> {
    /// A host over `inputs` whose MCP connections live in `backend`; its language servers are
    /// started in `launch`'s directory and environment (a daemon session's) or this
    /// process's. Nothing runs until [`Host::spawn`].
    pub fn with_backend(
        inputs: Inputs,
        options: HostOptions,
        backend: B,
        launch: Option<std::sync::Arc<Launch>>,
    ) -> Self {
        let scheduler = ReloadScheduler::starting(inputs.debounce()).with_quiet(inputs.quiet());
        let dev = dev::Dev::new(inputs.project_dir().to_path_buf(), launch.clone());
        let lazy = lazy::Lazy::new(inputs.state_dir());
        let pins = crate::pins::Pins::new(crate::pins::PinsStore::new(crate::pins::pins_path(
            inputs.approvals_store().path(),
        )));
        let lsp = LanguageServers::new(
            inputs.project_dir().to_path_buf(),
            launch,
            options.parallelism,
            options.clock.clone(),
        );
        Host {
            lsp,
            inputs,
            options,
            scheduler,
            snapshot: None,
            desired: Servers::new(),
            gating: Gating::default(),
            previous: Previous {
                removed: Some(Vec::new()),
                ..Previous::default()
            },
            backend,
            running: None,
            passes: 0,
            control: running::ControlChannel::new(),
            announcer: announcer::Announcer::default(),
            waiters: waiters::StartWaiters::default(),
            missing: missing::MissingFiles::default(),
            restarts: restart::Restarts::default(),
            dev,
            routes: catalog::RouteEpoch::default(),
            lazy,
            pins,
        }
    }
}

impl Host<Own> {
    /// Status from the files alone, connecting nothing: what `status` shows
    /// when no session is running. Gated servers are never spawned here.
    pub fn config_status(inputs: Inputs) -> StatusReport {
        let mut host = Host::new(inputs, HostOptions::default());
        host.adopt_files();
        host.status()
    }

    /// What a reconcile would do from nothing to the current files.
    ///
    /// # Errors
    /// The kernel cannot compute an identity for an admitted server.
    pub fn config_plan(inputs: Inputs) -> Result<Plan, String> {
        let mut host = Host::new(inputs, HostOptions::default());
        let trusted = host.adopt_files();
        plan(
            &host.desired,
            &Online::new(),
            &host.gating,
            trusted,
            host.options.mode,
            Millis(0),
        )
        .map_err(|e| e.to_string())
    }
}

impl<B: Backend> Host<B> {
    /// Loads every input and adopts its servers and gating without starting
    /// anything; returns whether the folder is trusted.
    fn adopt_files(&mut self) -> bool {
        // A client's state file may be tens of MiB (`~/.claude.json`): read off the loop.
        let snapshot = blocking::off_the_loop(|| self.inputs.load(None));
        self.desired = assemble(&snapshot.layers).servers;
        self.gating = snapshot.gating_for(&self.desired);
        self.lsp.adopt(&snapshot);
        let trusted = snapshot.trusted;
        self.snapshot = Some(snapshot);
        self.adopt_lazy();
        trusted
    }

    /// A stream of every [`HostEvent`]; subscribe before [`Host::spawn`] (as many streams as
    /// wanted) and none is missed.
    pub fn subscribe(&mut self) -> mpsc::UnboundedReceiver<HostEvent> {
        self.announcer.subscribe()
    }

    /// The inputs this host reads.
    pub fn inputs(&self) -> &Inputs {
        &self.inputs
    }

    fn now(&self) -> Millis {
        self.backend.clock().now()
    }

    /// The drive loop ([`Host::spawn`] runs it): runs until `stop` is signalled (or dropped,
    /// or every control sender is): reconciles on file events and control requests,
    /// supervises servers; then stops every server.
    async fn run(
        mut self,
        mut files: mpsc::UnboundedReceiver<Change>,
        mut control: mpsc::UnboundedReceiver<Control>,
        mut stop: oneshot::Receiver<()>,
    ) {
        let mut files_open = true;
        self.begin_grace();
        loop {
            let passes = self.passes;
            self.start_next_run();
            // A pass that only tears servers down finishes inside `start_next_run`: announce
            // its change now, not when something else next wakes the loop.
            self.announce_catalog();
            let sleep = self.backend.clock().sleep_until(self.next_wake());
            let mut routed_only = false;
            tokio::select! {
                biased;
                _ = &mut stop => break,
                request = control.recv() => match request {
                    None => break,
                    Some(request) => {
                        routed_only = matches!(request, Control::Route(..));
                        self.handle_control(request);
                    }
                },
                report = self.backend.next() => self.handle_report(report),
                report = self.lsp.next() => self.handle_lsp_report(report),
                change = files.recv(), if files_open => match change {
                    Some(change) => self.handle_file_change(change),
                    None => files_open = false,
                },
                path = self.dev.next() => self.handle_source_change(path),
                () = sleep => {
                    let now = self.now();
                    self.scheduler.handle_timeout(now);
                    self.expire_missing_files(now);
                    self.schedule_due_retries();
                }
            }
            // Slow servers: the grace's end answers with what is connected (the rest arrives
            // as list_changed); a call waiting for a server goes once it is up.
            self.settle_waiters();
            // Lazy servers idle for their idle time stop (their kept listing stays offered).
            self.check_idle();
            self.announce_catalog();
            // Only a route request that began no pass leaves every route as it was.
            if !routed_only || self.passes != passes {
                self.routes.advance();
            }
            self.tell_idle();
        }
        self.shutdown().await;
    }

    /// A watched file changed: whether it parses now, and how it landed (renamed into place,
    /// closed by its writer, written in place) tell the scheduler when to reload it.
    fn handle_file_change(&mut self, Change { source, landing }: Change) {
        if source == FileSource::Pins {
            // Not an input of the plan: a review moved what waited into the baseline.
            self.pins.reload();
            return;
        }
        let now = self.now();
        let complete = blocking::off_the_loop(|| self.inputs.complete(&source));
        let arrival = match (complete, landing) {
            (false, _) => Arrival::Partial,
            (true, Landing::Changed) => Arrival::Written,
            (true, Landing::Closed) => Arrival::Closed,
            (true, Landing::Renamed) => Arrival::Replaced,
        };
        self.scheduler.handle_file_arrival(now, source, arrival);
    }

    /// Says [`HostEvent::Idle`] when the session has just become idle: no pass runs or is
    /// asked for, no debounce is pending (observers wait for it instead of sleeping to see
    /// that no further pass follows).
    fn tell_idle(&mut self) {
        let idle = self.running.is_none()
            && !self.scheduler.is_running()
            && !self.scheduler.is_run_requested()
            && self.scheduler.poll_timeout().is_none();
        self.announcer.idle(idle, self.passes);
    }

    /// When the loop must wake up: the scheduler's debounce or a due retry.
    fn next_wake(&self) -> Option<Millis> {
        let retry = self.backend.next_retry();
        let lsp_retry = self.lsp.next_retry();
        [
            self.scheduler.poll_timeout(),
            retry,
            lsp_retry,
            self.waiters.wake(),
            self.missing.deadline(),
            self.lazy.next_check(),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    /// A failed server's retry time came: run a pass (no file reload needed,
    /// but it goes through the same queue so passes never overlap).
    fn schedule_due_retries(&mut self) {
        let due = self.backend.retry_due() || self.lsp.retry_due();
        if due && self.running.is_none() && !self.scheduler.is_running() {
            self.pass(Some(&[]), "retry".into(), false);
        }
    }

    /// Stops every connection; returns when all are stopped.
    async fn shutdown(self) {
        tokio::join!(self.backend.shutdown(), self.lsp.shutdown());
    }
}
