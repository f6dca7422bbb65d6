//! What a layout's client files say together ([`Admission`]): which files' servers count,
//! the merged policy, switches, rejections and by-name approvals (with who wrote them).

use std::path::PathBuf;

use mcp_reconcile_kernel::policy::Policy;
use mcp_reconcile_kernel::{LayerSource, Value};

use super::{claude_plugin_enable, codex, merge, ClientContent, ClientFile, PluginLsp};
use crate::inputs::{ApprovalWriter, InputError};

/// What a layout's client files say together: the files whose servers count (a present
/// exclusive file leaves out the others' servers; a file that needs the project's trust
/// counts only while another file trusts it), and their admission lists.
#[derive(Debug, Default)]
pub(in crate::inputs) struct Admission {
    /// The files whose servers count, with their content.
    pub(in crate::inputs) read: Vec<(PathBuf, ClientContent)>,
    /// The client's policies; a server must pass every one. The first is merged over the
    /// user's and the administrator's files: deny lists concatenated, allow lists concatenated
    /// (only the administrator's when it says so), not set when no file sets one. Each
    /// project-controlled file's allow list follows as one more policy: it can only narrow
    /// (Claude Code would concatenate it too, letting a repository widen an allow list); its
    /// deny rules join the first.
    pub(in crate::inputs) policies: Vec<Policy>,
    /// Servers switched off by their own entry.
    pub(in crate::inputs) disabled: Vec<String>,
    /// Servers switched off by name, lowercased and trimmed (Gemini CLI).
    pub(in crate::inputs) disabled_folded: Vec<String>,
    /// What the client's trust file says of the project (`None`: no rule, or no such file).
    pub(in crate::inputs) folder_trust: Option<bool>,
    /// The administrator's allow list by name and identity (Codex's `requirements.toml`).
    pub(in crate::inputs) required: Option<Vec<(String, codex::Identity)>>,
    /// Project entries the client rejects.
    pub(in crate::inputs) rejected: Vec<String>,
    /// Project entries a client file approves by name only (`"*"`: every one), and which.
    pub(in crate::inputs) approved_by_name: Vec<crate::inputs::ClientApproval>,
    /// Language servers the client's files add (Claude Code's enabled plugins').
    pub(in crate::inputs) lsp: Vec<PluginLsp>,
}

impl Admission {
    pub(in crate::inputs) fn of(files: &[ClientFile], errors: &mut Vec<InputError>) -> Self {
        let mut contents: Vec<(&ClientFile, ClientContent)> =
            files.iter().map(|f| (f, f.content())).collect();
        claude_plugin_enable::enable(&mut contents);
        let exclusive = contents
            .iter()
            .find(|(_, c)| c.exclusive)
            .map(|(f, _)| f.path.clone());
        // Only the user's and the administrator's files can trust the project (Codex reads
        // `[projects."<path>"]` from them alone): a repository's own file that declares its
        // folder trusted is not read for it — that is the file the trust would let in.
        let trusted = contents
            .iter()
            .any(|(f, c)| c.trusts_project && !f.kind.project_controlled());
        for (file, _) in contents
            .iter()
            .filter(|(f, c)| c.trusts_project && f.kind.project_controlled())
        {
            errors.push(InputError {
                file: file.path.clone(),
                message: "its [projects] entry trusting this project is ignored: only your own \
                          config (and the administrator's) can trust a project, as in Codex"
                    .into(),
            });
        }
        // An editor's user file that holds the installed gateway: the editor starts that
        // file's other servers and its project files' servers itself (it has no switch to
        // keep them off; install moved the user's servers to the sidecar).
        let handed_over = contents
            .iter()
            .find(|(f, c)| f.kind.is_editor() && f.kind.scope == LayerSource::User && installs(c))
            .map(|(f, _)| f.path.clone());
        let mut out = Admission::default();
        let managed_only = contents
            .iter()
            .any(|(f, c)| c.managed_allow_only && f.kind.scope == LayerSource::System);
        let mut merged: Option<Policy> = None;
        let mut narrowing = Vec::new();
        for (file, content) in &contents {
            let Some(policy) = &content.policy else {
                continue;
            };
            let first = merged.get_or_insert_with(Policy::default);
            first.denied.extend(policy.denied.iter().cloned());
            let counts = !managed_only || file.kind.scope == LayerSource::System;
            let Some(allowed) = policy.allowed.as_ref().filter(|_| counts) else {
                continue;
            };
            if file.kind.project_controlled() {
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
            if handed_over.is_some() && file.kind.is_editor() && file.kind.project_controlled() {
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
            if file.kind.needs_trust && !trusted {
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
            out.approved_by_name.extend(by_name(file, &content));
            if content.required.is_some() {
                out.required = content.required.clone();
            }
            let content = merge::merged(content, &out.read, file.kind.merges_over);
            out.read.push((file.path.clone(), content));
        }
        if let Some(required) = &out.required {
            out.disabled
                .extend(codex::not_required(&out.read, required));
        }
        for (file, name) in codex::run_by_codex(&out.read) {
            errors.push(InputError {
                message: format!(
                    "server `{}` was added after `mcp-reconcile install codex`, so Codex runs it \
                     itself and the gateway leaves it alone (run by both, it would run twice); \
                     `mcp-reconcile install codex` hands it over to the gateway",
                    crate::display::safe(&name)
                ),
                file,
            });
            out.disabled.push(name);
        }
        out
    }
}

/// The by-name approvals of `file`, each with the file and key that says so, and whether the
/// repository wrote it.
fn by_name(file: &ClientFile, content: &ClientContent) -> Vec<crate::inputs::ClientApproval> {
    let approval = |name: &str, key: &str| crate::inputs::ClientApproval {
        name: name.to_owned(),
        file: file.path.clone(),
        key: key.to_owned(),
        written_by: if !file.kind.project_controlled() {
            ApprovalWriter::User
        } else if file.path.ends_with(".claude/settings.local.json") {
            ApprovalWriter::ProjectLocal
        } else {
            ApprovalWriter::Repository
        },
    };
    let named = content
        .approved_by_name
        .iter()
        .map(|name| approval(name, "enabledMcpjsonServers"));
    let all = content
        .approve_all
        .then(|| approval("*", "enableAllProjectMcpServers"));
    named.chain(all).collect()
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
    use crate::inputs::clients::Format;

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
}
