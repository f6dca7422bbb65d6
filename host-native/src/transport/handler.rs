//! [`Handler`]: the client side of a server connection — it hears the server's notifications
//! (`list_changed`, progress, log messages) and answers its requests (elicitation, sampling,
//! roots) by relaying them to the real client ([`Askers`]).

use std::sync::Arc;

// Sampling, roots and logging are deprecated by SEP-2577 (gone from protocol 2026-07-28); the
// versions this client speaks have them, and servers behind the gateway use them.
use rmcp::model::{
    ClientCapabilities, ClientConfig, ElicitRequestParams, ElicitResult, ElicitationAction,
    ElicitationCapability, FormElicitationCapability, Implementation, ProgressNotificationParam,
    ProtocolVersion, ResourceUpdatedNotificationParam,
};
#[allow(deprecated)]
use rmcp::model::{
    CreateMessageRequestParams, CreateMessageResult, ListRootsResult,
    LoggingMessageNotificationParam,
};
use rmcp::service::ServiceError;
use rmcp::{ClientHandler, RoleClient};
use tokio::sync::Notify;

use super::progress::ProgressRouter;
use super::relay::Askers;
use super::session::describe_service_error;
use super::{Ctx, ElicitationResponder};

/// The client side of the session: answers the server's notifications.
#[derive(Clone)]
pub(super) struct Handler {
    relist: Arc<Notify>,
    pub(super) progress: ProgressRouter,
    elicitation: Option<ElicitationResponder>,
    /// The real clients the server's requests and log messages are relayed to.
    askers: Askers,
    /// The server's name: the `logger` of its relayed log messages.
    server: String,
}

impl Handler {
    pub(super) fn new(
        relist: Arc<Notify>,
        elicitation: Option<ElicitationResponder>,
        ctx: &Ctx,
    ) -> Self {
        Handler {
            relist,
            progress: ProgressRouter::default(),
            elicitation,
            askers: ctx.askers.clone(),
            server: ctx.name.clone(),
        }
    }
}

/// A relayed request that failed at the client, as this side's error.
fn relay_failed(what: &str, error: ServiceError) -> rmcp::ErrorData {
    match error {
        ServiceError::McpError(error) => error,
        other => rmcp::ErrorData::internal_error(
            format!(
                "relaying {what} to the client failed: {}",
                describe_service_error(&other)
            ),
            None,
        ),
    }
}

#[allow(deprecated)]
impl ClientHandler for Handler {
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: rmcp::service::NotificationContext<RoleClient>,
    ) {
        self.progress.dispatch(params);
    }

    async fn on_tool_list_changed(&self, _context: rmcp::service::NotificationContext<RoleClient>) {
        self.relist.notify_one();
    }

    async fn on_prompt_list_changed(
        &self,
        _context: rmcp::service::NotificationContext<RoleClient>,
    ) {
        self.relist.notify_one();
    }

    async fn on_resource_list_changed(
        &self,
        _context: rmcp::service::NotificationContext<RoleClient>,
    ) {
        self.relist.notify_one();
    }

    /// Relayed to the client (see [`Askers`]) with the server named in `logger`.
    async fn on_logging_message(
        &self,
        mut params: LoggingMessageNotificationParam,
        _context: rmcp::service::NotificationContext<RoleClient>,
    ) {
        params.logger = Some(match params.logger.take() {
            Some(logger) if !logger.is_empty() => format!("{}/{logger}", self.server),
            _ => self.server.clone(),
        });
        for peer in self.askers.listeners() {
            let _ = peer.notify_logging_message(params.clone()).await;
        }
    }

    /// Relayed to the clients subscribed to the resource.
    async fn on_resource_updated(
        &self,
        params: ResourceUpdatedNotificationParam,
        _context: rmcp::service::NotificationContext<RoleClient>,
    ) {
        for peer in self.askers.subscribers(&params.uri) {
            let _ = peer.notify_resource_updated(params.clone()).await;
        }
    }

    /// Asks the real client (see [`Askers`]); without one that can, the responder this
    /// connection was made with, else declined.
    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: rmcp::service::RequestContext<RoleClient>,
    ) -> Result<ElicitResult, rmcp::ErrorData> {
        if let Some(peer) = self.askers.pick(|c| c.elicitation.is_some()) {
            let relayed =
                rmcp::model::ServerRequest::ElicitRequest(rmcp::model::ElicitRequest::new(request));
            return match peer.send_request(relayed).await {
                Ok(rmcp::model::ClientResult::ElicitResult(result)) => Ok(result),
                Ok(_) => Err(relay_failed(
                    "elicitation/create",
                    ServiceError::UnexpectedResponse,
                )),
                Err(e) => Err(relay_failed("elicitation/create", e)),
            };
        }
        Ok(match &self.elicitation {
            Some(responder) => responder(request).await,
            None => ElicitResult::new(ElicitationAction::Decline),
        })
    }

    /// Relayed to the real client that can sample (see [`Askers`]).
    async fn create_message(
        &self,
        params: CreateMessageRequestParams,
        _context: rmcp::service::RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, rmcp::ErrorData> {
        let Some(peer) = self.askers.pick(|c| c.sampling.is_some()) else {
            return Err(rmcp::ErrorData::invalid_request(
                "no client of mcp-reconcile that supports sampling is connected",
                None,
            ));
        };
        peer.create_message(params)
            .await
            .map_err(|e| relay_failed("sampling/createMessage", e))
    }

    /// The real client's roots (see [`Askers`]); none without a client that has them.
    async fn list_roots(
        &self,
        _context: rmcp::service::RequestContext<RoleClient>,
    ) -> Result<ListRootsResult, rmcp::ErrorData> {
        match self.askers.pick(|c| c.roots.is_some()) {
            Some(peer) => peer
                .list_roots()
                .await
                .map_err(|e| relay_failed("roots/list", e)),
            None => Ok(ListRootsResult::default()),
        }
    }

    /// The newest protocol version that begins with `initialize` (the handshake this client
    /// runs). Elicitation, sampling and roots are declared: the server's requests are relayed
    /// to the real client when one that offers them is there (a connection is made before any
    /// client, and may serve several), and answered without one as [`Askers`] says.
    fn get_info(&self) -> ClientConfig {
        let mut capabilities = ClientCapabilities::default();
        let mut elicitation = ElicitationCapability::default();
        elicitation.form = Some(FormElicitationCapability::default());
        capabilities.elicitation = Some(elicitation);
        capabilities.sampling = Some(Default::default());
        capabilities.roots = Some(Default::default());
        ClientConfig::new(
            capabilities,
            Implementation::new("mcp-reconcile", env!("CARGO_PKG_VERSION")),
        )
        .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
    }
}
