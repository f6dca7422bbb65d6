//! One reconcile pass of the session host: reload, decide, tear down, start; and the
//! reports of the starts it made.

use std::collections::{HashMap, HashSet};
use std::time::Instant;

use mcp_reconcile_kernel::approval_hash;
use mcp_reconcile_kernel::approvals::ApprovalState;
use mcp_reconcile_kernel::hot_reload::HotReload;
use mcp_reconcile_kernel::lsp::{lsp_approval_state, LspAction, LspScope};
use mcp_reconcile_kernel::plan::{plan, Action, Online, Plan, Status};
use mcp_reconcile_kernel::reload::{self, FileSource, Outcome};
use mcp_reconcile_kernel::restart::{decide_restart, RestartOrder, RestartRequest, RestartStep};
use mcp_reconcile_kernel::ServerConfig;

use super::blocking::off_the_loop;
use super::reports::{Running, Starting, Step};
use super::{adopt, Backend, Host, HostEvent};
use crate::diff::{field_changes, FieldChange};
use crate::inputs::{InputError, Snapshot};
use crate::review::ApprovalRequest;

/// What the pass read: the snapshot and the kernel's hot-reload decision on it.
struct Read {
    snapshot: Snapshot,
    decision: HotReload,
}

/// What the pass decided: the plan, the live state it was made from, and the restarts it
/// carries out (manual reconnects, dev-mode source changes).
struct Decided {
    plan: Plan,
    online: Online,
    manual: HashSet<String>,
    sources_changed: Vec<(String, String)>,
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

    /// One reconcile pass: read the inputs (`None`: all, `Some(&[])`: none), adopt what the
    /// kernel made of them, reconcile the language servers, decide the plan, carry it out
    /// (tear down, start), then report (now, or when the last start ends).
    pub(super) fn pass(
        &mut self,
        changed: Option<&[FileSource]>,
        trigger: String,
        scheduled: bool,
    ) {
        let began = Instant::now();
        self.passes += 1;
        let Some(read) = self.read_inputs(changed, scheduled) else {
            return;
        };
        let reconcile = read.decision.reconcile;
        let approvals = self.adopt_read(read);
        self.reconcile_language_servers();
        let Some(decided) = self.decide(changed, reconcile, scheduled) else {
            return;
        };
        let mut running = Running::new(self.passes, trigger, began, scheduled);
        running.rejected = (self.snapshot.as_ref())
            .map(|s| s.rejected(&self.desired))
            .unwrap_or_default();
        running.file_missing = self.missing.take_servers();
        self.running = Some(self.carry_out(decided, running));
        self.announcer.ask_approval(approvals);
        // Stage 6, report: now when the pass started nothing, else once its last start ended
        // (`reports`).
        self.finish_if_done();
    }

    /// Stage 1, read: loads the changed inputs and asks the kernel what changed
    /// ([`hot_reload`](mcp_reconcile_kernel::hot_reload::hot_reload)); says what is broken.
    /// `None` when the server maps cannot be compared (the pass ends there).
    fn read_inputs(&mut self, changed: Option<&[FileSource]>, scheduled: bool) -> Option<Read> {
        let snapshot = off_the_loop(|| self.inputs.load(changed));
        let input_errors: Vec<String> = snapshot.errors.iter().map(InputError::to_string).collect();
        let now = self.now();
        self.missing.track(self.inputs.missing(), now);
        // A retry pass reads no file: what is broken was said when it was read.
        let read_files = changed.is_none_or(|sources| !sources.is_empty());
        if !input_errors.is_empty() && read_files {
            let message = input_errors.join("\n");
            self.announcer.emit(HostEvent::ReloadFailed(message));
        }
        match snapshot.hot_reload(&self.previous) {
            Ok(decision) => Some(Read { snapshot, decision }),
            Err(e) => {
                self.pass_failed(format!("cannot compare server maps: {e}"), scheduled);
                None
            }
        }
    }

    /// Stage 2, adopt: the decision's servers and gating become the session's; the approval
    /// requests it raises (MCP and language servers) not announced yet are returned.
    fn adopt_read(&mut self, read: Read) -> Vec<ApprovalRequest> {
        let Read { snapshot, decision } = read;
        let mut approvals: Vec<ApprovalRequest> = Vec::new();
        if decision.approval_event {
            approvals = (decision.promptable.iter())
                .filter_map(|n| decision.servers.get(n).map(|cfg| (n, cfg)))
                .filter(|(n, cfg)| {
                    !self
                        .announcer
                        .prompted(&((*n).clone(), approval_hash(cfg).0))
                })
                .map(|(n, cfg)| ApprovalRequest::new(&snapshot, n, cfg))
                .collect();
        }
        self.previous = adopt(&decision, &self.desired, &self.gating);
        self.desired = decision.servers;
        self.gating = decision.gating;
        approvals.extend(lsp_approval_requests(&snapshot, |key| {
            self.announcer.prompted(key)
        }));
        self.snapshot = Some(snapshot);
        self.adopt_lazy();
        approvals
    }

    /// Stage 3, language servers: a reload's crash-loop clearing, then their own plan (SPEC
    /// §14.2), announced when it changes any.
    fn reconcile_language_servers(&mut self) {
        if self.restarts.take_clear_crash_loops() {
            self.backend.forgive_all();
            self.lsp.forgive_all();
        }
        let Some(snapshot) = &self.snapshot else {
            return;
        };
        let changes: Vec<LspAction> = (self.lsp.reconcile(snapshot).actions.into_iter())
            .filter(|a| a.applies() || matches!(a, LspAction::Disconnect { .. }))
            .collect();
        if !changes.is_empty() {
            self.announcer.emit(HostEvent::LspPlanApplied(changes));
        }
    }

    /// Stage 4, decide: the kernel's plan from the desired servers and the live state, with
    /// the manual reconnects and (dev mode) the source changes as restarts. `None` when the
    /// kernel cannot plan (the pass ends there).
    fn decide(
        &mut self,
        changed: Option<&[FileSource]>,
        reconcile: bool,
        scheduled: bool,
    ) -> Option<Decided> {
        let trusted = self.snapshot.as_ref().is_some_and(|s| s.trusted);
        let manual = self.restarts.take_manual();
        let online = self.online_for_plan(&manual, reconcile);
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
                self.pass_failed(format!("cannot plan: {e}"), scheduled);
                return None;
            }
        };
        // Dev mode: servers whose sources changed restart as if their entry had.
        let sources_changed = self.take_source_changes(changed);
        let plan = super::dev::restart(plan, &sources_changed, &self.desired);
        Some(Decided {
            plan,
            online,
            manual,
            sources_changed,
        })
    }

    /// The live state the plan is made from. Manual reconnects are inputs of the plan:
    /// forgiven as the kernel's step says, then shown as disconnected, so the plan retries
    /// each with a fresh process; `--full-restart` shows every server so on any relevant change.
    fn online_for_plan(&mut self, manual: &HashSet<String>, reconcile: bool) -> Online {
        for name in manual {
            if (self.restart_step(name, RestartRequest::ManualReconnect)).forgive {
                self.backend.forgive(name);
            }
        }
        let mut online = self.online();
        let full = self.options.full_restart && reconcile;
        let restarted: Vec<String> = (online.keys())
            .filter(|name| full || manual.contains(*name))
            .cloned()
            .collect();
        for name in restarted {
            if let Some(entry) = online.get_mut(&name) {
                entry.status = Status::Disconnected;
            }
        }
        online
    }

    /// Stage 5, carry out: admits the servers to the backend, arms dev watches, then each
    /// action in plan order — teardowns first (the plan lists them first: purge the server's
    /// catalog at once, stop its connection in the background), then the starts.
    fn carry_out(&mut self, decided: Decided, mut running: Running) -> Running {
        let share = self.snapshot.as_ref().map(|s| s.share).unwrap_or_default();
        self.backend.admit(&self.desired, &self.gating, &share);
        self.arm_dev();
        // What the servers about to start offer now, before a teardown purges it.
        let mut tools_before: HashMap<String, Vec<String>> = (decided.plan.actions.iter())
            .filter(|a| a.starts())
            .filter_map(Action::name)
            .filter_map(|name| Some((name.to_owned(), self.server_tool_names(name)?)))
            .collect();
        for (index, action) in decided.plan.actions.iter().cloned().enumerate() {
            if self.left_dormant(&action) {
                continue;
            }
            let t = Instant::now();
            let replace = self.stop_for(&action, &decided);
            let Some(name) = action.name().filter(|_| action.starts()).map(str::to_owned) else {
                running
                    .steps
                    .push((index, Step::new(action, t.elapsed(), None)));
                continue;
            };
            let to = match &action {
                Action::Connect { to, .. } | Action::Reconnect { to, .. } => Some(to.clone()),
                _ => None,
            };
            let Some(generation) = self.spawn_start(&name, to.as_ref(), replace) else {
                let error = format!("server \"{name}\" is not configured");
                let step = Step::new(action, t.elapsed(), Some(error));
                running.steps.push((index, step));
                continue;
            };
            let starting = Starting {
                index,
                changes: self.changes_of(&action, &decided.online),
                reason: restart_reason(&action, &decided.sources_changed),
                tools_before: tools_before.remove(&name),
                action,
                generation,
            };
            running.starting.insert(name, starting);
        }
        running
    }

    /// What `action` stops before it starts anything: a disconnect's server (forgotten); a
    /// restart's as the kernel's step says (forgiven or not). Whether the start replaces a
    /// connection still serving (make before break).
    fn stop_for(&mut self, action: &Action, decided: &Decided) -> bool {
        if let Action::Disconnect { name, .. } = action {
            self.teardown(name, true);
            return false;
        }
        let Some((name, request)) =
            super::restart::request(action, &decided.manual, &decided.sources_changed)
        else {
            return false;
        };
        let step = self.restart_step(name, request);
        if step.forgive {
            self.backend.forgive(name);
        }
        match step.order {
            // The running connection serves until the new one is up.
            RestartOrder::MakeBeforeBreak => true,
            RestartOrder::StopFirst => {
                self.teardown(name, false);
                false
            }
        }
    }

    /// For a reconnect: what changed in the entry, field by field, secrets masked.
    fn changes_of(&self, action: &Action, online: &Online) -> Vec<FieldChange> {
        let Action::Reconnect { name, changed, .. } = action else {
            return Vec::new();
        };
        match (online.get(name), self.desired.get(name)) {
            (Some(live), Some(wanted)) => field_changes(&live.config, wanted, changed),
            _ => Vec::new(),
        }
    }

    /// A pass ends without a plan: says why, and tells the scheduler when it scheduled it.
    fn pass_failed(&mut self, message: String, scheduled: bool) {
        self.announcer.emit(HostEvent::ReloadFailed(message));
        if scheduled {
            let now = self.now();
            self.scheduler.handle_reconcile_done(now, Outcome::Failed);
        }
    }

    /// Removes a server's catalog and stops its connection in the
    /// background. `forget` drops its entry (disconnect) instead of
    /// keeping its failure counters (reconnect, retry).
    pub(super) fn teardown(&mut self, name: &str, forget: bool) {
        self.announcer.touch();
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
}

/// Why a server whose entry did not change is restarted (dev mode: `source changed: src/x.ts`).
fn restart_reason(action: &Action, sources_changed: &[(String, String)]) -> Option<String> {
    let Action::Reconnect { name, changed, .. } = action else {
        return None;
    };
    if !changed.is_empty() {
        return None;
    }
    (sources_changed.iter())
        .find(|(server, _)| server == name)
        .map(|(_, path)| format!("source changed: {path}"))
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
            FileSource::Pins => "pinned tools".to_owned(),
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
