//! The pool's task: sessions' holds over the kernel's [`Pool`], the connections in the shared
//! [`Supervisor`].

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use mcp_reconcile_kernel::identity::ConnectionId;
use mcp_reconcile_kernel::plan::Status;
use mcp_reconcile_kernel::pool::{Acquire, Pool, Release};
use mcp_reconcile_kernel::restart::RestartRequest;
use mcp_reconcile_kernel::supervise::Supervision;
use mcp_reconcile_kernel::{Gating, Millis, ServerConfig};
use tokio::sync::{mpsc, oneshot, watch};

mod renew;
mod view;

pub(super) use self::view::ViewDiff;
use super::pooled::Pooled;
use super::{PoolOptions, PooledStatus};
use crate::launch::Launch;
use crate::supervisor::{Report, Supervisor};
use crate::transport::{self, Catalog};

pub(super) enum Request {
    Apply {
        session: String,
        gating: Gating,
        ops: Vec<Op>,
        reply: oneshot::Sender<Vec<(String, Acquire)>>,
    },
    /// What changed of what `session` holds since it last asked ([`ViewDiff`]), and in full
    /// the servers named in `want`.
    View {
        session: String,
        want: HashSet<String>,
        reply: oneshot::Sender<ViewDiff>,
    },
    Reconnect {
        /// The sessions asking together (the daemon's sessions of one file set).
        sessions: Vec<String>,
        server: Option<String>,
        reply: oneshot::Sender<super::Reconnected>,
    },
    Close {
        session: String,
        reply: Option<oneshot::Sender<()>>,
    },
    /// Clears the failure and crash-loop state of what `session` holds and restarts the failed
    /// ones it still admits (a session's `reload`).
    Forgive {
        session: String,
    },
    Status(oneshot::Sender<Vec<PooledStatus>>),
    Shutdown(oneshot::Sender<()>),
}

pub(super) enum Op {
    Release {
        id: ConnectionId,
    },
    Acquire {
        server: String,
        id: ConnectionId,
        config: ServerConfig,
        /// The session's directory and environment (a daemon session's), or this process's.
        launch: Option<Arc<Launch>>,
    },
    /// The server's connection id changed from `from` to `id`: acquire the new one and let go
    /// of the old — after the new one is up (make before break) unless `stop_first`.
    Replace {
        server: String,
        from: ConnectionId,
        id: ConnectionId,
        config: ServerConfig,
        launch: Option<Arc<Launch>>,
        stop_first: bool,
    },
    /// The session's engine planned a retry of its failed connection `id` (its backoff ended,
    /// or a reload forgave it): the pool starts it again once, whichever holder asks first.
    Retry {
        server: String,
        id: ConnectionId,
        config: ServerConfig,
        launch: Option<Arc<Launch>>,
    },
}

/// A held connection as a session sees it.
pub(super) struct HeldConn {
    pub(super) server: String,
    /// The connection id the session holds it by.
    pub(super) id: ConnectionId,
    pub(super) catalog: Arc<Catalog>,
    /// Set while connected.
    pub(super) caller: Option<transport::Caller>,
    /// Its supervision state.
    pub(super) health: Supervision,
    /// The process id of a live stdio server.
    pub(super) pid: Option<u32>,
    /// How many times the pool started it.
    pub(super) spawns: u64,
    /// Bumped whenever one of its starts ended or it changed by itself (catalog, exit).
    pub(super) version: u64,
    /// How many sessions hold it.
    pub(super) holders: usize,
}

/// Shared connections by id; private ones by (session, id).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(super) enum Key {
    Shared(ConnectionId),
    Private(String, ConnectionId),
}

#[derive(Default)]
struct SessionState {
    gating: Gating,
    /// Held keys (a shared key once per acquire, as the kernel counts).
    held: Vec<Key>,
    /// Changed servers whose old connection (first) other sessions also hold: this session
    /// keeps it, and sees it, until the new one (second) is up or failed.
    switching: Vec<(Key, Key)>,
    /// What the session was last shown of each connection it sees: a view sends only what
    /// differs (`view`).
    sent: HashMap<Key, view::Sent>,
}

pub(super) struct Actor {
    pool: Pool,
    /// The connections, by key.
    conns: Supervisor<Key, Pooled>,
    sessions: HashMap<String, SessionState>,
    /// Keys whose live connection is, while the replacement starts, the old process of the
    /// session named (make before break): it serves only that session, not one that acquired
    /// the new config meanwhile.
    standbys: HashMap<Key, String>,
    /// Bumped whenever something a session's view is made from may have changed.
    changes: watch::Sender<u64>,
    /// Per connection: bumped on each of its supervisor reports.
    versions: HashMap<Key, u64>,
}

impl Actor {
    /// The pool's actor on connections of `kind`.
    pub(super) fn new(options: PoolOptions, kind: Pooled, changes: watch::Sender<u64>) -> Self {
        let mut pool = Pool::new();
        pool.set_drain(Millis(
            u64::try_from(options.drain.as_millis()).unwrap_or(u64::MAX),
        ));
        pool.set_pool_remote(options.pool_remote);
        Actor {
            pool,
            conns: Supervisor::new(kind, options.parallelism, options.clock.clone()),
            sessions: HashMap::new(),
            standbys: HashMap::new(),
            changes,
            versions: HashMap::new(),
        }
    }

    fn now(&self) -> Millis {
        self.conns.clock().now()
    }

    pub(super) async fn run(mut self, mut requests: mpsc::UnboundedReceiver<Request>) {
        let mut shutdown_reply = None;
        loop {
            let sleep = self.conns.clock().sleep_until(self.next_wake());
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
                // The supervisor applies starts and events itself; a session asks for what
                // they changed.
                report = self.conns.next() => {
                    if let Report::Started { key, .. } | Report::Updated(key) = report {
                        *self.versions.entry(key).or_default() += 1;
                    }
                    self.settle_switches();
                    self.changed();
                }
                () = sleep => {
                    self.timeout();
                    self.changed();
                }
            }
        }
        self.conns.shutdown().await;
        if let Some(reply) = shutdown_reply {
            let _ = reply.send(());
        }
    }

    fn changed(&self) {
        self.changes.send_modify(|n| *n = n.wrapping_add(1));
    }

    fn handle(&mut self, request: Request) {
        if matches!(
            request,
            Request::Apply { .. }
                | Request::Reconnect { .. }
                | Request::Close { .. }
                | Request::Forgive { .. }
        ) {
            self.changed();
        }
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
            Request::View {
                session,
                want,
                reply,
            } => {
                let _ = reply.send(self.view(&session, &want));
            }
            Request::Reconnect {
                sessions,
                server,
                reply,
            } => {
                let done = self.reconnect(&sessions, server.as_deref());
                let _ = reply.send(done);
            }
            Request::Close { session, reply } => {
                self.close_session(&session);
                if let Some(reply) = reply {
                    let _ = reply.send(());
                }
            }
            Request::Forgive { session } => self.forgive(&session),
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
                Op::Acquire {
                    server,
                    id,
                    config,
                    launch,
                } => {
                    let (outcome, key) = self.acquire(session, &id, &config, now);
                    if let Some(key) = key.filter(|key| self.conns.get(key).is_none()) {
                        self.conns.start(key, server.clone(), (config, launch));
                    }
                    results.push((server, outcome));
                }
                Op::Replace {
                    server,
                    from,
                    id,
                    config,
                    launch,
                    stop_first,
                } => {
                    let outcome = if from == id && !stop_first {
                        // The same connection started afresh (dev mode: its sources changed).
                        self.renew(session, &server, &id, (config, launch))
                    } else {
                        self.replace(session, &server, &from, &id, (config, launch), stop_first)
                    };
                    results.push((server, outcome));
                }
                Op::Retry {
                    server,
                    id,
                    config,
                    launch,
                } => {
                    let outcome = self.retry(session, &server, &id, (config, launch));
                    results.push((server, outcome));
                }
            }
        }
        results
    }

    /// One acquire of `id` by `session`, through the kernel's gate; the key it holds now.
    fn acquire(
        &mut self,
        session: &str,
        id: &ConnectionId,
        config: &ServerConfig,
        now: Millis,
    ) -> (Acquire, Option<Key>) {
        let gating = self
            .sessions
            .get(session)
            .map(|s| s.gating.clone())
            .unwrap_or_default();
        // The gate: the kernel refuses a server the session's gating denies.
        let outcome = self.pool.acquire(session, id, config, &gating, now);
        let key = match &outcome {
            Acquire::Refused { .. } => None,
            Acquire::Unpooled { .. } => Some(Key::Private(session.to_owned(), id.clone())),
            Acquire::Spawn | Acquire::Attach { .. } => Some(Key::Shared(id.clone())),
        };
        if let Some(key) = &key {
            self.sessions
                .entry(session.to_owned())
                .or_default()
                .held
                .push(key.clone());
        }
        (outcome, key)
    }

    /// `server`'s connection id changed from `from` to `id` in `session`. Make before break,
    /// as the session host does ([`Supervisor::replace_from`]): a connection only this session
    /// holds keeps serving under the new key until the new process is up, then is retired
    /// (with the same fallback when the two cannot run side by side); one that other sessions
    /// hold too stays this session's until the new one is up or failed
    /// ([`Actor::settle_switches`]). With `stop_first` (`"stopBeforeRestart": true`) the old
    /// one is let go — and stopped, if nobody else holds it — before the new one starts.
    fn replace(
        &mut self,
        session: &str,
        server: &str,
        from: &ConnectionId,
        id: &ConnectionId,
        config: (ServerConfig, Option<Arc<Launch>>),
        stop_first: bool,
    ) -> Acquire {
        let now = self.now();
        let old = match self.held_key(session, from) {
            Some(old) if !stop_first => old,
            old => {
                if old.is_some() {
                    // Stopped now if nobody else holds it.
                    self.release(session, from, now);
                }
                let (outcome, key) = self.acquire(session, id, &config.0, now);
                if let Some(key) = key.filter(|key| self.conns.get(key).is_none()) {
                    self.conns.start(key, server.to_owned(), config);
                }
                return outcome;
            }
        };
        let (outcome, key) = self.acquire(session, id, &config.0, now);
        let Some(key) = key else {
            // No longer admitted: nothing replaces it.
            self.release(session, from, now);
            return outcome;
        };
        if self.conns.get(&key).is_some() {
            // Another session already runs the new one.
            self.switch(session, old, key);
        } else if self.exclusive(session, &old) {
            self.standbys.insert(key.clone(), session.to_owned());
            self.conns
                .replace_from(&old, key, server.to_owned(), config);
            // Its connection serves under the new key now: only the holds are let go.
            self.forget_hold(session, &old, now);
        } else {
            self.conns.start(key.clone(), server.to_owned(), config);
            self.switch(session, old, key);
        }
        outcome
    }

    /// The key through which `session` holds connection `id`, if it does.
    fn held_key(&self, session: &str, id: &ConnectionId) -> Option<Key> {
        let state = self.sessions.get(session)?;
        [
            Key::Private(session.to_owned(), id.clone()),
            Key::Shared(id.clone()),
        ]
        .into_iter()
        .find(|key| state.held.contains(key))
    }

    /// Whether `session`'s single hold is the only one on `key`.
    fn exclusive(&self, session: &str, key: &Key) -> bool {
        match key {
            Key::Private(..) => true,
            Key::Shared(id) => self.pool.refcount(id) == 1 && self.pool.holders(id).eq([session]),
        }
    }

    /// Drops `session`'s hold on `key` whose connection moved to another key.
    fn forget_hold(&mut self, session: &str, key: &Key, now: Millis) {
        if let Some(state) = self.sessions.get_mut(session) {
            if let Some(at) = state.held.iter().position(|k| k == key) {
                state.held.remove(at);
            }
        }
        match key {
            Key::Private(..) => self.conns.forget_spawns(key),
            Key::Shared(id) => {
                // Nothing runs under the old id any more: nothing to drain.
                self.pool.stop(session, id, now);
            }
        }
    }

    fn switch(&mut self, session: &str, old: Key, new: Key) {
        if let Some(state) = self.sessions.get_mut(session) {
            state.switching.push((old, new));
        }
        self.settle_switches();
    }

    /// Ends the switches whose new connection is up, failed or gone: the session lets go of
    /// the old one.
    fn settle_switches(&mut self) {
        let now = self.now();
        let conns = &self.conns;
        self.standbys.retain(|key, _| {
            conns
                .get(key)
                .is_some_and(|e| e.health().status == Status::Connecting)
        });
        let mut done = Vec::new();
        for (session, state) in &mut self.sessions {
            state.switching.retain(|(old, new)| {
                let starting = self
                    .conns
                    .get(new)
                    .is_some_and(|e| e.health().status == Status::Connecting);
                if !starting {
                    done.push((session.clone(), old.clone()));
                }
                starting
            });
        }
        for (session, old) in done {
            let (Key::Shared(id) | Key::Private(_, id)) = &old;
            self.release(&session, id, now);
        }
    }

    /// `session`'s plan let go of `id` (removed, excluded, rejected, blocked, or replaced by
    /// a changed entry): a connection nobody else holds is stopped now. Only a session that
    /// ends leaves its connections to the drain ([`Actor::close_session`]).
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
            if let Release::Closed = self.pool.stop(session, id, now) {
                tracing::debug!(%id, "no session holds it any more; stopping");
                self.close_key(&shared);
            }
        }
    }

    /// `session` ended: its private connections stop, and a shared one it held last drains
    /// (closed after the drain delay unless a session acquires it again — a client that
    /// restarts at once re-attaches).
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
        self.conns.remove(key);
        self.conns.forget_spawns(key);
        self.versions.remove(key);
    }

    /// Clears the failure and crash-loop state of every connection `session` holds, and
    /// restarts a failed one while a holder admits it.
    fn forgive(&mut self, session: &str) {
        let Some(state) = self.sessions.get(session) else {
            return;
        };
        let keys: HashSet<Key> = state.held.iter().cloned().collect();
        for key in keys {
            let failed = self
                .conns
                .get(&key)
                .is_some_and(|p| p.health().status == Status::Failed);
            self.conns.forgive(&key);
            if failed && self.admitted(&key) {
                self.restart_held(&key, RestartRequest::RetryDue);
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
                .is_some_and(|s| s.gating.denial(&pooled.name, &pooled.config.0).is_none())
        })
    }

    /// The next drain to end. Retries are not the pool's to time: each holder's engine plans
    /// them from what its lease mirrors ([`Op::Retry`]).
    fn next_wake(&self) -> Option<Millis> {
        self.pool.poll_timeout()
    }

    fn timeout(&mut self) {
        let now = self.now();
        for close in self.pool.handle_timeout(now) {
            tracing::debug!(id = %close.id, "drained; closing");
            self.close_key(&Key::Shared(close.id));
        }
    }

    /// Restarts what `sessions` hold for `server` (all: `None`) once each, if admitted; one
    /// another session holds too is refused while it is up or starting (see `Reconnected`): a
    /// restart would cut that session's calls, or its start.
    fn reconnect(&mut self, sessions: &[String], server: Option<&str>) -> super::Reconnected {
        let (mut seen, mut keys) = (HashSet::new(), Vec::new());
        for state in sessions.iter().filter_map(|s| self.sessions.get(s)) {
            for key in state.held.iter().filter(|key| seen.insert((*key).clone())) {
                keys.push((state.gating.clone(), key.clone()));
            }
        }
        let mut done = super::Reconnected::default();
        for (gating, key) in keys {
            let Some(pooled) = self.conns.get(&key) else {
                continue;
            };
            if server.is_some_and(|s| s != pooled.name) {
                continue;
            }
            // The gate: the session must still admit it.
            if gating.denial(&pooled.name, &pooled.config.0).is_some() {
                continue;
            }
            let others: HashSet<String> = self
                .holders(&key)
                .into_iter()
                .filter(|holder| !sessions.contains(holder))
                .collect();
            let serving = matches!(
                pooled.health().status,
                Status::Connected | Status::Connecting
            );
            if !others.is_empty() && serving {
                done.refused.push((pooled.name.clone(), others.len()));
                continue;
            }
            done.restarted.push(pooled.name.clone());
            self.restart_held(&key, RestartRequest::ManualReconnect);
        }
        done
    }
}
