//! Shared harness for end-to-end tests: a temp project, a real
//! `mcp-reconcile watch` in its own process group, `status --json` polling,
//! and the fixture server binary.
#![allow(dead_code)]

use std::fs;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{json, Value};

/// How long any wait may take before a test fails (generous: CI is noisy).
pub const PATIENCE: Duration = Duration::from_secs(45);

/// The `mcp-reconcile` binary under test.
pub fn cli() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_mcp-reconcile"))
}

/// The fixture server, built on first use next to the test binaries.
pub fn fixture() -> PathBuf {
    let bin_dir = cli().parent().map(Path::to_path_buf).expect("binary dir");
    let path = bin_dir.join("mcp-fixture-server");
    if !path.is_file() {
        let status = Command::new(env!("CARGO"))
            .args(["build", "-q", "-p", "mcp-reconcile-fixture"])
            .env("CARGO_TARGET_DIR", bin_dir.parent().expect("target dir"))
            .status()
            .expect("cargo runs");
        assert!(status.success(), "building the fixture server failed");
    }
    path
}

/// A temp project with its own settings, approvals and state dir.
pub struct Project {
    pub dir: tempfile::TempDir,
}

impl Project {
    pub fn new() -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        fs::create_dir_all(dir.path().join("project")).expect("project dir");
        Project { dir }
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    pub fn user_settings(&self) -> PathBuf {
        self.path("user-settings.json")
    }

    /// The user's language-server file (`--user-lsp`).
    pub fn user_lsp(&self) -> PathBuf {
        self.path("user-lsp.json")
    }

    /// The project's `.lsp.json`.
    pub fn lsp_json(&self) -> PathBuf {
        self.path("project/.lsp.json")
    }

    pub fn mcp_json(&self) -> PathBuf {
        self.path("project/.mcp.json")
    }

    pub fn marker(&self, name: &str) -> PathBuf {
        self.path(&format!("{name}.marker"))
    }

    /// The flags every command of this project gets.
    pub fn flags(&self) -> Vec<String> {
        [
            "--user-settings",
            &self.user_settings().to_string_lossy(),
            "--project",
            &self.path("project").to_string_lossy(),
            "--approvals",
            &self.path("approvals.json").to_string_lossy(),
            "--user-lsp",
            &self.user_lsp().to_string_lossy(),
            "--state-dir",
            &self.path("state").to_string_lossy(),
        ]
        .map(str::to_owned)
        .to_vec()
    }

    /// The same files as [`Project::flags`], for a host run in the test's own process (no
    /// system settings of the machine's).
    pub fn options(&self) -> mcp_reconcile::inputs::Options {
        mcp_reconcile::inputs::Options {
            user_settings: Some(self.user_settings()),
            system_settings: Some(self.path("no-system-settings.json")),
            system_defaults: Some(self.path("no-system-defaults.json")),
            project: Some(self.path("project")),
            approvals: Some(self.path("approvals.json")),
            user_lsp: Some(self.user_lsp()),
            state_dir: Some(self.path("state")),
            ..mcp_reconcile::inputs::Options::default()
        }
    }

    /// A fixture server entry that appends its pid to `<name>.marker`.
    pub fn server(&self, name: &str, tools: &str) -> Value {
        json!({
            "command": fixture().to_string_lossy(),
            "args": ["--name", name, "--tools", tools, "--marker", self.marker(name).to_string_lossy()],
        })
    }

    /// Writes `path` atomically (temp file + rename), as editors do.
    pub fn write(&self, path: &Path, value: &Value) {
        let tmp = path.with_extension("tmp~");
        fs::write(&tmp, serde_json::to_string_pretty(value).expect("json")).expect("write");
        fs::rename(&tmp, path).expect("rename");
    }

    pub fn write_settings(&self, value: Value) {
        self.write(&self.user_settings(), &value);
    }

    /// How many times `name` was spawned (lines in its marker file).
    pub fn spawns(&self, name: &str) -> usize {
        fs::read_to_string(self.marker(name))
            .map(|t| t.lines().filter(|l| l.starts_with("server")).count())
            .unwrap_or(0)
    }

    /// Runs a one-shot CLI command with this project's flags.
    pub fn run(&self, args: &[&str]) -> std::process::Output {
        self.run_env(args, &[])
    }

    /// [`run`](Self::run) with `envs` set.
    pub fn run_env(&self, args: &[&str], envs: &[(&str, &str)]) -> std::process::Output {
        Command::new(cli())
            .args(args)
            .args(self.flags())
            .envs(envs.iter().copied())
            .stdin(Stdio::null())
            .output()
            .expect("cli runs")
    }

    /// `status --json` as an array of server objects.
    pub fn status(&self) -> Vec<Value> {
        let out = self.run(&["status", "--json"]);
        assert!(
            out.status.success(),
            "status failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: Value = serde_json::from_slice(&out.stdout).expect("status --json prints JSON");
        v.as_array().cloned().expect("an array")
    }

    pub fn server_status(&self, name: &str) -> Option<Value> {
        self.status().into_iter().find(|s| s["name"] == name)
    }

    /// Polls `status --json` until `pred` holds.
    pub fn wait_for(&self, what: &str, pred: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        let start = Instant::now();
        loop {
            let status = self.status();
            if pred(&status) {
                return status;
            }
            assert!(
                start.elapsed() < PATIENCE,
                "timed out waiting for {what}; last status: {status:#?}"
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    pub fn watch(&self) -> Watch {
        self.watch_with(&[])
    }

    pub fn watch_with(&self, extra: &[&str]) -> Watch {
        self.watch_env(extra, &[])
    }

    /// `watch` with extra flags and environment variables.
    pub fn watch_env(&self, extra: &[&str], env: &[(&str, &str)]) -> Watch {
        self.watch_command(extra, |command| {
            command.envs(env.iter().copied());
        })
    }

    /// `watch` with extra flags, its command adjusted by `configure` before it starts (to
    /// remove inherited environment variables, say).
    pub fn watch_command(&self, extra: &[&str], configure: impl FnOnce(&mut Command)) -> Watch {
        let log = self.path("watch.log");
        let out = fs::File::create(&log).expect("log file");
        let err = out.try_clone().expect("log file");
        let mut command = Command::new(cli());
        configure(&mut command);
        let child = command
            .arg("watch")
            // The session in the test's own process tree; the daemon's `watch` is daemon.rs's.
            .arg("--no-daemon")
            .args(self.flags())
            .args(extra)
            .args(if extra.contains(&"--debounce-ms") {
                &[][..]
            } else {
                &["--debounce-ms", "150"][..]
            })
            .arg("--no-prompt")
            .stdin(Stdio::null())
            .stdout(out)
            .stderr(err)
            .process_group(0)
            .spawn()
            .expect("watch starts");
        Watch { child, log }
    }
}

impl Project {
    /// `watch` as a person or a tool runs it: without `--no-prompt`, stdin from `stdin`, stdout
    /// alone in the log (stderr in `watch.err`).
    pub fn watch_stdio(&self, extra: &[&str], stdin: Stdio) -> Watch {
        let log = self.path("watch.log");
        let out = fs::File::create(&log).expect("log file");
        let err = fs::File::create(self.path("watch.err")).expect("stderr file");
        let child = Command::new(cli())
            .arg("watch")
            .arg("--no-daemon")
            .args(self.flags())
            .args(extra)
            .args(["--debounce-ms", "150"])
            .stdin(stdin)
            .stdout(out)
            .stderr(err)
            .process_group(0)
            .spawn()
            .expect("watch starts");
        Watch { child, log }
    }
}

/// A running `watch`; stopped with its whole process group on drop.
pub struct Watch {
    pub child: Child,
    pub log: PathBuf,
}

impl Watch {
    pub fn output(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// How many reconcile passes the log shows.
    pub fn passes(&self) -> usize {
        self.output()
            .lines()
            .filter(|l| l.starts_with("reconcile #"))
            .count()
    }

    pub fn wait_output(&self, what: &str, pred: impl Fn(&str) -> bool) {
        let start = Instant::now();
        while !pred(&self.output()) {
            assert!(
                start.elapsed() < PATIENCE,
                "timed out waiting for {what}; log:\n{}",
                self.output()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// Graceful stop: SIGTERM, then wait; every server must be gone.
    pub fn stop(mut self) -> String {
        let pid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        let start = Instant::now();
        while self.child.try_wait().ok().flatten().is_none() && start.elapsed() < PATIENCE {
            std::thread::sleep(Duration::from_millis(50));
        }
        self.output()
    }
}

impl Drop for Watch {
    fn drop(&mut self) {
        let pgid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        let _ = nix::sys::signal::killpg(pgid, nix::sys::signal::Signal::SIGKILL);
        let _ = self.child.wait();
    }
}

/// Whether a process is alive.
pub fn alive(pid: u64) -> bool {
    let Ok(pid) = i32::try_from(pid) else {
        return false;
    };
    // A zombie still answers kill(0); read its state to tell.
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        Ok(stat) => !stat
            .split(") ")
            .nth(1)
            .is_some_and(|rest| rest.starts_with('Z')),
        Err(_) => false,
    }
}

pub fn pid_of(status: &[Value], name: &str) -> Option<u64> {
    status
        .iter()
        .find(|s| s["name"] == name)
        .and_then(|s| s["pid"].as_u64())
}

pub fn state_of(status: &[Value], name: &str) -> String {
    status
        .iter()
        .find(|s| s["name"] == name)
        .and_then(|s| s["state"].as_str())
        .unwrap_or("absent")
        .to_owned()
}

pub fn all_connected(status: &[Value], names: &[&str]) -> bool {
    names.iter().all(|n| state_of(status, n) == "connected")
}

/// The fixture server serving HTTP(S) on a loopback address, started with `args` (which include
/// `--http ADDR`); its process group is killed on drop.
pub struct HttpFixture {
    pub child: Child,
    /// The URL it printed (`http(s)://127.0.0.1:PORT/mcp`).
    pub url: String,
}

impl HttpFixture {
    pub fn start<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> HttpFixture {
        use std::io::BufRead;
        let mut child = Command::new(fixture())
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .expect("the fixture starts");
        let mut url = String::new();
        let stdout = child.stdout.take().expect("stdout");
        std::io::BufReader::new(stdout)
            .read_line(&mut url)
            .expect("stdout");
        HttpFixture {
            child,
            url: url.trim().to_owned(),
        }
    }

    /// Kills its process group and reaps it.
    pub fn stop(&mut self) {
        let pgid = nix::unistd::Pid::from_raw(self.child.id() as i32);
        let _ = nix::sys::signal::killpg(pgid, nix::sys::signal::Signal::SIGKILL);
        let _ = self.child.wait();
    }
}

impl Drop for HttpFixture {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A server entry whose leader starts a grandchild in its group (a wrapper's child, a shell's
/// background job) that ignores everything but SIGKILL, its pid written to `pidfile`.
pub fn server_with_grandchild(pidfile: &Path) -> Value {
    json!({
        "command": "sh",
        "args": [
            "-c",
            "trap '' TERM HUP INT; sleep 1000 & echo $! > \"$0\"; exec \"$1\" --name g --tools echo",
            pidfile.to_string_lossy(),
            fixture().to_string_lossy(),
        ],
    })
}

/// The pid in `pidfile`, once it is there.
pub fn read_pid(pidfile: &Path) -> u64 {
    let start = Instant::now();
    loop {
        if let Some(pid) = fs::read_to_string(pidfile)
            .ok()
            .and_then(|text| text.trim().parse().ok())
        {
            return pid;
        }
        assert!(
            start.elapsed() < PATIENCE,
            "no pid in {}",
            pidfile.display()
        );
        std::thread::sleep(Duration::from_millis(25));
    }
}

/// Kills the process group `0` when dropped (also when an assertion fails), so a test never
/// leaves a server behind.
pub struct KillGroup(pub u32);

impl Drop for KillGroup {
    fn drop(&mut self) {
        if let Ok(pgid) = i32::try_from(self.0) {
            let _ = nix::sys::signal::killpg(
                nix::unistd::Pid::from_raw(pgid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }
}

/// The repository root (where `node_modules/` and `.venv-test/` are installed).
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace root")
        .to_path_buf()
}

/// An installed third-party server binary, or a failure that says how to install it.
pub fn installed(relative: &str) -> String {
    let path = workspace_root().join(relative);
    assert!(
        path.is_file(),
        "{} is missing: run `bash scripts/setup.sh` at the repository root ({}) first",
        path.display(),
        workspace_root().display()
    );
    path.to_string_lossy().into_owned()
}
