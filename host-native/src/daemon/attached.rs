//! One attached session of the daemon: a [`PoolSession`] for the client's files and
//! environment, kept equal to the files, served as MCP on the client's connection, and
//! released when the connection closes; its language servers (SPEC §14) are its own. The
//! daemon's list of them is the [`Registry`](super::registry::Registry).
//!
//! Drive loop of `run`:
//! 1. resolve the client's files in its environment; make the session with its [`Launch`]
//!    (project root, environment, token file); load and apply the files (the pool spawns or
//!    attaches; language servers start in the session's environment);
//! 2. wait (at most [`STARTUP_WAIT`]) until no server is still connecting, so the client's
//!    first listing is complete; answer `{"ok":{"session":NAME}}` and serve MCP on the rest
//!    of the connection;
//! 3. a file event waits for the files to settle (every changed file parses and `quiet`
//!    passed, or `debounce` since the first event), then reloads and applies; a `reload`
//!    request applies at once; a file that went missing is held for `MISSING_GRACE`, then
//!    read as empty and applied; a failed language server is retried when the kernel's plan
//!    says it is due;
//! 4. whenever the pool or a reload may have changed the session's catalog, compare it with
//!    the last announced one and send `list_changed` for the lists that differ;
//! 5. when the client closes the connection: unregister, stop its language servers and
//!    release everything held.

use std::collections::HashSet;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use mcp_reconcile_kernel::identity::approval_hash;
use mcp_reconcile_kernel::plan::Action;
use mcp_reconcile_kernel::reload::FileSource;
use serde_json::json;
use tokio::io::BufReader;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::{mpsc, watch, RwLock};

use super::registry::{Entry, Registry, SessionInfo};
use super::session::Control;
pub use super::session::DaemonSession;
use crate::clock::Clock;
use crate::gateway::Gateway;
use crate::host::{
    digests, lsp_approval_requests, CatalogChange, HostEvent, LanguageServers, STARTUP_WAIT,
};
use crate::inputs::{HostEnv, Inputs, Options, Snapshot, MISSING_GRACE};
use crate::launch::Launch;
use crate::pool::{PoolSession, SharedPool};
use crate::review::ApprovalRequest;
use crate::session::Session;
use crate::status::plan_json;
use crate::watcher;
use rmcp::model::{CustomNotification, ServerNotification};
use rmcp::{Peer, RoleServer};

/// The notification a daemon session sends its client for people: `{"text": …, "name": …,
/// "hash": …, "lsp": bool}`, the review and approve command of a server waiting for approval.
/// The `serve` bridge prints the text on stderr and drops it; `watch --daemon` asks.
pub const HINT: &str = "notifications/mcp-reconcile/hint";

/// The notification a daemon session sends after a reconcile that did something:
/// `{"plan": <§10 plan>, "rejected": [names]}` (rejected servers, which the plan calls pending).
/// `watch --daemon` prints it; the `serve` bridge drops it.
pub const PLAN: &str = "notifications/mcp-reconcile/plan";

/// What a client attaches with (see [`DaemonRequest::Attach`](super::DaemonRequest)).
pub struct Attach {
    /// Its layer flags.
    pub options: Options,
    /// Its environment, current directory and home.
    pub env: HostEnv,
    /// `serve`, for `status`.
    pub client: String,
    /// Its process id, for `status`.
    pub pid: u32,
}

/// What a session's loop owns besides the pool session: its files, its language servers and
/// the approvals it announced.
struct Files {
    inputs: Inputs,
    lsp: LanguageServers,
    /// The (name, approval hash) pairs announced to the client.
    prompted: HashSet<(String, String)>,
    /// The files as last applied (language-server retries plan against it).
    snapshot: Option<Snapshot>,
    /// Shared with the [`DaemonSession`]: whether the language tools are offered.
    languages: Arc<AtomicBool>,
}

/// Runs one attached session until its client closes the connection (see the module docs).
pub(crate) async fn run(
    attach: Attach,
    pool: SharedPool,
    registry: Registry,
    reader: BufReader<OwnedReadHalf>,
    mut write: OwnedWriteHalf,
) {
    let attaching = registry.attaching();
    let launch_vars = attach.env.vars.clone();
    let launch_raw = attach.env.raw.clone();
    let inputs = match Inputs::with_env(&attach.options, attach.env) {
        Ok(inputs) => inputs,
        Err(e) => {
            let _ = super::reply(&mut write, &json!({ "error": format!("{e:#}") })).await;
            return;
        }
    };
    let name = registry.next_name(&attach.client, attach.pid);
    let mut session = pool.session(name.clone());
    let launch = Arc::new(Launch {
        dir: inputs.project_dir().to_path_buf(),
        vars: launch_vars,
        raw: launch_raw,
        tokens: Some(inputs.paths().oauth_tokens.clone()),
    });
    session.set_launch((*launch).clone());
    let (file_tx, mut file_rx) = mpsc::unbounded_channel();
    let watcher = match watcher::watch(inputs.watched(), file_tx) {
        Ok(watcher) => watcher,
        Err(e) => {
            let _ = super::reply(&mut write, &json!({ "error": format!("{e:#}") })).await;
            return;
        }
    };
    let clock = Clock::tokio();
    let lsp = LanguageServers::new(
        inputs.project_dir().to_path_buf(),
        Some(launch),
        crate::host::DEFAULT_PARALLELISM,
        clock.clone(),
    );
    let (control_tx, mut control_rx) = mpsc::unbounded_channel();
    let languages = Arc::new(AtomicBool::new(false));
    let shared = DaemonSession {
        pool: Arc::new(RwLock::new(session)),
        control: control_tx,
        languages: languages.clone(),
    };
    let mut files = Files {
        inputs,
        lsp,
        prompted: HashSet::new(),
        snapshot: None,
        languages,
    };
    let first = apply(&shared, &mut files, None).await;
    started(&*shared.pool.read().await, pool.changes()).await;
    let info = SessionInfo {
        name: name.clone(),
        client: attach.client,
        pid: attach.pid,
        project_root: files.inputs.project_root().to_owned(),
        id: files.inputs.session_id(),
    };
    if super::reply(&mut write, &json!({ "ok": { "session": name } }))
        .await
        .is_err()
    {
        files.lsp.shutdown().await;
        return;
    }
    registry.insert(Entry {
        info,
        session: shared.clone(),
    });
    drop(attaching);
    tracing::info!(session = %name, "attached");

    let gateway = Gateway::new(shared.clone());
    let (events_tx, events_rx) = mpsc::unbounded_channel();
    let announcer = tokio::spawn(gateway.clone().announce(events_rx));
    let (poke_tx, poke_rx) = mpsc::unbounded_channel();
    let watcher_task = tokio::spawn(watch_catalog(
        shared.clone(),
        pool.changes(),
        poke_rx,
        events_tx,
    ));
    let service = {
        use rmcp::ServiceExt;
        gateway.serve((reader, write)).await
    };
    if let Ok(service) = service {
        // The connection's one client: what needs approval goes to it.
        let client = service.peer().clone();
        tell(&client, first).await;
        let waiting = service.waiting();
        tokio::pin!(waiting);
        // While a file that had content is missing, its last good content is used for
        // MISSING_GRACE; then it reads as empty (as in a session host).
        let mut missing = missing_deadline(&files.inputs, None);
        loop {
            let expire = async {
                match missing {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            let lsp_retry = clock.sleep_until(files.lsp.next_retry());
            let told = tokio::select! {
                _ = &mut waiting => break,
                Some(source) = file_rx.recv() => {
                    let changed = settle(&files.inputs, &mut file_rx, source).await;
                    apply(&shared, &mut files, Some(&changed)).await
                }
                Some(control) = control_rx.recv() => match control {
                    Control::Reload(done) => {
                        let told = apply(&shared, &mut files, None).await;
                        let _ = done.send(());
                        told
                    }
                    Control::Plan(reply) => {
                        let snapshot = files.inputs.load(None);
                        let _ = reply.send(shared.pool.read().await.plan(&snapshot));
                        continue;
                    }
                    Control::Language(extension, reply) => {
                        let _ = reply.send(files.lsp.route(&extension));
                        continue;
                    }
                    Control::Languages(reply) => {
                        let _ = reply.send(files.lsp.status());
                        continue;
                    }
                },
                () = expire => {
                    missing = None;
                    let (sources, _) = files.inputs.expire_missing();
                    apply(&shared, &mut files, Some(&sources)).await
                }
                // A language server's start ended or it changed: nothing to announce (the
                // language tools stay while one is configured).
                _ = files.lsp.next() => continue,
                () = lsp_retry => {
                    if let Some(snapshot) = &files.snapshot {
                        files.lsp.reconcile(snapshot);
                    }
                    continue;
                }
            };
            let _ = poke_tx.send(());
            tell(&client, told).await;
            missing = missing_deadline(&files.inputs, missing);
        }
    }
    drop(watcher);
    watcher_task.abort();
    announcer.abort();
    registry.remove(&name);
    tracing::info!(session = %name, "detached; releasing its servers");
    files.lsp.shutdown().await;
    // The last handle's drop releases everything the session holds.
}

/// Waits, at most [`STARTUP_WAIT`], until none of the session's servers is still connecting:
/// the client's first listing is then complete, as a session in its own process answers it.
async fn started(session: &PoolSession, mut changes: watch::Receiver<u64>) {
    let deadline = tokio::time::Instant::now() + Duration::from_millis(STARTUP_WAIT.0);
    loop {
        changes.borrow_and_update();
        match session.status().await {
            Ok(report) if report.servers.iter().any(|s| s.state == "connecting") => {}
            _ => return,
        }
        if !matches!(
            tokio::time::timeout_at(deadline, changes.changed()).await,
            Ok(Ok(()))
        ) {
            return;
        }
    }
}

/// When a held missing file is given up: unchanged while one is held, `None` once none is.
fn missing_deadline(
    inputs: &Inputs,
    armed: Option<tokio::time::Instant>,
) -> Option<tokio::time::Instant> {
    if !inputs.missing() {
        return None;
    }
    armed.or_else(|| Some(tokio::time::Instant::now() + Duration::from_millis(MISSING_GRACE.0)))
}

/// Collects file events until the changed files settle: each parses and `quiet` passed
/// without another event, or `debounce` passed since the first.
async fn settle(
    inputs: &Inputs,
    events: &mut mpsc::UnboundedReceiver<FileSource>,
    first: FileSource,
) -> Vec<FileSource> {
    let start = tokio::time::Instant::now();
    let debounce = Duration::from_millis(inputs.debounce().0);
    let quiet = Duration::from_millis(inputs.quiet().0);
    let mut changed = vec![first];
    loop {
        let complete = changed.iter().all(|s| inputs.complete(s));
        let limit = start + debounce;
        let wait_until = if complete {
            (tokio::time::Instant::now() + quiet).min(limit)
        } else {
            limit
        };
        match tokio::time::timeout_at(wait_until, events.recv()).await {
            Ok(Some(source)) => {
                if !changed.contains(&source) {
                    changed.push(source);
                }
                if tokio::time::Instant::now() >= limit {
                    return changed;
                }
            }
            Ok(None) | Err(_) => return changed,
        }
    }
}

/// Reloads `changed` and applies it to the pool session and the language servers; returns the
/// approval requests not announced before (`prompted` keeps the (name, hash) pairs that were,
/// as a session host does).
async fn apply(shared: &DaemonSession, files: &mut Files, changed: Option<&[FileSource]>) -> Told {
    let snapshot = files.inputs.load(changed);
    let mut asks = Vec::new();
    let mut plan = None;
    {
        let mut session = shared.pool.write().await;
        match session.apply(&snapshot).await {
            Ok(applied) => {
                tracing::info!(
                    session = %session.name(),
                    actions = applied.plan.actions.len(),
                    "applied"
                );
                let servers = snapshot.assembled().servers;
                let acted = applied
                    .plan
                    .actions
                    .iter()
                    .any(|a| !matches!(a, Action::Keep { .. } | Action::Noop { .. }));
                if acted {
                    plan = Some(json!({
                        "plan": plan_json(&applied.plan),
                        "rejected": snapshot.rejected(&servers),
                    }));
                }
                asks.extend(
                    applied
                        .approval_needed
                        .iter()
                        .filter_map(|name| servers.get(name).map(|config| (name, config)))
                        .filter(|(name, config)| {
                            !files
                                .prompted
                                .contains(&((*name).clone(), approval_hash(config).0))
                        })
                        .map(|(name, config)| ApprovalRequest::new(&snapshot, name, config)),
                );
            }
            Err(e) => tracing::warn!(session = %session.name(), "reload failed: {e}"),
        }
    }
    asks.extend(lsp_approval_requests(&snapshot, |key| {
        files.prompted.contains(key)
    }));
    for ask in &asks {
        files.prompted.insert((ask.name.clone(), ask.hash.clone()));
    }
    files.lsp.reconcile(&snapshot);
    files
        .languages
        .store(files.lsp.any_configured(), Ordering::Relaxed);
    files.snapshot = Some(snapshot);
    Told { asks, plan }
}

/// What a reconcile has to tell the client's person: approvals to ask for, and the plan it
/// carried out (when it did something).
struct Told {
    asks: Vec<ApprovalRequest>,
    plan: Option<serde_json::Value>,
}

/// Sends `told` to the session's client ([`HINT`]s, then the [`PLAN`]).
async fn tell(client: &Peer<RoleServer>, told: Told) {
    hint(client, told.asks).await;
    if let Some(plan) = told.plan {
        let notification = CustomNotification::new(PLAN, Some(plan));
        let _ = client
            .send_notification(ServerNotification::CustomNotification(notification))
            .await;
    }
}

/// Sends each request's review and approve command to the session's client as a
/// [`HINT`] notification (the `serve` bridge prints it on stderr; it never reaches the MCP
/// client).
async fn hint(client: &Peer<RoleServer>, requests: Vec<ApprovalRequest>) {
    for request in requests {
        let text = format!("{}{}", request.review(), request.hint_line());
        let params = json!({
            "text": text,
            "name": request.name,
            "hash": request.hash,
            "lsp": request.lsp,
        });
        let notification = CustomNotification::new(HINT, Some(params));
        let _ = client
            .send_notification(ServerNotification::CustomNotification(notification))
            .await;
    }
}

/// Sends [`HostEvent::CatalogChanged`] whenever the session's catalog differs from the one
/// last seen, checked on every pool change and after every apply.
async fn watch_catalog(
    session: DaemonSession,
    mut changes: watch::Receiver<u64>,
    mut pokes: mpsc::UnboundedReceiver<()>,
    events: mpsc::UnboundedSender<HostEvent>,
) {
    let mut last = match session.catalog().await {
        Ok(catalog) => digests(&catalog),
        Err(_) => return,
    };
    loop {
        tokio::select! {
            changed = changes.changed() => if changed.is_err() { return },
            poked = pokes.recv() => if poked.is_none() { return },
        }
        let Ok(catalog) = session.catalog().await else {
            return;
        };
        let now = digests(&catalog);
        let change = CatalogChange {
            tools: now.0 != last.0,
            prompts: now.1 != last.1,
            resources: now.2 != last.2,
        };
        last = now;
        if change != CatalogChange::default()
            && events.send(HostEvent::CatalogChanged(change)).is_err()
        {
            return;
        }
    }
}
