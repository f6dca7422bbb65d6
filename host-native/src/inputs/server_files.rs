//! This host's own server files as [`Kind`]s of [`InputFile`]: the settings files
//! ([`Settings`]) and the JSON server files (`.mcp.json`, `--mcp-config`: [`ServerJson`]).

use std::path::{Path, PathBuf};

use mcp_reconcile_kernel::json::{Object, Value};
use mcp_reconcile_kernel::reload::FileSource;
use mcp_reconcile_kernel::settings::server_command;
use mcp_reconcile_kernel::{mcp_json_from_value, settings_from_parsed, LayerSource, Servers};

use super::files::kept_note;
use super::files::{explain, object_entries};
use super::input_file::{InputFile, Kind, Reading};
use super::LoadCtx;

/// A settings file of one scope.
#[derive(Debug)]
pub(super) struct Settings(pub(super) LayerSource);

/// What a settings file holds.
#[derive(Clone, Debug, Default)]
pub(super) struct SettingsContent {
    pub(super) value: Value,
    pub(super) servers: Servers,
    pub(super) entry_errors: Vec<String>,
    /// Workspace settings only: the servers with `$VAR`s as written.
    pub(super) written: Option<Servers>,
    /// Workspace settings only: `mcp.serverCommand` as written.
    pub(super) written_command: Option<String>,
}

impl SettingsContent {
    pub(super) fn empty() -> Self {
        SettingsContent {
            value: Value::Object(Object::new()),
            ..SettingsContent::default()
        }
    }

    pub(super) fn from_value(value: Value) -> Self {
        let (servers, entry_errors) = match value.as_object().and_then(|o| o.get("mcpServers")) {
            None | Some(Value::Null) => (Servers::new(), Vec::new()),
            Some(Value::Object(map)) => object_entries(map, "mcpServers"),
            Some(other) => (
                Servers::new(),
                vec![format!(
                    "mcpServers must be an object of server entries, found {} — no servers \
                     are loaded from this file",
                    other.preview(60)
                )],
            ),
        };
        SettingsContent {
            value,
            servers,
            entry_errors,
            written: None,
            written_command: None,
        }
    }
}

impl Kind for Settings {
    type Content = SettingsContent;

    fn empty(&self) -> SettingsContent {
        SettingsContent::empty()
    }

    /// The user's and the system's files start servers without approval: one another user
    /// can write is not read (the last good content, read while it was private, stays).
    fn refused(&self, path: &Path) -> Option<String> {
        (self.0 != LayerSource::Workspace)
            .then(|| crate::private::foreign_writer(path))
            .flatten()
    }

    fn holds(&self, g: &SettingsContent) -> bool {
        g.value.as_object().is_some_and(|o| !o.is_empty()) || !g.servers.is_empty()
    }

    fn held(&self, g: &SettingsContent) -> Vec<String> {
        g.servers.keys().cloned().collect()
    }

    fn parse(&self, reading: Reading<'_, '_>) -> Result<SettingsContent, String> {
        let Reading {
            text,
            ctx,
            has_last_good,
            ..
        } = reading;
        let parsed = text.json();
        // The workspace's servers are kept as written too: one parse serves both readings.
        let raw = (self.0 == LayerSource::Workspace).then(|| parsed.clone());
        let value = settings_from_parsed(parsed, text.as_str(), Some(ctx.env))
            .map_err(|e| format!("{e} — fix the file; {}", kept_note(has_last_good)))?;
        let mut content = SettingsContent::from_value(value);
        if let Some(raw) = raw {
            if let Ok(raw) = settings_from_parsed(raw, text.as_str(), None) {
                content.written_command = server_command(&raw);
                content.written = Some(SettingsContent::from_value(raw).servers);
            }
        }
        Ok(content)
    }

    fn entry_errors<'a>(&self, g: &'a SettingsContent) -> Vec<&'a String> {
        g.entry_errors.iter().collect()
    }
}

/// One settings file.
pub(super) type SettingsFile = InputFile<Settings>;

impl SettingsFile {
    pub(super) fn new(kind: LayerSource, path: PathBuf) -> Self {
        let source = FileSource::Settings(kind.as_str().to_owned());
        InputFile::with(Settings(kind), path, Some(source))
    }

    /// The scope of the file.
    pub(super) fn scope(&self) -> LayerSource {
        self.kind.0
    }

    /// The servers in use as the file wrote them (workspace settings; other
    /// scopes are the user's own and are returned as loaded).
    pub(super) fn written(&self) -> Servers {
        let content = self.good.as_ref();
        content
            .and_then(|c| c.written.clone())
            .or_else(|| content.map(|c| c.servers.clone()))
            .unwrap_or_default()
    }
}

/// A JSON server file other than settings.
#[derive(Debug)]
pub(super) enum ServerJson {
    /// The project's `.mcp.json`.
    McpJson,
    /// A `--mcp-config` file.
    CliFile,
    /// A `--mcp-config` argument that is JSON itself.
    CliInline(String),
}

/// What a JSON server file holds: its servers as used, the problems of its entries, and
/// (`.mcp.json`) the servers with `$VAR`s as written.
#[derive(Clone, Debug, Default)]
pub(super) struct JsonContent {
    pub(super) servers: Servers,
    pub(super) entry_errors: Vec<String>,
    pub(super) written: Option<Servers>,
}

impl Kind for ServerJson {
    type Content = JsonContent;

    fn empty(&self) -> JsonContent {
        JsonContent::default()
    }

    fn refused(&self, _: &Path) -> Option<String> {
        None
    }

    /// Only `.mcp.json` is held while missing (a `--mcp-config` file is the user's to fix).
    fn holds(&self, g: &JsonContent) -> bool {
        matches!(self, ServerJson::McpJson) && !g.servers.is_empty()
    }

    fn held(&self, g: &JsonContent) -> Vec<String> {
        g.servers.keys().cloned().collect()
    }

    fn missing_error(&self) -> Option<String> {
        matches!(self, ServerJson::CliFile)
            .then(|| "file not found — create it or fix the --mcp-config path".into())
    }

    fn inline(&self) -> Option<&str> {
        match self {
            ServerJson::CliInline(text) => Some(text),
            _ => None,
        }
    }

    fn parse(&self, reading: Reading<'_, '_>) -> Result<JsonContent, String> {
        let Reading {
            text,
            ctx,
            has_last_good,
            ..
        } = reading;
        let parsed = explain(text.json(), text.as_str(), has_last_good)?;
        if matches!(self, ServerJson::McpJson) {
            return Ok(mcp_json(&parsed, ctx));
        }
        let Value::Object(top) = &parsed else {
            return Err(format!(
                "must be a JSON object of servers (or {{\"mcpServers\": …}}), found {} — fix \
                 it; {}",
                &parsed.preview(60),
                kept_note(has_last_good)
            ));
        };
        let (map, where_) = match top.get("mcpServers") {
            Some(Value::Object(map)) => (map, "mcpServers"),
            _ => (top, "--mcp-config"),
        };
        let (servers, entry_errors) = object_entries(map, where_);
        Ok(JsonContent {
            servers,
            entry_errors,
            written: None,
        })
    }

    fn entry_errors<'a>(&self, g: &'a JsonContent) -> Vec<&'a String> {
        g.entry_errors.iter().collect()
    }
}

/// A `.mcp.json` document's servers (expanded unless `--yolo`), as written, and its problems.
fn mcp_json(parsed: &Value, ctx: &LoadCtx<'_>) -> JsonContent {
    let has_servers = matches!(
        parsed.as_object().and_then(|o| o.get("mcpServers")),
        Some(Value::Object(_))
    );
    let result = mcp_json_from_value(parsed, Some(ctx.env), ctx.expand);
    let written = Some(mcp_json_from_value(parsed, None, false).servers);
    let entry_errors = if has_servers {
        result
            .errors
            .into_iter()
            .map(|e| format!("{e}; fix or remove that entry"))
            .collect()
    } else {
        vec![
            "no \"mcpServers\" object — write {\"mcpServers\": {\"name\": {…}}}; no servers are \
             loaded from it"
                .to_owned(),
        ]
    };
    JsonContent {
        servers: result.servers,
        entry_errors,
        written,
    }
}

/// `.mcp.json` or a `--mcp-config`.
pub(super) type JsonFile = InputFile<ServerJson>;

impl JsonFile {
    /// The project's `.mcp.json` at `path`.
    pub(super) fn mcp_json(path: PathBuf) -> Self {
        InputFile::with(ServerJson::McpJson, path, Some(FileSource::McpJson))
    }

    /// A `--mcp-config` argument: a file, or JSON itself.
    pub(super) fn cli(arg: &str, env: &super::HostEnv) -> Self {
        if arg.trim_start().starts_with('{') {
            let label = PathBuf::from("--mcp-config (inline JSON)");
            InputFile::with(ServerJson::CliInline(arg.to_owned()), label, None)
        } else {
            let path = env.absolute(Path::new(arg));
            let source = FileSource::McpConfig(path.to_string_lossy().into_owned());
            InputFile::with(ServerJson::CliFile, path, Some(source))
        }
    }

    /// The servers in use.
    pub(super) fn servers(&self) -> Servers {
        self.content().servers
    }

    /// [`JsonFile::servers`] with `$VAR`s as written (`.mcp.json`).
    pub(super) fn written(&self) -> Servers {
        let content = self.content();
        content.written.unwrap_or(content.servers)
    }
}
