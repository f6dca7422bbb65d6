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
