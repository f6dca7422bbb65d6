//! A stdio server's process: spawned as the leader of its own process group, its stderr kept in
//! a bounded ring for error messages, reaped by a waiter task, and stopped group-wide.
//!
//! Stop sequence ([`ChildProcess::stop`]), each wait bounded:
//! 1. the caller closes stdin (cancelling the rmcp service does that);
//! 2. wait [`GRACE`] for the leader to exit;
//! 3. SIGTERM to the group, wait [`GRACE`];
//! 4. SIGKILL to the group, wait [`KILL_WAIT`] for the leader to be reaped;
//! 5. always a last SIGKILL to the recorded group, so grandchildren (npx/uvx wrappers, anything
//!    that outlived its parent) never survive.
//!
//! Spawning goes through process-wrap's `CommandWrap` + `ProcessGroup::leader()`, as rmcp's
//! `TokioChildProcess` does, but the child stays here instead of inside that transport: the
//! monitor must see the exit status the moment the process dies (even while a grandchild keeps
//! the pipes open), and the stop sequence uses 1 s graces where rmcp waits 3 s + 3 s. The MCP
//! side is rmcp's own `AsyncRwTransport` over the same pipes, which is what `TokioChildProcess`
//! wraps.
//!
//! If the host is killed without a chance to run its stop sequence (`kill -9`, OOM killer), its
//! servers must not run on with nobody to talk to (a server that ignores stdin EOF would outlive
//! the host forever):
//! * the binary's watchdog ([`crate::reaper`]), which every spawned group is listed with until it
//!   is stopped, kills the whole group — leader and everything it started;
//! * a library host without the watchdog gives every leader `PR_SET_PDEATHSIG(SIGKILL)` before
//!   it execs ([`die_with_parent`]), so at least the leader dies with the host.
//!
//! The death signal needs code between fork and exec, which makes the standard library *fork* the
//! host — copying its page tables and making every page the host writes next fault and copy — at
//! a cost that grows with the host (12–17 ms per spawn beside 200 servers, against 3–7 ms without).
//! While the watchdog runs, the spawn is a `posix_spawn` (`CLONE_VM | CLONE_VFORK`: nothing
//! copied): the program is looked up in the child's `PATH` here ([`lookup`]), as `execvp` would,
//! since the standard library forks for a bare name whose `PATH` the child's environment sets.
//! What that gives up: a host killed in the microseconds between a spawn and the watchdog hearing
//! of its group leaves that one server with a closed stdin, which ends an MCP server.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use mcp_reconcile_kernel::json::Value;
use mcp_reconcile_kernel::ServerConfig;
use nix::errno::Errno;
use nix::sys::signal::{killpg, Signal};
use nix::unistd::Pid;
use process_wrap::tokio::{CommandWrap, ProcessGroup};
use tokio::io::AsyncReadExt;
use tokio::process::{ChildStderr, ChildStdin, ChildStdout};
use tokio::sync::watch;

use crate::launch::{resolve_cwd, Launch};
use crate::redact::redact_all;

/// How long a stopping server gets after stdin closes, and again after SIGTERM.
pub const GRACE: Duration = Duration::from_secs(1);
/// How long to wait for the kernel to deliver SIGKILL and the leader to be reaped.
const KILL_WAIT: Duration = Duration::from_secs(5);
/// Lines of stderr kept for error messages.
const TAIL_LINES: usize = 40;
/// Bytes of stderr kept for error messages.
const TAIL_BYTES: usize = 8 * 1024;
/// Bytes of stderr read at once.
const STDERR_READ: usize = 1024;

/// A running (or exited, not yet stopped) stdio server process.
pub struct ChildProcess {
    pid: u32,
    pgid: Pid,
    /// `None` while the leader runs; then how it ended ("exit status: 1", "signal: 9 (SIGKILL)").
    exit: watch::Receiver<Option<String>>,
    stderr: StderrTail,
    stderr_closed: watch::Receiver<bool>,
    /// Set once the final group kill was sent; until then Drop sends it.
    stopped: bool,
}

/// The child's protocol pipes, handed to the MCP transport.
pub struct Pipes {
    pub stdout: ChildStdout,
    pub stdin: ChildStdin,
}

impl ChildProcess {
    /// Starts `config`'s `command` with `args`, `env` over the host environment and `cwd`
    /// (relative to `base_dir` when given), as the leader of a new process group. With a
    /// `launch` (a daemon session's), `env` goes over the session's environment instead of the
    /// host's, and the process runs in [`Launch::effective_cwd`].
    ///
    /// # Errors
    /// The spawn error (missing program, bad cwd, ...), or a missing pipe.
    pub fn spawn(
        config: &ServerConfig,
        base_dir: Option<&Path>,
        launch: Option<&Launch>,
        secrets: Vec<String>,
        server: &str,
    ) -> std::io::Result<(Self, Pipes)> {
        let program = config.str_field("command").unwrap_or_default();
        let fast = crate::reaper::ready();
        let program = match fast.then(|| lookup(program, &child_path(config, launch))) {
            Some(Some(found)) => found.into_os_string(),
            _ => program.into(),
        };
        let mut command = tokio::process::Command::new(program);
        if let Some(Value::Array(args)) = config.get("args") {
            command.args(args.iter().map(Value::to_js_string));
        }
        if let Some(launch) = launch {
            use std::os::unix::ffi::OsStrExt;
            let raw = launch.raw.iter().map(|(key, value)| {
                (
                    std::ffi::OsStr::from_bytes(key),
                    std::ffi::OsStr::from_bytes(value),
                )
            });
            command
                .env_clear()
                .envs(&launch.vars)
                .envs(raw)
                .current_dir(launch.effective_cwd(config));
        }
        if let Some(Value::Object(env)) = config.get("env") {
            for (key, value) in env.iter() {
                // A null or nested value has no sensible string form; an absent one is skipped.
                if matches!(value, Value::Null | Value::Object(_) | Value::Array(_)) {
                    continue;
                }
                command.env(key, value.to_js_string());
            }
        }
        if let Some(cwd) = config
            .str_field("cwd")
            .filter(|c| !c.is_empty() && launch.is_none())
        {
            command.current_dir(resolve_cwd(cwd, base_dir));
        }
        command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            // Backstop for a runtime that shuts down under us: the leader at least dies.
            .kill_on_drop(true);

        #[cfg(target_os = "linux")]
        if !fast {
            die_with_parent(&mut command);
        }

        let mut wrapped = CommandWrap::from(command);
        wrapped.wrap(ProcessGroup::leader());
        // Forked from the thread that outlives every server ([`crate::forker`]).
        let mut child = crate::forker::fork(move || wrapped.spawn())?;
        let pid = child
            .id()
            .ok_or_else(|| std::io::Error::other("the process exited before its pid was read"))?;
        let pgid = Pid::from_raw(
            i32::try_from(pid).map_err(|_| std::io::Error::other("pid out of range"))?,
        );
        crate::reaper::track(pgid);
        let taken = (
            child.stdin().take(),
            child.stdout().take(),
            child.stderr().take(),
        );
        let (Some(stdin), Some(stdout), Some(stderr)) = taken else {
            // Not reachable with piped stdio; never leave the process behind anyway.
            let _ = killpg(pgid, Signal::SIGKILL);
            tokio::spawn(async move {
                let _ = child.wait().await;
            });
            return Err(std::io::Error::other(
                "a stdio pipe of the child is missing",
            ));
        };

        let (exit_tx, exit) = watch::channel(None);
        tokio::spawn(async move {
            let ended = match child.wait().await {
                Ok(status) => status.to_string(),
                Err(e) => format!("unknown status ({e})"),
            };
            let _ = exit_tx.send(Some(ended));
        });

        let tail = StderrTail::default();
        let (closed_tx, stderr_closed) = watch::channel(false);
        tokio::spawn(drain_stderr(
            stderr,
            tail.clone(),
            closed_tx,
            secrets,
            server.to_owned(),
        ));

        Ok((
            ChildProcess {
                pid,
                pgid,
                exit,
                stderr: tail,
                stderr_closed,
                stopped: false,
            },
            Pipes { stdout, stdin },
        ))
    }

    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Waits until the leader has exited and been reaped; returns how it ended.
    pub async fn exited(&mut self) -> String {
        match self.exit.wait_for(Option::is_some).await {
            Ok(status) => status.clone().unwrap_or_default(),
            // The waiter task is gone only if the runtime is shutting down.
            Err(_) => "unknown status (the waiter stopped)".to_owned(),
        }
    }

    /// [`Self::exited`], bounded by `limit`.
    pub async fn wait_exit(&mut self, limit: Duration) -> Option<String> {
        tokio::time::timeout(limit, self.exited()).await.ok()
    }

    /// Waits (at most `limit`) until stderr reached end of file, so a crash message written just
    /// before exiting is in the tail. A grandchild holding stderr open makes this time out.
    pub async fn stderr_settled(&mut self, limit: Duration) {
        let _ = tokio::time::timeout(limit, self.stderr_closed.wait_for(|closed| *closed)).await;
    }

    /// The last lines of stderr (at most 40 lines / 8 KiB), not yet redacted.
    pub fn stderr_tail(&self) -> String {
        self.stderr.text()
    }

    /// The stop sequence of the module docs (steps 2-5). Never hangs: every wait is bounded.
    pub async fn stop(&mut self) {
        if self.wait_exit(GRACE).await.is_none() {
            self.signal_group(Signal::SIGTERM);
            if self.wait_exit(GRACE).await.is_none() {
                self.signal_group(Signal::SIGKILL);
                if self.wait_exit(KILL_WAIT).await.is_none() {
                    tracing::warn!(pid = self.pid, "the process did not die after SIGKILL");
                }
            }
        }
        self.kill_group();
    }

    /// SIGKILL to the whole group (the grandchildren of a leader that already exited).
    pub fn kill_group(&mut self) {
        self.signal_group(Signal::SIGKILL);
        if !self.stopped {
            crate::reaper::untrack(self.pgid);
        }
        self.stopped = true;
    }

    fn signal_group(&self, signal: Signal) {
        match killpg(self.pgid, signal) {
            // Nothing left in the group: the goal of every stop.
            Ok(()) | Err(Errno::ESRCH) => {}
            Err(e) => {
                tracing::warn!(pgid = self.pid, %signal, "cannot signal the process group: {e}")
            }
        }
    }
}

impl Drop for ChildProcess {
    fn drop(&mut self) {
        if !self.stopped {
            self.kill_group();
        }
    }
}

/// Makes the child get SIGKILL when the host dies (`PR_SET_PDEATHSIG`), set between fork and
/// exec.
///
/// The death signal fires when the *thread* that forked exits, not only the process: every
/// server is forked from [`crate::forker`]'s thread, which lives as long as the process.
///
/// If the host already died between fork and `prctl`, the signal would never come: the child
/// compares `getppid()` with the host's pid after setting it and refuses to exec (the spawn
/// fails, which nobody is left to see).
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
fn die_with_parent(command: &mut tokio::process::Command) {
    use nix::sys::prctl::set_pdeathsig;
    use nix::unistd::getppid;

    let host = Pid::this();
    // SAFETY: `pre_exec` runs in the forked child before exec, where only async-signal-safe
    // operations are allowed. The closure makes exactly two system calls (prctl, getppid) and
    // builds an `io::Error` from a raw errno, which does not allocate; it touches no lock, no
    // allocator and no state shared with other threads of the parent. `host` is a plain integer
    // copied in before the fork.
    unsafe {
        command.pre_exec(move || {
            set_pdeathsig(Signal::SIGKILL)
                .map_err(|e| std::io::Error::from_raw_os_error(e as i32))?;
            if getppid() != host {
                // The host died before the death signal was armed: do not start an orphan.
                return Err(std::io::Error::from_raw_os_error(Errno::ESRCH as i32));
            }
            Ok(())
        });
    }
}

/// The `PATH` the child gets: its own `env`'s, else the session's (a daemon session's launch
/// environment), else the host's; `None` when it gets none.
/// The secrets of the environment a server of `config` is spawned with — the session's
/// (`launch`) or this process's, and the entry's own `env` over it — as
/// [`crate::redact::env_secrets`] finds them: a server that echoes an inherited `GITHUB_TOKEN`
/// on stderr has it masked in every text made of that stderr.
pub(crate) fn env_secrets(config: &ServerConfig, launch: Option<&Launch>) -> Vec<String> {
    let mut vars: Vec<(String, String)> = match launch {
        Some(launch) => launch
            .vars
            .iter()
            .map(|(k, v)| (k.clone(), v.clone()))
            .chain(launch.raw.iter().map(|(k, v)| {
                (
                    String::from_utf8_lossy(k).into_owned(),
                    String::from_utf8_lossy(v).into_owned(),
                )
            }))
            .collect(),
        None => std::env::vars_os()
            .map(|(k, v)| {
                (
                    k.to_string_lossy().into_owned(),
                    v.to_string_lossy().into_owned(),
                )
            })
            .collect(),
    };
    if let Some(Value::Object(env)) = config.get("env") {
        for (key, value) in env.iter() {
            if !matches!(value, Value::Null | Value::Object(_) | Value::Array(_)) {
                vars.push((key.clone(), value.to_js_string()));
            }
        }
    }
    crate::redact::env_secrets(vars.iter().map(|(k, v)| (k.as_str(), v.as_str())))
}

fn child_path(config: &ServerConfig, launch: Option<&Launch>) -> Option<std::ffi::OsString> {
    if let Some(Value::Object(env)) = config.get("env") {
        match env.get("PATH") {
            Some(Value::Null | Value::Object(_) | Value::Array(_)) | None => {}
            Some(value) => return Some(value.to_js_string().into()),
        }
    }
    match launch {
        Some(launch) => launch.vars.get("PATH").map(Into::into),
        None => std::env::var_os("PATH"),
    }
}

/// Where `execvp` would find `program` in `path`: a name without `/` is looked up in each
/// absolute entry in order, the first executable regular file wins. `None` — and the spawn
/// keeps the bare name, so the standard library's own lookup and its error apply — for a name
/// with a `/`, no `PATH`, a relative or empty entry before the match (those depend on the
/// child's directory), or no match.
pub(crate) fn lookup(program: &str, path: &Option<std::ffi::OsString>) -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    if program.is_empty() || program.contains('/') {
        return None;
    }
    for dir in std::env::split_paths(path.as_ref()?) {
        if !dir.is_absolute() {
            return None;
        }
        let candidate = dir.join(program);
        // The one metadata read per entry is a stat, as execvp's own attempt would be.
        if let Ok(meta) = std::fs::metadata(&candidate) {
            if meta.is_file() && meta.permissions().mode() & 0o111 != 0 {
                return Some(candidate);
            }
        }
    }
    None
}

/// The last lines of a stream, bounded by line count and bytes.
#[derive(Clone, Default)]
struct StderrTail(Arc<Mutex<Ring>>);

#[derive(Default)]
struct Ring {
    lines: VecDeque<String>,
    bytes: usize,
    /// The unterminated end of the stream so far.
    partial: Vec<u8>,
}

impl StderrTail {
    /// Appends `chunk`; returns the lines it completed.
    fn push(&self, chunk: &[u8]) -> Vec<String> {
        let mut ring = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let mut done = Vec::new();
        for &byte in chunk {
            if byte == b'\n' {
                let raw = std::mem::take(&mut ring.partial);
                let line = String::from_utf8_lossy(&raw)
                    .trim_end_matches('\r')
                    .to_owned();
                done.push(line.clone());
                ring.add(line);
            } else if ring.partial.len() < TAIL_BYTES {
                ring.partial.push(byte);
            }
        }
        done
    }

    /// Ends the stream: an unterminated last line counts as a line.
    fn finish(&self) {
        let mut ring = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if !ring.partial.is_empty() {
            let raw = std::mem::take(&mut ring.partial);
            let line = String::from_utf8_lossy(&raw).into_owned();
            ring.add(line);
        }
    }

    fn text(&self) -> String {
        let ring = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let mut lines: Vec<&str> = ring.lines.iter().map(String::as_str).collect();
        let partial = String::from_utf8_lossy(&ring.partial);
        if !partial.is_empty() {
            lines.push(&partial);
        }
        lines.join("\n")
    }
}

impl Ring {
    fn add(&mut self, line: String) {
        self.bytes += line.len();
        self.lines.push_back(line);
        while self.lines.len() > TAIL_LINES || (self.bytes > TAIL_BYTES && self.lines.len() > 1) {
            if let Some(old) = self.lines.pop_front() {
                self.bytes -= old.len();
            }
        }
    }
}

async fn drain_stderr(
    mut stderr: ChildStderr,
    tail: StderrTail,
    closed: watch::Sender<bool>,
    secrets: Vec<String>,
    server: String,
) {
    // Small: every server's drain holds its buffer for as long as the server runs, and most
    // stderr is idle or a line at a time (a chatty one costs a few more reads, no memory).
    let mut buf = [0u8; STDERR_READ];
    loop {
        match stderr.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => {
                for line in tail.push(&buf[..n]) {
                    tracing::debug!(server = %server, "stderr: {}", redact_all(&line, &secrets));
                }
            }
        }
    }
    tail.finish();
    let _ = closed.send(true);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_tail_keeps_the_last_lines_within_its_bounds() {
        let tail = StderrTail::default();
        for i in 0..100 {
            tail.push(format!("line {i}\n").as_bytes());
        }
        tail.push(b"partial");
        let text = tail.text();
        assert!(text.ends_with("line 99\npartial"), "{text}");
        assert_eq!(text.lines().count(), TAIL_LINES + 1);
        assert!(text.starts_with("line 60\n"), "{text}");

        let long = StderrTail::default();
        long.push(&vec![b'x'; 3 * TAIL_BYTES]);
        long.push(b"\nend\n");
        let text = long.text();
        assert!(text.len() <= TAIL_BYTES + 4, "{}", text.len());
        assert!(text.ends_with("end"));
    }

    #[test]
    fn a_bare_name_is_found_where_execvp_would_find_it() {
        use std::os::unix::fs::PermissionsExt;
        let tmp = tempfile::tempdir().expect("tempdir");
        let (plain, bin) = (tmp.path().join("plain"), tmp.path().join("bin"));
        for dir in [&plain, &bin] {
            std::fs::create_dir(dir).expect("mkdir");
        }
        // Not executable in the first entry, executable in the second: execvp goes on.
        std::fs::write(plain.join("srv"), "#!/bin/sh\n").expect("write");
        std::fs::write(bin.join("srv"), "#!/bin/sh\n").expect("write");
        std::fs::set_permissions(bin.join("srv"), std::fs::Permissions::from_mode(0o755))
            .expect("chmod");
        let path = |dirs: &[&Path]| Some(std::env::join_paths(dirs).expect("join"));

        assert_eq!(lookup("srv", &path(&[&plain, &bin])), Some(bin.join("srv")));
        assert_eq!(lookup("srv", &path(&[&plain])), None, "no match");
        assert_eq!(
            lookup("./srv", &path(&[&bin])),
            None,
            "a path is not looked up"
        );
        assert_eq!(lookup("srv", &None), None, "no PATH");
        // A relative entry depends on the child's directory: left to the spawn.
        assert_eq!(lookup("srv", &path(&[Path::new("rel"), &bin])), None);
        // A directory of that name is not a program.
        std::fs::create_dir(plain.join("dir")).expect("mkdir");
        assert_eq!(lookup("dir", &path(&[&plain])), None);
    }
}
