//! [`HostHandle`]: what talks to a running [`Host`](super::Host) from other tasks (a gateway,
//! the session socket).

use mcp_reconcile_kernel::plan::Plan;
use tokio::sync::{mpsc, oneshot};

use super::Control;

/// The session behind a handle stopped (it is shutting down).
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
#[error("the mcp-reconcile session is shutting down")]
pub struct SessionGone;

/// Talks to a running host over its control channel.
#[derive(Clone, Debug)]
pub struct HostHandle {
    control: mpsc::UnboundedSender<Control>,
}

impl HostHandle {
    /// A handle over the sender whose receiver a host's drive loop reads (a host's own come
    /// from [`Host::handle`](super::Host::handle) and [`RunningSession::handle`](super::RunningSession::handle)).
    pub fn new(control: mpsc::UnboundedSender<Control>) -> Self {
        HostHandle { control }
    }

    /// Sends `request` without waiting for its answer (the reply channel inside it is the
    /// caller's to await): requests are handled in the order they are sent.
    ///
    /// # Errors
    /// [`SessionGone`].
    pub fn send(&self, request: Control) -> Result<(), SessionGone> {
        self.control.send(request).map_err(|_| SessionGone)
    }

    pub(crate) async fn ask<T>(
        &self,
        make: impl FnOnce(oneshot::Sender<T>) -> Control,
    ) -> Result<T, SessionGone> {
        ask(&self.control, make).await.ok_or(SessionGone)
    }

    /// Reloads the files now (no debounce) and clears crash loops; returns once the pass is
    /// queued.
    ///
    /// # Errors
    /// [`SessionGone`].
    pub async fn reload(&self) -> Result<(), SessionGone> {
        self.ask(Control::Reload).await
    }

    /// What a reconcile would do now from the live state (nothing executed).
    ///
    /// # Errors
    /// [`SessionGone`].
    pub async fn plan(&self) -> Result<Result<Plan, String>, SessionGone> {
        self.ask(Control::Plan).await
    }

    /// A reconnect asked together with the pool sessions `also` (the daemon's
    /// sessions of one file set): a process only they hold restarts once; one another session
    /// holds too while it runs is refused, with the reason.
    ///
    /// # Errors
    /// [`SessionGone`].
    pub async fn reconnect_with(
        &self,
        also: Vec<String>,
        server: Option<String>,
    ) -> Result<Result<Vec<String>, String>, SessionGone> {
        self.ask(|reply| Control::Reconnect {
            server,
            also,
            reply,
        })
        .await
    }
}

/// Sends the request `make` builds around a reply channel to the task behind `to` and waits
/// for the reply; `None` when that task is gone (or drops the request).
pub(crate) async fn ask<R, T>(
    to: &mpsc::UnboundedSender<R>,
    make: impl FnOnce(oneshot::Sender<T>) -> R,
) -> Option<T> {
    let (tx, rx) = oneshot::channel();
    to.send(make(tx)).ok()?;
    rx.await.ok()
}
