//! [`Member`]: the [`Session`] an attached client's gateway fronts — its own session for the
//! catalog, routes, status and language servers, and its file set for a reload or a
//! reconnect, which reach every session of the daemon that reads the same files, as
//! `mcp-reconcile reload` and `mcp-reconcile reconnect` with the same flags do
//! ([`Registry::reload`], [`Registry::reconnect`]). So a management tool
//! (`serve --manage-tools`) does what the command does: a server two sessions of one project
//! share restarts once for both, instead of being refused as held elsewhere.

use super::registry::Registry;
use crate::host::{HostHandle, MergedCatalog, Route, SessionGone, StatusReport, Target};
use crate::lsp::tools::{LspRoute, LspUnavailable};
use crate::session::Session;

/// One attached session as its gateway sees it (see the module docs).
pub(super) struct Member {
    /// The session itself.
    pub(super) session: HostHandle,
    /// The daemon's live sessions.
    pub(super) registry: Registry,
    /// Its file set ([`Inputs::session_id`](crate::inputs::Inputs::session_id)).
    pub(super) id: String,
}

impl Session for Member {
    async fn catalog(&self) -> Result<MergedCatalog, SessionGone> {
        self.session.catalog().await
    }

    async fn route(&self, target: Target) -> Result<Result<Route, String>, SessionGone> {
        self.session.route(target).await
    }

    async fn status(&self) -> Result<StatusReport, SessionGone> {
        self.session.status().await
    }

    async fn reload(&self) -> Result<(), SessionGone> {
        if self.registry.reload(&self.id).await == 0 {
            // Not registered (yet, or any more): this session alone.
            return self.session.reload().await;
        }
        Ok(())
    }

    async fn reconnect(
        &self,
        server: Option<String>,
    ) -> Result<Result<Vec<String>, String>, SessionGone> {
        match self.registry.reconnect(&self.id, server.clone()).await {
            Some(answer) => answer,
            None => Session::reconnect(&self.session, server).await,
        }
    }

    async fn language(
        &self,
        extension: String,
    ) -> Result<Result<LspRoute, LspUnavailable>, SessionGone> {
        self.session.language(extension).await
    }
}
