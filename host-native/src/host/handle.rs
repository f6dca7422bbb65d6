//! [`HostHandle`]: what talks to a running [`Host`](super::Host) from other tasks (a gateway,
//! the session socket).

use tokio::sync::{mpsc, oneshot};

use super::{Control, MergedCatalog, Route, StatusReport, Target};

/// Talks to a running host over its control channel.
#[derive(Clone, Debug)]
pub struct HostHandle {
    control: mpsc::UnboundedSender<Control>,
}

/// The host stopped (it is shutting down).
#[derive(Clone, Copy, Debug, thiserror::Error)]
#[error("the mcp-reconcile session is shutting down")]
pub struct HostGone;

impl HostHandle {
    /// A handle over the sender whose receiver was given to
    /// [`Host::run`](super::Host::run).
    pub fn new(control: mpsc::UnboundedSender<Control>) -> Self {
        HostHandle { control }
    }

    async fn ask<T>(
        &self,
        make: impl FnOnce(oneshot::Sender<T>) -> Control,
    ) -> Result<T, HostGone> {
        ask(&self.control, make).await.ok_or(HostGone)
    }

    /// The merged catalog (waits for the start pass).
    ///
    /// # Errors
    /// [`HostGone`].
    pub async fn catalog(&self) -> Result<MergedCatalog, HostGone> {
        self.ask(Control::Catalog).await
    }

    /// Where `target` goes, or the message for the caller.
    ///
    /// # Errors
    /// [`HostGone`].
    pub async fn route(&self, target: Target) -> Result<Result<Route, String>, HostGone> {
        self.ask(|tx| Control::Route(target, tx)).await
    }

    /// Every configured server's status.
    ///
    /// # Errors
    /// [`HostGone`].
    pub async fn status(&self) -> Result<StatusReport, HostGone> {
        self.ask(Control::Status).await
    }

    /// Asks the host to stop every server and return from `run`.
    pub fn shutdown(&self) {
        let _ = self.control.send(Control::Shutdown);
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
