//! [`Handler`]: the client side of a server connection — it hears the server's notifications
//! (`list_changed`, progress, log messages) and answers its requests (elicitation, sampling,
//! roots) by relaying them to the real client ([`Askers`]).

use std::sync::Arc;
use std::time::Duration;

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
use rmcp::service::{PeerRequestOptions, ServiceError};
use rmcp::{ClientHandler, RoleClient};
use tokio::sync::Notify;

use super::describe::describe_service_error;
use super::progress::ProgressRouter;
use super::relay::{Askers, Owner, Question, Unowned};
use super::{Ctx, ElicitationResponder, SERVICE_CLOSE};

/// The client side of the session: answers the server's notifications.
#[derive(Clone)]
pub(super) struct Handler {
    pub(super) relist: Arc<Notify>,
    pub(super) progress: ProgressRouter,
    elicitation: Option<ElicitationResponder>,
    /// The real clients the server's requests and log messages are relayed to.
    pub(super) askers: Askers,
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

    /// Relays one log message to the client it belongs to; drops it when it belongs to none.
    #[allow(deprecated)]
    async fn relay_log(&self, mut params: LoggingMessageNotificationParam) {
        let owner = match self.askers.owner_of(None) {
            Ok(owner) => owner,
            Err(why) => {
                tracing::debug!(server = %self.server, "log message dropped: {why}");
                return;
            }
        };
        let wanted = match &owner.questions {
            // A 2026-07-28 client gets log messages only at the level its request asked for.
            Some(questions) => questions
                .log_level
                .is_some_and(|asked| params.level as u8 >= asked as u8),
            None => self.askers.wants(&owner.peer, params.level),
        };
        if !wanted {
            return;
        }
        params.logger = Some(match params.logger.take() {
            Some(logger) if !logger.is_empty() => format!("{}/{logger}", self.server),
            _ => self.server.clone(),
        });
        self.askers.log(&self.server, owner, params).await;
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

    /// Relayed to the client it belongs to (see [`Askers`]) with the server named in
    /// `logger`; dropped when it belongs to no single client.
    async fn on_logging_message(
        &self,
        params: LoggingMessageNotificationParam,
        _context: rmcp::service::NotificationContext<RoleClient>,
    ) {
        self.relay_log(params).await;
        self.askers.log_relayed();
        super::idle::did(1);
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

    /// Asks the client it belongs to (see [`Askers`]); with no client at all, the responder
    /// this connection was made with; else declined.
    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        context: rmcp::service::RequestContext<RoleClient>,
    ) -> Result<ElicitResult, rmcp::ErrorData> {
        const WHAT: &str = "elicitation/create";
        let decline = || Ok(ElicitResult::new(ElicitationAction::Decline));
        let owner = match self.askers.owner_of(origin(&context)) {
            Ok(owner) => owner,
            Err(Unowned::NoClient) => {
                return Ok(match &self.elicitation {
                    Some(responder) => responder(request).await,
                    None => ElicitResult::new(ElicitationAction::Decline),
                })
            }
            Err(why) => {
                tracing::info!(server = %self.server, "{WHAT} declined: {why}");
                return decline();
            }
        };
        if !owner.offers(|c| c.elicitation.is_some()) {
            tracing::info!(server = %self.server, "{WHAT} declined: the client of the call does not support it");
            return decline();
        }
        let Some(_relaying) = self.askers.relaying(&self.server, WHAT) else {
            return decline();
        };
        let relayed =
            rmcp::model::ServerRequest::ElicitRequest(rmcp::model::ElicitRequest::new(request));
        let wait = self.askers.limits().elicitation;
        match relay(&owner, relayed, wait, &context.ct).await {
            Ok(rmcp::model::ClientResult::ElicitResult(result)) => Ok(result),
            Ok(_) => Err(relay_failed(WHAT, ServiceError::UnexpectedResponse)),
            Err(Relay::TimedOut) => {
                tracing::info!(server = %self.server, "{WHAT} got no answer within {} s; cancelled", wait.as_secs());
                Ok(ElicitResult::new(ElicitationAction::Cancel))
            }
            Err(Relay::Failed(e)) => Err(relay_failed(WHAT, e)),
        }
    }

    /// Relayed to the client it belongs to (see [`Askers`]) if it can sample.
    async fn create_message(
        &self,
        params: CreateMessageRequestParams,
        context: rmcp::service::RequestContext<RoleClient>,
    ) -> Result<CreateMessageResult, rmcp::ErrorData> {
        const WHAT: &str = "sampling/createMessage";
        let refuse = |why: String| {
            tracing::info!(server = %self.server, "{WHAT} refused: {why}");
            Err(rmcp::ErrorData::invalid_request(
                format!("mcp-reconcile relays no {WHAT} here: {why}"),
                None,
            ))
        };
        let owner = match self.askers.owner_of(origin(&context)) {
            Ok(owner) => owner,
            Err(why) => return refuse(why.to_string()),
        };
        if !owner.offers(|c| c.sampling.is_some()) {
            return refuse("the client of the call does not support sampling".to_owned());
        }
        let Some(_relaying) = self.askers.relaying(&self.server, WHAT) else {
            return refuse("too many requests of this server wait for an answer".to_owned());
        };
        let relayed = rmcp::model::ServerRequest::CreateMessageRequest(
            rmcp::model::CreateMessageRequest::new(params),
        );
        let wait = self.askers.limits().sampling;
        match relay(&owner, relayed, wait, &context.ct).await {
            Ok(rmcp::model::ClientResult::CreateMessageResult(result)) => Ok(*result),
            Ok(_) => Err(relay_failed(WHAT, ServiceError::UnexpectedResponse)),
            Err(Relay::TimedOut) => refuse(format!("no answer within {} s", wait.as_secs())),
            Err(Relay::Failed(e)) => Err(relay_failed(WHAT, e)),
        }
    }

    /// The roots of the client it belongs to (see [`Askers`]); none without one that has
    /// them.
    async fn list_roots(
        &self,
        context: rmcp::service::RequestContext<RoleClient>,
    ) -> Result<ListRootsResult, rmcp::ErrorData> {
        const WHAT: &str = "roots/list";
        let none = |why: String| {
            tracing::info!(server = %self.server, "{WHAT} answered with no roots: {why}");
            Ok(ListRootsResult::default())
        };
        let owner = match self.askers.roots_owner(origin(&context)) {
            Ok(owner) => owner,
            Err(why) => return none(why.to_string()),
        };
        if !owner.offers(|c| c.roots.is_some()) {
            return Ok(ListRootsResult::default());
        }
        let Some(_relaying) = self.askers.relaying(&self.server, WHAT) else {
            return none("too many requests of this server wait for an answer".to_owned());
        };
        let relayed = rmcp::model::ServerRequest::ListRootsRequest(Default::default());
        let wait = self.askers.limits().roots;
        match relay(&owner, relayed, wait, &context.ct).await {
            Ok(rmcp::model::ClientResult::ListRootsResult(result)) => Ok(result),
            Ok(_) => Err(relay_failed(WHAT, ServiceError::UnexpectedResponse)),
            Err(Relay::TimedOut) => none(format!(
                "the client did not answer within {} s",
                wait.as_secs()
            )),
            Err(Relay::Failed(e)) => Err(relay_failed(WHAT, e)),
        }
    }

    /// The newest protocol version that begins with `initialize` (the handshake this client
    /// runs). Elicitation, sampling and roots are declared: the server's requests are relayed
    /// to the real client when one that offers them is there (a connection is made before any
    /// client, and may serve several), and answered without one as [`Askers`] says. The MCP
    /// Apps extension is declared so that UI tools reach the clients that render them
    /// (`transport/apps.rs`).
    fn get_info(&self) -> ClientConfig {
        let mut capabilities = ClientCapabilities::default();
        let mut elicitation = ElicitationCapability::default();
        elicitation.form = Some(FormElicitationCapability::default());
        capabilities.elicitation = Some(elicitation);
        capabilities.sampling = Some(Default::default());
        capabilities.roots = Some(Default::default());
        // MCP Apps: declared for every connection, which may serve any client.
        super::apps::declare_ui(&mut capabilities);
        ClientConfig::new(
            capabilities,
            Implementation::new("mcp-reconcile", env!("CARGO_PKG_VERSION")),
        )
        .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
    }
}

/// Where a server's request arrived, when the transport tells (streamable HTTP).
fn origin(
    context: &rmcp::service::RequestContext<RoleClient>,
) -> Option<&rmcp::service::InboundStreamOrigin> {
    context
        .extensions
        .get::<rmcp::service::InboundStreamOrigin>()
}

/// How a relayed request ended without an answer.
pub(super) enum Relay {
    TimedOut,
    Failed(ServiceError),
}

/// Sends `request` to the `owner`'s client and waits for its answer, at most `wait` in all (a
/// client that reads nothing holds the send too); the server cancelling its request cancels it
/// at the client too. A client of 2026-07-28 gets it through its call's question queue.
pub(super) async fn relay(
    owner: &Owner,
    request: rmcp::model::ServerRequest,
    wait: Duration,
    cancel: &tokio_util::sync::CancellationToken,
) -> Result<rmcp::model::ClientResult, Relay> {
    let deadline = tokio::time::sleep(wait);
    tokio::pin!(deadline);
    let cancelled = || Relay::Failed(ServiceError::Cancelled { reason: None });
    if let Some(questions) = &owner.questions {
        let (answer, answered) = tokio::sync::oneshot::channel();
        let question = Question { request, answer };
        tokio::select! {
            sent = questions.queue.send(question) => {
                sent.map_err(|_| Relay::Failed(ServiceError::TransportClosed))?;
            }
            () = &mut deadline => return Err(Relay::TimedOut),
            () = cancel.cancelled() => return Err(cancelled()),
        }
        return tokio::select! {
            answer = answered => answer.map_err(|_| Relay::Failed(ServiceError::TransportClosed)),
            () = &mut deadline => Err(Relay::TimedOut),
            () = cancel.cancelled() => Err(cancelled()),
        };
    }
    let client = &owner.peer;
    let mut handle = tokio::select! {
        sent = client.send_request_with_option(request, PeerRequestOptions::no_options()) => {
            sent.map_err(Relay::Failed)?
        }
        () = &mut deadline => return Err(Relay::TimedOut),
        () = cancel.cancelled() => return Err(cancelled()),
    };
    tokio::select! {
        answer = &mut handle.rx => match answer {
            Ok(answer) => answer.map_err(Relay::Failed),
            Err(_) => Err(Relay::Failed(ServiceError::TransportClosed)),
        },
        () = &mut deadline => {
            let reason = Some("timeout".to_owned());
            let _ = tokio::time::timeout(SERVICE_CLOSE, handle.cancel(reason)).await;
            Err(Relay::TimedOut)
        }
        () = cancel.cancelled() => {
            let reason = Some("cancelled by the server".to_owned());
            let _ = tokio::time::timeout(SERVICE_CLOSE, handle.cancel(reason)).await;
            Err(cancelled())
        }
    }
}
