//! `--conformance-reference --modern`: what the conformance suite's 2026-07-28 server
//! scenarios ask a server for beyond the older ones (`@modelcontextprotocol/conformance`
//! 0.2.0-alpha.12, each scenario's text): tools that answer with input-required results
//! (SEP-2322) and carry integrity-protected request state, the diagnostic tools of the
//! stateless scenario (SEP-2575), a prompt that needs input, list-changed notifications on
//! `subscriptions/listen` streams, and the tasks extension's tools on rmcp's `TaskManager`
//! (SEP-2663: tasks that finish, fail, break, ask for input inside, or follow an input round).
//!
//! The request state is sealed with rmcp's `RequestStateCodec` under a key read from the OS
//! RNG at start-up, bound to the tool it was issued for, so a tampered or transplanted state
//! is refused with `-32602`.
// Logging is deprecated by SEP-2577; the scenario checks that it is sent only when asked for.
#![allow(deprecated)]

use std::sync::{Arc, Mutex, PoisonError};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ClientCapabilities, GetPromptRequestParams,
    GetPromptResponse, InputRequiredResult, InputResponses, LoggingLevel,
    LoggingMessageNotificationParam, RequestStateCodec, SealOptions, ServerNotification,
    SubscriptionFilter,
};
use rmcp::service::{RequestContext, SubscriptionContext, SubscriptionSendError, SubscriptionSink};
use rmcp::task_manager::{TaskExit, TaskManager, TaskOptions};
use rmcp::{ErrorData, RoleServer};
use serde_json::{json, Value};

use crate::reference::{complete_tool, read};

/// The 2026-07-28 additions, shared by every connection of one fixture process (a stateless
/// HTTP server builds a handler per request, and a listen stream must hear another request's
/// change).
pub struct Modern {
    codec: RequestStateCodec,
    listeners: Mutex<Vec<SubscriptionSink>>,
    /// Whether `test_trigger_tool_change` has added its extra tool (each call toggles it).
    changed: Mutex<bool>,
    /// Whether `test_trigger_prompt_change` has added its extra prompt (each call toggles it).
    prompt_changed: Mutex<bool>,
    /// The tasks of the tasks extension's tools (SEP-2663).
    pub tasks: TaskManager,
}

impl std::fmt::Debug for Modern {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Modern").finish_non_exhaustive()
    }
}

impl Modern {
    /// The additions with a fresh request-state key.
    ///
    /// # Panics
    /// When the OS RNG cannot be read (a test fixture has no way on without it).
    pub fn new() -> Arc<Self> {
        let mut key = [0u8; 32];
        std::io::Read::read_exact(
            &mut std::fs::File::open("/dev/urandom").expect("/dev/urandom opens"),
            &mut key,
        )
        .expect("32 random bytes");
        Arc::new(Modern {
            codec: RequestStateCodec::try_new(key.to_vec()).expect("a 32-byte key"),
            listeners: Mutex::new(Vec::new()),
            changed: Mutex::new(false),
            prompt_changed: Mutex::new(false),
            tasks: TaskManager::new(),
        })
    }

    /// The tools the 2026-07-28 scenarios call.
    pub fn tools(&self) -> Vec<Value> {
        let none = json!({"type": "object", "properties": {}});
        let mut tools: Vec<Value> = [
            "test_input_required_result_elicitation",
            "test_input_required_result_sampling",
            "test_input_required_result_list_roots",
            "test_input_required_result_request_state",
            "test_input_required_result_multiple_inputs",
            "test_input_required_result_multi_round",
            "test_input_required_result_tampered_state",
            "test_input_required_result_capabilities",
            "test_missing_capability",
            "test_streaming_elicitation",
            "test_logging_tool",
            "test_trigger_tool_change",
            "test_trigger_prompt_change",
        ]
        .into_iter()
        .map(|name| json!({"name": name, "description": name.replace('_', " "), "inputSchema": none}))
        .collect();
        // The tasks extension's fixtures (SEP-2663): one sync tool, three that run as tasks.
        tools.push(
            json!({"name": "greet", "description": "Says hello, at once.",
            "inputSchema": {"type": "object", "properties": {"name": {"type": "string"}}}}),
        );
        for (name, support, description) in [
            (
                "slow_compute",
                "optional",
                "Sleeps `seconds`, then answers; a task when it may be.",
            ),
            (
                "failing_job",
                "required",
                "Fails as a tool after a moment; always a task.",
            ),
            (
                "protocol_error_job",
                "required",
                "Fails as a protocol error; always a task.",
            ),
            (
                "confirm_delete",
                "required",
                "Asks for a confirmation inside its task.",
            ),
            (
                "multi_input",
                "required",
                "Asks two questions at once inside its task.",
            ),
            (
                "test_tool_with_task",
                "required",
                "Asks a name first, then runs as a task.",
            ),
        ] {
            tools.push(json!({"name": name, "description": description,
                "inputSchema": {"type": "object", "properties": {"seconds": {"type": "number"}}},
                "execution": {"taskSupport": support}}));
        }
        if *self.changed.lock().unwrap_or_else(PoisonError::into_inner) {
            tools.push(json!({"name": "test_added_by_trigger",
                              "description": "added by test_trigger_tool_change",
                              "inputSchema": none}));
        }
        tools
    }

    /// `tools/call` for one of [`Modern::tools`]; `None` for any other name.
    pub async fn call(
        &self,
        request: &CallToolRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Option<Result<CallToolResponse, ErrorData>> {
        let responses = request.input_responses.as_ref();
        let state = request.request_state.as_deref();
        let name = request.name.as_ref();
        Some(match name {
            "test_input_required_result_elicitation" => match answered(responses, "user_name") {
                Some(answer) => complete_tool(format!(
                    "Hello, {}!",
                    answer["content"]["name"].as_str().unwrap_or("stranger")
                )),
                None => needs(
                    json!({"user_name": elicit("What is your name?", "name", "string")}),
                    None,
                ),
            },
            "test_input_required_result_sampling" => {
                match answered(responses, "capital_question") {
                    Some(answer) => complete_tool(format!(
                        "The model said: {}",
                        answer["content"]["text"].as_str().unwrap_or_default()
                    )),
                    None => needs(
                        json!({"capital_question": sample("What is the capital of France?", 100)}),
                        None,
                    ),
                }
            }
            "test_input_required_result_list_roots" => match answered(responses, "client_roots") {
                Some(answer) => complete_tool(format!("Roots: {}", roots(answer))),
                None => needs(
                    json!({"client_roots": {"method": "roots/list", "params": {}}}),
                    None,
                ),
            },
            "test_input_required_result_request_state"
            | "test_input_required_result_tampered_state" => {
                let confirm = json!({"confirm": elicit("Please confirm", "ok", "boolean")});
                match (answered(responses, "confirm"), state) {
                    (_, Some(state)) => match self.open(name, state) {
                        Err(error) => Err(error),
                        Ok(_) if answered(responses, "confirm").is_none() => {
                            needs(confirm, Some(self.seal(name, "round-1")))
                        }
                        Ok(_) => complete_tool("state-ok: confirmed".to_owned()),
                    },
                    _ => needs(confirm, Some(self.seal(name, "round-1"))),
                }
            }
            "test_input_required_result_multiple_inputs" => {
                let all = ["user_name", "greeting", "client_roots"];
                let valid = state.map(|s| self.open(name, s));
                if let Some(Err(error)) = valid {
                    Err(error)
                } else if valid.is_some() && all.iter().all(|k| answered(responses, k).is_some()) {
                    complete_tool("All three inputs received.".to_owned())
                } else {
                    needs(
                        json!({
                            "user_name": elicit("What is your name?", "name", "string"),
                            "greeting": sample("Generate a greeting", 50),
                            "client_roots": {"method": "roots/list", "params": {}}}),
                        Some(self.seal(name, "round-1")),
                    )
                }
            }
            "test_input_required_result_multi_round" => {
                let round = match state.map(|s| self.open(name, s)) {
                    Some(Err(error)) => return Some(Err(error)),
                    Some(Ok(round)) => round,
                    None => String::new(),
                };
                match (
                    round.as_str(),
                    answered(responses, "step1"),
                    answered(responses, "step2"),
                ) {
                    ("round-1", Some(answer), _) => needs(
                        json!({"step2": elicit("Step 2: What is your favorite color?", "color", "string")}),
                        Some(self.seal(
                            name,
                            &format!(
                                "round-2:{}",
                                answer["content"]["name"].as_str().unwrap_or_default()
                            ),
                        )),
                    ),
                    (round, _, Some(answer)) if round.starts_with("round-2:") => {
                        complete_tool(format!(
                            "{} likes {}.",
                            &round["round-2:".len()..],
                            answer["content"]["color"].as_str().unwrap_or("no colour")
                        ))
                    }
                    _ => needs(
                        json!({"step1": elicit("Step 1: What is your name?", "name", "string")}),
                        Some(self.seal(name, "round-1")),
                    ),
                }
            }
            "test_input_required_result_capabilities" => {
                let declared = context.meta.client_capabilities().unwrap_or_default();
                let mut wanted = serde_json::Map::new();
                if declared.sampling.is_some() {
                    wanted.insert("question".into(), sample("Say hello", 20));
                }
                if declared.elicitation.is_some() {
                    wanted.insert(
                        "user_name".into(),
                        elicit("What is your name?", "name", "string"),
                    );
                }
                if declared.roots.is_some() {
                    wanted.insert(
                        "client_roots".into(),
                        json!({"method": "roots/list", "params": {}}),
                    );
                }
                if wanted.is_empty() || responses.is_some() {
                    complete_tool("Nothing more to ask.".to_owned())
                } else {
                    needs(Value::Object(wanted), None)
                }
            }
            "test_missing_capability" => {
                let declared = context.meta.client_capabilities().unwrap_or_default();
                if declared.sampling.is_none() {
                    let mut required = ClientCapabilities::default();
                    required.sampling = Some(Default::default());
                    Err(ErrorData::missing_required_client_capability(required))
                } else {
                    complete_tool("The client declared sampling.".to_owned())
                }
            }
            "test_streaming_elicitation" => match answered(responses, "user_name") {
                Some(_) => complete_tool("Thanks.".to_owned()),
                None => needs(
                    json!({"user_name": elicit("What is your name?", "name", "string")}),
                    None,
                ),
            },
            "test_logging_tool" => {
                // 2026-07-28: a server logs only at the level the request itself asks for.
                if let Some(level) = context.meta.log_level() {
                    if level as u8 <= LoggingLevel::Info as u8 {
                        let message = LoggingMessageNotificationParam::new(
                            LoggingLevel::Info,
                            json!("logged"),
                        )
                        .with_logger("mcp-fixture-reference");
                        #[allow(deprecated)]
                        let _ = context.peer.notify_logging_message(message).await;
                    }
                }
                complete_tool("Logging test completed".to_owned())
            }
            "test_trigger_tool_change" | "test_trigger_prompt_change" => {
                let tools = name == "test_trigger_tool_change";
                let flag = if tools {
                    &self.changed
                } else {
                    &self.prompt_changed
                };
                {
                    let mut changed = flag.lock().unwrap_or_else(PoisonError::into_inner);
                    *changed = !*changed;
                }
                self.announce(tools).await;
                // A legacy client (a gateway in front of this server) hears it the old way.
                if context.meta.protocol_version().is_none() {
                    let _ = if tools {
                        context.peer.notify_tool_list_changed().await
                    } else {
                        context.peer.notify_prompt_list_changed().await
                    };
                }
                complete_tool(format!(
                    "The {} list changed.",
                    if tools { "tool" } else { "prompt" }
                ))
            }
            "test_added_by_trigger" => complete_tool("added".to_owned()),
            "greet" => complete_tool(format!(
                "Hello, {}!",
                request
                    .arguments
                    .as_ref()
                    .and_then(|a| a.get("name"))
                    .and_then(Value::as_str)
                    .unwrap_or("world")
            )),
            "slow_compute" | "failing_job" | "protocol_error_job" | "confirm_delete"
            | "multi_input" => self.task_tool(request, context),
            // Input first (an input-required result), then a task that uses it.
            "test_tool_with_task" => match answered(responses, "user_name") {
                None => needs(
                    json!({"user_name": elicit("What is your name?", "name", "string")}),
                    None,
                ),
                Some(answer) => {
                    let name = answer["content"]["name"]
                        .as_str()
                        .unwrap_or("stranger")
                        .to_owned();
                    let task = self.tasks.spawn(TaskOptions::new(), move |_| {
                        Box::pin(async move {
                            read::<rmcp::model::CallToolResult>(json!({"resultType": "complete",
                                "content": [{"type": "text", "text": format!("Hello, {name}!")}]}))
                            .map_err(TaskExit::from)
                        })
                    });
                    Ok(CallToolResponse::Task(rmcp::model::CreateTaskResult::new(
                        task,
                    )))
                }
            },
            _ => return None,
        })
    }

    /// A tool of the tasks extension: a task when the request's client declared the
    /// extension; `slow_compute` runs at once otherwise, the others need a task (`-32021`).
    fn task_tool(
        &self,
        request: &CallToolRequestParams,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let seconds = request
            .arguments
            .as_ref()
            .and_then(|a| a.get("seconds"))
            .and_then(Value::as_f64)
            .unwrap_or(1.0)
            .clamp(0.0, 60.0);
        let declared = context
            .client_capabilities()
            .is_some_and(|caps| caps.supports_tasks());
        let name = request.name.to_string();
        if !declared {
            if name == "slow_compute" {
                return complete_tool(format!("computed in {seconds} s"));
            }
            return Err(ErrorData::missing_required_client_capability(
                ClientCapabilities::builder().enable_tasks().build(),
            ));
        }
        let task = self.tasks.spawn(TaskOptions::new(), move |task| {
            Box::pin(async move {
                let wait = std::time::Duration::from_secs_f64(match name.as_str() {
                    "slow_compute" => seconds,
                    _ => 0.2,
                });
                tokio::select! {
                    () = tokio::time::sleep(wait) => {}
                    () = task.cancelled() => return Err(TaskExit::Cancelled),
                }
                let ask = |key: &'static str, message: &'static str| {
                    let request = serde_json::from_value::<rmcp::model::InputRequest>(elicit(
                        message,
                        "confirmed",
                        "boolean",
                    ));
                    let task = task.clone();
                    async move {
                        let request = request.map_err(|e| {
                            TaskExit::Error(ErrorData::internal_error(e.to_string(), None))
                        })?;
                        task.request_input(key, request).await
                    }
                };
                match name.as_str() {
                    "confirm_delete" => {
                        let answer = ask("confirm", "Delete the file?").await?;
                        return read::<rmcp::model::CallToolResult>(
                            json!({"resultType": "complete",
                            "content": [{"type": "text", "text": format!("confirm: {answer}")}]}),
                        )
                        .map_err(TaskExit::from);
                    }
                    "multi_input" => {
                        let (first, second) =
                            tokio::join!(ask("first", "First?"), ask("second", "Second?"));
                        let (first, second) = (first?, second?);
                        return read::<rmcp::model::CallToolResult>(
                            json!({"resultType": "complete",
                            "content": [{"type": "text", "text": format!("{first} {second}")}]}),
                        )
                        .map_err(TaskExit::from);
                    }
                    _ => {}
                }
                match name.as_str() {
                    "failing_job" => read::<rmcp::model::CallToolResult>(json!({"isError": true,
                        "content": [{"type": "text", "text": "the job failed"}]}))
                    .map_err(TaskExit::from),
                    "protocol_error_job" => Err(TaskExit::Error(ErrorData::internal_error(
                        "the job broke",
                        None,
                    ))),
                    _ => read::<rmcp::model::CallToolResult>(json!({"resultType": "complete",
                        "content": [{"type": "text", "text": format!("computed in {seconds} s")}]}))
                    .map_err(TaskExit::from),
                }
            })
        });
        Ok(CallToolResponse::Task(rmcp::model::CreateTaskResult::new(
            task,
        )))
    }

    /// `prompts/get` for the prompt that needs input; `None` for any other name.
    pub fn prompt(
        &self,
        request: &GetPromptRequestParams,
    ) -> Option<Result<GetPromptResponse, ErrorData>> {
        if request.name != "test_input_required_result_prompt" {
            return None;
        }
        Some(
            match answered(request.input_responses.as_ref(), "user_context") {
                Some(answer) => read::<rmcp::model::GetPromptResult>(json!({
                "resultType": "complete",
                "messages": [{"role": "user", "content": {"type": "text", "text": format!(
                    "Use this context: {}",
                    answer["content"]["context"].as_str().unwrap_or_default())}}]}))
                .map(Into::into),
                None => read::<InputRequiredResult>(json!({
                "resultType": "input_required",
                "inputRequests": {"user_context": elicit(
                    "What context should the prompt use?", "context", "string")}}))
                .map(Into::into),
            },
        )
    }

    /// The filter a listen stream gets: everything it asked for that this server has.
    pub fn accepted(&self, requested: &SubscriptionFilter) -> SubscriptionFilter {
        requested.clone()
    }

    /// Keeps `subscription` until its client cancels it.
    pub async fn listen(&self, subscription: SubscriptionContext) {
        self.listeners
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(subscription.sink().clone());
        subscription.cancelled().await;
    }

    /// The extra prompt `test_trigger_prompt_change` adds, while it is there.
    pub fn prompts(&self) -> Vec<Value> {
        if *self
            .prompt_changed
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
        {
            vec![json!({"name": "test_added_by_trigger",
                        "description": "added by test_trigger_prompt_change"})]
        } else {
            Vec::new()
        }
    }

    /// `notifications/{tools,prompts}/list_changed` to every open listen stream that asked for
    /// it; a stream that has ended is forgotten.
    async fn announce(&self, tools: bool) {
        let sinks: Vec<SubscriptionSink> = self
            .listeners
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let mut closed = Vec::new();
        for sink in sinks {
            let accepted = sink.accepted();
            let wanted = if tools {
                accepted.tools_list_changed
            } else {
                accepted.prompts_list_changed
            };
            if wanted != Some(true) {
                continue;
            }
            let note = if tools {
                ServerNotification::ToolListChangedNotification(Default::default())
            } else {
                ServerNotification::PromptListChangedNotification(Default::default())
            };
            if let Err(SubscriptionSendError::SubscriptionClosed) = sink.send(note).await {
                closed.push(sink.id().clone());
            }
        }
        self.listeners
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|sink| !closed.contains(sink.id()));
    }

    fn seal(&self, tool: &str, state: &str) -> String {
        self.codec.seal_with(
            state.as_bytes(),
            &SealOptions::new().associated_data(tool.as_bytes()),
        )
    }

    /// The state sealed for `tool`, or the spec's `-32602` when it was tampered with or issued
    /// for another tool.
    fn open(&self, tool: &str, sealed: &str) -> Result<String, ErrorData> {
        self.codec
            .open_with(sealed, tool.as_bytes())
            .ok()
            .and_then(|bytes| String::from_utf8(bytes).ok())
            .ok_or_else(|| {
                ErrorData::invalid_params("requestState failed its integrity check", None)
            })
    }
}

/// The client's answer under `key`, when it is a result object.
fn answered<'a>(responses: Option<&'a InputResponses>, key: &str) -> Option<&'a Value> {
    responses?.get(key).filter(|v| v.is_object())
}

fn needs(requests: Value, state: Option<String>) -> Result<CallToolResponse, ErrorData> {
    let mut result = json!({"resultType": "input_required", "inputRequests": requests});
    if let Some(state) = state {
        result["requestState"] = json!(state);
    }
    read::<InputRequiredResult>(result).map(Into::into)
}

fn elicit(message: &str, field: &str, kind: &str) -> Value {
    json!({"method": "elicitation/create", "params": {
        "message": message,
        "requestedSchema": {"type": "object", "properties": {field: {"type": kind}},
                            "required": [field]}}})
}

fn sample(text: &str, max_tokens: u32) -> Value {
    json!({"method": "sampling/createMessage", "params": {
        "messages": [{"role": "user", "content": {"type": "text", "text": text}}],
        "maxTokens": max_tokens}})
}

fn roots(answer: &Value) -> String {
    answer["roots"]
        .as_array()
        .map(|roots| {
            roots
                .iter()
                .filter_map(|r| r["uri"].as_str())
                .collect::<Vec<_>>()
                .join(", ")
        })
        .unwrap_or_default()
}
