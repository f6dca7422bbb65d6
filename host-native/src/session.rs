//! [`Session`]: what a gateway fronts — one client-facing set of servers.
//!
//! A running session's [`HostHandle`] implements it, whatever the session's backend: its own
//! processes (`watch`, `serve --no-daemon`), or its holds on a shared pool
//! ([`Host::in_pool`](crate::host::Host::in_pool): a daemon session, or a Rust host that shares
//! one pool between several sessions). [`Gateway`](crate::gateway::Gateway) serves it without
//! knowing which: the merged catalog, where a request goes, every configured server's status,
//! a reload and a reconnect.

use std::future::Future;

use crate::host::{Control, HostHandle, MergedCatalog, Route, StatusReport, Target};
use crate::lsp::tools::{LspRoute, LspUnavailable};

pub use crate::host::SessionGone;

/// One client-facing session over a set of servers.
pub trait Session: Send + Sync + 'static {
    /// The merged catalog: every connected server's tools, prompts and resources under the
    /// names a client sees.
    fn catalog(&self) -> impl Future<Output = Result<MergedCatalog, SessionGone>> + Send;

    /// Where `target` goes, or the message for the caller (for a tool, the §4
    /// tool-not-found message).
    fn route(
        &self,
        target: Target,
    ) -> impl Future<Output = Result<Result<Route, String>, SessionGone>> + Send;

    /// Every configured server's status, in settings order.
    fn status(&self) -> impl Future<Output = Result<StatusReport, SessionGone>> + Send;

    /// Reads the files again now (no debounce) and clears crash loops, as
    /// `mcp-reconcile reload` does; returns once the pass is queued.
    fn reload(&self) -> impl Future<Output = Result<(), SessionGone>> + Send;

    /// Clears the failure state of `server` (every server when `None`) and restarts it now;
    /// the servers restarted, or why none could be.
    fn reconnect(
        &self,
        server: Option<String>,
    ) -> impl Future<Output = Result<Result<Vec<String>, String>, SessionGone>> + Send;

    /// The running language server for files with `extension` (`.json`), or the message for
    /// the caller (SPEC §14.5). A session without language servers has none.
    fn language(
        &self,
        extension: String,
    ) -> impl Future<Output = Result<Result<LspRoute, LspUnavailable>, SessionGone>> + Send {
        async move {
            Ok(Err(LspUnavailable::because(format!(
                "no language server handles {extension} files in this session"
            ))))
        }
    }
}

impl Session for HostHandle {
    /// Waits for the start pass at most the session's start grace (see [`Control::Catalog`]).
    async fn catalog(&self) -> Result<MergedCatalog, SessionGone> {
        self.ask(Control::Catalog).await
    }

    async fn route(&self, target: Target) -> Result<Result<Route, String>, SessionGone> {
        self.ask(|tx| Control::Route(target, tx)).await
    }

    async fn status(&self) -> Result<StatusReport, SessionGone> {
        self.ask(Control::Status).await
    }

    async fn reload(&self) -> Result<(), SessionGone> {
        HostHandle::reload(self).await
    }

    async fn reconnect(
        &self,
        server: Option<String>,
    ) -> Result<Result<Vec<String>, String>, SessionGone> {
        self.reconnect_with(Vec::new(), server).await
    }

    async fn language(
        &self,
        extension: String,
    ) -> Result<Result<LspRoute, LspUnavailable>, SessionGone> {
        self.ask(|tx| Control::Language(extension, tx)).await
    }
}
