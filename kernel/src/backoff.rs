//! Retry delays and crash-loop detection for failed servers (SPEC §9).
//!
//! The delay is a capped exponential with deterministic jitter: the host
//! picks a `seed` per server, so the same failure history always gives the
//! same delay (no randomness in the kernel), while different servers spread
//! their retries apart.

use crate::time::Millis;

/// Consecutive failures from which a server is in crash loop: it stays
/// `failed` until its config changes or the user reconnects it.
pub const CRASH_LOOP_ATTEMPTS: u32 = 8;

/// How long a connection must stay healthy before its failure count resets.
pub const HEALTHY_RESET: Millis = Millis(300_000);

/// The longest delay between two retries.
pub const MAX_DELAY_MS: u64 = 60_000;

/// The largest `seed` a host may choose (2^53, so it survives JSON).
pub const MAX_SEED: u64 = 1 << 53;

/// What to do after `attempts` consecutive failures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(
    feature = "ts",
    derive(ts_rs::TS),
    ts(rename = "BackoffDelay", rename_all = "camelCase")
)]
pub struct Backoff {
    /// Milliseconds to wait before the next retry.
    pub delay_ms: u64,
    /// Whether the server failed too often in a row to be retried on a timer.
    pub crash_loop: bool,
}

/// The retry delay after `attempts` consecutive failures, jittered by `seed`.
///
/// `attempts == 0` is "no failure": no delay. Otherwise the base delay is
/// `min(60 000, 1000 · 2^(attempts − 1))` ms, reduced by up to 20 % by a
/// splitmix64 draw of `seed XOR attempts`.
pub fn backoff(attempts: u32, seed: u64) -> Backoff {
    backoff_wide(u64::from(attempts), seed)
}

/// The failure count to carry forward for a connection that has been healthy
/// since `healthy_since`: 0 once it stayed up for [`HEALTHY_RESET`], else
/// `attempts` unchanged.
pub fn attempts_after_health(attempts: u32, healthy_since: Millis, now: Millis) -> u32 {
    if now.0.saturating_sub(healthy_since.0) >= HEALTHY_RESET.0 {
        0
    } else {
        attempts
    }
}

/// [`backoff`] for any failure count the JSON API can carry.
pub(crate) fn backoff_wide(attempts: u64, seed: u64) -> Backoff {
    if attempts == 0 {
        return Backoff {
            delay_ms: 0,
            crash_loop: false,
        };
    }
    // 1000 · 2^6 already exceeds the cap, so larger exponents never shift.
    let base = match attempts - 1 {
        exponent @ 0..=5 => (1000u64 << exponent).min(MAX_DELAY_MS),
        _ => MAX_DELAY_MS,
    };
    let u = (splitmix64(seed ^ attempts) >> 11) as f64 / (1u64 << 53) as f64;
    let base = base as f64;
    let delay = base - (base * 0.2 * u).floor();
    Backoff {
        // `delay` lies in (0.8 · base, base], an exact integer.
        delay_ms: delay as u64,
        crash_loop: attempts >= u64::from(CRASH_LOOP_ATTEMPTS),
    }
}

/// One step of the splitmix64 generator, with wrapping 64-bit arithmetic.
fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_failure_no_delay() {
        assert_eq!(
            backoff(0, 123),
            Backoff {
                delay_ms: 0,
                crash_loop: false
            }
        );
    }

    #[test]
    fn spec_examples() {
        assert_eq!(backoff(1, 0).delay_ms, 887);
        assert_eq!(backoff(2, 0).delay_ms, 1764);
        assert_eq!(
            backoff(8, 42),
            Backoff {
                delay_ms: 53572,
                crash_loop: true
            }
        );
    }

    #[test]
    fn delay_stays_within_jitter_of_the_capped_base() {
        for attempts in [1, 2, 3, 6, 7, 8, 63, 64, 65, 1000, u32::MAX] {
            for seed in [0, 1, 42, MAX_SEED, u64::MAX] {
                let b = backoff(attempts, seed);
                let base = if attempts >= 7 {
                    60_000
                } else {
                    1000 << (attempts - 1)
                };
                assert!(b.delay_ms <= base && b.delay_ms * 5 >= base * 4, "{b:?}");
                assert_eq!(b.crash_loop, attempts >= CRASH_LOOP_ATTEMPTS);
            }
        }
    }

    #[test]
    fn healthy_for_five_minutes_resets_attempts() {
        assert_eq!(attempts_after_health(5, Millis(1000), Millis(300_999)), 5);
        assert_eq!(attempts_after_health(5, Millis(1000), Millis(301_000)), 0);
        assert_eq!(attempts_after_health(5, Millis(9), Millis(0)), 5);
    }
}
