//! What the pool's task shows: a session's view of what it holds, and every connection's
//! status.

use std::collections::HashSet;

use mcp_reconcile_kernel::supervise::Supervision;
use mcp_reconcile_kernel::Millis;

use super::{Actor, HeldConn, Key};
use crate::pool::PooledStatus;
use crate::transport::Connection;

impl Actor {
    pub(super) fn view(&self, session: &str) -> Vec<HeldConn> {
        let Some(state) = self.sessions.get(session) else {
            return Vec::new();
        };
        let mut seen = HashSet::new();
        state
            .held
            .iter()
            .filter(|key| seen.insert((*key).clone()))
            // While switching, the session sees the old connection, not the starting one.
            .filter(|key| !state.switching.iter().any(|(_, new)| new == *key))
            .filter_map(|key| Some((key, self.conns.get(key)?)))
            .map(|(key, pooled)| {
                // Another session's old process standing in: this one sees it starting.
                let (Key::Shared(id) | Key::Private(_, id)) = key;
                let mut held = HeldConn {
                    server: pooled.name.clone(),
                    id: id.clone(),
                    catalog: pooled.catalog.clone(),
                    caller: pooled.live().map(Connection::caller),
                    health: pooled.health().clone(),
                    pid: pooled.pid(),
                    spawns: self.conns.spawns(key),
                    version: self.versions.get(key).copied().unwrap_or(0),
                    holders: self.holders(key).len(),
                };
                if self.standbys.get(key).is_some_and(|owner| owner != session) {
                    held.catalog = std::sync::Arc::default();
                    held.caller = None;
                    held.health = Supervision::connecting(0, false);
                }
                held
            })
            .collect()
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
