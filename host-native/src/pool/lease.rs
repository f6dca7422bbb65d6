//! [`Lease`]: a session's holds on the [`SharedPool`] — the [`Backend`] of a daemon session.
//!
//! The session's engine ([`Host`](crate::host::Host)) plans in pool mode and executes its plan
//! here as it would on its own supervisor: a start is an acquire (or, for a changed server, a
//! replace: make before break in the pool), a stop a release, a retry a retry of the held
//! connection. The pool runs, shares and drains the processes and reports each connection's
//! supervision; the engine plans the retries from it, as on its own supervisor. What the
//! session holds is mirrored here, refreshed whenever the
//! pool says something changed, so the engine reads it without waiting (catalog, routes,
//! status) and hears the ends of its starts and the changes of its connections as
//! [`Report`]s, exactly as from its own supervisor.

use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use futures::future::BoxFuture;
use futures::stream::{FuturesUnordered, StreamExt};
use futures::FutureExt;
use mcp_reconcile_kernel::identity::{connection_id, ConnectionId};
use mcp_reconcile_kernel::plan::{Online, OnlineEntry, Status};
use mcp_reconcile_kernel::pool::Acquire;
use mcp_reconcile_kernel::share::{effective_share, ShareSettings};
use mcp_reconcile_kernel::{Gating, Millis, ServerConfig, Servers};
use tokio::sync::watch;

use super::actor::{Op, Request};
use super::SharedPool;
use crate::clock::Clock;
use crate::host::{Backend, Held, Host, HostOptions, Restart};
use crate::inputs::Inputs;
use crate::launch::{share, Launch, PathIdentities, Share};
use crate::supervisor::Report;
use mcp_reconcile_kernel::plan::Mode;

mod mirrored;

use mirrored::Mirrored;

/// A start the pool has not finished yet.
struct Pending {
    generation: u64,
    began: Instant,
    id: ConnectionId,
}

/// The next [`Lease`]'s mark (see `Lease::mark`).
static NEXT_MARK: AtomicU64 = AtomicU64::new(1);

/// A start's acquire as the pool answered it (`None`: the pool is gone).
type Answer = (String, u64, Option<Acquire>);

/// A session's holds on the pool. See the module docs.
pub struct Lease {
    name: String,
    pool: SharedPool,
    clock: Clock,
    launch: Option<Arc<Launch>>,
    gating: Gating,
    /// `mcp.share` of the session's settings: the scope of the next starts.
    share: ShareSettings,
    /// This lease's mark in the pool keys of its `session`-scoped servers: unique in this
    /// process, so no later session of the same name can take over such a process.
    mark: String,
    /// `PATH`'s identity for the pool keys of one pass's starts (read once, not per server).
    paths: PathIdentities,
    /// Server → the pool id it holds, the session's own config for it and its scope.
    acquired: BTreeMap<String, (ConnectionId, ServerConfig, Option<Share>)>,
    /// Servers stopped to be started again (`"stopBeforeRestart": true`): their next start lets
    /// go of the old process first.
    restarting: HashSet<String>,
    /// Failed servers stopped to be started again: their next start is a retry of the held
    /// connection ([`Op::Retry`]), which keeps its failure count.
    retrying: HashSet<String>,
    mirror: HashMap<String, Mirrored>,
    /// Servers whose mirror entry this side changed or dropped (a stop, a refusal, a
    /// forgiveness): the next refresh asks for them in full, not only if the pool changed them.
    resend: HashSet<String>,
    pending: HashMap<String, Pending>,
    next_generation: u64,
    answers: FuturesUnordered<BoxFuture<'static, Answer>>,
    changes: watch::Receiver<u64>,
    /// The pool changed since the mirror was refreshed.
    stale: bool,
    reports: VecDeque<Report<String>>,
    closed: bool,
}

impl Lease {
    /// A lease named `name` (unique among the pool's live sessions) whose stdio servers start
    /// in `launch`'s directory and environment, or this process's.
    pub fn new(
        pool: &SharedPool,
        name: String,
        launch: Option<Arc<Launch>>,
        clock: Clock,
    ) -> Lease {
        Lease {
            name: name.clone(),
            pool: pool.clone(),
            clock,
            launch,
            gating: Gating::default(),
            share: ShareSettings::default(),
            mark: format!("{name}#{}", NEXT_MARK.fetch_add(1, Ordering::Relaxed)),
            paths: PathIdentities::default(),
            acquired: BTreeMap::new(),
            restarting: HashSet::new(),
            retrying: HashSet::new(),
            mirror: HashMap::new(),
            resend: HashSet::new(),
            pending: HashMap::new(),
            next_generation: 1,
            answers: FuturesUnordered::new(),
            changes: pool.changes(),
            stale: true,
            reports: VecDeque::new(),
            closed: false,
        }
    }

    /// The session's name in the pool.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Where a server's connection runs in the pool for its sharing scope ([`share::place`]):
    /// its key — its connection id, with a launch context also covering the directory and
    /// environment ([`Launch::shared_id`]), with scope `session` this session's own — and the
    /// launch context its process starts with.
    fn place(
        &mut self,
        name: &str,
        to: Option<&ConnectionId>,
        config: &ServerConfig,
        share: Option<Share>,
    ) -> share::Placement {
        let id = match to {
            Some(id) => id.clone(),
            None => connection_id(name, config)
                .unwrap_or_else(|_| mcp_reconcile_kernel::identity::connection_id_of(name, "")),
        };
        share::place(
            self.launch.as_ref(),
            &id,
            config,
            share,
            &self.mark,
            &mut self.paths,
        )
    }

    /// The mirrored connections the session holds and waits for no start of.
    fn settled(&self) -> impl Iterator<Item = &Mirrored> {
        self.mirror
            .iter()
            .filter(|(name, _)| {
                self.acquired.contains_key(*name) && !self.pending.contains_key(*name)
            })
            .map(|(_, mirrored)| mirrored)
    }

    /// The session ends: its `session`-scoped processes close at once instead of draining —
    /// their key is this lease's own, so no other session could ever take them over.
    fn release_own(&mut self) {
        let own: Vec<String> = self
            .acquired
            .iter()
            .filter(|(_, (_, _, share))| *share == Some(Share::Session))
            .map(|(name, _)| name.clone())
            .collect();
        for name in own {
            if let Some((id, _, _)) = self.acquired.remove(&name) {
                self.send(Op::Release { id }, None);
            }
        }
    }

    /// Sends `op` to the pool; the acquire's answer comes back through [`Lease::next`].
    fn send(&mut self, op: Op, answer: Option<(String, u64)>) {
        let (reply, rx) = tokio::sync::oneshot::channel();
        let request = Request::Apply {
            session: self.name.clone(),
            gating: self.gating.clone(),
            ops: vec![op],
            reply,
        };
        if self.pool.tx.send(request).is_err() {
            if let Some((server, generation)) = answer {
                self.answers
                    .push(async move { (server, generation, None) }.boxed());
            }
            return;
        }
        if let Some((server, generation)) = answer {
            self.answers.push(
                rx.map(move |outcome| {
                    let acquire = outcome
                        .ok()
                        .and_then(|r| r.into_iter().next())
                        .map(|(_, a)| a);
                    (server, generation, acquire)
                })
                .boxed(),
            );
        }
    }

    /// The pool answered a start's acquire: a refusal (the gate) ends the start.
    fn answered(&mut self, (server, generation, acquire): Answer) {
        let error = match acquire {
            Some(Acquire::Refused { reason }) => format!("not admitted: {}", reason.as_str()),
            Some(_) => return,
            None => crate::pool::PoolGone.to_string(),
        };
        if self
            .pending
            .get(&server)
            .is_none_or(|p| p.generation != generation)
        {
            return;
        }
        let Some(pending) = self.pending.remove(&server) else {
            return;
        };
        self.acquired.remove(&server);
        self.mirror.remove(&server);
        self.resend.insert(server.clone());
        self.reports.push_back(Report::Started {
            key: server,
            generation,
            elapsed: pending.began.elapsed(),
            current: true,
            error: Some(error),
        });
    }

    /// Reads what changed of what the session holds from the pool — by difference: the pool
    /// sends the connections that changed since the last refresh (and in full the starts still
    /// waited for and the entries changed on this side), so one edit among 200 servers costs
    /// one entry — and reports the starts that ended and the connections that changed.
    async fn refresh(&mut self) {
        let session = self.name.clone();
        let mut want = std::mem::take(&mut self.resend);
        want.extend(self.pending.keys().cloned());
        let Ok(view) = self
            .pool
            .ask(|reply| Request::View {
                session,
                want,
                reply,
            })
            .await
        else {
            self.stale = false;
            return;
        };
        self.stale = false;
        // Held connections the pool no longer shows (closed meanwhile).
        for server in view.gone {
            if self.mirror.remove(&server).is_some()
                && self.acquired.contains_key(&server)
                && !self.pending.contains_key(&server)
            {
                self.reports.push_back(Report::Updated(server));
            }
        }
        for held in view.changed {
            let (server, now) = Mirrored::from_pool(held);
            if !self.acquired.contains_key(&server) {
                self.mirror.remove(&server);
                continue;
            }
            let ended = self
                .pending
                .get(&server)
                .is_some_and(|p| p.id == now.id && now.health.status != Status::Connecting);
            if ended {
                if let Some(pending) = self.pending.remove(&server) {
                    let error = (now.health.status == Status::Failed).then(|| {
                        now.health
                            .last_error
                            .clone()
                            .unwrap_or_else(|| "the server failed to start".to_owned())
                    });
                    self.reports.push_back(Report::Started {
                        key: server.clone(),
                        generation: pending.generation,
                        elapsed: pending.began.elapsed(),
                        current: true,
                        error,
                    });
                }
            } else if !self.pending.contains_key(&server)
                && self
                    .mirror
                    .get(&server)
                    .is_none_or(|was| !was.same_as(&now))
            {
                self.reports.push_back(Report::Updated(server.clone()));
            }
            self.mirror.insert(server, now);
        }
    }
}

impl Backend for Lease {
    fn clock(&self) -> &Clock {
        &self.clock
    }

    fn admit(&mut self, desired: &Servers, gating: &Gating, share: &ShareSettings) {
        self.gating = gating.clone();
        self.share = *share;
        // A new pass reads `PATH`'s directories again.
        self.paths = PathIdentities::default();
        for (name, (_, config, _)) in &mut self.acquired {
            if let Some(wanted) = desired.get(name) {
                config.clone_from(wanted);
            }
        }
    }

    fn start(
        &mut self,
        name: &str,
        config: &ServerConfig,
        to: Option<&ConnectionId>,
        replace: bool,
    ) -> u64 {
        let generation = self.next_generation;
        self.next_generation += 1;
        let share = effective_share(config, &self.share);
        let share::Placement { id, launch } = self.place(name, to, config, share);
        // The engine decides make before break (`stopBeforeRestart` opts out): it stops a
        // server before it starts it again exactly when the old process must go first.
        let stop_first = self.restarting.remove(name);
        let retry = self.retrying.remove(name);
        let op = match self.acquired.get(name) {
            Some((from, _, _)) if retry && *from == id => Op::Retry {
                server: name.to_owned(),
                id: id.clone(),
                config: config.clone(),
                launch,
            },
            Some((from, _, _)) if replace || stop_first => Op::Replace {
                server: name.to_owned(),
                from: from.clone(),
                id: id.clone(),
                config: config.clone(),
                launch,
                stop_first,
            },
            _ => Op::Acquire {
                server: name.to_owned(),
                id: id.clone(),
                config: config.clone(),
                launch,
            },
        };
        self.acquired
            .insert(name.to_owned(), (id.clone(), config.clone(), share));
        self.pending.insert(
            name.to_owned(),
            Pending {
                generation,
                began: Instant::now(),
                id,
            },
        );
        self.send(op, Some((name.to_owned(), generation)));
        generation
    }

    fn stop(&mut self, name: &str, forget: bool) {
        let failed = self
            .mirror
            .remove(name)
            .is_some_and(|m| m.health.status == Status::Failed);
        self.resend.insert(name.to_owned());
        self.pending.remove(name);
        self.retrying.remove(name);
        if failed && !forget {
            // A retry: the pool starts the held connection again, failures kept.
            self.retrying.insert(name.to_owned());
        }
        if !forget {
            // Started again right after: the start lets go of the old process first.
            self.restarting.insert(name.to_owned());
            return;
        }
        if let Some((id, _, _)) = self.acquired.remove(name) {
            self.send(Op::Release { id }, None);
        }
    }

    /// The pool forgives what the session holds (and restarts the failed ones it admits, for
    /// every holder); until the mirror is refreshed they show as failed and forgiven, so this
    /// session's plan retries them as it would its own.
    fn forgive_all(&mut self) {
        let _ = self.pool.tx.send(Request::Forgive {
            session: self.name.clone(),
        });
        for (server, mirrored) in &mut self.mirror {
            if mirrored.health.status == Status::Failed {
                mirrored.health.forgive();
                self.resend.insert(server.clone());
            }
        }
    }

    /// The pool forgives a connection when it starts it afresh for the session
    /// (`Actor::renew`, a stop-first replace): a failed one is then not retried with its
    /// failures kept (`Op::Retry`) but started afresh.
    fn forgive(&mut self, name: &str) {
        if let Some(mirrored) = self.mirror.get_mut(name) {
            mirrored.health.forgive();
            if mirrored.health.status == Status::Failed {
                mirrored.health.status = Status::Disconnected;
            }
            self.resend.insert(name.to_owned());
        }
    }

    async fn next(&mut self) -> Report<String> {
        loop {
            if let Some(report) = self.reports.pop_front() {
                return report;
            }
            if self.stale {
                self.refresh().await;
                continue;
            }
            tokio::select! {
                Some(answer) = self.answers.next(), if !self.answers.is_empty() => {
                    self.answered(answer);
                }
                changed = self.changes.changed() => match changed {
                    Ok(()) => self.stale = true,
                    Err(_) => std::future::pending::<()>().await,
                },
            }
        }
    }

    /// When the earliest failed connection the session holds is due: the pool reports each
    /// connection's supervision, the session's engine plans its retries.
    fn next_retry(&self) -> Option<Millis> {
        self.settled().filter_map(|m| m.health.retry_due()).min()
    }

    fn retry_due(&self) -> bool {
        let now = self.clock.now();
        self.settled().any(|m| m.health.is_due(now))
    }

    fn held(&self, name: &str) -> Option<Held<'_>> {
        let (_, config, share) = self.acquired.get(name)?;
        let mirrored = self.mirror.get(name)?;
        Some(Held {
            config,
            catalog: &mirrored.catalog,
            health: &mirrored.health,
            caller: mirrored.caller.clone(),
            pid: mirrored.pid,
            spawns: mirrored.spawns,
            share: *share,
            sessions: Some(mirrored.holders),
        })
    }

    /// What the session holds, as the pool last reported its supervision (a start still
    /// waited for is there, connected as far as the plan goes).
    fn online(&self) -> Online {
        let mut online = Online::new();
        for (name, (_, config, _)) in &self.acquired {
            let mirrored = self
                .mirror
                .get(name)
                .filter(|_| !self.pending.contains_key(name));
            let entry = match mirrored {
                Some(m) => OnlineEntry {
                    config: config.clone(),
                    status: m.health.status,
                    attempts: m.health.attempts,
                    retry_at: m.health.retry_at,
                    crash_loop: m.health.crash_loop,
                    needs_auth: m.health.needs_auth,
                },
                None => OnlineEntry::connected(config.clone()),
            };
            online.insert(name.clone(), entry);
        }
        online
    }

    fn reconnect(&mut self, server: Option<&str>, _names: &[String], also: &[String]) -> Restart {
        let mut sessions = vec![self.name.clone()];
        sessions.extend(also.iter().filter(|s| **s != self.name).cloned());
        let server = server.map(str::to_owned);
        let pool = self.pool.clone();
        Restart::Elsewhere(
            async move {
                let done = pool
                    .ask(|reply| Request::Reconnect {
                        sessions,
                        server,
                        reply,
                    })
                    .await
                    .map_err(|gone| gone.to_string())?;
                match done.refusal() {
                    Some(refusal) if done.restarted.is_empty() => Err(refusal),
                    _ => Ok(done.restarted),
                }
            }
            .boxed(),
        )
    }

    async fn shutdown(mut self) {
        self.closed = true;
        self.release_own();
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

impl Drop for Lease {
    fn drop(&mut self) {
        if !self.closed {
            self.release_own();
            let _ = self.pool.tx.send(Request::Close {
                session: self.name.clone(),
                reply: None,
            });
        }
    }
}

impl Host<Lease> {
    /// A host over `inputs` whose MCP connections are its holds on `pool`, as session `name`
    /// (unique among the pool's live sessions): what a daemon session runs, for a Rust host
    /// that shares one pool between several sessions. Plans in pool mode whatever
    /// `options.mode` says, and reads the pool's clock whatever `options.clock` says: the
    /// supervision of its connections is the pool's, so their retry times are on that clock.
    pub fn in_pool(inputs: Inputs, options: HostOptions, pool: &SharedPool, name: &str) -> Self {
        Host::in_pool_launched(inputs, options, pool, name, None)
    }

    /// [`Host::in_pool`] whose servers — MCP and language servers — start in `launch`'s
    /// directory and environment (a daemon session's) instead of this process's.
    pub(crate) fn in_pool_launched(
        inputs: Inputs,
        options: HostOptions,
        pool: &SharedPool,
        name: &str,
        launch: Option<Arc<Launch>>,
    ) -> Self {
        let options = HostOptions {
            mode: Mode::Pool,
            clock: pool.clock.clone(),
            ..options
        };
        let lease = Lease::new(pool, name.to_owned(), launch.clone(), options.clock.clone());
        Host::with_backend(inputs, options, lease, launch)
    }
}
