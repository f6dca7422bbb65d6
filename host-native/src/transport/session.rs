//! One MCP session over any transport: the handshake with the first listing, the client
//! handler that hears `list_changed`, and the supervision of a live connection.
//!
//! Supervision, per connection:
//! 1. a relist task waits for `list_changed` (coalesced) and sends the whole fresh catalog;
//! 2. a monitor task waits for the first of: a requested close (or the `Connection` dropped),
//!    rmcp's service loop ending, the stdio process exiting, a remote keepalive ping failing;
//! 3. it stops the relist task, the service and (stdio) the process group, and unless the close
//!    was requested sends [`ConnEvent::Closed`] with the redacted reason.

use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{
    ClientRequest, PaginatedRequestParams, PingRequest, ProtocolVersion, ServerNotification,
    SubscriptionFilter,
};
use rmcp::service::{ClientLifecycleMode, ClientServiceExt};
use rmcp::service::{RunningService, ServiceError};
use rmcp::{Peer, RoleClient};
use tokio::sync::{mpsc, oneshot, Notify};
use tokio::task::JoinHandle;

use super::describe::{describe_init_error, describe_service_error};
pub(super) use super::handler::Handler;
use super::names::drop_invalid_names;
use super::ordered::Ordered;
use super::process::ChildProcess;
use super::remote::Failure;
use super::subscribe::Subscribed;

use super::{
    with_stderr, Catalog, ConnEvent, ConnectErrorKind, ConnectOptions, Connection, Ctx,
    KEEPALIVE_INTERVAL, SERVICE_CLOSE, SETTLE,
};

/// Why a requested close ended the connection, for calls that were still running.
const STOPPED: &str = "mcp-reconcile stopped it (removed, changed, or reconnected)";

/// How long a keepalive ping may go unanswered.
const PING_TIMEOUT: Duration = Duration::from_secs(20);
/// Bound on one re-listing after `list_changed`.
const RELIST_TIMEOUT: Duration = Duration::from_secs(60);

pub(super) type Service = RunningService<RoleClient, Handler>;

pub(super) struct HandshakeFailure {
    pub kind: ConnectErrorKind,
    pub what: String,
    /// `initialize` itself failed: when the process is found to have exited, that exit is the
    /// story, and `what` only says how the pipe noticed (a broken pipe or a closed stream,
    /// whichever came first — it varies from run to run).
    pub in_initialize: bool,
}

/// How a connection opens (SPEC §16).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Opening {
    /// `initialize`, a legacy session: stdio and legacy SSE, where a probe a legacy server
    /// may leave unanswered would cost the whole handshake wait.
    Initialize,
    /// `server/discover` only (a 2026-07-28 session); a refusal, or no answer within
    /// `answer_within`, is an error, and the caller opens a legacy session instead
    /// (streamable HTTP: `open_http`). Once it is answered, the rest of the handshake (the
    /// listen stream, the first listing) has the caller's whole wait.
    Discover { answer_within: Duration },
}

/// Whether `peer` speaks 2026-07-28 or later with this host (it answered `server/discover`).
pub(super) fn is_modern(peer: &Peer<RoleClient>) -> bool {
    peer.peer_info()
        .is_some_and(|i| i.protocol_version >= ProtocolVersion::V_2026_07_28)
}

/// `initialize` or `server/discover` ([`Opening`]), then the first listing of everything the
/// server has capabilities for. A legacy streamable HTTP session lists once its standalone
/// stream is open (`subscribed`); a modern one opens a `subscriptions/listen` stream for the
/// list changes first, so no change after the listing is missed.
pub(super) async fn handshake<T, E, A>(
    handler: Handler,
    transport: T,
    subscribed: Option<Subscribed>,
    opening: Opening,
) -> Result<(Service, Catalog), HandshakeFailure>
where
    T: rmcp::transport::IntoTransport<RoleClient, E, A>,
    E: std::error::Error + Send + Sync + 'static,
{
    let ordered = Ordered::new(transport.into_transport(), handler.askers.clone());
    let relist = handler.relist.clone();
    let (lifecycle, answer_within) = match opening {
        Opening::Initialize => (ClientLifecycleMode::Initialize, None),
        Opening::Discover { answer_within } => (
            ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            },
            Some(answer_within),
        ),
    };
    let serving = handler.serve_with_lifecycle(ordered, lifecycle);
    let served = match answer_within {
        None => serving.await,
        Some(wait) => tokio::time::timeout(wait, serving)
            .await
            .map_err(|_| HandshakeFailure {
                kind: ConnectErrorKind::Handshake,
                what: format!("did not answer server/discover within {} s", wait.as_secs()),
                in_initialize: true,
            })?,
    };
    let service = served.map_err(|e| HandshakeFailure {
        kind: ConnectErrorKind::Handshake,
        what: format!("failed the MCP handshake: {}", describe_init_error(&e)),
        in_initialize: true,
    })?;
    if is_modern(service.peer()) {
        listen_for_changes(service.peer(), relist).await;
    } else if let Some(subscribed) = subscribed {
        subscribed.wait().await;
    }
    match list_catalog(service.peer()).await {
        Ok(catalog) => Ok((service, catalog)),
        Err(e) => {
            let _ = tokio::time::timeout(SERVICE_CLOSE, service.cancel()).await;
            Err(HandshakeFailure {
                kind: ConnectErrorKind::Handshake,
                what: format!("answered initialize but {e}"),
                in_initialize: false,
            })
        }
    }
}

/// Most pages one listing (`tools/list`, `prompts/list`, `resources/list`) may take.
pub const MAX_LIST_PAGES: usize = 100;
/// Most items one listing may return, over all its pages.
pub const MAX_LIST_ITEMS: usize = 10_000;

/// Why listing the catalog failed.
#[derive(Debug)]
pub(super) enum ListError {
    /// The request failed (transport, MCP error).
    Failed(String),
    /// The server broke a listing cap ([`MAX_LIST_PAGES`], [`MAX_LIST_ITEMS`]): it is
    /// misbehaving and the connection ends, as after a crash.
    Misbehaving(String),
}

impl std::fmt::Display for ListError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ListError::Failed(e) | ListError::Misbehaving(e) => f.write_str(e),
        }
    }
}

/// Follows `nextCursor` from the first page of `method`, at most [`MAX_LIST_PAGES`] pages and
/// [`MAX_LIST_ITEMS`] items (rmcp's own `list_all_*` follow a server's cursors forever).
async fn list_pages<T, F, Fut>(method: &str, mut page: F) -> Result<Vec<T>, ListError>
where
    F: FnMut(Option<PaginatedRequestParams>) -> Fut,
    Fut: std::future::Future<Output = Result<(Vec<T>, Option<String>), ServiceError>>,
{
    let mut items = Vec::new();
    let mut cursor = None;
    for _ in 0..MAX_LIST_PAGES {
        let params = cursor.map(|c| PaginatedRequestParams::default().with_cursor(Some(c)));
        let (page_items, next) = page(params).await.map_err(|e| {
            ListError::Failed(format!("{method} failed: {}", describe_service_error(&e)))
        })?;
        if items.len() + page_items.len() > MAX_LIST_ITEMS {
            return Err(ListError::Misbehaving(format!(
                "{method} returned more than {MAX_LIST_ITEMS} items; the server is misbehaving"
            )));
        }
        items.extend(page_items);
        match next {
            Some(next) => cursor = Some(next),
            None => return Ok(items),
        }
    }
    Err(ListError::Misbehaving(format!(
        "{method} returned more than {MAX_LIST_PAGES} pages; the server is misbehaving"
    )))
}

/// Lists every page of tools, prompts and resources the server has capabilities for, within
/// the caps of [`list_pages`].
/// A listing as it is kept: without the names that cannot be offered, with its digests
/// computed now, so that every copy made of it (a pool's session views) carries them.
fn offered(server: &str, catalog: Catalog) -> Catalog {
    let catalog = drop_invalid_names(server, catalog);
    catalog.digests();
    catalog
}

pub(super) async fn list_catalog(peer: &Peer<RoleClient>) -> Result<Catalog, ListError> {
    let capabilities = peer.peer_info().map(|info| info.capabilities.clone());
    let offers =
        |has: fn(&rmcp::model::ServerCapabilities) -> bool| capabilities.as_ref().is_none_or(has);
    let mut catalog = Catalog::default();
    if offers(|c| c.tools.is_some()) {
        catalog.tools = list_pages("tools/list", |p| async move {
            peer.list_tools(p).await.map(|r| (r.tools, r.next_cursor))
        })
        .await?;
    }
    if offers(|c| c.prompts.is_some()) {
        catalog.prompts = list_pages("prompts/list", |p| async move {
            peer.list_prompts(p)
                .await
                .map(|r| (r.prompts, r.next_cursor))
        })
        .await?;
    }
    if offers(|c| c.resources.is_some()) {
        catalog.resources = list_pages("resources/list", |p| async move {
            peer.list_resources(p)
                .await
                .map(|r| (r.resources, r.next_cursor))
        })
        .await?;
        // Optional for a server with resources: one that does not answer it has none.
        catalog.resource_templates = match list_pages("resources/templates/list", |p| async move {
            peer.list_resource_templates(p)
                .await
                .map(|r| (r.resource_templates, r.next_cursor))
        })
        .await
        {
            Ok(templates) => templates,
            Err(ListError::Misbehaving(e)) => return Err(ListError::Misbehaving(e)),
            Err(ListError::Failed(_)) => Vec::new(),
        };
    }
    if super::skills::declared(peer) {
        let skills = list_pages("skills/list", |p| super::skills::page(peer, p)).await?;
        catalog.skills = Some(skills);
    }
    Ok(catalog)
}

// ---------------------------------------------------------------------------------------------
// supervision

/// What can end a live connection besides a requested close.
pub(super) enum Ending {
    Process(ChildProcess),
    Remote(Failure),
}

pub(super) fn start(
    ctx: Ctx,
    opts: ConnectOptions,
    service: Service,
    catalog: Catalog,
    relist: Arc<Notify>,
    ending: Ending,
    pid: Option<u32>,
) -> Connection {
    let ctx = Arc::new(ctx);
    let catalog = offered(&ctx.name, catalog);
    let peer = service.peer().clone();
    let progress = service.service().progress.clone();
    let relister = tokio::spawn(follow_list_changes(
        ctx.clone(),
        peer.clone(),
        relist,
        opts.generation,
        opts.events.clone(),
    ));
    let (shutdown_tx, shutdown) = oneshot::channel();
    let monitor = tokio::spawn(supervise(Supervised {
        ctx: ctx.clone(),
        generation: opts.generation,
        events: opts.events,
        service,
        relister,
        ending,
        shutdown,
    }));
    tracing::info!(server = %ctx.name, ?pid, tools = catalog.tools.len(), "connected");
    Connection {
        ctx,
        pid,
        catalog,
        peer,
        progress,
        shutdown: Some(shutdown_tx),
        monitor: Some(monitor),
    }
}

/// Re-lists the whole catalog after each (coalesced) `list_changed`, one listing at a time, so
/// events arrive in order and the last one is current. Returns (ending the connection) when a
/// listing breaks a cap: why the server is misbehaving.
async fn follow_list_changes(
    ctx: Arc<Ctx>,
    peer: Peer<RoleClient>,
    relist: Arc<Notify>,
    generation: u64,
    events: mpsc::UnboundedSender<ConnEvent>,
) -> Option<String> {
    loop {
        relist.notified().await;
        if peer.is_transport_closed() {
            return None;
        }
        match tokio::time::timeout(RELIST_TIMEOUT, list_catalog(&peer)).await {
            Ok(Ok(catalog)) => {
                let catalog = offered(&ctx.name, catalog);
                tracing::info!(server = %ctx.name, tools = catalog.tools.len(), "catalog changed");
                let event = ConnEvent::CatalogChanged {
                    server: ctx.name.clone(),
                    generation,
                    catalog,
                };
                if events.send(event).is_err() {
                    return None;
                }
            }
            Ok(Err(ListError::Misbehaving(e))) => return Some(e),
            Ok(Err(e)) => {
                tracing::warn!(server = %ctx.name, "re-listing after list_changed: {}", ctx.redact(&e.to_string()));
            }
            Err(_) => tracing::warn!(server = %ctx.name, "re-listing after list_changed timed out"),
        }
    }
}

struct Supervised {
    ctx: Arc<Ctx>,
    generation: u64,
    events: mpsc::UnboundedSender<ConnEvent>,
    service: Service,
    relister: JoinHandle<Option<String>>,
    ending: Ending,
    shutdown: oneshot::Receiver<()>,
}

/// Why the monitor stopped watching.
enum Cause {
    Requested,
    ServiceEnded,
    Exited,
    KeepaliveFailed(String),
    /// A re-listing broke a cap (why).
    Misbehaving(String),
}

/// Waits for a requested close or the connection's own end, then tears everything down; on its
/// own end reports [`ConnEvent::Closed`].
async fn supervise(s: Supervised) {
    let Supervised {
        ctx,
        generation,
        events,
        service,
        mut ending,
        mut shutdown,
        mut relister,
    } = s;
    let peer = service.peer().clone();
    let cancel = service.cancellation_token();
    let quit = service.waiting();
    tokio::pin!(quit);

    let mut quit_done = false;
    let cause = {
        let ended_on_its_own = async {
            match &mut ending {
                Ending::Process(process) => {
                    process.exited().await;
                    Cause::Exited
                }
                Ending::Remote(_) => Cause::KeepaliveFailed(keepalive(&peer).await),
            }
        };
        tokio::select! {
            _ = &mut shutdown => Cause::Requested,
            _ = &mut quit => {
                quit_done = true;
                Cause::ServiceEnded
            }
            cause = ended_on_its_own => cause,
            Ok(Some(why)) = &mut relister => Cause::Misbehaving(why),
        }
    };
    relister.abort();
    cancel.cancel();
    if !quit_done {
        let _ = tokio::time::timeout(SERVICE_CLOSE, &mut quit).await;
    }

    let error = match (ending, &cause) {
        (Ending::Process(mut process), Cause::Requested) => {
            ctx.ended.send_replace(Some(STOPPED.to_owned()));
            process.stop().await;
            tracing::info!(server = %ctx.name, "closed");
            return;
        }
        (Ending::Remote(_), Cause::Requested) => {
            ctx.ended.send_replace(Some(STOPPED.to_owned()));
            tracing::info!(server = %ctx.name, "closed");
            return;
        }
        (Ending::Process(mut process), Cause::Misbehaving(why)) => {
            process.stop().await;
            format!("{why}; stopped it")
        }
        (Ending::Remote(_), Cause::Misbehaving(why)) => format!("{why}; disconnected"),
        (Ending::Process(mut process), _) => {
            let status = match process.wait_exit(SETTLE).await {
                Some(status) => format!("exited ({status})"),
                None => "closed its stdout; stopped it".to_owned(),
            };
            process.stderr_settled(SETTLE).await;
            process.stop().await;
            format!("{status}{}", with_stderr(&process.stderr_tail()))
        }
        (Ending::Remote(failure), cause) => {
            let reason = match (failure.get(), cause) {
                (Some(reason), _) => reason,
                (None, Cause::KeepaliveFailed(reason)) => reason.clone(),
                (None, _) => "the server ended the session".to_owned(),
            };
            format!("lost its connection: {reason}")
        }
    };
    ctx.ended.send_replace(Some(ctx.redact(&error)));
    let error = ctx.redact(&format!("server `{}` {error}", ctx.name));
    tracing::warn!(server = %ctx.name, "{error}");
    let _ = events.send(ConnEvent::Closed {
        server: ctx.name.clone(),
        generation,
        error,
    });
}

/// A modern server's list changes: a `subscriptions/listen` stream whose notifications relist
/// the server, as `list_changed` does in a legacy session. It ends with the connection. A
/// server that refuses it is listed again only when the host reconnects it.
async fn listen_for_changes(peer: &Peer<RoleClient>, relist: Arc<Notify>) {
    let mut filter = SubscriptionFilter::default();
    filter.tools_list_changed = Some(true);
    filter.prompts_list_changed = Some(true);
    filter.resources_list_changed = Some(true);
    let listening = tokio::time::timeout(LISTEN_WAIT, peer.listen(filter)).await;
    let Ok(Ok(mut subscription)) = listening else {
        tracing::debug!("the server opened no subscriptions/listen stream");
        return;
    };
    tokio::spawn(async move {
        while let Ok(Some(note)) = subscription.next().await {
            if matches!(
                note,
                ServerNotification::ToolListChangedNotification(_)
                    | ServerNotification::PromptListChangedNotification(_)
                    | ServerNotification::ResourceListChangedNotification(_)
            ) {
                relist.notify_one();
            }
        }
    });
}

/// Longest the handshake waits for a modern server to acknowledge its listen stream.
const LISTEN_WAIT: Duration = Duration::from_secs(2);

/// Pings every [`KEEPALIVE_INTERVAL`]; returns why the server stopped answering. An MCP error
/// reply still proves the server is there.
async fn keepalive(peer: &Peer<RoleClient>) -> String {
    loop {
        tokio::time::sleep(KEEPALIVE_INTERVAL).await;
        let ping = peer.send_request(ClientRequest::PingRequest(PingRequest::default()));
        match tokio::time::timeout(PING_TIMEOUT, ping).await {
            Ok(Ok(_)) | Ok(Err(ServiceError::McpError(_))) => {}
            Ok(Err(e)) => return format!("ping failed: {}", describe_service_error(&e)),
            Err(_) => return format!("no answer to a ping within {} s", PING_TIMEOUT.as_secs()),
        }
    }
}

// ---------------------------------------------------------------------------------------------
// error texts
