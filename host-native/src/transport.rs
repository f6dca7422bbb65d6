//! MCP connections for the executor: one [`connect`] per server, whatever its transport.
//!
//! * stdio (`command`, `args`, `env`, `cwd`): a child process in its own process group, spoken
//!   to with rmcp's line transport over its pipes; stopped group-wide (`transport/stdio.rs`);
//! * streamable HTTP (`httpUrl`, `headers`): rmcp's client over reqwest without proxies;
//! * legacy SSE (`url`, `headers`): our own transport in `transport/sse.rs` (rmcp dropped it);
//! * `tcp` (websocket) and `type: "sdk"`: [`ConnectErrorKind::Unsupported`].
//!
//! A [`Connection`] lists the server's catalog right after `initialize`, re-lists it on every
//! `list_changed` notification ([`ConnEvent::CatalogChanged`]) and reports its own end
//! ([`ConnEvent::Closed`]): a stdio process that exits, a remote transport that fails (a failed
//! POST, the SSE stream ending, or no answer to a keepalive ping). Every text that leaves this
//! module is redacted with the server's env and header values.
//!
//! Life of a connection:
//! 1. [`connect`] starts the transport and runs `initialize` plus the first listing, all within
//!    `handshake_timeout`; on any failure nothing is left running;
//! 2. a monitor task watches the process / transport; a relist task follows `list_changed`;
//! 3. [`Connection::close`] stops both and the server (bounded; never hangs). A dropped
//!    `Connection` is stopped the same way in the background.

pub(crate) mod apps;
mod caller;
mod describe;
mod digest;
mod handler;
mod idle;
#[cfg(test)]
pub(crate) mod memory;
pub(crate) mod names;
mod oauth;
mod ordered;
pub(crate) mod process;
mod progress;
mod relay;
mod rounds;
pub use relay::{Question, Questions};
mod remote;
mod session;
mod skills;
mod sse;
pub(crate) mod stdio;
mod subscribe;

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use mcp_reconcile_kernel::ServerConfig;
use mcp_reconcile_kernel::Transport as Kind;
use rmcp::model::CallToolRequestParams;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::{Peer, RoleClient};
use tokio::sync::{mpsc, oneshot, Notify};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

pub use rmcp::model::{
    CallToolResult, ElicitRequestParams, ElicitResult, GetPromptResult, ProgressNotificationParam,
    Prompt, ReadResourceResult, Resource, ResourceTemplate, Skill, Tool,
};

use crate::redact::{redact_all, secrets};
pub use caller::{Activity, CallError, Caller};
use describe::describe;
pub use digest::{digest, Digests};
use oauth::oauth_manager;
use progress::ProgressRouter;
use remote::{Failure, Watched};
use session::{handshake, start, Ending, Handler, HandshakeFailure, Opening, Service};
use stdio::connect_stdio;
use subscribe::Subscribing;

/// What a server offers, as listed (every page) after `initialize` or a `list_changed`.
///
/// A catalog is built once per listing and not changed after it is stored: a new listing is a
/// new catalog. That is what lets it keep its [`Digests`].
#[derive(Clone, Debug, Default)]
pub struct Catalog {
    pub tools: Vec<Tool>,
    pub prompts: Vec<Prompt>,
    pub resources: Vec<Resource>,
    /// `resources/templates/list` (empty when the server does not answer it).
    pub resource_templates: Vec<ResourceTemplate>,
    /// `skills/list` (SEP-2640); `None` when the server does not declare the skills extension.
    pub skills: Option<Vec<Skill>>,
    /// The content digests, computed on first use ([`Catalog::digests`]).
    pub(crate) digests: std::sync::OnceLock<Digests>,
}

/// Something a live connection reports on its own.
#[derive(Debug)]
pub enum ConnEvent {
    /// The server sent notifications/{tools,prompts,resources}/list_changed; the catalog was re-listed.
    CatalogChanged {
        server: String,
        generation: u64,
        catalog: Catalog,
    },
    /// The connection ended on its own (process exited, transport closed); `error` is redacted
    /// (stderr tail for stdio, HTTP status / transport error for remote).
    Closed {
        server: String,
        generation: u64,
        error: String,
    },
}

/// An entry key that makes a streamable HTTP entry (`httpUrl`) fall back to legacy SSE at the
/// same URL when the HTTP handshake is refused (not when the server asks for authorization, and
/// not after a timeout): what Gemini CLI does for a `url` without a `type`, which
/// `--layout gemini` writes this way.
pub const SSE_FALLBACK: &str = "sseFallback";

/// How [`connect`] reports back and how long it may take.
#[derive(Clone)]
pub struct ConnectOptions {
    /// Echoed in events so the host drops stale ones.
    pub generation: u64,
    pub events: mpsc::UnboundedSender<ConnEvent>,
    /// The cap on spawn + `initialize` + first listing (the host passes
    /// `config.discovery_timeout_ms()`).
    pub handshake_timeout: Duration,
    /// A relative `cwd` is resolved against this (the project dir).
    pub base_dir: Option<PathBuf>,
    /// A daemon session's directory and environment for a stdio server (see
    /// [`crate::launch`]); `None` starts it in this process's environment.
    pub launch: Option<Arc<crate::launch::Launch>>,
    /// The OAuth token file (`None`: the default one).
    pub tokens: Option<crate::auth::TokenFile>,
    /// Answers the server's `elicitation/create` requests. With one, the client declares the
    /// elicitation capability; without (the host's default: nobody to ask), it declares none
    /// and declines.
    pub elicitation: Option<ElicitationResponder>,
}

/// Answers a server's elicitation request (see [`ConnectOptions::elicitation`]).
pub type ElicitationResponder = Arc<
    dyn Fn(ElicitRequestParams) -> futures::future::BoxFuture<'static, ElicitResult> + Send + Sync,
>;

/// Why a connection could not be made or a call failed. `message` is redacted, names the
/// server and, for stdio, ends with the stderr tail.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct ConnectError {
    pub kind: ConnectErrorKind,
    pub message: String,
}

/// The class of a [`ConnectError`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConnectErrorKind {
    /// `tcp` (websocket), `type: "sdk"` or no transport field: the host reports
    /// `unsupported_transport`.
    Unsupported,
    /// The connection could not be started: the process did not spawn, or the URL or a header
    /// is invalid.
    Spawn,
    /// Spawn + `initialize` + first listing took longer than the handshake timeout.
    Timeout,
    /// The server answered badly, refused, or went away during the handshake.
    Handshake,
    /// The server wants an (OAuth) authorization the host does not have: no token, or its
    /// refresh was rejected. The host reports `needs_auth` and does not retry on a timer.
    NeedsAuth,
    /// The connection is closed.
    Closed,
    /// A request on a live connection failed.
    Call,
    /// The caller cancelled a forwarded request.
    Cancelled,
}

/// How often a remote connection is pinged so a server that went away is noticed (streamable
/// HTTP reconnects its event stream forever and would not say).
pub const KEEPALIVE_INTERVAL: Duration = Duration::from_secs(5);
/// Default cap on a tool call when the config has no `timeout` (as the TypeScript SDK).
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(600);
/// Bound on stopping rmcp's service loop (it flushes and closes the transport).
const SERVICE_CLOSE: Duration = Duration::from_secs(3);
/// After a failed handshake or an exit: how long to wait for the exit status and the last
/// stderr lines before writing the message.
const SETTLE: Duration = Duration::from_millis(500);
/// How long a call that lost its connection waits for the reason (exit status, stderr tail).
const ENDED_WAIT: Duration = Duration::from_secs(3);
/// Bound on [`Connection::close`] as a whole, in case a stop step misbehaves.
const CLOSE_LIMIT: Duration = Duration::from_secs(15);

/// Connects to server `name` as configured, runs `initialize` and lists its catalog.
///
/// # Errors
/// [`ConnectErrorKind::Unsupported`] for websocket / sdk / no transport; `Spawn` when the
/// process or HTTP client cannot start; `Timeout` after `handshake_timeout` (the process group
/// is stopped first); `Handshake` when the server fails `initialize` or a listing.
pub async fn connect(
    name: &str,
    config: &ServerConfig,
    opts: ConnectOptions,
) -> Result<Connection, ConnectError> {
    let fresh = || Ctx::new(name, config);
    let ctx = fresh();
    match config.transport() {
        Kind::Http
            if config.get(SSE_FALLBACK) == Some(&mcp_reconcile_kernel::Value::Bool(true)) =>
        {
            match connect_http(ctx, config, opts.clone()).await {
                Err(refused) if refused.kind == ConnectErrorKind::Handshake => {
                    tracing::debug!(server = %name, "streamable HTTP refused; trying SSE at the same URL");
                    let mut sse = config.object().clone();
                    if let Some(url) = sse.remove("httpUrl") {
                        sse.insert("url".into(), url);
                    }
                    sse::connect(fresh(), &ServerConfig::new(sse), opts)
                        .await
                        .map_err(|failed| match failed.kind {
                            ConnectErrorKind::NeedsAuth => failed,
                            // Neither transport answered: the HTTP refusal says more.
                            _ => refused,
                        })
                }
                other => other,
            }
        }
        Kind::Stdio => connect_stdio(ctx, config, opts).await,
        Kind::Http => connect_http(ctx, config, opts).await,
        Kind::Sse => sse::connect(ctx, config, opts).await,
        Kind::Websocket => Err(ctx.error(
            ConnectErrorKind::Unsupported,
            "uses a websocket (`tcp`) transport, which mcp-reconcile does not support; \
             configure `command`, `httpUrl` or `url` instead",
        )),
        Kind::Sdk => Err(ctx.error(
            ConnectErrorKind::Unsupported,
            "is an in-process (`type: \"sdk\"`) server, which only the client that registers \
             it can run",
        )),
        Kind::Unknown => Err(ctx.error(
            ConnectErrorKind::Unsupported,
            "has no transport: set `command` (stdio), `httpUrl` (streamable HTTP) or `url` (SSE)",
        )),
    }
}

/// A live MCP connection. Close it with [`Connection::close`].
pub struct Connection {
    ctx: Arc<Ctx>,
    pid: Option<u32>,
    catalog: Catalog,
    peer: Peer<RoleClient>,
    progress: ProgressRouter,
    shutdown: Option<oneshot::Sender<()>>,
    monitor: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("server", &self.ctx.name)
            .field("pid", &self.pid)
            .field("tools", &self.catalog.tools.len())
            .finish_non_exhaustive()
    }
}

impl Connection {
    /// The server process id (stdio only).
    pub fn pid(&self) -> Option<u32> {
        self.pid
    }

    /// The catalog listed right after `initialize` (a capability the server lacks is an empty
    /// list). Later changes arrive as [`ConnEvent::CatalogChanged`].
    pub fn catalog(&self) -> &Catalog {
        &self.catalog
    }

    /// The rmcp peer, for forwarding requests.
    pub fn peer(&self) -> Peer<RoleClient> {
        self.peer.clone()
    }

    /// A handle for forwarding requests from any task (see [`Caller`]).
    pub fn caller(&self) -> Caller {
        Caller {
            ctx: self.ctx.clone(),
            peer: self.peer.clone(),
            progress: self.progress.clone(),
            asker: None,
            questions: None,
            meta: None,
        }
    }

    /// Calls tool `name` (its unqualified name on this server), bounded by the config's
    /// `timeout` (ms) or [`DEFAULT_CALL_TIMEOUT`].
    ///
    /// # Errors
    /// `Call` with the redacted rmcp error; `Closed` when the connection is gone. A tool that
    /// ran and failed is not an error here: it is a result with `is_error`.
    pub async fn call_tool(
        &self,
        name: &str,
        arguments: Option<serde_json::Map<String, serde_json::Value>>,
    ) -> Result<CallToolResult, ConnectError> {
        let mut params = CallToolRequestParams::new(name.to_owned());
        if let Some(arguments) = arguments {
            params = params.with_arguments(arguments);
        }
        self.caller()
            .call_tool(params, None, CancellationToken::new())
            .await
            .map_err(|e| match e {
                CallError::Mcp(error) => self.ctx.error(
                    ConnectErrorKind::Call,
                    &format!("tools/call `{name}` failed: {}", error.message),
                ),
                CallError::Failed(error) => error,
            })
    }

    /// Stops the connection and the server: cancels the MCP session (closing stdin for stdio),
    /// then for stdio gives the process a grace, SIGTERM to its group, a grace, SIGKILL, and
    /// always a final SIGKILL to the group. Never hangs; no process or task is left behind.
    /// No [`ConnEvent::Closed`] is sent for a requested close.
    pub async fn close(mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        if let Some(mut monitor) = self.monitor.take() {
            if tokio::time::timeout(CLOSE_LIMIT, &mut monitor)
                .await
                .is_err()
            {
                tracing::warn!(server = %self.ctx.name, "closing took too long; abandoning it");
                monitor.abort();
            }
        }
    }
}

impl Drop for Connection {
    fn drop(&mut self) {
        // Dropping the sender tells the monitor to stop everything in the background.
        self.shutdown.take();
    }
}

/// Per-connection facts every message needs.
struct Ctx {
    name: String,
    secrets: Vec<String>,
    call_timeout: Duration,
    /// Why the connection ended (redacted, without the server name), once it did.
    ended: tokio::sync::watch::Sender<Option<String>>,
    /// Forwarded requests waiting for an answer.
    in_flight: caller::InFlight,
    /// The clients the server's own requests and log messages go to.
    askers: relay::Askers,
}

impl Ctx {
    /// A new connection's facts: nothing in flight, no client asked yet, not ended.
    fn new(name: &str, config: &ServerConfig) -> Self {
        Ctx {
            name: name.to_owned(),
            secrets: secrets(config),
            call_timeout: call_timeout(config),
            ended: tokio::sync::watch::Sender::new(None),
            in_flight: caller::InFlight::default(),
            askers: relay::Askers::default(),
        }
    }

    fn error(&self, kind: ConnectErrorKind, what: &str) -> ConnectError {
        ConnectError {
            kind,
            message: self.redact(&format!("server `{}` {what}", self.name)),
        }
    }

    fn redact(&self, text: &str) -> String {
        redact_all(text, &self.secrets)
    }
}

fn call_timeout(config: &ServerConfig) -> Duration {
    match config
        .get("timeout")
        .and_then(mcp_reconcile_kernel::json::Value::as_f64)
    {
        Some(ms) if ms.is_finite() && ms > 0.0 => Duration::from_millis(ms.min(1e12) as u64),
        _ => DEFAULT_CALL_TIMEOUT,
    }
}

/// ` ; stderr:\n<tail>` when there is a tail, else nothing.
fn with_stderr(tail: &str) -> String {
    if tail.trim().is_empty() {
        String::new()
    } else {
        format!("; stderr:\n{tail}")
    }
}

// ---------------------------------------------------------------------------------------------
// remote

async fn connect_http(
    mut ctx: Ctx,
    config: &ServerConfig,
    opts: ConnectOptions,
) -> Result<Connection, ConnectError> {
    let url = config.str_field("httpUrl").unwrap_or_default().to_owned();
    check_http_url(&url).map_err(|what| ctx.error(ConnectErrorKind::Spawn, &what))?;
    let headers = remote::configured_headers(config, &ctx.name)
        .map_err(|what| ctx.error(ConnectErrorKind::Spawn, &what))?;
    let trust = crate::tls::Trust::of_launch(opts.launch.as_deref());
    let client = crate::http_client::build_http_client_trusting(trust)
        .await
        .map_err(|what| ctx.error(ConnectErrorKind::Spawn, &what))?;
    let (bearer, custom) = remote::split_bearer(headers);
    let mut http_config =
        StreamableHttpClientTransportConfig::with_uri(url.clone()).custom_headers(custom);
    let relist = Arc::new(Notify::new());
    let handler = Handler::new(relist.clone(), opts.elicitation.clone(), &ctx);
    let oauth = oauth_manager(&mut ctx, config, &url, &opts, &client)
        .await
        .map_err(|what| ctx.error(ConnectErrorKind::Spawn, &what))?;
    let refusal = oauth.refusal;
    let (outcome, failure) = match oauth.manager {
        Some((manager, store)) => {
            // The authorization manager adds the bearer token (and refreshes it) itself. A
            // challenge the server answers with (a `401`, or a `403` asking for more scope,
            // now or later in the session) is kept beside the tokens: `mcp-reconcile auth
            // NAME` seeds its discovery and scopes from it.
            let client = rmcp::transport::auth::AuthClient::new(client, manager);
            open_http(client, http_config, handler, &ctx.name, Some(store), &opts).await
        }
        None => {
            if let Some(token) = bearer {
                http_config = http_config.auth_header(token);
            }
            open_http(client, http_config, handler, &ctx.name, None, &opts).await
        }
    };
    if failure.auth_required() && !matches!(outcome, Ok(Ok(_))) {
        let url = crate::redact::mask_url(&url);
        let what = failure
            .get()
            .filter(|reason| reason.contains("mcp-reconcile auth"))
            .unwrap_or_else(|| crate::auth::needs_auth_because(&ctx.name, refusal.as_ref()));
        return Err(ctx.error(ConnectErrorKind::NeedsAuth, &format!("at {url} {what}")));
    }
    finish_remote(ctx, opts, outcome, relist, failure, &url)
}

type Opened = Result<Result<(Service, Catalog), HandshakeFailure>, tokio::time::error::Elapsed>;

/// Opens a streamable HTTP session (SPEC §16): `server/discover` first, and on any refusal a
/// legacy `initialize` on a fresh transport (nothing of the probe's is kept: a stateless POST
/// leaves no session behind). Returns the outcome and the failure record of the transport the
/// connection runs on.
async fn open_http<C>(
    client: C,
    http_config: StreamableHttpClientTransportConfig,
    handler: Handler,
    name: &str,
    store: Option<crate::auth::TokenStore>,
    opts: &ConnectOptions,
) -> (Opened, Failure)
where
    C: rmcp::transport::streamable_http_client::StreamableHttpClient
        + Clone
        + Send
        + Sync
        + 'static,
{
    let deadline = tokio::time::Instant::now() + opts.handshake_timeout;
    let probe_failure = Failure::default();
    let probe = {
        let (client, subscribed) = Subscribing::new(client.clone());
        let transport = Watched::new(
            StreamableHttpClientTransport::with_client(client, http_config.clone()),
            probe_failure.clone(),
            name,
            store.clone(),
        );
        // `server/discover` may take half the handshake wait (`discoveryTimeoutMs`: 2.5 s for
        // a remote server by default) before a legacy session is opened instead; a modern
        // server that answered keeps the whole wait for its listings. (A fixed 3 s for the
        // whole modern handshake once made a loaded machine start modern sessions over as
        // legacy ones.)
        let answer_within = opts.handshake_timeout / 2;
        let opened = handshake(
            handler.clone(),
            transport,
            Some(subscribed),
            Opening::Discover { answer_within },
        );
        tokio::time::timeout_at(deadline, opened).await
    };
    match probe {
        Ok(Ok(opened)) => return (Ok(Ok(opened)), probe_failure),
        // The server wants an authorization (a `401`, or a `403` asking for more scope): that
        // is the answer, whichever era it speaks.
        Ok(Err(refused)) if probe_failure.auth_required() => {
            return (Ok(Err(refused)), probe_failure)
        }
        Ok(Err(_)) => {
            tracing::debug!(server = %name, "legacy session: server/discover refused or unanswered");
        }
        // Discovered, and then the whole handshake wait passed: no time is left to start over.
        Err(elapsed) => return (Err(elapsed), probe_failure),
    }
    let failure = Failure::default();
    let (client, subscribed) = Subscribing::new(client);
    let transport = Watched::new(
        StreamableHttpClientTransport::with_client(client, http_config),
        failure.clone(),
        name,
        store,
    );
    let opened = handshake(handler, transport, Some(subscribed), Opening::Initialize);
    (tokio::time::timeout_at(deadline, opened).await, failure)
}

fn check_http_url(url: &str) -> Result<(), String> {
    match reqwest::Url::parse(url) {
        Ok(parsed) if matches!(parsed.scheme(), "http" | "https") => Ok(()),
        _ => Err(format!(
            "has an invalid URL `{}` (expected http:// or https://)",
            crate::redact::mask_url(url)
        )),
    }
}

fn finish_remote(
    ctx: Ctx,
    opts: ConnectOptions,
    outcome: Result<Result<(Service, Catalog), HandshakeFailure>, tokio::time::error::Elapsed>,
    relist: Arc<Notify>,
    failure: Failure,
    url: &str,
) -> Result<Connection, ConnectError> {
    let url = crate::redact::mask_url(url);
    match outcome {
        Ok(Ok((service, catalog))) => Ok(start(
            ctx,
            opts,
            service,
            catalog,
            relist,
            Ending::Remote(failure),
            None,
        )),
        Ok(Err(handshake_failure)) => {
            let cause = failure
                .get()
                .filter(|f| !handshake_failure.what.contains(f.as_str()))
                .map(|f| format!(" ({f})"))
                .unwrap_or_default();
            Err(ctx.error(
                handshake_failure.kind,
                &format!("at {url} {}{cause}", handshake_failure.what),
            ))
        }
        Err(_) => Err(ctx.error(
            ConnectErrorKind::Timeout,
            &format!(
                "at {url} did not finish the MCP handshake within {} ms (`discoveryTimeoutMs`)",
                opts.handshake_timeout.as_millis()
            ),
        )),
    }
}
