//! One connection supervisor for every host: the session host ([`crate::host`]) and the shared
//! pool ([`crate::pool`]) both keep their connections here.
//!
//! A [`Supervisor`] is generic over the **key** a connection is known by (the server name in a
//! session; the pool's shared id or (session, id)) and the **kind** of connection
//! ([`ConnectionKind`]: MCP connections ([`Mcp`]), the pool's `Pooled` in a session's launch
//! context, language servers (`crate::lsp::kind::Lsp`, on the session's second supervisor)).
//! It owns
//! * the start tasks (a [`JoinSet`]; every one at once unless a `parallelism` bound is set),
//! * generations: every start gets a new one; a start or event of an older generation is
//!   ignored, and a connection that comes up superseded is closed,
//! * the connections' own events (catalog changed, closed),
//! * the kernel's per-key [`Supervision`] (backoff, crash loop, healthy reset) and when the next
//!   retry is due,
//! * spawn counts,
//! * make before break: [`Supervisor::replace`] (and [`Supervisor::replace_from`] for the pool,
//!   whose key moves with the connection id) keeps the running connection as a standby until
//!   its replacement is up, then retires it ([`ConnectionKind::retire`] lets the calls in
//!   flight on it finish, bounded),
//! * stopping: connections close in the background, and [`Supervisor::shutdown`] awaits them.
//!
//! It decides nothing about *what* should run: the layer above (the session host's plans, the
//! pool's holders) calls [`Supervisor::start`], [`Supervisor::restart`],
//! [`Supervisor::disconnect`] and [`Supervisor::remove`], and reacts to the [`Report`]s of
//! [`Supervisor::next`].

use std::collections::{BTreeMap, HashMap};
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::BoxFuture;
use mcp_reconcile_kernel::plan::Status;
use mcp_reconcile_kernel::supervise::{seed_for, Supervision, View};
use mcp_reconcile_kernel::Millis;

use crate::clock::Clock;
use tokio::sync::{mpsc, Semaphore};
use tokio::task::JoinSet;

mod mcp;
#[cfg(test)]
mod tests;
pub(crate) use mcp::{Mcp, McpKind};

/// What a live connection reports on its own.
pub(crate) enum Event<Catalog> {
    /// It re-listed what it offers.
    CatalogChanged(Catalog),
    /// It ended by itself, with the (redacted) error.
    Closed(String),
}

/// Why a start failed.
pub(crate) struct StartError {
    /// The redacted message.
    pub(crate) message: String,
    /// The transport can never work here (the crash loop begins at once).
    pub(crate) unsupported: bool,
    /// The server wants an authorization the host does not have (`needs_auth`: parked, no
    /// retry timer).
    pub(crate) needs_auth: bool,
}

/// A kind of supervised connection: how one starts, stops and reports.
pub(crate) trait ConnectionKind: Send + 'static {
    /// What a start is made from.
    type Config: Clone + Send + 'static;
    /// A live connection.
    type Connection: Send + 'static;
    /// What a live connection offers.
    type Catalog: Clone + Default + Send + 'static;
    /// What a live connection sends about itself (see [`ConnectionKind::event`]).
    type Event: Send + 'static;

    /// A future that starts `name` from `config`; the connection sends its events, tagged with
    /// `generation`, to `events`.
    fn start(
        &self,
        name: &str,
        config: &Self::Config,
        generation: u64,
        events: mpsc::UnboundedSender<Self::Event>,
    ) -> BoxFuture<'static, Result<Self::Connection, StartError>>;

    /// Stops a connection (and its process); never hangs.
    fn stop(connection: Self::Connection) -> BoxFuture<'static, ()>;

    /// Stops a connection that was replaced (make before break): like [`ConnectionKind::stop`],
    /// after letting the requests routed to it during the switch finish, within a bound.
    fn retire(connection: Self::Connection) -> BoxFuture<'static, ()> {
        Self::stop(connection)
    }

    /// What the connection offered when it came up.
    fn catalog(connection: &Self::Connection) -> Self::Catalog;

    /// The process id of a local server.
    fn pid(connection: &Self::Connection) -> Option<u32>;

    /// Whether starting `config` spawns a process (counted in the spawn counts).
    fn spawns_process(config: &Self::Config) -> bool;

    /// The generation an event is tagged with, and what it says.
    fn event(event: Self::Event) -> (u64, Event<Self::Catalog>);
}

/// One supervised connection.
pub(crate) struct Entry<C: ConnectionKind> {
    /// The name it runs under (the server name).
    pub(crate) name: String,
    /// What it was started from.
    pub(crate) config: C::Config,
    /// What it offers (empty unless connected).
    pub(crate) catalog: C::Catalog,
    health: Supervision,
    generation: u64,
    connection: Option<C::Connection>,
    /// While a replacement starts (make before break): the connection it replaces, still
    /// serving — its catalog stays the entry's until the new one is up.
    standby: Option<C::Connection>,
}

impl<C: ConnectionKind> Entry<C> {
    /// Its supervision state.
    pub(crate) fn health(&self) -> &Supervision {
        &self.health
    }

    /// The connection when the entry is connected, or the one still serving while its
    /// replacement starts.
    pub(crate) fn live(&self) -> Option<&C::Connection> {
        self.connection
            .as_ref()
            .filter(|_| self.health.status == Status::Connected)
            .or(self.standby.as_ref())
    }

    /// The process id of a live local server.
    pub(crate) fn pid(&self) -> Option<u32> {
        self.connection
            .as_ref()
            .or(self.standby.as_ref())
            .and_then(C::pid)
    }
}

/// What [`Supervisor::next`] saw.
pub enum Report<K> {
    /// A start ended (its entry's health already says how).
    Started {
        /// Its key.
        key: K,
        /// Its generation (as [`Supervisor::start`] returned it).
        generation: u64,
        /// Since the start got its turn.
        elapsed: Duration,
        /// The start is still the entry's current one (not superseded or removed).
        current: bool,
        /// Why a current start failed.
        error: Option<String>,
    },
    /// A connection's catalog changed or it closed (its entry already says so).
    Updated(K),
    /// An event of a superseded connection; nothing changed.
    Stale,
}

/// A start task's result.
struct Done<K, C: ConnectionKind> {
    key: K,
    generation: u64,
    started: Instant,
    result: Result<C::Connection, StartError>,
}

/// The connections of one host, by key. See the module docs.
pub(crate) struct Supervisor<K, C: ConnectionKind> {
    kind: C,
    clock: Clock,
    entries: BTreeMap<K, Entry<C>>,
    generations: HashMap<u64, K>,
    next_generation: u64,
    spawns: HashMap<K, u64>,
    starts: JoinSet<Done<K, C>>,
    events_tx: mpsc::UnboundedSender<C::Event>,
    events_rx: mpsc::UnboundedReceiver<C::Event>,
    /// At most `parallelism` starts at once; `None`: no bound (the default).
    limiter: Option<Arc<Semaphore>>,
    closing: JoinSet<()>,
}

impl<K, C> Supervisor<K, C>
where
    K: Clone + Ord + std::hash::Hash + Send + 'static,
    C: ConnectionKind,
{
    /// A supervisor starting at most `parallelism` connections at once (every one at once when
    /// it is at least [`Semaphore::MAX_PERMITS`], as [`DEFAULT_PARALLELISM`](crate::host::DEFAULT_PARALLELISM)
    /// is), its supervision time read from `clock`.
    pub(crate) fn new(kind: C, parallelism: usize, clock: Clock) -> Self {
        let (events_tx, events_rx) = mpsc::unbounded_channel();
        Supervisor {
            kind,
            clock,
            entries: BTreeMap::new(),
            generations: HashMap::new(),
            next_generation: 1,
            spawns: HashMap::new(),
            starts: JoinSet::new(),
            events_tx,
            events_rx,
            limiter: (parallelism < Semaphore::MAX_PERMITS)
                .then(|| Arc::new(Semaphore::new(parallelism.max(1)))),
            closing: JoinSet::new(),
        }
    }

    /// The clock supervision runs on.
    pub(crate) fn clock(&self) -> &Clock {
        &self.clock
    }

    /// The entry of `key`.
    pub(crate) fn get(&self, key: &K) -> Option<&Entry<C>> {
        self.entries.get(key)
    }

    /// Every entry, in key order.
    pub(crate) fn entries(&self) -> impl Iterator<Item = (&K, &Entry<C>)> + '_ {
        self.entries.iter()
    }

    /// How many times `key`'s process was started.
    pub(crate) fn spawns(&self, key: &K) -> u64 {
        self.spawns.get(key).copied().unwrap_or(0)
    }

    /// Forgets `key`'s spawn count (its next start counts from zero).
    pub(crate) fn forget_spawns(&mut self, key: &K) {
        self.spawns.remove(key);
    }

    /// Starts `key` as `name` from `config`: a new generation whose start forgets the last
    /// error but keeps the failure count and crash-loop state of an earlier entry. A
    /// connection of the entry is closed. Returns the generation.
    pub(crate) fn start(&mut self, key: K, name: String, config: C::Config) -> u64 {
        let (attempts, crash_loop) = self
            .entries
            .get(&key)
            .map_or((0, false), |e| (e.health.attempts, e.health.crash_loop));
        self.remove(&key);
        self.entries.insert(
            key.clone(),
            Entry {
                name,
                config,
                catalog: C::Catalog::default(),
                health: Supervision::connecting(attempts, crash_loop),
                generation: 0,
                connection: None,
                standby: None,
            },
        );
        self.launch(&key).unwrap_or_default()
    }

    /// Starts `key` as `name` from `config` **before** stopping what runs (make before
    /// break): the connected entry's connection keeps serving — calls are routed to it and its
    /// catalog stays offered — until the new one is up; then it is stopped. If the new one
    /// fails to start while the old runs (a port or lock both want), the old one is stopped
    /// and the new one started once more. Without a connected entry this is
    /// [`Supervisor::start`]. Returns the generation.
    pub(crate) fn replace(&mut self, key: K, name: String, config: C::Config) -> u64 {
        self.replace_from(&key.clone(), key, name, config)
    }

    /// [`Supervisor::replace`] where the running connection is known by another key (the pool
    /// keys connections by connection id, which the change moved): `old`'s connected
    /// connection serves under `key` until the new one is up, and `old`'s entry is dropped.
    pub(crate) fn replace_from(&mut self, old: &K, key: K, name: String, config: C::Config) -> u64 {
        let serving = self.entries.get_mut(old).and_then(|entry| {
            if entry.health.status != Status::Connected {
                return None;
            }
            let connection = entry.connection.take()?;
            Some((connection, std::mem::take(&mut entry.catalog)))
        });
        if old != &key {
            self.remove(old);
        }
        let generation = self.start(key.clone(), name, config);
        if let (Some((connection, catalog)), Some(entry)) = (serving, self.entries.get_mut(&key)) {
            entry.catalog = catalog;
            entry.standby = Some(connection);
        }
        generation
    }

    /// Starts `key` again with its config, keeping its supervision state (a retry); closes its
    /// connection first. Returns the generation, or `None` without an entry.
    pub(crate) fn restart(&mut self, key: &K) -> Option<u64> {
        let entry = self.entries.get_mut(key)?;
        entry.health.restart();
        self.launch(key)
    }

    /// A new generation for `key`'s entry and its start task.
    fn launch(&mut self, key: &K) -> Option<u64> {
        let generation = self.next_generation;
        let entry = self.entries.get_mut(key)?;
        self.next_generation += 1;
        if let Some(connection) = entry.connection.take() {
            self.closing.spawn(C::stop(connection));
        }
        self.generations.remove(&entry.generation);
        entry.generation = generation;
        entry.catalog = C::Catalog::default();
        if C::spawns_process(&entry.config) {
            *self.spawns.entry(key.clone()).or_insert(0) += 1;
        }
        self.generations.insert(generation, key.clone());
        let start = self.kind.start(
            &entry.name,
            &entry.config,
            generation,
            self.events_tx.clone(),
        );
        let limiter = self.limiter.clone();
        let key = key.clone();
        self.starts.spawn(async move {
            let _permit = match limiter {
                Some(limiter) => limiter.acquire_owned().await.ok(),
                None => None,
            };
            let started = Instant::now();
            let result = start.await;
            Done {
                key,
                generation,
                started,
                result,
            }
        });
        Some(generation)
    }

    /// Stops `key`'s connection in the background and empties its catalog, keeping its entry
    /// and failure counters (it is about to be restarted).
    pub(crate) fn disconnect(&mut self, key: &K) {
        if let Some(entry) = self.entries.get_mut(key) {
            entry.catalog = C::Catalog::default();
            for connection in entry
                .connection
                .take()
                .into_iter()
                .chain(entry.standby.take())
            {
                self.closing.spawn(C::stop(connection));
            }
        }
    }

    /// Drops `key`'s entry and stops its connection in the background; a start still under
    /// way is ignored when it ends (and its connection closed).
    pub(crate) fn remove(&mut self, key: &K) {
        if let Some(entry) = self.entries.remove(key) {
            self.generations.remove(&entry.generation);
            for connection in entry.connection.into_iter().chain(entry.standby) {
                self.closing.spawn(C::stop(connection));
            }
        }
    }

    /// Replaces the config `key` runs with, without restarting it (the change is applied to
    /// the live connection by the caller, e.g. a language server's pushed settings).
    pub(crate) fn set_config(&mut self, key: &K, config: C::Config) {
        if let Some(entry) = self.entries.get_mut(key) {
            entry.config = config;
        }
    }

    /// Clears `key`'s failure and crash-loop state.
    pub(crate) fn forgive(&mut self, key: &K) {
        if let Some(entry) = self.entries.get_mut(key) {
            entry.health.forgive();
        }
    }

    /// Clears every entry's failure and crash-loop state.
    pub(crate) fn forgive_all(&mut self) {
        for entry in self.entries.values_mut() {
            entry.health.forgive();
        }
    }

    /// `key` is not retried on a timer (nobody who may run it wants it).
    pub(crate) fn park(&mut self, key: &K) {
        if let Some(entry) = self.entries.get_mut(key) {
            entry.health.park();
        }
    }

    /// When the next retry is due.
    pub(crate) fn next_retry(&self) -> Option<Millis> {
        self.entries
            .values()
            .filter_map(|e| e.health.retry_due())
            .min()
    }

    /// The failed entries whose retry is due now, in key order.
    pub(crate) fn due(&self) -> Vec<K> {
        let now = self.clock.now();
        self.entries
            .iter()
            .filter(|(_, e)| e.health.is_due(now))
            .map(|(key, _)| key.clone())
            .collect()
    }

    /// How `key` shows now.
    pub(crate) fn view(&self, key: &K) -> Option<View> {
        Some(self.entries.get(key)?.health.view(self.clock.now()))
    }

    /// Waits for the next start to end or connection event, applies it to its entry and says
    /// what happened. Cancel-safe (for `select!`); pending forever while nothing can happen.
    pub(crate) async fn next(&mut self) -> Report<K> {
        loop {
            tokio::select! {
                biased;
                Some(done) = self.starts.join_next(), if !self.starts.is_empty() => {
                    // A start task that panicked has nothing to report.
                    if let Ok(done) = done {
                        return self.start_done(done);
                    }
                }
                Some(event) = self.events_rx.recv() => return self.event(event),
                Some(_) = self.closing.join_next(), if !self.closing.is_empty() => {}
            }
        }
    }

    fn start_done(&mut self, done: Done<K, C>) -> Report<K> {
        let elapsed = done.started.elapsed();
        let now = self.clock.now();
        let entry = self
            .entries
            .get_mut(&done.key)
            .filter(|e| e.generation == done.generation);
        let mut error = None;
        let mut relaunch = false;
        let current = entry.is_some();
        match (entry, done.result) {
            (None, Ok(connection)) => {
                // Superseded while connecting (removed or started again).
                self.closing.spawn(C::stop(connection));
            }
            (None, Err(_)) => {}
            (Some(entry), Ok(connection)) => {
                if let Some(old) = entry.standby.take() {
                    // Calls routed to it during the switch still get their answers.
                    self.closing.spawn(C::retire(old));
                }
                entry.catalog = C::catalog(&connection);
                entry.connection = Some(connection);
                entry.health.connected(now);
            }
            (Some(entry), Err(e)) if entry.standby.is_some() && !e.unsupported => {
                // It may not run beside the old process: stop that one, start again.
                if let Some(old) = entry.standby.take() {
                    self.closing.spawn(C::stop(old));
                }
                entry.catalog = C::Catalog::default();
                let message = format!(
                    "{}; it could not start beside the running one, so that was stopped and it \
                     is started again",
                    e.message
                );
                // Shown in the status while the new start runs.
                entry.health.last_error = Some(message.clone());
                error = Some(message);
                relaunch = true;
            }
            (Some(entry), Err(e)) => {
                if let Some(old) = entry.standby.take() {
                    self.closing.spawn(C::stop(old));
                }
                entry.catalog = C::Catalog::default();
                let seed = seed_for(&entry.name);
                if e.needs_auth {
                    entry.health.needs_auth(e.message.clone());
                } else {
                    entry
                        .health
                        .fail(seed, e.message.clone(), now, e.unsupported);
                }
                error = Some(e.message);
            }
        }
        if relaunch {
            self.launch(&done.key);
        }
        Report::Started {
            key: done.key,
            generation: done.generation,
            elapsed,
            current,
            error,
        }
    }

    fn event(&mut self, event: C::Event) -> Report<K> {
        let now = self.clock.now();
        let (generation, event) = C::event(event);
        let Some(key) = self.generations.get(&generation).cloned() else {
            return Report::Stale;
        };
        let Some(entry) = self
            .entries
            .get_mut(&key)
            .filter(|e| e.generation == generation)
        else {
            return Report::Stale;
        };
        match event {
            Event::CatalogChanged(catalog) => entry.catalog = catalog,
            Event::Closed(error) => {
                if let Some(connection) = entry.connection.take() {
                    self.closing.spawn(C::stop(connection));
                }
                entry.catalog = C::Catalog::default();
                let seed = seed_for(&entry.name);
                entry.health.closed(seed, error, now);
            }
        }
        Report::Updated(key)
    }

    /// Stops everything: starts under way are cancelled (a half-started process is stopped
    /// with its group when its start is dropped), every connection is closed; returns when
    /// all are stopped.
    pub(crate) async fn shutdown(mut self) {
        let keys: Vec<K> = self.entries.keys().cloned().collect();
        for key in keys {
            self.remove(&key);
        }
        self.starts.shutdown().await;
        while self.closing.join_next().await.is_some() {}
    }
}
