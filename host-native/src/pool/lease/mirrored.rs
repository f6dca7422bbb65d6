//! [`Mirrored`]: a held connection of the session as last seen in the pool — what the
//! session's engine reads without waiting, refreshed whenever the pool says something changed.

use std::sync::Arc;

use mcp_reconcile_kernel::identity::ConnectionId;
use mcp_reconcile_kernel::supervise::Supervision;

use super::super::actor::HeldConn;
use crate::transport::{Caller, Catalog};

/// A held connection as last seen in the pool.
pub(super) struct Mirrored {
    pub(super) id: ConnectionId,
    pub(super) catalog: Arc<Catalog>,
    pub(super) caller: Option<Caller>,
    pub(super) health: Supervision,
    pub(super) pid: Option<u32>,
    pub(super) spawns: u64,
    pub(super) version: u64,
    pub(super) holders: usize,
}

impl Mirrored {
    pub(super) fn from_pool(held: HeldConn) -> (String, Mirrored) {
        let mirrored = Mirrored {
            id: held.id,
            catalog: held.catalog,
            caller: held.caller,
            health: held.health,
            pid: held.pid,
            spawns: held.spawns,
            version: held.version,
            holders: held.holders,
        };
        (held.server, mirrored)
    }

    /// Whether a session would see a difference between `self` and `other`.
    pub(super) fn same_as(&self, other: &Mirrored) -> bool {
        self.id == other.id
            && self.version == other.version
            && self.caller.is_some() == other.caller.is_some()
            && self.health.status == other.health.status
            && self.health.attempts == other.health.attempts
            && self.health.crash_loop == other.health.crash_loop
            && self.pid == other.pid
    }
}
