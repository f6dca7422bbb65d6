//! The environment a session's paths and `$VAR`s are resolved from ([`HostEnv`]), and the
//! home-directory rules every layout shares (XDG, `$QWEN_HOME`, `$CLAUDE_CONFIG_DIR`, ...):
//! below the table of clients, whose entries name their files with them.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

use anyhow::{bail, Context};
use mcp_reconcile_kernel::json::{Object, Value};
use serde::{Deserialize, Serialize};

/// The process environment the paths and `$VAR`s are resolved from.
///
/// Its `Debug` output names the variables but never shows their values.
#[derive(Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostEnv {
    /// Environment variables (those that are valid UTF-8).
    pub vars: BTreeMap<String, String>,
    /// The directory relative paths are resolved against.
    pub cwd: PathBuf,
    /// The user's home directory, if known.
    pub home: Option<PathBuf>,
    /// The variables whose name or value is not UTF-8, as bytes: never expanded into a config
    /// (`$VAR` needs text), but passed on as they are to the servers a daemon session starts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub raw: Vec<(Vec<u8>, Vec<u8>)>,
}

impl std::fmt::Debug for HostEnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostEnv")
            .field("vars", &self.vars.keys().collect::<Vec<_>>())
            .field("cwd", &self.cwd)
            .field("home", &self.home)
            .field("raw", &self.raw.len())
            .finish()
    }
}

impl HostEnv {
    /// This process's environment, current directory and home directory.
    ///
    /// # Errors
    /// When the current directory cannot be read.
    pub fn from_process() -> anyhow::Result<Self> {
        let mut vars = BTreeMap::new();
        let mut raw = Vec::new();
        for (key, value) in std::env::vars_os() {
            match (key.into_string(), value.into_string()) {
                (Ok(key), Ok(value)) => {
                    vars.insert(key, value);
                }
                (key, value) => {
                    let bytes = |s: Result<String, std::ffi::OsString>| match s {
                        Ok(text) => text.into_bytes(),
                        Err(os) => os.into_encoded_bytes(),
                    };
                    raw.push((bytes(key), bytes(value)));
                }
            }
        }
        let cwd = std::env::current_dir()
            .context("cannot read the current directory; pass --project DIR")?;
        let home = vars
            .get("HOME")
            .filter(|h| !h.is_empty())
            .map(PathBuf::from)
            .or_else(|| {
                nix::unistd::User::from_uid(nix::unistd::getuid())
                    .ok()
                    .flatten()
                    .map(|u| u.dir)
            });
        Ok(HostEnv {
            vars,
            cwd,
            home,
            raw,
        })
    }

    /// An environment of `vars` in the directory `cwd`, with the home `home` (for tests).
    #[cfg(test)]
    pub(crate) fn of(vars: &[(&str, &str)], cwd: &str, home: &str) -> HostEnv {
        HostEnv {
            vars: vars
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            cwd: PathBuf::from(cwd),
            home: Some(PathBuf::from(home)),
            raw: Vec::new(),
        }
    }

    /// A non-empty variable.
    pub(super) fn var(&self, name: &str) -> Option<&str> {
        self.vars
            .get(name)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }

    pub(super) fn home(&self, what: &str) -> anyhow::Result<&Path> {
        match &self.home {
            Some(home) => Ok(home),
            None => bail!("cannot find your home directory for the default {what}: set HOME or pass the path explicitly"),
        }
    }

    /// The variables as the kernel's `$VAR` expansion takes them.
    pub(super) fn expansion_env(&self) -> Object {
        self.vars
            .iter()
            .map(|(k, v)| (k.clone(), Value::from(v.as_str())))
            .collect()
    }

    /// `path` made absolute against the current directory, lexically cleaned.
    pub(super) fn absolute(&self, path: &Path) -> PathBuf {
        clean(&self.cwd.join(path))
    }
}

/// `$VAR` when it is an absolute directory, else `fallback` under the home directory (the XDG
/// rule).
///
/// # Errors
/// The home directory is needed and unknown.
pub(crate) fn xdg(
    env: &HostEnv,
    var: &str,
    fallback: &[&str],
    what: &str,
) -> anyhow::Result<PathBuf> {
    match env.var(var).map(PathBuf::from) {
        Some(dir) if dir.is_absolute() => Ok(dir),
        _ => Ok(fallback
            .iter()
            .fold(env.home(what)?.to_path_buf(), |p, part| p.join(part))),
    }
}

/// `$QWEN_HOME` (with `~` and relative paths resolved as the TypeScript CLI
/// does) or `~/.qwen`.
pub(crate) fn qwen_home(env: &HostEnv, what: &str) -> anyhow::Result<PathBuf> {
    if let Some(dir) = env.var("QWEN_HOME") {
        let dir = if dir == "~" {
            env.home(what)?.to_path_buf()
        } else if let Some(rest) = dir.strip_prefix("~/").or_else(|| dir.strip_prefix("~\\")) {
            env.home(what)?.join(rest)
        } else {
            PathBuf::from(dir)
        };
        return Ok(env.absolute(&dir));
    }
    Ok(env.home(what)?.join(".qwen"))
}

/// `$COPILOT_HOME` or `~/.copilot` (Copilot CLI's own directory).
pub(crate) fn copilot_home(env: &HostEnv) -> anyhow::Result<PathBuf> {
    match env.var("COPILOT_HOME") {
        Some(dir) => Ok(env.absolute(Path::new(dir))),
        None => Ok(env.home("Copilot CLI's directory")?.join(".copilot")),
    }
}

/// Claude Code's settings directory and state file: `$CLAUDE_CONFIG_DIR` (both inside it) or
/// `~/.claude` and `~/.claude.json`.
pub(crate) fn claude_home(env: &HostEnv, what: &str) -> anyhow::Result<(PathBuf, PathBuf)> {
    Ok(match env.var("CLAUDE_CONFIG_DIR") {
        Some(dir) => {
            let dir = env.absolute(Path::new(dir));
            (dir.clone(), dir.join(".claude.json"))
        }
        None => {
            let home = env.home(what)?;
            (home.join(".claude"), home.join(".claude.json"))
        }
    })
}

/// `$CODEX_HOME` or `~/.codex`.
pub(crate) fn codex_home(env: &HostEnv, what: &str) -> anyhow::Result<PathBuf> {
    match env.var("CODEX_HOME") {
        Some(dir) => Ok(env.absolute(Path::new(dir))),
        None => Ok(env.home(what)?.join(".codex")),
    }
}

/// `$GEMINI_CLI_HOME/.gemini` or `~/.gemini`.
pub(crate) fn gemini_home(env: &HostEnv, what: &str) -> anyhow::Result<PathBuf> {
    match env.var("GEMINI_CLI_HOME") {
        Some(dir) => Ok(env.absolute(Path::new(dir)).join(".gemini")),
        None => Ok(env.home(what)?.join(".gemini")),
    }
}

/// Removes `.` components and folds `..` lexically (no filesystem access).
pub(crate) fn clean(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                if out.file_name().is_some() {
                    out.pop();
                } else if !out.has_root() {
                    out.push(component);
                }
            }
            other => out.push(other),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clean_folds_dots() {
        assert_eq!(clean(Path::new("/a/./b/../c")), PathBuf::from("/a/c"));
        assert_eq!(clean(Path::new("/..")), PathBuf::from("/"));
    }
}
