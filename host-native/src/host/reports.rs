//! The pass in flight ([`Running`]) and its report ([`PlanReport`]); what the connections
//! report (a start ended, a crash, a `list_changed`), and the end of the pass in flight once
//! its last start ended.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use mcp_reconcile_kernel::plan::Action;
use mcp_reconcile_kernel::reload::Outcome;

use super::{Backend, Host, HostEvent, ServerStatus};
use crate::diff::FieldChange;
use crate::inputs::InputError;
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
    pub(super) fn new(action: Action, elapsed: Duration, error: Option<String>) -> Self {
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
pub(super) struct Starting {
    /// Its position in the plan.
    pub(super) index: usize,
    pub(super) action: Action,
    pub(super) generation: u64,
    pub(super) changes: Vec<FieldChange>,
    pub(super) reason: Option<String>,
    pub(super) tools_before: Option<Vec<String>>,
}

/// The run in flight: the plan and the starts still connecting.
pub(super) struct Running {
    run: u64,
    trigger: String,
    began: Instant,
    /// Finished steps with their position in the plan.
    pub(super) steps: Vec<(usize, Step)>,
    /// Starts still connecting, by server name.
    pub(super) starting: HashMap<String, Starting>,
    pub(super) rejected: Vec<String>,
    pub(super) file_missing: Vec<String>,
    failed: bool,
    scheduled: bool,
}

impl Running {
    /// Pass number `run`, triggered by `trigger` at `began`; `scheduled` when the scheduler
    /// runs it (it is told the outcome).
    pub(super) fn new(run: u64, trigger: String, began: Instant, scheduled: bool) -> Self {
        Running {
            run,
            trigger,
            began,
            steps: Vec::new(),
            starting: HashMap::new(),
            rejected: Vec::new(),
            file_missing: Vec::new(),
            failed: false,
            scheduled,
        }
    }

    /// The servers whose start in this run is still under way.
    pub(super) fn starting_servers(&self) -> impl Iterator<Item = &str> {
        self.starting.keys().map(String::as_str)
    }

    /// Whether `generation` of `server` is a start of this run still under way.
    pub(super) fn is_starting(&self, server: &str, generation: u64) -> bool {
        self.starting
            .get(server)
            .is_some_and(|s| s.generation == generation)
    }

    /// The start of `server` ended after `elapsed` (`error` when it failed); `tools` it offers
    /// now when connected, its `status` when it failed.
    pub(super) fn start_ended(
        &mut self,
        server: &str,
        elapsed: Duration,
        error: Option<String>,
        tools: Option<Vec<String>>,
        status: Option<ServerStatus>,
    ) {
        let Some(starting) = self.starting.remove(server) else {
            return;
        };
        self.failed |= error.is_some();
        let mut step = Step::new(starting.action, elapsed, error);
        step.changes = starting.changes;
        step.reason = starting.reason;
        step.tools = tools.map(|after| ToolDelta {
            before: starting.tools_before,
            after,
        });
        step.status = status;
        self.steps.push((starting.index, step));
    }

    /// Whether no start of the run is under way any more.
    pub(super) fn is_done(&self) -> bool {
        self.starting.is_empty()
    }

    /// The finished run's report, and the outcome to tell the scheduler when it scheduled it.
    pub(super) fn finish(mut self, input_errors: Vec<String>) -> (PlanReport, Option<Outcome>) {
        self.steps.sort_by_key(|(index, _)| *index);
        let outcome = match (self.scheduled, self.failed) {
            (false, _) => None,
            (true, false) => Some(Outcome::Ok),
            (true, true) => Some(Outcome::Failed),
        };
        let report = PlanReport {
            run: self.run,
            trigger: self.trigger,
            steps: self.steps.into_iter().map(|(_, step)| step).collect(),
            input_errors,
            rejected: self.rejected,
            file_missing: self.file_missing,
            elapsed: self.began.elapsed(),
        };
        (report, outcome)
    }
}

impl<B: Backend> Host<B> {
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
            self.announcer.emit(HostEvent::LspUpdate(status));
        }
    }

    /// A connection's start ended or it reported something.
    pub(super) fn handle_report(&mut self, report: Report<String>) {
        self.announcer.touch();
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
                let of_the_pass = (self.running.as_ref())
                    .is_some_and(|running| running.is_starting(&key, generation));
                let status = (current && error.is_some())
                    .then(|| self.status_of(&key))
                    .flatten();
                if !of_the_pass {
                    if let Some(status) = status {
                        self.announcer.emit(HostEvent::ClientUpdate(status));
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
                    running.start_ended(&key, elapsed, error, after, status);
                }
                self.finish_if_done();
            }
            Report::Updated(server) => {
                self.lazy_reported(&server, false);
                if let Some(status) = self.status_of(&server) {
                    self.announcer.emit(HostEvent::ClientUpdate(status));
                }
            }
            Report::Stale => {}
        }
    }

    /// The pass in flight has no start left: its report is emitted and the scheduler told.
    pub(super) fn finish_if_done(&mut self) {
        let Some(running) = self.running.take_if(|running| running.is_done()) else {
            return;
        };
        let mut input_errors: Vec<String> = (self.snapshot.as_ref())
            .map(|s| s.errors.iter().map(InputError::to_string).collect())
            .unwrap_or_default();
        input_errors.extend(self.dev_problems());
        let (report, outcome) = running.finish(input_errors);
        if let Some(outcome) = outcome {
            let now = self.now();
            self.scheduler.handle_reconcile_done(now, outcome);
        }
        self.announcer.emit(HostEvent::PlanApplied(report));
        self.announcer.touch();
        self.start_pass_finished();
    }
}
