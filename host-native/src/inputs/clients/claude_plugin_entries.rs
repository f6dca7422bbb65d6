//! The entries of Claude Code's plugins, expanded as Claude Code 2.1 expands them: an MCP
//! server's (`${CLAUDE_PLUGIN_ROOT}`, `${CLAUDE_PLUGIN_DATA}`, `${CLAUDE_PROJECT_DIR}`
//! replaced, then read as any entry of a Claude file), and the language servers:
//! `.lsp.json` at the plugin's root, then the manifest's `lspServers` (a file inside the
//! plugin, an object of entries, or a list of both; a path that leaves the plugin is refused),
//! later names winning. Each entry is in Claude Code's plugin format (`extensionToLanguage`
//! required, at most 3 restarts), named `plugin:<plugin>:<server>`, with the plugin's
//! variables replaced and `${VAR}` expanded in `command`, `args`, `env` and `workspaceFolder`,
//! and `CLAUDE_PLUGIN_ROOT`, `CLAUDE_PLUGIN_DATA`, `CLAUDE_PROJECT_DIR` in its environment.

use std::path::{Component, Path};

use mcp_reconcile_kernel::lsp::{lsp_json_from_value, LspParseOptions};
use mcp_reconcile_kernel::{Object, Value};

use super::claude::entry;
use super::expand::{Context, Syntax};
use super::normalize::{transport, BareUrl};
use crate::inputs::files::read_text;
use crate::inputs::lsp_formats::{self, LspFormat};

/// Where a plugin's variables point: its root, its data directory, the project.
pub(super) struct Expansion<'a> {
    pub(super) ctx: &'a Context<'a>,
    pub(super) root: &'a Path,
    pub(super) data: &'a Path,
}

impl Expansion<'_> {
    /// `object` with `${CLAUDE_PLUGIN_ROOT}`, `${CLAUDE_PROJECT_DIR}` and
    /// `${CLAUDE_PLUGIN_DATA}` replaced in every string; an entry that needs a plugin option is
    /// refused.
    pub(super) fn plugin_vars(&self, object: &Object) -> Result<Object, String> {
        if Value::Object(object.clone())
            .to_string()
            .contains("${user_config.")
        {
            return Err(
                "it uses a plugin option (${user_config.…}), which Claude Code keeps for the \
                 plugin; mcp-reconcile does not read plugin options — the server is skipped"
                    .into(),
            );
        }
        let (root, data) = (self.root.to_string_lossy(), self.data.to_string_lossy());
        let project = self.ctx.project.to_string_lossy();
        Ok(substitute(object, &|text: &str| {
            text.replace("${CLAUDE_PLUGIN_ROOT}", &root)
                .replace("${CLAUDE_PROJECT_DIR}", &project)
                .replace("${CLAUDE_PLUGIN_DATA}", &data)
        }))
    }

    /// `CLAUDE_PLUGIN_ROOT`, `CLAUDE_PLUGIN_DATA` (and `extra`) under the entry's own `env`.
    pub(super) fn with_env(&self, mut object: Object, extra: &[(&str, &Path)]) -> Object {
        let mut env = Object::new();
        for (key, path) in [
            ("CLAUDE_PLUGIN_ROOT", self.root),
            ("CLAUDE_PLUGIN_DATA", self.data),
        ]
        .iter()
        .chain(extra)
        {
            env.insert(
                (*key).into(),
                Value::String(path.to_string_lossy().into_owned()),
            );
        }
        if let Some(Value::Object(own)) = object.get("env") {
            env.extend(own.clone());
        }
        object.insert("env".into(), Value::Object(env));
        object
    }
}

/// One plugin entry as Claude Code takes it: the plugin's variables replaced, a stdio
/// server's environment given `CLAUDE_PLUGIN_ROOT` and `CLAUDE_PLUGIN_DATA`, then read as any
/// entry of a Claude file. As written: the entry of the plugin's file.
pub(super) fn mcp_entry(
    expansion: &Expansion<'_>,
    object: &Object,
) -> Result<(Object, Object), String> {
    let mut used = expansion.plugin_vars(object)?;
    let stdio = match object.get("type") {
        None | Some(Value::Null) => true,
        Some(Value::String(kind)) => kind == "stdio",
        Some(_) => false,
    };
    if stdio {
        used = expansion.with_env(used, &[]);
    }
    let (used, _) = entry(expansion.ctx, &used, &mut Vec::new())?;
    let written = transport(object.clone(), BareUrl::Error)?;
    Ok((used, written))
}

/// `object` with `replace` applied to every string inside it.
fn substitute(object: &Object, replace: &impl Fn(&str) -> String) -> Object {
    fn value(v: &Value, replace: &impl Fn(&str) -> String) -> Value {
        match v {
            Value::String(s) => Value::String(replace(s)),
            Value::Array(items) => Value::Array(items.iter().map(|i| value(i, replace)).collect()),
            Value::Object(map) => Value::Object(substitute(map, replace)),
            other => other.clone(),
        }
    }
    object
        .iter()
        .map(|(k, v)| (k.clone(), value(v, replace)))
        .collect()
}

/// The fields Claude Code expands variables in a language server's entry.
const EXPANDED: [&str; 4] = ["command", "args", "env", "workspaceFolder"];

/// The language servers of the plugin `id` (named `name`) at `expansion.root`, in this host's
/// format: as used and as written.
pub(super) fn lsp_servers(
    expansion: &Expansion<'_>,
    id: &str,
    name: &str,
    declared: Option<&Value>,
    errors: &mut Vec<String>,
) -> (Object<Object>, Object<Object>) {
    let mut written = Object::new();
    let mut add = |path: &Path, errors: &mut Vec<String>| match read_object(path) {
        Ok(Some(entries)) => written.extend(entries),
        Ok(None) => {}
        Err(why) => errors.push(format!(
            "plugin \"{id}\": {}: {why} — its language servers from that file are not loaded",
            path.display()
        )),
    };
    add(&expansion.root.join(".lsp.json"), errors);
    let specs = match declared {
        Some(Value::Array(items)) => items.clone(),
        Some(other) => vec![other.clone()],
        None => Vec::new(),
    };
    let mut inline = Object::new();
    for spec in specs {
        match spec {
            Value::Object(entries) => inline.extend(entries),
            Value::String(rel) if inside(&rel) => add(&expansion.root.join(rel), errors),
            other => errors.push(format!(
                "plugin \"{id}\": \"lspServers\" in its manifest holds {} — only a file inside \
                 the plugin or an object of entries is read",
                other.preview(40)
            )),
        }
    }
    written.extend(inline);

    let mut used = Object::new();
    for (server, entry) in &written {
        let Value::Object(entry) = entry else {
            // The format check below names it.
            used.insert(server.clone(), entry.clone());
            continue;
        };
        match expanded(expansion, entry) {
            Ok(entry) => used.insert(server.clone(), Value::Object(entry)),
            Err(why) => errors.push(format!(
                "language server \"plugin:{name}:{server}\" of plugin \"{id}\": {why}"
            )),
        }
    }
    let written: Object = written
        .into_iter()
        .filter(|(server, _)| used.contains_key(server))
        .collect();
    let project = expansion.ctx.project.to_string_lossy();
    let own = |entries: &Object, errors: &mut Vec<String>| -> Object<Object> {
        let Ok(own) = lsp_formats::to_own(LspFormat::ClaudePlugin, entries, errors) else {
            return Object::new();
        };
        let parsed = lsp_json_from_value(
            &own,
            LspParseOptions {
                env: None,
                expand: false,
                scope: None,
                project_root: Some(&project),
            },
        );
        errors.extend(parsed.errors);
        parsed
            .servers
            .into_iter()
            .map(|(server, entry)| (format!("plugin:{name}:{server}"), entry))
            .collect()
    };
    let mut problems = Vec::new();
    let used = own(&used, &mut problems);
    errors.extend(
        problems
            .into_iter()
            .map(|p| format!("plugin \"{id}\": {p}")),
    );
    let written = own(&written, &mut Vec::new())
        .into_iter()
        .filter(|(server, _)| used.contains_key(server))
        .collect();
    (used, written)
}

/// A relative path that stays inside the plugin's directory.
fn inside(rel: &str) -> bool {
    let path = Path::new(rel);
    !rel.is_empty()
        && path
            .components()
            .all(|c| matches!(c, Component::Normal(_) | Component::CurDir))
}

/// An entry with the plugin's variables replaced, `${VAR}` expanded in the fields Claude Code
/// expands, and the plugin's variables in its environment.
fn expanded(expansion: &Expansion<'_>, entry: &Object) -> Result<Object, String> {
    let entry = expansion.plugin_vars(entry)?;
    let (entry, _unset) = expansion
        .ctx
        .expand_entry(Syntax::Claude, &entry, Some(&EXPANDED))?;
    if entry.contains_key("env") && !matches!(entry.get("env"), Some(Value::Object(_))) {
        return Err("its \"env\" must be an object".into());
    }
    Ok(expansion.with_env(entry, &[("CLAUDE_PROJECT_DIR", expansion.ctx.project)]))
}

/// A JSON object file (`None`: absent).
pub(super) fn read_object(path: &Path) -> Result<Option<Object>, String> {
    let Some(text) = read_text(path)? else {
        return Ok(None);
    };
    match mcp_reconcile_kernel::json::parse_jsonc(&text) {
        Ok(Value::Object(top)) => Ok(Some(top)),
        Ok(other) => Err(format!(
            "must be a JSON object, found {}",
            other.preview(40)
        )),
        Err(e) => Err(format!("not valid JSON: {e}")),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::fs;

    use super::*;

    #[test]
    fn a_plugins_language_servers_are_read_in_claudes_format() {
        let dir = tempfile::tempdir().expect("tmp");
        let root = dir.path().join("kit");
        let write = |rel: &str, text: &str| {
            let path = root.join(rel);
            fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
            fs::write(path, text).expect("write");
        };
        write(
            ".lsp.json",
            r#"{"json":{"command":"${CLAUDE_PLUGIN_ROOT}/bin/json","args":["--stdio","${LEVEL:-info}"],
                        "extensionToLanguage":{".json":"json"}},
                "bare":{"command":"x"}}"#,
        );
        write(
            "more/lsp.json",
            r#"{"yaml":{"command":"yaml","extensionToLanguage":{".yaml":"yaml"},"env":{"A":"${CLAUDE_PLUGIN_DATA}"}}}"#,
        );
        let vars = BTreeMap::new();
        let project = Path::new("/work/proj");
        let ctx = Context {
            vars: &vars,
            home: None,
            project,
            project_given: project,
            git_root: None,
        };
        let data = dir.path().join("data/kit-m");
        let expansion = Expansion {
            ctx: &ctx,
            root: &root,
            data: &data,
        };
        let declared = mcp_reconcile_kernel::json::parse(r#"["more/lsp.json","../outside.json"]"#)
            .expect("json");
        let mut errors = Vec::new();
        let (used, written) = lsp_servers(&expansion, "kit@m", "kit", Some(&declared), &mut errors);
        assert_eq!(
            used.keys().collect::<Vec<_>>(),
            ["plugin:kit:json", "plugin:kit:yaml"]
        );
        let json = used.get("plugin:kit:json").expect("json");
        let root_text = root.to_string_lossy();
        assert_eq!(
            json.get("command").and_then(Value::as_str),
            Some(format!("{root_text}/bin/json").as_str())
        );
        assert_eq!(
            json.get("args").map(Value::to_json).as_deref(),
            Some(r#"["--stdio","info"]"#)
        );
        assert_eq!(
            json.get("maxRestarts").and_then(Value::as_f64),
            Some(3.0),
            "Claude Code's restart bound"
        );
        let env = used
            .get("plugin:kit:yaml")
            .and_then(|y| y.get("env"))
            .and_then(Value::as_object)
            .expect("env");
        assert_eq!(
            env.get("A").and_then(Value::as_str),
            Some(data.to_string_lossy().as_ref())
        );
        assert_eq!(
            env.get("CLAUDE_PROJECT_DIR").and_then(Value::as_str),
            Some("/work/proj")
        );
        assert_eq!(
            written
                .get("plugin:kit:json")
                .and_then(|j| j.get("command"))
                .and_then(Value::as_str),
            Some("${CLAUDE_PLUGIN_ROOT}/bin/json"),
            "as written for the review"
        );
        let errors = errors.join("\n");
        assert!(
            errors.contains("\"bare\"") && errors.contains("extensionToLanguage"),
            "{errors}"
        );
        assert!(errors.contains("../outside.json"), "{errors}");
    }
}
