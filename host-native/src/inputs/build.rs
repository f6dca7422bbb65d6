//! [`Inputs::snapshot`](super::Inputs): what the loaded files hold, as layers for the kernel —
//! each layer as used, as its file wrote it (what a review shows) and the file it came from —
//! with the lists, the client layouts' admission, the approvals (a client's own rejections
//! laid over them), the language servers and every problem found; and `mcp.serverCommand`,
//! frozen at start-up.

use std::path::PathBuf;

use mcp_reconcile_kernel::json::Value;
use mcp_reconcile_kernel::policy::PolicyRule;
use mcp_reconcile_kernel::settings::{gemini_mcp_lists, mcp_lists, merged_server_command};
use mcp_reconcile_kernel::{Approvals, Decision, Layer, LayerSource, ServerConfig, Servers};

use super::clients::Dialect;
use super::shell_words::server_command_config;
use super::{clients, lsp, own_gateway, InputError, Inputs, Snapshot};

impl Inputs {
    pub(super) fn snapshot(&mut self) -> Snapshot {
        let mut errors = Vec::new();
        // Each layer as used, as its file wrote it (what a review shows: `$VAR`s of the
        // project-controlled ones not expanded), and the file it came from.
        let mut layers = Vec::new();
        let mut written_layers = Vec::new();
        let mut files: Vec<PathBuf> = Vec::new();
        let mut push = |source: LayerSource, servers: Servers, written: Servers, file: PathBuf| {
            let layer = |servers| Layer {
                source,
                servers,
                extension: None,
                from_workspace: false,
            };
            layers.push(layer(servers));
            written_layers.push(layer(written));
            files.push(file);
        };
        if let Some((dot_git, why)) = &self.git_problem {
            errors.push(InputError {
                file: dot_git.clone(),
                message: format!(
                    "{why} — so this directory is not taken as part of that repository, as git \
                     and Claude Code refuse it: nothing keyed by that repository (Claude Code's \
                     local scope) is used here"
                ),
            });
        }
        let client = clients::Admission::of(&self.files.clients, &mut errors);
        let dialect = self.layout.spec().settings.dialect;
        if dialect == Dialect::Gemini {
            self.gemini_trust(client.folder_trust, &mut errors);
        }
        for file in &self.files.settings {
            errors.extend(file.errors());
            let servers = file.content().servers;
            let written = if file.scope() == LayerSource::Workspace {
                file.written()
            } else {
                servers.clone()
            };
            let (servers, written) = match dialect {
                Dialect::Gemini => (gemini_transports(servers), gemini_transports(written)),
                Dialect::Own => (servers, written),
            };
            push(file.scope(), servers, written, file.path.clone());
        }
        if let Some(mcp_json) = &self.files.mcp_json {
            errors.extend(mcp_json.errors());
            push(
                LayerSource::Project,
                mcp_json.servers(),
                mcp_json.written(),
                mcp_json.path.clone(),
            );
        }
        for (file, content) in &client.read {
            for (source, servers, written) in &content.layers {
                push(*source, servers.clone(), written.clone(), file.clone());
            }
        }
        for config in &self.files.cli_configs {
            errors.extend(config.errors());
            push(
                LayerSource::CliConfig,
                config.servers(),
                config.servers(),
                config.path.clone(),
            );
        }

        let contents: Vec<(LayerSource, Value)> = self
            .files
            .settings
            .iter()
            .map(|f| (f.scope(), f.content().value))
            .collect();
        let scopes: Vec<(LayerSource, &Value)> = contents.iter().map(|(k, v)| (*k, v)).collect();
        let (share, lazy, pin) = if self.layout.reads_client_files() {
            // A client layout reads no settings file of ours for servers, but the sharing and
            // lazy defaults are this host's alone: `mcp.share`, `mcp.lazy` and
            // `mcp.lazyIdleMs` of our own user settings file.
            let own = own_share_settings(&self.paths.user, &mut errors);
            let own: Vec<(LayerSource, &Value)> =
                own.iter().map(|v| (LayerSource::User, v)).collect();
            (
                mcp_reconcile_kernel::share::share_settings(&own),
                mcp_reconcile_kernel::lazy::lazy_settings(&own),
                mcp_reconcile_kernel::pin::pin_settings(&own),
            )
        } else {
            (
                mcp_reconcile_kernel::share::share_settings(&scopes),
                mcp_reconcile_kernel::lazy::lazy_settings(&scopes),
                mcp_reconcile_kernel::pin::pin_settings(&scopes),
            )
        };
        let lists = match dialect {
            Dialect::Gemini => gemini_mcp_lists(&scopes),
            Dialect::Own => mcp_lists(&scopes),
        };

        let current = self.current_server_command(&scopes);
        let frozen = self.server_command.get_or_insert_with(|| {
            let parsed = current.text.as_deref().map(|text| {
                server_command_config(text, &self.project_dir, &|name| {
                    self.env.vars.get(name).cloned()
                })
                .map_err(|e| format!("{e}; fix mcp.serverCommand and restart mcp-reconcile"))
            });
            // As written: the workspace file's own text (settings files are
            // expanded when parsed), its `$VAR`s left in place.
            let written_text = self
                .files
                .settings
                .iter()
                .find(|f| {
                    f.scope() == LayerSource::Workspace && Some(&f.path) == current.file.as_ref()
                })
                .and_then(|f| f.good.as_ref()?.written_command.clone())
                .or_else(|| current.text.clone());
            let written = written_text.as_deref().and_then(|text| {
                server_command_config(text, &self.project_dir, &|name| {
                    Some(format!("${{{name}}}"))
                })
                .ok()
            });
            FrozenCommand {
                current: current.clone(),
                parsed,
                written,
            }
        });
        files.push(frozen.current.file.clone().unwrap_or_default());
        match &frozen.parsed {
            Some(Ok(config)) => {
                let from_workspace = frozen.current.kind == Some(LayerSource::Workspace);
                let layer = |config: &ServerConfig| {
                    let mut servers = Servers::new();
                    servers.insert("mcp".into(), config.clone());
                    Layer {
                        source: LayerSource::ServerCommand,
                        servers,
                        extension: None,
                        from_workspace,
                    }
                };
                layers.push(layer(config));
                written_layers.push(layer(frozen.written.as_ref().unwrap_or(config)));
            }
            Some(Err(message)) => errors.push(InputError {
                file: frozen.current.file.clone().unwrap_or_default(),
                message: message.clone(),
            }),
            None => {}
        }
        let gateways = own_gateway::drop_own_entries(
            &mut layers,
            &mut written_layers,
            &files,
            self.env.vars.get("PATH").map(String::as_str),
            &self.env.cwd,
            &mut errors,
        );
        if current.text != frozen.current.text {
            errors.push(InputError {
                file: current
                    .file
                    .clone()
                    .or_else(|| frozen.current.file.clone())
                    .unwrap_or_default(),
                message: "mcp.serverCommand changed; it takes effect when mcp-reconcile restarts \
                          (the running session keeps the command it started with)"
                    .into(),
            });
        }

        // An allow rule naming the installed gateway is there so that the client starts only
        // the gateway; it does not narrow what the gateway reaches.
        let mut lists = lists;
        let mut client_policies = client.policies;
        if !gateways.is_empty() && dialect == Dialect::Gemini {
            // Gemini intersects the scopes' lists: the gateway's name comes out of each list
            // before, so a list that named only the gateway restricts nothing and the
            // administrator's list still narrows.
            let scopes: Vec<(LayerSource, Value)> = contents
                .iter()
                .map(|(kind, value)| (*kind, allowed_without(value, &gateways)))
                .collect();
            let scopes: Vec<(LayerSource, &Value)> = scopes.iter().map(|(k, v)| (*k, v)).collect();
            lists = gemini_mcp_lists(&scopes);
        } else if !gateways.is_empty() {
            lists.allowed = without_gateways(lists.allowed.take(), |p| gateways.contains(p));
            for policy in &mut client_policies {
                policy.allowed = without_gateways(
                    policy.allowed.take(),
                    |rule| matches!(rule, PolicyRule::Name(n) if gateways.contains(n)),
                );
            }
        }
        let (mut approvals, problems) = self
            .approvals
            .clone()
            .unwrap_or_else(|| (Approvals::empty(), Vec::new()));
        // The client's own rejections of project entries hold here too (SPEC §15): in memory
        // only, as a rejection of the entry as it is now — the approvals file is not written.
        // The servers as assembled, only when a client's rejection or switch needs them.
        let assembled = if client.rejected.is_empty() && client.disabled_folded.is_empty() {
            mcp_reconcile_kernel::Servers::new()
        } else {
            mcp_reconcile_kernel::assemble(&layers).servers
        };
        let mut client_disabled = client.disabled;
        if !client.disabled_folded.is_empty() {
            client_disabled.extend(
                assembled
                    .keys()
                    .filter(|name| client.disabled_folded.contains(&clients::folded(name)))
                    .cloned(),
            );
        }
        for name in &client.rejected {
            if let Some(config) = assembled.get(name).filter(|c| c.is_gated()) {
                approvals.record(&self.project_root, name, config, Decision::Rejected);
            }
        }
        errors.extend(problems.into_iter().map(|problem| InputError {
            file: self.store.path().to_path_buf(),
            message: format!(
                "{problem} — every server from .mcp.json or workspace settings stays pending \
                 until it is fixed; repair or delete the file (the next approval keeps a copy \
                 as .bak)"
            ),
        }));

        let (lsp, lsp_written, lsp_approvals) = lsp::lsp_part(
            self.files.lsp_user.as_ref(),
            &self.files.lsp_project,
            &client.lsp,
            self.lsp_approvals.as_ref(),
            self.lsp_store.path(),
            &mut errors,
        );
        Snapshot {
            lsp_json: self.paths.lsp_json.clone(),
            lsp,
            lsp_written,
            lsp_approvals,
            layers,
            written_layers,
            layer_files: files,
            client_policies,
            client_disabled,
            client_approved: client.approved_by_name,
            lists,
            share,
            pin,
            lazy,
            cli_allowed: self.cli_allowed.clone(),
            approvals,
            project_root: self.project_root.clone(),
            trusted: self.trusted,
            yolo: self.yolo,
            errors,
            oauth_tokens: self.paths.oauth_tokens.clone(),
        }
    }

    /// Gemini CLI's trust of the project, decided when the session starts as Gemini CLI decides
    /// it (an untrusted folder: no workspace settings, and no server starts at all), and kept:
    /// a later change is reported and takes effect on restart, as in Gemini CLI.
    fn gemini_trust(&mut self, rule: Option<bool>, errors: &mut Vec<InputError>) {
        let scopes = self
            .files
            .settings
            .iter()
            .filter(|f| f.scope() != LayerSource::Workspace)
            .map(|f| (f.scope(), f.content().value))
            .collect::<Vec<_>>();
        let mut ordered: Vec<&(LayerSource, Value)> = scopes.iter().collect();
        ordered.sort_by_key(|(kind, _)| *kind);
        let on = clients::folder_trust_on(ordered.iter().map(|(_, value)| value));
        let verdict = clients::verdict(&self.env.vars, on, rule);
        let trust_file = self
            .files
            .clients
            .iter()
            .find(|f| f.kind.format == clients::Format::GeminiTrust)
            .map(|f| f.path.clone())
            .unwrap_or_default();
        let project = self.project_dir.display().to_string();
        let decided = *self.gemini_trusted.get_or_insert_with(|| verdict.is_ok());
        if !decided && self.trusted {
            // The first decision: this session runs as Gemini CLI would in this folder.
            self.trusted = false;
            self.files
                .settings
                .retain(|f| f.scope() != LayerSource::Workspace);
        }
        match verdict {
            Err(why) if !decided && !self.untrusted_flag => errors.push(InputError {
                file: trust_file,
                message: format!(
                    "Gemini CLI does not trust {project} ({why}): there it starts no MCP \
                     server, and neither does this session. Trust the folder in Gemini CLI (or \
                     add \"{project}\": \"TRUST_FOLDER\" to this file) and restart \
                     mcp-reconcile"
                ),
            }),
            verdict if verdict.is_ok() != decided => errors.push(InputError {
                file: trust_file,
                message: format!(
                    "Gemini CLI's trust of {project} changed; it takes effect when \
                     mcp-reconcile restarts (as in Gemini CLI)"
                ),
            }),
            _ => {}
        }
    }

    /// `mcp.serverCommand` over the settings scopes and the file that sets it.
    fn current_server_command(&self, scopes: &[(LayerSource, &Value)]) -> CommandSetting {
        let file = self
            .files
            .settings
            .iter()
            .zip(scopes)
            .filter(|(_, (_, value))| {
                value
                    .as_object()
                    .and_then(|o| o.get("mcp"))
                    .and_then(Value::as_object)
                    .is_some_and(|mcp| mcp.contains_key("serverCommand"))
            })
            .max_by_key(|(file, _)| file.scope())
            .map(|(file, _)| (file.path.clone(), file.scope()));
        CommandSetting {
            text: merged_server_command(scopes),
            file: file.as_ref().map(|(path, _)| path.clone()),
            kind: file.map(|(_, kind)| kind),
        }
    }
}

/// Gemini CLI's transport spellings (`"type": "http"`, a bare `url`) this host's way.
fn gemini_transports(servers: Servers) -> Servers {
    servers
        .into_iter()
        .map(|(name, config)| {
            let entry = clients::gemini_transport(config.into_object());
            (name, ServerConfig::new(entry))
        })
        .collect()
}

/// A settings value whose `mcp.allowed` leaves out `gateways`; a list that named only them is
/// removed (not set).
fn allowed_without(settings: &Value, gateways: &[String]) -> Value {
    let Value::Object(top) = settings else {
        return settings.clone();
    };
    let Some(Value::Object(mcp)) = top.get("mcp") else {
        return settings.clone();
    };
    let Some(Value::Array(items)) = mcp.get("allowed") else {
        return settings.clone();
    };
    let kept: Vec<Value> = items
        .iter()
        .filter(|item| {
            !item
                .as_str()
                .is_some_and(|n| gateways.iter().any(|g| g == n))
        })
        .cloned()
        .collect();
    let mut mcp = mcp.clone();
    if kept.is_empty() && !items.is_empty() {
        mcp.remove("allowed");
    } else {
        mcp.insert("allowed".into(), Value::Array(kept));
    }
    let mut top = top.clone();
    top.insert("mcp".into(), Value::Object(mcp));
    Value::Object(top)
}

/// `list` without the items `gateway` says name the installed gateway; a list that named only
/// the gateway is no list at all.
fn without_gateways<T>(list: Option<Vec<T>>, gateway: impl Fn(&T) -> bool) -> Option<Vec<T>> {
    let list = list?;
    if list.is_empty() {
        return Some(list);
    }
    let kept: Vec<T> = list.into_iter().filter(|item| !gateway(item)).collect();
    (!kept.is_empty()).then_some(kept)
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct CommandSetting {
    text: Option<String>,
    file: Option<PathBuf>,
    /// The scope of the file that sets it: the workspace one makes the `mcp`
    /// server project-controlled (gated, SPEC §3.1 row 10).
    kind: Option<LayerSource>,
}

/// `mcp.serverCommand` as read at start-up (it is restart-required).
#[derive(Debug)]
pub(super) struct FrozenCommand {
    current: CommandSetting,
    parsed: Option<Result<ServerConfig, String>>,
    /// The same command with `$VAR`s left as written (for review).
    written: Option<ServerConfig>,
}

/// Our own user settings file as a client layout reads it: for `mcp.share`, `mcp.lazy` and
/// `mcp.lazyIdleMs` only (bounded read, comments allowed); a file that cannot be read or parsed
/// is reported and shares nothing, and makes nothing lazy.
fn own_share_settings(path: &std::path::Path, errors: &mut Vec<InputError>) -> Option<Value> {
    let text = match super::read_text(path) {
        Ok(Some(text)) if !text.trim().is_empty() => text,
        Ok(_) => return None,
        Err(why) => {
            errors.push(InputError {
                file: path.to_path_buf(),
                message: format!("{why}; its mcp.share is not used"),
            });
            return None;
        }
    };
    match mcp_reconcile_kernel::json::parse_jsonc(&text) {
        Ok(value) => Some(value),
        Err(e) => {
            errors.push(InputError {
                file: path.to_path_buf(),
                message: format!("not valid JSON ({e}); its mcp.share is not used"),
            });
            None
        }
    }
}
