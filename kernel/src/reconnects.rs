//! How often one session may ask to restart the same server (the gateway's
//! `mcp_reconcile_reconnect`, which an agent can call in a loop): at most once
//! per [`RECONNECT_INTERVAL`] per server, as a pure rule with time passed in.
//!
//! Every ask counts, whatever it then does (restarted, refused because
//! another session shares the process, no such server): the bound is on how
//! often a session may try.

use std::collections::BTreeMap;

use crate::time::Millis;

/// The shortest time between two reconnects of one server asked by one
/// session.
pub const RECONNECT_INTERVAL: Millis = Millis(10_000);

/// One session's recent reconnects, by server name.
#[derive(Clone, Debug)]
pub struct ReconnectLimit {
    interval: Millis,
    /// Server → when its last allowed reconnect was asked (only those within
    /// the interval are kept, so the map stays small).
    last: BTreeMap<String, Millis>,
}

impl Default for ReconnectLimit {
    fn default() -> Self {
        ReconnectLimit::new(RECONNECT_INTERVAL)
    }
}

impl ReconnectLimit {
    /// A limit of one reconnect per server per `interval`.
    pub fn new(interval: Millis) -> Self {
        ReconnectLimit {
            interval,
            last: BTreeMap::new(),
        }
    }

    /// A reconnect of `server` asked at `now`: `Ok` (and counted) when the
    /// last one allowed for it is at least the interval old, else how long
    /// until the next one is allowed (never zero).
    ///
    /// # Errors
    /// The wait, when `server` was reconnected within the interval.
    pub fn ask(&mut self, server: &str, now: Millis) -> Result<(), Millis> {
        let interval = self.interval.0;
        self.last
            .retain(|_, at| now.0.saturating_sub(at.0) < interval);
        if let Some(at) = self.last.get(server) {
            let next = at.0.saturating_add(interval);
            return Err(Millis(next.saturating_sub(now.0).max(1)));
        }
        self.last.insert(server.to_owned(), now);
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_reconnect_per_server_per_interval() {
        let mut limit = ReconnectLimit::default();
        assert_eq!(limit.ask("a", Millis(1_000)), Ok(()));
        assert_eq!(limit.ask("a", Millis(1_000)), Err(Millis(10_000)));
        assert_eq!(limit.ask("a", Millis(8_500)), Err(Millis(2_500)));
        // Another server has its own allowance.
        assert_eq!(limit.ask("b", Millis(8_500)), Ok(()));
        assert_eq!(limit.ask("a", Millis(10_999)), Err(Millis(1)));
        assert_eq!(limit.ask("a", Millis(11_000)), Ok(()));
        assert_eq!(limit.ask("b", Millis(11_000)), Err(Millis(7_500)));
    }

    #[test]
    fn old_asks_are_forgotten() {
        let mut limit = ReconnectLimit::new(Millis(100));
        for (n, name) in ["a", "b", "c"].iter().enumerate() {
            assert_eq!(limit.ask(name, Millis(n as u64)), Ok(()));
        }
        assert_eq!(limit.ask("d", Millis(1_000)), Ok(()));
        assert_eq!(limit.last.len(), 1, "only the recent ones are kept");
    }
}
