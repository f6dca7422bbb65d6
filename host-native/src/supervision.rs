//! Failure bookkeeping (SPEC §9) shared by the session host and the shared
//! pool: one server connection's state, consecutive failures, when it may be
//! retried, and whether it is in a crash loop. The kernel computes the
//! delays ([`backoff`]); this applies them.

use mcp_reconcile_kernel::backoff::{attempts_after_health, backoff};
use mcp_reconcile_kernel::plan::Status;
use mcp_reconcile_kernel::Millis;

/// How one connection is doing.
#[derive(Clone, Debug)]
pub(crate) struct Supervision {
    pub(crate) status: Status,
    pub(crate) attempts: u32,
    pub(crate) retry_at: Option<Millis>,
    pub(crate) crash_loop: bool,
    pub(crate) healthy_since: Option<Millis>,
    pub(crate) last_error: Option<String>,
}

impl Supervision {
    /// A start in progress, carrying the failure count of earlier attempts.
    pub(crate) fn connecting(attempts: u32, crash_loop: bool) -> Self {
        Supervision {
            status: Status::Connecting,
            attempts,
            retry_at: None,
            crash_loop,
            healthy_since: None,
            last_error: None,
        }
    }

    /// The start succeeded. Failures are forgotten only after it stays
    /// healthy (see [`Supervision::closed`]).
    pub(crate) fn connected(&mut self, now: Millis) {
        self.status = Status::Connected;
        self.last_error = None;
        self.healthy_since = Some(now);
    }

    /// A connection ended on its own: failed, unless it had been healthy for
    /// the reset window, in which case it starts over at attempt 1. `scale`
    /// shrinks the whole schedule (tests only).
    pub(crate) fn closed(&mut self, server: &str, error: String, now: Millis, scale: f64) {
        if let Some(since) = self.healthy_since {
            let healthy_for = unscaled(now.0.saturating_sub(since.0), scale);
            self.attempts = attempts_after_health(
                self.attempts,
                since,
                Millis(since.0.saturating_add(healthy_for)),
            );
        }
        self.fail(server, error, now, scale, false);
    }

    /// A start or a connection failed: one more consecutive failure, the
    /// kernel's delay until the next retry, crash loop after too many (or at
    /// once for a transport that can never work).
    pub(crate) fn fail(
        &mut self,
        server: &str,
        error: String,
        now: Millis,
        scale: f64,
        unsupported: bool,
    ) {
        self.status = Status::Failed;
        self.healthy_since = None;
        self.attempts = self.attempts.saturating_add(1);
        let delay = backoff(self.attempts, seed_for(server));
        self.crash_loop = delay.crash_loop || unsupported;
        self.retry_at = Some(now.saturating_add(scaled(delay.delay_ms, scale)));
        self.last_error = Some(error);
    }

    /// Clears failure and crash-loop state (manual reconnect / reload).
    pub(crate) fn forgive(&mut self) {
        self.attempts = 0;
        self.crash_loop = false;
        self.retry_at = None;
    }

    /// When a failed connection is due for a retry (`None`: never, or not failed).
    pub(crate) fn retry_due(&self) -> Option<Millis> {
        (self.status == Status::Failed && !self.crash_loop)
            .then_some(self.retry_at)
            .flatten()
    }
}

/// `ms` × `scale` (a non-finite or negative scale counts as 1).
pub(crate) fn scaled(ms: u64, scale: f64) -> u64 {
    if scale.is_finite() && scale >= 0.0 {
        (ms as f64 * scale).round() as u64
    } else {
        ms
    }
}

/// `ms` ÷ `scale`: a scaled duration back on the §9 clock.
pub(crate) fn unscaled(ms: u64, scale: f64) -> u64 {
    if scale.is_finite() && scale > 0.0 {
        (ms as f64 / scale).min(u64::MAX as f64) as u64
    } else {
        ms
    }
}

/// A per-server jitter seed (≤ 2^53), stable per name.
pub(crate) fn seed_for(name: &str) -> u64 {
    let digest = mcp_reconcile_kernel::identity::sha256_hex(name.as_bytes());
    u64::from_str_radix(digest.get(..13).unwrap_or("0"), 16).unwrap_or(0)
}
