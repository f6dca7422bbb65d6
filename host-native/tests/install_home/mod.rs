//! A scratch home for `install` / `uninstall` runs: a temp directory with `home/`, `project/`
//! and the state directory, and the CLI run there with only that home's environment.
#![allow(dead_code)]

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::Value;

use crate::common::{cli, output_text};

/// A temp directory with a home and a project in it.
pub struct Home {
    pub dir: tempfile::TempDir,
}

impl Home {
    /// A fresh one.
    pub fn new() -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        fs::create_dir_all(dir.path().join("home")).expect("home");
        fs::create_dir_all(dir.path().join("project")).expect("project");
        Home { dir }
    }

    /// `rel` inside the temp directory.
    pub fn path(&self, rel: &str) -> PathBuf {
        self.dir.path().join(rel)
    }

    /// The home directory.
    pub fn home(&self) -> PathBuf {
        self.path("home")
    }

    /// Writes `text` to `rel` under the home, making its directories.
    pub fn write(&self, rel: &str, text: &str) -> PathBuf {
        let path = self.home().join(rel);
        fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        fs::write(&path, text).expect("write");
        path
    }

    /// The CLI with this home's environment.
    pub fn command(&self) -> Command {
        self.command_of(&cli())
    }

    /// `program` in the project directory with this home's environment.
    pub fn command_of(&self, program: &Path) -> Command {
        let mut command = Command::new(program);
        command
            .env("HOME", self.home())
            .env("XDG_STATE_HOME", self.path("state"))
            .env("XDG_CONFIG_HOME", self.home().join(".config"))
            .env("XDG_DATA_HOME", self.home().join(".local/share"))
            .env_remove("CLAUDE_CONFIG_DIR")
            .env_remove("CODEX_HOME")
            .env_remove("GEMINI_CLI_HOME")
            .env_remove("QWEN_HOME")
            .env_remove("COPILOT_HOME")
            .current_dir(self.path("project"))
            .stdin(Stdio::null());
        command
    }

    /// Runs the CLI with `args`: whether it succeeded, and what it said.
    pub fn run(&self, args: &[&str]) -> (bool, String) {
        let out = self.command().args(args).output().expect("runs");
        (out.status.success(), output_text(&out))
    }
}

/// The text of `path`, or `<absent>`.
pub fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|_| "<absent>".into())
}

/// JSON with comments, parsed as the clients parse it.
pub fn jsonc(text: &str) -> Value {
    let value = mcp_reconcile_kernel::json::parse_jsonc(text).expect("jsonc");
    serde_json::from_str(&value.to_json()).expect("json")
}
