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
//!
//! Only the binary installs it ([`install`]); a library host without it keeps the leaders'
//! death signal and its own stop sequence.

use std::collections::BTreeSet;
use std::io::{BufRead, Write};
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{ChildStdin, Command, Stdio};
use std::sync::{Mutex, OnceLock, PoisonError};

use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;

/// The executable to start as `EXE reap`, set once by [`install`].
static EXE: OnceLock<PathBuf> = OnceLock::new();
/// The pipe to the running watchdog; `None` until the first spawn (or if it could not start).
static PIPE: Mutex<Option<ChildStdin>> = Mutex::new(None);

/// Makes this process start the watchdog (`exe reap`) at its first [`track`].
pub fn install(exe: PathBuf) {
    let _ = EXE.set(exe);
}

/// Lists the process group `pgid` with the watchdog, starting it first if needed. Without
/// [`install`], or if the watchdog cannot start (logged), nothing happens.
pub fn track(pgid: Pid) {
    send(&format!("+{pgid}\n"), true);
}

/// Takes `pgid` off the watchdog's list: the host has stopped that group itself.
pub fn untrack(pgid: Pid) {
    send(&format!("-{pgid}\n"), false);
}

fn send(line: &str, start: bool) {
    let Some(exe) = EXE.get() else {
        return;
    };
    let mut pipe = PIPE.lock().unwrap_or_else(PoisonError::into_inner);
    if pipe.is_none() && start {
        *pipe = spawn(exe);
    }
    if let Some(stdin) = pipe.as_mut() {
        // A few bytes into a pipe the watchdog keeps reading; if it died, the write fails and
        // the leaders' death signal is what is left.
        if let Err(e) = stdin.write_all(line.as_bytes()) {
            tracing::warn!("the process-group watchdog is gone ({e}); servers' children may outlive a killed host");
            *pipe = None;
        }
    }
}

fn spawn(exe: &PathBuf) -> Option<ChildStdin> {
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
    match started {
        // The watchdog exits by itself at end-of-file; nothing needs to wait for it but init.
        Ok(mut child) => child.stdin.take(),
        Err(e) => {
            tracing::warn!(
                "cannot start the process-group watchdog `{} reap`: {e}",
                exe.display()
            );
            None
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
