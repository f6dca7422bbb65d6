//! Dev mode's brake on a restart storm (the audit: a server that writes into its own watched
//! folder on start restarted itself about three times a second, forever, and status said
//! nothing needed attention).
//!
//! The policy, per server, over the times its dev restarts were allowed ([`Millis`], given):
//! a change of its sources restarts it only while fewer than [`BRAKE_RESTARTS`] dev restarts
//! happened within the last [`BRAKE_WINDOW`]. The change that finds the window full pauses the
//! server's dev restarts ([`Paused`]): changes while paused restart nothing, and the pause ends
//! with the first change after its sources were quiet for [`BRAKE_QUIET`] (that change
//! restarts it), or when the user reconnects the server or reloads ([`Brake::release`]).
//! However the changes come, no [`BRAKE_WINDOW`] ever holds more than [`BRAKE_RESTARTS`]
//! dev restarts of one server between two releases.

use crate::time::Millis;

/// The most dev restarts of one server within [`BRAKE_WINDOW`].
pub const BRAKE_RESTARTS: usize = 5;

/// The window [`BRAKE_RESTARTS`] counts in.
pub const BRAKE_WINDOW: Millis = Millis(10_000);

/// How long a paused server's sources must be quiet before a change restarts it again. At
/// least [`BRAKE_WINDOW`], so the window is empty again once a pause ends by itself.
pub const BRAKE_QUIET: Millis = Millis(10_000);

/// Why a server's dev restarts are paused.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Paused {
    /// When the pause began.
    pub since: Millis,
    /// The last change seen while paused (quiet is counted from it).
    pub last_change: Millis,
    /// The changed path that found the window full, as the host shows it.
    pub path: String,
}

/// One server's brake: its recent dev restarts and whether they are paused.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Brake {
    /// The times of the last dev restarts, oldest first, at most [`BRAKE_RESTARTS`].
    restarts: Vec<Millis>,
    paused: Option<Paused>,
}

impl Brake {
    /// A brake with no restarts counted.
    pub fn new() -> Brake {
        Brake::default()
    }

    /// The server's sources changed at `now` (`path` first): whether it is restarted for it.
    /// A restart allowed is counted; a change that finds [`BRAKE_RESTARTS`] in the window
    /// pauses the server's dev restarts.
    pub fn change(&mut self, now: Millis, path: &str) -> bool {
        if let Some(paused) = &mut self.paused {
            if elapsed(paused.last_change, now) < BRAKE_QUIET.0 {
                paused.last_change = paused.last_change.max(now);
                return false;
            }
            self.paused = None;
        }
        self.restarts
            .retain(|at| elapsed(*at, now) < BRAKE_WINDOW.0);
        if self.restarts.len() >= BRAKE_RESTARTS {
            self.paused = Some(Paused {
                since: now,
                last_change: now,
                path: path.to_owned(),
            });
            return false;
        }
        self.restarts.push(now);
        true
    }

    /// The pause, while dev restarts are paused.
    pub fn paused(&self) -> Option<&Paused> {
        self.paused.as_ref()
    }

    /// The user reconnected the server or reloaded: the pause ends and the count starts over.
    pub fn release(&mut self) {
        *self = Brake::default();
    }
}

/// Milliseconds from `from` to `to`; 0 when `to` is not after `from`.
fn elapsed(from: Millis, to: Millis) -> u64 {
    to.0.saturating_sub(from.0)
}

/// What a paused server's status says: why, and what the user can do.
pub fn paused_text(name: &str, paused: &Paused) -> String {
    format!(
        "dev mode paused for server \"{name}\": restarted {BRAKE_RESTARTS} times in {} s by \
         changes under {} — the server may write into its own watched folder; fix the glob, \
         or run `mcp-reconcile reconnect {name}` (a change after {} s of quiet restarts it too)",
        BRAKE_WINDOW.0 / 1000,
        paused.path,
        BRAKE_QUIET.0 / 1000,
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_storm_is_paused_after_the_brakes_count() {
        let mut brake = Brake::new();
        let allowed: Vec<bool> = (0..8)
            .map(|i| brake.change(Millis(300 * i), "src/log.txt"))
            .collect();
        assert_eq!(allowed, [true, true, true, true, true, false, false, false]);
        let paused = brake.paused().expect("paused");
        assert_eq!(
            (paused.since, paused.path.as_str()),
            (Millis(1500), "src/log.txt")
        );
        assert_eq!(paused.last_change, Millis(2100));
        let text = paused_text("notes", paused);
        assert!(text.contains("restarted 5 times in 10 s by changes under src/log.txt"));
        assert!(text.contains("`mcp-reconcile reconnect notes`"));
    }

    #[test]
    fn slow_changes_are_never_braked() {
        let mut brake = Brake::new();
        for i in 0..100 {
            assert!(brake.change(Millis(2_500 * i), "src/x.ts"), "change {i}");
        }
        assert_eq!(brake.paused(), None);
    }

    #[test]
    fn a_pause_ends_with_the_first_change_after_quiet() {
        let mut brake = Brake::new();
        for i in 0..6 {
            brake.change(Millis(100 * i), "a");
        }
        assert!(brake.paused().is_some());
        // Changes while paused keep it paused and restart the quiet period.
        assert!(!brake.change(Millis(9_000), "a"));
        assert!(!brake.change(Millis(18_999), "a"));
        assert!(brake.change(Millis(28_999), "a"), "quiet for 10 s");
        assert_eq!(brake.paused(), None);
    }

    #[test]
    fn a_release_ends_the_pause_and_the_count() {
        let mut brake = Brake::new();
        for i in 0..6 {
            brake.change(Millis(i), "a");
        }
        brake.release();
        assert_eq!(brake, Brake::new());
        assert!(brake.change(Millis(7), "a"));
    }

    proptest! {
        /// Whatever the changes (times in order, as a monotonic clock gives them), no window
        /// of BRAKE_WINDOW holds more than BRAKE_RESTARTS allowed restarts.
        #[test]
        fn no_window_holds_more_than_the_brakes_count(
            gaps in proptest::collection::vec(0u64..4_000, 0..200),
        ) {
            let mut brake = Brake::new();
            let mut now = 0;
            let mut allowed = Vec::new();
            for gap in gaps {
                now += gap;
                if brake.change(Millis(now), "p") {
                    allowed.push(now);
                }
            }
            for (i, start) in allowed.iter().enumerate() {
                let inside = allowed[i..]
                    .iter()
                    .take_while(|at| **at < start + BRAKE_WINDOW.0)
                    .count();
                prop_assert!(inside <= BRAKE_RESTARTS, "{allowed:?}");
            }
        }
    }
}
