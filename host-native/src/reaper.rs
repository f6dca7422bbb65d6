//! The last line against leaked grandchildren: when the host dies without its stop sequence
//! (`kill -9`, the OOM killer), every server's process group is killed — not only the leaders.
//!
//! `PR_SET_PDEATHSIG` ([`crate::transport`]'s stdio spawn) kills a server's leader with the
//! host, but what the leader started (an `npx` wrapper's node, a shell's background job) is
//! orphaned and would run on forever. So the `mcp-reconcile` binary, on its first stdio spawn,
//! starts a watchdog: `mcp-reconcile reap`, in its own process group, whose stdin is a pipe only
//! the host holds (close-on-exec, so no server inherits it). The host writes `+PGID` when it
//! spawns a group and `-PGID` once it has stopped it; when the pipe reaches end-of-file — the
//! host is gone, however it ended — the watchdog sends SIGKILL to every group still listed and
//! exits. A host that stopped everything leaves an empty list, and the watchdog just exits.
//! The host keeps the list too: a watchdog that died (OOM-killed, killed by hand) is replaced
//! at the next spawn and told every group still running.
//!
//! Only the binary installs it ([`install`]); a library host without it keeps the leaders'
//! death signal and its own stop sequence.

use std::collections::BTreeSet;
use std::io::{BufRead, Write};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::{Mutex, OnceLock, PoisonError};

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;

/// The executable to start as `EXE reap`, set once by [`install`].
static EXE: OnceLock<PathBuf> = OnceLock::new();
/// The running watchdog and the groups it must know.
static WATCHDOG: Mutex<Watchdog> = Mutex::new(Watchdog {
    child: None,
    groups: BTreeSet::new(),
});

struct Watchdog {
    /// The watchdog process and the pipe to it; `None` until the first spawn, or after it died.
    child: Option<(Child, ChildStdin)>,
    /// Every group spawned and not yet stopped: what a new watchdog is told first, so one that
    /// replaces a dead one (OOM-killed, killed by hand) still covers the older groups.
    groups: BTreeSet<i32>,
}

/// Makes this process start the watchdog (`exe reap`) at its first [`track`].
pub fn install(exe: PathBuf) {
    let _ = EXE.set(exe);
}

/// Whether a watchdog runs for this process — started now if [`install`] was called and none
/// runs yet. Then it, not each leader's death signal, is what stops the servers of a host that
/// dies (see [`crate::transport`]'s spawn); `false` without [`install`], or when it cannot start
/// (logged).
pub(crate) fn ready() -> bool {
    let Some(exe) = EXE.get() else {
        return false;
    };
    let mut watchdog = WATCHDOG.lock().unwrap_or_else(PoisonError::into_inner);
    if watchdog.child.is_none() {
        watchdog.respawn(exe);
    }
    watchdog.child.is_some()
}

/// Lists the process group `pgid` with the watchdog, starting it first if needed. Without
/// [`install`], or if the watchdog cannot start (logged), only the leaders' death signal is
/// left (`ready` said so before the spawn).
pub fn track(pgid: Pid) {
    let Some(exe) = EXE.get() else {
        return;
    };
    let mut watchdog = WATCHDOG.lock().unwrap_or_else(PoisonError::into_inner);
    watchdog.groups.insert(pgid.as_raw());
    if !watchdog.send(&format!("+{pgid}\n")) {
        // A watchdog that died is replaced, and told every group still running.
        watchdog.respawn(exe);
    }
}

/// Takes `pgid` off the watchdog's list: the host has stopped that group itself.
pub fn untrack(pgid: Pid) {
    let mut watchdog = WATCHDOG.lock().unwrap_or_else(PoisonError::into_inner);
    if watchdog.groups.remove(&pgid.as_raw()) {
        watchdog.send(&format!("-{pgid}\n"));
    }
}

impl Watchdog {
    /// Writes `line` to the running watchdog; `false` when there is none (any more).
    fn send(&mut self, line: &str) -> bool {
        let Some((_, stdin)) = self.child.as_mut() else {
            return false;
        };
        // A few bytes into a pipe the watchdog keeps reading.
        if stdin.write_all(line.as_bytes()).is_ok() {
            return true;
        }
        if let Some((mut child, _)) = self.child.take() {
            // Reap it (it is gone, or about to be: its stdin is closed now).
            let _ = child.kill();
            let _ = child.wait();
        }
        tracing::warn!("the process-group watchdog died; starting another");
        false
    }

    /// Starts a watchdog and tells it every group in [`Watchdog::groups`].
    fn respawn(&mut self, exe: &PathBuf) {
        let started = Command::new(exe)
            .arg("reap")
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .current_dir("/")
            // Its own group: a signal to the host's group (Ctrl-C, a client killing `serve`'s
            // group) must leave it alive to do its work.
            .process_group(0)
            .spawn();
        let mut child = match started {
            Ok(child) => child,
            Err(e) => {
                tracing::warn!(
                    "cannot start the process-group watchdog `{} reap`: {e}; servers' children \
                     may outlive a killed host",
                    exe.display()
                );
                return;
            }
        };
        let Some(stdin) = child.stdin.take() else {
            let _ = child.kill();
            let _ = child.wait();
            return;
        };
        self.child = Some((child, stdin));
        let all: String = self.groups.iter().map(|g| format!("+{g}\n")).collect();
        if !self.send(&all) {
            tracing::warn!("the process-group watchdog exited at once; servers' children may outlive a killed host");
        }
    }
}

/// The watchdog itself (`mcp-reconcile reap`): reads `+PGID` / `-PGID` lines from `input`
/// until end-of-file, then kills every group still listed. Returns the groups it killed.
pub fn run(input: impl BufRead) -> Vec<i32> {
    let mut groups = BTreeSet::new();
    for line in input.lines() {
        let Ok(line) = line else { break };
        let (sign, number) = line.split_at(line.len().min(1));
        match (sign, number.parse::<i32>()) {
            ("+", Ok(pgid)) if pgid > 1 => {
                groups.insert(pgid);
            }
            ("-", Ok(pgid)) => {
                groups.remove(&pgid);
            }
            _ => {}
        }
    }
    for pgid in &groups {
        let _ = killpg(Pid::from_raw(*pgid), Signal::SIGKILL);
    }
    groups.into_iter().collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_groups_still_listed_at_the_end_are_the_ones_killed() {
        // Groups above any pid_max (2^22): killpg fails harmlessly (ESRCH).
        let input = "+2000000000\n+2000000001\n-2000000000\nnonsense\n+1\n+-5\n+2000000002\n";
        assert_eq!(run(input.as_bytes()), vec![2_000_000_001, 2_000_000_002]);
    }
}
