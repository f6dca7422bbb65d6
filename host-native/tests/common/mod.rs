//! Shared harness for end-to-end tests: a temp project, a real
//! `mcp-reconcile watch` in its own process group, `status --json` polling,
//! and the fixture server binary.
#![allow(dead_code)]

use std::fs;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, ElicitRequestParams,
    ElicitResult, ElicitationAction, ElicitationCapability, Implementation,
    ProgressNotificationParam,
};
use rmcp::service::{NotificationContext, RequestContext, RunningService};
use rmcp::{ClientHandler, Peer, RoleClient, ServiceExt};
use serde_json::{json, Value};
use tokio::sync::mpsc;

pub mod fake_chat;
pub mod fake_model;
pub mod machine;
mod serve_http;
// Not every test binary starts an HTTP serve.
#[allow(unused_imports)]
pub use serve_http::ServeHttp;

/// How long any wait may take before a test fails (generous: CI is noisy).
pub const PATIENCE: Duration = Duration::from_secs(45);

/// The `mcp-reconcile` binary under test.
pub fn cli() -> PathBuf {
    PathBuf::from(env!("CARGO_BIN_EXE_mcp-reconcile"))
}

/// Points `serve`'s `command` at a daemon of the test's own (`daemon`: returned, stopped when
/// dropped) or runs it in its own process (`--no-daemon`): one test, both backends.
pub fn on_backend(p: &Project, command: &mut Command, daemon: bool) -> Option<Group> {
    if !daemon {
        command.arg("--no-daemon");
        return None;
    }
    let runtime = p.path("run");
    fs::create_dir_all(&runtime).expect("runtime dir");
    command.env("XDG_RUNTIME_DIR", &runtime);
    Some(start_daemon(p, &runtime))
}

/// The real Claude Code, pinned in the root package.json.
pub fn claude() -> PathBuf {
    let bin = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../node_modules/@anthropic-ai/claude-code/bin/claude.exe");
    assert!(
        bin.exists(),
        "Claude Code is not installed: run `npm ci` at the repository root (scripts/setup.sh does)"
    );
    bin
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

    /// [`Project::flags`] with `project` (a directory in the temp dir, made if missing) as the
    /// project: the same user settings, approvals and state, another session.
    pub fn flags_in(&self, project: &str) -> Vec<String> {
        let mut flags = self.flags();
        let at = flags
            .iter()
            .position(|f| f == "--project")
            .expect("--project");
        let dir = self.path(project);
        fs::create_dir_all(&dir).expect("project dir");
        flags[at + 1] = dir.to_string_lossy().into_owned();
        flags
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

    /// The header lines of the passes printed so far (`reconcile #N (trigger) …`), in order.
    /// A pass is printed once it has been applied: every server it started has connected or
    /// failed, every one it stopped was stopped.
    pub fn pass_headers(&self) -> Vec<String> {
        self.output()
            .lines()
            .filter(|l| l.starts_with("reconcile #"))
            .map(str::to_owned)
            .collect()
    }

    /// How many reconcile passes the log shows.
    pub fn passes(&self) -> usize {
        self.pass_headers().len()
    }

    /// Waits until a pass after the first `after` has been printed whose trigger mentions
    /// `trigger` (`"start"`, `"user settings"` as in `change in user settings`, `"manual
    /// reload"`, `"retry"`); its header. What that pass decided can be checked from then on.
    pub fn wait_pass(&self, after: usize, trigger: &str) -> String {
        let find = |output: &str| {
            output
                .lines()
                .filter(|l| l.starts_with("reconcile #"))
                .skip(after)
                .find(|l| {
                    l.split_once(" (")
                        .and_then(|(_, rest)| rest.split_once(')'))
                        .is_some_and(|(what, _)| what.contains(trigger))
                })
                .map(str::to_owned)
        };
        self.wait_output(&format!("a pass ({trigger}) after pass {after}"), |o| {
            find(o).is_some()
        });
        find(&self.output()).unwrap_or_default()
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
        kill_group(self.child.id());
        let _ = self.child.wait();
    }
}

impl Project {
    /// Has the session of `watch` read every file again now (`reload`) and waits until that
    /// pass has been printed: by then whatever the files and the approvals say was decided.
    pub fn reload_and_wait(&self, watch: &Watch) -> String {
        let after = watch.passes();
        let out = self.run(&["reload"]);
        assert!(out.status.success(), "reload: {}", output_text(&out));
        watch.wait_pass(after, "manual reload")
    }
}

/// The pids `name` wrote to its marker file, one per start.
pub fn pids(p: &Project, name: &str) -> Vec<u64> {
    fs::read_to_string(p.marker(name))
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.strip_prefix("server "))
        .filter_map(|pid| pid.trim().parse().ok())
        .collect()
}

/// `server` (a [`Project::server`] entry) with `extra` appended to its arguments.
pub fn with_args(mut server: Value, extra: &[&str]) -> Value {
    if let Some(args) = server["args"].as_array_mut() {
        args.extend(extra.iter().map(|a| json!(a)));
    }
    server
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

/// Field `key` of server `name` in `status` (`null` when there is none).
pub fn field<'a>(status: &'a [Value], name: &str, key: &str) -> &'a Value {
    status
        .iter()
        .find(|s| s["name"] == name)
        .map_or(&Value::Null, |s| &s[key])
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
    /// The fixture's reference server in both eras (`--conformance-reference --modern`):
    /// what the 2026-07-28 conformance scenarios ask for, on a free loopback port.
    pub fn modern_reference() -> HttpFixture {
        HttpFixture::start(&[
            "--http",
            "127.0.0.1:0",
            "--conformance-reference",
            "--modern",
        ])
    }

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
        kill_group(self.child.id());
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

/// SIGKILL to the process group `pgid`.
fn kill_group(pgid: u32) {
    if let Ok(pgid) = i32::try_from(pgid) {
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(pgid),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}

/// Kills the process group `0` when dropped (also when an assertion fails), so a test never
/// leaves a server behind.
pub struct KillGroup(pub u32);

impl KillGroup {
    /// Kills the group now.
    pub fn kill(&self) {
        kill_group(self.0);
    }

    /// The group's leader exited and was reaped: its id may be reused from now on, so the
    /// guard must not signal it any more.
    pub fn disarm(self) {
        std::mem::forget(self);
    }
}

impl Drop for KillGroup {
    fn drop(&mut self) {
        kill_group(self.0);
    }
}

/// A child that leads its own process group (spawned with `process_group(0)`): the group is
/// killed and the child reaped on drop — unless the test already saw the child exit (its id
/// may be reused then).
pub struct Group {
    child: Child,
    exited: bool,
}

impl Group {
    pub fn new(child: Child) -> Group {
        Group {
            child,
            exited: false,
        }
    }

    /// The leader's pid (the group's id).
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// Sends `signal` to the leader alone.
    pub fn signal(&self, signal: nix::sys::signal::Signal) {
        if let Ok(pid) = i32::try_from(self.child.id()) {
            let _ = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), signal);
        }
    }

    /// Waits up to [`PATIENCE`] for the leader to exit (and reaps it); whether it did.
    pub fn wait_exit(&mut self) -> bool {
        let start = Instant::now();
        while start.elapsed() < PATIENCE {
            if let Ok(Some(_)) = self.child.try_wait() {
                self.exited = true;
                return true;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        false
    }
}

impl Drop for Group {
    fn drop(&mut self) {
        if !self.exited {
            kill_group(self.child.id());
            let _ = self.child.wait();
        }
    }
}

/// Polls `pred` until it holds; fails naming `what` after [`PATIENCE`].
pub fn wait_until(what: &str, mut pred: impl FnMut() -> bool) {
    let start = Instant::now();
    while !pred() {
        assert!(start.elapsed() < PATIENCE, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// [`wait_until`] in async code: sleeps on tokio's timer between the polls.
pub async fn wait_until_async(what: &str, mut pred: impl FnMut() -> bool) {
    let start = Instant::now();
    while !pred() {
        assert!(start.elapsed() < PATIENCE, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Runs `status` (a `status --json` command, e.g. with a client's `--layout` and environment)
/// until it shows `server` connected; its output then.
pub fn wait_connected(status: &mut Command, server: &str) -> String {
    let start = Instant::now();
    loop {
        let out = status.output().expect("status runs");
        let servers: Vec<Value> = serde_json::from_slice(&out.stdout).unwrap_or_default();
        if state_of(&servers, server) == "connected" {
            return String::from_utf8_lossy(&out.stdout).into_owned();
        }
        assert!(
            start.elapsed() < PATIENCE,
            "{server} never connected: {}",
            output_text(&out)
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

/// `command` as a real client runs in a test: nothing of the machine's environment (no
/// credentials, no proxies) but `PATH`, the test's `home`, its own state and runtime dirs, in
/// the project directory, no stdin.
pub fn client_env(mut command: Command, p: &Project, home: &Path) -> Command {
    command
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("HOME", home)
        .env("XDG_STATE_HOME", p.path("state"))
        .env("XDG_RUNTIME_DIR", p.path("run"))
        .current_dir(p.path("project"))
        .stdin(Stdio::null());
    command
}

/// The hot reload a client that lists tools once per session gets: of the results of the
/// model's calls of `server`'s env tool (`GREETING`), the first came from the server as
/// configured, the last from the server after the user's edit, and the edit restarted it
/// exactly once.
pub fn assert_edit_reached_the_server(outputs: &[String], p: &Project, server: &str, report: &str) {
    assert!(
        outputs
            .first()
            .is_some_and(|o| o.contains("before-the-edit")),
        "the first call reached the server as configured: {report}"
    );
    assert!(
        outputs.last().is_some_and(|o| o.contains("after-the-edit")),
        "a call after the edit reached the edited server in the same session: {report}"
    );
    assert_eq!(
        p.spawns(server),
        2,
        "the edit restarted {server} once: {report}"
    );
}

/// A finished command's stdout, then its stderr.
pub fn output_text(out: &std::process::Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The text content of a tool's result, one line per text item.
pub fn text(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|c| c.as_text().map(|t| t.text.clone()))
        .collect::<Vec<_>>()
        .join("\n")
}

/// Calls the tool `name` with `args` (an object, or nothing) through `peer`; a tool error is a
/// result, a protocol error fails the test.
pub async fn call(peer: &Peer<RoleClient>, name: &str, args: Value) -> CallToolResult {
    let mut params = CallToolRequestParams::new(name.to_owned());
    if let Value::Object(map) = args {
        params = params.with_arguments(map);
    }
    tokio::time::timeout(PATIENCE, peer.call_tool(params))
        .await
        .expect("tools/call in time")
        .expect("tools/call answers (a tool error is a result)")
}

/// The names of every tool `peer` lists.
pub async fn tool_names(peer: &Peer<RoleClient>) -> Vec<String> {
    let tools = tokio::time::timeout(PATIENCE, peer.list_all_tools())
        .await
        .expect("tools/list in time")
        .expect("tools/list");
    tools.into_iter().map(|t| t.name.into_owned()).collect()
}

/// What a [`Listener`] client heard from the server it is connected to.
#[derive(Debug)]
pub enum Heard {
    ToolsChanged,
    /// `notifications/resources/list_changed` (also how a changed skill list is announced).
    ResourcesChanged,
    Progress(f64),
    /// A server's `elicitation/create` (relayed by the gateway): its message.
    Elicited(String),
    /// A `notifications/message`: its level, logger and data (a string's text, else JSON).
    Log {
        level: String,
        logger: Option<String>,
        data: String,
    },
}

/// An MCP client that reports what it hears on `heard` and fills in every form it is asked
/// to — except one whose message says it is never answered.
#[derive(Clone)]
pub struct Listener {
    pub heard: mpsc::UnboundedSender<Heard>,
}

impl ClientHandler for Listener {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        let _ = self.heard.send(Heard::ToolsChanged);
    }

    async fn on_resource_list_changed(&self, _context: NotificationContext<RoleClient>) {
        let _ = self.heard.send(Heard::ResourcesChanged);
    }

    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let _ = self.heard.send(Heard::Progress(params.progress));
    }

    #[allow(deprecated)]
    async fn on_logging_message(
        &self,
        params: rmcp::model::LoggingMessageNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        let level = serde_json::to_value(params.level)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default();
        let data = match params.data {
            Value::String(text) => text,
            other => other.to_string(),
        };
        let _ = self.heard.send(Heard::Log {
            level,
            logger: params.logger,
            data,
        });
    }

    async fn create_elicitation(
        &self,
        request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, rmcp::ErrorData> {
        let message = match &request {
            ElicitRequestParams::FormElicitationParams { message, .. } => message.clone(),
            _ => String::new(),
        };
        let _ = self.heard.send(Heard::Elicited(message.clone()));
        if message.contains("never answered") {
            std::future::pending::<()>().await;
        }
        Ok(ElicitResult::new(ElicitationAction::Accept)
            .with_content(json!({"username": "ada", "email": "ada@example.org"})))
    }

    fn get_info(&self) -> ClientConfig {
        let mut capabilities = ClientCapabilities::default();
        capabilities.elicitation = Some(ElicitationCapability::default());
        ClientConfig::new(capabilities, Implementation::new("serve-test", "0"))
    }
}

/// A running `serve` (`--no-daemon` unless started with [`Served::spawn`]; its own process
/// group, killed on drop) with a [`Listener`] client on its stdio.
pub struct Served {
    child: tokio::process::Child,
    client: Option<RunningService<RoleClient, Listener>>,
    /// What the client heard.
    pub heard: mpsc::UnboundedReceiver<Heard>,
    log: PathBuf,
    group: KillGroup,
}

/// `serve` for the project directory `project` of `p` (`"project"`: its own) with `--debounce-ms
/// debounce_ms`, its stderr appended to `serve.log`: the command (the caller adds the daemon's
/// `XDG_RUNTIME_DIR` or `--no-daemon`, and any environment) and the log, for [`Served::spawn`].
pub fn serve_command(p: &Project, project: &str, debounce_ms: u64) -> (Command, PathBuf) {
    let log = p.path("serve.log");
    let err = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(&log)
        .expect("log");
    let mut command = Command::new(cli());
    command
        .arg("serve")
        .args(p.flags_in(project))
        .args(["--debounce-ms", &debounce_ms.to_string()])
        .stderr(err);
    (command, log)
}

impl Served {
    pub async fn start(p: &Project) -> Served {
        Served::start_with(p, &[]).await
    }

    /// `serve` with `extra` flags; its stderr in `serve.log`.
    pub async fn start_with(p: &Project, extra: &[&str]) -> Served {
        let log = p.path("serve.log");
        let err = fs::File::create(&log).expect("log file");
        let mut command = Command::new(cli());
        command
            .args(["serve", "--no-daemon"])
            .args(p.flags())
            .args(["--debounce-ms", "150"])
            .args(extra)
            .env("MCP_RECONCILE_LOG", "info")
            .stderr(err);
        Served::spawn(command, log).await
    }

    /// Starts `command` (a `serve` whose stderr goes to `log`) in its own process group and
    /// completes the MCP handshake on its stdio.
    /// `serve` with `extra` on the chosen backend (the daemon, returned: stopped when dropped),
    /// logging at info to `serve.log` (appended: a restarted session logs on).
    pub async fn logged(p: &Project, daemon: bool, extra: &[&str]) -> (Served, Option<Group>) {
        Served::logged_with(p, daemon, extra, &[]).await
    }

    /// [`Served::logged`] with `env` set for `serve`.
    pub async fn logged_with(
        p: &Project,
        daemon: bool,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> (Served, Option<Group>) {
        let log = p.path("serve.log");
        let mut command = Command::new(cli());
        command
            .arg("serve")
            .args(p.flags())
            .args(extra)
            .envs(env.iter().copied())
            .env("MCP_RECONCILE_LOG", "info")
            .stderr(
                fs::OpenOptions::new()
                    .create(true)
                    .append(true)
                    .open(&log)
                    .expect("log"),
            );
        let daemon = on_backend(p, &mut command, daemon);
        (Served::spawn(command, log).await, daemon)
    }

    pub async fn spawn(mut command: Command, log: PathBuf) -> Served {
        command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .process_group(0);
        let mut child = tokio::process::Command::from(command)
            .spawn()
            .expect("serve starts");
        let group = KillGroup(child.id().expect("a pid"));
        let stdin = child.stdin.take().expect("stdin");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, heard) = mpsc::unbounded_channel();
        let client = tokio::time::timeout(PATIENCE, Listener { heard: tx }.serve((stdout, stdin)))
            .await
            .expect("handshake in time")
            .unwrap_or_else(|e| {
                panic!(
                    "serve completes the MCP handshake: {e}; log:\n{}",
                    fs::read_to_string(&log).unwrap_or_default()
                )
            });
        Served {
            child,
            client: Some(client),
            heard,
            log,
            group,
        }
    }

    pub fn client(&self) -> &RunningService<RoleClient, Listener> {
        self.client.as_ref().expect("client open")
    }

    /// The pid of the `serve` process.
    pub fn pid(&self) -> u32 {
        self.group.0
    }

    /// serve's stderr so far.
    pub fn log(&self) -> String {
        fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub async fn tool_names(&self) -> Vec<String> {
        tool_names(self.client()).await
    }

    /// The tool list once it names `tool` (fails with the log after [`PATIENCE`]).
    pub async fn wait_tool(&self, tool: &str) -> Vec<String> {
        tokio::time::timeout(PATIENCE, async {
            loop {
                let tools = self.tool_names().await;
                if tools.iter().any(|t| t == tool) {
                    return tools;
                }
                tokio::time::sleep(std::time::Duration::from_millis(50)).await;
            }
        })
        .await
        .unwrap_or_else(|_| panic!("{tool} never listed; log:\n{}", self.log()))
    }

    pub async fn prompt_names(&self) -> Vec<String> {
        let prompts = tokio::time::timeout(PATIENCE, self.client().list_all_prompts())
            .await
            .expect("prompts/list in time")
            .expect("prompts/list");
        prompts.into_iter().map(|p| p.name).collect()
    }

    pub async fn call(&self, name: &str, args: Value) -> CallToolResult {
        call(self.client(), name, args).await
    }

    /// The text of [`Served::call`]'s result.
    pub async fn call_text(&self, name: &str, args: Value) -> String {
        text(&self.call(name, args).await)
    }

    /// Calls `tool`, of a server that keeps failing to start, until the answer says it is
    /// backing off (a call that lands while a retry connects hears "still connecting"); that
    /// answer, after checking it says when it is retried and its stderr's last line.
    pub async fn backing_off(&self, server: &str, tool: &str) -> String {
        let start = Instant::now();
        let message = loop {
            let result = self.call(tool, json!({"text": "x"})).await;
            assert_eq!(result.is_error, Some(true), "{result:?}");
            let message = text(&result);
            assert!(
                message.contains(&format!("server \"{server}\""))
                    && !message.contains("may be disconnected"),
                "{message}"
            );
            if message.contains("backing off") {
                break message;
            }
            assert!(message.contains("still connecting"), "{message}");
            assert!(start.elapsed() < PATIENCE, "never backing off: {message}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        };
        assert!(message.contains("retry in "), "{message}");
        assert!(
            message.contains("fixture: stderr line 1 of 1"),
            "the stderr tail says why: {message}"
        );
        message
    }

    /// Lists the tools until `pred` holds for their names.
    pub async fn wait_tools(&self, what: &str, pred: impl Fn(&[String]) -> bool) {
        let start = Instant::now();
        loop {
            let names = self.tool_names().await;
            if pred(&names) {
                return;
            }
            assert!(
                start.elapsed() < PATIENCE,
                "timed out waiting for {what}: {names:?}; log:\n{}",
                self.log()
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Waits for the next progress notification (skipping what else was heard); its value.
    pub async fn progress(&mut self) -> f64 {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match tokio::time::timeout(left, self.heard.recv()).await {
                Ok(Some(Heard::Progress(value))) => return value,
                Ok(Some(
                    Heard::ToolsChanged
                    | Heard::ResourcesChanged
                    | Heard::Elicited(_)
                    | Heard::Log { .. },
                )) => {}
                _ => panic!("no progress; log:\n{}", self.log()),
            }
        }
    }

    /// Waits for the next `tools/list_changed`, skipping what else was heard.
    pub async fn tools_changed(&mut self) {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match tokio::time::timeout(left, self.heard.recv()).await {
                Ok(Some(Heard::ToolsChanged)) => return,
                Ok(Some(
                    Heard::Progress(_)
                    | Heard::ResourcesChanged
                    | Heard::Elicited(_)
                    | Heard::Log { .. },
                )) => {}
                _ => panic!("no tools/list_changed; log:\n{}", self.log()),
            }
        }
    }

    /// Closes the client's side (stdin EOF) and waits for `serve` to exit.
    pub async fn close(mut self) -> std::process::ExitStatus {
        if let Some(client) = self.client.take() {
            let _ = client.cancel().await;
        }
        let status = tokio::time::timeout(PATIENCE, self.child.wait())
            .await
            .expect("serve exits once its client is gone")
            .expect("wait");
        // Reaped: its pid may be reused, so the guard must not signal it any more.
        let Served { group, .. } = self;
        group.disarm();
        status
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

/// The pids of `serve` processes this binary started as children of `parent`.
pub fn nested_serves(parent: u32) -> Vec<u32> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
            // `pid (comm) state ppid …`: the fields after the last `)`.
            let ppid = stat
                .rsplit_once(')')
                .and_then(|(_, rest)| rest.split_whitespace().nth(1)?.parse::<u32>().ok());
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let args: Vec<&[u8]> = cmdline.split(|b| *b == 0).collect();
            ppid == Some(parent) && args.get(1) == Some(&&b"serve"[..])
        })
        .collect()
}

/// Builds the conformance suite's client (`examples/conformance_client.rs`) next to this
/// test's binaries and returns its path.
pub fn conformance_client() -> PathBuf {
    let exe = std::env::current_exe().expect("test binary");
    let profile_dir = exe
        .parent()
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .expect("target/<profile>");
    let target_dir = profile_dir.parent().expect("target dir");
    let status = Command::new(env!("CARGO"))
        .args([
            "build",
            "-q",
            "-p",
            "mcp-reconcile",
            "--example",
            "conformance_client",
        ])
        .env("CARGO_TARGET_DIR", target_dir)
        .status()
        .expect("cargo runs");
    assert!(status.success(), "building the conformance client failed");
    profile_dir.join("examples/conformance_client")
}

/// `serve --http 127.0.0.1:0 --no-auth --passthrough NAME` for the project `p`, in its own
/// process group (killed and reaped when the guard drops): the guard and the URL it printed.
pub fn serve_passthrough_no_auth(p: &Project, name: &str) -> (Group, String) {
    use std::io::BufRead;
    use std::os::unix::process::CommandExt;
    let mut serve = Command::new(cli())
        .args([
            "serve",
            "--http",
            "127.0.0.1:0",
            "--no-auth",
            "--passthrough",
            name,
        ])
        .args(p.flags())
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .process_group(0)
        .spawn()
        .expect("serve starts");
    let stdout = serve.stdout.take().expect("stdout");
    let group = Group::new(serve);
    let mut url = String::new();
    std::io::BufReader::new(stdout)
        .read_line(&mut url)
        .expect("serve prints its URL");
    (group, url.trim().to_owned())
}

/// Fails unless Node 20 or later is on `PATH`; `who` is what needs it.
pub fn require_node_20(who: &str) {
    let version = Command::new("node")
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_owned())
        .unwrap_or_default();
    let major: u32 = version
        .trim_start_matches('v')
        .split('.')
        .next()
        .and_then(|m| m.parse().ok())
        .unwrap_or(0);
    assert!(
        major >= 20,
        "{who} needs Node 20 or later on PATH; found {version:?}"
    );
}

/// A daemon of the test's own, listening in the private runtime dir `runtime` (a `serve` given
/// `XDG_RUNTIME_DIR=runtime` attaches to it, never to the user's), in its own process group
/// (killed on drop); it exits soon after its last session.
pub fn start_daemon(p: &Project, runtime: &Path) -> Group {
    start_daemon_idle(p, runtime, Duration::from_millis(800))
}

/// [`start_daemon`] for a real client, which may take seconds to start its `serve`: the
/// daemon waits [`PATIENCE`] for a session. (After 800 ms without one it would exit, and the
/// client's `serve` would start a daemon of its own, outside the test's process groups.)
pub fn start_daemon_for_client(p: &Project, runtime: &Path) -> Group {
    start_daemon_idle(p, runtime, PATIENCE)
}

fn start_daemon_idle(p: &Project, runtime: &Path, idle: Duration) -> Group {
    start_daemon_with(p, runtime, 300, idle)
}

/// A daemon of the test's own in `runtime` (its log `daemon.log`), with the drain and idle exit
/// given, once it listens. Its process group is the test's from the spawn on, so a daemon that
/// never listens is stopped too.
pub fn start_daemon_with(p: &Project, runtime: &Path, drain_ms: u64, idle: Duration) -> Group {
    use std::os::unix::process::CommandExt;
    let log = fs::File::create(p.path("daemon.log")).expect("log");
    let child = Command::new(cli())
        .args([
            "daemon",
            "--drain-ms",
            &drain_ms.to_string(),
            "--idle-exit-ms",
        ])
        .arg(idle.as_millis().to_string())
        .env("XDG_RUNTIME_DIR", runtime)
        .env("MCP_RECONCILE_LOG", "info")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        .process_group(0)
        .spawn()
        .expect("daemon starts");
    let daemon = Group::new(child);
    let socket = runtime.join("mcp-reconcile/daemon.sock");
    let start = std::time::Instant::now();
    while std::os::unix::net::UnixStream::connect(&socket).is_err() {
        assert!(start.elapsed() < PATIENCE, "the daemon never listened");
        std::thread::sleep(std::time::Duration::from_millis(25));
    }
    daemon
}
