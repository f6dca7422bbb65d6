//! [`Member`]: the [`Session`] an attached client's gateway fronts — its own session for the
//! catalog, routes, status, language servers and a reconnect, and its file set for a reload,
//! which reaches every session of the daemon that reads the same files, as `mcp-reconcile
//! reload` with the same flags does ([`Registry::reload`]).
//!
//! A reconnect asked through the gateway (`serve --manage-tools`: an agent's tool) is the
//! session's alone: a process another session holds too — even one of the same project — is
//! not restarted under that session's calls, it is refused with the reason. Only a person's
//! `mcp-reconcile reconnect` asks for every session of the file set together
//! ([`Registry::reconnect`]).

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

    /// This session's reconnect only (see the module docs).
    async fn reconnect(
        &self,
        server: Option<String>,
    ) -> Result<Result<Vec<String>, String>, SessionGone> {
        Session::reconnect(&self.session, server).await
    }

    async fn language(
        &self,
        extension: String,
    ) -> Result<Result<LspRoute, LspUnavailable>, SessionGone> {
        self.session.language(extension).await
    }
}
