//! The missing-file grace: a settings file or `.mcp.json` that went missing (an editor's
//! delete-and-recreate save, a `git checkout`) is held for
//! [`MISSING_GRACE`](crate::inputs::MISSING_GRACE) before its servers are stopped.

use mcp_reconcile_kernel::Millis;

use super::{Backend, Host};

/// When the held missing files are given up, and the servers of those given up.
#[derive(Default)]
pub(super) struct MissingFiles {
    /// When the files that went missing and are still held are given up.
    deadline: Option<Millis>,
    /// The servers of files given up as missing, for the next pass's report.
    servers: Vec<String>,
}

impl MissingFiles {
    /// A pass read the files at `now`: whether some are missing (and held) starts the grace,
    /// or ends it.
    pub(super) fn track(&mut self, missing: bool, now: Millis) {
        if !missing {
            self.deadline = None;
        } else if self.deadline.is_none() {
            self.deadline = Some(now.saturating_add(crate::inputs::MISSING_GRACE.0));
        }
    }

    /// When the loop must wake to give the held files up.
    pub(super) fn deadline(&self) -> Option<Millis> {
        self.deadline
    }

    /// Whether the grace is over at `now` (once: the deadline is cleared).
    fn due(&mut self, now: Millis) -> bool {
        let due = self.deadline.is_some_and(|at| at <= now);
        if due {
            self.deadline = None;
        }
        due
    }

    /// The servers of the files given up since the last pass, taken for its report.
    pub(super) fn take_servers(&mut self) -> Vec<String> {
        std::mem::take(&mut self.servers)
    }
}

impl<B: Backend> Host<B> {
    /// Files missing for [`MISSING_GRACE`](crate::inputs::MISSING_GRACE) are given up: they
    /// read as empty, and a reload of them (through the scheduler) stops their servers.
    pub(super) fn expire_missing_files(&mut self, now: Millis) {
        if !self.missing.due(now) {
            return;
        }
        let (sources, servers) = self.inputs.expire_missing();
        self.missing.servers.extend(servers);
        for source in sources {
            self.scheduler.handle_file_event(now, source);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inputs::MISSING_GRACE;

    /// Guards the grace's clock: it runs from the first pass that saw a file missing (later
    /// passes do not push it back), ends when the files are back, and is due once.
    #[test]
    fn the_missing_file_grace_runs_from_the_first_miss_and_is_due_once() {
        let mut missing = MissingFiles::default();
        missing.track(true, Millis(100));
        missing.track(true, Millis(500));
        let end = Millis(100 + MISSING_GRACE.0);
        assert_eq!(missing.deadline(), Some(end));
        assert!(!missing.due(Millis(end.0 - 1)));
        assert!(missing.due(end));
        assert!(!missing.due(end), "due once");

        missing.track(true, Millis(1_000));
        missing.track(false, Millis(1_001));
        assert_eq!(missing.deadline(), None, "the files are back");
    }
}
