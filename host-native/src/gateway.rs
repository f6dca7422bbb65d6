//! `mcp-reconcile serve`: one MCP server in front of a [`Session`] — the running
//! [`Host`](crate::host::Host) behind a [`HostHandle`], or one session of the shared pool.
//!
//! Any MCP client that configures `mcp-reconcile serve --project .` as its only server gets the
//! union of the admitted servers' tools, prompts and resources, and hot reload without knowing
//! about it:
//! * names are qualified `mcp__<server>__<name>` (tools after each server's `includeTools` /
//!   `excludeTools`; resources keep their URIs);
//! * `tools/call`, `prompts/get`, `resources/read` are routed by the session
//!   ([`Session::route`]) and forwarded here, in the request's own task, with the client's
//!   progress token and cancellation; the session's loop never waits for a server;
//! * a call to a tool that is not available returns the §4 message (removed, not allowed,
//!   excluded, awaiting approval, rejected, not connected) as a tool error (`isError: true`);
//! * after the host announces a catalog change ([`HostEvent::CatalogChanged`](crate::host::HostEvent::CatalogChanged)), every client
//!   gets `notifications/{tools,prompts,resources}/list_changed` for the lists that changed;
//! * what needs a person's attention (a server waiting for approval, a failing one, a broken
//!   file) reaches the client through MCP too: in the `initialize` instructions, as the
//!   `mcp_reconcile_status` tool while it lasts, and as a warning log message (`attention`);
//!   `--manage-tools` adds tools that reload and reconnect, never approve (`manage`).
//!
//! Over stdio there is one client; over streamable HTTP ([`serve_http`], loopback only, behind
//! [`http_guard`](crate::http_guard)) every client session is served by a clone of the same
//! [`Gateway`].

use std::borrow::Cow;
use std::sync::{Arc, Mutex, PoisonError};

use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, CompleteRequestParams, CompleteResult,
    ContentBlock, DiscoverResult, GetPromptRequestParams, GetPromptResponse, Implementation,
    InitializeRequestParams, InitializeResult, ListPromptsResult, ListResourceTemplatesResult,
    ListResourcesResult, ListToolsResult, PaginatedRequestParams, PromptsCapability,
    ProtocolVersion, ReadResourceRequestParams, ReadResourceResponse, ResourcesCapability,
    ServerCapabilities, ServerConfig, ToolsCapability,
};
// Logging is deprecated by SEP-2577 (gone from protocol 2026-07-28); clients and servers of the
// versions the gateway speaks use it.
use rmcp::model::SubscriptionFilter;
#[allow(deprecated)]
use rmcp::model::{SetLevelRequestParams, SubscribeRequestParams, UnsubscribeRequestParams};
use rmcp::service::{NotificationContext, RequestContext, SubscriptionContext};
use rmcp::{ErrorData, Peer, RoleServer, ServerHandler};

use crate::host::{HostHandle, MergedCatalog, Route, Target};
use crate::lsp::tools::LspTool;
use crate::session::{Session, SessionGone};
use crate::transport::{CallError, Caller};
pub use naming::ToolNames;

mod apps;
mod attention;
mod connections;
mod era;
mod forward;
mod http;
mod manage;
mod naming;
mod offer;
mod priming;
mod skills;
mod tasks;
#[cfg(test)]
mod tests;
mod tool_names;
mod translate;
pub use http::serve_http;
pub use tool_names::{RECONNECT_TOOL, RELOAD_TOOL, STATUS_TOOL};

/// The MCP server side of `serve`, in front of the session `S`. Cheap to clone; clones share
/// the session and the client list.
pub struct Gateway<S = HostHandle> {
    session: Arc<S>,
    clients: Arc<Mutex<Vec<Peer<RoleServer>>>>,
    /// The `subscriptions/listen` streams of 2026-07-28 clients.
    listeners: era::Listeners,
    /// 2026-07-28 clients' calls waiting for their input.
    translator: Arc<translate::Translator>,
    /// `serve --passthrough NAME`: only this server, under its own names.
    only: Option<Arc<str>>,
    /// `serve --manage-tools`: the status, reload and reconnect tools are always offered.
    manage: bool,
    /// What needs attention as last told, and each client's log level.
    notices: Arc<attention::Notices>,
    /// The reconnects its clients asked for lately (one per server per 10 s).
    reconnects: Arc<manage::Reconnects>,
    /// `serve --tool-names`: how the servers' tools and prompts are named.
    names: ToolNames,
    /// The routes of the tools called lately, while they are current.
    routes: Arc<offer::Routes>,
    /// Whether an offered server declares the skills extension (`gateway/skills.rs`).
    skills: Arc<skills::Offered>,
}

impl<S> Clone for Gateway<S> {
    fn clone(&self) -> Self {
        Gateway {
            session: Arc::clone(&self.session),
            clients: Arc::clone(&self.clients),
            listeners: self.listeners.clone(),
            translator: Arc::clone(&self.translator),
            only: self.only.clone(),
            manage: self.manage,
            notices: Arc::clone(&self.notices),
            reconnects: Arc::clone(&self.reconnects),
            names: self.names,
            routes: Arc::clone(&self.routes),
            skills: Arc::clone(&self.skills),
        }
    }
}

impl<S> std::fmt::Debug for Gateway<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Gateway").finish_non_exhaustive()
    }
}

impl<S: Session> Gateway<S> {
    /// A gateway in front of `session`.
    pub fn new(session: S) -> Self {
        Gateway {
            session: Arc::new(session),
            clients: Arc::new(Mutex::new(Vec::new())),
            listeners: era::Listeners::default(),
            translator: Arc::new(translate::Translator::new()),
            only: None,
            manage: false,
            notices: Arc::default(),
            reconnects: Arc::default(),
            names: ToolNames::Mcp,
            routes: Arc::default(),
            skills: Arc::default(),
        }
    }

    /// Also offers the management tools ([`STATUS_TOOL`] always, [`RELOAD_TOOL`],
    /// [`RECONNECT_TOOL`]) when `on` (`serve --manage-tools`). None approves or rejects.
    #[must_use]
    pub fn with_manage_tools(mut self, on: bool) -> Self {
        self.manage = on;
        self
    }

    /// This gateway with its servers' tools and prompts named `names`' way.
    #[must_use]
    pub fn with_tool_names(mut self, names: ToolNames) -> Self {
        self.names = names;
        self
    }

    /// A gateway in front of `session` that offers only `server`'s tools, prompts and
    /// resources, under the server's own names (`serve --passthrough NAME`); hot reload,
    /// approvals and supervision are the session's, as ever.
    pub fn passthrough(session: S, server: &str) -> Self {
        let mut gateway = Gateway::new(session);
        gateway.only = Some(server.into());
        gateway
    }

    /// The name the session routes for `name` as this gateway's client sent it.
    fn qualify(&self, name: &str) -> String {
        match &self.only {
            Some(server) => crate::view::qualified(server, name),
            None => self.names.inward(name),
        }
    }

    /// Whether `route` leads to a server this gateway offers.
    fn offers(&self, route: &Route) -> bool {
        self.only.as_deref().is_none_or(|only| route.server == only)
    }

    /// `route` while it leads to a server this gateway offers; else why not: "this gateway
    /// offers no `what`" (`prompt `NAME``, ...).
    fn offered(&self, route: Result<Route, String>, what: &str) -> Result<Route, String> {
        route.and_then(|route| {
            if self.offers(&route) {
                Ok(route)
            } else {
                Err(format!("this gateway offers no {what}"))
            }
        })
    }

    /// The session this gateway fronts.
    pub fn session(&self) -> &S {
        &self.session
    }

    async fn catalog(&self) -> Result<MergedCatalog, ErrorData> {
        self.session.catalog().await.map_err(gone)
    }
}

fn gone(e: SessionGone) -> ErrorData {
    ErrorData::internal_error(e.to_string(), None)
}

impl<S: Session> ServerHandler for Gateway<S> {
    fn get_info(&self) -> ServerConfig {
        let mut capabilities = ServerCapabilities::default();
        let mut tools = ToolsCapability::default();
        tools.list_changed = Some(true);
        capabilities.tools = Some(tools);
        let mut prompts = PromptsCapability::default();
        prompts.list_changed = Some(true);
        capabilities.prompts = Some(prompts);
        let mut resources = ResourcesCapability::default();
        resources.list_changed = Some(true);
        // Subscriptions are routed by URI like reads; updates go to the subscribed client.
        resources.subscribe = Some(true);
        capabilities.resources = Some(resources);
        // Completion requests are routed to the server of the prompt they name.
        capabilities.completions = Some(Default::default());
        // `logging/setLevel` goes to every server that offers logging; their messages come
        // back with the server named in `logger`.
        capabilities.logging = Some(Default::default());
        // The tasks extension: a server's tasks pass through to the client (gateway/tasks.rs).
        capabilities
            .extensions
            .get_or_insert_with(Default::default)
            .insert(
                rmcp::model::TASKS_EXTENSION_ID.to_owned(),
                Default::default(),
            );
        self.declare_skills(&mut capabilities);
        ServerConfig::new(capabilities)
            .with_server_info(Implementation::new(
                "mcp-reconcile",
                env!("CARGO_PKG_VERSION"),
            ))
            .with_protocol_version(ProtocolVersion::LATEST_WITH_INITIALIZE)
            .with_instructions(match &self.only {
                None => format!(
                    "mcp-reconcile: the tools, prompts and resources of every configured MCP \
                     server, named {}; the list follows the settings files while the session \
                     runs (watch for list_changed).",
                    match self.names {
                        ToolNames::Mcp => "mcp__<server>__<name>",
                        ToolNames::Short => "<server>__<name>",
                    }
                ),
                Some(server) => format!(
                    "mcp-reconcile: the configured MCP server \"{}\" under its own names; it \
                     follows the settings files while the session runs (watch for \
                     list_changed).",
                    crate::display::short_name(server)
                ),
            })
    }

    /// Both eras (SPEC §16): the versions that begin with `initialize`, and 2026-07-28's
    /// stateless requests.
    fn supported_protocol_versions(&self) -> Cow<'static, [ProtocolVersion]> {
        Cow::Borrowed(ProtocolVersion::KNOWN_VERSIONS)
    }

    /// As rmcp's, with what needs attention at the end of the instructions.
    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        context.peer.set_peer_info(request.clone());
        self.refresh_skills().await;
        let mut info = self.negotiate_initialize(&request)?;
        info.instructions = self.instructions(info.instructions.take()).await;
        Ok(info)
    }

    /// As rmcp's, with what needs attention at the end of the instructions.
    async fn discover(
        &self,
        _context: RequestContext<RoleServer>,
    ) -> Result<DiscoverResult, ErrorData> {
        self.refresh_skills().await;
        let mut info = self.get_info();
        info.instructions = self.instructions(info.instructions.take()).await;
        Ok(DiscoverResult::from_server_info(
            self.supported_protocol_versions().into_owned(),
            info,
        ))
    }

    fn accepted_subscription_filter(
        &self,
        requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        Some(era::Listeners::accepted(requested))
    }

    /// A 2026-07-28 client's stream of list changes: open until the client ends it.
    async fn listen(&self, subscription: SubscriptionContext) -> Result<(), ErrorData> {
        self.listeners.listen(subscription).await;
        Ok(())
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        let mut clients = self.clients.lock().unwrap_or_else(PoisonError::into_inner);
        clients.retain(|peer| !peer.is_transport_closed());
        clients.push(context.peer);
    }

    /// Forwarded to every server this gateway offers: each may ask this client for the roots
    /// again.
    async fn on_roots_list_changed(&self, context: NotificationContext<RoleServer>) {
        let Ok(callers) = self.callers(|_| true).await else {
            return;
        };
        for caller in callers {
            caller.asking(context.peer.clone()).roots_changed().await;
        }
    }

    async fn get_task(
        &self,
        request: rmcp::model::GetTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::GetTaskResult, ErrorData> {
        self.translator.tasks.get(request).await
    }

    async fn update_task(
        &self,
        request: rmcp::model::UpdateTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.translator.tasks.update(request).await
    }

    async fn cancel_task(
        &self,
        request: rmcp::model::CancelTaskParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.translator.tasks.cancel(request).await
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let mut tools = self.visible().await?.tools;
        self.for_client(&mut tools, &context);
        self.add_own_tools(&mut tools).await?;
        Ok(ListToolsResult::with_all_items(tools)
            .with_ttl_ms(era::FRESH_MS)
            .with_cache_scope(era::SCOPE))
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        if let Some(mut result) = self.own_call(&request).await? {
            era::complete(&mut result.result_type);
            return Ok(result.into());
        }
        let name = self.qualify(&request.name);
        if let Some(tool) = LspTool::parse(&name).filter(|_| self.only.is_none()) {
            let arguments = request.arguments.unwrap_or_default();
            return Ok(self.language_call(tool, &arguments).await?.into());
        }
        let route = match self.tool_route(&name).await? {
            // An app calls by the server's own name (MCP Apps, `gateway/apps.rs`).
            Err(message) => self.alias_route(&request.name, &name, message).await?,
            route => route,
        };
        let route = self.offered(route, &format!("tool `{}`", request.name));
        let mut response = match route {
            Ok(route) => {
                tracing::info!(tool = %name, server = %route.server, "forwarding tools/call");
                self.forward_call(route, request, context).await?
            }
            Err(message) => {
                tracing::info!(tool = %name, "tool not available");
                CallToolResult::error(vec![ContentBlock::text(message)]).into()
            }
        };
        if let CallToolResponse::Complete(result) = &mut response {
            era::complete(&mut result.result_type);
        }
        Ok(response)
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        Ok(
            ListPromptsResult::with_all_items(self.visible().await?.prompts)
                .with_ttl_ms(era::FRESH_MS)
                .with_cache_scope(era::SCOPE),
        )
    }

    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        self.forward_prompt(request, context).await
    }

    /// Routed by what it completes an argument of: the prompt (its own name put back), or the
    /// resource template (as listed).
    async fn complete(
        &self,
        request: CompleteRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        self.forward_complete(request, context).await
    }

    /// Forwarded to every server this gateway offers that has the logging capability; the
    /// client is where their messages go from now on.
    #[allow(deprecated)]
    async fn set_level(
        &self,
        request: SetLevelRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.notices.set_level(&context.peer, request.level);
        let mut failures = Vec::new();
        for caller in self.callers(Caller::offers_logging).await? {
            let server = caller.server().to_owned();
            match caller
                .asking(context.peer.clone())
                .set_level(request.clone())
                .await
            {
                Ok(()) => {}
                Err(CallError::Mcp(error)) => failures.push(format!("{server}: {}", error.message)),
                Err(CallError::Failed(error)) => failures.push(error.message),
            }
        }
        if failures.is_empty() {
            Ok(())
        } else {
            Err(ErrorData::internal_error(
                format!("logging/setLevel failed for {}", failures.join("; ")),
                None,
            ))
        }
    }

    async fn list_skills(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::ListSkillsResult, ErrorData> {
        self.skills_list().await
    }

    async fn get_skill(
        &self,
        request: rmcp::model::GetSkillRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<rmcp::model::GetSkillResult, ErrorData> {
        self.skill_get(request, context).await
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        let templates = self.visible().await?.resource_templates;
        Ok(ListResourceTemplatesResult::with_all_items(
            templates.into_iter().map(|(_, t)| t).collect(),
        )
        .with_ttl_ms(era::FRESH_MS)
        .with_cache_scope(era::SCOPE))
    }

    async fn subscribe(
        &self,
        request: SubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.subscription(request.uri, true, context.peer).await
    }

    async fn unsubscribe(
        &self,
        request: UnsubscribeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        self.subscription(request.uri, false, context.peer).await
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        Ok(
            ListResourcesResult::with_all_items(self.visible().await?.resources)
                .with_ttl_ms(era::FRESH_MS)
                .with_cache_scope(era::SCOPE),
        )
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let uri = request.uri.clone();
        let route = match self.session.route(Target::Resource(uri.clone())).await {
            // An app's `ui://` resource its server need not list (`gateway/apps.rs`).
            Ok(Err(message)) => self.ui_route(&uri).await?.ok_or(message),
            other => other.map_err(gone)?,
        };
        let route = self
            .offered(route, &format!("resource `{}`", request.uri))
            .map_err(|message| {
                // 2026-07-28 (SEP-2164): -32602 (rmcp's code for a modern client) naming the URI.
                ErrorData::resource_not_found(message, Some(serde_json::json!({"uri": uri})))
            })?;
        match route
            .caller
            .asking(context.peer)
            .read_resource(request)
            .await
        {
            Ok(mut result) => {
                era::complete(&mut result.result_type);
                result.ttl_ms.get_or_insert(era::FRESH_MS);
                result.cache_scope.get_or_insert(era::SCOPE);
                Ok(result.into())
            }
            Err(CallError::Mcp(error)) => Err(error),
            Err(CallError::Failed(error)) => Err(ErrorData::internal_error(error.message, None)),
        }
    }
}
