//! A call of a client of MCP 2026-07-28 (SPEC §16). To a 2026-07-28 server it passes through
//! (`pass_call`, `pass_prompt`): the client's `_meta`, `inputResponses` and the server's own
//! `requestState` go up, the server's input-required results come back with their questions
//! as they are. Across to a legacy server it is translated: what the server
//! asks while the call runs (`elicitation/create`, `sampling/createMessage`, `roots/list`)
//! cannot be sent to such a client as a request of its own. The gateway answers the client's
//! `tools/call` with an input-required result carrying the questions, keeps the server's call
//! running, and completes the server's pending requests with the `inputResponses` the client
//! sends when it calls again — as often as the server asks, until the call's result.
//!
//! The `requestState` handed to the client only names the waiting call; it is sealed (HMAC,
//! rmcp's `RequestStateCodec`, a key from the OS RNG per `serve`) and bound to the server and
//! tool, so a tampered, transplanted or expired one is refused with `-32602`. What waits is
//! bounded: [`MAX_WAITING`] calls, each at most [`KEEP`] (the time a relayed elicitation may
//! wait for a person); past either the call is cancelled at the server.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Mutex;
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ClientResult, ContentBlock, ErrorCode,
    GetPromptRequestParams, GetPromptResponse, InputRequest, InputRequests, InputRequiredResult,
    InputResponses, ProgressNotificationParam, RequestMetaObject, RequestStateCodec, SealOptions,
    ServerRequest,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use super::forward::{call_outcome, relay_progress};
use crate::host::Route;
use crate::transport::{CallError, Question, Questions};

#[cfg(test)]
mod tests;

/// Most calls that may wait for their client's input at once.
pub const MAX_WAITING: usize = 64;
/// How long a call waits for its client to come back with the input.
pub const KEEP: Duration = Duration::from_secs(600);

/// The calls waiting for their client's input.
pub struct Translator {
    /// Which server owns each task a client was handed (the tasks extension passes through).
    pub tasks: super::tasks::TaskOwners,
    codec: Option<RequestStateCodec>,
    next: AtomicU64,
    waiting: Mutex<HashMap<u64, Waiting>>,
}

impl std::fmt::Debug for Translator {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Translator").finish_non_exhaustive()
    }
}

type Call = JoinHandle<Result<CallToolResult, CallError>>;

/// One server call that asked its client something and waits for the answer.
struct Waiting {
    binding: String,
    call: Call,
    cancel: CancellationToken,
    questions: mpsc::Receiver<Question>,
    progress: mpsc::UnboundedReceiver<ProgressNotificationParam>,
    /// The questions handed to the client and not answered yet, by key.
    asked: Vec<(String, Question)>,
    keys: u32,
    since: Instant,
}

impl Drop for Waiting {
    /// A call nobody waits for any more is cancelled at the server.
    fn drop(&mut self) {
        self.cancel.cancel();
    }
}

/// What a sealed `requestState` names.
enum Payload {
    /// A legacy server's call waiting here for the client's input.
    Parked(u64),
    /// A 2026-07-28 server's own state, to hand back to it.
    Upstream(String),
}

/// Longest `requestState` of a server's that the gateway hands on.
pub const MAX_UPSTREAM_STATE: usize = 64 * 1024;

fn stale() -> ErrorData {
    ErrorData::invalid_params(
        "no call waits for this requestState: it ended or expired; call again without it",
        None,
    )
}

/// The server's own state a client brought back, for a call that passes through.
fn upstream_state(opened: Option<Payload>) -> Result<Option<String>, ErrorData> {
    match opened {
        Some(Payload::Upstream(state)) => Ok(Some(state)),
        Some(Payload::Parked(_)) => Err(stale()),
        None => Ok(None),
    }
}

/// The caller for a 2026-07-28 client's request to a 2026-07-28 server: the client is asked
/// nothing through it (the server returns its questions), and its own `_meta` goes up.
fn passing(route: &Route, context: &RequestContext<RoleServer>) -> crate::transport::Caller {
    route
        .caller
        .clone()
        .asking(context.peer.clone())
        .with_client_meta(client_meta(context))
}

/// The client's own request `_meta` a 2026-07-28 server must see: what it declared and the
/// log level it asked for (the host's own would claim capabilities the client lacks).
fn client_meta(context: &RequestContext<RoleServer>) -> RequestMetaObject {
    let mut meta = RequestMetaObject::new();
    meta.set_client_capabilities(context.client_capabilities().unwrap_or_default());
    if let Some(level) = context.meta.log_level() {
        meta.set_log_level(level);
    }
    meta
}

/// What happened while a call was driven.
enum Event {
    Progress(ProgressNotificationParam),
    Asked(Question),
    Done(Result<Result<CallToolResult, CallError>, tokio::task::JoinError>),
    Cancelled,
}

impl Translator {
    /// A translator with a fresh key; without the OS RNG, a server's questions during a modern
    /// client's call are declined as before (logged once).
    pub fn new() -> Self {
        let codec = random_key()
            .and_then(|key| RequestStateCodec::try_new(key.to_vec()).ok())
            .or_else(|| {
                tracing::warn!(
                    "no key for request state (/dev/urandom unreadable): a server's questions \
                     during a 2026-07-28 client's call are declined"
                );
                None
            });
        Translator {
            tasks: super::tasks::TaskOwners::default(),
            codec,
            next: AtomicU64::new(1),
            waiting: Mutex::new(HashMap::new()),
        }
    }

    /// Forwards a 2026-07-28 client's `tools/call` (first or retried with its input) to the
    /// server of `route`.
    ///
    /// # Errors
    /// `-32602` for a `requestState` that fails its check or names no waiting call.
    pub async fn call(
        &self,
        route: Route,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let binding = format!("{}\u{0}{}", route.server, route.name);
        let opened = self.opened(request.request_state.as_deref(), &binding)?;
        if route.caller.is_modern() {
            let state = upstream_state(opened)?;
            return self
                .pass_call(route, request, state, context, &binding)
                .await;
        }
        let mut waiting = match opened {
            Some(Payload::Parked(id)) => {
                let mut waiting = self.take(id).ok_or_else(stale)?;
                waiting.answer(request.input_responses.as_ref());
                waiting
            }
            Some(Payload::Upstream(_)) => return Err(stale()),
            None => self.start(&route, request, &context, binding),
        };
        let token = context.meta.get_progress_token();
        let mut last = f64::NEG_INFINITY;
        loop {
            if !waiting.asked.is_empty() {
                return Ok(self.park(waiting));
            }
            let event = tokio::select! {
                biased;
                Some(update) = waiting.progress.recv() => Event::Progress(update),
                Some(question) = waiting.questions.recv() => Event::Asked(question),
                joined = &mut waiting.call => Event::Done(joined),
                () = context.ct.cancelled() => Event::Cancelled,
            };
            match event {
                Event::Progress(update) => {
                    relay_progress(&context, token.as_ref(), &mut last, update).await;
                }
                Event::Asked(question) => {
                    waiting.ask(question);
                    while let Ok(more) = waiting.questions.try_recv() {
                        waiting.ask(more);
                    }
                }
                Event::Done(joined) => {
                    while let Ok(update) = waiting.progress.try_recv() {
                        relay_progress(&context, token.as_ref(), &mut last, update).await;
                    }
                    return Ok(call_outcome(&route, joined).into());
                }
                Event::Cancelled => {
                    return Err(ErrorData::internal_error(
                        "the client cancelled the call",
                        None,
                    ))
                }
            }
        }
    }

    /// A 2026-07-28 client's call to a 2026-07-28 server: passed through with the client's
    /// own `_meta`, `inputResponses` and (unsealed) `requestState`; an input-required result
    /// comes back with the server's questions as they are and its state sealed.
    async fn pass_call(
        &self,
        route: Route,
        request: CallToolRequestParams,
        state: Option<String>,
        context: RequestContext<RoleServer>,
        binding: &str,
    ) -> Result<CallToolResponse, ErrorData> {
        let mut params = CallToolRequestParams::new(route.name.clone());
        if let Some(arguments) = request.arguments {
            params = params.with_arguments(arguments);
        }
        params.input_responses = request.input_responses;
        params.request_state = state;
        let caller = passing(&route, &context);
        let owner = caller.clone();
        let (progress_tx, mut progress) = mpsc::unbounded_channel();
        let cancel = context.ct.child_token();
        let mut call = tokio::spawn(async move {
            caller
                .call_tool_once(params, Some(progress_tx), cancel)
                .await
        });
        let token = context.meta.get_progress_token();
        let mut last = f64::NEG_INFINITY;
        let joined = loop {
            tokio::select! {
                biased;
                Some(update) = progress.recv() => {
                    relay_progress(&context, token.as_ref(), &mut last, update).await;
                }
                joined = &mut call => break joined,
            }
        };
        while let Ok(update) = progress.try_recv() {
            relay_progress(&context, token.as_ref(), &mut last, update).await;
        }
        match joined {
            Ok(Ok(CallToolResponse::InputRequired(required))) => {
                Ok(self.sealed(required, binding)?.into())
            }
            Ok(Ok(CallToolResponse::Task(created))) => {
                self.tasks.owned(&created.task.task_id, owner);
                Ok(CallToolResponse::Task(created))
            }
            Ok(Ok(response)) => Ok(response),
            // The client must see that it lacks a capability (it may declare it and retry):
            // the server's protocol error, not a tool error.
            Ok(Err(CallError::Mcp(error)))
                if error.code == ErrorCode::MISSING_REQUIRED_CLIENT_CAPABILITY =>
            {
                Err(error)
            }
            Ok(Err(error)) => Ok(call_outcome(&route, Ok(Err(error))).into()),
            Err(join) => Ok(call_outcome(&route, Err(join)).into()),
        }
    }

    /// [`Translator::pass_call`] for `prompts/get`.
    ///
    /// # Errors
    /// A `requestState` that fails its check, or the server's own error.
    pub async fn pass_prompt(
        &self,
        route: Route,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let binding = format!("{}\u{0}prompt\u{0}{}", route.server, route.name);
        let opened = self.opened(request.request_state.as_deref(), &binding)?;
        let mut params = GetPromptRequestParams::new(route.name.clone());
        if let Some(arguments) = request.arguments {
            params = params.with_arguments(arguments);
        }
        params.input_responses = request.input_responses;
        params.request_state = upstream_state(opened)?;
        match passing(&route, &context).get_prompt_once(params).await {
            Ok(GetPromptResponse::InputRequired(required)) => {
                Ok(self.sealed(required, &binding)?.into())
            }
            Ok(response) => Ok(response),
            Err(CallError::Mcp(error)) => Err(error),
            Err(CallError::Failed(error)) => Err(ErrorData::internal_error(error.message, None)),
        }
    }

    /// A 2026-07-28 server's input-required result as its client gets it: the questions as
    /// they are, the server's own `requestState` sealed.
    fn sealed(
        &self,
        mut required: InputRequiredResult,
        binding: &str,
    ) -> Result<InputRequiredResult, ErrorData> {
        required.request_state = match required.request_state.take() {
            Some(upstream) => Some(self.seal_upstream(&upstream, binding)?),
            None => None,
        };
        Ok(required)
    }

    /// The server's own `requestState`, sealed for the client to carry (bounded).
    fn seal_upstream(&self, upstream: &str, binding: &str) -> Result<String, ErrorData> {
        if upstream.len() > MAX_UPSTREAM_STATE {
            return Err(ErrorData::internal_error(
                format!("the server's requestState is over {MAX_UPSTREAM_STATE} bytes"),
                None,
            ));
        }
        self.seal(&format!("u:{upstream}"), binding).ok_or_else(|| {
            ErrorData::internal_error("mcp-reconcile has no key to seal the request state", None)
        })
    }

    fn seal(&self, payload: &str, binding: &str) -> Option<String> {
        Some(
            self.codec.as_ref()?.seal_with(
                payload.as_bytes(),
                &SealOptions::new()
                    .associated_data(binding.as_bytes())
                    .ttl(KEEP),
            ),
        )
    }

    fn start(
        &self,
        route: &Route,
        request: CallToolRequestParams,
        context: &RequestContext<RoleServer>,
        binding: String,
    ) -> Waiting {
        let mut params = CallToolRequestParams::new(route.name.clone());
        if let Some(arguments) = request.arguments {
            params = params.with_arguments(arguments);
        }
        // Without a key there is no safe way to hand a question over: the server is answered
        // as when no client can be asked.
        let (queue, questions) = mpsc::channel(8);
        let caller = route.caller.clone();
        let caller = match self.codec {
            Some(_) => caller.asking_through(
                context.peer.clone(),
                Questions {
                    capabilities: context.client_capabilities().unwrap_or_default(),
                    queue,
                    log_level: context.meta.log_level(),
                },
            ),
            None => caller,
        };
        let (progress_tx, progress) = mpsc::unbounded_channel();
        let cancel = CancellationToken::new();
        let stop = cancel.clone();
        let call =
            tokio::spawn(async move { caller.call_tool(params, Some(progress_tx), stop).await });
        Waiting {
            binding,
            call,
            cancel,
            questions,
            progress,
            asked: Vec::new(),
            keys: 0,
            since: Instant::now(),
        }
    }

    /// Keeps `waiting` for its client's next call and tells the client what to answer.
    fn park(&self, waiting: Waiting) -> CallToolResponse {
        let Some(codec) = &self.codec else {
            return CallToolResult::error(vec![ContentBlock::text(
                "the server asked for input, and mcp-reconcile has no key to hand the question \
                 over with",
            )])
            .into();
        };
        let requests: InputRequests = waiting
            .asked
            .iter()
            .filter_map(|(key, question)| Some((key.clone(), input_request(&question.request)?)))
            .collect();
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let state = codec.seal_with(
            format!("p:{id}").as_bytes(),
            &SealOptions::new()
                .associated_data(waiting.binding.as_bytes())
                .ttl(KEEP),
        );
        let mut map = self
            .waiting
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        map.retain(|_, w| w.since.elapsed() < KEEP && !w.call.is_finished());
        if map.len() >= MAX_WAITING {
            tracing::warn!(
                "{MAX_WAITING} calls already wait for their client's input; one more is cancelled"
            );
            return CallToolResult::error(vec![ContentBlock::text(format!(
                "the server asked for input, and {MAX_WAITING} calls already wait for theirs; \
                 call again later"
            ))])
            .into();
        }
        map.insert(id, waiting);
        InputRequiredResult::new(Some(requests), Some(state)).into()
    }

    /// What the `requestState` a client brought back names, when it brought one.
    fn opened(&self, state: Option<&str>, binding: &str) -> Result<Option<Payload>, ErrorData> {
        state.map(|state| self.open(state, binding)).transpose()
    }

    fn open(&self, state: &str, binding: &str) -> Result<Payload, ErrorData> {
        self.codec
            .as_ref()
            .and_then(|codec| codec.open_with(state, binding.as_bytes()).ok())
            .and_then(|bytes| String::from_utf8(bytes).ok())
            .and_then(|payload| match payload.split_once(':') {
                Some(("p", id)) => id.parse().ok().map(Payload::Parked),
                Some(("u", upstream)) => Some(Payload::Upstream(upstream.to_owned())),
                _ => None,
            })
            .ok_or_else(|| {
                ErrorData::invalid_params(
                    "requestState failed its integrity check (altered, expired, or issued for \
                     another tool)",
                    None,
                )
            })
    }

    fn take(&self, id: u64) -> Option<Waiting> {
        self.waiting
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .remove(&id)
    }
}

impl Waiting {
    /// Hands `question` to the client under a fresh key; one this client cannot be asked in
    /// an input-required result is dropped (the server's request fails).
    fn ask(&mut self, question: Question) {
        let Some(kind) = kind(&question.request) else {
            return;
        };
        self.keys += 1;
        self.asked.push((format!("{kind}-{}", self.keys), question));
    }

    /// Completes each asked question `responses` answers validly; the rest stay asked.
    fn answer(&mut self, responses: Option<&InputResponses>) {
        let asked = std::mem::take(&mut self.asked);
        for (key, question) in asked {
            match responses
                .and_then(|r| r.get(&key))
                .and_then(|value| client_result(&question.request, value))
            {
                Some(result) => {
                    let _ = question.answer.send(result);
                }
                None => self.asked.push((key, question)),
            }
        }
    }
}

fn kind(request: &ServerRequest) -> Option<&'static str> {
    match request {
        ServerRequest::ElicitRequest(_) => Some("elicitation"),
        ServerRequest::CreateMessageRequest(_) => Some("sampling"),
        ServerRequest::ListRootsRequest(_) => Some("roots"),
        _ => None,
    }
}

fn input_request(request: &ServerRequest) -> Option<InputRequest> {
    match request {
        ServerRequest::ElicitRequest(r) => Some(InputRequest::Elicitation(r.clone())),
        ServerRequest::CreateMessageRequest(r) => Some(InputRequest::CreateMessage(r.clone())),
        ServerRequest::ListRootsRequest(r) => Some(InputRequest::ListRoots(r.clone())),
        _ => None,
    }
}

/// The client's answer `value` to `request`, when it is one.
fn client_result(request: &ServerRequest, value: &serde_json::Value) -> Option<ClientResult> {
    let value = value.clone();
    Some(match request {
        ServerRequest::ElicitRequest(_) => {
            ClientResult::ElicitResult(serde_json::from_value(value).ok()?)
        }
        ServerRequest::CreateMessageRequest(_) => {
            ClientResult::CreateMessageResult(Box::new(serde_json::from_value(value).ok()?))
        }
        ServerRequest::ListRootsRequest(_) => {
            ClientResult::ListRootsResult(serde_json::from_value(value).ok()?)
        }
        _ => return None,
    })
}

fn random_key() -> Option<[u8; 32]> {
    use std::io::Read;
    let mut key = [0u8; 32];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut key))
        .ok()?;
    Some(key)
}
