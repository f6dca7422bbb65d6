//! [`DaemonSession`]: what the gateway of one attached session and the daemon's registry see
//! of it — the pool session (read), and the way to the session's loop ([`Control`]), which owns
//! its files and language servers.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use mcp_reconcile_kernel::plan::Plan;
use tokio::sync::{mpsc, oneshot, RwLock};

use crate::host::{LspServerStatus, MergedCatalog, Route, StatusReport, Target};
use crate::lsp::tools::{LspRoute, LspUnavailable};
use crate::pool::PoolSession;
use crate::session::{Session, SessionGone};

/// What the session's loop is asked to do (it owns the files and the language servers).
pub(super) enum Control {
    /// Reload every file and apply now.
    Reload(oneshot::Sender<()>),
    /// Dry run against the files as they are now.
    Plan(oneshot::Sender<Result<Plan, String>>),
    /// The running language server for an extension.
    Language(String, oneshot::Sender<Result<LspRoute, LspUnavailable>>),
    /// The language servers as `status` shows them.
    Languages(oneshot::Sender<Vec<LspServerStatus>>),
}

/// A [`PoolSession`] shared by the gateway (reads) and the reload loop (applies), and the way
/// to that loop.
#[derive(Clone)]
pub struct DaemonSession {
    pub(super) pool: Arc<RwLock<PoolSession>>,
    pub(super) control: mpsc::UnboundedSender<Control>,
    /// Whether a language server is configured: the session then offers the language tools.
    pub(super) languages: Arc<AtomicBool>,
}

impl DaemonSession {
    /// This session's name in the pool.
    pub(super) async fn name(&self) -> String {
        self.pool.read().await.name().to_owned()
    }

    /// `reconnect` asked by this session and the sessions named `also` together (one file
    /// set): a process only they hold restarts once; one another session holds too while it
    /// runs is refused, with the reason.
    pub(super) async fn reconnect_together(
        &self,
        also: &[String],
        server: Option<String>,
    ) -> Result<Result<Vec<String>, String>, SessionGone> {
        let done = self
            .pool
            .read()
            .await
            .reconnect_together(also, server.as_deref())
            .await
            .map_err(|_| SessionGone)?;
        Ok(match done.refusal() {
            Some(refusal) if done.restarted.is_empty() => Err(refusal),
            _ => Ok(done.restarted),
        })
    }

    /// Asks the session's loop; `None` once it is gone.
    pub(super) async fn control<T>(
        &self,
        make: impl FnOnce(oneshot::Sender<T>) -> Control,
    ) -> Option<T> {
        crate::host::ask(&self.control, make).await
    }
}

impl Session for DaemonSession {
    async fn catalog(&self) -> Result<MergedCatalog, SessionGone> {
        let mut catalog = self
            .pool
            .read()
            .await
            .catalog()
            .await
            .map_err(|_| SessionGone)?;
        if self.languages.load(Ordering::Relaxed) {
            catalog.tools.extend(crate::lsp::tools::definitions());
        }
        Ok(catalog)
    }

    async fn route(&self, target: Target) -> Result<Result<Route, String>, SessionGone> {
        self.pool
            .read()
            .await
            .route(target)
            .await
            .map_err(|_| SessionGone)
    }

    async fn status(&self) -> Result<StatusReport, SessionGone> {
        let mut report = self
            .pool
            .read()
            .await
            .status()
            .await
            .map_err(|_| SessionGone)?;
        report.language_servers = self.control(Control::Languages).await.unwrap_or_default();
        Ok(report)
    }

    async fn reconnect(
        &self,
        server: Option<String>,
    ) -> Result<Result<Vec<String>, String>, SessionGone> {
        Session::reconnect(&*self.pool.read().await, server).await
    }

    async fn language(
        &self,
        extension: String,
    ) -> Result<Result<LspRoute, LspUnavailable>, SessionGone> {
        self.control(|tx| Control::Language(extension, tx))
            .await
            .ok_or(SessionGone)
    }
}
