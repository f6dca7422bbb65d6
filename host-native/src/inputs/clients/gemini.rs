//! Gemini CLI's files beside its settings (0.61): the folder trust it keeps in
//! `trustedFolders.json`, and the per-server switches `gemini mcp disable` writes to
//! `mcp-server-enablement.json`.
//!
//! In a folder Gemini CLI does not trust it starts no MCP server at all, the user's included;
//! `--layout gemini` does the same. Trust is decided when the session starts, as Gemini CLI
//! decides it at start-up ([`verdict`]).

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use mcp_reconcile_kernel::{Object, Value};

use mcp_reconcile_kernel::LayerSource;

use super::expand::Context;
use super::spec::{ClientSpec, Dialect, SettingsFiles, UserLsp};
use super::strategy::{How, Install};
use super::{ClientContent, ClientFile, Format};
use crate::inputs::host_env::{gemini_home, HostEnv};
use crate::inputs::lsp_formats::LspFormat;

/// Gemini CLI's entry in the table of clients: its settings files are this host's schema (read
/// with Gemini CLI's differences: `inputs::build`), with its folder trust and switches beside.
pub(super) static SPEC: ClientSpec = ClientSpec {
    name: "gemini",
    title: "Gemini CLI",
    about: "Gemini CLI's settings files",
    help: "\
~/.gemini/settings.json (or $GEMINI_CLI_HOME/.gemini/), <project>/.gemini/settings.json,
/etc/gemini-cli/settings.json and system-defaults.json (macOS: /Library/Application
Support/GeminiCli/; or $GEMINI_CLI_SYSTEM_SETTINGS_PATH / $GEMINI_CLI_SYSTEM_DEFAULTS_PATH),
trustedFolders.json ($GEMINI_CLI_TRUSTED_FOLDERS_PATH) and mcp-server-enablement.json beside
the user settings; no .mcp.json",
    reads_client_files: false,
    reads_mcp_json: false,
    lsp: LspFormat::Own,
    project_servers: ".mcp.json",
    project_lsp: ".lsp.json",
    user_lsp: UserLsp::Own,
    settings: SettingsFiles {
        user: |env| Ok(gemini_home(env, "user settings")?.join("settings.json")),
        workspace_dir: ".gemini",
        system_dir,
        system_var: Some("GEMINI_CLI_SYSTEM_SETTINGS_PATH"),
        defaults_var: Some("GEMINI_CLI_SYSTEM_DEFAULTS_PATH"),
        dialect: Dialect::Gemini,
    },
    keeps: None,
    files,
    editor: None,
    install: Some(Install {
        how: How::Settings(|env| {
            Ok(gemini_home(env, "Gemini CLI's settings")?.join("settings.json"))
        }),
        stdio_type: false,
        lists_tools_once: false,
        pass_env: &[],
        afterwards: super::strategy::SETTINGS_AFTERWARDS,
    }),
};

/// Gemini CLI's administrator directory: `/Library/Application Support/GeminiCli` on macOS,
/// `/etc/gemini-cli` elsewhere.
fn system_dir() -> PathBuf {
    if cfg!(target_os = "macos") {
        PathBuf::from("/Library/Application Support/GeminiCli")
    } else {
        PathBuf::from("/etc/gemini-cli")
    }
}

/// Beside the settings files (read as this host's own): the folder trust and the per-server
/// switches.
fn files(_: &Path, env: &HostEnv, _: Option<PathBuf>) -> anyhow::Result<Vec<ClientFile>> {
    let dir = gemini_home(env, "Gemini CLI's files")?;
    let trust = env.var("GEMINI_CLI_TRUSTED_FOLDERS_PATH").map_or_else(
        || dir.join("trustedFolders.json"),
        |path| env.absolute(Path::new(path)),
    );
    Ok(vec![
        ClientFile::new(Format::GeminiTrust, LayerSource::User, trust),
        ClientFile::new(
            Format::GeminiEnablement,
            LayerSource::User,
            dir.join("mcp-server-enablement.json"),
        ),
    ])
}

/// A rule's level in `trustedFolders.json`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Level {
    TrustFolder,
    TrustParent,
    DoNotTrust,
}

impl Level {
    fn parse(value: &Value) -> Option<Level> {
        match value.as_str()? {
            "TRUST_FOLDER" => Some(Level::TrustFolder),
            "TRUST_PARENT" => Some(Level::TrustParent),
            "DO_NOT_TRUST" => Some(Level::DoNotTrust),
            _ => None,
        }
    }
}

/// `trustedFolders.json`: `{ "<path>": "TRUST_FOLDER" | "TRUST_PARENT" | "DO_NOT_TRUST" }`. The
/// rule whose key is longest among those covering the project decides (`TRUST_PARENT` covers
/// the key's parent directory); paths compare by real path, relative keys against the project.
///
/// # Errors
/// A value that is no trust level: Gemini CLI refuses to start then, and this layout trusts
/// nothing (the message names the key).
pub(super) fn trust(top: &Object, ctx: &Context<'_>) -> Result<ClientContent, String> {
    let mut rules = Vec::new();
    for (key, value) in top {
        let Some(level) = Level::parse(value) else {
            return Err(format!(
                "\"{key}\" has trust level {}, which is none of TRUST_FOLDER, TRUST_PARENT, \
                 DO_NOT_TRUST (Gemini CLI does not start with this file either)",
                value.preview(40)
            ));
        };
        rules.push((crate::inputs::clean(&ctx.project.join(key)), level));
    }
    Ok(ClientContent {
        folder_trust: covering(&rules, ctx.project),
        ..ClientContent::default()
    })
}

/// What the longest rule covering `project` says: trusted, distrusted, or no rule.
fn covering(rules: &[(PathBuf, Level)], project: &Path) -> Option<bool> {
    let real = |path: &Path| path.canonicalize().unwrap_or_else(|_| path.to_path_buf());
    let project = real(project);
    rules
        .iter()
        .filter(|(path, level)| {
            let effective = match level {
                Level::TrustParent => path.parent().unwrap_or(path),
                _ => path.as_path(),
            };
            project.starts_with(real(effective))
        })
        .max_by_key(|(path, _)| path.as_os_str().len())
        .map(|(_, level)| *level != Level::DoNotTrust)
}

/// `mcp-server-enablement.json`: `{ "<name, lowercased>": { "enabled": false } }`. A server
/// is off when its entry's `enabled` is set and falsy, as Gemini CLI reads it.
pub(super) fn enablement(top: &Object) -> ClientContent {
    let disabled_folded = top
        .iter()
        .filter(|(_, state)| {
            matches!(state.as_object().and_then(|s| s.get("enabled")), Some(enabled) if falsy(enabled))
        })
        .map(|(name, _)| name.clone())
        .collect();
    ClientContent {
        disabled_folded,
        ..ClientContent::default()
    }
}

/// JavaScript's falsy values other than `null`.
fn falsy(value: &Value) -> bool {
    match value {
        Value::Bool(b) => !b,
        Value::Number(n) => *n == 0.0 || n.is_nan(),
        Value::String(s) => s.is_empty(),
        _ => false,
    }
}

/// A server's name as Gemini CLI keys its switches (`normalizeServerId`: lowercased, trimmed).
pub(in crate::inputs) fn folded(name: &str) -> String {
    mcp_reconcile_kernel::json::js_trim(&name.to_lowercase()).to_owned()
}

/// Whether Gemini CLI would trust the project, and if not, why (`checkPathTrust`):
/// `GEMINI_RESTRICTED_MODE=true` or `GEMINI_CLI_TRUST_WORKSPACE=false` distrust it,
/// `GEMINI_CLI_TRUST_WORKSPACE=true` trusts it; so does `security.folderTrust.enabled: false`
/// (`folder_trust_on` is false); otherwise the trust file's rule decides (`rule`), and without
/// one the folder is not trusted.
pub(in crate::inputs) fn verdict(
    vars: &BTreeMap<String, String>,
    folder_trust_on: bool,
    rule: Option<bool>,
) -> Result<(), &'static str> {
    let var = |name: &str| vars.get(name).map(String::as_str);
    if var("GEMINI_RESTRICTED_MODE") == Some("true") {
        return Err("GEMINI_RESTRICTED_MODE=true is set");
    }
    match var("GEMINI_CLI_TRUST_WORKSPACE") {
        Some("false") => return Err("GEMINI_CLI_TRUST_WORKSPACE=false is set"),
        Some("true") => return Ok(()),
        _ => {}
    }
    match (folder_trust_on, rule) {
        (false, _) | (true, Some(true)) => Ok(()),
        (true, Some(false)) => Err("the trust file marks it DO_NOT_TRUST"),
        (true, None) => Err("the trust file has no rule for it"),
    }
}

/// `security.folderTrust.enabled` over the scopes Gemini CLI consults before it knows the
/// folder's trust (system defaults, user, system: the last that sets it wins), with its
/// default `true`; a falsy value turns the check off.
pub(in crate::inputs) fn folder_trust_on<'a>(scopes: impl Iterator<Item = &'a Value>) -> bool {
    let mut on = true;
    for settings in scopes {
        let value = settings
            .as_object()
            .and_then(|s| {
                s.get("security")?
                    .as_object()?
                    .get("folderTrust")?
                    .as_object()
            })
            .and_then(|f| f.get("enabled"));
        match value {
            None | Some(Value::Null) => {}
            Some(value) => on = !falsy(value),
        }
    }
    on
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(list: &[(&str, Level)]) -> Vec<(PathBuf, Level)> {
        list.iter().map(|(p, l)| (PathBuf::from(p), *l)).collect()
    }

    #[test]
    fn the_longest_covering_rule_decides() {
        let project = Path::new("/nonexistent/work/repo/sub");
        let r = rules(&[
            ("/nonexistent/work", Level::TrustFolder),
            ("/nonexistent/work/repo", Level::DoNotTrust),
        ]);
        assert_eq!(covering(&r, project), Some(false));
        let r = rules(&[
            ("/nonexistent/work/repo", Level::DoNotTrust),
            ("/nonexistent/work/repo/sub", Level::TrustFolder),
        ]);
        assert_eq!(covering(&r, project), Some(true));
        // TRUST_PARENT covers the key's parent, and its siblings.
        let r = rules(&[("/nonexistent/work/repo/other", Level::TrustParent)]);
        assert_eq!(covering(&r, project), Some(true));
        // A prefix that is not a parent directory covers nothing.
        let r = rules(&[("/nonexistent/work/rep", Level::TrustFolder)]);
        assert_eq!(covering(&r, project), None);
    }

    #[test]
    fn environment_and_settings_come_before_the_file() {
        let vars = |list: &[(&str, &str)]| -> BTreeMap<String, String> {
            list.iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect()
        };
        assert!(verdict(&vars(&[]), true, None).is_err());
        assert!(verdict(&vars(&[]), true, Some(true)).is_ok());
        assert!(verdict(&vars(&[]), false, None).is_ok());
        assert!(verdict(&vars(&[("GEMINI_CLI_TRUST_WORKSPACE", "true")]), true, None).is_ok());
        assert!(verdict(
            &vars(&[("GEMINI_CLI_TRUST_WORKSPACE", "false")]),
            false,
            Some(true)
        )
        .is_err());
        assert!(verdict(
            &vars(&[
                ("GEMINI_RESTRICTED_MODE", "true"),
                ("GEMINI_CLI_TRUST_WORKSPACE", "true")
            ]),
            true,
            Some(true)
        )
        .is_err());
    }

    #[test]
    fn switches_and_settings_read_as_gemini_reads_them() {
        let parse = |text: &str| match mcp_reconcile_kernel::json::parse(text).expect("json") {
            Value::Object(o) => o,
            _ => panic!("object"),
        };
        let content = enablement(&parse(
            r#"{"github":{"enabled":false},"notes":{"enabled":true},"x":{}}"#,
        ));
        assert_eq!(content.disabled_folded, ["github"]);
        assert_eq!(folded(" GitHub "), "github");
        let off = Value::Object(parse(r#"{"security":{"folderTrust":{"enabled":false}}}"#));
        let on = Value::Object(parse(r#"{"security":{"folderTrust":{"enabled":true}}}"#));
        let unset = Value::Object(parse("{}"));
        assert!(folder_trust_on([&unset].into_iter()));
        assert!(!folder_trust_on([&unset, &off].into_iter()));
        assert!(folder_trust_on([&off, &on].into_iter()));
    }
}
