//! Other clients' own files, read live (SPEC §15): Claude Code, Cursor, VS Code, Copilot CLI,
//! Codex, Kiro, Cline, Windsurf and Junie. (Gemini CLI and qwen-code use the settings-file
//! schema this host reads natively, so their layouts only change paths, which their table
//! entries give.)
//!
//! Every client is one entry of the table of clients ([`CLIENTS`], `table`): its names, help,
//! files, formats, paths and install strategy, held in the client's own file. A new client is
//! that file and one line in [`CLIENTS`] (a JSON file of its own is a [`Format::Json`] with the
//! parser in that file; only a new kind of file, such as TOML, needs a variant here).
//!
//! Each file is a [`ClientFile`]: read like every input (bounded, never blocking, regular
//! files only, last good content kept, a vanished file held for the grace period) and parsed
//! in its client's [`Format`] into [`ClientContent`]: the server layers it feeds, with the
//! client's field spellings normalized to this host's transport keys and its variable syntax
//! expanded as that client expands it (before the approval hash, SPEC §3), the entries as
//! written (what a review shows), and what the file says about admission: the client's
//! policy rules, its rejections of project entries, its by-name approvals (shown, never
//! trusted), per-server switches, and whether the file is exclusive.
//!
//! Parts: `expand` (each client's variable syntax, and the git root as git resolves it),
//! `normalize` (transport spellings), `claude`, `claude_state` (`~/.claude.json`, large by
//! nature, read for the parts a session needs), `editors` (Cursor, VS Code, Copilot CLI),
//! `codex` (TOML), `admission` (what the files say together), `table` (the table of clients:
//! one `ClientSpec` per `--layout`, each in its client's file: `claude`, `codex`, `gemini`,
//! `qwen`, `cursor`, `vscode`, `copilot`, and the `mcpServers` family's `kiro`, `cline`,
//! `windsurf`, `junie`), `family` (the one parser of the `mcpServers` family, from a small
//! description per client), `layouts` (the files a layout reads, the editors'
//! sidecar), `gemini` (Gemini CLI's folder trust and `mcp disable`
//! switches), `claude_plugins` / `claude_plugin_enable` / `claude_plugin_entries` (the plugins
//! Claude Code installed for this project, which settings file enables each, and their
//! entries), `fuzz` (hidden: the fuzz targets' entry into every parser here).
//!
//! A `.mcp.json` in a parent directory (as Claude Code and Copilot CLI read every parent's)
//! counts only while no other user owns or can write it (`private::foreign_writer`).

mod admission;
mod claude;
mod claude_plugin_enable;
mod claude_plugin_entries;
mod claude_plugins;
mod claude_state;
mod cline;
mod codex;
mod copilot;
mod crush;
mod cursor;
mod editors;
mod expand;
mod family;
#[doc(hidden)]
pub mod fuzz;
mod gemini;
mod goose;
mod junie;
mod kiro;
mod layouts;
mod merge;
mod normalize;
mod opencode;
mod qwen;
mod roo;
mod spec;
pub(crate) mod strategy;
mod table;
mod vscode;
mod windsurf;
mod zed;

use std::path::{Path, PathBuf};

use mcp_reconcile_kernel::policy::{parse_rules, Policy, PolicyRule};
use mcp_reconcile_kernel::reload::FileSource;
use mcp_reconcile_kernel::{LayerSource, Object, Servers, Value};

pub(super) use admission::Admission;
pub use codex::CODEX_MARK;
pub(crate) use expand::claude_project_key;
pub(super) use expand::{git_root, Context};
pub(super) use gemini::{folded, folder_trust_on, verdict};
pub(super) use layouts::client_files;
pub(crate) use layouts::{editor_user_file, sidecar};
pub(super) use normalize::gemini_transport;
pub use spec::{ClientSpec, Layout};
pub(crate) use spec::{Dialect, UserLsp};
pub use table::{layout_help, CLIENTS};

use super::checked::Text;
use super::files::explain;
use super::files::kept_note;
use super::input_file::{InputFile, Kind, Reading};

/// How a client file is read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Format {
    /// Claude Code's `~/.claude.json`: user-scope `mcpServers`, and the local scope of this
    /// project under `projects["<root>"]` (with its `.mcp.json` approvals).
    ClaudeState,
    /// A `.mcp.json` as Claude Code reads it (`${VAR}`, `${VAR:-default}`).
    ClaudeMcpJson,
    /// Claude Code's `managed-mcp.json`: the administrator's servers, exclusive when present.
    ClaudeManaged,
    /// A Claude Code settings file: `.mcp.json` approvals and rejections, and the policy
    /// lists (merged across every settings file, as Claude Code merges them).
    ClaudeSettings {
        /// The administrator's file: its `allowManagedMcpServersOnly` makes its allow list the
        /// only one.
        managed: bool,
    },
    /// Claude Code's `installed_plugins.json`: its installed plugins, whose servers count
    /// while a settings file enables them.
    ClaudePlugins,
    /// Cursor's `mcp.json` (`mcpServers`; `${env:NAME}`, `${userHome}`, `${workspaceFolder}`).
    Cursor,
    /// VS Code's `mcp.json` (`servers`, `inputs`; `${input:id}` cannot be answered here).
    Vscode,
    /// Copilot CLI's `mcp-config.json` (`mcpServers`; `type` `local` | `stdio` | `http` |
    /// `sse`).
    Copilot,
    /// Codex's `config.toml` (`[mcp_servers.NAME]`), also the administrator's
    /// `/etc/codex/config.toml` and `managed_config.toml`.
    Codex,
    /// Codex's `/etc/codex/requirements.toml`: the administrator's allow list of servers, by
    /// name and identity (`[mcp_servers.NAME.identity] command = …` or `url = …`).
    CodexRequirements,
    /// Gemini CLI's `trustedFolders.json`: whether it trusts the project.
    GeminiTrust,
    /// Copilot CLI's `config.json`: its `trusted_folders` (the project's files count only in
    /// one of them).
    CopilotConfig,
    /// Gemini CLI's `mcp-server-enablement.json`: the servers `gemini mcp disable` turned off.
    GeminiEnablement,
    /// A JSON file read by the parser its client's own file holds (a client with a JSON file
    /// of its own needs no variant here).
    Json(JsonFormat),
    /// A file in a syntax of its client's own (Zed's lenient JSON, Goose's YAML), read from
    /// its text by the parser its client's file holds.
    Text(TextFormat),
}

/// A client's own file syntax: whether a text is complete in it, and its parser from the text,
/// the layer kind and the context. Compared by `name`.
#[derive(Clone, Copy)]
pub(super) struct TextFormat {
    /// The format's name (for `Debug` and comparison).
    pub(super) name: &'static str,
    /// Whether the text parses now (a file caught mid-write does not).
    pub(super) complete: fn(&str) -> bool,
    /// What a file in it says, or why it cannot be read.
    pub(super) parse: fn(&str, LayerSource, &Context<'_>) -> Result<ClientContent, String>,
}

impl PartialEq for TextFormat {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}

impl Eq for TextFormat {}

impl std::fmt::Debug for TextFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

/// A client's own JSON format: its parser, from the object, the file's path (OpenCode's
/// `{file:path}` is relative to the file that says it), the layer kind and the context its
/// variables are expanded in. Compared by `name`.
#[derive(Clone, Copy)]
pub(super) struct JsonFormat {
    /// The format's name (for `Debug` and comparison).
    pub(super) name: &'static str,
    /// What a file in it says.
    pub(super) parse: fn(&Object, &Path, LayerSource, &Context<'_>) -> ClientContent,
}

impl PartialEq for JsonFormat {
    fn eq(&self, other: &Self) -> bool {
        self.name == other.name
    }
}

impl Eq for JsonFormat {}

impl std::fmt::Debug for JsonFormat {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name)
    }
}

/// Language servers in this host's format from a client file: their scope, as used and as
/// written.
pub(super) type PluginLsp = (
    mcp_reconcile_kernel::lsp::LspScope,
    mcp_reconcile_kernel::Object<mcp_reconcile_kernel::Object>,
    mcp_reconcile_kernel::Object<mcp_reconcile_kernel::Object>,
);

/// What a client file says, parsed.
#[derive(Clone, Debug, Default)]
pub(super) struct ClientContent {
    /// The server layers it feeds: kind, entries as used, entries as written.
    pub(super) layers: Vec<(LayerSource, Servers, Servers)>,
    /// Problems with single entries or keys; the rest of the file is used.
    pub(super) entry_errors: Vec<String>,
    /// The client's allow and deny rules from this file.
    pub(super) policy: Option<Policy>,
    /// The administrator's file says only its allow list counts.
    pub(super) managed_allow_only: bool,
    /// Project entries the client's own files reject (honoured: they stay off).
    pub(super) rejected: Vec<String>,
    /// Project entries the client approved by name only (shown; never approves here).
    pub(super) approved_by_name: Vec<String>,
    /// The client approves every project entry by name (shown; never approves here).
    pub(super) approve_all: bool,
    /// Servers the file turns off by a switch of their own (Codex's `enabled = false`).
    pub(super) disabled: Vec<String>,
    /// Servers `install codex` switched off in Codex and left to the gateway (marked).
    pub(super) left_to_gateway: Vec<String>,
    /// The file holds the gateway entry `install` wrote (Codex's `config.toml`).
    pub(super) gateway_installed: bool,
    /// Servers the file turns off, named lowercased and trimmed (Gemini CLI's switches).
    pub(super) disabled_folded: Vec<String>,
    /// What the file says of the project's trust: trusted, distrusted, or no rule (Gemini
    /// CLI's trust file; `None` from every other file).
    pub(super) folder_trust: Option<bool>,
    /// The administrator's allow list of servers by name and identity (Codex's
    /// `requirements.toml`): a server runs only when listed with its identity.
    pub(super) required: Option<Vec<(String, codex::Identity)>>,
    /// Claude Code's installed plugins that apply to this project, with their servers; they
    /// join `layers` while enabled (`claude_plugins::enable`).
    pub(super) plugins: Vec<claude_plugins::Plugin>,
    /// A Claude Code settings file's `enabledPlugins`: plugin id, on or off.
    pub(super) enabled_plugins: Vec<(String, bool)>,
    /// Language servers it adds (Claude Code's enabled plugins'), in this host's format: the
    /// scope they count in, used and as written.
    pub(super) lsp: Vec<PluginLsp>,
    /// When present, the file is the only source of servers (Claude's managed file).
    pub(super) exclusive: bool,
    /// The file trusts this project (Codex: `[projects."<root>"] trust_level = "trusted"`),
    /// which lets the project's own file of that client be read.
    pub(super) trusts_project: bool,
}

/// A client file's kind of [`InputFile`]: its format, the layer its servers go to, and when it
/// is read at all.
#[derive(Debug)]
pub(super) struct Client {
    pub(super) format: Format,
    /// The layer kind of its servers (the user's, the project's, the administrator's).
    pub(super) scope: LayerSource,
    /// Read only while another file of the layout trusts the project (Codex's project file).
    pub(super) needs_trust: bool,
    /// A `.mcp.json` in a directory above the project (`/tmp`, a shared checkout): not read
    /// when another user could have written it.
    pub(super) shared_parent: bool,
    /// The layer kinds of the earlier files whose entries of the same name this file's entries
    /// merge over, field by field (Codex's; `merge`). Empty: its entries stand as written.
    pub(super) merges_over: &'static [LayerSource],
    /// An editor's file in a format of its client's own ([`ClientFile::editor`]): once its
    /// user file holds the installed gateway, the client starts the rest itself.
    pub(super) editor: bool,
}

/// One client file and what was last loaded from it.
pub(super) type ClientFile = InputFile<Client>;

impl Format {
    /// An editor's file (Cursor, VS Code, Copilot CLI); another client's file that `install`
    /// hands over from the same way is made with [`ClientFile::editor`].
    fn is_editor(self) -> bool {
        matches!(self, Format::Cursor | Format::Vscode | Format::Copilot)
    }
}

impl Client {
    /// Whether the file is an editor's: `install` moves its user file's servers to the
    /// sidecar, and the client starts the servers left in its files itself.
    pub(super) fn is_editor(&self) -> bool {
        self.editor || self.format.is_editor()
    }

    /// Whether the file is project-controlled (its entries and lists come from the repository).
    pub(super) fn project_controlled(&self) -> bool {
        matches!(self.scope, LayerSource::Project | LayerSource::Workspace)
    }

    /// The file's text as its client reads it, or why not (without what stays in use).
    pub(super) fn read(
        &self,
        path: &Path,
        text: &mut Text,
        ctx: &Context<'_>,
        has_last_good: bool,
    ) -> Result<ClientContent, String> {
        if self.format == Format::ClaudeState {
            if let Some(top) = claude_state::parts(text.as_str(), ctx) {
                return Ok(claude::state(&top, ctx));
            }
        }
        match self.format {
            Format::Codex => codex::parse(text.as_str(), self.scope, ctx),
            Format::CodexRequirements => codex::requirements(text.as_str()),
            Format::Text(format) => (format.parse)(text.as_str(), self.scope, ctx),
            format => {
                let value = explain(text.json(), text.as_str(), has_last_good)
                    .map_err(|e| e.split(" — ").next().unwrap_or_default().to_owned())?;
                let Value::Object(top) = value else {
                    return Err(format!(
                        "must be a JSON object, found {}",
                        value.preview(60)
                    ));
                };
                Ok(match format {
                    Format::ClaudeState => claude::state(&top, ctx),
                    Format::ClaudeMcpJson => claude::mcp_json(&top, self.scope, ctx),
                    Format::ClaudeManaged => claude::managed(&top, ctx),
                    Format::ClaudeSettings { managed } => claude::settings(&top, managed),
                    Format::ClaudePlugins => claude_plugins::installed(&top, path, ctx)?,
                    Format::Cursor => editors::cursor(&top, self.scope, ctx),
                    Format::Vscode => editors::vscode(&top, self.scope, ctx),
                    Format::Copilot => editors::copilot(&top, self.scope, ctx),
                    Format::GeminiTrust => gemini::trust(&top, ctx)?,
                    Format::CopilotConfig => editors::copilot_config(&top, ctx),
                    Format::GeminiEnablement => gemini::enablement(&top),
                    Format::Json(format) => (format.parse)(&top, path, self.scope, ctx),
                    Format::Codex | Format::CodexRequirements | Format::Text(_) => {
                        unreachable!("handled above")
                    }
                })
            }
        }
    }
}

impl Kind for Client {
    type Content = ClientContent;

    fn empty(&self) -> ClientContent {
        ClientContent::default()
    }

    /// Claude Code's state file is large by nature (it keeps project histories); every other
    /// file keeps the small bound.
    fn limit(&self) -> u64 {
        match self.format {
            Format::ClaudeState => super::MAX_CLIENT_STATE_BYTES,
            _ => super::MAX_INPUT_BYTES,
        }
    }

    /// A shared parent's `.mcp.json` another user could have put there is not read; nor is a
    /// file of the user or the administrator that another user can write (those start servers
    /// without approval).
    fn refused(&self, path: &Path) -> Option<String> {
        if let Some(why) = self
            .shared_parent
            .then(|| crate::private::foreign_writer(path))
            .flatten()
        {
            return Some(format!(
                "not read: it lies above the project, and another user could have put it there \
                 — {why}"
            ));
        }
        (!self.project_controlled())
            .then(|| crate::private::foreign_writer(path))
            .flatten()
    }

    fn holds(&self, g: &ClientContent) -> bool {
        g.layers.iter().any(|(_, s, _)| !s.is_empty()) || g.exclusive || !g.plugins.is_empty()
    }

    fn held(&self, g: &ClientContent) -> Vec<String> {
        g.layers
            .iter()
            .flat_map(|(_, servers, _)| servers.keys().cloned())
            .collect()
    }

    fn parse(&self, reading: Reading<'_, '_>) -> Result<ClientContent, String> {
        let Reading {
            path,
            text,
            ctx,
            has_last_good,
        } = reading;
        self.read(path, text, &ctx.client, has_last_good)
            .map_err(|message| format!("{message} — fix the file; {}", kept_note(has_last_good)))
    }

    /// Whether the file's text parses in its format now; a JSON file's parse stays for the
    /// pass.
    fn complete(&self, text: &mut Text) -> bool {
        match self.format {
            Format::Codex | Format::CodexRequirements => {
                text.as_str().parse::<toml::Table>().is_ok()
            }
            Format::Text(format) => (format.complete)(text.as_str()),
            // Large by nature: checked without building the document, as it is read.
            Format::ClaudeState => claude_state::complete(text.as_str()),
            _ => text.check(),
        }
    }

    fn entry_errors<'a>(&self, g: &'a ClientContent) -> Vec<&'a String> {
        g.entry_errors.iter().collect()
    }
}

impl ClientFile {
    pub(super) fn new(format: Format, scope: LayerSource, path: PathBuf) -> Self {
        // Its changes are reported by its path.
        let source = FileSource::Settings(path.to_string_lossy().into_owned());
        let kind = Client {
            format,
            scope,
            needs_trust: false,
            shared_parent: false,
            merges_over: &[],
            editor: false,
        };
        InputFile::with(kind, path, Some(source))
    }

    /// An editor's file in a format of its client's own (a [`Format::Json`] or
    /// [`Format::Text`] whose client `install` hands over with the sidecar: the `mcpServers`
    /// family, Zed, Crush, Goose).
    pub(super) fn editor(format: Format, scope: LayerSource, path: PathBuf) -> Self {
        let mut file = ClientFile::new(format, scope, path);
        file.kind.editor = true;
        file
    }

    /// The files of a client `install` hands over from: the sidecar beside its user file
    /// `user`, the user file (which wins a name), then the project's file if it has one.
    pub(super) fn handed_over(
        format: Format,
        user: PathBuf,
        project: Option<PathBuf>,
    ) -> Vec<Self> {
        let mut files = vec![
            ClientFile::editor(format, LayerSource::User, sidecar(&user)),
            ClientFile::editor(format, LayerSource::User, user),
        ];
        files.extend(project.map(|path| ClientFile::editor(format, LayerSource::Project, path)));
        files
    }
}

/// The policy lists of a settings object: `allowedMcpServers` / `deniedMcpServers` (an entry
/// that is not a rule is reported and left out).
pub(super) fn policy_of(
    top: &mcp_reconcile_kernel::Object,
    errors: &mut Vec<String>,
) -> Option<Policy> {
    let mut rules = |key: &str| -> Option<Vec<PolicyRule>> {
        let value = top.get(key)?;
        if value.is_null() {
            return None;
        }
        let (rules, problems) = parse_rules(value);
        errors.extend(problems.into_iter().map(|p| format!("{key}: {p}")));
        Some(rules)
    };
    let allowed = rules("allowedMcpServers");
    let denied = rules("deniedMcpServers");
    (allowed.is_some() || denied.is_some()).then(|| Policy {
        allowed,
        denied: denied.unwrap_or_default(),
    })
}

/// The string items of an array field (others ignored).
pub(super) fn names(value: Option<&Value>) -> Vec<String> {
    match value {
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(Value::as_str)
            .map(str::to_owned)
            .collect(),
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(super) fn servers(names: &[&str]) -> Servers {
        names
            .iter()
            .map(|name| {
                let config = mcp_reconcile_kernel::ServerConfig::from_json(r#"{"command":"x"}"#)
                    .expect("config");
                ((*name).to_owned(), config)
            })
            .collect()
    }
}
