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

mod actor;

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::time::Duration;

use mcp_reconcile_kernel::approvals::Approvals;
use mcp_reconcile_kernel::gating::tool_not_found;
use mcp_reconcile_kernel::hot_reload::Previous;
use mcp_reconcile_kernel::identity::ConnectionId;
use mcp_reconcile_kernel::plan::{plan, Action, Mode, Online, OnlineEntry, Plan};
use mcp_reconcile_kernel::pool::{Acquire, DEFAULT_DRAIN};
use mcp_reconcile_kernel::{Gating, Millis, Reason, ServerConfig, Servers};
use tokio::sync::{mpsc, oneshot};

use self::actor::{Actor, HeldConn, Op, Request};
use crate::host::{adopt, CatalogMerger, MergedCatalog, PrefixOwners, Route, Target};
use crate::inputs::Snapshot;
use crate::view::{own_prompt_name, own_tool_name, session_view};

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
        crate::host::ask(&self.tx, make).await.ok_or(PoolGone)
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
        let decision = snapshot
            .hot_reload(&self.previous)
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
        self.previous = adopt(&decision, &self.desired, &self.gating);
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
