//! What the pool's task shows: a session's view of what it holds — only what changed since
//! it last asked, so an edit that changes one server of 200 costs the session one entry, not
//! 200 — and every connection's status.

use std::collections::{HashMap, HashSet};

use mcp_reconcile_kernel::supervise::Supervision;
use mcp_reconcile_kernel::Millis;

use super::{Actor, HeldConn, Key};
use crate::pool::PooledStatus;
use crate::transport::Connection;

/// What changed of what a session holds since its last view.
pub(in crate::pool) struct ViewDiff {
    /// The connections it sees that are new to it or differ from what it was last shown, and
    /// those of the servers it asked for in full.
    pub(in crate::pool) changed: Vec<HeldConn>,
    /// The servers it saw and sees no connection of any more.
    pub(in crate::pool) gone: Vec<String>,
}

/// What a session was last shown of one connection: everything a [`HeldConn`] carries but
/// the connection id (the key) and the catalog and caller (they change only with `version`
/// or with `live`).
#[derive(PartialEq)]
pub(in crate::pool) struct Sent {
    server: String,
    version: u64,
    live: bool,
    health: Supervision,
    pid: Option<u32>,
    spawns: u64,
    /// How many sessions hold it (`status` shows the count).
    holders: usize,
    /// Another session's old process stands in under this key: shown as starting.
    standby: bool,
}

impl Sent {
    /// Whether the session would be shown nothing new.
    fn same(&self, other: &SentRef<'_>) -> bool {
        self.version == other.version
            && self.live == other.live
            && self.pid == other.pid
            && self.spawns == other.spawns
            && self.holders == other.holders
            && self.standby == other.standby
            && self.server == other.server
            && self.health == *other.health
    }
}

/// [`Sent`] as read from the pool, borrowed: compared without copying anything.
struct SentRef<'a> {
    server: &'a str,
    version: u64,
    live: bool,
    health: &'a Supervision,
    pid: Option<u32>,
    spawns: u64,
    holders: usize,
    standby: bool,
}

impl Actor {
    /// What `session` holds that changed since its last view, and in full the servers in
    /// `want` (a start it waits for, an entry it changed or dropped on its side).
    pub(super) fn view(&mut self, session: &str, want: &HashSet<String>) -> ViewDiff {
        let Some(state) = self.sessions.get_mut(session) else {
            return ViewDiff {
                changed: Vec::new(),
                gone: Vec::new(),
            };
        };
        let mut seen = HashSet::new();
        let mut shown: HashMap<Key, Sent> = HashMap::with_capacity(state.sent.len());
        let mut changed = Vec::new();
        let shown_keys = state
            .held
            .iter()
            .filter(|key| seen.insert((*key).clone()))
            // While switching, the session sees the old connection, not the starting one.
            .filter(|key| !state.switching.iter().any(|(_, new)| new == *key));
        for key in shown_keys {
            let Some(pooled) = self.conns.get(key) else {
                continue;
            };
            let fresh = SentRef {
                server: &pooled.name,
                version: self.versions.get(key).copied().unwrap_or(0),
                live: pooled.live().is_some(),
                health: pooled.health(),
                pid: pooled.pid(),
                spawns: self.conns.spawns(key),
                // As `Actor::holders` counts them, through the pool alone (the session's state
                // is borrowed).
                holders: match key {
                    Key::Shared(id) => self.pool.holders(id).count(),
                    Key::Private(..) => 1,
                },
                // Another session's old process standing in: this one sees it starting.
                standby: self.standbys.get(key).is_some_and(|owner| owner != session),
            };
            let last = state.sent.remove(key);
            let same = last.as_ref().is_some_and(|sent| sent.same(&fresh));
            if same && !want.contains(fresh.server) {
                if let Some(last) = last {
                    shown.insert(key.clone(), last);
                }
                continue;
            }
            let (Key::Shared(id) | Key::Private(_, id)) = key;
            let mut held = HeldConn {
                server: pooled.name.clone(),
                id: id.clone(),
                catalog: pooled.catalog.clone(),
                caller: pooled.live().map(Connection::caller),
                health: pooled.health().clone(),
                pid: fresh.pid,
                spawns: fresh.spawns,
                version: fresh.version,
                holders: fresh.holders,
            };
            if fresh.standby {
                held.catalog = std::sync::Arc::default();
                held.caller = None;
                held.health = Supervision::connecting(0, false);
            }
            let sent = Sent {
                server: pooled.name.clone(),
                version: fresh.version,
                live: fresh.live,
                health: pooled.health().clone(),
                pid: fresh.pid,
                spawns: fresh.spawns,
                holders: fresh.holders,
                standby: fresh.standby,
            };
            shown.insert(key.clone(), sent);
            changed.push(held);
        }
        // What it saw and no longer sees, unless its server shows another connection now.
        let showing: HashSet<&str> = shown.values().map(|sent| sent.server.as_str()).collect();
        let mut gone: Vec<String> = state
            .sent
            .values()
            .filter(|sent| !showing.contains(sent.server.as_str()))
            .map(|sent| sent.server.clone())
            .collect();
        gone.sort();
        gone.dedup();
        state.sent = shown;
        ViewDiff { changed, gone }
    }

    pub(super) fn status(&self) -> Vec<PooledStatus> {
        self.conns
            .entries()
            .map(|(key, p)| {
                let (id, private) = match key {
                    Key::Shared(id) => (id.clone(), false),
                    Key::Private(_, id) => (id.clone(), true),
                };
                let holders = self.holders(key);
                PooledStatus {
                    draining: !private && holders.is_empty(),
                    id,
                    server: p.name.clone(),
                    state: p.health().status.into(),
                    reason: p.health().view(Millis::ZERO).reason,
                    holders,
                    private,
                    pid: p.pid(),
                    spawns: self.conns.spawns(key),
                    attempts: p.health().attempts,
                    tools: p.catalog.tools.len(),
                    last_error: p.health().last_error.clone(),
                }
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;
    use std::path::PathBuf;
    use std::time::{Duration, Instant};

    use mcp_reconcile_kernel::identity::connection_id;
    use mcp_reconcile_kernel::json::{Object, Value};
    use mcp_reconcile_kernel::{Gating, ServerConfig};

    use super::ViewDiff;
    use crate::pool::actor::{Op, Request};
    use crate::pool::{PoolOptions, SharedPool};

    /// The fixture server, built next to this test binary's crate outputs if it is not yet.
    fn fixture() -> PathBuf {
        let exe = std::env::current_exe().expect("test binary");
        let dir = exe.parent().and_then(|d| d.parent()).expect("target dir");
        let path = dir.join("mcp-fixture-server");
        if !path.is_file() {
            let status = std::process::Command::new(env!("CARGO"))
                .args(["build", "-q", "-p", "mcp-reconcile-fixture"])
                .env("CARGO_TARGET_DIR", dir.parent().expect("target root"))
                .status()
                .expect("cargo runs");
            assert!(status.success(), "building the fixture server failed");
        }
        path
    }

    fn acquire(name: &str) -> Op {
        let mut entry = Object::new();
        entry.insert(
            "command".into(),
            Value::String(fixture().to_string_lossy().into_owned()),
        );
        let args = ["--name", name, "--tools", "echo"];
        entry.insert(
            "args".into(),
            Value::Array(args.iter().map(|a| Value::String((*a).into())).collect()),
        );
        let config = ServerConfig::new(entry);
        Op::Acquire {
            server: name.to_owned(),
            id: connection_id(name, &config).expect("id"),
            config,
            launch: None,
        }
    }

    async fn apply(pool: &SharedPool, ops: Vec<Op>) {
        pool.ask(|reply| Request::Apply {
            session: "s".into(),
            gating: Gating::default(),
            ops,
            reply,
        })
        .await
        .expect("the pool answers");
    }

    async fn view(pool: &SharedPool, want: &[&str]) -> (Vec<String>, Vec<String>) {
        let want: HashSet<String> = want.iter().map(|w| (*w).to_owned()).collect();
        let ViewDiff { changed, gone } = pool
            .ask(|reply| Request::View {
                session: "s".into(),
                want,
                reply,
            })
            .await
            .expect("the pool answers");
        let mut changed: Vec<String> = changed.into_iter().map(|held| held.server).collect();
        changed.sort();
        (changed, gone)
    }

    /// A session's view is a difference: once it has seen its connections, asking again
    /// hands it nothing (not every held connection again); a server it asks for comes in
    /// full; one it lets go of is named gone.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_view_sends_only_what_changed_since_the_last() {
        let pool = SharedPool::start(PoolOptions::default());
        apply(&pool, vec![acquire("a"), acquire("b"), acquire("c")]).await;
        let start = Instant::now();
        loop {
            let status = pool.status().await.expect("status");
            if status.len() == 3 && status.iter().all(|s| s.tools == 1) {
                break;
            }
            assert!(start.elapsed() < Duration::from_secs(45), "{status:?}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let all = vec!["a".to_owned(), "b".to_owned(), "c".to_owned()];
        assert_eq!(view(&pool, &[]).await, (all, Vec::new()), "first: all");
        assert_eq!(
            view(&pool, &[]).await,
            (Vec::new(), Vec::new()),
            "then nothing"
        );
        assert_eq!(
            view(&pool, &["b"]).await,
            (vec!["b".to_owned()], Vec::new()),
            "what it asks for"
        );
        let Op::Acquire { id, .. } = acquire("c") else {
            unreachable!("an acquire")
        };
        apply(&pool, vec![Op::Release { id }]).await;
        assert_eq!(
            view(&pool, &[]).await,
            (Vec::new(), vec!["c".to_owned()]),
            "let go of"
        );
        pool.shutdown().await;
    }
}
