//! A temp machine for the client-layout tests: a home directory, a project and a stand-in for
//! `/etc`, this host's own state and approvals, and a real `watch --layout <client>` over
//! files written in the client's format at its real default paths. Every client variable that
//! moves a client's files is removed from the commands' environment, so the machine's files are
//! the ones read.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{json, Value};

use super::{cli, fixture, output_text, Group, PATIENCE};

/// The variables that move a client's files elsewhere than under the temp home.
const MOVING_VARS: &[&str] = &[
    "CLAUDE_CONFIG_DIR",
    "CODEX_HOME",
    "GEMINI_CLI_HOME",
    "GEMINI_CLI_SYSTEM_SETTINGS_PATH",
    "GEMINI_CLI_SYSTEM_DEFAULTS_PATH",
    "GEMINI_CLI_TRUSTED_FOLDERS_PATH",
    "GEMINI_CLI_TRUST_WORKSPACE",
    "GEMINI_RESTRICTED_MODE",
    "COPILOT_HOME",
    "CLINE_MCP_SETTINGS_PATH",
    "CLINE_DATA_DIR",
    "CLINE_DIR",
    "CRUSH_GLOBAL_CONFIG",
    "CRUSH_GLOBAL_DATA",
    "FLATPAK_XDG_CONFIG_HOME",
    "GOOSE_PATH_ROOT",
    "OPENCODE_CONFIG",
    "OPENCODE_CONFIG_DIR",
    "OPENCODE_DISABLE_PROJECT_CONFIG",
];

/// A temp machine for one layout.
pub struct Machine {
    dir: tempfile::TempDir,
    /// The `--layout` every command gets.
    pub layout: &'static str,
    /// The session's project directory, relative to the machine's root.
    project: &'static str,
    /// Variables every command gets besides the machine's own.
    env: Vec<(&'static str, String)>,
}

impl Machine {
    pub fn new(layout: &'static str) -> Self {
        Machine::in_project(layout, "project")
    }

    /// A machine whose project is `project` (a path below its root, e.g. a git checkout's
    /// subdirectory).
    pub fn in_project(layout: &'static str, project: &'static str) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        for sub in ["home", project, "etc"] {
            fs::create_dir_all(dir.path().join(sub)).expect("mkdir");
        }
        Machine {
            dir,
            layout,
            project,
            env: Vec::new(),
        }
    }

    /// The machine with `key=value` in every command's environment.
    pub fn with_env(mut self, key: &'static str, value: &str) -> Self {
        self.env.push((key, value.to_owned()));
        self
    }

    pub fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    pub fn home(&self) -> PathBuf {
        self.path("home")
    }

    pub fn project(&self) -> PathBuf {
        self.path(self.project)
    }

    /// The file the fixture server `name` notes its starts in.
    pub fn marker(&self, name: &str) -> PathBuf {
        self.path(&format!("{name}.marker"))
    }

    /// A fixture server's `command` and `args`, offering `tools`.
    pub fn argv(&self, name: &str, tools: &str) -> (String, Value) {
        (
            fixture().to_string_lossy().into_owned(),
            json!([
                "--name",
                name,
                "--tools",
                tools,
                "--marker",
                self.marker(name).to_string_lossy()
            ]),
        )
    }

    /// A fixture server entry as JSON (`command` + `args`).
    pub fn server(&self, name: &str, tools: &str) -> Value {
        let (command, args) = self.argv(name, tools);
        json!({ "command": command, "args": args })
    }

    /// Writes `path` atomically, as editors do.
    pub fn write(&self, path: &Path, text: &str) {
        fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        let tmp = path.with_extension("tmp~");
        fs::write(&tmp, text).expect("write");
        fs::rename(&tmp, path).expect("rename");
    }

    pub fn write_json(&self, path: &Path, value: &Value) {
        self.write(path, &serde_json::to_string_pretty(value).expect("json"));
    }

    /// The flags every command gets: the layout, the project, this host's own files, and the
    /// administrator's files moved into the temp machine.
    pub fn flags(&self) -> Vec<String> {
        [
            "--layout",
            self.layout,
            "--project",
            &self.project().to_string_lossy(),
            "--approvals",
            &self.path("approvals.json").to_string_lossy(),
            "--state-dir",
            &self.path("state").to_string_lossy(),
            "--system-settings",
            &self.path("etc/managed-settings.json").to_string_lossy(),
        ]
        .map(str::to_owned)
        .to_vec()
    }

    /// `mcp-reconcile` with the machine's home and environment.
    pub fn command(&self) -> Command {
        let mut command = Command::new(cli());
        command
            .env("HOME", self.home())
            .env("XDG_CONFIG_HOME", self.home().join(".config"))
            .env("XDG_DATA_HOME", self.home().join(".local/share"))
            .env("XDG_STATE_HOME", self.path("xdg-state"))
            .env("TEAM_TOKEN", "from-the-environment")
            .stdin(Stdio::null());
        for var in MOVING_VARS {
            command.env_remove(var);
        }
        for (key, value) in &self.env {
            command.env(key, value);
        }
        command
    }

    /// `mcp-reconcile ARGS` with the machine's flags, run to its end.
    pub fn run(&self, args: &[&str]) -> std::process::Output {
        self.command()
            .args(args)
            .args(self.flags())
            .output()
            .expect("cli runs")
    }

    /// `watch` in its own process group, logging to `watch.log`.
    pub fn watch(&self) -> Group {
        let log = fs::File::create(self.path("watch.log")).expect("log");
        let err = log.try_clone().expect("log");
        let mut command = self.command();
        command
            .args([
                "watch",
                "--no-daemon",
                "--no-prompt",
                "--debounce-ms",
                "150",
            ])
            .args(self.flags())
            .stdout(log)
            .stderr(err);
        std::os::unix::process::CommandExt::process_group(&mut command, 0);
        Group::new(command.spawn().expect("watch starts"))
    }

    /// `status --json` (empty while it fails, e.g. before the session's state exists).
    pub fn status(&self) -> Vec<Value> {
        let out = self.run(&["status", "--json"]);
        serde_json::from_slice::<Value>(&out.stdout)
            .ok()
            .and_then(|v| v.as_array().cloned())
            .unwrap_or_default()
    }

    /// Polls `status --json` until `pred` holds.
    pub fn wait(&self, what: &str, pred: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        let start = std::time::Instant::now();
        loop {
            if self.path("state").exists() {
                let status = self.status();
                if pred(&status) {
                    return status;
                }
            }
            assert!(
                start.elapsed() < PATIENCE,
                "timed out waiting for {what}; status: {:#?}\nlog:\n{}",
                self.status(),
                self.log()
            );
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }

    /// What `watch` printed so far.
    pub fn log(&self) -> String {
        fs::read_to_string(self.path("watch.log")).unwrap_or_default()
    }

    /// Polls the watch log until `pred` holds.
    pub fn wait_output(&self, what: &str, pred: impl Fn(&str) -> bool) {
        let start = std::time::Instant::now();
        while !pred(&self.log()) {
            assert!(
                start.elapsed() < PATIENCE,
                "timed out waiting for {what}; log:\n{}",
                self.log()
            );
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }

    /// `mcp-reconcile VERB NAME` (`approve`, `reject`, …), which must succeed.
    pub fn decide(&self, verb: &str, name: &str) {
        let out = self.run(&[verb, name]);
        assert!(out.status.success(), "{verb} failed: {}", output_text(&out));
    }

    pub fn approve(&self, name: &str) {
        self.decide("approve", name);
    }
}

/// The reason `status` gives for the server `name` (empty when none).
pub fn reason<'a>(status: &'a [Value], name: &str) -> &'a str {
    status
        .iter()
        .find(|s| s["name"] == name)
        .and_then(|s| s["reason"].as_str())
        .unwrap_or("")
}

/// The tools `status` lists for the server `name` (`null` when it has no entry).
pub fn tools(status: &[Value], name: &str) -> Value {
    status
        .iter()
        .find(|s| s["name"] == name)
        .map_or(Value::Null, |s| s["tools"].clone())
}
