//! The live session: keeps real MCP connections equal to the settings files.
//!
//! # Drive loop
//! [`Host::run`] owns all state and reacts to one input at a time:
//! 1. start: load every input, then reconcile (run #1 of the kernel's
//!    [`ReloadScheduler`]);
//! 2. a watched file changes → `handle_file_event`; the scheduler's trailing
//!    debounce decides when a reload runs (edits during a run → exactly one
//!    follow-up);
//! 3. a run reloads only the changed files, asks the kernel whether anything
//!    MCP-relevant changed ([`hot_reload`]) and for a [`plan`], tears down
//!    what the plan removes (purging its tools first) and starts the rest in
//!    parallel (bounded), without blocking the loop: status requests are
//!    answered while servers are still connecting;
//! 4. connection events (a crash, `list_changed`) update the catalog or mark
//!    the server failed with its backoff ([`backoff`]); a due retry runs a
//!    pass of its own;
//! 5. control requests (status, reload, reconnect, dry-run plan) come from the
//!    CLI over the session socket ([`crate::ipc`]); a gateway asks for the
//!    merged catalog and where a request goes ([`Control::Catalog`],
//!    [`Control::Route`]) and forwards it itself, so a slow call never blocks
//!    the loop;
//! 6. after any of these, when the merged catalog (qualified tools, prompts,
//!    resources of connected servers) differs from the last one announced,
//!    [`HostEvent::CatalogChanged`] says which lists changed.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mcp_reconcile_kernel::approvals::ApprovalState;
use mcp_reconcile_kernel::config::servers_to_value;
use mcp_reconcile_kernel::gating::{tool_not_found, tool_prefix};
use mcp_reconcile_kernel::hot_reload::{hot_reload, Previous};
use mcp_reconcile_kernel::plan::{plan, Action, Mode, Online, OnlineEntry, Plan, Status};
use mcp_reconcile_kernel::reload::{self, FileSource, Outcome, ReloadScheduler};
use mcp_reconcile_kernel::supervise::{seed_for, Supervision};
use mcp_reconcile_kernel::{
    approval_hash, assemble, Gating, Millis, Reason, ServerConfig, Servers, Transport,
};
use tokio::sync::{mpsc, oneshot, Semaphore};

use crate::inputs::{InputError, Inputs, Snapshot};
use crate::review::ApprovalRequest;
use crate::transport::{
    self, Caller, Catalog, ConnEvent, ConnectErrorKind, ConnectOptions, Connection, Prompt,
    Resource, Tool,
};
use crate::view::{own_prompt_name, own_tool_name, session_view};

/// How long a gateway's first catalog request waits for the start pass
/// before it is answered with the servers connected so far.
pub const STARTUP_WAIT: Millis = Millis(10_000);

/// How many servers start at once.
pub const DEFAULT_PARALLELISM: usize = 8;

/// Host settings that are not read from files.
#[derive(Clone, Debug)]
pub struct HostOptions {
    /// `session` (identity = session key) or `pool`.
    pub mode: Mode,
    /// Servers started at once.
    pub parallelism: usize,
    /// Baseline for benchmarks: restart every server on every change, as
    /// most clients do on reload.
    pub full_restart: bool,
    /// Scales supervision time (1.0 = the §9 schedule): every retry delay of
    /// the kernel's backoff is multiplied by it, and the 5-minute healthy
    /// window that resets `attempts` with it. For tests only: `0.01` turns
    /// the 1 s, 2 s, 4 s … schedule into 10 ms, 20 ms, 40 ms … and the
    /// healthy window into 3 s; the CLI reads it from the
    /// `MCP_RECONCILE_BACKOFF_SCALE` environment variable.
    pub backoff_scale: f64,
}

impl Default for HostOptions {
    fn default() -> Self {
        HostOptions {
            mode: Mode::Session,
            parallelism: DEFAULT_PARALLELISM,
            full_restart: false,
            backoff_scale: 1.0,
        }
    }
}

/// What the host tells observers (the `watch` printer, tests).
#[derive(Clone, Debug)]
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
}

/// Which lists of the merged catalog changed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct CatalogChange {
    /// Tools (names or definitions).
    pub tools: bool,
    /// Prompts.
    pub prompts: bool,
    /// Resources.
    pub resources: bool,
}

/// What a gateway offers: every connected server's tools and prompts under
/// qualified names `mcp__<server>__<name>` (tools after the server's
/// `includeTools` / `excludeTools`), and its resources by URI; servers in
/// settings order; a name two servers would share is offered once (the
/// first server's).
#[derive(Clone, Debug, Default)]
pub struct MergedCatalog {
    /// Qualified tools.
    pub tools: Vec<Tool>,
    /// Qualified prompts.
    pub prompts: Vec<Prompt>,
    /// Resources, URIs unchanged.
    pub resources: Vec<Resource>,
}

/// Which server owns each tool prefix `mcp__<sanitized name>__`: the first
/// admitted server in settings order that claims it. Sanitizing maps
/// `fs.tools` and `fs_tools` to the same prefix; without an owner, a project
/// server `fs.tools` could take over the tools of a trusted `fs_tools` (or
/// have calls meant for them routed to it). A server whose prefix is owned by
/// another contributes nothing to the merged catalog and is never routed to,
/// whether or not the owner is connected right now.
#[derive(Default)]
pub(crate) struct PrefixOwners {
    owners: HashMap<String, String>,
}

impl PrefixOwners {
    /// Owners among `servers` (admitted ones, settings order).
    pub(crate) fn new<'a>(servers: impl IntoIterator<Item = &'a str>) -> Self {
        let mut owners = HashMap::new();
        for server in servers {
            owners
                .entry(tool_prefix(server))
                .or_insert_with(|| server.to_owned());
        }
        PrefixOwners { owners }
    }

    /// The admitted servers of `servers` under `gating`, settings order.
    pub(crate) fn admitted(servers: &Servers, gating: &Gating) -> Self {
        Self::new(
            servers
                .iter()
                .filter(|(name, config)| gating.denial(name, config).is_none())
                .map(|(name, _)| name.as_str()),
        )
    }

    /// The other server that owns `server`'s prefix, if one does.
    pub(crate) fn taken_by(&self, server: &str) -> Option<&str> {
        self.owners
            .get(&tool_prefix(server))
            .map(String::as_str)
            .filter(|owner| *owner != server)
    }

    /// Whether `server` may offer tools (no other server owns its prefix).
    pub(crate) fn owns(&self, server: &str) -> bool {
        self.taken_by(server).is_none()
    }
}

/// Why `server` is not offered: `owner` holds its tool prefix.
pub(crate) fn prefix_taken(server: &str, owner: &str) -> String {
    format!(
        "server \"{}\" is not offered: its tool prefix {} is taken by \"{}\"; rename one of them",
        crate::display::safe(server),
        crate::display::safe(&tool_prefix(server)),
        crate::display::safe(owner)
    )
}

/// Warns once for each prefix collision among the admitted servers of `new` that was not one
/// among those of `old` (so a pass that changes nothing stays quiet).
pub(crate) fn warn_new_collisions(old: &PrefixOwners, new: &PrefixOwners, servers: &Servers) {
    for server in servers.keys() {
        if let Some(owner) = new.taken_by(server) {
            if old.taken_by(server) != Some(owner) {
                tracing::warn!("{}", prefix_taken(server, owner));
            }
        }
    }
}

/// Builds a [`MergedCatalog`] from per-server views, first name wins; a
/// server whose prefix another owns ([`PrefixOwners`]) adds nothing.
pub(crate) struct CatalogMerger {
    merged: MergedCatalog,
    owners: PrefixOwners,
    tools: HashSet<String>,
    prompts: HashSet<String>,
    uris: HashSet<String>,
}

impl CatalogMerger {
    /// A merger whose servers' prefixes are owned as `owners` says.
    pub(crate) fn new(owners: PrefixOwners) -> Self {
        CatalogMerger {
            merged: MergedCatalog::default(),
            owners,
            tools: HashSet::new(),
            prompts: HashSet::new(),
            uris: HashSet::new(),
        }
    }

    /// Adds `server`'s view (already qualified), skipping names taken; nothing
    /// when another server owns its prefix.
    pub(crate) fn add(&mut self, server: &str, view: Catalog) {
        if !self.owners.owns(server) {
            return;
        }
        let (tools, prompts, uris) = (&mut self.tools, &mut self.prompts, &mut self.uris);
        self.merged.tools.extend(
            view.tools
                .into_iter()
                .filter(|t| tools.insert(t.name.to_string())),
        );
        self.merged.prompts.extend(
            view.prompts
                .into_iter()
                .filter(|p| prompts.insert(p.name.clone())),
        );
        self.merged.resources.extend(
            view.resources
                .into_iter()
                .filter(|r| uris.insert(r.uri.clone())),
        );
    }

    /// The merged catalog.
    pub(crate) fn finish(self) -> MergedCatalog {
        self.merged
    }
}

/// A request a gateway wants routed to the connection that serves it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// A qualified tool name.
    Tool(String),
    /// A qualified prompt name.
    Prompt(String),
    /// A resource URI.
    Resource(String),
}

/// Where a routed request goes.
#[derive(Clone, Debug)]
pub struct Route {
    /// The server that serves it.
    pub server: String,
    /// The server's own name for the tool or prompt (the URI for a resource).
    pub name: String,
    /// Forwards the request; fails at once if the connection closes meanwhile.
    pub caller: Caller,
}

/// One applied plan with timings.
#[derive(Clone, Debug)]
pub struct PlanReport {
    /// The scheduler's run number (retry passes have their own).
    pub run: u64,
    /// What triggered it.
    pub trigger: String,
    /// Each action with how long executing it took and how it ended.
    pub steps: Vec<Step>,
    /// Problems with input files at the time of the pass.
    pub input_errors: Vec<String>,
    /// Whole pass, from the trigger to the last start finishing.
    pub elapsed: Duration,
}

/// One executed action.
#[derive(Clone, Debug)]
pub struct Step {
    /// The kernel's action.
    pub action: Action,
    /// Time to execute it (connect: until its tools were listed).
    pub elapsed: Duration,
    /// `None` when it succeeded; the (redacted) error otherwise.
    pub error: Option<String>,
}

/// One server as `status` shows it. Field names are the `status --json`
/// contract (camelCase there).
#[derive(Clone, Debug, PartialEq)]
pub struct ServerStatus {
    /// Server name.
    pub name: String,
    /// `connected`, `connecting`, `failed`, `disconnected` or `skipped`.
    pub state: &'static str,
    /// A §10 reason (policy skip or backoff), or `None`.
    pub reason: Option<Reason>,
    /// Approval state for gated servers, `None` otherwise.
    pub approval: Option<ApprovalState>,
    /// Transport kind.
    pub transport: Transport,
    /// Tools, prompts and resources currently registered.
    pub tools: usize,
    /// Prompts registered.
    pub prompts: usize,
    /// Resources registered.
    pub resources: usize,
    /// Process id of a live stdio server.
    pub pid: Option<u32>,
    /// How many times this session started the server's process.
    pub spawns: u64,
    /// Consecutive failures.
    pub attempts: u32,
    /// The last error, redacted.
    pub last_error: Option<String>,
    /// For a failed server that will be retried: milliseconds until the
    /// retry (0 = due now).
    pub retry_in_ms: Option<u64>,
}

/// Requests to a running host.
#[derive(Debug)]
pub enum Control {
    /// Current status of every configured server.
    Status(oneshot::Sender<StatusReport>),
    /// Reload now (no debounce; same queue as file events); clears crash loops.
    Reload(oneshot::Sender<()>),
    /// Clear failure state and restart `name` (all when `None`).
    Reconnect(Option<String>, oneshot::Sender<Result<Vec<String>, String>>),
    /// What a reconcile would do now from the live state (nothing executed).
    Plan(oneshot::Sender<Result<Plan, String>>),
    /// The merged catalog; answered once the start pass has finished (so a
    /// client's first listing includes every server that could connect), or
    /// after [`STARTUP_WAIT`] with what is connected by then.
    Catalog(oneshot::Sender<MergedCatalog>),
    /// Where a tool call, prompt or resource read goes. `Err` carries the
    /// message for the caller: for a tool, the §4 tool-not-found message
    /// (removed, not allowed, excluded, awaiting approval, rejected, or not
    /// connected).
    Route(Target, oneshot::Sender<Result<Route, String>>),
    /// Stop every connection and return from [`Host::run`].
    Shutdown,
}

/// The answer to [`Control::Status`].
#[derive(Clone, Debug, Default)]
pub struct StatusReport {
    /// Every configured server, in map order.
    pub servers: Vec<ServerStatus>,
    /// What is broken in the inputs right now.
    pub errors: Vec<String>,
}

/// One server's live connection state.
struct Live {
    config: ServerConfig,
    health: Supervision,
    generation: u64,
    conn: Option<Connection>,
    catalog: Catalog,
}

/// Outcome of one start task.
struct StartDone {
    run: u64,
    name: String,
    generation: u64,
    started: Instant,
    result: Result<Connection, transport::ConnectError>,
}

/// The run in flight: the plan and the starts still connecting.
struct Running {
    run: u64,
    trigger: String,
    began: Instant,
    /// Finished steps with their position in the plan.
    steps: Vec<(usize, Step)>,
    /// Starts still connecting: server name → (position, the plan's action).
    starting: HashMap<String, (usize, Action)>,
    failed: bool,
    scheduled: bool,
}

/// The live session. See the module docs for the drive loop.
pub struct Host {
    inputs: Inputs,
    options: HostOptions,
    scheduler: ReloadScheduler,
    epoch: Instant,
    snapshot: Option<Snapshot>,
    desired: Servers,
    gating: Gating,
    previous: Previous,
    live: BTreeMap<String, Live>,
    spawns: HashMap<String, u64>,
    next_generation: u64,
    running: Option<Running>,
    retry_runs: u64,
    clear_crash_loops: bool,
    restart: Vec<String>,
    /// (name, approval hash) pairs already announced: an edited config is
    /// announced again, an unchanged one only once.
    prompted: Vec<(String, String)>,
    conn_tx: mpsc::UnboundedSender<ConnEvent>,
    conn_rx: mpsc::UnboundedReceiver<ConnEvent>,
    start_tx: mpsc::UnboundedSender<StartDone>,
    start_rx: mpsc::UnboundedReceiver<StartDone>,
    observers: Vec<mpsc::UnboundedSender<HostEvent>>,
    limiter: Arc<Semaphore>,
    closing: tokio::task::JoinSet<()>,
    /// The start pass has finished.
    started: bool,
    /// Catalog requests waiting for the start pass, and when they are
    /// answered anyway ([`STARTUP_WAIT`]).
    catalog_waiters: Vec<oneshot::Sender<MergedCatalog>>,
    waiters_deadline: Option<Millis>,
    /// A catalog was handed out or the start pass finished: changes from
    /// now on are announced.
    announcing: bool,
    /// Something that can change the merged catalog happened.
    catalog_dirty: bool,
    /// Digests of the last announced (tools, prompts, resources).
    catalog_digest: (u64, u64, u64),
}

impl Host {
    /// A host over `inputs`; nothing runs until [`Host::run`].
    pub fn new(inputs: Inputs, options: HostOptions) -> Self {
        let scheduler = ReloadScheduler::starting(inputs.debounce());
        let (conn_tx, conn_rx) = mpsc::unbounded_channel();
        let (start_tx, start_rx) = mpsc::unbounded_channel();
        let limiter = Arc::new(Semaphore::new(options.parallelism.max(1)));
        Host {
            inputs,
            options,
            scheduler,
            epoch: Instant::now(),
            snapshot: None,
            desired: Servers::new(),
            gating: Gating::default(),
            previous: Previous {
                removed: Some(Vec::new()),
                ..Previous::default()
            },
            live: BTreeMap::new(),
            spawns: HashMap::new(),
            next_generation: 1,
            running: None,
            retry_runs: 0,
            clear_crash_loops: false,
            restart: Vec::new(),
            prompted: Vec::new(),
            conn_tx,
            conn_rx,
            start_tx,
            start_rx,
            observers: Vec::new(),
            limiter,
            closing: tokio::task::JoinSet::new(),
            started: false,
            catalog_waiters: Vec::new(),
            waiters_deadline: None,
            announcing: false,
            catalog_dirty: false,
            catalog_digest: (0, 0, 0),
        }
    }

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

    /// Loads every input and adopts its servers and gating without starting
    /// anything; returns whether the folder is trusted.
    fn adopt_files(&mut self) -> bool {
        let snapshot = self.inputs.load(None);
        self.desired = assemble(&snapshot.layers).servers;
        self.gating = snapshot.gating_for(&self.desired);
        let trusted = snapshot.trusted;
        self.snapshot = Some(snapshot);
        trusted
    }

    /// Receive [`HostEvent`]s.
    pub fn subscribe(&mut self) -> mpsc::UnboundedReceiver<HostEvent> {
        let (tx, rx) = mpsc::unbounded_channel();
        self.observers.push(tx);
        rx
    }

    /// The inputs this host reads.
    pub fn inputs(&self) -> &Inputs {
        &self.inputs
    }

    fn now(&self) -> Millis {
        Millis(u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX))
    }

    /// Now on the supervision clock (SPEC §9 time, what the kernel's
    /// supervision and plans see): the real clock, sped up by the test-only
    /// backoff scale.
    fn policy_now(&self) -> Millis {
        policy_time(self.now(), self.options.backoff_scale)
    }

    /// A supervision-clock time on the real clock.
    fn real_at(&self, at: Millis) -> Millis {
        real_time(at, self.options.backoff_scale)
    }

    fn emit(&mut self, event: HostEvent) {
        self.observers.retain(|tx| tx.send(event.clone()).is_ok());
    }

    /// Runs until `Control::Shutdown` (or every control sender is dropped):
    /// reconciles on file events and control requests, supervises servers.
    pub async fn run(
        mut self,
        mut files: mpsc::UnboundedReceiver<FileSource>,
        mut control: mpsc::UnboundedReceiver<Control>,
    ) {
        let mut files_open = true;
        loop {
            self.start_next_run();
            let wait = self
                .next_wake()
                .map(|at| Duration::from_millis(at.0.saturating_sub(self.now().0)));
            let sleep = async move {
                match wait {
                    Some(wait) => tokio::time::sleep(wait).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                biased;
                request = control.recv() => match request {
                    None | Some(Control::Shutdown) => break,
                    Some(request) => self.handle_control(request),
                },
                Some(done) = self.start_rx.recv() => self.handle_start_done(done),
                Some(event) = self.conn_rx.recv() => self.handle_conn_event(event),
                source = files.recv(), if files_open => match source {
                    Some(source) => {
                        let now = self.now();
                        self.scheduler.handle_file_event(now, source);
                    }
                    None => files_open = false,
                },
                () = sleep => {
                    let now = self.now();
                    self.scheduler.handle_timeout(now);
                    self.schedule_due_retries();
                    if self.waiters_deadline.is_some_and(|at| at <= now) {
                        // Slow servers: answer with what is connected; the rest
                        // arrives as list_changed.
                        self.answer_catalog_waiters();
                    }
                }
            }
            self.announce_catalog();
        }
        self.shutdown().await;
    }

    /// When the loop must wake up: the scheduler's debounce or a due retry.
    fn next_wake(&self) -> Option<Millis> {
        let retry = self
            .live
            .values()
            .filter_map(|l| l.health.retry_due())
            .min()
            .map(|at| self.real_at(at));
        [self.scheduler.poll_timeout(), retry, self.waiters_deadline]
            .into_iter()
            .flatten()
            .min()
    }

    /// A failed server's retry time came: run a pass (no file reload needed,
    /// but it goes through the same queue so passes never overlap).
    fn schedule_due_retries(&mut self) {
        let now = self.policy_now();
        let due = self.live.values().any(|l| l.health.is_due(now));
        if due && self.running.is_none() && !self.scheduler.is_running() {
            self.retry_runs += 1;
            self.pass(self.retry_runs, Some(&[]), "retry".into(), false);
        }
    }

    fn handle_control(&mut self, request: Control) {
        match request {
            Control::Status(reply) => {
                let _ = reply.send(self.status());
            }
            Control::Reload(reply) => {
                self.clear_crash_loops = true;
                let now = self.now();
                self.scheduler.handle_manual_reload(now);
                let _ = reply.send(());
            }
            Control::Reconnect(name, reply) => {
                let names: Vec<String> = match name {
                    Some(name) if self.desired.contains_key(&name) => vec![name],
                    Some(name) => {
                        let _ = reply.send(Err(format!(
                            "no configured server named \"{name}\"; run `mcp-reconcile status` to list them"
                        )));
                        return;
                    }
                    None => self.desired.keys().cloned().collect(),
                };
                for name in &names {
                    if let Some(live) = self.live.get_mut(name) {
                        live.health.forgive();
                    }
                }
                self.restart.extend(names.iter().cloned());
                let now = self.now();
                self.scheduler.handle_manual_reload(now);
                let _ = reply.send(Ok(names));
            }
            Control::Catalog(reply) => {
                if self.started {
                    let _ = reply.send(self.hand_out_catalog());
                } else {
                    self.catalog_waiters.push(reply);
                    let deadline = self.now().saturating_add(STARTUP_WAIT.0);
                    self.waiters_deadline.get_or_insert(deadline);
                }
            }
            Control::Route(target, reply) => {
                let _ = reply.send(self.route(target));
            }
            Control::Plan(reply) => {
                let snapshot = self.inputs.load(None);
                let servers = assemble(&snapshot.layers).servers;
                let gating = snapshot.gating_for(&servers);
                let result = plan(
                    &servers,
                    &self.online(),
                    &gating,
                    snapshot.trusted,
                    self.options.mode,
                    self.policy_now(),
                )
                .map_err(|e| e.to_string());
                let _ = reply.send(result);
            }
            Control::Shutdown => {}
        }
    }

    /// Starts the scheduler's next run when it has one and nothing is in
    /// flight.
    fn start_next_run(&mut self) {
        if self.running.is_some() {
            return;
        }
        if let Some(reload::Step::Reconcile {
            run,
            sources,
            manual,
        }) = self.scheduler.poll_step()
        {
            let changed = if run == 1 || manual {
                None
            } else {
                Some(sources)
            };
            let trigger = match (&changed, run) {
                (_, 1) => "start".to_owned(),
                (None, _) => "manual reload".to_owned(),
                (Some(sources), _) => describe_sources(sources),
            };
            self.pass(run, changed.as_deref(), trigger, true);
        }
    }

    /// One reconcile pass: reload inputs (`None`: all, `Some(&[])`: none),
    /// decide, tear down, start.
    fn pass(&mut self, run: u64, changed: Option<&[FileSource]>, trigger: String, scheduled: bool) {
        let began = Instant::now();
        let now = self.now();
        let snapshot = off_the_loop(|| self.inputs.load(changed));
        let input_errors: Vec<String> = snapshot.errors.iter().map(InputError::to_string).collect();
        if !input_errors.is_empty() {
            self.emit(HostEvent::ReloadFailed(input_errors.join("\n")));
        }
        let decision = hot_reload(
            &self.previous,
            &snapshot.layers,
            |servers| snapshot.gating_for(servers),
            &snapshot.approvals,
            &snapshot.project_root,
            snapshot.yolo,
        );
        let decision = match decision {
            Ok(d) => d,
            Err(e) => {
                self.emit(HostEvent::ReloadFailed(format!(
                    "cannot compare server maps: {e}"
                )));
                if scheduled {
                    self.scheduler.handle_reconcile_done(now, Outcome::Failed);
                }
                return;
            }
        };
        let approval_needed: Vec<ApprovalRequest> = decision
            .promptable
            .iter()
            .filter_map(|n| decision.servers.get(n).map(|cfg| (n, cfg)))
            .filter(|(n, cfg)| {
                let key = ((*n).clone(), approval_hash(cfg).0);
                !self.prompted.contains(&key)
            })
            .map(|(n, cfg)| ApprovalRequest::new(&snapshot, n, cfg))
            .collect();
        self.previous = Previous {
            servers: servers_to_value(&decision.servers),
            gating: decision.gating.clone(),
            removed: decision.removed.clone(),
        };
        warn_new_collisions(
            &PrefixOwners::admitted(&self.desired, &self.gating),
            &PrefixOwners::admitted(&decision.servers, &decision.gating),
            &decision.servers,
        );
        self.desired = decision.servers;
        self.gating = decision.gating;
        self.snapshot = Some(snapshot);
        if std::mem::take(&mut self.clear_crash_loops) {
            for live in self.live.values_mut() {
                live.health.forgive();
            }
        }
        let trusted = self.snapshot.as_ref().is_some_and(|s| s.trusted);
        let mut online = self.online();
        for name in std::mem::take(&mut self.restart) {
            // A manual reconnect of a healthy server: report it as
            // disconnected so the plan retries it with a fresh process.
            if let Some(entry) = online.get_mut(&name) {
                entry.status = Status::Disconnected;
            }
        }
        if self.options.full_restart && decision.reconcile {
            let names: Vec<String> = online.keys().cloned().collect();
            for name in names {
                if let Some(entry) = online.get_mut(&name) {
                    entry.status = Status::Disconnected;
                }
            }
        }
        let result = plan(
            &self.desired,
            &online,
            &self.gating,
            trusted,
            self.options.mode,
            self.policy_now(),
        );
        let plan = match result {
            Ok(plan) => plan,
            Err(e) => {
                self.emit(HostEvent::ReloadFailed(format!("cannot plan: {e}")));
                if scheduled {
                    self.scheduler.handle_reconcile_done(now, Outcome::Failed);
                }
                return;
            }
        };
        let mut running = Running {
            run,
            trigger,
            began,
            steps: Vec::new(),
            starting: HashMap::new(),
            failed: false,
            scheduled,
        };
        // Teardowns first (the plan lists them first): purge the server's
        // catalog at once, stop its connection in the background.
        for (index, action) in plan.actions.into_iter().enumerate() {
            let t = Instant::now();
            match &action {
                Action::Disconnect { name, .. } => self.teardown(name, true),
                Action::Reconnect { name, .. } | Action::Retry { name, .. } => {
                    self.teardown(name, false)
                }
                Action::Connect { .. }
                | Action::Keep { .. }
                | Action::Skip { .. }
                | Action::Noop { .. } => {}
            }
            match action.name().filter(|_| action.starts()) {
                Some(name) => {
                    let name = name.to_owned();
                    self.spawn_start(run, &name);
                    running.starting.insert(name, (index, action));
                }
                None => running.steps.push((
                    index,
                    Step {
                        action,
                        elapsed: t.elapsed(),
                        error: None,
                    },
                )),
            }
        }
        self.running = Some(running);
        if !approval_needed.is_empty() && decision.approval_event {
            self.prompted.extend(
                approval_needed
                    .iter()
                    .map(|r| (r.name.clone(), r.hash.clone())),
            );
            self.emit(HostEvent::ApprovalNeeded(approval_needed));
        }
        self.finish_if_done();
    }

    /// Removes a server's catalog and stops its connection in the
    /// background. `forget` drops its live entry (disconnect) instead of
    /// keeping its failure counters (reconnect, retry).
    fn teardown(&mut self, name: &str, forget: bool) {
        self.catalog_dirty = true;
        let conn = if forget {
            self.live.remove(name).and_then(|l| l.conn)
        } else if let Some(live) = self.live.get_mut(name) {
            live.catalog = Catalog::default();
            live.conn.take()
        } else {
            None
        };
        if let Some(conn) = conn {
            self.closing.spawn(conn.close());
        }
    }

    fn spawn_start(&mut self, run: u64, name: &str) {
        let Some(config) = self.desired.get(name).cloned() else {
            return;
        };
        let generation = self.next_generation;
        self.next_generation += 1;
        let (attempts, crash_loop) = self
            .live
            .get(name)
            .map_or((0, false), |l| (l.health.attempts, l.health.crash_loop));
        self.live.insert(
            name.to_owned(),
            Live {
                config: config.clone(),
                health: Supervision::connecting(attempts, crash_loop),
                generation,
                conn: None,
                catalog: Catalog::default(),
            },
        );
        if config.transport() == Transport::Stdio {
            *self.spawns.entry(name.to_owned()).or_insert(0) += 1;
        }
        let options = ConnectOptions {
            generation,
            events: self.conn_tx.clone(),
            handshake_timeout: Duration::from_millis(config.discovery_timeout_ms()),
            base_dir: Some(self.inputs.project_dir().to_path_buf()),
            elicitation: None,
        };
        let limiter = Arc::clone(&self.limiter);
        let done = self.start_tx.clone();
        let name = name.to_owned();
        tokio::spawn(async move {
            let _permit = limiter.acquire_owned().await;
            let started = Instant::now();
            let result = transport::connect(&name, &config, options).await;
            let _ = done.send(StartDone {
                run,
                name,
                generation,
                started,
                result,
            });
        });
    }

    fn handle_start_done(&mut self, done: StartDone) {
        self.catalog_dirty = true;
        let now = self.policy_now();
        let elapsed = done.started.elapsed();
        let current = self
            .live
            .get(&done.name)
            .is_some_and(|l| l.generation == done.generation);
        let mut error = None;
        if !current {
            // Superseded while connecting (removed or changed again).
            if let Ok(conn) = done.result {
                self.closing.spawn(conn.close());
            }
        } else if let Some(live) = self.live.get_mut(&done.name) {
            match done.result {
                Ok(conn) => {
                    live.catalog = conn.catalog().clone();
                    live.conn = Some(conn);
                    live.health.connected(now);
                }
                Err(e) => {
                    let message = e.message.clone();
                    let unsupported = e.kind == ConnectErrorKind::Unsupported;
                    live.health
                        .fail(seed_for(&done.name), message.clone(), now, unsupported);
                    error = Some(message);
                }
            }
            if error.is_some() {
                if let Some(status) = self.status_of(&done.name) {
                    self.emit(HostEvent::ClientUpdate(status));
                }
            }
        }
        if let Some(running) = self.running.as_mut().filter(|r| r.run == done.run) {
            if let Some((index, action)) = running.starting.remove(&done.name) {
                running.failed |= error.is_some();
                running.steps.push((
                    index,
                    Step {
                        action,
                        elapsed,
                        error,
                    },
                ));
            }
        }
        self.finish_if_done();
    }

    fn finish_if_done(&mut self) {
        let done = self.running.as_ref().is_some_and(|r| r.starting.is_empty());
        if !done {
            return;
        }
        let Some(mut running) = self.running.take() else {
            return;
        };
        running.steps.sort_by_key(|(index, _)| *index);
        let now = self.now();
        if running.scheduled {
            let outcome = if running.failed {
                Outcome::Failed
            } else {
                Outcome::Ok
            };
            self.scheduler.handle_reconcile_done(now, outcome);
        }
        let input_errors = self
            .snapshot
            .as_ref()
            .map(|s| s.errors.iter().map(InputError::to_string).collect())
            .unwrap_or_default();
        let report = PlanReport {
            run: running.run,
            trigger: running.trigger,
            steps: running.steps.into_iter().map(|(_, step)| step).collect(),
            input_errors,
            elapsed: running.began.elapsed(),
        };
        self.emit(HostEvent::PlanApplied(report));
        self.catalog_dirty = true;
        if !self.started {
            self.started = true;
            self.answer_catalog_waiters();
        }
    }

    fn handle_conn_event(&mut self, event: ConnEvent) {
        self.catalog_dirty = true;
        let now = self.policy_now();
        let server = match event {
            ConnEvent::CatalogChanged {
                server,
                generation,
                catalog,
            } => {
                let Some(live) = self
                    .live
                    .get_mut(&server)
                    .filter(|l| l.generation == generation)
                else {
                    return;
                };
                live.catalog = catalog;
                server
            }
            ConnEvent::Closed {
                server,
                generation,
                error,
            } => {
                let Some(live) = self
                    .live
                    .get_mut(&server)
                    .filter(|l| l.generation == generation)
                else {
                    return;
                };
                if let Some(conn) = live.conn.take() {
                    self.closing.spawn(conn.close());
                }
                live.catalog = Catalog::default();
                live.health.closed(seed_for(&server), error, now);
                server
            }
        };
        if let Some(status) = self.status_of(&server) {
            self.emit(HostEvent::ClientUpdate(status));
        }
    }

    /// The kernel's view of what is online.
    fn online(&self) -> Online {
        let mut online = Online::new();
        for (name, live) in &self.live {
            online.insert(
                name.clone(),
                OnlineEntry {
                    config: live.config.clone(),
                    status: live.health.status,
                    attempts: live.health.attempts,
                    retry_at: live.health.retry_at,
                    crash_loop: live.health.crash_loop,
                },
            );
        }
        online
    }

    /// Status of every configured server (and of live ones no longer
    /// configured, while they shut down).
    pub fn status(&self) -> StatusReport {
        let servers = self
            .desired
            .keys()
            .filter_map(|name| self.status_of(name))
            .collect();
        let errors = self
            .snapshot
            .as_ref()
            .map(|s| s.errors.iter().map(InputError::to_string).collect())
            .unwrap_or_default();
        StatusReport { servers, errors }
    }

    fn status_of(&self, name: &str) -> Option<ServerStatus> {
        let config = self.desired.get(name)?;
        let snapshot = self.snapshot.as_ref();
        let approval = config.is_gated().then(|| {
            snapshot.map_or(ApprovalState::Pending, |s| {
                s.approvals.state(&s.project_root, name, config)
            })
        });
        let trusted = snapshot.is_none_or(|s| s.trusted);
        let spawns = self.spawns.get(name).copied().unwrap_or(0);
        let mut status = ServerStatus {
            name: name.to_owned(),
            state: "disconnected",
            reason: None,
            approval,
            transport: config.transport(),
            tools: 0,
            prompts: 0,
            resources: 0,
            pid: None,
            spawns,
            attempts: 0,
            last_error: None,
            retry_in_ms: None,
        };
        if !trusted {
            status.state = "skipped";
            status.reason = Some(Reason::UntrustedFolder);
            return Some(status);
        }
        if let Some(reason) = self.gating.denial(name, config) {
            status.state = "skipped";
            status.reason = Some(match (reason, approval) {
                (Reason::PendingApproval, Some(ApprovalState::Rejected)) => Reason::Rejected,
                (reason, _) => reason,
            });
            return Some(status);
        }
        let Some(live) = self.live.get(name) else {
            return Some(status);
        };
        let view = live.health.view(self.policy_now());
        status.attempts = view.attempts;
        status.last_error = view.last_error;
        if let Some(owner) = PrefixOwners::admitted(&self.desired, &self.gating).taken_by(name) {
            status.last_error = Some(prefix_taken(name, owner));
        }
        status.state = view.state.as_str();
        status.reason = view.reason;
        status.retry_in_ms = view
            .retry_in_ms
            .map(|ms| real_time(Millis(ms), self.options.backoff_scale).0);
        if live.health.status == Status::Connected {
            status.tools = live.catalog.tools.len();
            status.prompts = live.catalog.prompts.len();
            status.resources = live.catalog.resources.len();
            status.pid = live.conn.as_ref().and_then(Connection::pid);
        }
        Some(status)
    }

    /// Qualified tool names of every connected server: `mcp__<server>__<tool>`.
    pub fn tool_names(&self) -> Vec<String> {
        self.merged_catalog()
            .tools
            .into_iter()
            .map(|t| t.name.into_owned())
            .collect()
    }

    /// Connected servers with their config and connection, in settings order.
    fn connected(&self) -> impl Iterator<Item = (&String, &Live, &Connection)> + '_ {
        self.desired.keys().filter_map(|name| {
            let live = self.live.get(name)?;
            let conn = live.conn.as_ref()?;
            (live.health.status == Status::Connected).then_some((name, live, conn))
        })
    }

    /// See [`MergedCatalog`].
    pub fn merged_catalog(&self) -> MergedCatalog {
        let mut merger = CatalogMerger::new(PrefixOwners::admitted(&self.desired, &self.gating));
        for (name, live, _) in self.connected() {
            merger.add(name, session_view(name, &live.config, &live.catalog));
        }
        merger.finish()
    }

    /// The merged catalog for a client; from the first one on, changes are
    /// announced relative to it.
    fn hand_out_catalog(&mut self) -> MergedCatalog {
        let catalog = self.merged_catalog();
        if !self.announcing {
            self.announcing = true;
            self.catalog_digest = digests(&catalog);
            self.catalog_dirty = false;
        }
        catalog
    }

    fn answer_catalog_waiters(&mut self) {
        self.waiters_deadline = None;
        let waiters = std::mem::take(&mut self.catalog_waiters);
        if waiters.is_empty() && self.announcing {
            return;
        }
        let catalog = self.hand_out_catalog();
        for waiter in waiters {
            let _ = waiter.send(catalog.clone());
        }
    }

    /// Emits [`HostEvent::CatalogChanged`] when the merged catalog changed
    /// since it was last announced (or handed out).
    fn announce_catalog(&mut self) {
        if !self.announcing || !std::mem::take(&mut self.catalog_dirty) {
            return;
        }
        let now = digests(&self.merged_catalog());
        let was = std::mem::replace(&mut self.catalog_digest, now);
        let change = CatalogChange {
            tools: now.0 != was.0,
            prompts: now.1 != was.1,
            resources: now.2 != was.2,
        };
        if change != CatalogChange::default() {
            self.emit(HostEvent::CatalogChanged(change));
        }
    }

    /// See [`Control::Route`].
    fn route(&self, target: Target) -> Result<Route, String> {
        let owners = PrefixOwners::admitted(&self.desired, &self.gating);
        let mut connected = self
            .connected()
            .filter(|(server, _, _)| owners.owns(server));
        let found = match &target {
            Target::Tool(name) => connected.find_map(|(server, live, conn)| {
                own_tool_name(server, &live.config, &live.catalog, name)
                    .map(|own| (server, own, conn))
            }),
            Target::Prompt(name) => connected.find_map(|(server, live, conn)| {
                own_prompt_name(server, &live.catalog, name).map(|own| (server, own, conn))
            }),
            Target::Resource(uri) => connected.find_map(|(server, live, conn)| {
                live.catalog
                    .resources
                    .iter()
                    .any(|r| &r.uri == uri)
                    .then(|| (server, uri.clone(), conn))
            }),
        };
        if let Some((server, name, conn)) = found {
            return Ok(Route {
                server: server.clone(),
                name,
                caller: conn.caller(),
            });
        }
        Err(match target {
            Target::Tool(name) => self.tool_not_found(&name),
            Target::Prompt(name) => format!(
                "prompt \"{name}\" not found: no connected MCP server offers it (list them with prompts/list)"
            ),
            Target::Resource(uri) => format!(
                "resource \"{uri}\" not found: no connected MCP server lists it (list them with resources/list)"
            ),
        })
    }

    /// The §4 message for a tool that is not available now.
    pub fn tool_not_found(&self, name: &str) -> String {
        let removed = self.previous.removed.as_deref().unwrap_or_default();
        let approvals = self
            .snapshot
            .as_ref()
            .map(|s| (&s.approvals, s.project_root.as_str()));
        tool_not_found(name, &self.desired, &self.gating, removed, approvals).unwrap_or_else(|| {
            format!(
                "Tool \"{name}\" not found: the tools of this gateway are named \
                 mcp__<server>__<tool>; list them with tools/list."
            )
        })
    }

    async fn shutdown(mut self) {
        let names: Vec<String> = self.live.keys().cloned().collect();
        for name in names {
            self.teardown(&name, true);
        }
        while self.closing.join_next().await.is_some() {}
    }
}

/// One digest per list of the merged catalog (order-sensitive).
fn digests(catalog: &MergedCatalog) -> (u64, u64, u64) {
    fn digest<T: serde::Serialize>(items: &[T]) -> u64 {
        let mut hasher = std::collections::hash_map::DefaultHasher::new();
        for item in items {
            serde_json::to_string(item)
                .unwrap_or_default()
                .hash(&mut hasher);
        }
        hasher.finish()
    }
    (
        digest(&catalog.tools),
        digest(&catalog.prompts),
        digest(&catalog.resources),
    )
}

fn describe_sources(sources: &[FileSource]) -> String {
    if sources.is_empty() {
        return "reload".into();
    }
    let names: Vec<String> = sources
        .iter()
        .map(|s| match s {
            FileSource::Settings(id) => format!("{id} settings"),
            FileSource::McpJson => ".mcp.json".to_owned(),
            FileSource::Approvals => "approvals".to_owned(),
            FileSource::McpConfig(id) => format!("--mcp-config {id}"),
        })
        .collect();
    format!("change in {}", names.join(", "))
}

/// Runs blocking file work (reading the inputs) without stalling the other
/// tasks of a multi-threaded runtime; inline elsewhere. The reads themselves
/// are bounded and never wait on a FIFO ([`crate::inputs::read_text`]).
fn off_the_loop<T>(work: impl FnOnce() -> T) -> T {
    match tokio::runtime::Handle::try_current() {
        Ok(handle) if handle.runtime_flavor() == tokio::runtime::RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(work)
        }
        _ => work(),
    }
}

/// The real clock's `now` on the supervision clock: divided by the
/// test-only backoff scale (1 in production: the same clock).
pub(crate) fn policy_time(now: Millis, scale: f64) -> Millis {
    if scale == 1.0 || !scale.is_finite() || scale <= 0.0 {
        return now;
    }
    Millis((now.0 as f64 / scale.max(1e-6)).min(u64::MAX as f64) as u64)
}

/// A supervision-clock time (or span) on the real clock.
pub(crate) fn real_time(at: Millis, scale: f64) -> Millis {
    if scale == 1.0 || !scale.is_finite() || scale <= 0.0 {
        return at;
    }
    Millis((at.0 as f64 * scale.max(1e-6)).round().min(u64::MAX as f64) as u64)
}
