//! Memory given back once a burst of work is over.
//!
//! A burst — thousands of calls in flight at once, a server's flood of log messages — makes a
//! long-lived process (the shared daemon above all) allocate hundreds of megabytes in many
//! small blocks across the allocator's per-thread arenas (tokio's workers each get one). Once
//! freed, glibc's `malloc` keeps those pages for reuse and never hands them to the system
//! while anything lives above them: after 10 000 concurrent calls the daemon kept ~500 MB.
//! So the requests forwarded by every connection of the process are counted ([`Work`]); when
//! the last one of a burst ends (nothing in flight, and enough done since the last time) and
//! nothing starts for [`QUIET`] — the answers are written and their memory freed, and a burst
//! that only paused is not over — the free pages of every arena go back to the system
//! (`malloc_trim`), once, on a blocking thread. Between bursts nothing is done: small ones
//! leave nothing worth giving back.

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::time::Duration;

/// Requests forwarded and log messages relayed since memory was last given back, past which
/// the end of a burst gives it back.
const BURST: usize = 512;

/// How long nothing may start after a burst before its memory is given back.
const QUIET: Duration = Duration::from_millis(500);

/// Requests in flight in this process.
static IN_FLIGHT: AtomicUsize = AtomicUsize::new(0);
/// Requests started in this process: a burst is over only if this did not change meanwhile.
static STARTED: AtomicU64 = AtomicU64::new(0);
/// Units of work done since memory was last given back.
static DONE: AtomicUsize = AtomicUsize::new(0);

/// A forwarded request in flight until dropped.
pub(super) struct Work(());

impl Work {
    /// Counts a request until the guard drops.
    pub(super) fn start() -> Work {
        STARTED.fetch_add(1, Ordering::AcqRel);
        IN_FLIGHT.fetch_add(1, Ordering::AcqRel);
        DONE.fetch_add(1, Ordering::Relaxed);
        Work(())
    }
}

impl Drop for Work {
    fn drop(&mut self) {
        if IN_FLIGHT.fetch_sub(1, Ordering::AcqRel) == 1 {
            burst_over();
        }
    }
}

/// Counts `n` units of work that hold memory without a request of their own (log messages
/// relayed).
pub(super) fn did(n: usize) {
    DONE.fetch_add(n, Ordering::Relaxed);
}

/// A watcher task is waiting for the quiet after a burst ([`burst_over`]).
static WATCHING: AtomicBool = AtomicBool::new(false);

/// Nothing is in flight: after a burst, gives its memory back once nothing has started for
/// [`QUIET`].
///
/// One watcher at a time: sequential calls bring the count to zero after every call, and a
/// timer task per call (thousands alive, each a wake-up half a second later) cost every call
/// its share of the process's time.
fn burst_over() {
    if DONE.load(Ordering::Relaxed) < BURST {
        return;
    }
    let Ok(runtime) = tokio::runtime::Handle::try_current() else {
        return give_back_after(STARTED.load(Ordering::Acquire));
    };
    if WATCHING.swap(true, Ordering::AcqRel) {
        return;
    }
    runtime.spawn(async move {
        let mut seen = STARTED.load(Ordering::Acquire);
        loop {
            tokio::time::sleep(QUIET).await;
            let started = STARTED.load(Ordering::Acquire);
            if started == seen && IN_FLIGHT.load(Ordering::Acquire) == 0 {
                WATCHING.store(false, Ordering::Release);
                tokio::task::spawn_blocking(move || give_back_after(started));
                return;
            }
            // Work went on (or is still in flight): wait for a quiet period after it.
            seen = started;
        }
    });
}

/// Gives the memory back unless work started since `started` or a burst's memory was given
/// back already.
fn give_back_after(started: u64) {
    if STARTED.load(Ordering::Acquire) == started && DONE.swap(0, Ordering::AcqRel) >= BURST {
        give_back();
    }
}

/// Returns the free pages of every malloc arena to the system.
#[cfg(all(target_os = "linux", target_env = "gnu"))]
#[allow(unsafe_code)]
fn give_back() {
    extern "C" {
        fn malloc_trim(pad: usize) -> std::ffi::c_int;
    }
    // SAFETY: glibc's `malloc_trim(3)` takes a byte count and only releases free memory of the
    // allocator's own arenas (under their locks); it touches no memory of ours and is safe to
    // call from any thread at any time.
    let _ = unsafe { malloc_trim(0) };
}

/// Other allocators give memory back on their own.
#[cfg(not(all(target_os = "linux", target_env = "gnu")))]
fn give_back() {}

#[cfg(test)]
mod tests {
    use super::*;

    /// Calls one after another end a burst each time; they leave one watcher for the quiet,
    /// not one timer task per call.
    #[tokio::test(flavor = "current_thread")]
    async fn sequential_calls_after_a_burst_keep_one_quiet_watcher() {
        DONE.fetch_add(BURST, Ordering::Relaxed);
        for _ in 0..200 {
            drop(Work::start());
        }
        let alive = tokio::runtime::Handle::current()
            .metrics()
            .num_alive_tasks();
        assert!(
            alive <= 1,
            "{alive} tasks wait for the quiet after 200 calls"
        );
    }
}
