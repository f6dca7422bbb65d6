//! `--layout opencode` (SPEC §15): a real `watch` over OpenCode's own `opencode.json(c)` files
//! at its real default paths under a temp `HOME` — the user's (JSON with comments, V1 and V2
//! entries), the project's (gated), the `.opencode/` directory's and the administrator's —
//! with every kind of edit applied live, an approval round trip, and `{file:}` read bounded
//! and never shown.

use crate::common;

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use common::machine::{reason, tools};
use common::{cli, fixture, pid_of, state_of, Group, Project, PATIENCE};
use serde_json::{json, Value};

/// A temp machine for OpenCode: a home, a project, a stand-in for `/etc/opencode`.
struct Machine(Project);

impl Machine {
    fn new() -> Self {
        let p = Project::new();
        for dir in ["home/.config", "etc"] {
            fs::create_dir_all(p.path(dir)).expect("mkdir");
        }
        Machine(p)
    }

    fn home(&self) -> PathBuf {
        self.0.path("home")
    }

    fn project(&self) -> PathBuf {
        self.0.path("project")
    }

    /// The user's `opencode.jsonc`.
    fn user_file(&self) -> PathBuf {
        self.home().join(".config/opencode/opencode.jsonc")
    }

    /// A fixture server as an OpenCode V1 entry: `type: local`, `command` one argv array.
    fn server(&self, name: &str, tools: &str) -> Value {
        json!({
            "type": "local",
            "command": [fixture().to_string_lossy(), "--name", name, "--tools", tools,
                        "--marker", self.0.marker(name).to_string_lossy()],
        })
    }

    fn write(&self, path: &Path, text: &str) {
        fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        let tmp = path.with_extension("tmp~");
        fs::write(&tmp, text).expect("write");
        fs::rename(&tmp, path).expect("rename");
    }

    fn write_json(&self, path: &Path, value: &Value) {
        self.write(path, &serde_json::to_string_pretty(value).expect("json"));
    }

    /// A command of this host with the machine's environment and flags after `args`.
    fn command(&self, args: &[&str]) -> Command {
        let mut command = Command::new(cli());
        command
            .args(args)
            .env("HOME", self.home())
            .env("XDG_CONFIG_HOME", self.home().join(".config"))
            .env("TEAM_TOKEN", "from-the-environment")
            .env_remove("OPENCODE_CONFIG")
            .env_remove("OPENCODE_CONFIG_DIR")
            .env_remove("OPENCODE_DISABLE_PROJECT_CONFIG")
            .args(self.0.flags())
            .args(["--layout", "opencode", "--system-settings"])
            .arg(self.0.path("etc/managed.json"))
            .stdin(Stdio::null());
        command
    }

    fn run(&self, args: &[&str]) -> std::process::Output {
        self.command(args).output().expect("cli runs")
    }

    /// Everything a user reads about the servers: `status` as text and as JSON, and `plan`.
    fn shown(&self) -> String {
        ["status", "plan"]
            .iter()
            .map(|cmd| {
                let out = self.run(&[cmd]);
                String::from_utf8_lossy(&out.stdout).into_owned()
                    + &String::from_utf8_lossy(&out.stderr)
            })
            .chain([String::from_utf8_lossy(&self.run(&["status", "--json"]).stdout).into_owned()])
            .collect()
    }

    fn status(&self) -> Vec<Value> {
        let out = self.run(&["status", "--json"]);
        serde_json::from_slice::<Value>(&out.stdout)
            .ok()
            .and_then(|v| v.as_array().cloned())
            .unwrap_or_default()
    }

    fn log(&self) -> String {
        fs::read_to_string(self.0.path("watch.log")).unwrap_or_default()
    }

    /// Polls `status --json` until `pred` holds.
    fn wait(&self, what: &str, pred: impl Fn(&[Value]) -> bool) -> Vec<Value> {
        let start = std::time::Instant::now();
        loop {
            let status = self.status();
            if self.0.path("state").exists() && pred(&status) {
                return status;
            }
            assert!(
                start.elapsed() < PATIENCE,
                "timed out waiting for {what}; status: {status:#?}\nlog:\n{}",
                self.log()
            );
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
    }

    fn watch(&self) -> Group {
        let log = fs::File::create(self.0.path("watch.log")).expect("log");
        let err = log.try_clone().expect("log");
        let mut command = self.command(&[
            "watch",
            "--no-daemon",
            "--no-prompt",
            "--debounce-ms",
            "150",
        ]);
        command.stdout(log).stderr(err);
        std::os::unix::process::CommandExt::process_group(&mut command, 0);
        Group::new(command.spawn().expect("watch starts"))
    }
}

/// OpenCode's user (JSONC, V1 and V2), project (gated), `.opencode/` and administrator files
/// are read live at its paths: `enabled: false` keeps a server off, and add, change, remove
/// and switch-off edits are each applied to the one server they touch.
#[test]
fn opencodes_files_are_read_live_in_every_scope() {
    let m = Machine::new();
    let mut off = m.server("off", "echo");
    off["enabled"] = json!(false);
    let v2user = json!({ "type": "local", "command": m.server("v2user", "echo")["command"] });
    let user = |user1: &Value, extra: &str, v2: &Value| {
        format!(
            "// OpenCode's own comments stay readable\n{{\n  \"$schema\": \"https://opencode.ai/config.json\",\n  \
             \"mcp\": {{\n    \"user1\": {user1},\n    \"off\": {off}, {extra}\n    \
             \"servers\": {v2}\n  }}\n}}\n"
        )
    };
    let servers = json!({ "v2user": v2user });
    m.write(
        &m.user_file(),
        &user(&m.server("user1", "echo"), "", &servers),
    );
    m.write_json(
        &m.project().join("opencode.json"),
        &json!({ "mcp": { "proj": m.server("proj", "echo") } }),
    );
    m.write_json(
        &m.0.path("etc/opencode.json"),
        &json!({ "mcp": { "admin1": m.server("admin1", "echo") } }),
    );
    let _watch = m.watch();
    let status = m.wait("user, V2 and administrator up, project pending", |s| {
        ["user1", "v2user", "admin1"]
            .iter()
            .all(|n| state_of(s, n) == "connected")
            && reason(s, "proj") == "pending_approval"
    });
    assert_ne!(state_of(&status, "off"), "connected", "{status:#?}");
    assert!(
        !m.0.marker("off").exists(),
        "a switched-off server never starts"
    );
    let admin = pid_of(&status, "admin1");
    let v2 = pid_of(&status, "v2user");

    // Add: a new user server starts, the others keep their processes.
    let added = format!("\n    \"user2\": {},", m.server("user2", "echo"));
    m.write(
        &m.user_file(),
        &user(&m.server("user1", "echo"), added.as_str(), &servers),
    );
    let status = m.wait("user2 added", |s| state_of(s, "user2") == "connected");
    assert_eq!(pid_of(&status, "admin1"), admin);
    let user1 = pid_of(&status, "user1");

    // Change: user1's tools change and it restarts; v2user is untouched.
    m.write(
        &m.user_file(),
        &user(&m.server("user1", "echo,add"), added.as_str(), &servers),
    );
    let status = m.wait("user1 changed", |s| tools(s, "user1") == json!(2));
    assert_ne!(pid_of(&status, "user1"), user1);
    assert_eq!(pid_of(&status, "v2user"), v2);

    // Switch off from the project's `.opencode/` (OpenCode's switch-only entry), and remove
    // the V2 server from the user's file.
    m.write_json(
        &m.project().join(".opencode/opencode.json"),
        &json!({ "mcp": { "user2": { "enabled": false } } }),
    );
    let status = m.wait("user2 switched off", |s| {
        state_of(s, "user2") != "connected"
    });
    assert_eq!(pid_of(&status, "user1"), pid_of(&m.status(), "user1"));
    m.write(
        &m.user_file(),
        &user(&m.server("user1", "echo,add"), added.as_str(), &json!({})),
    );
    m.wait("v2user removed", |s| state_of(s, "v2user") == "absent");

    // The project's entry runs once approved.
    let out = m.run(&["approve", "proj"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    m.wait("proj approved", |s| state_of(s, "proj") == "connected");
}

/// A project entry's `{file:}` is read bounded (a FIFO in its place is that entry's error and
/// blocks nothing), what it read is never shown (`status`, `plan`, the watch log show
/// `{file:PATH}` as written), and it runs only once approved.
#[test]
fn a_file_variable_is_read_bounded_and_never_shown() {
    let m = Machine::new();
    m.write(&m.project().join("secret.txt"), "top-secret-value-42\n");
    m.write(&m.project().join("prefix.txt"), " p_\n");
    nix::unistd::mkfifo(&m.project().join("pipe"), nix::sys::stat::Mode::S_IRWXU).expect("fifo");
    let mut secret = m.server("proj", "echo");
    secret["environment"] = json!({ "TOKEN": "{file:secret.txt}", "TEAM": "{env:TEAM_TOKEN}" });
    let mut arg = m.server("argue", "echo");
    arg["environment"] = json!({
        "FIXTURE_TOOL_PREFIX": "{file:./prefix.txt}",
        "TOKEN": "{file:./secret.txt}",
    });
    let mut piped = m.server("piped", "echo");
    piped["environment"] = json!({ "TOKEN": "{file:pipe}" });
    m.write_json(
        &m.project().join("opencode.json"),
        &json!({ "mcp": { "proj": secret, "argue": arg, "piped": piped } }),
    );
    m.write_json(
        &m.user_file(),
        &json!({ "mcp": { "user1": m.server("user1", "echo") } }),
    );
    let _watch = m.watch();
    m.wait("user up, project pending, the FIFO refused", |s| {
        state_of(s, "user1") == "connected"
            && reason(s, "proj") == "pending_approval"
            && reason(s, "argue") == "pending_approval"
    });
    let shown = m.shown() + &m.log();
    assert!(
        shown.contains("piped") && shown.contains("not a regular file"),
        "{shown}"
    );
    assert!(
        shown.contains("{file:./secret.txt}"),
        "the entry as written: {shown}"
    );
    let out = m.run(&["approve", "argue"]);
    let approve =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{approve}");
    m.wait("argue approved", |s| state_of(s, "argue") == "connected");
    let shown = m.shown() + &m.log() + &approve;
    assert!(
        !shown.contains("top-secret-value-42"),
        "the file's text shown:\n{shown}"
    );
}
