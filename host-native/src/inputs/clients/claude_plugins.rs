//! Claude Code's plugins: the MCP and language servers of the plugins it has installed
//! (`<plugins dir>/installed_plugins.json`, version 2) and a settings file enables
//! (`enabledPlugins`), read as Claude Code 2.1 reads them.
//!
//! * **Which installation.** A plugin id (`name@marketplace`) may be installed several times:
//!   for the user (`user`, `managed`) or for one project (`project`, `local`, with its
//!   `projectPath`). Those for this project and the user's apply; the most specific wins
//!   (local, project, user, managed).
//! * **Its servers.** `.mcp.json` at the plugin's root (its `mcpServers`, or the whole object),
//!   then the manifest's (`.claude-plugin/plugin.json`) `mcpServers`: an object of entries, a
//!   file relative to the root, or an array of both; later entries win a name. A bundle
//!   (`.mcpb`, `.dxt`, a URL) is not unpacked here: reported, skipped.
//! * **Names and expansion.** Each server is `plugin:<plugin>:<server>`.
//!   `${CLAUDE_PLUGIN_ROOT}`, `${CLAUDE_PLUGIN_DATA}` (`<plugins dir>/data/<id>`) and
//!   `${CLAUDE_PROJECT_DIR}` are replaced first, then `${VAR}` as in any Claude file; a stdio
//!   server also gets `CLAUDE_PLUGIN_ROOT` and `CLAUDE_PLUGIN_DATA` in its environment. An
//!   entry that uses a plugin option (`${user_config.NAME}`, kept by Claude Code) is skipped
//!   with a message: the options are not read here.
//! * **Enabled by whom** (`claude_plugin_enable`): a plugin turned on only by a project's
//!   settings file is the project's, its servers wait for approval like a `.mcp.json` entry (a
//!   repository cannot start a plugin's server by switching it on).
//!
//! A plugin's own files are read when `installed_plugins.json` changes (Claude Code rewrites
//! it on every install, update and removal).

use std::path::{Path, PathBuf};

use mcp_reconcile_kernel::{Object, Servers, Value};

use super::claude_plugin_entries::{self as plugin_entries, read_object, Expansion};
use super::expand::Context;
use super::normalize::entries;
use super::ClientContent;

/// One installed plugin that applies to this project, with its servers (named
/// `plugin:<plugin>:<server>`), used and as written.
#[derive(Clone, Debug, Default)]
pub(in crate::inputs) struct Plugin {
    pub(super) id: String,
    pub(super) used: Servers,
    pub(super) written: Servers,
    /// Its language servers, in this host's format (scope not stamped yet), used and as
    /// written.
    pub(super) lsp: Object<Object>,
    pub(super) lsp_written: Object<Object>,
}

/// `installed_plugins.json` at `file`: the plugins that apply to this project, each with its
/// servers; a problem with one plugin or entry is reported and the rest load.
///
/// # Errors
/// The file is not Claude Code's version 2 format.
pub(super) fn installed(
    top: &Object,
    file: &Path,
    ctx: &Context<'_>,
) -> Result<ClientContent, String> {
    if top.get("version").and_then(Value::as_f64) != Some(2.0) {
        return Err(
            "not version 2 of Claude Code's plugin list — Claude Code converts an older one \
             when it starts; start it once"
                .into(),
        );
    }
    let Some(Value::Object(plugins)) = top.get("plugins") else {
        return Err("no \"plugins\" object".into());
    };
    let plugins_dir = file.parent().unwrap_or(Path::new("/"));
    let mut out = ClientContent::default();
    for (id, installs) in plugins {
        let Some(root) = install_path(installs, ctx) else {
            continue;
        };
        let root = match root {
            Ok(root) => root,
            Err(why) => {
                out.entry_errors.push(format!(
                    "plugin \"{id}\": {why} — its servers are not loaded"
                ));
                continue;
            }
        };
        let manifest_path = root.join(".claude-plugin/plugin.json");
        let manifest = read_object(&manifest_path).unwrap_or_else(|why| {
            out.entry_errors.push(format!(
                "plugin \"{id}\": {}: {why} — the servers it declares are not loaded",
                manifest_path.display()
            ));
            None
        });
        let manifest = manifest.unwrap_or_default();
        let map = servers_of(&root, id, &manifest, &mut out.entry_errors);
        let data = plugins_dir.join("data").join(data_dir_name(id));
        let name = id.split('@').next().unwrap_or(id);
        let expansion = Expansion {
            ctx,
            root: &root,
            data: &data,
        };
        let (lsp, lsp_written) = plugin_entries::lsp_servers(
            &expansion,
            id,
            name,
            manifest.get("lspServers"),
            &mut out.entry_errors,
        );
        let where_ = format!("plugin \"{id}\"");
        let (used, written) = entries(&map, &where_, &mut out.entry_errors, |o| {
            plugin_entries::mcp_entry(&expansion, o)
        });
        let prefixed = |servers: Servers| -> Servers {
            servers
                .into_iter()
                .map(|(server, config)| (format!("plugin:{name}:{server}"), config))
                .collect()
        };
        out.plugins.push(Plugin {
            id: id.clone(),
            used: prefixed(used),
            written: prefixed(written),
            lsp,
            lsp_written,
        });
    }
    Ok(out)
}

/// The root of the installation of a plugin that applies to this project (`None`: none
/// does), or why it cannot be used.
fn install_path(installs: &Value, ctx: &Context<'_>) -> Option<Result<PathBuf, String>> {
    let Value::Array(installs) = installs else {
        return Some(Err("its installations must be a list".into()));
    };
    let here = |path: &str| {
        [Some(ctx.project), Some(ctx.project_given), ctx.git_root]
            .into_iter()
            .flatten()
            .any(|dir| dir == Path::new(path))
    };
    let rank = |install: &Object| -> Option<u8> {
        let project = install.get("projectPath").and_then(Value::as_str);
        match install.get("scope").and_then(Value::as_str)? {
            "local" if project.is_some_and(here) => Some(0),
            "project" if project.is_some_and(here) => Some(1),
            "user" => Some(2),
            "managed" => Some(3),
            _ => None,
        }
    };
    let best = installs
        .iter()
        .filter_map(Value::as_object)
        .filter_map(|install| Some((rank(install)?, install)))
        .min_by_key(|(rank, _)| *rank)?
        .1;
    Some(match best.get("installPath").and_then(Value::as_str) {
        Some(path) if Path::new(path).is_absolute() => Ok(PathBuf::from(path)),
        _ => Err("its \"installPath\" is not an absolute path".into()),
    })
}

/// The server entries a plugin at `root` declares, before expansion.
fn servers_of(root: &Path, id: &str, manifest: &Object, errors: &mut Vec<String>) -> Object {
    let mut map = Object::new();
    let mut add = |path: &Path, errors: &mut Vec<String>| match read_object(path) {
        Ok(Some(top)) => {
            let servers = match top.get("mcpServers") {
                Some(Value::Object(servers)) => servers.clone(),
                _ => top,
            };
            map.extend(servers);
        }
        Ok(None) => {}
        Err(why) => errors.push(format!(
            "plugin \"{id}\": {}: {why} — its servers from that file are not loaded",
            path.display()
        )),
    };
    add(&root.join(".mcp.json"), errors);
    let declared = manifest.get("mcpServers").cloned();
    let specs = match declared {
        Some(Value::Array(items)) => items,
        Some(other) => vec![other],
        None => Vec::new(),
    };
    let mut inline = Object::new();
    for spec in specs {
        match spec {
            Value::Object(servers) => inline.extend(servers),
            Value::String(rel) if bundled(&rel) => errors.push(format!(
                "plugin \"{id}\": its servers in \"{rel}\" are a bundle Claude Code unpacks \
                 itself; mcp-reconcile does not — they are not loaded"
            )),
            Value::String(rel) => add(&root.join(rel), errors),
            other => errors.push(format!(
                "plugin \"{id}\": \"mcpServers\" in its manifest holds {}, not an object or \
                 a file name",
                other.preview(40)
            )),
        }
    }
    map.extend(inline);
    map
}

/// A server spec Claude Code downloads or unpacks (an MCP bundle, or a URL).
fn bundled(spec: &str) -> bool {
    spec.ends_with(".mcpb") || spec.ends_with(".dxt") || spec.contains("://")
}

/// Claude Code's directory name for a plugin's data: the id with every character but
/// `[A-Za-z0-9_-]` replaced by `-`.
fn data_dir_name(id: &str) -> String {
    id.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '-'
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;
    use std::fs;

    use super::*;
    use crate::inputs::object;

    fn ctx<'a>(vars: &'a BTreeMap<String, String>, project: &'a Path) -> Context<'a> {
        Context {
            vars,
            home: Some(Path::new("/home/u")),
            project,
            project_given: project,
            git_root: None,
        }
    }

    fn write(path: &Path, text: &str) {
        fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        fs::write(path, text).expect("write");
    }

    #[test]
    fn a_plugins_servers_are_named_and_expanded_as_claude_code_does() {
        let dir = tempfile::tempdir().expect("tmp");
        let root = dir.path().join("cache/mkt/kit/1.0");
        write(
            &root.join(".mcp.json"),
            r#"{"mcpServers":{"a":{"command":"${CLAUDE_PLUGIN_ROOT}/bin/a","args":["${CLAUDE_PROJECT_DIR}","${TOKEN}"],"env":{"CLAUDE_PLUGIN_DATA":"mine"}},
                              "opt":{"command":"x","args":["${user_config.key}"]}}}"#,
        );
        write(
            &root.join(".claude-plugin/plugin.json"),
            r#"{"name":"kit","mcpServers":["more.json","pack.mcpb",{"c":{"type":"http","url":"https://h/${CLAUDE_PLUGIN_DATA}"}}]}"#,
        );
        write(
            &root.join("more.json"),
            r#"{"b":{"command":"b"},"a":{"command":"replaced"}}"#,
        );
        let vars = BTreeMap::from([("TOKEN".to_owned(), "t".to_owned())]);
        let project = Path::new("/work/proj");
        let top = object(&format!(
            r#"{{"version":2,"plugins":{{
                "kit@mkt":[{{"scope":"project","projectPath":"/elsewhere","installPath":"/nope"}},
                           {{"scope":"user","installPath":{root:?}}}],
                "other@mkt":[{{"scope":"local","projectPath":"/elsewhere","installPath":"/nope"}}],
                "rel@mkt":[{{"scope":"user","installPath":"relative/dir"}}]}}}}"#,
            root = root.to_string_lossy()
        ));
        let file = dir.path().join("installed_plugins.json");
        let content = installed(&top, &file, &ctx(&vars, project)).expect("parses");
        assert_eq!(content.plugins.len(), 1, "{:?}", content.plugins);
        let kit = &content.plugins[0];
        assert_eq!(kit.id, "kit@mkt");
        assert_eq!(
            kit.used.keys().collect::<Vec<_>>(),
            ["plugin:kit:a", "plugin:kit:b", "plugin:kit:c"],
            "the manifest's file wins \"a\"; \"opt\" is skipped"
        );
        let b = kit.used.get("plugin:kit:b").expect("b").object();
        let env = b.get("env").and_then(Value::as_object).expect("env");
        assert_eq!(
            env.get("CLAUDE_PLUGIN_ROOT").and_then(Value::as_str),
            Some(root.to_string_lossy().as_ref())
        );
        let data = dir.path().join("data/kit-mkt");
        assert_eq!(
            env.get("CLAUDE_PLUGIN_DATA").and_then(Value::as_str),
            Some(data.to_string_lossy().as_ref())
        );
        let c = kit.used.get("plugin:kit:c").expect("c");
        assert_eq!(
            c.str_field("httpUrl"),
            Some(format!("https://h/{}", data.to_string_lossy()).as_str())
        );
        assert!(
            c.get("env").is_none(),
            "a remote server gets no environment"
        );
        let errors = content.entry_errors.join("\n");
        assert!(
            errors.contains("\"opt\"") && errors.contains("user_config"),
            "{errors}"
        );
        assert!(errors.contains("pack.mcpb"), "{errors}");
        assert!(
            errors.contains("\"rel@mkt\"") && errors.contains("installPath"),
            "{errors}"
        );
        assert!(
            !errors.contains("other@mkt"),
            "another project's plugin is simply not there"
        );
    }

    #[test]
    fn expansion_puts_the_root_first_and_keeps_the_servers_own_env_over_it() {
        let dir = tempfile::tempdir().expect("tmp");
        let root = dir.path().join("p");
        write(
            &root.join(".mcp.json"),
            r#"{"s":{"command":"${CLAUDE_PLUGIN_ROOT}/run","env":{"CLAUDE_PLUGIN_DATA":"mine","K":"${CLAUDE_PLUGIN_ROOT}"}}}"#,
        );
        let vars = BTreeMap::new();
        let project = Path::new("/work/proj");
        let top = object(&format!(
            r#"{{"version":2,"plugins":{{"p@m":[{{"scope":"local","projectPath":"/work/proj","installPath":{root:?}}}]}}}}"#,
            root = root.to_string_lossy()
        ));
        let content =
            installed(&top, &dir.path().join("i.json"), &ctx(&vars, project)).expect("parses");
        let s = content.plugins[0]
            .used
            .get("plugin:p:s")
            .expect("s")
            .object();
        let root_text = root.to_string_lossy();
        assert_eq!(
            s.get("command").and_then(Value::as_str),
            Some(format!("{root_text}/run").as_str())
        );
        let env = s.get("env").and_then(Value::as_object).expect("env");
        assert_eq!(
            env.get("CLAUDE_PLUGIN_DATA").and_then(Value::as_str),
            Some("mine")
        );
        assert_eq!(
            env.get("K").and_then(Value::as_str),
            Some(root_text.as_ref())
        );
        let written = content.plugins[0].written.get("plugin:p:s").expect("s");
        assert_eq!(
            written.str_field("command"),
            Some("${CLAUDE_PLUGIN_ROOT}/run"),
            "as written for the review"
        );
    }

    #[test]
    fn an_older_plugin_list_is_refused_with_what_to_do() {
        let vars = BTreeMap::new();
        let top = object(r#"{"version":1,"plugins":{}}"#);
        let err = installed(&top, Path::new("/x/i.json"), &ctx(&vars, Path::new("/p")))
            .expect_err("refused");
        assert!(err.contains("start it once"), "{err}");
    }
}
