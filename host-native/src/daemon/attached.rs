//! One attached session of the daemon: a [`PoolSession`] for the client's files and
//! environment, kept equal to the files, served as MCP on the client's connection, and
//! released when the connection closes. `Registry` is the daemon's list of them.
//!
//! Drive loop of `run`:
//! 1. resolve the client's files in its environment; make the session with its [`Launch`]
//!    (project root, environment); load and apply the files (the pool spawns or attaches);
//! 2. wait (at most [`STARTUP_WAIT`]) until no server is still connecting, so the client's
//!    first listing is complete; answer `{"ok":{"session":NAME}}` and serve MCP on the rest
//!    of the connection;
//! 3. a file event waits for the files to settle (every changed file parses and `quiet`
//!    passed, or `debounce` since the first event), then reloads and applies; a `reload`
//!    request applies at once; a file that went missing is held for `MISSING_GRACE`, then
//!    read as empty and applied;
//! 4. whenever the pool or a reload may have changed the session's catalog, compare it with
//!    the last announced one and send `list_changed` for the lists that differ;
//! 5. when the client closes the connection: unregister and release everything held.

use std::collections::{BTreeMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use mcp_reconcile_kernel::identity::approval_hash;
use mcp_reconcile_kernel::plan::Plan;
use mcp_reconcile_kernel::reload::FileSource;
use serde_json::{json, Value};
use tokio::io::BufReader;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::{mpsc, oneshot, watch, RwLock};

use crate::gateway::Gateway;
use crate::host::{
    digests, CatalogChange, HostEvent, MergedCatalog, Route, StatusReport, Target, STARTUP_WAIT,
};
use crate::inputs::{HostEnv, Inputs, Options, MISSING_GRACE};
use crate::ipc::SessionRequest;
use crate::launch::Launch;
use crate::pool::{PoolSession, SharedPool};
use crate::review::ApprovalRequest;
use crate::session::{Session, SessionGone};
use crate::status::{plan_json, report_json};
use crate::watcher;
use rmcp::model::{CustomNotification, ServerNotification};
use rmcp::{Peer, RoleServer};

/// The notification a daemon session sends its client for people: `{"text": …}`, already
/// terminal-safe review text. The `serve` bridge prints it on stderr and drops it.
pub const HINT: &str = "notifications/mcp-reconcile/hint";

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

/// A session as `status` lists it.
#[derive(Clone, Debug)]
pub struct SessionInfo {
    /// Unique among the daemon's sessions: `<client>-<pid>-<n>`.
    pub name: String,
    /// Who attached it.
    pub client: String,
    /// The attached process.
    pub pid: u32,
    /// Its project root (approvals are keyed by it).
    pub project_root: String,
    /// Its file set's id ([`Inputs::session_id`]): what `status`, `reload` and `reconnect`
    /// with the same flags ask for.
    pub id: String,
}

struct Entry {
    info: SessionInfo,
    session: DaemonSession,
    control: mpsc::UnboundedSender<Control>,
}

/// What the session's loop is asked to do (it owns the files).
enum Control {
    /// Reload every file and apply now.
    Reload(oneshot::Sender<()>),
    /// Dry run against the files as they are now.
    Plan(oneshot::Sender<Result<Plan, String>>),
}

/// The daemon's live sessions; clones share it.
#[derive(Clone)]
pub(crate) struct Registry {
    entries: Arc<Mutex<Entries>>,
    count: Arc<watch::Sender<usize>>,
}

#[derive(Default)]
struct Entries {
    /// Sessions made so far (for unique names).
    made: u64,
    /// Attaches still being set up: they count as sessions, so the daemon does not exit
    /// under them.
    attaching: usize,
    live: BTreeMap<String, Entry>,
}

/// An attach being set up; see [`Registry::attaching`].
pub(crate) struct Attaching(Registry);

impl Drop for Attaching {
    fn drop(&mut self) {
        let mut entries = self.0.lock();
        entries.attaching = entries.attaching.saturating_sub(1);
        self.0
            .count
            .send_replace(entries.attaching + entries.live.len());
    }
}

impl Default for Registry {
    fn default() -> Self {
        Registry {
            entries: Arc::default(),
            count: Arc::new(watch::Sender::new(0)),
        }
    }
}

impl Registry {
    /// The number of live sessions, as it changes.
    pub(crate) fn count(&self) -> watch::Receiver<usize> {
        self.count.subscribe()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Entries> {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Counts an attach from the moment its request is read until the guard drops (after
    /// the session is inserted, or the attach failed).
    pub(crate) fn attaching(&self) -> Attaching {
        let mut entries = self.lock();
        entries.attaching += 1;
        self.count
            .send_replace(entries.attaching + entries.live.len());
        Attaching(self.clone())
    }

    /// Every live session, in name order.
    pub(crate) fn sessions(&self) -> Vec<SessionInfo> {
        self.lock().live.values().map(|e| e.info.clone()).collect()
    }

    fn next_name(&self, client: &str, pid: u32) -> String {
        let mut entries = self.lock();
        entries.made += 1;
        format!("{client}-{pid}-{}", entries.made)
    }

    fn insert(&self, entry: Entry) {
        let mut entries = self.lock();
        entries.live.insert(entry.info.name.clone(), entry);
        self.count
            .send_replace(entries.attaching + entries.live.len());
    }

    fn remove(&self, name: &str) {
        let mut entries = self.lock();
        entries.live.remove(name);
        self.count
            .send_replace(entries.attaching + entries.live.len());
    }

    /// Asks every session of the file set `id` (`{"ok": …}` or `{"error": …}`; `{"none":
    /// true}` when there is none): the status of the first (they read the same files), a
    /// reload or reconnect of each.
    pub(crate) async fn ask(&self, id: &str, request: SessionRequest) -> Value {
        let targets: Vec<(DaemonSession, mpsc::UnboundedSender<Control>)> = {
            self.lock()
                .live
                .values()
                .filter(|e| e.info.id == id)
                .map(|e| (e.session.clone(), e.control.clone()))
                .collect()
        };
        let Some((first, _)) = targets.first() else {
            // Not an error: the command falls back to what the files say.
            return json!({ "none": true });
        };
        match request {
            SessionRequest::Status => match first.status().await {
                Ok(report) => json!({ "ok": report_json(&report) }),
                Err(gone) => json!({ "error": gone.to_string() }),
            },
            SessionRequest::Plan => {
                let (tx, rx) = oneshot::channel();
                let planned = match targets[0].1.send(Control::Plan(tx)) {
                    Ok(()) => rx.await.ok(),
                    Err(_) => None,
                };
                match planned {
                    Some(Ok(plan)) => json!({ "ok": plan_json(&plan) }),
                    Some(Err(message)) => json!({ "error": message }),
                    None => json!({ "error": SessionGone.to_string() }),
                }
            }
            SessionRequest::Reload => {
                for (_, control) in &targets {
                    let (tx, rx) = oneshot::channel();
                    if control.send(Control::Reload(tx)).is_ok() {
                        let _ = rx.await;
                    }
                }
                json!({ "ok": true })
            }
            SessionRequest::Reconnect { name } => {
                let mut names = Vec::new();
                for (session, _) in &targets {
                    if let Ok(Ok(restarted)) = session.reconnect(name.clone()).await {
                        names.extend(restarted);
                    }
                }
                names.sort();
                names.dedup();
                json!({ "ok": names })
            }
        }
    }
}

/// A [`PoolSession`] shared by the gateway (reads) and the reload loop (applies).
#[derive(Clone)]
pub struct DaemonSession(Arc<RwLock<PoolSession>>);

impl Session for DaemonSession {
    async fn catalog(&self) -> Result<MergedCatalog, SessionGone> {
        self.0.read().await.catalog().await.map_err(|_| SessionGone)
    }

    async fn route(&self, target: Target) -> Result<Result<Route, String>, SessionGone> {
        self.0
            .read()
            .await
            .route(target)
            .await
            .map_err(|_| SessionGone)
    }

    async fn status(&self) -> Result<StatusReport, SessionGone> {
        self.0.read().await.status().await.map_err(|_| SessionGone)
    }

    async fn reconnect(
        &self,
        server: Option<String>,
    ) -> Result<Result<Vec<String>, String>, SessionGone> {
        self.0
            .read()
            .await
            .reconnect(server.as_deref())
            .await
            .map(Ok)
            .map_err(|_| SessionGone)
    }
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
    let mut inputs = match Inputs::with_env(&attach.options, attach.env) {
        Ok(inputs) => inputs,
        Err(e) => {
            let _ = super::reply(&mut write, &json!({ "error": format!("{e:#}") })).await;
            return;
        }
    };
    let name = registry.next_name(&attach.client, attach.pid);
    let mut session = pool.session(name.clone());
    session.set_launch(Launch {
        dir: inputs.project_dir().to_path_buf(),
        vars: launch_vars,
    });
    let (file_tx, mut file_rx) = mpsc::unbounded_channel();
    let watcher = match watcher::watch(inputs.watched(), file_tx) {
        Ok(watcher) => watcher,
        Err(e) => {
            let _ = super::reply(&mut write, &json!({ "error": format!("{e:#}") })).await;
            return;
        }
    };
    let shared = DaemonSession(Arc::new(RwLock::new(session)));
    let mut prompted = HashSet::new();
    let first_asks = apply(&shared, &mut inputs, None, &mut prompted).await;
    started(&*shared.0.read().await, pool.changes()).await;
    let (control_tx, mut control_rx) = mpsc::unbounded_channel();
    let info = SessionInfo {
        name: name.clone(),
        client: attach.client,
        pid: attach.pid,
        project_root: inputs.project_root().to_owned(),
        id: inputs.session_id(),
    };
    if super::reply(&mut write, &json!({ "ok": { "session": name } }))
        .await
        .is_err()
    {
        return;
    }
    registry.insert(Entry {
        info,
        session: shared.clone(),
        control: control_tx,
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
        hint(&client, first_asks).await;
        let waiting = service.waiting();
        tokio::pin!(waiting);
        // While a file that had content is missing, its last good content is used for
        // MISSING_GRACE; then it reads as empty (as in a session host).
        let mut missing = missing_deadline(&inputs, None);
        loop {
            let expire = async {
                match missing {
                    Some(at) => tokio::time::sleep_until(at).await,
                    None => std::future::pending().await,
                }
            };
            tokio::select! {
                _ = &mut waiting => break,
                Some(source) = file_rx.recv() => {
                    let changed = settle(&inputs, &mut file_rx, source).await;
                    let asks = apply(&shared, &mut inputs, Some(&changed), &mut prompted).await;
                    let _ = poke_tx.send(());
                    hint(&client, asks).await;
                }
                Some(control) = control_rx.recv() => match control {
                    Control::Reload(done) => {
                        let asks = apply(&shared, &mut inputs, None, &mut prompted).await;
                        let _ = poke_tx.send(());
                        let _ = done.send(());
                        hint(&client, asks).await;
                    }
                    Control::Plan(reply) => {
                        let snapshot = inputs.load(None);
                        let _ = reply.send(shared.0.read().await.plan(&snapshot));
                    }
                },
                () = expire => {
                    missing = None;
                    let (sources, _) = inputs.expire_missing();
                    let asks = apply(&shared, &mut inputs, Some(&sources), &mut prompted).await;
                    let _ = poke_tx.send(());
                    hint(&client, asks).await;
                }
            }
            missing = missing_deadline(&inputs, missing);
        }
    }
    drop(watcher);
    watcher_task.abort();
    announcer.abort();
    registry.remove(&name);
    tracing::info!(session = %name, "detached; releasing its servers");
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

/// Reloads `changed` and applies it; returns the approval requests not announced before
/// (`prompted` keeps the (name, hash) pairs that were, as a session host does).
async fn apply(
    shared: &DaemonSession,
    inputs: &mut Inputs,
    changed: Option<&[FileSource]>,
    prompted: &mut HashSet<(String, String)>,
) -> Vec<ApprovalRequest> {
    let snapshot = inputs.load(changed);
    let mut session = shared.0.write().await;
    let applied = match session.apply(&snapshot).await {
        Ok(applied) => applied,
        Err(e) => {
            tracing::warn!(session = %session.name(), "reload failed: {e}");
            return Vec::new();
        }
    };
    tracing::info!(session = %session.name(), actions = applied.plan.actions.len(), "applied");
    let servers = snapshot.assembled().servers;
    applied
        .approval_needed
        .iter()
        .filter_map(|name| servers.get(name).map(|config| (name, config)))
        .filter(|(name, config)| prompted.insert(((*name).clone(), approval_hash(config).0)))
        .map(|(name, config)| ApprovalRequest::new(&snapshot, name, config))
        .collect()
}

/// Sends each request's review and approve command to the session's client as a
/// [`HINT`] notification (the `serve` bridge prints it on stderr; it never reaches the MCP
/// client).
async fn hint(client: &Peer<RoleServer>, requests: Vec<ApprovalRequest>) {
    for request in requests {
        let text = format!("{}{}", request.review(), request.hint_line());
        let notification = CustomNotification::new(HINT, Some(json!({ "text": text })));
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

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_attach_being_set_up_counts_as_a_session() {
        let registry = Registry::default();
        let count = registry.count();
        assert_eq!(*count.borrow(), 0);
        let attaching = registry.attaching();
        assert_eq!(
            *count.borrow(),
            1,
            "the idle exit must not fire under an attach"
        );
        drop(attaching);
        assert_eq!(*count.borrow(), 0);
        assert_eq!(
            registry.ask("0123", SessionRequest::Status).await,
            json!({ "none": true })
        );
        assert_ne!(
            registry.next_name("serve", 7),
            registry.next_name("serve", 7)
        );
    }
}
