//! Forwarding a request to the server that serves it: a tool call with the client's progress
//! and cancellation, the language tools (SPEC §14.5), a prompt and a completion.

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CompleteRequestParams, CompleteResult,
    ContentBlock, GetPromptRequestParams, GetPromptResponse, ProgressNotificationParam, Reference,
};
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::{era, gone, Gateway};
use crate::host::{Route, Target};
use crate::lsp::tools::{self as lsp_tools, LspTool};
use crate::session::Session;
use crate::transport::CallError;

impl<S: Session> Gateway<S> {
    /// Forwards a `tools/call` to the server of `route`; a 2026-07-28 client's call goes
    /// through the [`Translator`](super::translate::Translator), which hands the server's
    /// questions to it as input-required results.
    ///
    /// # Errors
    /// A 2026-07-28 client's `requestState` that fails its check (`-32602`).
    pub(super) async fn forward_call(
        &self,
        route: Route,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if super::era::is_modern(&context) {
            return self.translator.call(route, request, context).await;
        }
        let mut params = CallToolRequestParams::new(route.name.clone());
        if let Some(arguments) = request.arguments {
            params = params.with_arguments(arguments);
        }
        let client_token = context.meta.get_progress_token();
        let (progress_tx, mut progress_rx) = mpsc::unbounded_channel();
        let progress = client_token.is_some().then_some(progress_tx);
        let cancel: CancellationToken = context.ct.child_token();
        // What the server asks during the call goes to this client.
        let caller = route.caller.clone().asking(context.peer.clone());
        // The upstream call runs in a task of its own: it is not tied to this request's
        // task-local context, and it ends on its own when the connection closes.
        let mut call =
            tokio::spawn(async move { caller.call_tool(params, progress, cancel).await });
        let mut last = f64::NEG_INFINITY;
        let outcome = loop {
            tokio::select! {
                biased;
                Some(update) = progress_rx.recv() => {
                    relay_progress(&context, client_token.as_ref(), &mut last, update).await;
                }
                joined = &mut call => break joined,
            }
        };
        // Progress the server sent just before its result is still on its way: relay it
        // before the result, as the server ordered them.
        while let Ok(update) = progress_rx.try_recv() {
            relay_progress(&context, client_token.as_ref(), &mut last, update).await;
        }
        Ok(call_outcome(&route, outcome).into())
    }

    /// A language tool (SPEC §14.5): routed by the file's extension to the running language
    /// server that serves it; every failure is a tool error saying why.
    pub(super) async fn language_call(
        &self,
        tool: LspTool,
        arguments: &serde_json::Map<String, serde_json::Value>,
    ) -> Result<CallToolResult, ErrorData> {
        let extension = match lsp_tools::extension(arguments) {
            Ok(extension) => extension,
            Err(message) => return Ok(CallToolResult::error(vec![ContentBlock::text(message)])),
        };
        // A server still starting is waited for (bounded), as the first listing waits for
        // the start pass.
        let deadline = tokio::time::Instant::now() + lsp_tools::START_WAIT;
        let route = loop {
            match self
                .session
                .language(extension.clone())
                .await
                .map_err(gone)?
            {
                Ok(route) => break route,
                Err(why) if why.starting && tokio::time::Instant::now() < deadline => {
                    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                }
                Err(why) => {
                    return Ok(CallToolResult::error(vec![ContentBlock::text(why.message)]))
                }
            }
        };
        tracing::info!(tool = tool.name(), server = %route.server, "language tool");
        Ok(match lsp_tools::call(tool, &route, arguments).await {
            Ok(text) => CallToolResult::success(vec![ContentBlock::text(text)]),
            Err(message) => CallToolResult::error(vec![ContentBlock::text(message)]),
        })
    }

    /// Forwards a `prompts/get` to the server that offers the prompt (its own name put back).
    pub(super) async fn forward_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        let route = self
            .session
            .route(Target::Prompt(self.qualify(&request.name)));
        let route = self
            .offered(
                route.await.map_err(gone)?,
                &format!("prompt `{}`", request.name),
            )
            .map_err(|message| ErrorData::invalid_params(message, None))?;
        if era::is_modern(&context) && route.caller.is_modern() {
            return self.translator.pass_prompt(route, request, context).await;
        }
        let mut params = GetPromptRequestParams::new(route.name.clone());
        if let Some(arguments) = request.arguments {
            params = params.with_arguments(arguments);
        }
        match route.caller.asking(context.peer).get_prompt(params).await {
            Ok(mut result) => {
                era::complete(&mut result.result_type);
                Ok(result.into())
            }
            Err(CallError::Mcp(error)) => Err(error),
            Err(CallError::Failed(error)) => Err(ErrorData::internal_error(error.message, None)),
        }
    }

    /// Forwards a `completion/complete`, routed by what it completes an argument of: the prompt
    /// (its own name put back), or the resource template (as listed).
    pub(super) async fn forward_complete(
        &self,
        mut request: CompleteRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        let (target, what) = match &request.r#ref {
            Reference::Prompt(prompt) => (
                Target::Prompt(self.qualify(&prompt.name)),
                format!("no prompt `{}`", prompt.name),
            ),
            Reference::Resource(template) => (
                Target::Template(template.uri.clone()),
                format!("no resource template `{}`", template.uri),
            ),
            _ => {
                return Err(ErrorData::invalid_params(
                    "completion/complete for a reference mcp-reconcile does not know",
                    None,
                ))
            }
        };
        let route = self
            .session
            .route(target)
            .await
            .map_err(gone)?
            .ok()
            .filter(|route| self.offers(route))
            .ok_or_else(|| ErrorData::invalid_params(what, None))?;
        if let Reference::Prompt(prompt) = &mut request.r#ref {
            prompt.name = route.name.clone();
        }
        match route.caller.asking(context.peer).complete(request).await {
            Ok(mut result) => {
                era::complete(&mut result.result_type);
                Ok(result)
            }
            Err(CallError::Mcp(error)) => Err(error),
            Err(CallError::Failed(error)) => Err(ErrorData::internal_error(error.message, None)),
        }
    }
}

/// How a forwarded call ended, as the tool result the client gets: the server's error or a
/// failure to reach it is a tool error that names the server.
pub(super) fn call_outcome(
    route: &Route,
    outcome: Result<Result<CallToolResult, CallError>, tokio::task::JoinError>,
) -> CallToolResult {
    match outcome {
        Ok(Ok(result)) => result,
        Ok(Err(CallError::Mcp(error))) => CallToolResult::error(vec![ContentBlock::text(format!(
            "server \"{}\" answered tools/call `{}` with an error: {}",
            route.server, route.name, error.message
        ))]),
        Ok(Err(CallError::Failed(error))) => {
            CallToolResult::error(vec![ContentBlock::text(error.message)])
        }
        Err(join) => CallToolResult::error(vec![ContentBlock::text(format!(
            "forwarding tools/call `{}` to server \"{}\" failed: {join}",
            route.name, route.server
        ))]),
    }
}

/// Relays one upstream progress update to the client under its own token; progress must
/// increase (notifications can overtake each other upstream), so a stale one is dropped.
pub(super) async fn relay_progress(
    context: &RequestContext<RoleServer>,
    token: Option<&rmcp::model::ProgressToken>,
    last: &mut f64,
    update: ProgressNotificationParam,
) {
    let Some(token) = token else { return };
    if update.progress <= *last {
        return;
    }
    *last = update.progress;
    let mut param = ProgressNotificationParam::new(token.clone(), update.progress);
    param.total = update.total;
    param.message = update.message;
    let _ = context.peer.notify_progress(param).await;
}
