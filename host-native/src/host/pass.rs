//! One reconcile pass of the session host: reload, decide, tear down, start; and the
//! reports of the starts it made.

use std::collections::{HashMap, HashSet};
use std::time::{Duration, Instant};

use mcp_reconcile_kernel::approval_hash;
use mcp_reconcile_kernel::approvals::ApprovalState;
use mcp_reconcile_kernel::lsp::{lsp_approval_state, LspAction, LspScope};
use mcp_reconcile_kernel::plan::{plan, Action, Status};
use mcp_reconcile_kernel::reload::{self, FileSource, Outcome};
use mcp_reconcile_kernel::restart::{decide_restart, RestartOrder, RestartRequest, RestartStep};
use mcp_reconcile_kernel::ServerConfig;

use super::blocking::off_the_loop;
use super::{adopt, Backend, Host, HostEvent, ServerStatus};
use crate::diff::{field_changes, FieldChange};
use crate::inputs::{InputError, Snapshot};
use crate::review::ApprovalRequest;
use crate::supervisor::Report;

/// One applied plan with timings.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct PlanReport {
    /// The session's pass number, from 1: scheduled and retry passes share one count.
    pub run: u64,
    /// What triggered it.
    pub trigger: String,
    /// Each action with how long executing it took and how it ended.
    pub steps: Vec<Step>,
    /// Problems with input files at the time of the pass.
    pub input_errors: Vec<String>,
    /// The gated servers whose approval was rejected at the time of the pass: the kernel's
    /// plan skips or disconnects them as `pending_approval` (it sees only the gating, SPEC §6);
    /// the lines a person reads say `rejected`.
    pub rejected: Vec<String>,
    /// The servers of settings files or `.mcp.json` that stayed missing past
    /// [`MISSING_GRACE`](crate::inputs::MISSING_GRACE): the plan disconnects them as
    /// `removed`; the lines a person reads say `file missing`.
    pub file_missing: Vec<String>,
    /// Whole pass, from the trigger to the last start finishing.
    pub elapsed: Duration,
}

/// One executed action.
#[derive(Clone, Debug, serde::Serialize, serde::Deserialize)]
pub struct Step {
    /// The kernel's action.
    pub action: Action,
    /// Time to execute it (connect: until its tools were listed).
    pub elapsed: Duration,
    /// `None` when it succeeded; the (redacted) error otherwise.
    pub error: Option<String>,
    /// For a reconnect: what changed in the entry, field by field, secrets masked.
    pub changes: Vec<FieldChange>,
    /// Why a server whose entry did not change was restarted (dev mode: `source changed:
    /// src/x.ts`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// For a start that ended connected: the tools it offers (after its filters), and those
    /// it offered before when it was connected then.
    pub tools: Option<ToolDelta>,
    /// For a start that failed: the server's status right after (attempt, when it is retried,
    /// the whole error). The host sends no [`HostEvent::ClientUpdate`] for a start a pass
    /// reports: this is where it is.
    pub status: Option<ServerStatus>,
}

impl Step {
    fn new(action: Action, elapsed: Duration, error: Option<String>) -> Self {
        Step {
            action,
            elapsed,
            error,
            changes: Vec::new(),
            reason: None,
            tools: None,
            status: None,
        }
    }
}

/// A server's tools (their own names, after `includeTools` / `excludeTools`) around a start.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ToolDelta {
    /// Before the pass, when it was connected then.
    pub before: Option<Vec<String>>,
    /// Once started.
    pub after: Vec<String>,
}

/// A start of the pass still connecting.
struct Starting {
    /// Its position in the plan.
    index: usize,
    action: Action,
    generation: u64,
    changes: Vec<FieldChange>,
    reason: Option<String>,
    tools_before: Option<Vec<String>>,
}

/// The run in flight: the plan and the starts still connecting.
pub(super) struct Running {
    run: u64,
    trigger: String,
    began: Instant,
    /// Finished steps with their position in the plan.
    steps: Vec<(usize, Step)>,
    /// Starts still connecting, by server name.
    starting: HashMap<String, Starting>,
    rejected: Vec<String>,
    file_missing: Vec<String>,
    failed: bool,
    scheduled: bool,
}

impl Running {
    /// The servers whose start in this run is still under way.
    pub(super) fn starting_servers(&self) -> impl Iterator<Item = &str> {
        self.starting.keys().map(String::as_str)
    }
}

impl<B: Backend> Host<B> {
    /// Starts the scheduler's next run when it has one and nothing is in
    /// flight.
    pub(super) fn start_next_run(&mut self) {
        if self.running.is_some() {
            return;
        }
        if let Some(reload::Step::Reconcile {
            run,
            sources,
            manual,
        }) = self.scheduler.poll_step()
        {
            let changed = if run == 1 || manual {
                None
            } else {
                Some(sources)
            };
            let trigger = match (&changed, run) {
                (_, 1) => "start".to_owned(),
                (None, _) => "manual reload".to_owned(),
                (Some(sources), _) => describe_sources(sources, |name| self.dev.shown(name)),
            };
            self.pass(changed.as_deref(), trigger, true);
        }
    }

    /// One reconcile pass: reload inputs (`None`: all, `Some(&[])`: none),
    /// decide, tear down, start.
    pub(super) fn pass(
        &mut self,
        changed: Option<&[FileSource]>,
        trigger: String,
        scheduled: bool,
    ) {
        let began = Instant::now();
        let now = self.now();
        self.passes += 1;
        let run = self.passes;
        let snapshot = off_the_loop(|| self.inputs.load(changed));
        let input_errors: Vec<String> = snapshot.errors.iter().map(InputError::to_string).collect();
        if !self.inputs.missing() {
            self.missing_deadline = None;
        } else if self.missing_deadline.is_none() {
            self.missing_deadline = Some(now.saturating_add(crate::inputs::MISSING_GRACE.0));
        }
        // A retry pass reads no file: what is broken was said when it was read.
        let read_files = changed.is_none_or(|sources| !sources.is_empty());
        if !input_errors.is_empty() && read_files {
            self.emit(HostEvent::ReloadFailed(input_errors.join("\n")));
        }
        let decision = snapshot.hot_reload(&self.previous);
        let decision = match decision {
            Ok(d) => d,
            Err(e) => {
                self.emit(HostEvent::ReloadFailed(format!(
                    "cannot compare server maps: {e}"
                )));
                if scheduled {
                    self.scheduler.handle_reconcile_done(now, Outcome::Failed);
                }
                return;
            }
        };
        let approval_needed: Vec<ApprovalRequest> = decision
            .promptable
            .iter()
            .filter_map(|n| decision.servers.get(n).map(|cfg| (n, cfg)))
            .filter(|(n, cfg)| {
                let key = ((*n).clone(), approval_hash(cfg).0);
                !self.prompted.contains(&key)
            })
            .map(|(n, cfg)| ApprovalRequest::new(&snapshot, n, cfg))
            .collect();
        self.previous = adopt(&decision, &self.desired, &self.gating);
        self.desired = decision.servers;
        self.gating = decision.gating;
        let lsp_requests = lsp_approval_requests(&snapshot, |key| self.prompted.contains(key));
        self.snapshot = Some(snapshot);
        self.adopt_lazy();
        if std::mem::take(&mut self.clear_crash_loops) {
            self.backend.forgive_all();
            self.lsp.forgive_all();
        }
        if let Some(snapshot) = &self.snapshot {
            let lsp_plan = self.lsp.reconcile(snapshot);
            let changes: Vec<LspAction> = lsp_plan
                .actions
                .into_iter()
                .filter(|a| a.applies() || matches!(a, LspAction::Disconnect { .. }))
                .collect();
            if !changes.is_empty() {
                self.emit(HostEvent::LspPlanApplied(changes));
            }
        }
        let trusted = self.snapshot.as_ref().is_some_and(|s| s.trusted);
        // Manual reconnects are inputs of the plan: forgiven as the kernel's step says, then
        // shown as disconnected, so the plan retries each with a fresh process.
        let manual: HashSet<String> = std::mem::take(&mut self.restart).into_iter().collect();
        for name in &manual {
            if self
                .restart_step(name, RestartRequest::ManualReconnect)
                .forgive
            {
                self.backend.forgive(name);
            }
        }
        let mut online = self.online();
        for name in &manual {
            if let Some(entry) = online.get_mut(name) {
                entry.status = Status::Disconnected;
            }
        }
        if self.options.full_restart && decision.reconcile {
            let names: Vec<String> = online.keys().cloned().collect();
            for name in names {
                if let Some(entry) = online.get_mut(&name) {
                    entry.status = Status::Disconnected;
                }
            }
        }
        let result = plan(
            &self.desired,
            &online,
            &self.gating,
            trusted,
            self.options.mode,
            self.now(),
        );
        let plan = match result {
            Ok(plan) => plan,
            Err(e) => {
                self.emit(HostEvent::ReloadFailed(format!("cannot plan: {e}")));
                if scheduled {
                    self.scheduler.handle_reconcile_done(now, Outcome::Failed);
                }
                return;
            }
        };
        // Dev mode: servers whose sources changed restart as if their entry had.
        let sources_changed = self.take_source_changes(changed);
        let plan = super::dev::restart(plan, &sources_changed, &self.desired);
        let share = self.snapshot.as_ref().map(|s| s.share).unwrap_or_default();
        self.backend.admit(&self.desired, &self.gating, &share);
        self.arm_dev();
        let mut running = Running {
            run,
            trigger,
            began,
            steps: Vec::new(),
            starting: HashMap::new(),
            rejected: self
                .snapshot
                .as_ref()
                .map(|s| s.rejected(&self.desired))
                .unwrap_or_default(),
            file_missing: std::mem::take(&mut self.file_missing),
            failed: false,
            scheduled,
        };
        // What the servers about to start offer now, before a teardown purges it.
        let mut tools_before: HashMap<String, Vec<String>> = plan
            .actions
            .iter()
            .filter(|a| a.starts())
            .filter_map(Action::name)
            .filter_map(|name| Some((name.to_owned(), self.server_tool_names(name)?)))
            .collect();
        // Teardowns first (the plan lists them first): purge the server's
        // catalog at once, stop its connection in the background.
        for (index, action) in plan.actions.into_iter().enumerate() {
            if self.left_dormant(&action) {
                continue;
            }
            let t = Instant::now();
            let step = super::restart::request(&action, &manual, &sources_changed)
                .map(|(name, request)| (name, self.restart_step(name, request)));
            let mut replace = false;
            match (&action, step) {
                (Action::Disconnect { name, .. }, _) => self.teardown(name, true),
                (_, Some((name, step))) => {
                    if step.forgive {
                        self.backend.forgive(name);
                    }
                    match step.order {
                        // The running connection serves until the new one is up.
                        RestartOrder::MakeBeforeBreak => replace = true,
                        RestartOrder::StopFirst => self.teardown(name, false),
                    }
                }
                _ => {}
            }
            match action.name().filter(|_| action.starts()) {
                Some(name) => {
                    let name = name.to_owned();
                    let changes = match (&action, online.get(&name), self.desired.get(&name)) {
                        (Action::Reconnect { changed, .. }, Some(live), Some(wanted)) => {
                            field_changes(&live.config, wanted, changed)
                        }
                        _ => Vec::new(),
                    };
                    let tools_before = tools_before.remove(&name);
                    let reason = match &action {
                        Action::Reconnect { changed, .. } if changed.is_empty() => sources_changed
                            .iter()
                            .find(|(server, _)| *server == name)
                            .map(|(_, path)| format!("source changed: {path}")),
                        _ => None,
                    };
                    let to = match &action {
                        Action::Connect { to, .. } | Action::Reconnect { to, .. } => Some(to),
                        _ => None,
                    };
                    match self.spawn_start(&name, to, replace) {
                        Some(generation) => {
                            let starting = Starting {
                                index,
                                action,
                                generation,
                                changes,
                                reason,
                                tools_before,
                            };
                            running.starting.insert(name, starting);
                        }
                        None => {
                            let error = format!("server \"{name}\" is not configured");
                            let step = Step::new(action, t.elapsed(), Some(error));
                            running.steps.push((index, step));
                        }
                    }
                }
                None => running
                    .steps
                    .push((index, Step::new(action, t.elapsed(), None))),
            }
        }
        self.running = Some(running);
        let mut approval_needed = if decision.approval_event {
            approval_needed
        } else {
            Vec::new()
        };
        approval_needed.extend(lsp_requests);
        if !approval_needed.is_empty() {
            self.prompted.extend(
                approval_needed
                    .iter()
                    .map(|r| (r.name.clone(), r.hash.clone())),
            );
            self.emit(HostEvent::ApprovalNeeded(approval_needed));
        }
        self.finish_if_done();
    }

    /// Removes a server's catalog and stops its connection in the
    /// background. `forget` drops its entry (disconnect) instead of
    /// keeping its failure counters (reconnect, retry).
    pub(super) fn teardown(&mut self, name: &str, forget: bool) {
        self.catalog_dirty = true;
        self.backend.stop(name, forget);
    }

    /// Starts `name` from its desired config (connection id `to`) — with `replace`, before
    /// stopping what runs (make before break); its generation, or `None` when it is not
    /// configured.
    fn spawn_start(
        &mut self,
        name: &str,
        to: Option<&mcp_reconcile_kernel::identity::ConnectionId>,
        replace: bool,
    ) -> Option<u64> {
        let config = self.desired.get(name)?;
        Some(self.backend.start(name, config, to, replace))
    }

    /// How `name` is started again for `request`: the kernel's [`decide_restart`], from its
    /// desired entry (`stopBeforeRestart`) and the session's `--full-restart`.
    fn restart_step(&self, name: &str, request: RestartRequest) -> RestartStep {
        let entry = self.desired.get(name).map(ServerConfig::object);
        decide_restart(request, entry, self.options.full_restart)
    }

    /// A language server failed to start, crashed or otherwise changed outside a pass.
    pub(super) fn handle_lsp_report(&mut self, report: Report<String>) {
        let name = match report {
            Report::Started {
                key,
                current: true,
                error: Some(_),
                ..
            }
            | Report::Updated(key) => key,
            Report::Started { .. } | Report::Stale => return,
        };
        if let Some(status) = self.lsp.status().into_iter().find(|s| s.name == name) {
            self.emit(HostEvent::LspUpdate(status));
        }
    }

    /// A connection's start ended or it reported something.
    pub(super) fn handle_report(&mut self, report: Report<String>) {
        self.catalog_dirty = true;
        match report {
            Report::Started {
                key,
                generation,
                elapsed,
                current,
                error,
            } => {
                if current {
                    self.lazy_reported(&key, true);
                }
                let of_the_pass = self.running.as_ref().is_some_and(|running| {
                    running
                        .starting
                        .get(&key)
                        .is_some_and(|s| s.generation == generation)
                });
                let status = (current && error.is_some())
                    .then(|| self.status_of(&key))
                    .flatten();
                if !of_the_pass {
                    if let Some(status) = status {
                        self.emit(HostEvent::ClientUpdate(status));
                    }
                    self.finish_if_done();
                    return;
                }
                let after = if error.is_none() {
                    self.server_tool_names(&key)
                } else {
                    None
                };
                if let Some(running) = self.running.as_mut() {
                    if let Some(starting) = running.starting.remove(&key) {
                        running.failed |= error.is_some();
                        let mut step = Step::new(starting.action, elapsed, error);
                        step.changes = starting.changes;
                        step.reason = starting.reason;
                        step.tools = after.map(|after| ToolDelta {
                            before: starting.tools_before,
                            after,
                        });
                        step.status = status;
                        running.steps.push((starting.index, step));
                    }
                }
                self.finish_if_done();
            }
            Report::Updated(server) => {
                self.lazy_reported(&server, false);
                if let Some(status) = self.status_of(&server) {
                    self.emit(HostEvent::ClientUpdate(status));
                }
            }
            Report::Stale => {}
        }
    }

    fn finish_if_done(&mut self) {
        let done = self.running.as_ref().is_some_and(|r| r.starting.is_empty());
        if !done {
            return;
        }
        let Some(mut running) = self.running.take() else {
            return;
        };
        running.steps.sort_by_key(|(index, _)| *index);
        let now = self.now();
        if running.scheduled {
            let outcome = if running.failed {
                Outcome::Failed
            } else {
                Outcome::Ok
            };
            self.scheduler.handle_reconcile_done(now, outcome);
        }
        let mut input_errors: Vec<String> = self
            .snapshot
            .as_ref()
            .map(|s| s.errors.iter().map(InputError::to_string).collect())
            .unwrap_or_default();
        input_errors.extend(self.dev_problems());
        let report = PlanReport {
            run: running.run,
            trigger: running.trigger,
            steps: running.steps.into_iter().map(|(_, step)| step).collect(),
            input_errors,
            rejected: running.rejected,
            file_missing: running.file_missing,
            elapsed: running.began.elapsed(),
        };
        self.emit(HostEvent::PlanApplied(report));
        self.catalog_dirty = true;
        if !self.started {
            self.started = true;
            self.answer_startup_waiters();
        }
    }
}

/// The project language servers of `snapshot` waiting for a decision for their current entry
/// that were not announced yet (`prompted` says which (name, hash) pairs were).
pub(crate) fn lsp_approval_requests(
    snapshot: &Snapshot,
    prompted: impl Fn(&(String, String)) -> bool,
) -> Vec<ApprovalRequest> {
    if !snapshot.trusted {
        return Vec::new();
    }
    snapshot
        .lsp
        .iter()
        .filter(|(_, entry)| entry.scope == LspScope::Project)
        .filter(|(name, entry)| {
            lsp_approval_state(
                &snapshot.lsp_approvals,
                &snapshot.project_root,
                name,
                &entry.config,
            ) == ApprovalState::Pending
        })
        .filter_map(|(name, _)| ApprovalRequest::language_server(snapshot, name))
        .filter(|r| !prompted(&(r.name.clone(), r.hash.clone())))
        .collect()
}

/// A run's trigger: `change in user settings, .mcp.json`, `source changed: src/x.ts` (dev mode:
/// `shown` gives the first path that changed for a server), or both.
fn describe_sources<'a>(
    sources: &'a [FileSource],
    shown: impl Fn(&str) -> Option<&'a str>,
) -> String {
    if sources.is_empty() {
        return "reload".into();
    }
    let mut names: Vec<String> = Vec::new();
    let mut paths: Vec<&str> = Vec::new();
    for source in sources {
        let name = match source {
            FileSource::Settings(id) => format!("{id} settings"),
            FileSource::McpJson => ".mcp.json".to_owned(),
            FileSource::Approvals => "approvals".to_owned(),
            FileSource::McpConfig(id) => format!("--mcp-config {id}"),
            FileSource::LspFile(scope) if scope == "project" => ".lsp.json".to_owned(),
            FileSource::LspFile(scope) => format!("{scope} language servers"),
            FileSource::LspApprovals => "language-server approvals".to_owned(),
            FileSource::DevWatch(server) => {
                paths.push(shown(server).unwrap_or(server));
                continue;
            }
        };
        names.push(name);
    }
    match (names.is_empty(), paths.is_empty()) {
        (false, true) => format!("change in {}", names.join(", ")),
        (true, false) => format!("source changed: {}", paths.join(", ")),
        _ => format!(
            "change in {}; source changed: {}",
            names.join(", "),
            paths.join(", ")
        ),
    }
}
