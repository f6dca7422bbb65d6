//! [`Backend`]: where a session's MCP connections live — the one thing that differs between a
//! session with its own processes and a session of the per-user daemon. Everything else (the
//! drive loop, the scheduler, the grace, the waiters, approvals, catalog, routing, status,
//! language servers) is the session's own, written once in [`super::Host`].
//!
//! * [`Own`]: the session's own `Supervisor` (`watch --no-daemon`, `serve --no-daemon`, an
//!   embedding host): it starts, retries and stops its processes itself.
//! * the pool's `Lease`: the session's holds on the shared pool (a daemon session):
//!   the pool starts, shares, supervises and drains the processes; the session asks it to
//!   acquire, replace, retry and release, and sees what it holds — its supervision included,
//!   from which the session's plan retries it — through a mirror.

use futures::future::BoxFuture;
use mcp_reconcile_kernel::identity::ConnectionId;
use mcp_reconcile_kernel::plan::{Online, OnlineEntry};
use mcp_reconcile_kernel::share::ShareSettings;
use mcp_reconcile_kernel::supervise::Supervision;
use mcp_reconcile_kernel::{Gating, Millis, ServerConfig, Servers};

use crate::clock::Clock;
use crate::supervisor::{Mcp, McpKind, Report, Supervisor};
use crate::transport::{Caller, Catalog, Connection};

/// One server's connection as the session sees it.
pub struct Held<'a> {
    /// The config the session runs it with (its own `includeTools` / `excludeTools` apply).
    pub(crate) config: &'a ServerConfig,
    /// What it offers (empty unless it serves).
    pub(crate) catalog: &'a Catalog,
    /// Its supervision state.
    pub(crate) health: &'a Supervision,
    /// Forwards a request while it serves (connected, or the old process while its
    /// replacement starts).
    pub(crate) caller: Option<Caller>,
    /// The process id of a live local server.
    pub(crate) pid: Option<u32>,
    /// How many times its process was started.
    pub(crate) spawns: u64,
    /// The scope its process is shared in (a pooled stdio server only).
    pub(crate) share: Option<mcp_reconcile_kernel::share::Share>,
    /// How many sessions hold its process (a pooled server only).
    pub(crate) sessions: Option<usize>,
}

/// How a restart asked for by `reconnect` runs.
pub enum Restart {
    /// Through the session's next pass (the plan retries what the session forgave).
    Pass,
    /// Elsewhere (the pool restarts what the session holds): the restarted servers, or why none
    /// was.
    Elsewhere(BoxFuture<'static, Result<Vec<String>, String>>),
}

/// Where a session's MCP connections live. See the module docs. Implemented by [`Own`] and
/// the pool's `Lease` only.
pub trait Backend: Send + 'static {
    /// The clock supervision reads.
    fn clock(&self) -> &Clock;

    /// The servers, gating and sharing settings of the pass about to execute its plan: the
    /// next starts are checked against the gating (the pool's gate) and shared in the scope
    /// `share` gives them, and a kept connection is seen through its server's current entry
    /// (in pool mode a `trust` or tool-filter edit keeps the process).
    fn admit(&mut self, desired: &Servers, gating: &Gating, share: &ShareSettings);

    /// Starts `name` from `config` (its connection id `to`, when the plan knows it): with
    /// `replace`, before what runs is stopped (make before break). Returns the start's
    /// generation, reported by [`Backend::next`] once it ended.
    fn start(
        &mut self,
        name: &str,
        config: &ServerConfig,
        to: Option<&ConnectionId>,
        replace: bool,
    ) -> u64;

    /// Stops `name`'s connection and purges its catalog at once; `forget` drops its entry and
    /// failure counters (a disconnect), otherwise it is about to be started again.
    fn stop(&mut self, name: &str, forget: bool);

    /// Clears the failure and crash-loop state of everything the session runs.
    fn forgive_all(&mut self);

    /// Clears `name`'s failure and crash-loop state before it is started afresh because its
    /// sources changed (dev mode): the fix may be in them.
    fn forgive(&mut self, name: &str);

    /// The next start that ended or connection that changed. Cancel-safe.
    fn next(&mut self) -> impl std::future::Future<Output = Report<String>> + Send;

    /// When the session must run a pass for a due retry (`None`: nothing failed is due) —
    /// on either backend the session's engine plans every retry.
    fn next_retry(&self) -> Option<Millis>;

    /// Whether a retry is due now.
    fn retry_due(&self) -> bool;

    /// `name`'s connection, if the session has one.
    fn held(&self, name: &str) -> Option<Held<'_>>;

    /// What is online, as the kernel's plan sees it.
    fn online(&self) -> Online;

    /// Restarts `server` (every server when `None`), asked together with the sessions `also`
    /// (the daemon's sessions of one file set); `names` are the configured servers it covers.
    fn reconnect(&mut self, server: Option<&str>, names: &[String], also: &[String]) -> Restart;

    /// Stops every connection (releases every hold); returns when they are stopped.
    fn shutdown(self) -> impl std::future::Future<Output = ()> + Send;
}

/// A session's own processes: its `Supervisor`, keyed by server name. `C` is the kind of
/// connection: MCP connections ([`Mcp`]), or in the crate's unit tests the in-memory kind
/// (`crate::testkit::Memory`), which yields the same connections.
#[allow(private_bounds)] // The kinds are the crate's own; outside it `Own` is `Own<Mcp>`.
pub struct Own<C: McpKind = Mcp>(Supervisor<String, C>);

#[allow(private_bounds)]
impl<C: McpKind> Backend for Own<C> {
    fn clock(&self) -> &Clock {
        self.0.clock()
    }

    fn admit(&mut self, _desired: &Servers, _gating: &Gating, _share: &ShareSettings) {}

    fn start(
        &mut self,
        name: &str,
        config: &ServerConfig,
        _to: Option<&ConnectionId>,
        replace: bool,
    ) -> u64 {
        let (key, name, config) = (name.to_owned(), name.to_owned(), config.clone());
        if replace {
            self.0.replace(key, name, config)
        } else {
            self.0.start(key, name, config)
        }
    }

    fn stop(&mut self, name: &str, forget: bool) {
        let key = name.to_owned();
        if forget {
            self.0.remove(&key);
        } else {
            self.0.disconnect(&key);
        }
    }

    fn forgive_all(&mut self) {
        self.0.forgive_all();
    }

    fn forgive(&mut self, name: &str) {
        self.0.forgive(&name.to_owned());
    }

    fn next(&mut self) -> impl std::future::Future<Output = Report<String>> + Send {
        self.0.next()
    }

    fn next_retry(&self) -> Option<Millis> {
        self.0.next_retry()
    }

    fn retry_due(&self) -> bool {
        !self.0.due().is_empty()
    }

    fn held(&self, name: &str) -> Option<Held<'_>> {
        let key = name.to_owned();
        let entry = self.0.get(&key)?;
        Some(Held {
            config: &entry.config,
            catalog: &entry.catalog,
            health: entry.health(),
            caller: entry.live().map(Connection::caller),
            pid: entry.pid(),
            spawns: self.0.spawns(&key),
            share: None,
            sessions: None,
        })
    }

    fn online(&self) -> Online {
        let mut online = Online::new();
        for (name, live) in self.0.entries() {
            online.insert(name.clone(), online_entry(&live.config, live.health()));
        }
        online
    }

    /// The session's own pass restarts them: the plan takes them as manual reconnects and
    /// the kernel's `decide_restart` says how (see `host/restart.rs`).
    fn reconnect(&mut self, _server: Option<&str>, _names: &[String], _also: &[String]) -> Restart {
        Restart::Pass
    }

    fn shutdown(self) -> impl std::future::Future<Output = ()> + Send {
        self.0.shutdown()
    }
}

#[allow(private_bounds)]
impl<C: McpKind> Own<C> {
    /// Runs the session's servers on `supervisor`.
    pub(crate) fn new(supervisor: Supervisor<String, C>) -> Own<C> {
        Own(supervisor)
    }
}

/// The kernel's view of one running connection.
fn online_entry(config: &ServerConfig, health: &Supervision) -> OnlineEntry {
    OnlineEntry {
        config: config.clone(),
        status: health.status,
        attempts: health.attempts,
        retry_at: health.retry_at,
        crash_loop: health.crash_loop,
        needs_auth: health.needs_auth,
    }
}
