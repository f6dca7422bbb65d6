//! A 2026-07-28 server's input-required results (SPEC §16), answered for the client a
//! request is made for: each input request (elicitation, sampling, roots) goes to that client
//! as the matching request of its own era — a legacy client is sent it, a 2026-07-28 one gets
//! it through its call's question queue — and the request is made again with the answers and
//! the server's `requestState`, round after round, at most [`MAX_ROUNDS`].
//!
//! A client of 2026-07-28 whose request goes to a 2026-07-28 server does not come here: the
//! gateway passes the input-required result through to it unchanged.

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ElicitResult, ElicitationAction,
    GetPromptRequestParams, GetPromptResponse, GetPromptResult, InputRequest, InputRequests,
    InputResponses, ProgressNotificationParam, ServerRequest,
};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::handler::{relay, Relay};
use super::relay::Owner;
use super::{CallError, Caller, ConnectErrorKind};

/// Most input-required rounds one request may take (as rmcp's and the TypeScript SDK's
/// clients allow).
pub const MAX_ROUNDS: usize = rmcp::model::DEFAULT_MRTR_MAX_ROUNDS;

impl Caller {
    pub(super) async fn call_tool_rounds(
        &self,
        mut params: CallToolRequestParams,
        progress: Option<mpsc::UnboundedSender<ProgressNotificationParam>>,
        cancel: CancellationToken,
    ) -> Result<CallToolResult, CallError> {
        let what = format!("tools/call `{}`", params.name);
        for _ in 0..MAX_ROUNDS {
            match self
                .call_tool_once(params.clone(), progress.clone(), cancel.clone())
                .await?
            {
                CallToolResponse::Complete(result) => return Ok(result),
                CallToolResponse::InputRequired(required) => {
                    let requests = required.input_requests.unwrap_or_default();
                    params.input_responses = Some(self.answer(&what, requests, &cancel).await?);
                    params.request_state = required.request_state;
                }
                _ => return Err(self.unexpected(&what)),
            }
        }
        Err(self.too_many_rounds(&what))
    }

    pub(super) async fn get_prompt_rounds(
        &self,
        mut params: GetPromptRequestParams,
    ) -> Result<GetPromptResult, CallError> {
        let what = format!("prompts/get `{}`", params.name);
        let cancel = CancellationToken::new();
        for _ in 0..MAX_ROUNDS {
            match self.get_prompt_once(params.clone()).await? {
                GetPromptResponse::Complete(result) => return Ok(result),
                GetPromptResponse::InputRequired(required) => {
                    let requests = required.input_requests.unwrap_or_default();
                    params.input_responses = Some(self.answer(&what, requests, &cancel).await?);
                    params.request_state = required.request_state;
                }
                _ => return Err(self.unexpected(&what)),
            }
        }
        Err(self.too_many_rounds(&what))
    }

    /// The client's answer to each of `requests`, asked one after the other. Without a client
    /// that offers it, elicitation is declined and roots are empty (as for a legacy server's
    /// own request); sampling fails the request.
    async fn answer(
        &self,
        what: &str,
        requests: InputRequests,
        cancel: &CancellationToken,
    ) -> Result<InputResponses, CallError> {
        let owner = self.asker.clone().map(|peer| Owner {
            peer,
            questions: self.questions.clone(),
            request: None,
        });
        let limits = self.ctx.askers.limits();
        let mut responses = InputResponses::new();
        for (key, request) in requests {
            let (request, wait, offered, method) = match request {
                InputRequest::Elicitation(r) => (
                    ServerRequest::ElicitRequest(r),
                    limits.elicitation,
                    owner
                        .as_ref()
                        .is_some_and(|o| o.offers(|c| c.elicitation.is_some())),
                    "elicitation/create",
                ),
                InputRequest::CreateMessage(r) => (
                    ServerRequest::CreateMessageRequest(r),
                    limits.sampling,
                    owner
                        .as_ref()
                        .is_some_and(|o| o.offers(|c| c.sampling.is_some())),
                    "sampling/createMessage",
                ),
                InputRequest::ListRoots(r) => (
                    ServerRequest::ListRootsRequest(r),
                    limits.roots,
                    owner
                        .as_ref()
                        .is_some_and(|o| o.offers(|c| c.roots.is_some())),
                    "roots/list",
                ),
                // A kind this host does not know: no client of it can answer.
                _ => {
                    return Err(CallError::Failed(self.ctx.error(
                        ConnectErrorKind::Call,
                        &format!(
                        "asked for an input of a kind mcp-reconcile does not know during {what}"
                    ),
                    )))
                }
            };
            let answered = match (&owner, offered) {
                (Some(owner), true) => {
                    let _relaying = self.ctx.askers.relaying(&self.ctx.name, method);
                    match relay(owner, request.clone(), wait, cancel).await {
                        Ok(result) => serde_json::to_value(result).ok(),
                        Err(Relay::TimedOut | Relay::Failed(_)) => None,
                    }
                }
                _ => None,
            };
            let answer = match (answered, &request) {
                (Some(answer), _) => answer,
                (None, ServerRequest::ElicitRequest(_)) => {
                    serde_json::to_value(ElicitResult::new(ElicitationAction::Decline))
                        .unwrap_or_default()
                }
                (None, ServerRequest::ListRootsRequest(_)) => serde_json::json!({"roots": []}),
                (None, _) => {
                    return Err(CallError::Failed(self.ctx.error(
                        ConnectErrorKind::Call,
                        &format!(
                            "asked for {method} during {what}, and no client of this request \
                             can answer it"
                        ),
                    )))
                }
            };
            responses.insert(key, answer);
        }
        Ok(responses)
    }

    fn too_many_rounds(&self, what: &str) -> CallError {
        CallError::Failed(self.ctx.error(
            ConnectErrorKind::Call,
            &format!("asked for input more than {MAX_ROUNDS} times during {what}"),
        ))
    }
}
