//! A connection pool shared by several sessions (SPEC §6, pool mode), as a
//! pure state machine: inputs are data, outputs are data, time is passed in.
//!
//! Sessions key pooled connections by [`ConnectionId`]. A connection lives
//! while any session holds it. When the last holder's session *ends*, it is
//! closed a drain delay later, so a client that restarts at once re-attaches
//! instead of respawning the server ([`Pool::release`]); when the last holder
//! *stops* it — its plan no longer runs it: removed, excluded, rejected,
//! blocked, or replaced by a changed entry — it closes at once
//! ([`Pool::stop`]): nobody is configured to run it any more.
//! Concurrent acquires of one id spawn it once. The admission gate applies
//! before anything else: a pending, rejected, excluded or not-allowed server
//! is never spawned by any session.

use indexmap::IndexMap;

use crate::config::{ServerConfig, Transport};
use crate::gating::{Gating, Reason};
use crate::identity::ConnectionId;
use crate::time::Millis;

/// How long a connection nobody holds stays open, by default.
pub const DEFAULT_DRAIN: Millis = Millis(30_000);

/// The pool's bookkeeping: who holds which connection, and which idle
/// connections close when.
///
/// # Drive loop
///
/// 1. Execute a session's plan action by action: `disconnect` →
///    [`Pool::stop`]; `reconnect` → [`Pool::stop`] of `from`, then
///    [`Pool::acquire`] of `to`; `connect` → [`Pool::acquire`]. When a session
///    ends, [`Pool::release_session`] (the drain).
/// 2. Act on each [`Acquire`]: `Spawn` → start the transport (this session is
///    the first holder); `Attach` → share the running or starting connection;
///    `Unpooled` → the session starts a connection of its own; `Refused` →
///    start nothing and report the reason.
/// 3. After any call, arm one timer at [`Pool::poll_timeout`] (or none).
/// 4. When the timer fires, call [`Pool::handle_timeout`] with the current
///    time and close every connection it returns.
/// 5. Go back to 1 with the next input.
#[derive(Clone, Debug)]
pub struct Pool {
    drain: Millis,
    pool_remote: bool,
    entries: IndexMap<ConnectionId, Entry>,
}

/// The answer to [`Pool::acquire`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Acquire {
    /// The first holder: the host starts the connection now.
    Spawn,
    /// The connection exists or is being started: share it. A pending close
    /// (drain) is cancelled.
    Attach {
        /// Holds after this acquire.
        refcount: u32,
    },
    /// The transport is not pooled: the session connects by itself.
    Unpooled {
        /// The server's transport.
        transport: Transport,
    },
    /// The server is not admitted; nothing may start it.
    Refused {
        /// Why (`not_allowed`, `excluded`, `pending_approval`, `rejected`,
        /// `no_transport`, ...).
        reason: Reason,
    },
}

/// The answer to [`Pool::release`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Release {
    /// Other holds remain: the connection stays open.
    Held {
        /// Holds after this release.
        refcount: u32,
    },
    /// That was the last hold: the connection closes at `deadline` unless it
    /// is acquired again before.
    Draining {
        /// When [`Pool::handle_timeout`] will close it.
        deadline: Millis,
    },
    /// That was the last hold, let go by [`Pool::stop`]: the host closes the
    /// connection now (no drain).
    Closed,
    /// The session held no such connection; nothing changed.
    NotHeld,
}

/// A connection the host must close now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Close {
    /// The connection to close: no session has held it since its drain deadline.
    pub id: ConnectionId,
}

#[derive(Clone, Debug, Default)]
struct Entry {
    /// Session → number of outstanding acquires, in first-acquire order.
    holders: IndexMap<String, u32>,
    /// Set while nobody holds the connection.
    closes_at: Option<Millis>,
}

impl Entry {
    fn refcount(&self) -> u32 {
        self.holders
            .values()
            .fold(0u32, |sum, n| sum.saturating_add(*n))
    }
}

impl Default for Pool {
    fn default() -> Self {
        Pool::new()
    }
}

impl Pool {
    /// An empty pool with the default drain delay that pools stdio servers
    /// only.
    pub fn new() -> Self {
        Pool {
            drain: DEFAULT_DRAIN,
            pool_remote: false,
            entries: IndexMap::new(),
        }
    }

    /// Sets how long a connection nobody holds stays open (applies to
    /// releases from now on).
    pub fn set_drain(&mut self, drain: Millis) {
        self.drain = drain;
    }

    /// Opts remote transports (HTTP, SSE, websocket) into pooling.
    pub fn set_pool_remote(&mut self, pool_remote: bool) {
        self.pool_remote = pool_remote;
    }

    /// Whether a server with `transport` is shared through the pool: stdio
    /// always, remote transports when opted in, in-process (`sdk`) never.
    pub fn is_poolable(&self, transport: Transport) -> bool {
        match transport {
            Transport::Stdio => true,
            Transport::Http | Transport::Sse | Transport::Websocket => self.pool_remote,
            Transport::Sdk | Transport::Unknown => false,
        }
    }

    /// `session` wants the connection `id` (of the server `config`), gated by
    /// `gating`: refused when `gating` denies the server, else spawned by the
    /// first acquirer and attached to by every later one. Like every input,
    /// it carries the time `now`, although no current rule depends on it.
    pub fn acquire(
        &mut self,
        session: &str,
        id: &ConnectionId,
        config: &ServerConfig,
        gating: &Gating,
        now: Millis,
    ) -> Acquire {
        let denial = gating.denial(id.server_name(), config);
        self.acquire_unless(session, id, config, denial, now)
    }

    /// [`Pool::acquire`] with the admission decided by the caller (`denial`
    /// = why the server is not admitted, e.g. `rejected` from the approval
    /// store; `None` = admitted).
    pub fn acquire_unless(
        &mut self,
        session: &str,
        id: &ConnectionId,
        config: &ServerConfig,
        denial: Option<Reason>,
        _now: Millis,
    ) -> Acquire {
        if let Some(reason) = denial {
            return Acquire::Refused { reason };
        }
        let transport = config.transport();
        if transport == Transport::Unknown {
            return Acquire::Refused {
                reason: Reason::NoTransport,
            };
        }
        if !self.is_poolable(transport) {
            return Acquire::Unpooled { transport };
        }
        let fresh = !self.entries.contains_key(id);
        let entry = self.entries.entry(id.clone()).or_default();
        let held = entry.holders.entry(session.to_owned()).or_insert(0);
        *held = held.saturating_add(1);
        entry.closes_at = None;
        if fresh {
            Acquire::Spawn
        } else {
            Acquire::Attach {
                refcount: entry.refcount(),
            }
        }
    }

    /// `session` lets go of one hold on `id`; the last release starts the
    /// drain.
    pub fn release(&mut self, session: &str, id: &ConnectionId, now: Millis) -> Release {
        let Some(entry) = self.entries.get_mut(id) else {
            return Release::NotHeld;
        };
        let Some(held) = entry.holders.get_mut(session) else {
            return Release::NotHeld;
        };
        *held = held.saturating_sub(1);
        if *held == 0 {
            entry.holders.shift_remove(session);
        }
        match entry.refcount() {
            0 => {
                let deadline = Millis(now.0.saturating_add(self.drain.0));
                entry.closes_at = Some(deadline);
                Release::Draining { deadline }
            }
            refcount => Release::Held { refcount },
        }
    }

    /// `session`'s plan stopped `id` (the server was removed, excluded,
    /// rejected, blocked by policy, or its entry changed): one hold let go as
    /// [`Pool::release`] does, but the last one closes the connection now —
    /// [`Release::Closed`], and the host stops it — instead of draining it.
    /// The drain is for sessions that end ([`Pool::release_session`]), not
    /// for a server nobody is configured to run any more.
    pub fn stop(&mut self, session: &str, id: &ConnectionId, now: Millis) -> Release {
        match self.release(session, id, now) {
            Release::Draining { .. } => {
                self.entries.shift_remove(id);
                Release::Closed
            }
            other => other,
        }
    }

    /// Releases every hold of `session` (the session ended), in pool order.
    pub fn release_session(&mut self, session: &str, now: Millis) -> Vec<(ConnectionId, Release)> {
        let held: Vec<(ConnectionId, u32)> = self
            .entries
            .iter()
            .filter_map(|(id, e)| e.holders.get(session).map(|n| (id.clone(), *n)))
            .collect();
        let mut released = Vec::with_capacity(held.len());
        for (id, holds) in held {
            let mut last = Release::NotHeld;
            for _ in 0..holds {
                last = self.release(session, &id, now);
            }
            released.push((id, last));
        }
        released
    }

    /// The earliest time a drained connection closes, if any is draining.
    pub fn poll_timeout(&self) -> Option<Millis> {
        self.entries.values().filter_map(|e| e.closes_at).min()
    }

    /// Closes every connection whose drain ended at or before `now`, earliest
    /// deadline first (pool order among equals).
    pub fn handle_timeout(&mut self, now: Millis) -> Vec<Close> {
        let mut due: Vec<(Millis, ConnectionId)> = self
            .entries
            .iter()
            .filter_map(|(id, e)| {
                e.closes_at
                    .filter(|at| *at <= now)
                    .map(|at| (at, id.clone()))
            })
            .collect();
        self.entries
            .retain(|_, e| e.closes_at.is_none_or(|at| at > now));
        due.sort_by_key(|(at, _)| *at);
        due.into_iter().map(|(_, id)| Close { id }).collect()
    }

    /// Outstanding acquires of `id` (0 when unknown or draining).
    pub fn refcount(&self, id: &ConnectionId) -> u32 {
        self.entries.get(id).map_or(0, Entry::refcount)
    }

    /// Whether `id` is open (held, starting, or draining).
    pub fn is_open(&self, id: &ConnectionId) -> bool {
        self.entries.contains_key(id)
    }

    /// The sessions holding `id`, in first-acquire order.
    pub fn holders(&self, id: &ConnectionId) -> impl Iterator<Item = &str> + '_ {
        self.entries
            .get(id)
            .into_iter()
            .flat_map(|e| e.holders.keys().map(String::as_str))
    }

    /// The open connections, in pool order.
    pub fn connections(&self) -> impl Iterator<Item = &ConnectionId> + '_ {
        self.entries.keys()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::identity::connection_id;

    fn cfg(text: &str) -> ServerConfig {
        ServerConfig::from_json(text).expect("a config object")
    }

    #[test]
    fn spawns_once_drains_and_closes() {
        let mut pool = Pool::new();
        let config = cfg(r#"{"command":"node"}"#);
        let id = connection_id("a", &config).expect("id");
        let open = Gating::default();
        assert_eq!(
            pool.acquire("s1", &id, &config, &open, Millis(0)),
            Acquire::Spawn
        );
        assert_eq!(
            pool.acquire("s2", &id, &config, &open, Millis(1)),
            Acquire::Attach { refcount: 2 }
        );
        assert_eq!(
            pool.release("s1", &id, Millis(2)),
            Release::Held { refcount: 1 }
        );
        assert_eq!(pool.release("s1", &id, Millis(2)), Release::NotHeld);
        assert_eq!(
            pool.release("s2", &id, Millis(10)),
            Release::Draining {
                deadline: Millis(30_010)
            }
        );
        assert_eq!(pool.poll_timeout(), Some(Millis(30_010)));
        assert!(pool.handle_timeout(Millis(30_009)).is_empty());
        assert_eq!(
            pool.handle_timeout(Millis(30_010)),
            [Close { id: id.clone() }]
        );
        assert!(!pool.is_open(&id));
        assert_eq!(pool.poll_timeout(), None);
    }

    #[test]
    fn a_stopped_server_closes_at_once_unless_another_session_holds_it() {
        let mut pool = Pool::new();
        let config = cfg(r#"{"command":"node"}"#);
        let id = connection_id("a", &config).expect("id");
        let open = Gating::default();
        pool.acquire("s1", &id, &config, &open, Millis(0));
        pool.acquire("s2", &id, &config, &open, Millis(0));
        assert_eq!(
            pool.stop("s1", &id, Millis(1)),
            Release::Held { refcount: 1 }
        );
        assert_eq!(pool.stop("s1", &id, Millis(1)), Release::NotHeld);
        assert_eq!(pool.stop("s2", &id, Millis(2)), Release::Closed);
        assert!(!pool.is_open(&id));
        assert_eq!(pool.poll_timeout(), None, "nothing drains");
        // A session that ends still drains what it held last.
        pool.acquire("s3", &id, &config, &open, Millis(3));
        assert_eq!(
            pool.release_session("s3", Millis(4)),
            [(
                id.clone(),
                Release::Draining {
                    deadline: Millis(30_004)
                }
            )]
        );
        assert!(pool.is_open(&id));
    }

    #[test]
    fn reacquire_during_drain_cancels_the_close() {
        let mut pool = Pool::new();
        pool.set_drain(Millis(100));
        let config = cfg(r#"{"command":"node"}"#);
        let id = connection_id("a", &config).expect("id");
        let open = Gating::default();
        pool.acquire("s", &id, &config, &open, Millis(0));
        pool.release("s", &id, Millis(0));
        assert_eq!(
            pool.acquire("s", &id, &config, &open, Millis(50)),
            Acquire::Attach { refcount: 1 }
        );
        assert_eq!(pool.poll_timeout(), None);
        assert!(pool.handle_timeout(Millis(1000)).is_empty());
        assert!(pool.is_open(&id));
    }

    #[test]
    fn gate_comes_first_and_only_stdio_is_pooled_by_default() {
        let mut pool = Pool::new();
        let stdio = cfg(r#"{"command":"node"}"#);
        let id = connection_id("p", &stdio).expect("id");
        let pending = Gating {
            pending: Some(vec!["p".into()]),
            ..Gating::default()
        };
        assert_eq!(
            pool.acquire("s", &id, &stdio, &pending, Millis(0)),
            Acquire::Refused {
                reason: Reason::PendingApproval
            }
        );
        assert!(!pool.is_open(&id));
        let http = cfg(r#"{"httpUrl":"http://h"}"#);
        let sdk = cfg(r#"{"type":"sdk","command":"x"}"#);
        let open = Gating::default();
        for (config, transport) in [(&http, Transport::Http), (&sdk, Transport::Sdk)] {
            let id = connection_id("r", config).expect("id");
            assert_eq!(
                pool.acquire("s", &id, config, &open, Millis(0)),
                Acquire::Unpooled { transport }
            );
        }
        pool.set_pool_remote(true);
        let id = connection_id("r", &http).expect("id");
        assert_eq!(
            pool.acquire("s", &id, &http, &open, Millis(0)),
            Acquire::Spawn
        );
        let id = connection_id("r", &sdk).expect("id");
        assert_eq!(
            pool.acquire("s", &id, &sdk, &open, Millis(0)),
            Acquire::Unpooled {
                transport: Transport::Sdk
            }
        );
    }

    #[test]
    fn release_session_drops_every_hold() {
        let mut pool = Pool::new();
        let config = cfg(r#"{"command":"node"}"#);
        let a = connection_id("a", &config).expect("id");
        let b = connection_id("b", &config).expect("id");
        let open = Gating::default();
        pool.acquire("s", &a, &config, &open, Millis(0));
        pool.acquire("s", &a, &config, &open, Millis(0));
        pool.acquire("s", &b, &config, &open, Millis(0));
        pool.acquire("t", &b, &config, &open, Millis(0));
        let released = pool.release_session("s", Millis(5));
        assert_eq!(
            released,
            [
                (
                    a.clone(),
                    Release::Draining {
                        deadline: Millis(30_005)
                    }
                ),
                (b.clone(), Release::Held { refcount: 1 })
            ]
        );
        assert_eq!(pool.refcount(&a), 0);
        assert_eq!(pool.holders(&b).collect::<Vec<_>>(), ["t"]);
    }
}
