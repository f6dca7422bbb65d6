//! [`Host::spawn`] and the [`RunningSession`] it returns: the one way a host starts, and the
//! one way it stops.
//!
//! Every caller (the `watch` / `serve --no-daemon` session, a daemon session, an embedder, the
//! tests) used to build the control and file channels, start the watcher, spawn the drive
//! loop and send a shutdown by hand. Now [`Host::spawn`] does it and returns the session, which
//! owns the handle, the watcher, the loop's task and its stop signal (rmcp's `serve` returns
//! a `RunningService` the same way). [`RunningSession::shutdown`] stops the host and waits
//! for every server to be stopped; a session dropped without it stops the host all the same
//! (its drop guard), so no path leaves servers running after their session is gone.
//!
//! Event streams are subscribed before the host is spawned ([`Host::subscribe`], as many as
//! wanted) so that none misses an event; requests sent through [`Host::handle`] before the
//! spawn wait in the control channel and are answered once the loop runs.

use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use super::{Backend, Control, Host, HostHandle};
use crate::watcher::{self, Change, Watcher};

/// The two ends of a host's control channel: the sender is cloned into every
/// [`HostHandle`], the receiver is the drive loop's.
pub(super) struct ControlChannel {
    tx: mpsc::UnboundedSender<Control>,
    rx: mpsc::UnboundedReceiver<Control>,
}

impl ControlChannel {
    pub(super) fn new() -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        ControlChannel { tx, rx }
    }

    pub(super) fn handle(&self) -> HostHandle {
        HostHandle::new(self.tx.clone())
    }
}

/// A host spawned on the tokio runtime. Dropping it stops the host (send the stop signal; the
/// task then stops every server with its process group); [`RunningSession::shutdown`] does
/// the same and waits until it is done.
pub struct RunningSession {
    handle: HostHandle,
    /// `None` once sent.
    stop: Option<oneshot::Sender<()>>,
    /// `None` once awaited.
    task: Option<JoinHandle<()>>,
    /// The watch of the session's files, kept for as long as the session runs (`None` when the
    /// changes are fed by the caller).
    _watcher: Option<Watcher>,
}

impl<B: Backend> Host<B> {
    /// A handle to this host, usable before it is spawned: its requests wait until the loop
    /// runs (`run_session` claims the session socket with it before any server starts).
    pub fn handle(&self) -> HostHandle {
        self.control.handle()
    }

    /// Starts the session: watches [`Inputs::watched`](crate::inputs::Inputs::watched) and
    /// spawns the drive loop (`Host::run`) on the current tokio runtime.
    ///
    /// # Errors
    /// The files cannot be watched (nothing was started then).
    pub fn spawn(self) -> anyhow::Result<RunningSession> {
        let (tx, files) = mpsc::unbounded_channel();
        let watcher = watcher::watch(self.inputs.watched(), tx)?;
        Ok(self.spawn_with(files, Some(watcher)))
    }

    /// [`Host::spawn`] with the file changes fed by the caller instead of a watcher (tests that
    /// say exactly when a file changed; a host whose files never change).
    pub fn spawn_fed(self, files: mpsc::UnboundedReceiver<Change>) -> RunningSession {
        self.spawn_with(files, None)
    }

    fn spawn_with(
        mut self,
        files: mpsc::UnboundedReceiver<Change>,
        watcher: Option<Watcher>,
    ) -> RunningSession {
        let handle = self.handle();
        // The loop holds no sender of its own channel: when every handle is gone, it stops.
        let control = std::mem::replace(&mut self.control, ControlChannel::new());
        let ControlChannel { rx: control, .. } = control;
        let (stop, stopped) = oneshot::channel();
        let task = tokio::spawn(self.run(files, control, stopped));
        RunningSession {
            handle,
            stop: Some(stop),
            task: Some(task),
            _watcher: watcher,
        }
    }
}

impl RunningSession {
    /// The handle requests go through (clone it for a gateway, the session socket...).
    pub fn handle(&self) -> &HostHandle {
        &self.handle
    }

    /// Stops the host and returns once every one of its servers is stopped.
    ///
    /// # Errors
    /// The host's task panicked.
    pub async fn shutdown(mut self) -> Result<(), tokio::task::JoinError> {
        self.signal_stop();
        match self.task.take() {
            Some(task) => task.await,
            None => Ok(()),
        }
    }

    /// Tells the loop to stop (once).
    fn signal_stop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
    }
}

impl Drop for RunningSession {
    /// The guard: a session dropped without [`RunningSession::shutdown`] still stops its host,
    /// whose task then stops every server (nobody waits for it here).
    fn drop(&mut self) {
        self.signal_stop();
    }
}

impl std::fmt::Debug for RunningSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunningSession")
            .field("running", &self.stop.is_some())
            .finish_non_exhaustive()
    }
}
