//! The session's language servers (SPEC §14): the kernel's `lspPlan` from the desired entries
//! and what runs, executed on a supervisor of their own. Seed edits restart a server, live
//! edits are pushed to it (`workspace/didChangeConfiguration`), and a project entry runs only
//! while approved for exactly its current config.

use std::collections::HashMap;
use std::path::PathBuf;

use mcp_reconcile_kernel::approvals::{ApprovalState, Approvals};
use mcp_reconcile_kernel::json::{Object, Value};
use mcp_reconcile_kernel::lsp::{
    lsp_approval_state, lsp_plan, LspAction, LspPlan, LspPlanContext, LspScope, LspServers,
};
use mcp_reconcile_kernel::plan::{Online, OnlineEntry};
use mcp_reconcile_kernel::restart::{decide_restart, RestartOrder, RestartRequest};
use mcp_reconcile_kernel::supervise::RestartLimit;
use mcp_reconcile_kernel::{Reason, ServerConfig};

use super::{LspServerStatus, State};
use crate::clock::Clock;
use crate::inputs::Snapshot;
use crate::lsp::kind::Lsp;
use crate::lsp::tools::{LspRoute, LspUnavailable};
use crate::supervisor::{Entry, Report, Supervisor};

/// The language servers of one session.
pub(crate) struct LanguageServers {
    supervisor: Supervisor<String, Lsp>,
    /// Documents a replaced process had open, opened again on its successor once it runs
    /// (SPEC §14.4).
    reopen: HashMap<String, Vec<(PathBuf, String)>>,
    desired: LspServers,
    approvals: Approvals,
    project_root: String,
    trusted: bool,
}

impl LanguageServers {
    /// Language servers of the project at `project_dir`, spawned in `launch` (a daemon
    /// session's environment) or this process's.
    pub(crate) fn new(
        project_dir: PathBuf,
        launch: Option<std::sync::Arc<crate::launch::Launch>>,
        parallelism: usize,
        clock: Clock,
    ) -> Self {
        let kind = Lsp {
            project_dir,
            launch,
        };
        LanguageServers {
            supervisor: Supervisor::new(kind, parallelism, clock),
            reopen: HashMap::new(),
            desired: LspServers::new(),
            approvals: Approvals::empty(),
            project_root: String::new(),
            trusted: true,
        }
    }

    /// Adopts the snapshot's language servers and approvals without starting anything.
    pub(crate) fn adopt(&mut self, snapshot: &Snapshot) {
        self.desired = snapshot.lsp.clone();
        self.approvals = snapshot.lsp_approvals.clone();
        self.project_root = snapshot.project_root.clone();
        self.trusted = snapshot.trusted;
    }

    /// Adopts `snapshot` and executes the kernel's plan for it; returns the plan.
    pub(crate) fn reconcile(&mut self, snapshot: &Snapshot) -> LspPlan {
        self.adopt(snapshot);
        let plan = self.plan();
        for action in &plan.actions {
            match action {
                LspAction::Disconnect { name, .. } => {
                    self.reopen.remove(name);
                    self.supervisor.remove(name);
                }
                LspAction::Restart { name, .. } => {
                    self.restart(name, RestartRequest::LspSeedChanged)
                }
                LspAction::Retry { name, .. } => self.restart(name, RestartRequest::RetryDue),
                LspAction::Connect { name, .. } => self.start(name, false),
                LspAction::Reconfigure { name, .. } => self.reconfigure(name),
                LspAction::Keep { .. } | LspAction::Skip { .. } | LspAction::Noop { .. } => {}
            }
        }
        plan
    }

    /// What a reconcile would do now.
    pub(crate) fn plan(&self) -> LspPlan {
        let context = LspPlanContext {
            approvals: &self.approvals,
            project_root: &self.project_root,
            trusted_folder: self.trusted,
            now: self.supervisor.clock().now(),
        };
        lsp_plan(&self.desired, &self.online(), context)
    }

    /// Whether a failed server may not be started again (`restartOnCrash: false`, or
    /// `maxRestarts` failures in a row): such a server shows and plans as `crash_loop`. The
    /// rule is the kernel's [`RestartLimit`], as in the TypeScript executor.
    fn exhausted(entry: &Entry<Lsp>) -> bool {
        RestartLimit::of_entry(&entry.config).exhausted(entry.health())
    }

    /// The kernel's view of what runs.
    fn online(&self) -> Online {
        self.supervisor
            .entries()
            .map(|(name, entry)| {
                let health = entry.health();
                (
                    name.clone(),
                    OnlineEntry {
                        config: ServerConfig::new(entry.config.clone()),
                        status: health.status,
                        attempts: health.attempts,
                        retry_at: health.retry_at,
                        crash_loop: health.crash_loop || Self::exhausted(entry),
                        needs_auth: false,
                    },
                )
            })
            .collect()
    }

    /// Starts `name` again as the kernel's [`decide_restart`] says for `request` (a new seed
    /// is a new server: it starts with a clean record; a retry keeps its failures).
    fn restart(&mut self, name: &str, request: RestartRequest) {
        let entry = self.desired.get(name).map(|entry| &entry.config);
        let step = decide_restart(request, entry, false);
        if step.forgive {
            self.supervisor.forgive(&name.to_owned());
        }
        self.start(name, step.order == RestartOrder::MakeBeforeBreak);
    }

    /// Starts `name` from its desired entry — a running process of it is stopped first, or
    /// with `replace` once the new one is up; the documents it had open are opened on the new
    /// one.
    fn start(&mut self, name: &str, replace: bool) {
        let key = name.to_owned();
        if let Some(live) = self.supervisor.get(&key).and_then(Entry::live) {
            let documents = live.handle().open_documents();
            if !documents.is_empty() {
                self.reopen.insert(key, documents);
            }
        }
        if let Some(entry) = self.desired.get(name) {
            let config = entry.config.clone();
            let (key, name) = (name.to_owned(), name.to_owned());
            if replace {
                self.supervisor.replace(key, name, config);
            } else {
                self.supervisor.start(key, name, config);
            }
        }
    }

    /// Applies `name`'s new live fields: pushes the full new `settings` to the running server
    /// (routing and policy take effect at once). A server still starting is started again
    /// with them, so it never comes up with the old settings.
    fn reconfigure(&mut self, name: &str) {
        let Some(entry) = self.desired.get(name) else {
            return;
        };
        let config = entry.config.clone();
        let live = self.supervisor.get(&name.to_owned()).and_then(Entry::live);
        match live {
            Some(connection) => {
                let settings = match config.get("settings") {
                    Some(value @ Value::Object(_)) => to_serde(value),
                    _ => serde_json::Value::Object(serde_json::Map::new()),
                };
                if let Err(e) = connection.reconfigure(settings) {
                    tracing::warn!(server = %crate::display::safe(name), "pushing settings failed: {e}");
                }
                self.supervisor.set_config(&name.to_owned(), config);
            }
            None => self.start(name, false),
        }
    }

    /// Parks servers whose policy forbids another start, so no timer retries them.
    fn park_exhausted(&mut self) {
        let exhausted: Vec<String> = self
            .supervisor
            .entries()
            .filter(|(_, entry)| Self::exhausted(entry))
            .map(|(name, _)| name.clone())
            .collect();
        for name in exhausted {
            self.supervisor.park(&name);
        }
    }

    /// The next start or event; see [`Supervisor::next`].
    pub(crate) async fn next(&mut self) -> Report<String> {
        let report = self.supervisor.next().await;
        self.park_exhausted();
        if let Report::Started {
            key,
            current: true,
            error: None,
            ..
        } = &report
        {
            self.reopen_documents(key);
        }
        report
    }

    /// Opens the documents `name`'s previous process had open on the one that now runs (from
    /// disk, as they are now).
    fn reopen_documents(&mut self, name: &String) {
        let Some(documents) = self.reopen.remove(name) else {
            return;
        };
        let Some(live) = self.supervisor.get(name).and_then(Entry::live) else {
            return;
        };
        let handle = live.handle();
        for (path, language_id) in documents {
            if let Err(e) = handle.open_document(&path, &language_id) {
                tracing::debug!("reopening {} failed: {e}", path.display());
            }
        }
    }

    /// When the next retry is due.
    pub(crate) fn next_retry(&self) -> Option<mcp_reconcile_kernel::Millis> {
        self.supervisor.next_retry()
    }

    /// Whether a retry is due now.
    pub(crate) fn retry_due(&self) -> bool {
        !self.supervisor.due().is_empty()
    }

    /// Clears every server's failure state (`reload`).
    pub(crate) fn forgive_all(&mut self) {
        self.supervisor.forgive_all();
    }

    /// Every configured language server, in map order.
    pub(crate) fn status(&self) -> Vec<LspServerStatus> {
        self.desired
            .iter()
            .map(|(name, entry)| self.status_of(name, &entry.config, entry.scope))
            .collect()
    }

    fn status_of(&self, name: &str, config: &Object, scope: LspScope) -> LspServerStatus {
        let key = name.to_owned();
        let approval = (scope == LspScope::Project)
            .then(|| lsp_approval_state(&self.approvals, &self.project_root, name, config));
        let extensions = match config.get("extensionToLanguage") {
            Some(Value::Object(map)) => map.keys().cloned().collect(),
            _ => Vec::new(),
        };
        let mut status = LspServerStatus {
            name: name.to_owned(),
            state: State::Disconnected,
            reason: None,
            approval,
            pid: None,
            spawns: self.supervisor.spawns(&key),
            attempts: 0,
            last_error: None,
            retry_in_ms: None,
            extensions,
            settings_pushes: 0,
        };
        let running = self.supervisor.get(&key);
        if !self.trusted {
            status.state = State::Skipped;
            status.reason = Some(Reason::UntrustedFolder);
            return status;
        }
        match approval {
            Some(ApprovalState::Rejected) => {
                status.state = State::Skipped;
                status.reason = Some(Reason::Rejected);
                return status;
            }
            // An edit waiting for approval: the last approved config may still run.
            Some(ApprovalState::Pending) => {
                status.reason = Some(Reason::PendingApproval);
                if running.is_none() {
                    status.state = State::Skipped;
                    return status;
                }
            }
            _ => {}
        }
        let (Some(entry), Some(view)) = (running, self.supervisor.view(&key)) else {
            return status;
        };
        status.state = view.state.into();
        status.reason = status.reason.or(view.reason);
        status.attempts = view.attempts;
        status.last_error = view.last_error;
        status.retry_in_ms = view.retry_in_ms;
        if Self::exhausted(entry) {
            status.reason = Some(Reason::CrashLoop);
            status.retry_in_ms = None;
        }
        if let Some(connection) = entry.live() {
            status.pid = entry.pid();
            status.settings_pushes = connection.settings_pushes();
        }
        status
    }

    /// Whether any language server is configured (the language tools are offered then).
    pub(crate) fn any_configured(&self) -> bool {
        self.trusted && !self.desired.is_empty()
    }

    /// The running server for files with `extension` (`.json`), or why there is none: no
    /// server routes it, its server waits for approval or was rejected, or it is not running
    /// (with its last error).
    pub(crate) fn route(&self, extension: &str) -> Result<LspRoute, LspUnavailable> {
        let routes = |config: &Object| match config.get("extensionToLanguage") {
            Some(Value::Object(map)) => map
                .get(extension)
                .and_then(Value::as_str)
                .map(str::to_owned),
            _ => None,
        };
        let mut why = None;
        for (name, entry) in &self.desired {
            let Some(language_id) = routes(&entry.config) else {
                continue;
            };
            let key = name.clone();
            let running = self.supervisor.get(&key);
            // The approved config may still run while an edit waits; route to what runs.
            if let Some(connection) = running.and_then(Entry::live) {
                let language_id = running
                    .and_then(|e| routes(&e.config))
                    .unwrap_or(language_id);
                return Ok(LspRoute {
                    server: name.clone(),
                    handle: connection.handle(),
                    language_id,
                    project_root: PathBuf::from(&self.project_root),
                });
            }
            let status = self.status_of(name, &entry.config, entry.scope);
            let safe = crate::display::safe(name);
            let starting = status.state == State::Connecting;
            let message = match (status.reason, status.last_error) {
                (Some(Reason::PendingApproval), _) => format!(
                    "language server \"{safe}\" (for {extension} files) is waiting for approval: run `{}`",
                    crate::display::decide_command("approve --lsp", name)
                ),
                (Some(Reason::Rejected), _) => format!(
                    "language server \"{safe}\" (for {extension} files) was rejected; approve it with `{}`",
                    crate::display::decide_command("approve --lsp", name)
                ),
                (_, Some(error)) => format!(
                    "language server \"{safe}\" (for {extension} files) is {}: {error}",
                    status.state
                ),
                _ => format!(
                    "language server \"{safe}\" (for {extension} files) is {}; try again in a moment",
                    status.state
                ),
            };
            why.get_or_insert(LspUnavailable { message, starting });
        }
        Err(why.unwrap_or_else(|| {
            LspUnavailable::because(format!(
                "no language server handles {extension} files; add one to .lsp.json with \"extensionToLanguage\": {{\"{extension}\": \"<language id>\"}}"
            ))
        }))
    }

    /// Stops every language server; returns when all are stopped.
    pub(crate) async fn shutdown(self) {
        self.supervisor.shutdown().await;
    }
}

/// A kernel JSON value as `serde_json` holds it.
fn to_serde(value: &Value) -> serde_json::Value {
    serde_json::from_str(&value.to_json()).unwrap_or(serde_json::Value::Null)
}
