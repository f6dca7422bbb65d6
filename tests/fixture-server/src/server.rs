//! The MCP side: a [`ServerHandler`] whose tools, prompts and resources come from the options.

use std::borrow::Cow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, GetPromptRequestParams,
    GetPromptResponse, GetPromptResult, Implementation, JsonObject, ListPromptsResult,
    ListResourcesResult, ListToolsResult, PaginatedRequestParams, ProgressNotificationParam,
    Prompt, PromptArgument, PromptMessage, PromptsCapability, ProtocolVersion,
    ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult, Resource,
    ResourceContents, ResourcesCapability, Role, ServerCapabilities, ServerConfig, Tool,
    ToolsCapability,
};
use rmcp::service::{NotificationContext, RequestContext};
use rmcp::{ErrorData, RoleServer, ServerHandler};
use serde_json::{json, Value};

use crate::cli::{bad_names, Args, Fault, PromptKind, ToolKind};

/// What every connection offers; shared by all HTTP sessions.
#[derive(Debug)]
pub struct Catalog {
    pub name: String,
    pub tools: Vec<ToolKind>,
    pub prompts: Vec<PromptKind>,
    pub resources: u32,
    pub tool_prefix: String,
    pub change_tools_after: Option<Duration>,
    /// `--describe-from`.
    pub describe_from: Option<std::path::PathBuf>,
    pub fault: Option<Fault>,
    /// `--resource-template`.
    pub resource_template: Option<String>,
    /// `--skills-from`.
    pub skills_from: Option<std::path::PathBuf>,
    /// Where `ask_later` and `flood` note what they learn after their call.
    pub marker: Option<std::path::PathBuf>,
}

impl Catalog {
    pub fn from_args(args: &Args) -> Self {
        Self {
            name: args.name.clone(),
            tools: args.tools.0.clone(),
            prompts: args.prompts.0.clone(),
            resources: args.resources,
            tool_prefix: args.tool_prefix.clone(),
            change_tools_after: args.change_tools_after.map(Duration::from_millis),
            describe_from: args.describe_from.clone(),
            fault: args.fault,
            marker: args.marker.clone(),
            resource_template: args.resource_template.clone(),
            skills_from: args.skills_from.clone(),
        }
    }
}

/// One MCP connection (the stdio session, or one HTTP session).
#[derive(Clone, Debug)]
pub struct Fixture {
    catalog: Arc<Catalog>,
    /// Set once `--change-tools-after` has fired for this connection.
    late_added: Arc<AtomicBool>,
}

impl Fixture {
    pub fn new(catalog: Arc<Catalog>) -> Self {
        Self {
            catalog,
            late_added: Arc::new(AtomicBool::new(false)),
        }
    }

    /// The prompts `--describe-from`'s file lists, when it lists prompts.
    fn described_prompts(&self) -> Option<Vec<Prompt>> {
        crate::described::prompts(self.catalog.describe_from.as_deref()?)
    }

    fn offered_tools(&self) -> impl Iterator<Item = ToolKind> + '_ {
        let late = self
            .late_added
            .load(Ordering::SeqCst)
            .then_some(ToolKind::Late)
            .filter(|late| !self.catalog.tools.contains(late));
        self.catalog.tools.iter().copied().chain(late)
    }

    /// Appends `line` to the marker file, if there is one.
    fn note(&self, line: &str) {
        if let Some(marker) = &self.catalog.marker {
            let _ = crate::faults::append_marker(marker, line);
        }
    }

    fn tool_named(&self, name: &str) -> Option<ToolKind> {
        if let Some(path) = &self.catalog.describe_from {
            return crate::described::kind_of(path, &self.catalog.tool_prefix, name);
        }
        let base = name.strip_prefix(self.catalog.tool_prefix.as_str())?;
        self.offered_tools().find(|t| t.base_name() == base)
    }

    fn describe(&self, kind: ToolKind) -> Tool {
        let name = format!("{}{}", self.catalog.tool_prefix, kind.base_name());
        let (description, schema) = match kind {
            ToolKind::Echo => (
                "Returns its `text` argument.",
                object_schema(json!({"text": {"type": "string"}}), &["text"]),
            ),
            ToolKind::Add => (
                "Returns the sum of the numbers `a` and `b`.",
                object_schema(
                    json!({"a": {"type": "number"}, "b": {"type": "number"}}),
                    &["a", "b"],
                ),
            ),
            ToolKind::Sleep => (
                "Waits `ms` milliseconds, reporting progress when asked; can be cancelled.",
                object_schema(json!({"ms": {"type": "integer", "minimum": 0}}), &["ms"]),
            ),
            ToolKind::Env => (
                "Returns the value of the server's environment variable `name`.",
                object_schema(json!({"name": {"type": "string"}}), &["name"]),
            ),
            ToolKind::Pid => (
                "Returns the server's process id.",
                object_schema(json!({}), &[]),
            ),
            ToolKind::Late => (
                "Added by --change-tools-after; returns \"late\".",
                object_schema(json!({}), &[]),
            ),
            ToolKind::Ask | ToolKind::AskLater => (
                "Asks the client `text` (elicitation), once the file `wait_for` exists.",
                object_schema(
                    json!({"text": {"type": "string"}, "wait_for": {"type": "string"}}),
                    &["text"],
                ),
            ),
            ToolKind::Roots => (
                "Returns the client's roots, asked once the file `wait_for` exists.",
                object_schema(json!({"wait_for": {"type": "string"}}), &[]),
            ),
            ToolKind::Flood => (
                "Sends `logs` log messages of `size` bytes, then `elicitations` at once.",
                object_schema(
                    json!({"logs": {"type": "integer"}, "size": {"type": "integer"},
                           "elicitations": {"type": "integer"}}),
                    &[],
                ),
            ),
        };
        Tool::new(name, description, schema)
    }

    async fn run_tool(
        &self,
        kind: ToolKind,
        args: &JsonObject,
        context: &RequestContext<RoleServer>,
    ) -> Result<CallToolResult, ErrorData> {
        let text = match kind {
            ToolKind::Echo => string_arg(args, "text")?.to_owned(),
            ToolKind::Add => add(number_arg(args, "a")?, number_arg(args, "b")?),
            ToolKind::Sleep => {
                let ms = args.get("ms").and_then(Value::as_u64).ok_or_else(|| {
                    ErrorData::invalid_params("`ms` must be a non-negative integer", None)
                })?;
                sleep(ms, context).await?;
                format!("slept {ms} ms")
            }
            ToolKind::Env => {
                let name = string_arg(args, "name")?;
                match std::env::var(name) {
                    Ok(value) => value,
                    Err(_) => {
                        return Ok(CallToolResult::error(vec![ContentBlock::text(format!(
                            "fixture: environment variable {name} is not set"
                        ))]))
                    }
                }
            }
            ToolKind::Pid => std::process::id().to_string(),
            ToolKind::Late => "late".to_owned(),
            ToolKind::Ask => crate::asks::ask(args, context, self.catalog.marker.clone()).await,
            ToolKind::AskLater => {
                crate::asks::ask_later(args, context, self.catalog.marker.clone());
                "scheduled".to_owned()
            }
            ToolKind::Roots => crate::asks::roots(args, context).await,
            ToolKind::Flood => crate::asks::flood(args, context, self.catalog.marker.clone()).await,
        };
        Ok(CallToolResult::success(vec![ContentBlock::text(text)]))
    }
}

impl ServerHandler for Fixture {
    fn get_info(&self) -> ServerConfig {
        let mut capabilities = ServerCapabilities::default();
        let mut tools = ToolsCapability::default();
        tools.list_changed =
            Some(self.catalog.change_tools_after.is_some() || self.catalog.describe_from.is_some());
        capabilities.tools = Some(tools);
        if !self.catalog.prompts.is_empty() || self.catalog.fault == Some(Fault::BadNames) {
            capabilities.prompts = Some(PromptsCapability::default());
        }
        if self.catalog.describe_from.is_some() {
            let mut prompts = PromptsCapability::default();
            prompts.list_changed = Some(true);
            capabilities.prompts = Some(prompts);
        }
        let skills = self.catalog.skills_from.is_some();
        if self.catalog.resources > 0 || self.catalog.resource_template.is_some() || skills {
            let mut resources = ResourcesCapability::default();
            resources.subscribe = Some(true);
            resources.list_changed = Some(skills);
            capabilities.resources = Some(resources);
        }
        if skills {
            capabilities
                .extensions
                .get_or_insert_with(Default::default)
                .insert(
                    rmcp::model::SKILLS_EXTENSION_ID.to_owned(),
                    Default::default(),
                );
        }
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new(
                self.catalog.name.clone(),
                env!("CARGO_PKG_VERSION"),
            ))
            .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
    }

    /// Only the versions that start with `initialize`, so every client goes through the
    /// handshake that `--hang-handshake` and `--change-tools-after` hook into.
    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(ProtocolVersion::known_up_to(
            &ProtocolVersion::LATEST_WITH_INITIALIZE,
        ))
    }

    /// With the `roots` tool: asks for the roots again and appends `roots after list_changed:
    /// URIS` to the marker file.
    async fn on_roots_list_changed(&self, context: NotificationContext<RoleServer>) {
        if !self.catalog.tools.contains(&ToolKind::Roots) {
            return;
        }
        let roots = crate::asks::roots_of(&context.peer).await;
        self.note(&format!("roots after list_changed: {roots}"));
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        if let Some(path) = &self.catalog.describe_from {
            crate::described::watch(path.clone(), context.peer.clone());
        }
        if let Some(path) = &self.catalog.skills_from {
            crate::skills::watch(path.clone(), context.peer.clone());
        }
        let Some(delay) = self.catalog.change_tools_after else {
            return;
        };
        let late_added = self.late_added.clone();
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            late_added.store(true, Ordering::SeqCst);
            if let Err(e) = context.peer.notify_tool_list_changed().await {
                eprintln!("fixture: could not send tools/list_changed: {e}");
            }
        });
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        if let Some(path) = &self.catalog.describe_from {
            return Ok(ListToolsResult::with_all_items(crate::described::read(
                path,
            )));
        }
        let mut tools: Vec<Tool> = self.offered_tools().map(|t| self.describe(t)).collect();
        match self.catalog.fault {
            Some(Fault::EndlessPages) => {
                let mut page = ListToolsResult::with_all_items(tools);
                page.next_cursor = Some("fixture-next-page".to_owned());
                return Ok(page);
            }
            Some(Fault::BadNames) => {
                tools.extend(bad_names().into_iter().map(|name| {
                    Tool::new(name, "A badly named tool.", object_schema(json!({}), &[]))
                }))
            }
            None => {}
        }
        Ok(ListToolsResult::with_all_items(tools))
    }

    fn get_tool(&self, name: &str) -> Option<Tool> {
        if let Some(path) = &self.catalog.describe_from {
            return crate::described::read(path)
                .into_iter()
                .find(|t| t.name == name);
        }
        self.tool_named(name).map(|t| self.describe(t))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let kind = self.tool_named(&request.name).ok_or_else(|| {
            ErrorData::invalid_params(format!("unknown tool `{}`", request.name), None)
        })?;
        let args = request.arguments.unwrap_or_default();
        self.run_tool(kind, &args, &context).await.map(Into::into)
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        if let Some(described) = self.described_prompts() {
            return Ok(ListPromptsResult::with_all_items(described));
        }
        let mut prompts: Vec<Prompt> = self
            .catalog
            .prompts
            .iter()
            .map(|&p| describe_prompt(p))
            .collect();
        if self.catalog.fault == Some(Fault::BadNames) {
            prompts.extend(
                bad_names()
                    .into_iter()
                    .map(|name| Prompt::new(name, Some("A badly named prompt."), None)),
            );
        }
        Ok(ListPromptsResult::with_all_items(prompts))
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        if let Some(described) = self.described_prompts() {
            let prompt = described
                .into_iter()
                .find(|p| p.name == request.name)
                .ok_or_else(|| {
                    ErrorData::invalid_params(format!("unknown prompt `{}`", request.name), None)
                })?;
            let text = prompt.description.unwrap_or_default();
            return Ok(
                GetPromptResult::new(vec![PromptMessage::new_text(Role::User, text)]).into(),
            );
        }
        let kind = self
            .catalog
            .prompts
            .iter()
            .copied()
            .find(|p| p.name() == request.name)
            .ok_or_else(|| {
                ErrorData::invalid_params(format!("unknown prompt `{}`", request.name), None)
            })?;
        let args = request.arguments.unwrap_or_default();
        let who = string_arg(&args, "name")?;
        let text = match kind {
            PromptKind::Greet => format!("Say hello to {who}."),
            PromptKind::Farewell => format!("Say goodbye to {who}."),
        };
        Ok(
            GetPromptResult::new(vec![PromptMessage::new_text(Role::User, text)])
                .with_description(describe_prompt(kind).description.unwrap_or_default())
                .into(),
        )
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let resources = (1..=self.catalog.resources).map(|i| {
            Resource::new(resource_uri(i), format!("resource-{i}")).with_mime_type("text/plain")
        });
        Ok(ListResourcesResult::with_all_items(resources.collect()))
    }

    /// Accepted (nothing ever changes); noted in the marker file as `subscribe URI`.
    #[allow(deprecated)]
    async fn subscribe(
        &self,
        request: rmcp::model::SubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.note(&format!("subscribe {}", request.uri));
        Ok(())
    }

    /// Noted in the marker file as `unsubscribe URI`.
    #[allow(deprecated)]
    async fn unsubscribe(
        &self,
        request: rmcp::model::UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.note(&format!("unsubscribe {}", request.uri));
        Ok(())
    }

    async fn list_skills(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListSkillsResult, ErrorData> {
        let path = self.catalog.skills_from.as_deref();
        let skills = path.map(crate::skills::read).unwrap_or_default();
        Ok(rmcp::model::ListSkillsResult::with_all_items(skills))
    }

    async fn get_skill(
        &self,
        request: rmcp::model::GetSkillRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::GetSkillResult, ErrorData> {
        let path = self.catalog.skills_from.as_deref();
        path.and_then(|path| crate::skills::get(path, &request.uri))
            .map(rmcp::model::GetSkillResult::new)
            .ok_or_else(|| ErrorData::invalid_params(format!("no skill `{}`", request.uri), None))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListResourceTemplatesResult, ErrorData> {
        let templates = self
            .catalog
            .resource_template
            .iter()
            .map(|t| rmcp::model::ResourceTemplate::new(t.clone(), "fixture-template"));
        Ok(rmcp::model::ListResourceTemplatesResult::with_all_items(
            templates.collect(),
        ))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        if let Some(path) = &self.catalog.skills_from {
            if let Some(result) = crate::skills::read_file(path, &request.uri) {
                return Ok(result.into());
            }
        }
        let by_template = self.catalog.resource_template.as_deref().is_some_and(|t| {
            let prefix = t.split('{').next().unwrap_or_default();
            request.uri.starts_with(prefix) && request.uri.len() > prefix.len()
        });
        if by_template {
            let text = format!("fixture template: {}", request.uri);
            let contents = ResourceContents::TextResourceContents {
                uri: request.uri,
                mime_type: Some("text/plain".to_owned()),
                text,
                meta: None,
            };
            return Ok(ReadResourceResult::new(vec![contents]).into());
        }
        let index = (1..=self.catalog.resources)
            .find(|&i| resource_uri(i) == request.uri)
            .ok_or_else(|| {
                ErrorData::resource_not_found(format!("no resource `{}`", request.uri), None)
            })?;
        let contents = ResourceContents::TextResourceContents {
            uri: request.uri,
            mime_type: Some("text/plain".to_owned()),
            text: format!("fixture resource {index}"),
            meta: None,
        };
        Ok(ReadResourceResult::new(vec![contents]).into())
    }
}

/// Waits `ms`; when the request carries a progress token, reports progress (and the total, in
/// milliseconds) every tenth of the wait, but at least every 250 ms. Cancellation ends the wait.
async fn sleep(ms: u64, context: &RequestContext<RoleServer>) -> Result<(), ErrorData> {
    let token = context.meta.get_progress_token();
    let tick = (ms / 10).clamp(1, 250);
    let mut done = 0;
    while done < ms {
        let step = tick.min(ms - done);
        tokio::select! {
            () = tokio::time::sleep(Duration::from_millis(step)) => {}
            () = context.ct.cancelled() => {
                eprintln!("fixture: sleep cancelled");
                return Err(ErrorData::internal_error("sleep cancelled", None));
            }
        }
        done += step;
        if let Some(token) = &token {
            let progress =
                ProgressNotificationParam::new(token.clone(), done as f64).with_total(ms as f64);
            // A client that went away will also drop the response; nothing to do here.
            let _ = context.peer.notify_progress(progress).await;
        }
    }
    Ok(())
}

fn add(a: &serde_json::Number, b: &serde_json::Number) -> String {
    match (a.as_i64(), b.as_i64()) {
        (Some(a), Some(b)) => match a.checked_add(b) {
            Some(sum) => sum.to_string(),
            None => (a as f64 + b as f64).to_string(),
        },
        _ => (a.as_f64().unwrap_or(f64::NAN) + b.as_f64().unwrap_or(f64::NAN)).to_string(),
    }
}

fn describe_prompt(kind: PromptKind) -> Prompt {
    let description = match kind {
        PromptKind::Greet => "Asks the model to greet someone.",
        PromptKind::Farewell => "Asks the model to say goodbye to someone.",
    };
    let name = PromptArgument::new("name")
        .with_description("who to address")
        .with_required(true);
    Prompt::new(kind.name(), Some(description), Some(vec![name]))
}

fn resource_uri(index: u32) -> String {
    format!("fixture://resources/{index}")
}

fn object_schema(properties: Value, required: &[&str]) -> JsonObject {
    let mut schema = JsonObject::new();
    schema.insert("type".into(), json!("object"));
    schema.insert("properties".into(), properties);
    if !required.is_empty() {
        schema.insert("required".into(), json!(required));
    }
    schema
}

fn string_arg<'a>(args: &'a JsonObject, key: &str) -> Result<&'a str, ErrorData> {
    args.get(key)
        .and_then(Value::as_str)
        .ok_or_else(|| ErrorData::invalid_params(format!("`{key}` must be a string"), None))
}

fn number_arg<'a>(args: &'a JsonObject, key: &str) -> Result<&'a serde_json::Number, ErrorData> {
    match args.get(key) {
        Some(Value::Number(n)) => Ok(n),
        _ => Err(ErrorData::invalid_params(
            format!("`{key}` must be a number"),
            None,
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn add_keeps_integers_exact_and_falls_back_to_floats() {
        let n = |v: Value| match v {
            Value::Number(n) => n,
            _ => unreachable!(),
        };
        assert_eq!(add(&n(json!(2)), &n(json!(3))), "5");
        assert_eq!(add(&n(json!(-2)), &n(json!(0.5))), "-1.5");
        assert_eq!(
            add(&n(json!(i64::MAX)), &n(json!(1))),
            "9223372036854776000"
        );
    }
}
