//! The in-memory connection kind (tests only): [`Memory`] starts each server as an in-process
//! rmcp server at the other end of a [`tokio::io::duplex`] pipe and connects to it with the
//! host's own MCP client session ([`crate::transport::memory::connect`]). Its connection is the
//! same [`Connection`] the host's `Mcp` kind yields, so the session engine, the pool and the
//! gateway run on it unchanged: the real protocol (handshake, listings, `list_changed`, calls,
//! the end of a session), no process.
//!
//! A test sets what each server offers and does through its [`Server`] handle
//! ([`Servers::server`], by server name): its tools and prompts (changing them tells every
//! live session `list_changed`), a failing start, a start that hangs until released, and
//! closing every live session (a crash), and a tool's `_meta` (MCP Apps: such a server also
//! answers a read of any `ui://` URI, listed or not, and puts `_meta` on that tool's results).
//! It reads how often a server was started, how many
//! of its sessions are live and which tools were called.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use futures::future::BoxFuture;
use mcp_reconcile_kernel::{ServerConfig, Transport};
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ListPromptsResult,
    ListToolsResult, PaginatedRequestParams, Prompt, PromptsCapability, ReadResourceRequestParams,
    ReadResourceResponse, ReadResourceResult, ResourceContents, ResourcesCapability,
    ServerCapabilities, Tool, ToolsCapability,
};
use rmcp::service::{RequestContext, RunningServiceCancellationToken};
use rmcp::{ErrorData, Peer, RoleServer, ServerHandler, ServiceExt};
use tokio::sync::{mpsc, watch};

use crate::supervisor::{ConnectionKind, Event, Mcp, StartError};
use crate::transport::{self, Catalog, ConnEvent, ConnectOptions, Connection};

pub(crate) mod session;

/// The longest a test waits for a condition ([`eventually`]).
pub(crate) const PATIENCE: Duration = Duration::from_secs(20);

/// Waits until `done` holds, checking every few milliseconds; panics with `what` after
/// [`PATIENCE`] (a generous deadline, never a timing assertion).
pub(crate) async fn eventually(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while !done() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "timed out waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
}

/// A stdio entry for `server`: a config the kernel plans like any local server (the in-memory
/// kind starts the server by its name and ignores the command). `version` tells two configs
/// apart, so a test can edit an entry.
pub(crate) fn entry(version: u32) -> ServerConfig {
    let json = format!(r#"{{"command": "in-memory", "args": ["{version}"]}}"#);
    ServerConfig::from_json(&json).unwrap_or_else(|_| ServerConfig::new(Default::default()))
}

/// Every in-memory server, by name; clones share them.
#[derive(Clone, Default)]
pub(crate) struct Servers(Arc<Mutex<HashMap<String, Server>>>);

impl Servers {
    /// The kind that starts these servers.
    pub(crate) fn kind(&self) -> Memory {
        Memory(self.clone())
    }

    /// Server `name`'s handle (made on first use: no tools, starts at once).
    pub(crate) fn server(&self, name: &str) -> Server {
        lock(&self.0).entry(name.to_owned()).or_default().clone()
    }
}

/// One in-memory server: what it offers and does, and what happened to it. Clones share it.
#[derive(Clone, Default)]
pub(crate) struct Server(Arc<State>);

#[derive(Default)]
struct State {
    tools: Mutex<Vec<String>>,
    /// The `_meta` of a tool, by name.
    meta: Mutex<HashMap<String, serde_json::Value>>,
    prompts: Mutex<Vec<String>>,
    /// A start fails with this message.
    fail: Mutex<Option<String>>,
    /// While true a start waits (a hung server) until it is set false.
    hold: watch::Sender<bool>,
    /// Its live sessions: id, the server side's cancellation (to close it) and peer (to
    /// notify it).
    live: Mutex<Vec<(u64, RunningServiceCancellationToken, Peer<RoleServer>)>>,
    next_session: AtomicU64,
    starts: AtomicUsize,
    /// Starts waiting on [`Server::hold`].
    held: AtomicUsize,
    /// `tool` of every call it answered.
    calls: Mutex<Vec<String>>,
    /// The extensions its last client declared in `initialize`.
    declared: Mutex<Vec<String>>,
}

impl Server {
    /// Offers `tools` from now on; tells every live session `tools/list_changed`.
    pub(crate) async fn set_tools(&self, tools: &[&str]) {
        *lock(&self.0.tools) = tools.iter().map(|t| (*t).to_owned()).collect();
        let peers: Vec<Peer<RoleServer>> = lock(&self.0.live)
            .iter()
            .map(|(_, _, peer)| peer.clone())
            .collect();
        for peer in peers {
            let _ = peer.notify_tool_list_changed().await;
        }
    }

    /// Gives `tool` the `_meta` `meta` in listings to sessions that start from now on (and
    /// makes the server an MCP Apps one: it answers `ui://` reads and puts `_meta` on results).
    pub(crate) fn set_tool_meta(&self, tool: &str, meta: serde_json::Value) {
        lock(&self.0.meta).insert(tool.to_owned(), meta);
    }

    /// Offers `prompts` to sessions that start from now on.
    pub(crate) fn set_prompts(&self, prompts: &[&str]) {
        *lock(&self.0.prompts) = prompts.iter().map(|p| (*p).to_owned()).collect();
    }

    /// Makes its starts fail with `message` (`None`: succeed again).
    pub(crate) fn fail_with(&self, message: Option<&str>) {
        *lock(&self.0.fail) = message.map(str::to_owned);
    }

    /// Makes its starts hang until [`Server::release`].
    pub(crate) fn hold(&self) {
        self.0.hold.send_replace(true);
    }

    /// Lets every held start go on.
    pub(crate) fn release(&self) {
        self.0.hold.send_replace(false);
    }

    /// Closes every live session from the server's side (as a crash looks to the client).
    pub(crate) fn close(&self) {
        for (_, cancel, _) in lock(&self.0.live).drain(..) {
            cancel.cancel();
        }
    }

    /// How many times it was started.
    pub(crate) fn starts(&self) -> usize {
        self.0.starts.load(Ordering::SeqCst)
    }

    /// How many of its starts wait on [`Server::hold`] now.
    pub(crate) fn held(&self) -> usize {
        self.0.held.load(Ordering::SeqCst)
    }

    /// How many of its sessions are live (a client connected and not closed).
    pub(crate) fn live(&self) -> usize {
        lock(&self.0.live).len()
    }

    /// The extensions the client of its last session declared (`capabilities.extensions`).
    pub(crate) fn declared_extensions(&self) -> Vec<String> {
        lock(&self.0.declared).clone()
    }

    /// The tools it was called with, in order.
    pub(crate) fn calls(&self) -> Vec<String> {
        lock(&self.0.calls).clone()
    }

    /// Waits while held, then fails or serves a session on `pipe`.
    async fn run(&self, name: &str, pipe: tokio::io::DuplexStream) -> Result<(), String> {
        self.0.starts.fetch_add(1, Ordering::SeqCst);
        let mut hold = self.0.hold.subscribe();
        self.0.held.fetch_add(1, Ordering::SeqCst);
        let _ = hold.wait_for(|held| !held).await;
        self.0.held.fetch_sub(1, Ordering::SeqCst);
        if let Some(message) = lock(&self.0.fail).clone() {
            return Err(message);
        }
        let handler = Handler {
            name: name.to_owned(),
            server: self.clone(),
        };
        let server = self.clone();
        tokio::spawn(async move {
            let Ok(running) = handler.serve(pipe).await else {
                return;
            };
            let id = server.0.next_session.fetch_add(1, Ordering::SeqCst);
            if let Some(info) = running.peer().peer_info() {
                let declared = info.capabilities.extensions.iter().flatten();
                *lock(&server.0.declared) = declared.map(|(id, _)| id.clone()).collect();
            }
            let cancel = running.cancellation_token();
            lock(&server.0.live).push((id, cancel, running.peer().clone()));
            let _ = running.waiting().await;
            lock(&server.0.live).retain(|(session, _, _)| *session != id);
        });
        Ok(())
    }
}

/// The in-process rmcp server of one session.
struct Handler {
    name: String,
    server: Server,
}

impl ServerHandler for Handler {
    fn get_info(&self) -> rmcp::model::ServerConfig {
        let mut capabilities = ServerCapabilities::default();
        let mut tools = ToolsCapability::default();
        tools.list_changed = Some(true);
        capabilities.tools = Some(tools);
        capabilities.prompts = Some(PromptsCapability::default());
        if !lock(&self.server.0.meta).is_empty() {
            capabilities.resources = Some(ResourcesCapability::default());
        }
        rmcp::model::ServerConfig::new(capabilities)
    }

    async fn list_tools(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let schema = serde_json::json!({"type": "object"})
            .as_object()
            .cloned()
            .unwrap_or_default();
        let meta = lock(&self.server.0.meta).clone();
        let tools = lock(&self.server.0.tools)
            .iter()
            .map(|name| {
                let mut tool = Tool::new(name.clone(), "An in-memory tool.", schema.clone());
                tool.meta = meta
                    .get(name)
                    .and_then(|m| serde_json::from_value(m.clone()).ok());
                tool
            })
            .collect();
        Ok(ListToolsResult::with_all_items(tools))
    }

    /// Answers `SERVER:TOOL`, so a test sees which server answered.
    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let tool = request.name.to_string();
        lock(&self.server.0.calls).push(tool.clone());
        let text = format!("{}:{tool}", self.name);
        let mut result = CallToolResult::success(vec![ContentBlock::text(text)]);
        if lock(&self.server.0.meta).contains_key(&tool) {
            result.meta = serde_json::from_value(serde_json::json!({"served-by": self.name})).ok();
        }
        Ok(result.into())
    }

    /// Any `ui://` URI, listed or not, reads as `SERVER:URI`.
    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        if !request.uri.starts_with("ui://") {
            return Err(ErrorData::resource_not_found(request.uri, None));
        }
        let text = format!("{}:{}", self.name, request.uri);
        let contents = ResourceContents::text(text, request.uri);
        Ok(ReadResourceResult::new(vec![contents]).into())
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        let prompts = lock(&self.server.0.prompts)
            .iter()
            .map(|name| Prompt::new(name.clone(), Some("An in-memory prompt."), None))
            .collect();
        Ok(ListPromptsResult::with_all_items(prompts))
    }
}

/// The in-memory [`ConnectionKind`]: the same connection, catalog and events as [`Mcp`].
pub(crate) struct Memory(Servers);

impl ConnectionKind for Memory {
    type Config = ServerConfig;
    type Connection = Connection;
    type Catalog = Catalog;
    type Event = ConnEvent;

    fn start(
        &self,
        name: &str,
        config: &ServerConfig,
        generation: u64,
        events: mpsc::UnboundedSender<ConnEvent>,
    ) -> BoxFuture<'static, Result<Connection, StartError>> {
        let server = self.0.server(name);
        let (name, config) = (name.to_owned(), config.clone());
        Box::pin(async move {
            let failed = |message: String| StartError {
                message: format!("server `{name}` {message}"),
                unsupported: false,
                needs_auth: false,
            };
            let (client, remote) = tokio::io::duplex(1 << 16);
            server.run(&name, remote).await.map_err(failed)?;
            let options = ConnectOptions {
                generation,
                events,
                handshake_timeout: Duration::from_millis(config.discovery_timeout_ms()),
                base_dir: None,
                launch: None,
                tokens: None,
                elicitation: None,
            };
            transport::memory::connect(&name, &config, options, client)
                .await
                .map_err(|e| StartError {
                    message: e.message,
                    unsupported: false,
                    needs_auth: false,
                })
        })
    }

    fn stop(connection: Connection) -> BoxFuture<'static, ()> {
        Mcp::stop(connection)
    }

    fn catalog(connection: &Connection) -> Catalog {
        Mcp::catalog(connection)
    }

    fn pid(_connection: &Connection) -> Option<u32> {
        None
    }

    fn spawns_process(config: &ServerConfig) -> bool {
        config.transport() == Transport::Stdio
    }

    fn event(event: ConnEvent) -> (u64, Event<Catalog>) {
        Mcp::event(event)
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}
