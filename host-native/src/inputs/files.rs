//! The per-file reloaders: settings files and JSON server files (`.mcp.json`,
//! `--mcp-config`), each keeping its **last good content** when a reload
//! fails, and [`read_text`], the one bounded, non-blocking, regular-files-only
//! way an input file is read.

use std::path::{Path, PathBuf};

use mcp_reconcile_kernel::json::{self, Object, Value};
use mcp_reconcile_kernel::reload::FileSource;
use mcp_reconcile_kernel::settings::server_command;
use mcp_reconcile_kernel::{
    mcp_json_from_value, settings_from_parsed, LayerSource, Millis, ServerConfig, Servers,
};

use super::checked::Checked;
use super::InputError;

/// How long a settings file or `.mcp.json` that had content and went missing keeps its last
/// good content before its servers stop: an editor or tool that deletes a file and writes it
/// again a moment later must not restart every server in it. The host owns the timer
/// ([`Inputs::expire_missing`](super::Inputs::expire_missing)).
pub const MISSING_GRACE: Millis = Millis(3_000);

/// A file that had content and is missing now.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(super) enum Missing {
    /// Present, or missing with nothing to keep.
    #[default]
    No,
    /// Missing since a reload: its last good content stays in use for [`MISSING_GRACE`].
    Held,
    /// Still missing after the grace: read as empty until it comes back.
    Expired,
}

/// The error a held missing file shows.
pub(super) fn held_note() -> String {
    format!(
        "file missing — its servers stay as they are for {} s in case it comes back; after \
         that they stop",
        MISSING_GRACE.0 / 1000
    )
}

/// The note appended to a load error: what stays in use meanwhile.
pub(super) fn kept_note(has_last_good: bool) -> &'static str {
    if has_last_good {
        "its last good content stays in use until it loads again"
    } else {
        "nothing from it is used until it loads"
    }
}

/// `text` as JSON (comments allowed), or why not as the user should read it: empty, or not
/// valid JSON, and what stays in use meanwhile.
pub(super) fn parse_or_explain(text: &str, has_last_good: bool) -> Result<Value, String> {
    explain(json::parse_jsonc(text), text, has_last_good)
}

/// [`parse_or_explain`] of `text` already parsed (`parsed`).
pub(super) fn explain(
    parsed: Result<Value, json::ParseError>,
    text: &str,
    has_last_good: bool,
) -> Result<Value, String> {
    parsed.map_err(|e| {
        let what = if text.trim().is_empty() {
            "it is empty".to_owned()
        } else {
            format!("not valid JSON: {e}")
        };
        format!("{what} — fix it; {}", kept_note(has_last_good))
    })
}

/// The problems of one file as the user sees them: its load error, then its entry errors.
pub(super) fn file_errors<'a>(
    file: &std::path::Path,
    error: Option<&'a String>,
    entry_errors: impl Iterator<Item = &'a String>,
) -> Vec<InputError> {
    error
        .into_iter()
        .chain(entry_errors)
        .map(|message| InputError {
            file: file.to_path_buf(),
            message: message.clone(),
        })
        .collect()
}

/// The largest input file read (settings, `.mcp.json`, `--mcp-config`,
/// approvals): a repository's file is hostile input, and no real
/// configuration comes near this.
pub const MAX_INPUT_BYTES: u64 = 4 * 1024 * 1024;

/// The largest client state file read ([`read_client_text`]): Claude Code's `~/.claude.json`
/// keeps every project's history beside the servers, and users report 15–65 MB of it. Four
/// times the largest report, and still a bound: only the user's own client files, never a
/// repository's, are read with it.
pub const MAX_CLIENT_STATE_BYTES: u64 = 256 * 1024 * 1024;

/// Reads a file as text; `None` when it does not exist.
///
/// Bounded and never waiting: the file is opened non-blocking (a FIFO does
/// not wait for a writer), must be a regular file after symlinks are followed
/// (a FIFO, socket, device such as `/dev/zero`, or directory is refused), and
/// at most [`MAX_INPUT_BYTES`] are read (a larger file is an error).
pub fn read_text(path: &Path) -> Result<Option<String>, String> {
    read_text_within(path, MAX_INPUT_BYTES)
}

/// Reads a client file that is large by nature (Claude Code's `~/.claude.json`) as
/// [`read_text`] does, with the bound that fits it, [`MAX_CLIENT_STATE_BYTES`]. For the user's
/// own client state only: a repository's file keeps [`MAX_INPUT_BYTES`].
///
/// # Errors
/// Unreadable, not a regular file, larger than the bound, or not UTF-8, as a clause.
pub fn read_client_text(path: &Path) -> Result<Option<String>, String> {
    read_text_within(path, MAX_CLIENT_STATE_BYTES)
}

/// [`read_text`] with at most `limit` bytes.
pub(super) fn read_text_within(path: &Path, limit: u64) -> Result<Option<String>, String> {
    use std::os::unix::fs::OpenOptionsExt as _;
    let opened = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::fcntl::OFlag::O_NONBLOCK.bits())
        .open(path);
    let file = match opened {
        Ok(file) => file,
        Err(e)
            if e.kind() == std::io::ErrorKind::NotFound
                || e.kind() == std::io::ErrorKind::NotADirectory =>
        {
            return Ok(None)
        }
        Err(e) => return Err(format!("cannot read it: {e}")),
    };
    read_opened_within(file, limit).map(Some)
}

/// Reads an open file as [`read_text`] does: a regular file of at most
/// [`MAX_INPUT_BYTES`] of UTF-8 text (for callers that check what was opened
/// before reading it).
///
/// # Errors
/// Not a regular file, too large, unreadable, or not UTF-8, as a clause.
pub fn read_opened(file: std::fs::File) -> Result<String, String> {
    read_opened_within(file, MAX_INPUT_BYTES)
}

/// [`read_opened`] with at most `limit` bytes.
fn read_opened_within(file: std::fs::File, limit: u64) -> Result<String, String> {
    use std::io::Read as _;
    let meta = file
        .metadata()
        .map_err(|e| format!("cannot read it: {e}"))?;
    if !meta.is_file() {
        return Err(format!(
            "it is not a regular file (it is {}); only regular files are read — replace it with a file",
            file_kind(&meta.file_type())
        ));
    }
    let too_large = || {
        format!(
            "it is larger than {} MiB; a configuration file is never that large — check what wrote it",
            limit / (1024 * 1024)
        )
    };
    if meta.len() > limit {
        return Err(too_large());
    }
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    file.take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read it: {e}"))?;
    if bytes.len() as u64 > limit {
        return Err(too_large());
    }
    String::from_utf8(bytes).map_err(|_| "it is not UTF-8 text".to_owned())
}

pub(super) fn file_kind(kind: &std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt as _;
    if kind.is_dir() {
        "a directory"
    } else if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_socket() {
        "a socket"
    } else if kind.is_char_device() || kind.is_block_device() {
        "a device"
    } else {
        "not a regular file"
    }
}

/// What reading an input file gave.
pub(super) enum Read {
    /// Its text: parse it (the file is no longer missing).
    Text(String),
    /// Missing and nothing to keep: it reads as empty.
    Empty,
    /// Missing with content still in use (held for [`MISSING_GRACE`]), or unreadable, or
    /// written by another user: the last good content stays, with this message.
    Kept(String),
}

/// Reads an input file as every reloader does, at most `limit` bytes: a file of the user or
/// the administrator (`trusted_scope`) that another user can write is not read; a missing file
/// that `had_content` is held (until it expires), else empty; `missing` follows.
/// `has_last_good` says what the message promises.
pub(super) fn read_input(
    path: &Path,
    limit: u64,
    trusted_scope: bool,
    has_last_good: bool,
    had_content: bool,
    missing: &mut Missing,
) -> Read {
    // The user's and the system's files start servers without approval: one another user
    // can write is not read (the last good content, read while it was private, stays).
    if trusted_scope {
        if let Some(why) = crate::private::foreign_writer(path) {
            return Read::Kept(format!("{why}; {}", kept_note(has_last_good)));
        }
    }
    match read_text_within(path, limit) {
        Ok(Some(text)) => {
            *missing = Missing::No;
            Read::Text(text)
        }
        Ok(None) if had_content && *missing != Missing::Expired => {
            *missing = Missing::Held;
            Read::Kept(held_note())
        }
        Ok(None) => Read::Empty,
        Err(e) => Read::Kept(format!("{e}; {}", kept_note(has_last_good))),
    }
}

/// The object entries of a server map; every other entry becomes an error
/// naming it.
pub(super) fn object_entries(map: &Object, where_: &str) -> (Servers, Vec<String>) {
    let mut servers = Servers::new();
    let mut errors = Vec::new();
    for (name, entry) in map {
        match entry {
            Value::Object(o) => servers.insert(name.clone(), ServerConfig::new(o.clone())),
            other => errors.push(format!(
                "server \"{name}\" in {where_} must be an object, found {} — skipped; fix or \
                 remove that entry",
                other.preview(60)
            )),
        }
    }
    (servers, errors)
}

/// One settings file and what was last loaded from it.
#[derive(Debug)]
pub(super) struct SettingsFile {
    pub(super) kind: LayerSource,
    pub(super) path: PathBuf,
    pub(super) loaded: bool,
    pub(super) good: Option<SettingsContent>,
    pub(super) error: Option<String>,
    pub(super) missing: Missing,
}

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

impl SettingsFile {
    pub(super) fn new(kind: LayerSource, path: PathBuf) -> Self {
        SettingsFile {
            kind,
            path,
            loaded: false,
            good: None,
            error: None,
            missing: Missing::No,
        }
    }

    pub(super) fn source(&self) -> FileSource {
        FileSource::Settings(self.kind.as_str().to_owned())
    }

    pub(super) fn reload(&mut self, env: &Object, checked: &mut Checked) {
        self.loaded = true;
        let had_content = self.good.as_ref().is_some_and(|g| {
            g.value.as_object().is_some_and(|o| !o.is_empty()) || !g.servers.is_empty()
        });
        let text = match read_input(
            &self.path,
            MAX_INPUT_BYTES,
            self.kind != LayerSource::Workspace,
            self.good.is_some(),
            had_content,
            &mut self.missing,
        ) {
            Read::Text(text) => text,
            Read::Empty => {
                self.good = Some(SettingsContent::empty());
                self.error = None;
                return;
            }
            Read::Kept(message) => {
                self.error = Some(message);
                return;
            }
        };
        let parsed = checked.parse(&text);
        // The workspace's servers are kept as written too: one parse serves both readings.
        let raw = (self.kind == LayerSource::Workspace).then(|| parsed.clone());
        match settings_from_parsed(parsed, &text, Some(env)) {
            Ok(value) => {
                let mut content = SettingsContent::from_value(value);
                if let Some(raw) = raw {
                    if let Ok(raw) = settings_from_parsed(raw, &text, None) {
                        content.written_command = server_command(&raw);
                        content.written = Some(SettingsContent::from_value(raw).servers);
                    }
                }
                self.good = Some(content);
                self.error = None;
            }
            Err(e) => {
                self.error = Some(format!(
                    "{e} — fix the file; {}",
                    kept_note(self.good.is_some())
                ));
            }
        }
    }

    /// Gives up on a held missing file: from now on it reads as empty. The servers it held.
    pub(super) fn expire_missing(&mut self) -> Option<Vec<String>> {
        if self.missing != Missing::Held {
            return None;
        }
        self.missing = Missing::Expired;
        self.error = None;
        let held = self.good.replace(SettingsContent::empty());
        Some(
            held.map(|g| g.servers.keys().cloned().collect())
                .unwrap_or_default(),
        )
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

    /// The content in use: the last good one, or `{}`.
    pub(super) fn content(&self) -> SettingsContent {
        self.good.clone().unwrap_or_else(SettingsContent::empty)
    }

    pub(super) fn errors(&self) -> Vec<InputError> {
        let entry_errors = self.good.iter().flat_map(|g| g.entry_errors.iter());
        file_errors(&self.path, self.error.as_ref(), entry_errors)
    }
}

/// A JSON server file other than settings: `.mcp.json` or a `--mcp-config`.
#[derive(Debug)]
pub(super) struct JsonFile {
    pub(super) kind: JsonKind,
    pub(super) loaded: bool,
    pub(super) good: Option<(Servers, Vec<String>)>,
    /// `.mcp.json` only: the servers in use with `$VAR`s as written.
    pub(super) written: Option<Servers>,
    pub(super) error: Option<String>,
    /// `.mcp.json` only: held or expired while missing.
    pub(super) missing: Missing,
}

#[derive(Debug)]
pub(super) enum JsonKind {
    McpJson(PathBuf),
    CliFile(PathBuf),
    CliInline(String),
}

impl JsonKind {
    pub(super) fn path(&self) -> Option<&Path> {
        match self {
            JsonKind::McpJson(p) | JsonKind::CliFile(p) => Some(p),
            JsonKind::CliInline(_) => None,
        }
    }

    pub(super) fn source(&self) -> Option<FileSource> {
        match self {
            JsonKind::McpJson(_) => Some(FileSource::McpJson),
            JsonKind::CliFile(p) => Some(FileSource::McpConfig(p.to_string_lossy().into_owned())),
            JsonKind::CliInline(_) => None,
        }
    }

    pub(super) fn label(&self) -> PathBuf {
        match self {
            JsonKind::McpJson(p) | JsonKind::CliFile(p) => p.clone(),
            JsonKind::CliInline(_) => PathBuf::from("--mcp-config (inline JSON)"),
        }
    }
}

impl JsonFile {
    pub(super) fn new(kind: JsonKind) -> Self {
        JsonFile {
            kind,
            loaded: false,
            good: None,
            written: None,
            error: None,
            missing: Missing::No,
        }
    }

    pub(super) fn reload(&mut self, env: &Object, expand: bool, checked: &mut Checked) {
        self.loaded = true;
        let text = match &self.kind {
            JsonKind::CliInline(text) => text.clone(),
            JsonKind::McpJson(path) | JsonKind::CliFile(path) => match read_text(path) {
                Ok(Some(text)) => {
                    self.missing = Missing::No;
                    text
                }
                Ok(None)
                    if matches!(self.kind, JsonKind::McpJson(_))
                        && self.missing != Missing::Expired
                        && self.good.as_ref().is_some_and(|(s, _)| !s.is_empty()) =>
                {
                    self.missing = Missing::Held;
                    self.error = Some(held_note());
                    return;
                }
                Ok(None) => {
                    self.good = Some((Servers::new(), Vec::new()));
                    self.written = None;
                    self.error = match self.kind {
                        JsonKind::CliFile(_) => {
                            Some("file not found — create it or fix the --mcp-config path".into())
                        }
                        _ => None,
                    };
                    return;
                }
                Err(e) => {
                    self.error = Some(format!("{e}; {}", kept_note(self.good.is_some())));
                    return;
                }
            },
        };
        let parsed = match explain(checked.parse(&text), &text, self.good.is_some()) {
            Ok(value) => value,
            Err(message) => {
                self.error = Some(message);
                return;
            }
        };
        match &self.kind {
            JsonKind::McpJson(_) => {
                let has_servers = matches!(
                    parsed.as_object().and_then(|o| o.get("mcpServers")),
                    Some(Value::Object(_))
                );
                let result = mcp_json_from_value(&parsed, Some(env), expand);
                self.written = Some(mcp_json_from_value(&parsed, None, false).servers);
                let errors = if has_servers {
                    result
                        .errors
                        .into_iter()
                        .map(|e| format!("{e}; fix or remove that entry"))
                        .collect()
                } else {
                    vec![
                        "no \"mcpServers\" object — write {\"mcpServers\": {\"name\": {…}}}; no \
                         servers are loaded from it"
                            .to_owned(),
                    ]
                };
                self.good = Some((result.servers, errors));
                self.error = None;
            }
            JsonKind::CliFile(_) | JsonKind::CliInline(_) => {
                let Value::Object(top) = &parsed else {
                    self.error = Some(format!(
                        "must be a JSON object of servers (or {{\"mcpServers\": …}}), found {} \
                         — fix it; {}",
                        &parsed.preview(60),
                        kept_note(self.good.is_some())
                    ));
                    return;
                };
                let (map, where_) = match top.get("mcpServers") {
                    Some(Value::Object(map)) => (map, "mcpServers"),
                    _ => (top, "--mcp-config"),
                };
                self.good = Some(object_entries(map, where_));
                self.error = None;
            }
        }
    }

    /// Gives up on a held missing file: from now on it reads as empty. The servers it held.
    pub(super) fn expire_missing(&mut self) -> Option<Vec<String>> {
        if self.missing != Missing::Held {
            return None;
        }
        self.missing = Missing::Expired;
        self.error = None;
        self.written = None;
        let held = self.good.replace((Servers::new(), Vec::new()));
        Some(
            held.map(|(s, _)| s.keys().cloned().collect())
                .unwrap_or_default(),
        )
    }

    pub(super) fn servers(&self) -> Servers {
        self.good
            .as_ref()
            .map(|(s, _)| s.clone())
            .unwrap_or_default()
    }

    /// [`JsonFile::servers`] with `$VAR`s as written (`.mcp.json`).
    pub(super) fn written(&self) -> Servers {
        self.written.clone().unwrap_or_else(|| self.servers())
    }

    pub(super) fn errors(&self) -> Vec<InputError> {
        let entry_errors = self.good.iter().flat_map(|(_, e)| e.iter());
        self.error
            .iter()
            .chain(entry_errors)
            .map(|message| InputError {
                file: self.kind.label(),
                message: message.clone(),
            })
            .collect()
    }
}
