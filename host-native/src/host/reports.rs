//! What the connections report (a start ended, a crash, a `list_changed`), and the end of the
//! pass in flight once its last start ended.

use super::{Backend, Host, HostEvent};
use crate::inputs::InputError;
use crate::supervisor::Report;

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
