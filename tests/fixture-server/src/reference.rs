//! `--conformance-reference`: the tools, prompts and resources the official MCP conformance
//! suite's server scenarios ask for (`@modelcontextprotocol/conformance` 0.1.13 and, with
//! `--modern`, 0.2.0-alpha.12's 2026-07-28 ones: `modern.rs`; each
//! scenario's text says what it needs), so the suite can run against this fixture directly
//! and through `mcp-reconcile serve` in front of it.
//!
//! The protocol objects are written as the scenario texts show them (JSON) and read into
//! rmcp's types, so what goes on the wire is what the suite expects, byte for byte.
// The pinned suite tests the 2025-06-18 features (logging, sampling) that rmcp marks
// deprecated for later protocol versions.
#![allow(deprecated)]

use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::SubscriptionFilter;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ClientResult, CompleteRequestParams,
    CompleteResult, GetPromptRequestParams, GetPromptResponse, GetPromptResult, Implementation,
    ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult, ListToolsResult,
    LoggingLevel, LoggingMessageNotificationParam, PaginatedRequestParams,
    ProgressNotificationParam, ProtocolVersion, ReadResourceRequestParams, ReadResourceResponse,
    ReadResourceResult, ServerCapabilities, ServerConfig, ServerRequest, SetLevelRequestParams,
    SubscribeRequestParams, UnsubscribeRequestParams,
};
use rmcp::service::{RequestContext, SubscriptionContext};

use crate::modern::Modern;
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde::de::DeserializeOwned;
use serde_json::{json, Value};

/// `tasks/*` of a legacy reference server: it has no tasks.
fn no_tasks() -> ErrorData {
    ErrorData::invalid_params("this server runs no tasks", None)
}

/// A 1×1 red PNG.
const PNG: &str = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8z8BQDwAEhQGAhKmMIQAAAABJRU5ErkJggg==";
/// A WAV header with no samples.
const WAV: &str = "UklGRiQAAABXQVZFZm10IBAAAAABAAEARKwAAIhYAQACABAAZGF0YQAAAAA=";

/// One connection's state: its log level, and (`--modern`) the 2026-07-28 additions shared
/// by every connection of the process.
#[derive(Clone, Debug)]
pub struct Reference {
    level: Arc<Mutex<LoggingLevel>>,
    modern: Option<Arc<Modern>>,
}

impl Default for Reference {
    fn default() -> Self {
        Reference::new(None)
    }
}

impl Reference {
    /// A legacy reference server (up to 2025-11-25), or with `modern` also a 2026-07-28 one.
    pub fn new(modern: Option<Arc<Modern>>) -> Self {
        Reference {
            level: Arc::new(Mutex::new(LoggingLevel::Debug)),
            modern,
        }
    }
}

/// The place of `level` in the order the spec gives (debug lowest).
fn severity(level: LoggingLevel) -> u8 {
    level as u8
}

pub(crate) fn read<T: DeserializeOwned>(value: Value) -> Result<T, ErrorData> {
    serde_json::from_value(value).map_err(|e| ErrorData::internal_error(e.to_string(), None))
}

/// `value` read as a result that says it is complete (`resultType`, which 2026-07-28 requires;
/// rmcp drops it for a client of an older version).
pub(crate) fn complete<T: DeserializeOwned>(mut value: Value) -> Result<T, ErrorData> {
    if let Some(object) = value.as_object_mut() {
        object.insert("resultType".into(), json!("complete"));
    }
    read(value)
}

pub(crate) fn complete_tool(text: String) -> Result<CallToolResponse, ErrorData> {
    complete::<CallToolResult>(json!({"content": [{"type": "text", "text": text}]})).map(Into::into)
}

fn text_result(text: String) -> Result<CallToolResponse, ErrorData> {
    complete_tool(text)
}

fn tools() -> Value {
    let none = json!({"type": "object", "properties": {}});
    let simple = |name: &str, description: &str| json!({"name": name, "description": description, "inputSchema": none});
    json!([
        simple("test_simple_text", "Returns a simple text."),
        simple("test_image_content", "Returns an image."),
        simple("test_audio_content", "Returns audio."),
        simple("test_embedded_resource", "Returns an embedded resource."),
        simple("test_multiple_content_types", "Returns text, an image and a resource."),
        simple("test_tool_with_logging", "Logs three messages while it runs."),
        simple("test_error_handling", "Always fails."),
        simple("test_tool_with_progress", "Reports progress while it runs."),
        {"name": "test_sampling", "description": "Asks the client's LLM.",
         "inputSchema": {"type": "object", "properties": {"prompt": {"type": "string"}},
                         "required": ["prompt"]}},
        {"name": "test_elicitation", "description": "Asks the user.",
         "inputSchema": {"type": "object", "properties": {"message": {"type": "string"}},
                         "required": ["message"]}},
        simple("test_elicitation_sep1034_defaults", "Asks the user, with defaults."),
        simple("test_elicitation_sep1330_enums", "Asks the user, with every enum kind."),
        {"name": "json_schema_2020_12_tool",
         "description": "Tool with JSON Schema 2020-12 features",
         "inputSchema": {
             "$schema": "https://json-schema.org/draft/2020-12/schema",
             "type": "object",
             "$defs": {"address": {"$anchor": "addressDef", "type": "object", "properties": {
                 "street": {"type": "string"}, "city": {"type": "string"}}}},
             "properties": {"name": {"type": "string"},
                            "address": {"$ref": "#/$defs/address"},
                            "contactMethod": {"type": "string", "enum": ["phone", "email"]},
                            "phone": {"type": "string"}, "email": {"type": "string"}},
             "allOf": [{"anyOf": [{"required": ["phone"]}, {"required": ["email"]}]}],
             "if": {"properties": {"contactMethod": {"const": "phone"}},
                    "required": ["contactMethod"]},
             "then": {"required": ["phone"]},
             "else": {"required": ["email"]},
             "additionalProperties": false}},
    ])
}

fn sep1034_schema() -> Value {
    json!({"type": "object", "properties": {
        "name": {"type": "string", "default": "John Doe"},
        "age": {"type": "integer", "default": 30},
        "score": {"type": "number", "default": 95.5},
        "status": {"type": "string", "enum": ["active", "inactive", "pending"],
                   "default": "active"},
        "verified": {"type": "boolean", "default": true}}})
}

fn sep1330_schema() -> Value {
    json!({"type": "object", "properties": {
        "untitledSingle": {"type": "string", "enum": ["option1", "option2", "option3"]},
        "titledSingle": {"type": "string", "oneOf": [
            {"const": "value1", "title": "First Option"},
            {"const": "value2", "title": "Second Option"},
            {"const": "value3", "title": "Third Option"}]},
        "legacyEnum": {"type": "string", "enum": ["opt1", "opt2", "opt3"],
                       "enumNames": ["Option One", "Option Two", "Option Three"]},
        "untitledMulti": {"type": "array",
                          "items": {"type": "string", "enum": ["option1", "option2", "option3"]}},
        "titledMulti": {"type": "array", "items": {"anyOf": [
            {"const": "value1", "title": "First Choice"},
            {"const": "value2", "title": "Second Choice"},
            {"const": "value3", "title": "Third Choice"}]}}}})
}

impl Reference {
    /// Sends the client `method` with `params` and returns its answer as JSON.
    async fn ask(
        &self,
        context: &RequestContext<RoleServer>,
        method: &str,
        params: Value,
    ) -> Result<Value, ErrorData> {
        let request: ServerRequest = read(json!({"method": method, "params": params}))?;
        let answer: ClientResult = context
            .peer
            .send_request(request)
            .await
            .map_err(|e| ErrorData::internal_error(format!("{method} failed: {e}"), None))?;
        serde_json::to_value(answer).map_err(|e| ErrorData::internal_error(e.to_string(), None))
    }

    async fn elicit(
        &self,
        context: &RequestContext<RoleServer>,
        message: &str,
        schema: Value,
    ) -> Result<Value, ErrorData> {
        if context
            .peer
            .peer_info()
            .is_none_or(|i| i.capabilities.elicitation.is_none())
        {
            return Err(ErrorData::invalid_request(
                "the client does not support elicitation",
                None,
            ));
        }
        self.ask(
            context,
            "elicitation/create",
            json!({"message": message, "requestedSchema": schema}),
        )
        .await
    }

    async fn log(&self, context: &RequestContext<RoleServer>, text: &str) {
        let level = *self.level.lock().expect("level");
        if severity(LoggingLevel::Info) < severity(level) {
            return;
        }
        let message = LoggingMessageNotificationParam::new(LoggingLevel::Info, json!(text))
            .with_logger("mcp-fixture-reference");
        #[allow(deprecated)]
        let _ = context.peer.notify_logging_message(message).await;
    }

    async fn run(
        &self,
        name: &str,
        args: &serde_json::Map<String, Value>,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let text_arg = |key: &str| args.get(key).and_then(Value::as_str).unwrap_or_default();
        let content = match name {
            "test_simple_text" => {
                return text_result("This is a simple text response for testing.".into())
            }
            "test_image_content" => {
                json!([{"type": "image", "data": PNG, "mimeType": "image/png"}])
            }
            "test_audio_content" => {
                json!([{"type": "audio", "data": WAV, "mimeType": "audio/wav"}])
            }
            "test_embedded_resource" => json!([{"type": "resource", "resource": {
                "uri": "test://embedded-resource", "mimeType": "text/plain",
                "text": "This is an embedded resource content."}}]),
            "test_multiple_content_types" => json!([
                {"type": "text", "text": "Multiple content types test:"},
                {"type": "image", "data": PNG, "mimeType": "image/png"},
                {"type": "resource", "resource": {"uri": "test://mixed-content-resource",
                    "mimeType": "application/json", "text": "{\"test\":\"data\",\"value\":123}"}}]),
            "test_tool_with_logging" => {
                self.log(context, "Tool execution started").await;
                tokio::time::sleep(Duration::from_millis(50)).await;
                self.log(context, "Tool processing data").await;
                tokio::time::sleep(Duration::from_millis(50)).await;
                self.log(context, "Tool execution completed").await;
                return text_result("Logging test completed".into());
            }
            "test_error_handling" => {
                return complete::<CallToolResult>(
                    json!({"isError": true, "content": [{"type": "text",
                    "text": "This tool intentionally returns an error for testing"}]}),
                )
                .map(Into::into)
            }
            "test_tool_with_progress" => {
                let token = context.meta.get_progress_token();
                for (i, progress) in [0.0, 50.0, 100.0].into_iter().enumerate() {
                    if i > 0 {
                        tokio::time::sleep(Duration::from_millis(50)).await;
                    }
                    if let Some(token) = &token {
                        let note = ProgressNotificationParam::new(token.clone(), progress)
                            .with_total(100.0);
                        let _ = context.peer.notify_progress(note).await;
                    }
                }
                return text_result("Progress test completed".into());
            }
            "test_sampling" => {
                if context
                    .peer
                    .peer_info()
                    .is_none_or(|i| i.capabilities.sampling.is_none())
                {
                    return Err(ErrorData::invalid_request(
                        "the client does not support sampling",
                        None,
                    ));
                }
                let answer = self
                    .ask(
                        context,
                        "sampling/createMessage",
                        json!({
                        "messages": [{"role": "user",
                                      "content": {"type": "text", "text": text_arg("prompt")}}],
                        "maxTokens": 100}),
                    )
                    .await?;
                let said = answer["content"]["text"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned();
                return text_result(format!("LLM response: {said}"));
            }
            "test_elicitation" => {
                let schema = json!({"type": "object", "properties": {
                    "username": {"type": "string", "description": "User's response"},
                    "email": {"type": "string", "description": "User's email address"}},
                    "required": ["username", "email"]});
                let answer = self.elicit(context, text_arg("message"), schema).await?;
                return text_result(format!(
                    "User response: action={}, content={}",
                    answer["action"].as_str().unwrap_or_default(),
                    answer.get("content").unwrap_or(&Value::Null)
                ));
            }
            "test_elicitation_sep1034_defaults" | "test_elicitation_sep1330_enums" => {
                let schema = if name.ends_with("defaults") {
                    sep1034_schema()
                } else {
                    sep1330_schema()
                };
                let answer = self
                    .elicit(
                        context,
                        "Please review and update the form fields with defaults",
                        schema,
                    )
                    .await?;
                return text_result(format!(
                    "Elicitation completed: action={}, content={}",
                    answer["action"].as_str().unwrap_or_default(),
                    answer.get("content").unwrap_or(&Value::Null)
                ));
            }
            other => {
                return Err(ErrorData::invalid_params(
                    format!("unknown tool `{other}`"),
                    None,
                ))
            }
        };
        complete::<CallToolResult>(json!({"content": content})).map(Into::into)
    }
}

impl ServerHandler for Reference {
    fn get_info(&self) -> ServerConfig {
        // `--modern`: `test_trigger_tool_change` changes the list and says so, and the tasks
        // extension's tools run as tasks (SEP-2663).
        let mut capabilities = json!({
            "tools": {"listChanged": self.modern.is_some()},
            "prompts": {"listChanged": self.modern.is_some()},
            "resources": {"subscribe": true, "listChanged": false},
            "logging": {},
            "completions": {}
        });
        if self.modern.is_some() {
            capabilities["extensions"] = json!({rmcp::model::TASKS_EXTENSION_ID: {}});
        }
        let capabilities: ServerCapabilities =
            serde_json::from_value(capabilities).unwrap_or_default();
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new(
                "mcp-fixture-reference",
                env!("CARGO_PKG_VERSION"),
            ))
            .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
    }

    fn supported_protocol_versions(&self) -> std::borrow::Cow<'static, [ProtocolVersion]> {
        std::borrow::Cow::Borrowed(if self.modern.is_some() {
            ProtocolVersion::KNOWN_VERSIONS
        } else {
            ProtocolVersion::known_up_to(&ProtocolVersion::LATEST_WITH_INITIALIZE)
        })
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        self.modern.as_ref().map(|m| m.accepted(requested))
    }

    async fn get_task(
        &self,
        request: rmcp::model::GetTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::GetTaskResult, ErrorData> {
        let modern = self.modern.as_ref().ok_or_else(no_tasks)?;
        Ok(rmcp::model::GetTaskResult::new(
            modern.tasks.get_task(&request.task_id)?,
        ))
    }

    async fn update_task(
        &self,
        request: rmcp::model::UpdateTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let modern = self.modern.as_ref().ok_or_else(no_tasks)?;
        modern
            .tasks
            .update_task(&request.task_id, request.input_responses)
    }

    async fn cancel_task(
        &self,
        request: rmcp::model::CancelTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        let modern = self.modern.as_ref().ok_or_else(no_tasks)?;
        modern.tasks.cancel_task(&request.task_id)
    }

    async fn listen(&self, subscription: SubscriptionContext) -> Result<(), ErrorData> {
        match &self.modern {
            Some(modern) => modern.listen(subscription).await,
            None => subscription.cancelled().await,
        }
        Ok(())
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let mut tools = tools();
        if let (Some(modern), Some(list)) = (&self.modern, tools.as_array_mut()) {
            list.extend(modern.tools());
        }
        complete(json!({"tools": tools}))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if let Some(modern) = &self.modern {
            if let Some(response) = modern.call(&request, &context).await {
                return response;
            }
        }
        let args = request.arguments.unwrap_or_default();
        self.run(&request.name, &args, &context).await
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        let mut prompts = json!([
            {"name": "test_simple_prompt", "description": "A simple prompt."},
            {"name": "test_prompt_with_arguments", "description": "A prompt with arguments.",
             "arguments": [
                {"name": "arg1", "description": "First test argument", "required": true},
                {"name": "arg2", "description": "Second test argument", "required": true}]},
            {"name": "test_prompt_with_embedded_resource",
             "description": "A prompt with an embedded resource.",
             "arguments": [{"name": "resourceUri", "description": "URI of the resource to embed",
                            "required": true}]},
            {"name": "test_prompt_with_image", "description": "A prompt with an image."}
        ]);
        if let (Some(modern), Some(list)) = (&self.modern, prompts.as_array_mut()) {
            list.push(json!({"name": "test_input_required_result_prompt",
                             "description": "A prompt that asks for its context first."}));
            list.extend(modern.prompts());
        }
        complete(json!({"prompts": prompts}))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        if let Some(response) = self.modern.as_ref().and_then(|m| m.prompt(&request)) {
            return response;
        }
        let args = request.arguments.unwrap_or_default();
        let arg = |key: &str| args.get(key).and_then(Value::as_str).unwrap_or_default();
        let text =
            |text: String| json!({"role": "user", "content": {"type": "text", "text": text}});
        let messages = match request.name.as_str() {
            "test_simple_prompt" => json!([text("This is a simple prompt for testing.".into())]),
            "test_prompt_with_arguments" => json!([text(format!(
                "Prompt with arguments: arg1='{}', arg2='{}'",
                arg("arg1"),
                arg("arg2")
            ))]),
            "test_prompt_with_embedded_resource" => json!([
                {"role": "user", "content": {"type": "resource", "resource": {
                    "uri": arg("resourceUri"), "mimeType": "text/plain",
                    "text": "Embedded resource content for testing."}}},
                text("Please process the embedded resource above.".into())]),
            "test_prompt_with_image" => json!([
                {"role": "user", "content": {"type": "image", "data": PNG, "mimeType": "image/png"}},
                text("Please analyze the image above.".into())]),
            other => {
                return Err(ErrorData::invalid_params(
                    format!("unknown prompt `{other}`"),
                    None,
                ))
            }
        };
        complete::<GetPromptResult>(json!({"messages": messages})).map(Into::into)
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        complete(json!({"resources": [
            {"uri": "test://static-text", "name": "static-text",
             "description": "A static text resource.", "mimeType": "text/plain"},
            {"uri": "test://static-binary", "name": "static-binary",
             "description": "A static binary resource.", "mimeType": "image/png"},
            {"uri": "test://watched-resource", "name": "watched-resource",
             "description": "A resource to subscribe to.", "mimeType": "text/plain"}
        ]}))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        complete(json!({"resourceTemplates": [
            {"uriTemplate": "test://template/{id}/data", "name": "template-data",
             "description": "Data for an id.", "mimeType": "application/json"}
        ]}))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let uri = request.uri.as_str();
        let contents = match uri {
            "test://static-text" => json!({"uri": uri, "mimeType": "text/plain",
                "text": "This is the content of the static text resource."}),
            "test://static-binary" => json!({"uri": uri, "mimeType": "image/png", "blob": PNG}),
            "test://watched-resource" => json!({"uri": uri, "mimeType": "text/plain",
                "text": "Watched resource content."}),
            _ => match uri
                .strip_prefix("test://template/")
                .and_then(|rest| rest.strip_suffix("/data"))
            {
                Some(id) if !id.is_empty() && !id.contains('/') => {
                    let data = json!({"id": id, "templateTest": true,
                                      "data": format!("Data for ID: {id}")});
                    json!({"uri": uri, "mimeType": "application/json", "text": data.to_string()})
                }
                _ => {
                    // -32602 naming the URI, as 2026-07-28 (SEP-2164) asks.
                    return Err(ErrorData::resource_not_found(
                        format!("no resource `{uri}`"),
                        Some(json!({"uri": uri})),
                    ));
                }
            },
        };
        complete::<ReadResourceResult>(json!({"contents": [contents]})).map(Into::into)
    }

    #[allow(deprecated)]
    async fn subscribe(
        &self,
        _request: SubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        // Accepted; none of its resources ever changes, so no update is ever due.
        Ok(())
    }

    #[allow(deprecated)]
    async fn unsubscribe(
        &self,
        _request: UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        Ok(())
    }

    async fn complete(
        &self,
        request: CompleteRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        let typed = request.argument.value.to_lowercase();
        let values: Vec<&str> = ["paris", "park", "party"]
            .into_iter()
            .filter(|v| v.starts_with(&typed))
            .collect();
        complete(json!({"completion": {"values": values, "total": values.len(), "hasMore": false}}))
    }

    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        *self.level.lock().expect("level") = request.level;
        Ok(())
    }
}
