//! Claude Code's files: `~/.claude.json` (user and local scopes), `.mcp.json`,
//! `managed-mcp.json`, and its settings files' approvals and policy lists.

use mcp_reconcile_kernel::{LayerSource, Object, Value};

use std::path::{Path, PathBuf};

use super::expand::{Context, Syntax};
use super::normalize::{entries, transport, BareUrl};
use super::spec::ClientSpec;
use super::strategy::{How, Install};
use super::{names, policy_of, ClientContent, ClientFile, Format};
use crate::inputs::host_env::{claude_home, HostEnv};
use crate::inputs::lsp_formats::LspFormat;

/// Claude Code's entry in the table of clients.
pub(super) static SPEC: ClientSpec = ClientSpec {
    name: "claude",
    title: "Claude Code",
    about: "Claude Code's files (~/.claude.json, .mcp.json, its settings and managed files)",
    help: "\
~/.claude.json (user scope, and this project's local scope), <project>/.mcp.json and every
parent's, /etc/claude-code/managed-mcp.json (exclusive when present; macOS: /Library/Application
Support/ClaudeCode/), and for approvals and policy ~/.claude/settings.json,
<project>/.claude/settings{,.local}.json, /etc/claude-code/managed-settings.json
($CLAUDE_CONFIG_DIR moves ~/.claude*; --system-settings FILE moves the managed files to FILE and
its directory), and the servers of the plugins ~/.claude/plugins/installed_plugins.json lists
and a settings file enables (enabledPlugins). Language servers: the project's .lsp.json and the
enabled plugins' (.lsp.json, lspServers), read as a Claude Code plugin's (extensionToLanguage
required, maxRestarts 3, no unknown fields)",
    lsp: LspFormat::ClaudePlugin,
    project_servers: ".mcp.json",
    files,
    install: Some(Install {
        how: How::Claude,
        stdio_type: true,
        lists_tools_once: false,
        pass_env: &[],
        afterwards: "Claude Code now starts only `reconcile`; it reaches every server of yours \
                     (user, local and project scope) and applies edits to them live. While it \
                     is installed, Claude Code refuses `claude mcp add` and its `mcp list` / \
                     `mcp get` show only `reconcile`: use `mcp-reconcile mcp add / remove / get \
                     / list` (the same arguments and scopes). Tools appear as \
                     mcp__reconcile__SERVER__TOOL: a permission rule for \
                     mcp__github__create_issue is now mcp__reconcile__github__create_issue. \
                     Project servers (.mcp.json) are approved with `mcp-reconcile approve NAME` \
                     once per exact config.",
    }),
    ..ClientSpec::CLIENT
};

/// Claude Code's files. `managed_settings` (`--system-settings`) moves its administrator
/// files: `managed-settings.json` is that file and `managed-mcp.json` lies beside it.
fn files(
    project: &Path,
    env: &HostEnv,
    managed_settings: Option<PathBuf>,
) -> anyhow::Result<Vec<ClientFile>> {
    let file = ClientFile::new;
    // `CLAUDE_CONFIG_DIR` moves both the settings and the state file.
    let (config_dir, state) = claude_home(env, "Claude Code's files")?;
    let managed_settings =
        managed_settings.unwrap_or_else(|| claude_managed_dir().join("managed-settings.json"));
    let managed = managed_settings
        .parent()
        .map_or_else(claude_managed_dir, Path::to_path_buf);
    let plugins = env.var("CLAUDE_CODE_PLUGIN_CACHE_DIR").map_or_else(
        || config_dir.join("plugins"),
        |dir| env.absolute(Path::new(dir)),
    );
    let settings = Format::ClaudeSettings { managed: false };
    Ok(vec![
        file(
            settings,
            LayerSource::User,
            config_dir.join("settings.json"),
        ),
        file(
            settings,
            LayerSource::Project,
            project.join(".claude/settings.json"),
        ),
        file(
            settings,
            LayerSource::Project,
            project.join(".claude/settings.local.json"),
        ),
        file(
            Format::ClaudeSettings { managed: true },
            LayerSource::System,
            managed_settings,
        ),
        file(Format::ClaudeState, LayerSource::User, state),
        file(
            Format::ClaudePlugins,
            LayerSource::User,
            plugins.join("installed_plugins.json"),
        ),
        file(
            Format::ClaudeManaged,
            LayerSource::System,
            managed.join("managed-mcp.json"),
        ),
    ]
    .into_iter()
    // Every `.mcp.json` from the project up to (not including) `/`; the nearest wins.
    .chain(
        project
            .ancestors()
            .filter(|dir| dir.parent().is_some())
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .map(|dir| {
                let mut f = file(
                    Format::ClaudeMcpJson,
                    LayerSource::Project,
                    dir.join(".mcp.json"),
                );
                // One above the project may be another user's (`/tmp/.mcp.json`).
                f.kind.shared_parent = dir != project;
                f
            }),
    )
    .collect())
}

/// Where Claude Code's administrator files live: `/Library/Application Support/ClaudeCode` on
/// macOS, `/etc/claude-code` elsewhere.
fn claude_managed_dir() -> PathBuf {
    if cfg!(target_os = "macos") {
        PathBuf::from("/Library/Application Support/ClaudeCode")
    } else {
        PathBuf::from("/etc/claude-code")
    }
}

/// The fields Claude Code expands `${VAR}` in.
const EXPANDED: [&str; 5] = ["command", "args", "env", "url", "headers"];

/// One entry as Claude Code reads it: expanded, then its transport normalized; the variables
/// it uses that are not set (left as written, as Claude Code does) are added to `unset`.
pub(super) fn entry(
    ctx: &Context<'_>,
    object: &Object,
    unset: &mut Vec<String>,
) -> Result<(Object, Object), String> {
    let written = transport(object.clone(), BareUrl::Error)?;
    let (expanded, missing) = ctx.expand_entry(Syntax::Claude, object, Some(&EXPANDED))?;
    unset.extend(missing);
    let used = transport(expanded, BareUrl::Error)?;
    Ok((used, written))
}

/// The `mcpServers` object of `top` as one layer; an `mcpServers` that is not an object is an
/// error.
fn layer(
    top: &Object,
    source: LayerSource,
    where_: &str,
    ctx: &Context<'_>,
    out: &mut ClientContent,
) {
    match top.get("mcpServers") {
        None | Some(Value::Null) => {}
        Some(Value::Object(map)) => {
            let mut notes = Vec::new();
            let (used, written) = entries(map, where_, &mut out.entry_errors, |o| {
                let mut unset = Vec::new();
                let result = entry(ctx, o, &mut unset);
                if !unset.is_empty() {
                    notes.push(unset.join(", "));
                }
                result
            });
            out.entry_errors.extend(notes.into_iter().map(|vars| {
                format!(
                    "{where_}: missing environment variables {vars} — passed on as written, as \
                     Claude Code does; set them before the session starts"
                )
            }));
            out.layers.push((source, used, written));
        }
        Some(other) => out.entry_errors.push(format!(
            "{where_} must be an object of server entries, found {} — no servers are loaded \
             from it",
            other.preview(60)
        )),
    }
}

/// The `.mcp.json` approval keys of a settings object (or of a project's entry in
/// `~/.claude.json`, where older versions keep them).
fn approvals(top: &Object, out: &mut ClientContent) {
    out.approved_by_name
        .extend(names(top.get("enabledMcpjsonServers")));
    out.rejected
        .extend(names(top.get("disabledMcpjsonServers")));
    out.approve_all |= top.get("enableAllProjectMcpServers") == Some(&Value::Bool(true));
}

/// `~/.claude.json`: user-scope `mcpServers`, and this project's local scope.
pub(super) fn state(top: &Object, ctx: &Context<'_>) -> ClientContent {
    let mut out = ClientContent::default();
    layer(
        top,
        LayerSource::User,
        "mcpServers (user scope)",
        ctx,
        &mut out,
    );
    let project = top
        .get("projects")
        .and_then(Value::as_object)
        .and_then(|projects| {
            // Claude Code's key is the git root (else the real path of its directory).
            ctx.git_root
                .into_iter()
                .chain([ctx.project, ctx.project_given])
                .find_map(|dir| projects.get(&dir.to_string_lossy()))
        })
        .and_then(Value::as_object);
    if let Some(project) = project {
        // The local scope: private to this user, above the project's .mcp.json, not gated.
        layer(
            project,
            LayerSource::Session,
            "mcpServers of this project (local scope)",
            ctx,
            &mut out,
        );
        approvals(project, &mut out);
    }
    out
}

/// The project's `.mcp.json`.
pub(super) fn mcp_json(top: &Object, scope: LayerSource, ctx: &Context<'_>) -> ClientContent {
    let mut out = ClientContent::default();
    if !matches!(top.get("mcpServers"), Some(Value::Object(_))) {
        out.entry_errors.push(
            "no \"mcpServers\" object — write {\"mcpServers\": {\"name\": {…}}}; no servers \
             are loaded from it"
                .into(),
        );
    }
    layer(top, scope, "mcpServers", ctx, &mut out);
    out
}

/// `managed-mcp.json`: the administrator's servers, and the only ones while it exists.
pub(super) fn managed(top: &Object, ctx: &Context<'_>) -> ClientContent {
    let mut out = ClientContent {
        exclusive: true,
        ..ClientContent::default()
    };
    layer(top, LayerSource::System, "mcpServers", ctx, &mut out);
    out
}

/// A settings file: approvals of `.mcp.json` servers, and the policy lists (Claude Code
/// merges them over every settings file; the managed file may keep the allow list to itself).
pub(super) fn settings(top: &Object, managed: bool) -> ClientContent {
    let mut out = ClientContent::default();
    approvals(top, &mut out);
    out.policy = policy_of(top, &mut out.entry_errors);
    out.enabled_plugins = enabled_plugins(top);
    out.managed_allow_only =
        managed && top.get("allowManagedMcpServersOnly") == Some(&Value::Bool(true));
    out
}

/// A settings file's `enabledPlugins`: `true` or a list turns a plugin on, `false` off.
pub(super) fn enabled_plugins(top: &Object) -> Vec<(String, bool)> {
    let Some(Value::Object(map)) = top.get("enabledPlugins") else {
        return Vec::new();
    };
    map.iter()
        .filter_map(|(id, value)| match value {
            Value::Bool(on) => Some((id.clone(), *on)),
            Value::Array(_) => Some((id.clone(), true)),
            _ => None,
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::path::Path;

    use super::*;
    use crate::inputs::object;

    fn ctx(vars: &BTreeMap<String, String>) -> Context<'_> {
        Context {
            vars,
            home: Some(Path::new("/home/u")),
            project: Path::new("/real/proj"),
            project_given: Path::new("/link/proj"),
            git_root: None,
        }
    }

    #[test]
    fn the_state_file_gives_the_user_scope_and_this_projects_local_scope() {
        let vars = BTreeMap::from([("TOKEN".to_owned(), "t".to_owned())]);
        let top = object(
            r#"{"mcpServers":{"u":{"type":"stdio","command":"u"}},
                "projects":{
                  "/other":{"mcpServers":{"x":{"command":"x"}}},
                  "/link/proj":{"mcpServers":{"l":{"type":"http","url":"https://h/${TOKEN}"}},
                                "disabledMcpjsonServers":["bad"],
                                "enabledMcpjsonServers":["good"]}}}"#,
        );
        let content = state(&top, &ctx(&vars));
        let kinds: Vec<(LayerSource, Vec<&String>)> = content
            .layers
            .iter()
            .map(|(k, s, _)| (*k, s.keys().collect()))
            .collect();
        assert_eq!(
            kinds,
            [
                (LayerSource::User, vec![&"u".to_owned()]),
                (LayerSource::Session, vec![&"l".to_owned()])
            ]
        );
        let local = &content.layers[1];
        assert_eq!(
            local.1.get("l").and_then(|c| c.str_field("httpUrl")),
            Some("https://h/t")
        );
        assert_eq!(
            local.2.get("l").and_then(|c| c.str_field("httpUrl")),
            Some("https://h/${TOKEN}"),
            "as written for the review"
        );
        assert_eq!(content.rejected, ["bad"]);
        assert_eq!(content.approved_by_name, ["good"]);
    }

    #[test]
    fn a_bad_entry_is_named_and_the_rest_load() {
        let vars = BTreeMap::new();
        let top = object(
            r#"{"mcpServers":{"remote":{"url":"https://x"},"env":{"command":"${MISSING}"},
                "ok":{"command":"ok","env":{"A":"${MISSING:-d}"}},"n":3}}"#,
        );
        let content = mcp_json(&top, LayerSource::Project, &ctx(&vars));
        assert_eq!(
            content.layers[0].1.keys().collect::<Vec<_>>(),
            ["env", "ok"]
        );
        assert_eq!(
            content.layers[0]
                .1
                .get("env")
                .and_then(|c| c.str_field("command")),
            Some("${MISSING}"),
            "an unset variable stays as written"
        );
        assert_eq!(content.entry_errors.len(), 3, "{:?}", content.entry_errors);
        assert!(content.entry_errors[0].contains("\"remote\""));
        assert!(content.entry_errors[2].contains("MISSING"));
    }

    #[test]
    fn settings_carry_approvals_and_policy() {
        let top = object(
            r#"{"deniedMcpServers":[{"serverName":"x"}],"disabledMcpjsonServers":["p"],
                "allowManagedMcpServersOnly":true}"#,
        );
        let user = settings(&top, false);
        assert_eq!(user.rejected, ["p"]);
        assert!(!user.managed_allow_only, "only the managed file may say so");
        let policy = user.policy.expect("policy");
        assert_eq!(policy.denied.len(), 1);
        assert!(policy.allowed.is_none());
        assert!(settings(&top, true).managed_allow_only);
        let broken = settings(
            &object(r#"{"allowedMcpServers":[{"serverName":1}]}"#),
            false,
        );
        assert_eq!(
            broken.policy.and_then(|p| p.allowed),
            Some(Vec::new()),
            "an invalid allow list admits nothing"
        );
    }
}
