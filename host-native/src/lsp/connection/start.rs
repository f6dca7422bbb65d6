//! Reading a `.lsp.json` entry (SPEC §14.1) into what [`super::LspConnection::start`] needs:
//! defaults filled in, types checked, the workspace folder resolved inside the project root.

use std::path::{Path, PathBuf};
use std::time::Duration;

use mcp_reconcile_kernel::json::{Object, Value};
use mcp_reconcile_kernel::ServerConfig;

use crate::inputs::clean;

/// `startupTimeout` when the entry has none (SPEC §14.1), in ms.
pub const DEFAULT_STARTUP_TIMEOUT_MS: u64 = 10_000;
/// `shutdownTimeout` when the entry has none (SPEC §14.1), in ms.
pub const DEFAULT_SHUTDOWN_TIMEOUT_MS: u64 = 5_000;

/// What a start is made from: a `.lsp.json` entry, already `$VAR`-expanded, made concrete.
#[derive(Clone, Debug, PartialEq)]
pub struct LspStart {
    pub command: String,
    pub args: Vec<String>,
    /// Set over the host's environment.
    pub env: Vec<(String, String)>,
    /// Absolute, inside the project root; the server's cwd, `rootUri` and only workspace folder.
    pub workspace_folder: PathBuf,
    /// The project root, absolute: the only files the language tools read lie inside it, after
    /// every symbolic link (see `lsp/confined.rs`).
    pub project_root: PathBuf,
    pub initialization_options: Option<serde_json::Value>,
    /// Pushed whole with `workspace/didChangeConfiguration`; answers `workspace/configuration`.
    pub settings: serde_json::Value,
    pub startup_timeout: Duration,
    pub shutdown_timeout: Duration,
    /// A daemon session's environment to spawn it in (see [`crate::launch`]); `None` runs it
    /// in this process's environment.
    pub launch: Option<std::sync::Arc<crate::launch::Launch>>,
}

impl LspStart {
    /// Reads an entry as the kernel holds it (fields `command`, `args`, `env`,
    /// `workspaceFolder`, `initializationOptions`, `settings`, `startupTimeout`,
    /// `shutdownTimeout`; defaults as SPEC §14.1) for a project at `project_root`.
    ///
    /// # Errors
    /// A sentence naming the field: a `tcp` / `socket` transport (unsupported: the host reports
    /// `unsupported_transport`), no `command`, a value of the wrong type, or a
    /// `workspaceFolder` outside the project root.
    pub fn from_entry(entry: &Object, project_root: &Path) -> Result<LspStart, String> {
        let field = |key: &str| entry.get(key).filter(|v| !v.is_null());
        match field("transport") {
            None => {}
            Some(Value::String(t)) if t == "stdio" => {}
            Some(other) => {
                return Err(format!(
                    "field `transport` is {}: only stdio language servers are supported \
                     (unsupported_transport); start the server with `command` instead",
                    other.preview(40)
                ))
            }
        }
        let command = match field("command") {
            Some(Value::String(c)) if !c.is_empty() => c.clone(),
            Some(other) => return Err(wrong("command", "a non-empty string", other)),
            None => return Err("field `command` is missing: name the program to run".into()),
        };
        let args = match field("args") {
            None => Vec::new(),
            Some(Value::Array(items)) => items
                .iter()
                .map(|item| item.as_str().map(str::to_owned))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| wrong("args", "an array of strings", &items.clone().into()))?,
            Some(other) => return Err(wrong("args", "an array of strings", other)),
        };
        let env = match field("env") {
            None => Vec::new(),
            Some(Value::Object(map)) => map
                .iter()
                .map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_owned())))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| wrong("env", "an object of string values", &map.clone().into()))?,
            Some(other) => return Err(wrong("env", "an object of string values", other)),
        };
        let folder = match field("workspaceFolder") {
            None => None,
            Some(Value::String(f)) => Some(f.as_str()),
            Some(other) => return Err(wrong("workspaceFolder", "a path string", other)),
        };
        let project_root = absolute_root(project_root)?;
        let workspace_folder = resolve_folder(folder, &project_root)?;
        let initialization_options = field("initializationOptions").map(to_serde);
        let settings = match field("settings") {
            None => serde_json::Value::Object(serde_json::Map::new()),
            Some(value @ Value::Object(_)) => to_serde(value),
            Some(other) => return Err(wrong("settings", "an object", other)),
        };
        Ok(LspStart {
            command,
            args,
            env,
            workspace_folder,
            project_root,
            initialization_options,
            settings,
            startup_timeout: millis(
                field("startupTimeout"),
                "startupTimeout",
                DEFAULT_STARTUP_TIMEOUT_MS,
            )?,
            shutdown_timeout: millis(
                field("shutdownTimeout"),
                "shutdownTimeout",
                DEFAULT_SHUTDOWN_TIMEOUT_MS,
            )?,
            launch: None,
        })
    }
}

fn wrong(field: &str, expected: &str, found: &Value) -> String {
    format!(
        "field `{field}` must be {expected}, found {}",
        found.preview(40)
    )
}

/// A kernel value as serde_json sees it (whole numbers stay integers).
fn to_serde(value: &Value) -> serde_json::Value {
    serde_json::to_value(value).unwrap_or(serde_json::Value::Null)
}

/// A timeout field in ms, or `default_ms` when absent.
fn millis(value: Option<&Value>, field: &str, default_ms: u64) -> Result<Duration, String> {
    match value {
        None => Ok(Duration::from_millis(default_ms)),
        Some(Value::Number(ms)) if ms.is_finite() && *ms >= 0.0 => {
            Ok(Duration::from_millis(ms.min(1e12) as u64))
        }
        Some(other) => Err(wrong(field, "a non-negative number of milliseconds", other)),
    }
}

/// The project root made absolute and lexically normalized.
fn absolute_root(project_root: &Path) -> Result<PathBuf, String> {
    std::path::absolute(project_root)
        .map(|root| clean(&root))
        .map_err(|e| {
            format!(
                "the project root {} cannot be made absolute: {e}",
                project_root.display()
            )
        })
}

/// The workspace folder: `folder` resolved against the absolute project `root`, lexically
/// normalized, and required to stay inside it; the root itself when there is none.
fn resolve_folder(folder: Option<&str>, root: &Path) -> Result<PathBuf, String> {
    let root = root.to_path_buf();
    let Some(folder) = folder else {
        return Ok(root);
    };
    let resolved = clean(&root.join(folder));
    if resolved.starts_with(&root) {
        Ok(resolved)
    } else {
        Err(format!(
            "field `workspaceFolder` {} is outside the project root {}: use a folder inside the \
             project (relative paths are resolved against it)",
            Value::from(folder).to_json(),
            root.display()
        ))
    }
}

pub(super) fn folder_name(folder: &Path) -> String {
    folder
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_else(|| folder.display().to_string())
}

/// The entry as the stdio spawner reads it: `command`, `args`, `env`, `cwd`.
pub(super) fn process_config(start: &LspStart) -> Result<ServerConfig, String> {
    let cwd = start.workspace_folder.to_str().ok_or_else(|| {
        format!(
            "the workspace folder {} is not valid UTF-8",
            start.workspace_folder.display()
        )
    })?;
    let mut object = Object::new();
    object.insert("command".into(), start.command.as_str().into());
    object.insert(
        "args".into(),
        Value::Array(start.args.iter().map(|a| a.as_str().into()).collect()),
    );
    object.insert(
        "env".into(),
        Value::Object(
            start
                .env
                .iter()
                .map(|(k, v)| (k.clone(), Value::from(v.as_str())))
                .collect(),
        ),
    );
    object.insert("cwd".into(), cwd.into());
    Ok(ServerConfig::new(object))
}
