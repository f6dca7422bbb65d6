//! The one thread every server process is forked from.
//!
//! `PR_SET_PDEATHSIG` (set in each child, [`crate::transport`]) fires when the *thread* that
//! forked the child exits, not only when the process does. Tokio retires threads: a worker that
//! ran `block_in_place` becomes a blocking-pool thread, and idle blocking threads exit after
//! 10 s — killing every server forked from them. So no server is forked from a runtime thread:
//! the fork runs here, on a plain thread that lives as long as the process, inside the calling
//! runtime's context (the child is registered with that runtime's process driver).

use std::sync::mpsc;
use std::sync::{Mutex, OnceLock, PoisonError};

type Job = Box<dyn FnOnce() + Send>;

static FORKER: OnceLock<Mutex<mpsc::Sender<Job>>> = OnceLock::new();

/// Runs `fork` (which forks a child) on the forker thread, in the current tokio runtime's
/// context, and returns its result. Blocks the caller for as long as the fork takes.
pub(crate) fn fork<T: Send + 'static>(fork: impl FnOnce() -> T + Send + 'static) -> T {
    let runtime = tokio::runtime::Handle::try_current().ok();
    let (reply, result) = mpsc::sync_channel(1);
    let job: Job = Box::new(move || {
        let _context = runtime.as_ref().map(tokio::runtime::Handle::enter);
        let _ = reply.send(fork());
    });
    let sender = FORKER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<Job>();
        let started = std::thread::Builder::new()
            .name("mcp-reconcile-forker".into())
            .spawn(move || {
                while let Ok(job) = rx.recv() {
                    job();
                }
            });
        if let Err(e) = started {
            tracing::error!("cannot start the forker thread: {e}");
        }
        Mutex::new(tx)
    });
    let sent = sender
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .send(job);
    if let Err(mpsc::SendError(job)) = sent {
        // No forker thread (it could not be started): fork here rather than not at all.
        job();
    }
    result
        .recv()
        .expect("the forker runs every job it is given and replies")
}
