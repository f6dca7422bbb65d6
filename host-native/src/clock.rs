//! The clock a session host or the shared pool reads for everything it schedules: debounce,
//! retry delays (SPEC §9), the healthy window, the drain delay, the start-pass wait.
//!
//! In production it is tokio's clock ([`Clock::tokio`], so `tokio::time::pause` applies too). A
//! test that runs real server processes cannot pause tokio — a paused runtime jumps to the next
//! timer whenever it waits on a child's pipe, and would fire I/O timeouts — so it hands the host
//! a [`ManualClock`] and moves supervision time itself: a crash loop is eight
//! [`advance`](ManualClock::advance)s, not minutes, and nothing depends on how fast the machine
//! is. Timeouts of I/O (initialize, calls) stay on tokio's clock either way.

use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use mcp_reconcile_kernel::Millis;
use tokio::sync::watch;

/// Milliseconds since the clock was made; cheap to clone (clones read the same time).
#[derive(Clone, Debug)]
pub struct Clock(Kind);

#[derive(Clone, Debug)]
enum Kind {
    Tokio(tokio::time::Instant),
    Manual(Arc<watch::Sender<u64>>),
}

impl Default for Clock {
    fn default() -> Self {
        Clock::tokio()
    }
}

impl Clock {
    /// Tokio's clock, starting at zero now.
    pub fn tokio() -> Clock {
        Clock(Kind::Tokio(tokio::time::Instant::now()))
    }

    /// Now.
    pub fn now(&self) -> Millis {
        match &self.0 {
            Kind::Tokio(epoch) => {
                Millis(u64::try_from(epoch.elapsed().as_millis()).unwrap_or(u64::MAX))
            }
            Kind::Manual(time) => Millis(*time.borrow()),
        }
    }

    /// Completes once the clock reads `at` or later (fixed when called); never without one.
    pub fn sleep_until(&self, at: Option<Millis>) -> impl Future<Output = ()> + Send + 'static {
        let kind = self.0.clone();
        async move {
            let Some(at) = at else {
                return std::future::pending().await;
            };
            match kind {
                Kind::Tokio(epoch) => {
                    tokio::time::sleep_until(epoch + Duration::from_millis(at.0)).await;
                }
                Kind::Manual(time) => {
                    let mut rx = time.subscribe();
                    // The sender lives as long as this clock's clones: `changed` only fails
                    // when nobody can move the time any more.
                    if rx.wait_for(|now| *now >= at.0).await.is_err() {
                        std::future::pending::<()>().await;
                    }
                }
            }
        }
    }
}

/// A clock that moves only when told (tests); [`ManualClock::clock`] is what a host reads.
#[derive(Clone, Debug)]
pub struct ManualClock(Arc<watch::Sender<u64>>);

impl Default for ManualClock {
    fn default() -> Self {
        ManualClock::new()
    }
}

impl ManualClock {
    /// At zero.
    pub fn new() -> ManualClock {
        ManualClock(Arc::new(watch::Sender::new(0)))
    }

    /// The clock to hand a host or pool.
    pub fn clock(&self) -> Clock {
        Clock(Kind::Manual(Arc::clone(&self.0)))
    }

    /// Moves the time forward by `by`; every sleep that is due now completes.
    pub fn advance(&self, by: Duration) {
        let by = u64::try_from(by.as_millis()).unwrap_or(u64::MAX);
        self.0.send_modify(|now| *now = now.saturating_add(by));
    }

    /// Now.
    pub fn now(&self) -> Millis {
        Millis(*self.0.borrow())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_manual_sleep_ends_when_the_time_is_advanced_past_it_and_not_before() {
        let manual = ManualClock::new();
        let clock = manual.clock();
        let mut sleep = tokio::spawn(clock.sleep_until(Some(Millis(1000))));
        manual.advance(Duration::from_millis(999));
        assert!(
            tokio::time::timeout(Duration::from_millis(50), &mut sleep)
                .await
                .is_err(),
            "not due at 999 ms"
        );
        manual.advance(Duration::from_millis(1));
        tokio::time::timeout(Duration::from_secs(5), sleep)
            .await
            .expect("due at 1000 ms")
            .expect("sleep task");
        assert_eq!(clock.now(), Millis(1000));
    }

    #[tokio::test(start_paused = true)]
    async fn the_tokio_clock_follows_paused_time() {
        let clock = Clock::tokio();
        tokio::time::advance(Duration::from_secs(300)).await;
        assert_eq!(clock.now(), Millis(300_000));
        clock.sleep_until(Some(Millis(300_000))).await;
        clock.sleep_until(Some(Millis(301_000))).await;
        assert_eq!(clock.now(), Millis(301_000));
    }
}
