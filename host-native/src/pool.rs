//! A connection pool shared by several sessions in one process (SPEC §6, pool mode), for Rust
//! hosts that embed mcp-reconcile — an editor with several chat sessions, an agent runner with
//! many conversations — so each stdio server runs once however many sessions use it.
//!
//! * Connections are keyed by connection id (`name::<hash of command, args, env, cwd, url …>`),
//!   so sessions whose configs differ only in `trust`, `includeTools` or `excludeTools` share one
//!   process; each [`PoolSession`] applies its own fields in its own view ([`PoolSession::catalog`],
//!   [`PoolSession::route`]).
//! * The bookkeeping is the kernel's [`Pool`]: a connection lives while any session holds it and
//!   closes a drain delay ([`PoolOptions::drain`]) after the last release; concurrent acquires of
//!   one id spawn once; only stdio servers are pooled (remote ones with
//!   [`PoolOptions::pool_remote`]; `sdk` never) — an unpooled server gets a private connection
//!   for its session, closed when the session releases it.
//! * **The approval gate runs before any acquire**: a session's plan is made against its gating
//!   (pending and rejected servers are not admitted), every acquire is checked against that
//!   gating again by the kernel ([`Pool::acquire`]), and the pool's own retries and
//!   [`PoolSession::reconnect`] restart a connection only while a holder's current gating admits
//!   it. No path spawns a pending or rejected server.
//! * The pool, not each session, supervises its connections: a crashed server is `failed` with
//!   its last error and retried on the kernel's backoff while anyone holds it; crash loop after
//!   the threshold; `reconnect` clears it.
//!
//! ```no_run
//! use mcp_reconcile::inputs::{Inputs, Options};
//! use mcp_reconcile::pool::{PoolOptions, SharedPool};
//!
//! # async fn demo(flags_a: Options, flags_b: Options) -> anyhow::Result<()> {
//! let pool = SharedPool::start(PoolOptions::default());
//! let (mut files_a, mut files_b) = (Inputs::new(&flags_a)?, Inputs::new(&flags_b)?);
//! let mut a = pool.session("chat-1");
//! let mut b = pool.session("chat-2");
//! a.apply(&files_a.load(None)).await?; // spawns the admitted stdio servers
//! b.apply(&files_b.load(None)).await?; // attaches to those with the same connection id
//! let tools = b.catalog().await?.tools; // chat-2's view: its own includeTools / excludeTools
//! a.close().await; // chat-2 still holds them
//! b.close().await; // closed after the drain delay
//! pool.shutdown().await;
//! # Ok(()) }
//! ```
//!
//! Call [`PoolSession::apply`] again whenever a session's files change (e.g. from the
//! [`watcher`](crate::watcher)); it plans with the kernel in pool mode and turns `connect` into
//! acquire, `disconnect` into release and `reconnect` into release + acquire.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use mcp_reconcile_kernel::approvals::Approvals;
use mcp_reconcile_kernel::config::servers_to_value;
use mcp_reconcile_kernel::gating::tool_not_found;
use mcp_reconcile_kernel::hot_reload::{hot_reload, Previous};
use mcp_reconcile_kernel::identity::ConnectionId;
use mcp_reconcile_kernel::plan::{plan, Action, Mode, Online, OnlineEntry, Plan, Status};
use mcp_reconcile_kernel::pool::{Acquire, Pool, Release, DEFAULT_DRAIN};
use mcp_reconcile_kernel::{Gating, Millis, Reason, ServerConfig, Servers};
use tokio::sync::{mpsc, oneshot, Semaphore};

use crate::host::{policy_time, real_time};
use crate::host::{warn_new_collisions, CatalogMerger, MergedCatalog, PrefixOwners, Route, Target};
use crate::inputs::Snapshot;
use crate::transport::{self, Catalog, ConnEvent, ConnectErrorKind, ConnectOptions, Connection};
use crate::view::{own_prompt_name, own_tool_name, session_view};
use mcp_reconcile_kernel::supervise::{seed_for, Supervision};

/// How a [`SharedPool`] behaves.
#[derive(Clone, Debug)]
pub struct PoolOptions {
    /// How long a connection nobody holds stays open (SPEC default 30 s).
    pub drain: Duration,
    /// Share remote (HTTP, SSE) connections too; by default they are per session.
    pub pool_remote: bool,
    /// Scales supervision time as [`HostOptions::backoff_scale`](crate::host::HostOptions)
    /// (tests only).
    pub backoff_scale: f64,
    /// A relative `cwd` is resolved against this.
    pub base_dir: Option<PathBuf>,
    /// Servers started at once.
    pub parallelism: usize,
}

impl Default for PoolOptions {
    fn default() -> Self {
        PoolOptions {
            drain: Duration::from_millis(DEFAULT_DRAIN.0),
            pool_remote: false,
            backoff_scale: 1.0,
            base_dir: None,
            parallelism: crate::host::DEFAULT_PARALLELISM,
        }
    }
}

/// The pool stopped ([`SharedPool::shutdown`]).
#[derive(Clone, Copy, Debug, thiserror::Error)]
#[error("the shared MCP connection pool has shut down")]
pub struct PoolGone;

/// Why [`PoolSession::apply`] failed.
#[derive(Debug, thiserror::Error)]
pub enum PoolError {
    /// The pool stopped.
    #[error(transparent)]
    Gone(#[from] PoolGone),
    /// The kernel could not compare or plan the server maps.
    #[error("cannot plan: {0}")]
    Plan(String),
}

/// One pooled connection as [`SharedPool::status`] shows it.
#[derive(Clone, Debug, PartialEq)]
pub struct PooledStatus {
    /// The connection id.
    pub id: ConnectionId,
    /// The server name.
    pub server: String,
    /// `connecting`, `connected` or `failed`.
    pub state: &'static str,
    /// `backing_off` or `crash_loop` when failed.
    pub reason: Option<Reason>,
    /// Sessions holding it (first-acquire order); empty while draining.
    pub holders: Vec<String>,
    /// Private to one session (a transport the pool does not share).
    pub private: bool,
    /// Nobody holds it; it closes at the end of the drain delay.
    pub draining: bool,
    /// Process id of a live stdio server.
    pub pid: Option<u32>,
    /// How many times the pool started it.
    pub spawns: u64,
    /// Consecutive failures.
    pub attempts: u32,
    /// Tools the server lists (before any session's filters).
    pub tools: usize,
    /// The last error, redacted.
    pub last_error: Option<String>,
}

/// What [`PoolSession::apply`] did.
#[derive(Clone, Debug)]
pub struct Applied {
    /// The kernel's plan for this session (pool mode).
    pub plan: Plan,
    /// Servers whose acquire the kernel refused, with why (the gate).
    pub refused: Vec<(String, Reason)>,
    /// Gated servers waiting for a decision (pending, not rejected), in map order: a
    /// rejected server shows up here again once its config is edited.
    pub approval_needed: Vec<String>,
}

/// A handle on the pool; clones share it. Dropping every handle does not stop it: call
/// [`SharedPool::shutdown`].
#[derive(Clone, Debug)]
pub struct SharedPool {
    tx: mpsc::UnboundedSender<Request>,
}

impl SharedPool {
    /// Starts the pool's task on the current tokio runtime.
    pub fn start(options: PoolOptions) -> SharedPool {
        let (tx, rx) = mpsc::unbounded_channel();
        tokio::spawn(Actor::new(options).run(rx));
        SharedPool { tx }
    }

    /// A new session named `name` (unique among live sessions). It holds nothing until
    /// [`PoolSession::apply`].
    pub fn session(&self, name: impl Into<String>) -> PoolSession {
        PoolSession {
            name: name.into(),
            pool: self.clone(),
            previous: Previous {
                removed: Some(Vec::new()),
                ..Previous::default()
            },
            desired: Servers::new(),
            gating: Gating::default(),
            approvals: Approvals::empty(),
            project_root: String::new(),
            acquired: BTreeMap::new(),
            closed: false,
        }
    }

    /// Every open connection (held, starting, failed or draining).
    ///
    /// # Errors
    /// [`PoolGone`].
    pub async fn status(&self) -> Result<Vec<PooledStatus>, PoolGone> {
        self.ask(Request::Status).await
    }

    /// Closes every connection (each server stopped with its process group) and stops the
    /// pool; returns when all are stopped.
    pub async fn shutdown(&self) {
        let _ = self.ask(Request::Shutdown).await;
    }

    async fn ask<T>(
        &self,
        make: impl FnOnce(oneshot::Sender<T>) -> Request,
    ) -> Result<T, PoolGone> {
        let (tx, rx) = oneshot::channel();
        self.tx.send(make(tx)).map_err(|_| PoolGone)?;
        rx.await.map_err(|_| PoolGone)
    }
}

/// One session's use of the pool: its desired servers, gating and view. Dropping it releases
/// everything it holds (as [`PoolSession::close`], without waiting).
pub struct PoolSession {
    name: String,
    pool: SharedPool,
    previous: Previous,
    desired: Servers,
    gating: Gating,
    approvals: Approvals,
    project_root: String,
    /// Server → (connection id, the config it was acquired with).
    acquired: BTreeMap<String, (ConnectionId, ServerConfig)>,
    closed: bool,
}

impl std::fmt::Debug for PoolSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PoolSession")
            .field("name", &self.name)
            .field("acquired", &self.acquired.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl PoolSession {
    /// The session's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Reconciles this session with its files as loaded in `snapshot`: the kernel decides the
    /// servers and gating (approvals included), plans in pool mode, and the pool acquires and
    /// releases accordingly. Returns once the pool has taken every acquire and release
    /// (servers keep connecting in the background; see [`SharedPool::status`]).
    ///
    /// # Errors
    /// [`PoolError`].
    pub async fn apply(&mut self, snapshot: &Snapshot) -> Result<Applied, PoolError> {
        let decision = hot_reload(
            &self.previous,
            &snapshot.layers,
            |servers| snapshot.gating_for(servers),
            &snapshot.approvals,
            &snapshot.project_root,
            snapshot.yolo,
        )
        .map_err(|e| PoolError::Plan(e.to_string()))?;
        let mut online = Online::new();
        for (name, (_, config)) in &self.acquired {
            // The pool supervises and retries its connections: to a session, what it holds is
            // always there.
            online.insert(name.clone(), OnlineEntry::connected(config.clone()));
        }
        let planned = plan(
            &decision.servers,
            &online,
            &decision.gating,
            snapshot.trusted,
            Mode::Pool,
            Millis(0),
        )
        .map_err(|e| PoolError::Plan(e.to_string()))?;
        let mut ops = Vec::new();
        for action in &planned.actions {
            match action {
                Action::Disconnect { name, .. } => {
                    if let Some((id, _)) = self.acquired.remove(name) {
                        ops.push(Op::Release { id });
                    }
                }
                Action::Reconnect { name, to, .. } => {
                    if let Some((id, _)) = self.acquired.remove(name) {
                        ops.push(Op::Release { id });
                    }
                    if let Some(config) = decision.servers.get(name) {
                        ops.push(Op::Acquire {
                            server: name.clone(),
                            id: to.clone(),
                            config: config.clone(),
                        });
                    }
                }
                Action::Connect { name, to } => {
                    if let Some(config) = decision.servers.get(name) {
                        ops.push(Op::Acquire {
                            server: name.clone(),
                            id: to.clone(),
                            config: config.clone(),
                        });
                    }
                }
                Action::Retry { .. } | Action::Keep { .. } | Action::Skip { .. } => {}
                Action::Noop { .. } => {}
            }
        }
        let acquires: HashMap<String, (ConnectionId, ServerConfig)> = ops
            .iter()
            .filter_map(|op| match op {
                Op::Acquire { server, id, config } => {
                    Some((server.clone(), (id.clone(), config.clone())))
                }
                Op::Release { .. } => None,
            })
            .collect();
        let gating = decision.gating.clone();
        let session = self.name.clone();
        let results = self
            .pool
            .ask(|reply| Request::Apply {
                session,
                gating,
                ops,
                reply,
            })
            .await?;
        let mut refused = Vec::new();
        for (server, outcome) in results {
            match outcome {
                Acquire::Refused { reason } => refused.push((server, reason)),
                Acquire::Spawn | Acquire::Attach { .. } | Acquire::Unpooled { .. } => {
                    if let Some(held) = acquires.get(&server) {
                        self.acquired.insert(server, held.clone());
                    }
                }
            }
        }
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
        self.approvals = snapshot.approvals.clone();
        self.project_root = snapshot.project_root.clone();
        Ok(Applied {
            plan: planned,
            refused,
            approval_needed: decision.promptable,
        })
    }

    /// The connections this session holds, in settings order, with the session's own config.
    async fn held(&self) -> Result<Vec<(String, ServerConfig, HeldConn)>, PoolGone> {
        let session = self.name.clone();
        let conns = self
            .pool
            .ask(|reply| Request::View { session, reply })
            .await?;
        let mut by_server: HashMap<String, HeldConn> =
            conns.into_iter().map(|c| (c.server.clone(), c)).collect();
        Ok(self
            .desired
            .iter()
            .filter(|(name, _)| self.acquired.contains_key(*name))
            .filter_map(|(name, config)| {
                by_server
                    .remove(name)
                    .map(|held| (name.clone(), config.clone(), held))
            })
            .collect())
    }

    /// This session's view of its connected servers: tools after its own `includeTools` /
    /// `excludeTools`, names qualified `mcp__<server>__<name>`.
    ///
    /// # Errors
    /// [`PoolGone`].
    pub async fn catalog(&self) -> Result<MergedCatalog, PoolGone> {
        let mut merger = CatalogMerger::new(PrefixOwners::admitted(&self.desired, &self.gating));
        for (name, config, held) in self.held().await? {
            if held.caller.is_some() {
                merger.add(&name, session_view(&name, &config, &held.catalog));
            }
        }
        Ok(merger.finish())
    }

    /// Where a request of this session goes; `Err` is the message for the caller (for a tool,
    /// the §4 tool-not-found message).
    ///
    /// # Errors
    /// [`PoolGone`].
    pub async fn route(&self, target: Target) -> Result<Result<Route, String>, PoolGone> {
        let owners = PrefixOwners::admitted(&self.desired, &self.gating);
        for (server, config, held) in self.held().await? {
            let Some(caller) = held.caller.filter(|_| owners.owns(&server)) else {
                continue;
            };
            let name = match &target {
                Target::Tool(name) => own_tool_name(&server, &config, &held.catalog, name),
                Target::Prompt(name) => own_prompt_name(&server, &held.catalog, name),
                Target::Resource(uri) => held
                    .catalog
                    .resources
                    .iter()
                    .any(|r| &r.uri == uri)
                    .then(|| uri.clone()),
            };
            if let Some(name) = name {
                return Ok(Ok(Route {
                    server,
                    name,
                    caller,
                }));
            }
        }
        Ok(Err(match target {
            Target::Tool(name) => {
                let removed = self.previous.removed.as_deref().unwrap_or_default();
                tool_not_found(
                    &name,
                    &self.desired,
                    &self.gating,
                    removed,
                    Some((&self.approvals, self.project_root.as_str())),
                )
                .unwrap_or_else(|| format!("Tool \"{name}\" not found"))
            }
            Target::Prompt(name) => format!("prompt \"{name}\" not found"),
            Target::Resource(uri) => format!("resource \"{uri}\" not found"),
        }))
    }

    /// Clears failure and crash-loop state of the connections this session holds for
    /// `server` (all when `None`) and restarts them now — only while this session's gating
    /// admits them. Returns the servers restarted.
    ///
    /// # Errors
    /// [`PoolGone`].
    pub async fn reconnect(&self, server: Option<&str>) -> Result<Vec<String>, PoolGone> {
        let session = self.name.clone();
        let server = server.map(str::to_owned);
        self.pool
            .ask(|reply| Request::Reconnect {
                session,
                server,
                reply,
            })
            .await
    }

    /// Releases everything this session holds (pooled connections drain; private ones close).
    pub async fn close(mut self) {
        self.closed = true;
        let session = self.name.clone();
        let _ = self
            .pool
            .ask(|reply| Request::Close {
                session,
                reply: Some(reply),
            })
            .await;
    }
}

impl Drop for PoolSession {
    fn drop(&mut self) {
        if !self.closed {
            let _ = self.pool.tx.send(Request::Close {
                session: self.name.clone(),
                reply: None,
            });
        }
    }
}

// ---------------------------------------------------------------------------------------------
// the pool's task

enum Request {
    Apply {
        session: String,
        gating: Gating,
        ops: Vec<Op>,
        reply: oneshot::Sender<Vec<(String, Acquire)>>,
    },
    View {
        session: String,
        reply: oneshot::Sender<Vec<HeldConn>>,
    },
    Reconnect {
        session: String,
        server: Option<String>,
        reply: oneshot::Sender<Vec<String>>,
    },
    Close {
        session: String,
        reply: Option<oneshot::Sender<()>>,
    },
    Status(oneshot::Sender<Vec<PooledStatus>>),
    Shutdown(oneshot::Sender<()>),
}

enum Op {
    Release {
        id: ConnectionId,
    },
    Acquire {
        server: String,
        id: ConnectionId,
        config: ServerConfig,
    },
}

/// A held connection as a session sees it.
struct HeldConn {
    server: String,
    catalog: Catalog,
    /// Set while connected.
    caller: Option<transport::Caller>,
}

/// Shared connections by id; private ones by (session, id).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
enum Key {
    Shared(ConnectionId),
    Private(String, ConnectionId),
}

struct Pooled {
    server: String,
    config: ServerConfig,
    health: Supervision,
    conn: Option<Connection>,
    catalog: Catalog,
    generation: u64,
    spawns: u64,
}

struct StartDone {
    key: Key,
    generation: u64,
    result: Result<Connection, transport::ConnectError>,
}

#[derive(Default)]
struct SessionState {
    gating: Gating,
    /// Held keys (a shared key once per acquire, as the kernel counts).
    held: Vec<Key>,
}

struct Actor {
    options: PoolOptions,
    pool: Pool,
    conns: BTreeMap<Key, Pooled>,
    sessions: HashMap<String, SessionState>,
    generations: HashMap<u64, Key>,
    next_generation: u64,
    epoch: Instant,
    conn_tx: mpsc::UnboundedSender<ConnEvent>,
    conn_rx: mpsc::UnboundedReceiver<ConnEvent>,
    start_tx: mpsc::UnboundedSender<StartDone>,
    start_rx: mpsc::UnboundedReceiver<StartDone>,
    limiter: Arc<Semaphore>,
    closing: tokio::task::JoinSet<()>,
}

impl Actor {
    fn new(options: PoolOptions) -> Self {
        let mut pool = Pool::new();
        pool.set_drain(Millis(
            u64::try_from(options.drain.as_millis()).unwrap_or(u64::MAX),
        ));
        pool.set_pool_remote(options.pool_remote);
        let (conn_tx, conn_rx) = mpsc::unbounded_channel();
        let (start_tx, start_rx) = mpsc::unbounded_channel();
        let limiter = Arc::new(Semaphore::new(options.parallelism.max(1)));
        Actor {
            options,
            pool,
            conns: BTreeMap::new(),
            sessions: HashMap::new(),
            generations: HashMap::new(),
            next_generation: 1,
            epoch: Instant::now(),
            conn_tx,
            conn_rx,
            start_tx,
            start_rx,
            limiter,
            closing: tokio::task::JoinSet::new(),
        }
    }

    fn now(&self) -> Millis {
        Millis(u64::try_from(self.epoch.elapsed().as_millis()).unwrap_or(u64::MAX))
    }

    /// Now on the supervision clock (see the session host's).
    fn policy_now(&self) -> Millis {
        policy_time(self.now(), self.options.backoff_scale)
    }

    async fn run(mut self, mut requests: mpsc::UnboundedReceiver<Request>) {
        let mut shutdown_reply = None;
        loop {
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
                request = requests.recv() => match request {
                    None => break,
                    Some(Request::Shutdown(reply)) => {
                        shutdown_reply = Some(reply);
                        break;
                    }
                    Some(request) => self.handle(request),
                },
                Some(done) = self.start_rx.recv() => self.start_done(done),
                Some(event) = self.conn_rx.recv() => self.conn_event(event),
                () = sleep => self.timeout(),
                Some(_) = self.closing.join_next(), if !self.closing.is_empty() => {}
            }
        }
        for (_, pooled) in std::mem::take(&mut self.conns) {
            if let Some(conn) = pooled.conn {
                self.closing.spawn(conn.close());
            }
        }
        while self.closing.join_next().await.is_some() {}
        if let Some(reply) = shutdown_reply {
            let _ = reply.send(());
        }
    }

    fn handle(&mut self, request: Request) {
        match request {
            Request::Apply {
                session,
                gating,
                ops,
                reply,
            } => {
                let results = self.apply(&session, gating, ops);
                let _ = reply.send(results);
            }
            Request::View { session, reply } => {
                let held = self.view(&session);
                let _ = reply.send(held);
            }
            Request::Reconnect {
                session,
                server,
                reply,
            } => {
                let names = self.reconnect(&session, server.as_deref());
                let _ = reply.send(names);
            }
            Request::Close { session, reply } => {
                self.close_session(&session);
                if let Some(reply) = reply {
                    let _ = reply.send(());
                }
            }
            Request::Status(reply) => {
                let _ = reply.send(self.status());
            }
            Request::Shutdown(_) => {}
        }
    }

    fn apply(&mut self, session: &str, gating: Gating, ops: Vec<Op>) -> Vec<(String, Acquire)> {
        let now = self.now();
        self.sessions.entry(session.to_owned()).or_default().gating = gating;
        let mut results = Vec::new();
        for op in ops {
            match op {
                Op::Release { id } => self.release(session, &id, now),
                Op::Acquire { server, id, config } => {
                    let gating = self
                        .sessions
                        .get(session)
                        .map(|s| s.gating.clone())
                        .unwrap_or_default();
                    // The gate: the kernel refuses a server the session's gating denies.
                    let outcome = self.pool.acquire(session, &id, &config, &gating, now);
                    let key = match &outcome {
                        Acquire::Refused { .. } => None,
                        Acquire::Unpooled { .. } => {
                            Some(Key::Private(session.to_owned(), id.clone()))
                        }
                        Acquire::Spawn | Acquire::Attach { .. } => Some(Key::Shared(id.clone())),
                    };
                    if let Some(key) = key {
                        if !self.conns.contains_key(&key) {
                            self.conns
                                .insert(key.clone(), Pooled::new(server.clone(), config));
                            self.start(&key);
                        }
                        self.sessions
                            .entry(session.to_owned())
                            .or_default()
                            .held
                            .push(key);
                    }
                    results.push((server, outcome));
                }
            }
        }
        results
    }

    fn release(&mut self, session: &str, id: &ConnectionId, now: Millis) {
        let private = Key::Private(session.to_owned(), id.clone());
        let shared = Key::Shared(id.clone());
        let Some(state) = self.sessions.get_mut(session) else {
            return;
        };
        if let Some(at) = state.held.iter().position(|k| *k == private) {
            state.held.remove(at);
            self.close_key(&private);
            return;
        }
        if let Some(at) = state.held.iter().position(|k| *k == shared) {
            state.held.remove(at);
            if let Release::Draining { deadline } = self.pool.release(session, id, now) {
                tracing::debug!(%id, ?deadline, "draining");
            }
        }
    }

    fn close_session(&mut self, session: &str) {
        let now = self.now();
        let Some(state) = self.sessions.remove(session) else {
            return;
        };
        for key in state.held {
            if let Key::Private(..) = key {
                self.close_key(&key);
            }
        }
        self.pool.release_session(session, now);
    }

    fn close_key(&mut self, key: &Key) {
        if let Some(pooled) = self.conns.remove(key) {
            self.generations.remove(&pooled.generation);
            if let Some(conn) = pooled.conn {
                self.closing.spawn(conn.close());
            }
        }
    }

    /// Sessions holding `key`.
    fn holders(&self, key: &Key) -> Vec<String> {
        match key {
            Key::Shared(id) => self.pool.holders(id).map(str::to_owned).collect(),
            Key::Private(session, _) => vec![session.clone()],
        }
    }

    /// Whether some holder's current gating admits the connection: the gate for every
    /// restart that is not an acquire (retries, reconnects).
    fn admitted(&self, key: &Key) -> bool {
        let Some(pooled) = self.conns.get(key) else {
            return false;
        };
        self.holders(key).iter().any(|session| {
            self.sessions
                .get(session)
                .is_some_and(|s| s.gating.denial(&pooled.server, &pooled.config).is_none())
        })
    }

    fn start(&mut self, key: &Key) {
        let generation = self.next_generation;
        self.next_generation += 1;
        let Some(pooled) = self.conns.get_mut(key) else {
            return;
        };
        if let Some(conn) = pooled.conn.take() {
            self.closing.spawn(conn.close());
        }
        self.generations.remove(&pooled.generation);
        pooled.generation = generation;
        pooled.health.restart();
        pooled.catalog = Catalog::default();
        if pooled.config.transport() == mcp_reconcile_kernel::Transport::Stdio {
            pooled.spawns += 1;
        }
        self.generations.insert(generation, key.clone());
        let options = ConnectOptions {
            generation,
            events: self.conn_tx.clone(),
            handshake_timeout: Duration::from_millis(pooled.config.discovery_timeout_ms()),
            base_dir: self.options.base_dir.clone(),
            elicitation: None,
        };
        let (server, config) = (pooled.server.clone(), pooled.config.clone());
        let limiter = Arc::clone(&self.limiter);
        let done = self.start_tx.clone();
        let key = key.clone();
        tokio::spawn(async move {
            let _permit = limiter.acquire_owned().await;
            let result = transport::connect(&server, &config, options).await;
            let _ = done.send(StartDone {
                key,
                generation,
                result,
            });
        });
    }

    fn start_done(&mut self, done: StartDone) {
        let current = self
            .conns
            .get(&done.key)
            .is_some_and(|p| p.generation == done.generation);
        if !current {
            if let Ok(conn) = done.result {
                self.closing.spawn(conn.close());
            }
            return;
        }
        let now = self.policy_now();
        let Some(pooled) = self.conns.get_mut(&done.key) else {
            return;
        };
        match done.result {
            Ok(conn) => {
                pooled.catalog = conn.catalog().clone();
                pooled.conn = Some(conn);
                pooled.health.connected(now);
            }
            Err(e) => {
                let unsupported = e.kind == ConnectErrorKind::Unsupported;
                let seed = seed_for(&pooled.server);
                pooled.health.fail(seed, e.message, now, unsupported);
            }
        }
    }

    fn conn_event(&mut self, event: ConnEvent) {
        let now = self.policy_now();
        let (generation, catalog, error) = match event {
            ConnEvent::CatalogChanged {
                generation,
                catalog,
                ..
            } => (generation, Some(catalog), None),
            ConnEvent::Closed {
                generation, error, ..
            } => (generation, None, Some(error)),
        };
        let Some(key) = self.generations.get(&generation).cloned() else {
            return;
        };
        let Some(pooled) = self.conns.get_mut(&key) else {
            return;
        };
        if let Some(catalog) = catalog {
            pooled.catalog = catalog;
        }
        if let Some(error) = error {
            if let Some(conn) = pooled.conn.take() {
                self.closing.spawn(conn.close());
            }
            pooled.catalog = Catalog::default();
            let seed = seed_for(&pooled.server);
            pooled.health.closed(seed, error, now);
        }
    }

    fn next_wake(&self) -> Option<Millis> {
        let retry = self
            .conns
            .values()
            .filter_map(|p| p.health.retry_due())
            .min()
            .map(|at| real_time(at, self.options.backoff_scale));
        match (self.pool.poll_timeout(), retry) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    fn timeout(&mut self) {
        let now = self.now();
        let policy_now = self.policy_now();
        for close in self.pool.handle_timeout(now) {
            tracing::debug!(id = %close.id, "drained; closing");
            self.close_key(&Key::Shared(close.id));
        }
        let due: Vec<Key> = self
            .conns
            .iter()
            .filter(|(_, p)| p.health.is_due(policy_now))
            .map(|(key, _)| key.clone())
            .collect();
        for key in due {
            if self.admitted(&key) {
                self.start(&key);
            } else if let Some(pooled) = self.conns.get_mut(&key) {
                // Nobody who may run it holds it: wait for an acquire or the drain.
                pooled.health.park();
            }
        }
    }

    fn reconnect(&mut self, session: &str, server: Option<&str>) -> Vec<String> {
        let Some(state) = self.sessions.get(session) else {
            return Vec::new();
        };
        let gating = state.gating.clone();
        let mut seen = HashSet::new();
        let keys: Vec<Key> = state
            .held
            .iter()
            .filter(|key| seen.insert((*key).clone()))
            .cloned()
            .collect();
        let mut names = Vec::new();
        for key in keys {
            let Some(pooled) = self.conns.get(&key) else {
                continue;
            };
            if server.is_some_and(|s| s != pooled.server) {
                continue;
            }
            // The gate: this session must still admit it.
            if gating.denial(&pooled.server, &pooled.config).is_some() {
                continue;
            }
            names.push(pooled.server.clone());
            if let Some(pooled) = self.conns.get_mut(&key) {
                pooled.health.forgive();
            }
            self.start(&key);
        }
        names
    }

    fn view(&self, session: &str) -> Vec<HeldConn> {
        let Some(state) = self.sessions.get(session) else {
            return Vec::new();
        };
        let mut seen = HashSet::new();
        state
            .held
            .iter()
            .filter(|key| seen.insert((*key).clone()))
            .filter_map(|key| self.conns.get(key))
            .map(|pooled| HeldConn {
                server: pooled.server.clone(),
                catalog: pooled.catalog.clone(),
                caller: pooled
                    .conn
                    .as_ref()
                    .filter(|_| pooled.health.status == Status::Connected)
                    .map(Connection::caller),
            })
            .collect()
    }

    fn status(&self) -> Vec<PooledStatus> {
        self.conns
            .iter()
            .map(|(key, p)| {
                let (id, private) = match key {
                    Key::Shared(id) => (id.clone(), false),
                    Key::Private(_, id) => (id.clone(), true),
                };
                let holders = self.holders(key);
                PooledStatus {
                    draining: !private && holders.is_empty(),
                    id,
                    server: p.server.clone(),
                    state: p.health.status.as_str(),
                    reason: p.health.view(Millis::ZERO).reason,
                    holders,
                    private,
                    pid: p.conn.as_ref().and_then(Connection::pid),
                    spawns: p.spawns,
                    attempts: p.health.attempts,
                    tools: p.catalog.tools.len(),
                    last_error: p.health.last_error.clone(),
                }
            })
            .collect()
    }
}

impl Pooled {
    fn new(server: String, config: ServerConfig) -> Self {
        Pooled {
            server,
            config,
            health: Supervision::connecting(0, false),
            conn: None,
            catalog: Catalog::default(),
            generation: 0,
            spawns: 0,
        }
    }
}
