//! [`PoolSession`]: one session's use of the [`SharedPool`] — its files, gating and view — and
//! the [`Session`] a gateway fronts.

use std::collections::{BTreeMap, HashMap, HashSet};
use std::sync::Arc;

use mcp_reconcile_kernel::approvals::Approvals;
use mcp_reconcile_kernel::gating::tool_not_found;
use mcp_reconcile_kernel::hot_reload::Previous;
use mcp_reconcile_kernel::identity::ConnectionId;
use mcp_reconcile_kernel::plan::{plan, Action, Mode, Online, OnlineEntry};
use mcp_reconcile_kernel::pool::Acquire;
use mcp_reconcile_kernel::{Gating, Millis, ServerConfig, Servers, Value};

use super::actor::{HeldConn, Op, Request};
use super::{Applied, PoolError, PoolGone, SharedPool};
use crate::host::{
    adopt, CatalogMerger, MergedCatalog, PrefixOwners, Route, ServerStatus, StatusReport, Target,
};
use crate::inputs::Snapshot;
use crate::launch::Launch;
use crate::session::{Session, SessionGone};
use crate::view::{
    lists_template, own_prompt_name, own_tool_name, pick_resource, resource_match, session_view,
};

/// One session's use of the pool: its desired servers, gating and view. Dropping it releases
/// everything it holds (as [`PoolSession::close`], without waiting).
pub struct PoolSession {
    pub(super) name: String,
    pub(super) pool: SharedPool,
    pub(super) previous: Previous,
    pub(super) desired: Servers,
    pub(super) gating: Gating,
    pub(super) approvals: Approvals,
    pub(super) project_root: String,
    /// Whether the project folder was trusted at the last apply.
    pub(super) trusted: bool,
    /// What was broken in the session's inputs at the last apply.
    pub(super) errors: Vec<String>,
    /// Server → (connection id, the config it was acquired with).
    pub(super) acquired: BTreeMap<String, (ConnectionId, ServerConfig)>,
    /// The session's directory and environment, when they are not this process's.
    pub(super) launch: Option<Arc<Launch>>,
    /// Servers whose entry comes from a project-controlled layer (`.mcp.json`, workspace
    /// settings): they never capture a read a user server's template matches.
    pub(super) gated: HashSet<String>,
    pub(super) closed: bool,
}

impl std::fmt::Debug for PoolSession {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PoolSession")
            .field("name", &self.name)
            .field("acquired", &self.acquired.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl PoolSession {
    /// The session's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Starts this session's stdio servers in `launch`'s directory and environment (a daemon
    /// session's) instead of the pool process's, and shares a connection only with sessions
    /// that would start it identically ([`Launch::shared_id`]). Takes effect for the next
    /// acquires.
    pub fn set_launch(&mut self, launch: Launch) {
        self.launch = Some(Arc::new(launch));
    }

    /// The pool key of `name`'s connection `id`: the connection id itself, or with a launch
    /// context the id that also covers the directory and environment.
    fn pool_id(&self, id: &ConnectionId, config: &ServerConfig) -> ConnectionId {
        match &self.launch {
            Some(launch) => launch.shared_id(id, config),
            None => id.clone(),
        }
    }

    /// Reconciles this session with its files as loaded in `snapshot`: the kernel decides the
    /// servers and gating (approvals included), plans in pool mode, and the pool acquires and
    /// releases accordingly. Returns once the pool has taken every acquire and release
    /// (servers keep connecting in the background; see [`SharedPool::status`]).
    ///
    /// # Errors
    /// [`PoolError`].
    pub async fn apply(&mut self, snapshot: &Snapshot) -> Result<Applied, PoolError> {
        let decision = snapshot
            .hot_reload(&self.previous)
            .map_err(|e| PoolError::Plan(e.to_string()))?;
        let planned = plan(
            &decision.servers,
            &self.online(),
            &decision.gating,
            snapshot.trusted,
            Mode::Pool,
            Millis(0),
        )
        .map_err(|e| PoolError::Plan(e.to_string()))?;
        let mut ops = Vec::new();
        for action in &planned.actions {
            match action {
                Action::Disconnect { name, .. } => {
                    if let Some((id, _)) = self.acquired.remove(name) {
                        ops.push(Op::Release { id });
                    }
                }
                Action::Reconnect { name, to, .. } => {
                    let held = self.acquired.remove(name);
                    match (held, decision.servers.get(name)) {
                        (Some((from, _)), Some(config)) => ops.push(Op::Replace {
                            server: name.clone(),
                            from,
                            id: self.pool_id(to, config),
                            config: config.clone(),
                            launch: self.launch.clone(),
                            // A server that cannot run twice (a port, a lock) opts out of
                            // make before break, as in a single session.
                            stop_first: matches!(
                                config.get("stopBeforeRestart"),
                                Some(Value::Bool(true))
                            ),
                        }),
                        (Some((id, _)), None) => ops.push(Op::Release { id }),
                        (None, Some(config)) => ops.push(Op::Acquire {
                            server: name.clone(),
                            id: self.pool_id(to, config),
                            config: config.clone(),
                            launch: self.launch.clone(),
                        }),
                        (None, None) => {}
                    }
                }
                Action::Connect { name, to } => {
                    if let Some(config) = decision.servers.get(name) {
                        ops.push(Op::Acquire {
                            server: name.clone(),
                            id: self.pool_id(to, config),
                            config: config.clone(),
                            launch: self.launch.clone(),
                        });
                    }
                }
                Action::Retry { .. } | Action::Keep { .. } | Action::Skip { .. } => {}
                Action::Noop { .. } => {}
            }
        }
        let acquires: HashMap<String, (ConnectionId, ServerConfig)> = ops
            .iter()
            .filter_map(|op| match op {
                Op::Acquire {
                    server, id, config, ..
                }
                | Op::Replace {
                    server, id, config, ..
                } => Some((server.clone(), (id.clone(), config.clone()))),
                Op::Release { .. } => None,
            })
            .collect();
        let gating = decision.gating.clone();
        let session = self.name.clone();
        let results = self
            .pool
            .ask(|reply| Request::Apply {
                session,
                gating,
                ops,
                reply,
            })
            .await?;
        let mut refused = Vec::new();
        for (server, outcome) in results {
            match outcome {
                Acquire::Refused { reason } => refused.push((server, reason)),
                Acquire::Spawn | Acquire::Attach { .. } | Acquire::Unpooled { .. } => {
                    if let Some(held) = acquires.get(&server) {
                        self.acquired.insert(server, held.clone());
                    }
                }
            }
        }
        self.gated = snapshot.project_controlled();
        self.previous = adopt(&decision, &self.desired, &self.gating);
        self.desired = decision.servers;
        self.gating = decision.gating;
        self.approvals = snapshot.approvals.clone();
        self.project_root = snapshot.project_root.clone();
        self.trusted = snapshot.trusted;
        self.errors = snapshot.errors.iter().map(ToString::to_string).collect();
        Ok(Applied {
            plan: planned,
            refused,
            approval_needed: decision.promptable,
        })
    }

    /// Dry run: what [`PoolSession::apply`] of `snapshot` would do now (pool mode: `connect`
    /// acquires, `disconnect` releases), without doing it. `Err` says why the kernel could
    /// not plan.
    pub fn plan(&self, snapshot: &Snapshot) -> Result<mcp_reconcile_kernel::plan::Plan, String> {
        let servers = mcp_reconcile_kernel::assemble(&snapshot.layers).servers;
        let gating = snapshot.gating_for(&servers);
        plan(
            &servers,
            &self.online(),
            &gating,
            snapshot.trusted,
            Mode::Pool,
            Millis(0),
        )
        .map_err(|e| e.to_string())
    }

    /// What this session holds, as the kernel's plan sees it: the pool supervises and retries
    /// its connections, so to a session what it holds is always there.
    fn online(&self) -> Online {
        let mut online = Online::new();
        for (name, (_, config)) in &self.acquired {
            online.insert(name.clone(), OnlineEntry::connected(config.clone()));
        }
        online
    }

    /// The connections this session holds, in settings order, with the session's own config.
    async fn held(&self) -> Result<Vec<(String, ServerConfig, HeldConn)>, PoolGone> {
        let session = self.name.clone();
        let conns = self
            .pool
            .ask(|reply| Request::View { session, reply })
            .await?;
        let mut by_server: HashMap<String, HeldConn> =
            conns.into_iter().map(|c| (c.server.clone(), c)).collect();
        Ok(self
            .desired
            .iter()
            .filter(|(name, _)| self.acquired.contains_key(*name))
            .filter_map(|(name, config)| {
                by_server
                    .remove(name)
                    .map(|held| (name.clone(), config.clone(), held))
            })
            .collect())
    }

    /// This session's view of its connected servers: tools after its own `includeTools` /
    /// `excludeTools`, names qualified `mcp__<server>__<name>`.
    ///
    /// # Errors
    /// [`PoolGone`].
    pub async fn catalog(&self) -> Result<MergedCatalog, PoolGone> {
        let mut merger = CatalogMerger::new(PrefixOwners::admitted(&self.desired, &self.gating));
        for (name, config, held) in self.held().await? {
            if held.caller.is_some() {
                merger.add(&name, session_view(&name, &config, &held.catalog));
            }
        }
        Ok(merger.finish())
    }

    /// Where a request of this session goes; `Err` is the message for the caller (for a tool,
    /// the §4 tool-not-found message).
    ///
    /// # Errors
    /// [`PoolGone`].
    pub async fn route(&self, target: Target) -> Result<Result<Route, String>, PoolGone> {
        let owners = PrefixOwners::admitted(&self.desired, &self.gating);
        // A resource URI: every server that serves it, for [`pick_resource`].
        let mut serving = Vec::new();
        for (server, config, held) in self.held().await? {
            let Some(caller) = held.caller.filter(|_| owners.owns(&server)) else {
                continue;
            };
            let name = match &target {
                Target::Tool(name) => own_tool_name(&server, &config, &held.catalog, name),
                Target::Prompt(name) => own_prompt_name(&server, &held.catalog, name),
                Target::Resource(uri) => {
                    let matched = resource_match(&held.catalog, uri);
                    let gated = self.gated.contains(&server);
                    serving.push((matched, gated, (server, caller)));
                    continue;
                }
                Target::Template(template) => {
                    lists_template(&held.catalog, template).then(|| template.clone())
                }
            };
            if let Some(name) = name {
                return Ok(Ok(Route {
                    server,
                    name,
                    caller,
                }));
            }
        }
        let route = match &target {
            Target::Resource(uri) => pick_resource(serving).map(|(server, caller)| Route {
                server,
                name: uri.clone(),
                caller,
            }),
            _ => None,
        };
        if let Some(route) = route {
            return Ok(Ok(route));
        }
        Ok(Err(match target {
            Target::Tool(name) => {
                let removed = self.previous.removed.as_deref().unwrap_or_default();
                tool_not_found(
                    &name,
                    &self.desired,
                    &self.gating,
                    removed,
                    Some((&self.approvals, self.project_root.as_str())),
                )
                .unwrap_or_else(|| format!("Tool \"{name}\" not found"))
            }
            Target::Prompt(name) => format!("prompt \"{name}\" not found"),
            Target::Resource(uri) => format!("resource \"{uri}\" not found"),
            Target::Template(template) => format!("resource template \"{template}\" not found"),
        }))
    }

    /// Clears failure and crash-loop state of the connections this session holds for
    /// `server` (all when `None`) and restarts them now — only while this session's gating
    /// admits them, and a running one only when no other session holds it too. Returns the
    /// servers restarted.
    ///
    /// # Errors
    /// [`PoolGone`].
    pub async fn reconnect(&self, server: Option<&str>) -> Result<Vec<String>, PoolGone> {
        Ok(self.reconnect_together(&[], server).await?.restarted)
    }

    /// [`PoolSession::reconnect`] asked by this session together with the sessions `also`
    /// (the daemon's sessions of one file set): each connection any of them holds restarts
    /// once, a running one only when no session outside them holds it (else it is refused).
    ///
    /// # Errors
    /// [`PoolGone`].
    pub async fn reconnect_together(
        &self,
        also: &[String],
        server: Option<&str>,
    ) -> Result<super::Reconnected, PoolGone> {
        let mut sessions = vec![self.name.clone()];
        sessions.extend(also.iter().filter(|s| **s != self.name).cloned());
        let server = server.map(str::to_owned);
        self.pool
            .ask(|reply| Request::Reconnect {
                sessions,
                server,
                reply,
            })
            .await
    }

    /// Releases everything this session holds (pooled connections drain; private ones close).
    pub async fn close(mut self) {
        self.closed = true;
        let session = self.name.clone();
        let _ = self
            .pool
            .ask(|reply| Request::Close {
                session,
                reply: Some(reply),
            })
            .await;
    }
}

impl Drop for PoolSession {
    fn drop(&mut self) {
        if !self.closed {
            let _ = self.pool.tx.send(Request::Close {
                session: self.name.clone(),
                reply: None,
            });
        }
    }
}

impl PoolSession {
    /// Every server this session configures, in settings order: skipped ones with the policy
    /// reason, held ones as the pool's supervision sees their connection.
    ///
    /// # Errors
    /// [`PoolGone`].
    pub async fn status(&self) -> Result<StatusReport, PoolGone> {
        let pooled = self.pool.status().await?;
        let held: HashMap<String, HeldConn> = self
            .held()
            .await?
            .into_iter()
            .map(|(name, _, held)| (name, held))
            .collect();
        let owners = PrefixOwners::admitted(&self.desired, &self.gating);
        let servers = self
            .desired
            .iter()
            .map(|(name, config)| {
                let approval = config
                    .is_gated()
                    .then(|| self.approvals.state(&self.project_root, name, config));
                let mut status =
                    ServerStatus::by_policy(name, config, self.trusted, &self.gating, approval);
                if status.state == "skipped" {
                    return status;
                }
                let Some((id, _)) = self.acquired.get(name) else {
                    return status;
                };
                let Some(conn) = pooled
                    .iter()
                    .find(|c| &c.id == id && c.holders.contains(&self.name))
                else {
                    return status;
                };
                status.state = conn.state;
                status.reason = conn.reason;
                status.pid = conn.pid;
                status.spawns = conn.spawns;
                status.attempts = conn.attempts;
                status.last_error = conn.last_error.clone();
                if let Some(owner) = owners.taken_by(name) {
                    status.last_error = Some(crate::host::prefix_taken(name, owner));
                }
                if let Some(held) = held.get(name).filter(|h| h.caller.is_some()) {
                    let view = session_view(name, config, &held.catalog);
                    status.tools = view.tools.len();
                    status.prompts = view.prompts.len();
                    status.resources = view.resources.len();
                }
                status
            })
            .collect();
        Ok(StatusReport {
            servers,
            language_servers: Vec::new(),
            errors: self.errors.clone(),
        })
    }
}

impl Session for PoolSession {
    async fn catalog(&self) -> Result<MergedCatalog, SessionGone> {
        PoolSession::catalog(self)
            .await
            .map_err(|PoolGone| SessionGone)
    }

    async fn route(&self, target: Target) -> Result<Result<Route, String>, SessionGone> {
        PoolSession::route(self, target)
            .await
            .map_err(|PoolGone| SessionGone)
    }

    async fn status(&self) -> Result<StatusReport, SessionGone> {
        PoolSession::status(self)
            .await
            .map_err(|PoolGone| SessionGone)
    }

    async fn reconnect(
        &self,
        server: Option<String>,
    ) -> Result<Result<Vec<String>, String>, SessionGone> {
        let done = self
            .reconnect_together(&[], server.as_deref())
            .await
            .map_err(|PoolGone| SessionGone)?;
        Ok(match done.refusal() {
            Some(refusal) if done.restarted.is_empty() => Err(refusal),
            _ => Ok(done.restarted),
        })
    }
}
