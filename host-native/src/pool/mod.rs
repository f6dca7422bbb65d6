//! A connection pool shared by several sessions in one process (SPEC §6, pool mode), for Rust
//! hosts that embed mcp-reconcile — an editor with several chat sessions, an agent runner with
//! many conversations — so each stdio server runs once however many sessions use it.
//!
//! A session on the pool is the one session engine, [`Host`](crate::host::Host), with a
//! [`Lease`] of the pool as its backend ([`Host::in_pool`](crate::host::Host::in_pool)), as
//! every daemon session is: it reloads its files, plans in pool mode, and its plan's `connect`
//! becomes an acquire, `disconnect` a release and `reconnect` a replace. Everything else — the
//! reload scheduling, approvals, catalog, routes, status — is the session's own, the same as
//! on its own processes.
//!
//! * Connections are keyed by connection id (`name::<hash of command, args, env, cwd, url …>`),
//!   so sessions whose configs differ only in `trust`, `includeTools` or `excludeTools` share one
//!   process; each session applies its own fields in its own view (its catalog and routes,
//!   through the [`Session`](crate::session::Session) its handle implements).
//! * The bookkeeping is the kernel's [`Pool`](mcp_reconcile_kernel::Pool): a connection lives
//!   while any session holds it. When the last session holding it ends, it closes a drain delay
//!   ([`PoolOptions::drain`]) later, so a client that restarts re-attaches; when the last one's
//!   plan stops it (removed, excluded, rejected, blocked by policy, its entry changed), it is
//!   stopped at once. Concurrent acquires of one id spawn once; only stdio servers are pooled
//!   (remote ones with [`PoolOptions::pool_remote`]; `sdk` never) — an unpooled server gets a
//!   private connection for its session, closed when the session releases it.
//! * **The approval gate runs before any acquire**: a session's plan is made against its gating
//!   (pending and rejected servers are not admitted), every acquire is checked against that
//!   gating again by the kernel ([`Pool::acquire`](mcp_reconcile_kernel::Pool::acquire)), and
//!   a holder's retry and a session's reconnect restart a connection only while that
//!   holder's (or a holder's) current gating admits it. No path spawns a pending or rejected server.
//! * **Make before break**, as in a single session: when a server's connection id changes in a
//!   session, its new connection starts and lists its tools while the old one keeps serving
//!   that session; the switch is atomic, then the old one is stopped once the calls routed to
//!   it have been answered (within a bound) — or kept, if other sessions still hold it. A new
//!   process that cannot start beside the old one gets the old one stopped and is started once
//!   more; `"stopBeforeRestart": true` lets go of the old one first.
//! * The pool keeps each connection's supervision and reports it to every holder; the holders'
//!   engines plan the retries (issue 38: one retry driver), and the first holder whose retry is
//!   due starts it again once: a crashed server is `failed` with its last error and retried on
//!   the kernel's backoff while anyone holds it; crash loop after the threshold; `reconnect`
//!   clears it.
//!
//! ```no_run
//! use mcp_reconcile::host::{Host, HostOptions, RunningSession};
//! use mcp_reconcile::inputs::{Inputs, Options};
//! use mcp_reconcile::pool::{PoolOptions, SharedPool};
//! use mcp_reconcile::session::Session;
//!
//! /// Session `name` on `pool` over the files `flags` name, reconciled whenever one changes.
//! fn start(pool: &SharedPool, flags: &Options, name: &str) -> anyhow::Result<RunningSession> {
//!     let inputs = Inputs::new(flags)?;
//!     Host::in_pool(inputs, HostOptions::default(), pool, name).spawn()
//! }
//!
//! # async fn demo(flags_a: Options, flags_b: Options) -> anyhow::Result<()> {
//! let pool = SharedPool::start(PoolOptions::default());
//! let a = start(&pool, &flags_a, "chat-1")?; // spawns its stdio servers
//! let b = start(&pool, &flags_b, "chat-2")?; // attaches to the same ids
//! let tools = b.handle().catalog().await?.tools; // chat-2's view: its own includeTools / excludeTools
//! a.shutdown().await?; // chat-2 still holds them
//! b.shutdown().await?; // closed after the drain delay
//! pool.shutdown().await;
//! # Ok(()) }
//! ```

mod actor;
mod lease;
mod pooled;
#[cfg(test)]
mod tests;

use std::path::PathBuf;
use std::time::Duration;

use mcp_reconcile_kernel::identity::ConnectionId;
use mcp_reconcile_kernel::pool::DEFAULT_DRAIN;
use mcp_reconcile_kernel::Reason;
use tokio::sync::{mpsc, oneshot, watch};

use self::actor::{Actor, Request};
pub use self::lease::Lease;
use crate::clock::Clock;

/// How a [`SharedPool`] behaves.
#[derive(Clone, Debug)]
pub struct PoolOptions {
    /// How long a connection stays open after the last session holding it ended (SPEC default
    /// 30 s); one a session's plan stopped closes at once.
    pub drain: Duration,
    /// Share remote (HTTP, SSE) connections too; by default they are per session.
    pub pool_remote: bool,
    /// The clock the drain and supervision read, as
    /// [`HostOptions::clock`](crate::host::HostOptions).
    pub clock: Clock,
    /// A relative `cwd` is resolved against this.
    pub base_dir: Option<PathBuf>,
    /// The OAuth token file (`None`: the default one).
    pub tokens: Option<crate::auth::TokenFile>,
    /// Servers started at once.
    pub parallelism: usize,
}

impl Default for PoolOptions {
    fn default() -> Self {
        PoolOptions {
            drain: Duration::from_millis(DEFAULT_DRAIN.0),
            pool_remote: false,
            clock: Clock::tokio(),
            base_dir: None,
            tokens: None,
            parallelism: crate::host::DEFAULT_PARALLELISM,
        }
    }
}

/// The pool stopped ([`SharedPool::shutdown`]).
#[derive(Clone, Copy, Debug, thiserror::Error)]
#[error("the shared MCP connection pool has shut down")]
pub struct PoolGone;

/// One pooled connection as [`SharedPool::status`] shows it.
#[derive(Clone, Debug, PartialEq)]
pub struct PooledStatus {
    /// The connection id.
    pub id: ConnectionId,
    /// The server name.
    pub server: String,
    /// `connecting`, `connected` or `failed`.
    pub state: crate::host::State,
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

/// What a reconnect did: one session's, or several sessions' asking together
/// ([`HostHandle::reconnect_with`](crate::host::HostHandle::reconnect_with)).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Reconnected {
    /// Servers restarted.
    pub restarted: Vec<String>,
    /// Servers left alone because other sessions hold them too while they are up or starting,
    /// with how many.
    pub refused: Vec<(String, usize)>,
}

impl Reconnected {
    /// The sentence for the refused ones: which, and how many other sessions hold each.
    pub fn refusal(&self) -> Option<String> {
        if self.refused.is_empty() {
            return None;
        }
        let each: Vec<String> = self
            .refused
            .iter()
            .map(|(name, others)| {
                format!(
                    "\"{}\" is shared with {others} other session{}",
                    crate::display::short_name(name),
                    if *others == 1 { "" } else { "s" }
                )
            })
            .collect();
        Some(format!(
            "not reconnected: {}; a running process another session uses is not restarted \
             under its calls — it restarts when it fails, or when every session holding it asks \
             (`mcp-reconcile reconnect NAME` with each one's flags)",
            each.join(", ")
        ))
    }
}

/// A handle on the pool; clones share it. Dropping every handle does not stop it: call
/// [`SharedPool::shutdown`].
#[derive(Clone, Debug)]
pub struct SharedPool {
    tx: mpsc::UnboundedSender<Request>,
    changes: watch::Receiver<u64>,
    /// The clock its supervision reads: every session on it reads the same one, so a retry
    /// time or a healthy-since the pool keeps means the same in the session.
    clock: Clock,
}

impl SharedPool {
    /// Starts the pool's task on the current tokio runtime.
    pub fn start(options: PoolOptions) -> SharedPool {
        let (tx, rx) = mpsc::unbounded_channel();
        let (changes_tx, changes) = watch::channel(0);
        let clock = options.clock.clone();
        let kind = pooled::Pooled::Mcp(crate::supervisor::Mcp {
            base_dir: options.base_dir.clone(),
            tokens: options.tokens.clone(),
        });
        tokio::spawn(Actor::new(options, kind, changes_tx).run(rx));
        SharedPool { tx, changes, clock }
    }

    /// [`SharedPool::start`] on the in-memory servers `servers` (the crate's unit tests).
    #[cfg(test)]
    pub(crate) fn start_in_memory(
        options: PoolOptions,
        servers: &crate::testkit::Servers,
    ) -> SharedPool {
        let (tx, rx) = mpsc::unbounded_channel();
        let (changes_tx, changes) = watch::channel(0);
        let clock = options.clock.clone();
        let kind = pooled::Pooled::Memory(servers.kind());
        tokio::spawn(Actor::new(options, kind, changes_tx).run(rx));
        SharedPool { tx, changes, clock }
    }

    /// Marked changed whenever a session's view may have changed: a connection came up,
    /// failed, closed or re-listed its catalog, or a session acquired, released or
    /// reconnected. A session's [`Lease`] reads what it holds again when it fires.
    pub fn changes(&self) -> watch::Receiver<u64> {
        self.changes.clone()
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
