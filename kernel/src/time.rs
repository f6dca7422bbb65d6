//! Kernel time: milliseconds on the host's monotonic clock, passed in as data.

use serde::{Deserialize, Serialize};

/// A point in time or a span of time, in milliseconds of the host's
/// monotonic clock.
///
/// The kernel never reads a clock: every time-dependent input carries a
/// `now: Millis` chosen by the host. A plain integer (not `Instant`) so it
/// crosses the JavaScript boundary unchanged; serialized as that integer.
#[derive(
    Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize,
)]
#[serde(transparent)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct Millis(pub u64);

impl Millis {
    /// The zero point of the host's clock (and the empty span).
    pub const ZERO: Millis = Millis(0);

    /// `self` plus `ms` milliseconds, saturating at `u64::MAX` instead of
    /// overflowing.
    pub const fn saturating_add(self, ms: u64) -> Millis {
        Millis(self.0.saturating_add(ms))
    }
}

impl From<u64> for Millis {
    fn from(ms: u64) -> Self {
        Millis(ms)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn saturating_add_never_overflows() {
        assert_eq!(Millis(5).saturating_add(7), Millis(12));
        assert_eq!(Millis(u64::MAX - 1).saturating_add(7), Millis(u64::MAX));
    }

    #[test]
    fn serializes_as_a_plain_integer() {
        assert_eq!(
            serde_json::to_string(&Millis(300)).ok().as_deref(),
            Some("300")
        );
        assert_eq!(serde_json::from_str::<Millis>("42").ok(), Some(Millis(42)));
    }
}
