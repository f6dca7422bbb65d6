//! [`Caller`]: requests forwarded to one live connection from any task (a gateway), with the
//! caller's progress and cancellation, bounded by the config's `timeout`.

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CallToolResponse, CallToolResult, ClientRequest,
    CompleteRequest, CompleteRequestParams, CompleteResult, GetPromptRequest,
    GetPromptRequestParams, GetPromptResponse, GetPromptResult, ProgressNotificationParam,
    ReadResourceRequest, ReadResourceRequestParams, ReadResourceResult, RequestMetaObject,
    ServerResult, SubscribeRequestParams, UnsubscribeRequestParams,
};
// Logging and resources/subscribe are deprecated by protocol 2026-07-28; servers behind the
// gateway speak earlier versions and use them.
use rmcp::model::{GetSkillRequest, GetSkillRequestParams, GetSkillResult};
#[allow(deprecated)]
use rmcp::model::{SetLevelRequest, SetLevelRequestParams, SubscribeRequest, UnsubscribeRequest};
use rmcp::service::{PeerRequestOptions, ServiceError};
use rmcp::{Peer, RoleClient, RoleServer};
use tokio::sync::{mpsc, watch};
use tokio_util::sync::CancellationToken;

use super::describe::describe_service_error;
use super::progress::ProgressRouter;
use super::relay::Questions;
use super::{ConnectError, ConnectErrorKind, Connection, Ctx, ENDED_WAIT, SERVICE_CLOSE};

/// How many forwarded requests are waiting for an answer on one connection, so a connection
/// being retired lets them finish ([`Connection::retire`]), and how many were ever forwarded,
/// so a lazy server's session sees whether it was used since it last looked.
#[derive(Debug)]
pub(super) struct InFlight(watch::Sender<usize>, std::sync::atomic::AtomicU64);

impl Default for InFlight {
    fn default() -> Self {
        InFlight(watch::Sender::new(0), std::sync::atomic::AtomicU64::new(0))
    }
}

/// A connection's use so far ([`Caller::activity`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Activity {
    /// Requests forwarded and not answered yet.
    pub in_flight: usize,
    /// Requests forwarded since the connection was made.
    pub forwarded: u64,
}

impl InFlight {
    /// Counts a request until the guard drops (answered, failed, cancelled or abandoned).
    fn enter(&self) -> impl Drop + '_ {
        struct Busy<'a>(&'a watch::Sender<usize>);
        impl Drop for Busy<'_> {
            fn drop(&mut self) {
                self.0.send_modify(|n| *n = n.saturating_sub(1));
            }
        }
        self.1.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        self.0.send_modify(|n| *n += 1);
        Busy(&self.0)
    }

    /// Waits until nothing is in flight, at most `bound`.
    async fn idle(&self, bound: Duration) {
        let mut count = self.0.subscribe();
        let _ = tokio::time::timeout(bound, count.wait_for(|n| *n == 0)).await;
    }
}

impl Connection {
    /// Stops the connection once the requests forwarded to it have been answered, waiting for
    /// them at most `bound`, then as [`Connection::close`]. For a connection that was replaced
    /// (make before break): a call routed to it during the switch still gets its answer.
    pub async fn retire(self, bound: Duration) {
        self.ctx.in_flight.idle(bound).await;
        self.close().await;
    }
}

/// Forwards requests to one live connection from any task, as a gateway does: with the
/// caller's progress and cancellation, bounded by the config's `timeout`. It does not keep the
/// connection alive: once the connection closes (the server exited, or the host stopped it), a
/// pending request fails at once with [`ConnectErrorKind::Closed`] — it never hangs.
#[derive(Clone)]
pub struct Caller {
    pub(super) ctx: Arc<Ctx>,
    pub(super) peer: Peer<RoleClient>,
    pub(super) progress: ProgressRouter,
    /// The real client these requests are made for: the server's own requests during them are
    /// relayed to it.
    pub(super) asker: Option<Peer<RoleServer>>,
    /// For a client of MCP 2026-07-28: where the server's requests during these go instead.
    pub(super) questions: Option<Questions>,
    /// The client's own `_meta` (capabilities, log level) sent with each request instead of
    /// the host's, when a 2026-07-28 client's request passes through to a 2026-07-28 server.
    pub(super) meta: Option<RequestMetaObject>,
}

impl std::fmt::Debug for Caller {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Caller")
            .field("server", &self.ctx.name)
            .finish_non_exhaustive()
    }
}

/// How a forwarded request failed.
#[derive(Debug, thiserror::Error)]
pub enum CallError {
    /// The server answered with a JSON-RPC error (forwarded with its message masked of the
    /// server's secrets and cut at 4 KiB).
    #[error("{}", .0.message)]
    Mcp(rmcp::ErrorData),
    /// No answer: the connection closed, the `timeout` passed, the caller cancelled, or the
    /// answer was not the expected kind. The message is redacted and names the server.
    #[error("{0}")]
    Failed(ConnectError),
}

impl Caller {
    /// The server this caller talks to.
    pub fn server(&self) -> &str {
        &self.ctx.name
    }

    /// How the connection is being used: requests in flight and forwarded so far (a lazy
    /// server is stopped only when it served nothing for its idle time).
    pub fn activity(&self) -> Activity {
        Activity {
            in_flight: *self.ctx.in_flight.0.borrow(),
            forwarded: self
                .ctx
                .in_flight
                .1
                .load(std::sync::atomic::Ordering::Relaxed),
        }
    }

    /// The MCP revision the connection speaks (SPEC §16): `2026-07-28` after
    /// `server/discover`, else what `initialize` agreed on.
    pub fn protocol_version(&self) -> Option<String> {
        self.peer
            .peer_info()
            .map(|info| info.protocol_version.to_string())
    }

    /// This caller for requests made on behalf of `client`: what the server asks the client
    /// while one runs (elicitation, sampling, roots) and its log messages go to `client`.
    #[must_use]
    pub fn asking(mut self, client: Peer<RoleServer>) -> Self {
        self.asker = Some(client);
        self
    }

    /// This caller for requests of a client of MCP 2026-07-28, which cannot be sent a request:
    /// what the server asks during them goes to `questions` (see [`Questions`]).
    #[must_use]
    pub fn asking_through(mut self, client: Peer<RoleServer>, questions: Questions) -> Self {
        self.asker = Some(client);
        self.questions = Some(questions);
        self
    }

    /// This caller passing the client's own request `_meta` (its capabilities and log level)
    /// to a 2026-07-28 server instead of the host's.
    #[must_use]
    pub fn with_client_meta(mut self, meta: RequestMetaObject) -> Self {
        self.meta = Some(meta);
        self
    }

    /// Forwards `tools/call` (`params.name` is the server's own tool name). Each progress
    /// notification of the server for this call is sent to `progress` (with the server's
    /// token; the receiver substitutes its own). Cancelling `cancel` sends
    /// `notifications/cancelled` to the server and fails the call. A 2026-07-28 server's
    /// input-required results are answered by this caller's client (`rounds.rs`).
    ///
    /// # Errors
    /// See [`CallError`]. A tool that ran and failed is a result with `is_error`, not an error.
    pub async fn call_tool(
        &self,
        params: CallToolRequestParams,
        progress: Option<mpsc::UnboundedSender<ProgressNotificationParam>>,
        cancel: CancellationToken,
    ) -> Result<CallToolResult, CallError> {
        self.call_tool_rounds(params, progress, cancel).await
    }

    /// One `tools/call` round: a 2026-07-28 server's input-required result is returned as it
    /// is.
    ///
    /// # Errors
    /// See [`CallError`].
    pub async fn call_tool_once(
        &self,
        params: CallToolRequestParams,
        progress: Option<mpsc::UnboundedSender<ProgressNotificationParam>>,
        cancel: CancellationToken,
    ) -> Result<CallToolResponse, CallError> {
        let what = format!("tools/call `{}`", params.name);
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        match self.request(&what, request, progress, cancel).await? {
            ServerResult::CallToolResult(result) => Ok(result.into()),
            ServerResult::InputRequiredResult(result) => Ok(result.into()),
            ServerResult::CreateTaskResult(result) => Ok(result.into()),
            ServerResult::EmptyResult(_) => Ok(CallToolResult::success(Vec::new()).into()),
            _ => Err(self.unexpected(&what)),
        }
    }

    /// Forwards `request` as it is and returns the server's answer as it is: the requests
    /// about a task the server owns (`tasks/get`, `tasks/update`, `tasks/cancel`).
    ///
    /// # Errors
    /// See [`CallError`].
    pub async fn forward(
        &self,
        what: &str,
        request: ClientRequest,
    ) -> Result<ServerResult, CallError> {
        self.request(what, request, None, CancellationToken::new())
            .await
    }

    /// Whether the server speaks 2026-07-28 with this host (it answered `server/discover`).
    pub fn is_modern(&self) -> bool {
        super::session::is_modern(&self.peer)
    }

    /// Forwards `prompts/get`; a 2026-07-28 server's input-required results are answered by
    /// this caller's client.
    ///
    /// # Errors
    /// See [`CallError`].
    pub async fn get_prompt(
        &self,
        params: GetPromptRequestParams,
    ) -> Result<GetPromptResult, CallError> {
        self.get_prompt_rounds(params).await
    }

    /// One `prompts/get` round: an input-required result is returned as it is.
    ///
    /// # Errors
    /// See [`CallError`].
    pub async fn get_prompt_once(
        &self,
        params: GetPromptRequestParams,
    ) -> Result<GetPromptResponse, CallError> {
        let what = format!("prompts/get `{}`", params.name);
        let request = ClientRequest::GetPromptRequest(GetPromptRequest::new(params));
        match self
            .request(&what, request, None, CancellationToken::new())
            .await?
        {
            ServerResult::GetPromptResult(result) => Ok(result.into()),
            ServerResult::InputRequiredResult(result) => Ok(result.into()),
            _ => Err(self.unexpected(&what)),
        }
    }

    /// Forwards `resources/read`.
    ///
    /// # Errors
    /// See [`CallError`].
    pub async fn read_resource(
        &self,
        params: ReadResourceRequestParams,
    ) -> Result<ReadResourceResult, CallError> {
        let what = format!("resources/read `{}`", params.uri);
        let request = ClientRequest::ReadResourceRequest(ReadResourceRequest::new(params));
        match self
            .request(&what, request, None, CancellationToken::new())
            .await?
        {
            ServerResult::ReadResourceResult(result) => Ok(result),
            _ => Err(self.unexpected(&what)),
        }
    }

    /// Forwards `skills/get`: the manifest comes back as the server sent it (digests
    /// unchanged).
    ///
    /// # Errors
    /// See [`CallError`].
    pub async fn get_skill(
        &self,
        params: GetSkillRequestParams,
    ) -> Result<GetSkillResult, CallError> {
        let what = format!("skills/get `{}`", params.uri);
        let request = ClientRequest::GetSkillRequest(GetSkillRequest::new(params));
        match self
            .request(&what, request, None, CancellationToken::new())
            .await?
        {
            ServerResult::GetSkillResult(result) => Ok(result),
            _ => Err(self.unexpected(&what)),
        }
    }

    /// Forwards `completion/complete`.
    ///
    /// # Errors
    /// See [`CallError`].
    pub async fn complete(
        &self,
        params: CompleteRequestParams,
    ) -> Result<CompleteResult, CallError> {
        let what = "completion/complete";
        let request = ClientRequest::CompleteRequest(CompleteRequest::new(params));
        match self
            .request(what, request, None, CancellationToken::new())
            .await?
        {
            ServerResult::CompleteResult(result) => Ok(result),
            _ => Err(self.unexpected(what)),
        }
    }

    /// Forwards `logging/setLevel` for the client this caller asks for: it gets the messages
    /// at or above `params.level`; the server is set to the most verbose level any of its
    /// clients asked for.
    ///
    /// # Errors
    /// See [`CallError`].
    #[allow(deprecated)]
    pub async fn set_level(&self, mut params: SetLevelRequestParams) -> Result<(), CallError> {
        let what = "logging/setLevel";
        if let Some(client) = &self.asker {
            params.level = self.ctx.askers.set_level(client, params.level);
        }
        let request = ClientRequest::SetLevelRequest(SetLevelRequest::new(params));
        match self
            .request(what, request, None, CancellationToken::new())
            .await?
        {
            ServerResult::EmptyResult(_) => Ok(()),
            _ => Err(self.unexpected(what)),
        }
    }

    /// Forwards `resources/subscribe` (`subscribe`) or `resources/unsubscribe`; the client this
    /// caller asks for gets `notifications/resources/updated` for `uri` until it unsubscribes.
    /// An unsubscribe reaches the server only once no other client holds the subscription.
    ///
    /// # Errors
    /// See [`CallError`].
    #[allow(deprecated)]
    pub async fn subscription(&self, uri: String, subscribe: bool) -> Result<(), CallError> {
        if let Some(client) = self.asker.as_ref().filter(|_| !subscribe) {
            if self.ctx.askers.others_subscribed(&uri, client) {
                self.ctx.askers.subscription(&uri, client, false);
                return Ok(());
            }
        }
        let (what, request) = if subscribe {
            let params = SubscribeRequestParams::new(uri.clone());
            (
                "resources/subscribe",
                ClientRequest::SubscribeRequest(SubscribeRequest::new(params)),
            )
        } else {
            let params = UnsubscribeRequestParams::new(uri.clone());
            (
                "resources/unsubscribe",
                ClientRequest::UnsubscribeRequest(UnsubscribeRequest::new(params)),
            )
        };
        match self
            .request(what, request, None, CancellationToken::new())
            .await?
        {
            ServerResult::EmptyResult(_) => {
                if let Some(client) = &self.asker {
                    self.ctx.askers.subscription(&uri, client, subscribe);
                }
                Ok(())
            }
            _ => Err(self.unexpected(what)),
        }
    }

    /// Tells the server the client's roots changed (`notifications/roots/list_changed`); the
    /// `roots/list` it asks next, with nothing running, is that client's.
    pub async fn roots_changed(&self) {
        if let Some(client) = &self.asker {
            self.ctx.askers.roots_changed_by(client);
        }
        if let Err(e) = self.peer.notify_roots_list_changed().await {
            tracing::debug!(server = %self.ctx.name, "roots/list_changed not sent: {e}");
        }
    }

    /// Whether the server declared the logging capability.
    pub fn offers_logging(&self) -> bool {
        self.peer
            .peer_info()
            .is_some_and(|info| info.capabilities.logging.is_some())
    }

    pub(super) fn unexpected(&self, what: &str) -> CallError {
        CallError::Failed(self.ctx.error(
            ConnectErrorKind::Call,
            &format!(
                "answered {what} with a result mcp-reconcile cannot forward \
                 (input requests and tasks are not supported)"
            ),
        ))
    }

    /// The error of a request that failed without an answer. A `403 insufficient_scope` says
    /// what to run (the same sentence whether rmcp hands the send error to the request or
    /// closes the connection first).
    /// The server's error as the client may see it: its message without the server's
    /// secrets (configured or inherited), at most [`MAX_ERROR_MESSAGE`] bytes.
    fn masked(&self, mut error: rmcp::ErrorData) -> rmcp::ErrorData {
        let mut message = self.ctx.redact(&error.message);
        if message.len() > MAX_ERROR_MESSAGE {
            let mut end = MAX_ERROR_MESSAGE;
            while !message.is_char_boundary(end) {
                end -= 1;
            }
            message.truncate(end);
            message.push_str(" …");
        }
        error.message = message.into();
        error
    }

    fn failed(&self, what: &str, error: &ServiceError) -> CallError {
        if let ServiceError::TransportSend(dynamic) = error {
            let cause: &(dyn std::error::Error + 'static) = &*dynamic.error;
            if let Some(scope) = crate::auth::step_up_scope(cause) {
                let message = crate::auth::step_up_message(&self.ctx.name, scope.as_deref());
                return CallError::Failed(self.ctx.error(ConnectErrorKind::NeedsAuth, &message));
            }
        }
        CallError::Failed(self.ctx.error(
            ConnectErrorKind::Call,
            &format!("{what} failed: {}", describe_service_error(error)),
        ))
    }

    async fn request(
        &self,
        what: &str,
        request: ClientRequest,
        progress: Option<mpsc::UnboundedSender<ProgressNotificationParam>>,
        cancel: CancellationToken,
    ) -> Result<ServerResult, CallError> {
        let _busy = self.ctx.in_flight.enter();
        let _work = super::idle::Work::start();
        let asking = self
            .asker
            .clone()
            .map(|client| self.ctx.askers.enter(client, self.questions.clone()));
        let closed = || async {
            // The monitor records why the connection ended (exit status, stderr tail) a moment
            // after the transport closes.
            let mut ended = self.ctx.ended.subscribe();
            let reason = tokio::time::timeout(ENDED_WAIT, ended.wait_for(Option::is_some))
                .await
                .ok()
                .and_then(|r| r.ok().and_then(|v| v.clone()))
                .unwrap_or_else(|| "the connection closed".to_owned());
            CallError::Failed(self.ctx.error(
                ConnectErrorKind::Closed,
                &format!(
                    "closed its connection before answering {what}: {reason}. mcp-reconcile \
                     restarts failed servers on its own; call again once it is connected"
                ),
            ))
        };
        let mut handle = match self
            .peer
            .send_request_with_option(request, {
                let mut options = PeerRequestOptions::no_options();
                options.meta.clone_from(&self.meta);
                options
            })
            .await
        {
            Ok(handle) => handle,
            Err(ServiceError::TransportClosed) => return Err(closed().await),
            Err(e) => return Err(self.failed(what, &e)),
        };
        if let Some(asking) = &asking {
            asking.sent_as(handle.id.clone());
        }
        let mut updates = progress.map(|forward| {
            let (guard, rx) = self.progress.subscribe(handle.progress_token.clone());
            (guard, rx, forward)
        });
        let deadline = tokio::time::sleep(self.ctx.call_timeout);
        tokio::pin!(deadline);
        // The last progress passed on, and its total.
        let mut last: Option<(f64, Option<f64>)> = None;
        loop {
            let next_progress = async {
                match updates.as_mut() {
                    Some((_, rx, _)) => rx.recv().await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                biased;
                response = &mut handle.rx => {
                    if let Some((_, rx, forward)) = updates.as_mut() {
                        late_progress(rx, forward, last).await;
                    }
                    // The log messages the server sent before its answer reach the client first.
                    self.ctx.askers.logs_relayed(LOGS_BEFORE_ANSWER).await;
                    return match response {
                        Ok(Ok(result)) => Ok(result),
                        Ok(Err(ServiceError::McpError(error))) => Err(CallError::Mcp(self.masked(error))),
                        Ok(Err(ServiceError::TransportClosed)) | Err(_) => Err(closed().await),
                        Ok(Err(e)) => Err(self.failed(what, &e)),
                    };
                }
                () = cancel.cancelled() => {
                    let reason = Some("cancelled by the client".to_owned());
                    let _ = tokio::time::timeout(SERVICE_CLOSE, handle.cancel(reason)).await;
                    return Err(CallError::Failed(self.ctx.error(
                        ConnectErrorKind::Cancelled,
                        &format!("{what} was cancelled by the client"),
                    )));
                }
                () = &mut deadline => {
                    let reason = Some("timeout".to_owned());
                    let _ = tokio::time::timeout(SERVICE_CLOSE, handle.cancel(reason)).await;
                    return Err(CallError::Failed(self.ctx.error(
                        ConnectErrorKind::Call,
                        &format!(
                            "got no answer to {what} within {} ms (`timeout`)",
                            self.ctx.call_timeout.as_millis()
                        ),
                    )));
                }
                Some(update) = next_progress => {
                    if let Some((_, _, forward)) = updates.as_ref() {
                        last = Some((update.progress, update.total));
                        let _ = forward.send(update);
                    }
                }
            }
        }
    }
}

/// The longest error message of a server's that is passed on (the rest is cut, marked `…`).
pub const MAX_ERROR_MESSAGE: usize = 4096;

/// How long an answer waits for progress the server sent before it but rmcp has not handed
/// over yet (it runs each notification in a task of its own, so they can trail the answer).
const LATE_PROGRESS: std::time::Duration = std::time::Duration::from_millis(50);

/// How long an answer waits for the log messages the server sent before it to be relayed (a
/// client that stops reading its logs holds an answer no longer than this).
const LOGS_BEFORE_ANSWER: std::time::Duration = std::time::Duration::from_millis(500);

/// Passes on the progress that trails an answer: whatever has arrived once the notification
/// tasks had a turn, and, while the last update (`last`) is short of its total, more of it for
/// at most [`LATE_PROGRESS`].
async fn late_progress(
    rx: &mut mpsc::UnboundedReceiver<ProgressNotificationParam>,
    forward: &mpsc::UnboundedSender<ProgressNotificationParam>,
    mut last: Option<(f64, Option<f64>)>,
) {
    let short = |last: Option<(f64, Option<f64>)>| matches!(last, Some((progress, Some(total))) if progress < total);
    tokio::task::yield_now().await;
    let deadline = tokio::time::Instant::now() + LATE_PROGRESS;
    loop {
        while let Ok(update) = rx.try_recv() {
            last = Some((update.progress, update.total));
            let _ = forward.send(update);
        }
        if !short(last) {
            return;
        }
        match tokio::time::timeout_at(deadline, rx.recv()).await {
            Ok(Some(update)) => {
                last = Some((update.progress, update.total));
                let _ = forward.send(update);
            }
            _ => return,
        }
    }
}
