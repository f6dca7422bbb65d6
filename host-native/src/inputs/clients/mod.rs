//! Other clients' own files, read live (SPEC §15): Claude Code, Cursor, VS Code / Copilot and
//! Codex. (Gemini CLI and qwen-code use the settings-file schema this host reads natively, so
//! their layouts only change paths: see `paths`.)
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
//! Parts: `expand` (each client's variable syntax), `normalize` (transport spellings),
//! `claude`, `editors` (Cursor, VS Code, Copilot CLI), `codex` (TOML).

mod claude;
mod claude_plugin_enable;
mod claude_plugin_entries;
mod claude_plugins;
mod codex;
mod editors;
mod expand;
#[doc(hidden)]
pub mod fuzz;
mod gemini;
mod layouts;
mod normalize;

use std::path::PathBuf;

use mcp_reconcile_kernel::policy::{parse_rules, Policy, PolicyRule};
use mcp_reconcile_kernel::reload::FileSource;
use mcp_reconcile_kernel::{LayerSource, Servers, Value};

pub use codex::CODEX_MARK;
pub(super) use expand::{git_root, Context};
pub(super) use gemini::{folded, folder_trust_on, verdict};
pub(super) use layouts::client_files;
pub(crate) use layouts::{editor_user_file, sidecar};
pub(super) use normalize::gemini_transport;

use super::files::{file_errors, kept_note, read_input, read_text, Missing, Read};
use super::InputError;

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

/// One client file and what was last loaded from it.
#[derive(Debug)]
pub(super) struct ClientFile {
    pub(super) format: Format,
    /// The layer kind of its servers (the user's, the project's, the administrator's).
    pub(super) scope: LayerSource,
    pub(super) path: PathBuf,
    pub(super) loaded: bool,
    pub(super) good: Option<ClientContent>,
    pub(super) error: Option<String>,
    pub(super) missing: Missing,
    /// Read only while another file of the layout trusts the project (Codex's project file).
    pub(super) needs_trust: bool,
}

impl Format {
    /// An editor's file (Cursor, VS Code, Copilot CLI).
    fn is_editor(self) -> bool {
        matches!(self, Format::Cursor | Format::Vscode | Format::Copilot)
    }
}

impl ClientFile {
    pub(super) fn new(format: Format, scope: LayerSource, path: PathBuf) -> Self {
        ClientFile {
            format,
            scope,
            path,
            loaded: false,
            good: None,
            error: None,
            missing: Missing::No,
            needs_trust: false,
        }
    }

    /// The source its changes are reported as (named by its path).
    pub(super) fn source(&self) -> FileSource {
        FileSource::Settings(self.path.to_string_lossy().into_owned())
    }

    /// Whether the file is project-controlled (its entries and lists come from the repository).
    fn project_controlled(&self) -> bool {
        matches!(self.scope, LayerSource::Project | LayerSource::Workspace)
    }

    pub(super) fn reload(&mut self, ctx: &Context<'_>) {
        self.loaded = true;
        let had_content = self.good.as_ref().is_some_and(|g| {
            g.layers.iter().any(|(_, s, _)| !s.is_empty()) || g.exclusive || !g.plugins.is_empty()
        });
        let text = match read_input(
            &self.path,
            !self.project_controlled(),
            self.good.is_some(),
            had_content,
            &mut self.missing,
        ) {
            Read::Text(text) => text,
            Read::Empty => {
                self.good = Some(ClientContent::default());
                self.error = None;
                return;
            }
            Read::Kept(message) => {
                self.error = Some(message);
                return;
            }
        };
        match self.parse(&text, ctx) {
            Ok(content) => {
                self.good = Some(content);
                self.error = None;
            }
            Err(message) => {
                self.error = Some(format!(
                    "{message} — fix the file; {}",
                    kept_note(self.good.is_some())
                ));
            }
        }
    }

    fn parse(&self, text: &str, ctx: &Context<'_>) -> Result<ClientContent, String> {
        match self.format {
            Format::Codex => codex::parse(text, self.scope, ctx),
            Format::CodexRequirements => codex::requirements(text),
            format => {
                let value = super::files::parse_or_explain(text, self.good.is_some())
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
                    Format::ClaudePlugins => claude_plugins::installed(&top, &self.path, ctx)?,
                    Format::Cursor => editors::cursor(&top, self.scope, ctx),
                    Format::Vscode => editors::vscode(&top, self.scope, ctx),
                    Format::Copilot => editors::copilot(&top, self.scope, ctx),
                    Format::GeminiTrust => gemini::trust(&top, ctx)?,
                    Format::CopilotConfig => editors::copilot_config(&top, ctx),
                    Format::GeminiEnablement => gemini::enablement(&top),
                    Format::Codex | Format::CodexRequirements => unreachable!("handled above"),
                })
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
        let held = self.good.replace(ClientContent::default());
        Some(
            held.into_iter()
                .flat_map(|g| g.layers)
                .flat_map(|(_, servers, _)| servers.keys().cloned().collect::<Vec<_>>())
                .collect(),
        )
    }

    /// The content in use: the last good one, or nothing.
    pub(super) fn content(&self) -> ClientContent {
        self.good.clone().unwrap_or_default()
    }

    pub(super) fn errors(&self) -> Vec<InputError> {
        let entry_errors = self.good.iter().flat_map(|g| g.entry_errors.iter());
        file_errors(&self.path, self.error.as_ref(), entry_errors)
    }

    /// Whether the file's text parses in its format now (settle detection).
    pub(super) fn complete(&self) -> bool {
        matches!(read_text(&self.path), Ok(Some(text)) if !text.trim().is_empty() && match self.format {
            Format::Codex | Format::CodexRequirements => text.parse::<toml::Table>().is_ok(),
            _ => mcp_reconcile_kernel::json::parse_jsonc(&text).is_ok(),
        })
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

/// What a layout's client files say together: the files whose servers count (a present
/// exclusive file leaves out the others' servers; a file that needs the project's trust
/// counts only while another file trusts it), and their admission lists.
#[derive(Debug, Default)]
pub(super) struct Admission {
    /// The files whose servers count, with their content.
    pub(super) read: Vec<(PathBuf, ClientContent)>,
    /// The client's policies; a server must pass every one. The first is merged over the
    /// user's and the administrator's files: deny lists concatenated, allow lists concatenated
    /// (only the administrator's when it says so), not set when no file sets one. Each
    /// project-controlled file's allow list follows as one more policy: it can only narrow
    /// (Claude Code would concatenate it too, letting a repository widen an allow list); its
    /// deny rules join the first.
    pub(super) policies: Vec<Policy>,
    /// Servers switched off by their own entry.
    pub(super) disabled: Vec<String>,
    /// Servers switched off by name, lowercased and trimmed (Gemini CLI).
    pub(super) disabled_folded: Vec<String>,
    /// What the client's trust file says of the project (`None`: no rule, or no such file).
    pub(super) folder_trust: Option<bool>,
    /// The administrator's allow list by name and identity (Codex's `requirements.toml`).
    pub(super) required: Option<Vec<(String, codex::Identity)>>,
    /// Project entries the client rejects.
    pub(super) rejected: Vec<String>,
    /// Project entries the client approved by name only.
    pub(super) approved_by_name: Vec<String>,
    /// The client approves every project entry by name.
    pub(super) approve_all: bool,
    /// Language servers the client's files add (Claude Code's enabled plugins').
    pub(super) lsp: Vec<PluginLsp>,
}

impl Admission {
    pub(super) fn of(files: &[ClientFile], errors: &mut Vec<InputError>) -> Self {
        let mut contents: Vec<(&ClientFile, ClientContent)> =
            files.iter().map(|f| (f, f.content())).collect();
        claude_plugin_enable::enable(&mut contents);
        let exclusive = contents
            .iter()
            .find(|(_, c)| c.exclusive)
            .map(|(f, _)| f.path.clone());
        let trusted = contents.iter().any(|(_, c)| c.trusts_project);
        // An editor's user file that holds the installed gateway: the editor starts that
        // file's other servers and its project files' servers itself (it has no switch to
        // keep them off; install moved the user's servers to the sidecar).
        let handed_over = contents
            .iter()
            .find(|(f, c)| f.format.is_editor() && f.scope == LayerSource::User && installs(c))
            .map(|(f, _)| f.path.clone());
        let mut out = Admission::default();
        let managed_only = contents
            .iter()
            .any(|(f, c)| c.managed_allow_only && f.scope == LayerSource::System);
        let mut merged: Option<Policy> = None;
        let mut narrowing = Vec::new();
        for (file, content) in &contents {
            let Some(policy) = &content.policy else {
                continue;
            };
            let first = merged.get_or_insert_with(Policy::default);
            first.denied.extend(policy.denied.iter().cloned());
            let counts = !managed_only || file.scope == LayerSource::System;
            let Some(allowed) = policy.allowed.as_ref().filter(|_| counts) else {
                continue;
            };
            if file.project_controlled() {
                narrowing.push(Policy {
                    allowed: Some(allowed.clone()),
                    denied: Vec::new(),
                });
            } else {
                first
                    .allowed
                    .get_or_insert_with(Vec::new)
                    .extend(allowed.iter().cloned());
            }
        }
        out.policies = merged.into_iter().chain(narrowing).collect();
        for (file, content) in contents {
            errors.extend(file.errors());
            out.lsp.extend(content.lsp.iter().cloned());
            let has_servers = content.layers.iter().any(|(_, s, _)| !s.is_empty());
            if handed_over.is_some() && file.format.is_editor() && file.project_controlled() {
                continue;
            }
            if handed_over.as_ref() == Some(&file.path) {
                let others: Vec<&String> = content
                    .layers
                    .iter()
                    .flat_map(|(_, servers, _)| servers.iter())
                    .filter(|(_, config)| !installed(config))
                    .map(|(name, _)| name)
                    .collect();
                if !others.is_empty() {
                    errors.push(InputError {
                        file: file.path.clone(),
                        message: format!(
                            "{} started by the editor itself, not by the gateway (this file \
                             holds the installed gateway): run `mcp-reconcile install` for \
                             this editor again to hand {} over",
                            others
                                .iter()
                                .map(|n| format!("\"{}\"", crate::display::safe(n)))
                                .collect::<Vec<_>>()
                                .join(", ")
                                + if others.len() == 1 { " is" } else { " are" },
                            if others.len() == 1 { "it" } else { "them" }
                        ),
                    });
                }
                continue;
            }
            if file.needs_trust && !trusted {
                if has_servers {
                    errors.push(InputError {
                        file: file.path.clone(),
                        message: "not read: the client does not trust this project (mark it \
                                  trusted in the client first: Codex's [projects] trust_level = \
                                  \"trusted\", Copilot CLI's trusted_folders)"
                            .into(),
                    });
                }
                continue;
            }
            if let Some(only) = exclusive
                .as_ref()
                .filter(|_| !content.exclusive && has_servers)
            {
                errors.push(InputError {
                    file: file.path.clone(),
                    message: format!(
                        "its servers are not used: {} is present, and the client then uses \
                         only that file's servers",
                        only.display()
                    ),
                });
                continue;
            }
            out.disabled.extend(content.disabled.iter().cloned());
            out.disabled_folded
                .extend(content.disabled_folded.iter().cloned());
            out.folder_trust = out.folder_trust.or(content.folder_trust);
            out.rejected.extend(content.rejected.iter().cloned());
            out.approved_by_name
                .extend(content.approved_by_name.iter().cloned());
            out.approve_all |= content.approve_all;
            if content.required.is_some() {
                out.required = content.required.clone();
            }
            // Codex merges its files field by field: each entry over the same name in the
            // files before it (the administrator's `config.toml`, then the user's). A merged
            // project entry is the project's — gated, approved as a whole; the managed file's
            // entries merge over the administrator's and the user's, never a project's.
            let bases: &[LayerSource] = match (file.format, file.scope) {
                (Format::Codex, LayerSource::User) => &[LayerSource::SystemDefaults],
                (Format::Codex, LayerSource::Project | LayerSource::System) => {
                    &[LayerSource::SystemDefaults, LayerSource::User]
                }
                _ => &[],
            };
            let content = codex::merged(content, &out.read, bases);
            out.read.push((file.path.clone(), content));
        }
        if let Some(required) = &out.required {
            out.disabled
                .extend(codex::not_required(&out.read, required));
        }
        out
    }
}

/// Whether `config` is the gateway `install` put in (its env carries the install mark).
fn installed(config: &mcp_reconcile_kernel::ServerConfig) -> bool {
    config
        .get("env")
        .and_then(Value::as_object)
        .is_some_and(|env| env.contains_key(crate::inputs::INSTALLED_MARK))
}

/// Whether a file's content holds the installed gateway.
fn installs(content: &ClientContent) -> bool {
    content
        .layers
        .iter()
        .any(|(_, servers, _)| servers.values().any(installed))
}

#[cfg(test)]
mod tests {
    use mcp_reconcile_kernel::json::parse;
    use mcp_reconcile_kernel::policy::parse_rules;

    use super::*;

    fn settings(scope: LayerSource, allowed: &str) -> ClientFile {
        let mut file = ClientFile::new(
            Format::ClaudeSettings { managed: false },
            scope,
            PathBuf::from("/nonexistent/settings.json"),
        );
        file.loaded = true;
        file.good = Some(ClientContent {
            policy: Some(Policy {
                allowed: Some(parse_rules(&parse(allowed).expect("json")).0),
                denied: Vec::new(),
            }),
            ..ClientContent::default()
        });
        file
    }

    #[test]
    fn a_project_allow_list_only_narrows() {
        let files = [
            settings(
                LayerSource::User,
                r#"[{"serverName":"user1"},{"serverName":"both"}]"#,
            ),
            settings(
                LayerSource::Project,
                r#"[{"serverName":"both"},{"serverName":"repo"}]"#,
            ),
        ];
        let admission = Admission::of(&files, &mut Vec::new());
        let servers = crate::inputs::clients::tests::servers(&["user1", "both", "repo"]);
        let admitted: Vec<&String> = servers
            .iter()
            .filter(|(name, config)| admission.policies.iter().all(|p| p.admits(name, config)))
            .map(|(name, _)| name)
            .collect();
        assert_eq!(
            admitted,
            ["both"],
            "the repository's list cannot add \"repo\""
        );
    }

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
