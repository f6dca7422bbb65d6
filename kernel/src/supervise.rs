//! Supervision policy (SPEC §9): one connection's failure bookkeeping and
//! the status a host shows for it, with time passed in.
//!
//! A host (the session host, the shared pool, the TypeScript `Reconciler`)
//! keeps one [`Supervision`] per connection and tells it what happened —
//! a start began ([`Supervision::connecting`]), succeeded
//! ([`Supervision::connected`]), failed ([`Supervision::fail`]), a live
//! connection ended ([`Supervision::closed`]), the user forgave it
//! ([`Supervision::forgive`]) — and asks when it is due
//! ([`Supervision::retry_due`]) and how to show it ([`Supervision::view`]).
//! Delays come from [`backoff`]; a connection that stayed healthy for
//! [`HEALTHY_RESET`](crate::backoff::HEALTHY_RESET) starts over.

use crate::backoff::{attempts_after_health, backoff};
use crate::gating::Reason;
use crate::identity::sha256_hex;
use crate::json::{Object, Value};
use crate::plan::Status;
use crate::time::Millis;

/// How one connection is doing.
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(
    feature = "ts",
    derive(ts_rs::TS),
    ts(rename = "SupervisionState", rename_all = "camelCase")
)]
pub struct Supervision {
    /// Where the connection is in its life: starting, up, failed (see `attempts` and
    /// `retry_at`) or closed without a failure.
    pub status: Status,
    /// Consecutive failures (drives the backoff).
    #[cfg_attr(feature = "ts", ts(as = "Option<_>", optional = nullable))]
    pub attempts: u32,
    /// When a failed connection may be retried.
    #[cfg_attr(feature = "ts", ts(optional = nullable))]
    pub retry_at: Option<Millis>,
    /// Failed too often in a row (or can never work): not retried on a
    /// timer until its config changes or the user reconnects it.
    #[cfg_attr(feature = "ts", ts(as = "Option<_>", optional = nullable))]
    pub crash_loop: bool,
    /// The transport can never work here (`unsupported_transport`).
    #[cfg_attr(feature = "ts", ts(as = "Option<_>", optional = nullable))]
    pub unsupported: bool,
    /// The server needs an authorization the host does not have
    /// (`needs_auth`): not retried on a timer.
    #[cfg_attr(feature = "ts", ts(as = "Option<_>", optional = nullable))]
    pub needs_auth: bool,
    /// Since when it has been up (for the healthy reset).
    #[cfg_attr(feature = "ts", ts(optional = nullable))]
    pub healthy_since: Option<Millis>,
    /// The last error, as the host will show it (already redacted).
    #[cfg_attr(feature = "ts", ts(optional = nullable))]
    pub last_error: Option<String>,
}

/// What a host shows for a supervised connection (the `state`, `reason`,
/// `attempts`, `retryInMs` and `lastError` of `status --json`).
#[derive(Clone, Debug, PartialEq, Eq)]
#[cfg_attr(
    feature = "ts",
    derive(ts_rs::TS),
    ts(rename = "SupervisionView", rename_all = "camelCase")
)]
pub struct View {
    /// `connecting`, `connected`, `failed` or `disconnected`.
    pub state: Status,
    /// Why a failed connection is not up: `unsupported_transport`,
    /// `needs_auth`, `crash_loop` or `backing_off`; not set otherwise.
    pub reason: Option<Reason>,
    /// Consecutive failures since the connection was last healthy for long enough.
    pub attempts: u32,
    /// Milliseconds until a failed connection is retried (not set when it is
    /// not failed or will not be retried on a timer).
    pub retry_in_ms: Option<u64>,
    /// The last error, as the host recorded it (already redacted); cleared once the
    /// connection is up again.
    pub last_error: Option<String>,
}

impl Supervision {
    /// A start in progress, carrying the failure count and crash-loop state
    /// of earlier attempts.
    pub fn connecting(attempts: u32, crash_loop: bool) -> Self {
        Supervision {
            status: Status::Connecting,
            attempts,
            retry_at: None,
            crash_loop,
            unsupported: false,
            needs_auth: false,
            healthy_since: None,
            last_error: None,
        }
    }

    /// A start begins again for this connection (a retry): failures are kept.
    pub fn restart(&mut self) {
        self.status = Status::Connecting;
        self.needs_auth = false;
        self.retry_at = None;
        self.healthy_since = None;
    }

    /// The start succeeded. Failures are forgotten only once it stayed
    /// healthy (see [`Supervision::closed`]).
    pub fn connected(&mut self, now: Millis) {
        self.status = Status::Connected;
        self.needs_auth = false;
        self.last_error = None;
        self.healthy_since = Some(now);
    }

    /// A live connection ended on its own: failed, unless it had been healthy
    /// for [`HEALTHY_RESET`](crate::backoff::HEALTHY_RESET), in which case it
    /// starts over at attempt 1.
    pub fn closed(&mut self, seed: u64, error: String, now: Millis) {
        if let Some(since) = self.healthy_since {
            self.attempts = attempts_after_health(self.attempts, since, now);
        }
        self.fail(seed, error, now, false);
    }

    /// A start or a connection failed: one more consecutive failure, the
    /// [`backoff`] delay until the next retry, crash loop after too many (or
    /// at once for a transport that can never work).
    pub fn fail(&mut self, seed: u64, error: String, now: Millis, unsupported: bool) {
        self.status = Status::Failed;
        self.healthy_since = None;
        self.attempts = self.attempts.saturating_add(1);
        let delay = backoff(self.attempts, seed);
        self.unsupported = unsupported;
        self.needs_auth = false;
        self.crash_loop = delay.crash_loop || unsupported;
        self.retry_at = Some(now.saturating_add(delay.delay_ms));
        self.last_error = Some(error);
    }

    /// A start failed because the server wants an authorization the host
    /// does not have (no token, or its refresh was rejected). Retrying on a
    /// timer cannot help, so it is parked like a crash loop (a plan skips it)
    /// — without counting a failure — until new credentials, a reconnect or
    /// a config change.
    pub fn needs_auth(&mut self, error: String) {
        self.status = Status::Failed;
        self.healthy_since = None;
        self.unsupported = false;
        self.needs_auth = true;
        self.crash_loop = true;
        self.retry_at = None;
        self.last_error = Some(error);
    }

    /// Nobody who may run it holds it any more: it is not retried on a timer.
    pub fn park(&mut self) {
        self.retry_at = None;
        self.crash_loop = true;
    }

    /// Clears failure and crash-loop state (manual reconnect, reload).
    pub fn forgive(&mut self) {
        self.attempts = 0;
        self.crash_loop = false;
        self.retry_at = None;
    }

    /// When a failed connection is due for a retry (`None`: never, or not
    /// failed).
    pub fn retry_due(&self) -> Option<Millis> {
        (self.status == Status::Failed && !self.crash_loop)
            .then_some(self.retry_at)
            .flatten()
    }

    /// Whether a failed connection is due at `now`.
    pub fn is_due(&self, now: Millis) -> bool {
        self.retry_due().is_some_and(|at| at <= now)
    }

    /// How to show it at `now`.
    pub fn view(&self, now: Millis) -> View {
        let failed = self.status == Status::Failed;
        let reason = failed.then_some(if self.unsupported {
            Reason::UnsupportedTransport
        } else if self.needs_auth {
            Reason::NeedsAuth
        } else if self.crash_loop {
            Reason::CrashLoop
        } else {
            Reason::BackingOff
        });
        let retry_in_ms = self
            .retry_due()
            .filter(|_| !self.unsupported)
            .map(|at| at.0.saturating_sub(now.0));
        View {
            state: self.status,
            reason,
            attempts: self.attempts,
            retry_in_ms,
            last_error: self.last_error.clone(),
        }
    }
}

/// The default `maxRestarts` of a language server entry (SPEC §14.1).
pub const DEFAULT_MAX_RESTARTS: u32 = 8;

/// How often an entry lets a failed server be started again (a language server's
/// `restartOnCrash` and `maxRestarts`, SPEC §14.1): THE crash-loop rule beside the backoff's,
/// stepped by the session host and by the TypeScript executor (op `supervise`,
/// `restartPolicy`) alike.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RestartLimit {
    /// `restartOnCrash`: `false` never starts a failed server again.
    pub restart_on_crash: bool,
    /// `maxRestarts`: consecutive failures after which it is not started again (at least 1).
    pub max_restarts: u32,
}

impl Default for RestartLimit {
    fn default() -> Self {
        RestartLimit {
            restart_on_crash: true,
            max_restarts: DEFAULT_MAX_RESTARTS,
        }
    }
}

impl RestartLimit {
    /// The limit `entry` sets: `"restartOnCrash": false` opts out of restarts, a
    /// non-negative `maxRestarts` bounds them (0 counts as 1: the failure that happened);
    /// anything else keeps the default.
    pub fn of_entry(entry: &Object) -> Self {
        let mut limit = RestartLimit::default();
        if let Some(Value::Bool(false)) = entry.get("restartOnCrash") {
            limit.restart_on_crash = false;
        }
        if let Some(Value::Number(n)) = entry.get("maxRestarts") {
            if n.is_finite() && *n >= 0.0 {
                // Saturating float-to-int: a huge count is "practically never".
                limit.max_restarts = (n.ceil() as u32).max(1);
            }
        }
        limit
    }

    /// Whether a connection in state `s` may not be started again: it failed, and either
    /// restarts are off or it failed `maxRestarts` times in a row.
    pub fn exhausted(&self, s: &Supervision) -> bool {
        s.status == Status::Failed && (!self.restart_on_crash || s.attempts >= self.max_restarts)
    }
}

impl Supervision {
    /// Holds the connection to `limit` after a failure: one that may not start again is
    /// parked (no retry timer; it shows and plans as `crash_loop`) until its config changes,
    /// a reconnect or a reload.
    pub fn hold_to(&mut self, limit: RestartLimit) {
        if limit.exhausted(self) {
            self.park();
        }
    }
}

/// A per-connection jitter seed (≤ 2^53), stable per name: the first 13 hex
/// digits of the name's sha256.
pub fn seed_for(name: &str) -> u64 {
    let digest = sha256_hex(name.as_bytes());
    u64::from_str_radix(digest.get(..13).unwrap_or("0"), 16).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::backoff::{CRASH_LOOP_ATTEMPTS, HEALTHY_RESET, MAX_SEED};

    #[test]
    fn failures_back_off_then_crash_loop_and_forgiveness_starts_over() {
        let seed = seed_for("srv");
        assert!(seed <= MAX_SEED);
        let mut s = Supervision::connecting(0, false);
        let mut now = Millis(1_000);
        for attempt in 1..=CRASH_LOOP_ATTEMPTS {
            s.fail(seed, format!("boom {attempt}"), now, false);
            assert_eq!(s.attempts, attempt);
            let delay = backoff(attempt, seed).delay_ms;
            assert_eq!(s.retry_at, Some(now.saturating_add(delay)));
            let view = s.view(now);
            assert_eq!(view.state, Status::Failed);
            if attempt < CRASH_LOOP_ATTEMPTS {
                assert_eq!(view.reason, Some(Reason::BackingOff));
                assert_eq!(view.retry_in_ms, Some(delay));
                assert!(!s.is_due(now) && s.is_due(Millis(now.0 + delay)));
                s.restart();
            } else {
                assert_eq!(view.reason, Some(Reason::CrashLoop));
                assert_eq!((view.retry_in_ms, s.retry_due()), (None, None));
            }
            now = now.saturating_add(delay);
        }
        s.forgive();
        assert_eq!((s.attempts, s.crash_loop, s.retry_at), (0, false, None));
    }

    #[test]
    fn a_connection_healthy_for_five_minutes_starts_over() {
        let seed = seed_for("srv");
        let mut s = Supervision::connecting(3, false);
        s.connected(Millis(0));
        assert_eq!(s.view(Millis(5)).reason, None);
        s.closed(seed, "gone".into(), HEALTHY_RESET);
        assert_eq!(s.attempts, 1, "healthy long enough: attempt 1 again");

        let mut s = Supervision::connecting(3, false);
        s.connected(Millis(0));
        s.closed(seed, "gone".into(), Millis(HEALTHY_RESET.0 - 1));
        assert_eq!(s.attempts, 4, "not healthy long enough: counting on");
    }

    #[test]
    fn an_unsupported_transport_is_never_retried() {
        let mut s = Supervision::connecting(0, false);
        s.fail(seed_for("ws"), "websocket".into(), Millis(0), true);
        let view = s.view(Millis(0));
        assert_eq!(view.reason, Some(Reason::UnsupportedTransport));
        assert_eq!((view.retry_in_ms, s.retry_due()), (None, None));
    }

    #[test]
    fn a_server_that_needs_auth_waits_without_a_timer_or_a_failure_count() {
        let mut s = Supervision::connecting(2, false);
        s.needs_auth("run `mcp-reconcile auth api`".into());
        let view = s.view(Millis(0));
        assert_eq!(view.reason, Some(Reason::NeedsAuth));
        assert_eq!(
            (view.retry_in_ms, s.retry_due(), s.attempts),
            (None, None, 2)
        );
        assert!(!s.is_due(Millis(u64::MAX)));
        assert!(s.crash_loop, "a plan skips it like a crash loop");
        s.forgive();
        s.restart();
        assert_eq!(s.view(Millis(0)).reason, None, "a new start clears it");
        s.fail(seed_for("api"), "boom".into(), Millis(0), false);
        assert_eq!(s.view(Millis(0)).reason, Some(Reason::BackingOff));
    }

    #[test]
    fn seeds_are_the_hosts_seeds() {
        // The value the native host and the TypeScript bridge used before
        // the policy moved into the kernel (first 13 hex digits of sha256).
        assert_eq!(seed_for(""), 0x000e_3b0c_4429_8fc1);
    }

    /// An entry's fields, in order.
    type Fields<'a> = Vec<(&'a str, Value)>;

    fn lsp_entry(fields: &[(&str, Value)]) -> Object {
        fields
            .iter()
            .map(|(k, v)| ((*k).to_owned(), v.clone()))
            .collect()
    }

    /// `restartOnCrash` and `maxRestarts` decide when a failed server is parked, as a table.
    #[test]
    fn the_restart_limit_parks_a_server_after_its_max_restarts() {
        let n = |x: f64| Value::Number(x);
        // (entry fields, failures in a row, parked?)
        let table: Vec<(Fields<'_>, u32, bool)> = vec![
            (vec![], 7, false),
            (vec![], 8, true),
            (vec![("maxRestarts", n(2.0))], 1, false),
            (vec![("maxRestarts", n(2.0))], 2, true),
            (vec![("maxRestarts", n(0.0))], 1, true),
            (vec![("maxRestarts", n(-1.0))], 7, false),
            (vec![("maxRestarts", n(f64::NAN))], 8, true),
            (vec![("maxRestarts", Value::from("3"))], 3, false),
            (vec![("restartOnCrash", Value::Bool(false))], 1, true),
            (
                vec![
                    ("restartOnCrash", Value::Bool(true)),
                    ("maxRestarts", n(3.0)),
                ],
                2,
                false,
            ),
        ];
        for (fields, failures, parked) in table {
            let limit = RestartLimit::of_entry(&lsp_entry(&fields));
            let mut s = Supervision::connecting(0, false);
            for attempt in 0..failures {
                s.restart();
                s.fail(1, "boom".into(), Millis(u64::from(attempt)), false);
                s.hold_to(limit);
            }
            assert_eq!(s.crash_loop, parked, "{fields:?} after {failures}");
            assert_eq!(
                s.retry_due().is_none(),
                parked,
                "{fields:?} after {failures}"
            );
        }
    }

    /// Only a failed connection is ever held back.
    #[test]
    fn the_restart_limit_leaves_a_running_server_alone() {
        let limit = RestartLimit::of_entry(&lsp_entry(&[("restartOnCrash", Value::Bool(false))]));
        let mut s = Supervision::connecting(0, false);
        s.connected(Millis(5));
        s.hold_to(limit);
        assert!(!s.crash_loop && !limit.exhausted(&s));
    }
}
