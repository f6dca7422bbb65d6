//! Crush (charmbracelet/crush): `mcp` in its JSON files, merged lowest first as Crush merges
//! them (`internal/config/load.go` `lookupConfigs`): the administrator's
//! `/etc/crush/crush.json`, the user's `crush.json` in `$CRUSH_GLOBAL_CONFIG` or
//! `$XDG_CONFIG_HOME/crush` (`~/.config/crush`) (and `mcp-reconcile.json` beside it, where
//! `install crush` moves its servers), the one Crush writes itself in
//! `$CRUSH_GLOBAL_DATA` or `$XDG_DATA_HOME/crush` (`~/.local/share/crush`), then in every
//! directory from the git work tree's root down to the project (the nearest wins) its
//! `crush.json` and `.crush.json` (which wins), then the workspace's
//! `.crush/crush.json`; the project's and the workspace's are gated.
//!
//! Per entry: `type` is required (`stdio` | `http` | `sse`), `disabled: true` turns the server
//! off, `enabled_tools` / `disabled_tools` are this host's `includeTools` / `excludeTools`;
//! `timeout` (seconds to connect) and the OAuth fields are Crush's own and not part of what
//! runs. Crush runs `command`, `args`, `env`, `url` and `headers` through a shell expansion
//! (`$VAR`, `${VAR}`, `${VAR:-default}`, `$(command)`); this layout expands the variables as the
//! shell does (unset: empty) and never runs a command: an entry with `$(…)` or a backquote
//! fails with an error naming the field, as does shell quoting it does not reproduce.
//! (`crushrc` shell files are never run, so never read.)

use std::path::{Path, PathBuf};

use mcp_reconcile_kernel::{LayerSource, Object, Value};

use super::expand::Context;
use super::normalize::entries;
use super::spec::{ClientSpec, Editor};
use super::strategy::Install;
use super::{sidecar, ClientContent, ClientFile, Format, TextFormat};
use crate::inputs::host_env::{xdg, HostEnv};

/// Crush's entry in the table of clients.
pub(super) static SPEC: ClientSpec = ClientSpec {
    name: "crush",
    title: "Crush",
    about: "Crush's crush.json files",
    help: "\
/etc/crush/crush.json, $CRUSH_GLOBAL_CONFIG/crush.json or $XDG_CONFIG_HOME/crush/crush.json
(and mcp-reconcile.json beside it),
$CRUSH_GLOBAL_DATA/crush.json or $XDG_DATA_HOME/crush/crush.json; crush.json and .crush.json
in every directory from the git root down to the project; <project>/.crush/crush.json",
    project_servers: ".crush.json",
    files,
    editor: Some(Editor::new(user_file, "mcp")),
    install: Some(INSTALL),
    ..ClientSpec::CLIENT
};

/// `install crush`: Crush's servers move to the sidecar beside its user file (it has a
/// `disabled` switch, but it re-reads nothing live, so the gateway must hold them), and the
/// gateway's entry says `"type": "stdio"`, which Crush requires.
const INSTALL: Install = Install {
    stdio_type: true,
    ..Install::EDITOR
};

/// Crush's `crush.json`.
const FORMAT: Format = Format::Text(TextFormat {
    name: "crush",
    complete: |text| mcp_reconcile_kernel::json::parse_jsonc(text).is_ok(),
    parse: parse_text,
});

/// A `crush.json`'s text (JSON; comments are taken too).
fn parse_text(text: &str, scope: LayerSource, ctx: &Context<'_>) -> Result<ClientContent, String> {
    match mcp_reconcile_kernel::json::parse_jsonc(text) {
        Ok(Value::Object(top)) => Ok(parse(&top, scope, ctx)),
        Ok(other) => Err(format!(
            "must be a JSON object, found {}",
            other.preview(60)
        )),
        Err(e) => Err(format!("is not valid JSON ({e})")),
    }
}

/// Crush's files, lowest precedence first.
fn files(
    project: &Path,
    env: &HostEnv,
    managed_settings: Option<PathBuf>,
) -> anyhow::Result<Vec<ClientFile>> {
    let file = |scope, path: PathBuf| ClientFile::editor(FORMAT, scope, path);
    let etc = managed_settings
        .as_deref()
        .and_then(Path::parent)
        .map_or_else(|| PathBuf::from("/etc/crush"), Path::to_path_buf);
    let mut files = vec![
        file(LayerSource::SystemDefaults, etc.join("crush.json")),
        file(LayerSource::User, sidecar(&user_file(env)?)),
        file(LayerSource::User, user_file(env)?),
        file(LayerSource::User, data_dir(env)?.join("crush.json")),
    ];
    // Crush looks from the project up to the git work tree's root (`projectBoundary`); a
    // nearer directory's file wins, and in one directory `.crush.json` wins over `crush.json`.
    let dirs = super::expand::down_from_git_root(project);
    for dir in dirs {
        for name in ["crush.json", ".crush.json"] {
            let mut f = file(LayerSource::Project, dir.join(name));
            f.kind.shared_parent = dir != project;
            files.push(f);
        }
    }
    files.push(file(
        LayerSource::Workspace,
        project.join(".crush/crush.json"),
    ));
    Ok(files)
}

/// The user's `crush.json`: `$CRUSH_GLOBAL_CONFIG/crush.json`, else
/// `$XDG_CONFIG_HOME/crush/crush.json` (`~/.config/crush/crush.json`).
pub(crate) fn user_file(env: &HostEnv) -> anyhow::Result<PathBuf> {
    match env.var("CRUSH_GLOBAL_CONFIG") {
        Some(dir) => Ok(env.absolute(Path::new(dir)).join("crush.json")),
        None => Ok(
            xdg(env, "XDG_CONFIG_HOME", &[".config"], "Crush's crush.json")?
                .join("crush/crush.json"),
        ),
    }
}

/// The directory of the `crush.json` Crush writes itself: `$CRUSH_GLOBAL_DATA`, else
/// `$XDG_DATA_HOME/crush` (`~/.local/share/crush`).
fn data_dir(env: &HostEnv) -> anyhow::Result<PathBuf> {
    match env.var("CRUSH_GLOBAL_DATA") {
        Some(dir) => Ok(env.absolute(Path::new(dir))),
        None => Ok(xdg(env, "XDG_DATA_HOME", &[".local", "share"], "Crush's data")?.join("crush")),
    }
}

/// A `crush.json`: its `mcp` servers as one layer of kind `scope`, those with
/// `disabled: true` switched off.
fn parse(top: &Object, scope: LayerSource, ctx: &Context<'_>) -> ClientContent {
    let mut out = ClientContent::default();
    match top.get("mcp") {
        None | Some(Value::Null) => {}
        Some(Value::Object(map)) => {
            out.disabled = map
                .iter()
                .filter(|(_, e)| {
                    e.as_object().and_then(|e| e.get("disabled")) == Some(&Value::Bool(true))
                })
                .map(|(name, _)| name.clone())
                .collect();
            let (used, written) = entries(map, "mcp", &mut out.entry_errors, |e| entry(e, ctx));
            out.layers.push((scope, used, written));
        }
        Some(other) => out.entry_errors.push(format!(
            "mcp must be an object of server entries, found {} — no servers are loaded from it",
            other.preview(60)
        )),
    }
    out
}

/// One entry: its transport from the required `type`, its fields shell-expanded, the tool
/// lists as this host's filters; Crush's own fields left out of what runs.
fn entry(object: &Object, ctx: &Context<'_>) -> Result<(Object, Object), String> {
    let mut used = Object::new();
    let string = |key: &str| -> Result<Option<String>, String> {
        match object.get(key) {
            None | Some(Value::Null) => Ok(None),
            Some(Value::String(s)) => expand(ctx, s)
                .map(Some)
                .map_err(|why| format!("its \"{key}\" {why}")),
            Some(other) => Err(format!(
                "its \"{key}\" must be a string, found {}",
                other.preview(40)
            )),
        }
    };
    match object.get("type").and_then(Value::as_str) {
        Some("stdio") => match string("command")? {
            Some(command) if !command.is_empty() => {
                used.insert("command".into(), Value::from(command.as_str()));
            }
            _ => return Err("its \"type\" is stdio but it has no \"command\"".into()),
        },
        Some(kind @ ("http" | "sse")) => {
            let Some(url) = string("url")?.filter(|u| !u.is_empty()) else {
                return Err(format!("its \"type\" is {kind} but it has no \"url\""));
            };
            let key = if kind == "http" { "httpUrl" } else { "url" };
            used.insert(key.into(), Value::from(url.as_str()));
        }
        Some(other) => {
            return Err(format!(
                "its \"type\" {} is not one of Crush's (stdio, http, sse)",
                Value::from(other).to_json()
            ))
        }
        None => {
            return Err(
                "it has no \"type\" — Crush requires one: \"stdio\", \"http\" or \"sse\"".into(),
            )
        }
    }
    if let Some(args) = object.get("args").filter(|a| !a.is_null()) {
        let Value::Array(items) = args else {
            return Err("its \"args\" must be an array of strings".into());
        };
        let args = items
            .iter()
            .enumerate()
            .map(|(i, a)| match a {
                Value::String(s) => expand(ctx, s)
                    .map(|s| Value::from(s.as_str()))
                    .map_err(|why| format!("its \"args\"[{i}] {why}")),
                _ => Err(format!("its \"args\"[{i}] must be a string")),
            })
            .collect::<Result<Vec<_>, _>>()?;
        used.insert("args".into(), Value::Array(args));
    }
    for key in ["env", "headers"] {
        if let Some(map) = expanded_map(object, key, ctx)? {
            used.insert(key.into(), Value::Object(map));
        }
    }
    for (theirs, ours) in [
        ("enabled_tools", "includeTools"),
        ("disabled_tools", "excludeTools"),
    ] {
        if let Some(tools @ Value::Array(_)) = object.get(theirs) {
            used.insert(ours.into(), tools.clone());
        }
    }
    Ok((used, object.clone()))
}

/// The string map under `key` with each value expanded (`None` when absent).
fn expanded_map(object: &Object, key: &str, ctx: &Context<'_>) -> Result<Option<Object>, String> {
    match object.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Object(map)) => map
            .iter()
            .map(|(name, value)| match value {
                Value::String(s) => expand(ctx, s)
                    .map(|s| (name.clone(), Value::from(s.as_str())))
                    .map_err(|why| format!("its \"{key}\".{name} {why}")),
                _ => Err(format!("its \"{key}\".{name} must be a string")),
            })
            .collect::<Result<Object, _>>()
            .map(Some),
        Some(other) => Err(format!(
            "its \"{key}\" must be an object of strings, found {}",
            other.preview(40)
        )),
    }
}

/// `text` as Crush's shell expansion gives it, for the part that runs nothing: `$NAME`,
/// `${NAME}`, `${NAME:-default}` / `${NAME-default}`, `${NAME:+alt}`, `\x` (an unset variable
/// is empty, as in the shell). A command substitution (`$(…)`, a backquote), quoting, and
/// every other form are refused with the reason (the message is what follows the field's
/// name).
pub(super) fn expand(ctx: &Context<'_>, text: &str) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some((_, escaped)) => out.push(escaped),
                None => out.push('\\'),
            },
            '`' => return Err(NO_COMMANDS.into()),
            '\'' | '"' => {
                return Err(
                    "uses shell quoting, which mcp-reconcile does not reproduce — write the value \
                     without quotes (escape a `$` as `\\$`)"
                        .into(),
                )
            }
            '$' => match chars.peek().map(|&(_, n)| n) {
                Some('(') => return Err(NO_COMMANDS.into()),
                Some('{') => {
                    let rest = &text[at + 2..];
                    let Some(end) = closing_brace(rest) else {
                        return Err("has a \"${\" without its \"}\"".into());
                    };
                    out.push_str(&braced(ctx, &rest[..end])?);
                    // Skip past the closing brace.
                    while chars.next_if(|&(i, _)| i <= at + 2 + end).is_some() {}
                }
                Some(n) if n.is_ascii_alphabetic() || n == '_' => {
                    let mut name = String::new();
                    while let Some((_, n)) =
                        chars.next_if(|&(_, n)| n.is_ascii_alphanumeric() || n == '_')
                    {
                        name.push(n);
                    }
                    out.push_str(ctx.vars.get(&name).map_or("", String::as_str));
                }
                Some(n) if n.is_ascii_digit() || "$?!#*@-".contains(n) => {
                    return Err(format!(
                        "uses the shell parameter ${n}, which has no value here — escape the \
                         `$` as `\\$` if it is meant literally"
                    ))
                }
                _ => out.push('$'),
            },
            c => out.push(c),
        }
    }
    Ok(out)
}

/// Why a command substitution is refused.
const NO_COMMANDS: &str = "runs a command ($(…) or `…`), which mcp-reconcile never does for a \
                           configuration value — put the command's output in the file, or in a \
                           variable the session is started with";

/// Where the `}` closing a `${` whose inside starts `rest` is (nested `${…}` counted).
fn closing_brace(rest: &str) -> Option<usize> {
    let mut depth = 0usize;
    for (i, c) in rest.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => return Some(i),
            '}' => depth -= 1,
            _ => {}
        }
    }
    None
}

/// The value of `${inner}`.
fn braced(ctx: &Context<'_>, inner: &str) -> Result<String, String> {
    let name_end = inner
        .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
        .unwrap_or(inner.len());
    let (name, op) = inner.split_at(name_end);
    if name.is_empty() || name.starts_with(|c: char| c.is_ascii_digit()) {
        return Err("uses a ${…} that is not a variable this layout expands".into());
    }
    let value = ctx.vars.get(name);
    let set_nonempty = value.is_some_and(|v| !v.is_empty());
    let word = |w: &str| expand(ctx, w);
    match op {
        "" => Ok(value.cloned().unwrap_or_default()),
        _ if op.starts_with(":-") => match set_nonempty {
            true => Ok(value.cloned().unwrap_or_default()),
            false => word(&op[2..]),
        },
        _ if op.starts_with(":+") => match set_nonempty {
            true => word(&op[2..]),
            false => Ok(String::new()),
        },
        _ if op.starts_with('-') => match value {
            Some(v) => Ok(v.clone()),
            None => word(&op[1..]),
        },
        _ => Err(
            "uses a form of ${…} this layout does not reproduce (it takes $NAME, \
                  ${NAME}, ${NAME:-default}, ${NAME-default} and ${NAME:+alt})"
                .into(),
        ),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;
    use crate::inputs::object;

    /// Crush's expansion is reproduced for variables and never runs a command.
    #[test]
    fn crush_values_expand_variables_and_never_run_a_command() {
        let vars = BTreeMap::from([
            ("TOKEN".to_owned(), "t".to_owned()),
            ("EMPTY".to_owned(), String::new()),
        ]);
        let ctx = Context::at_p(&vars);
        let ok = |s: &str| expand(&ctx, s).expect("expands");
        assert_eq!(ok("Bearer $TOKEN"), "Bearer t");
        assert_eq!(ok("${TOKEN}x"), "tx");
        assert_eq!(ok("$NOPE|${NOPE}"), "|", "unset is empty, as in the shell");
        assert_eq!(ok("${NOPE:-d}${EMPTY:-e}${EMPTY-f}"), "de");
        assert_eq!(ok("${NOPE:-$TOKEN}"), "t");
        assert_eq!(ok("${TOKEN:+yes}${NOPE:+no}"), "yes");
        assert_eq!(ok("\\$TOKEN costs 5$"), "$TOKEN costs 5$");
        for hostile in [
            "$(touch /tmp/pwned)",
            "a`id`",
            "${NOPE:-$(id)}",
            "'$TOKEN'",
            "${TOKEN:?unset}",
            "$1",
            "${unterminated",
        ] {
            assert!(expand(&ctx, hostile).is_err(), "{hostile} expanded");
        }
        assert!(expand(&ctx, "$(id)")
            .expect_err("refused")
            .contains("never does"));
    }

    /// Entries map onto this host's fields; what cannot run says why.
    #[test]
    fn crush_entries_map_onto_this_hosts_fields() {
        let vars = BTreeMap::from([("TOKEN".to_owned(), "t".to_owned())]);
        let ctx = Context::at_p(&vars);
        let top = object(
            r#"{"mcp": {
                "local": {"type": "stdio", "command": "x", "args": ["$TOKEN"],
                          "env": {"K": "${TOKEN}"}, "disabled_tools": ["b"], "timeout": 30},
                "web": {"type": "http", "url": "https://e/mcp", "headers": {"A": "Bearer $TOKEN"},
                        "enabled_tools": ["a"], "oauth": true},
                "old": {"type": "sse", "url": "https://e/sse"},
                "off": {"type": "stdio", "command": "y", "disabled": true},
                "untyped": {"command": "z"},
                "sneaky": {"type": "stdio", "command": "x", "env": {"K": "$(cat ~/.ssh/id_rsa)"}}
            }}"#,
        );
        let content = parse(&top, LayerSource::Project, &ctx);
        assert_eq!(content.disabled, ["off"]);
        let (_, used, written) = &content.layers[0];
        let json =
            |name: &str| Value::Object(used.get(name).expect(name).object().clone()).to_json();
        assert_eq!(
            json("local"),
            r#"{"command":"x","args":["t"],"env":{"K":"t"},"excludeTools":["b"]}"#
        );
        assert_eq!(
            json("web"),
            r#"{"httpUrl":"https://e/mcp","headers":{"A":"Bearer t"},"includeTools":["a"]}"#
        );
        assert_eq!(json("old"), r#"{"url":"https://e/sse"}"#);
        assert!(written
            .get("local")
            .expect("written")
            .get("timeout")
            .is_some());
        assert!(!used.contains_key("untyped") && !used.contains_key("sneaky"));
        let errors = content.entry_errors.join("\n");
        assert!(errors.contains("\"untyped\"") && errors.contains("requires one"));
        assert!(errors.contains("\"sneaky\"") && errors.contains("\"env\".K runs a command"));
        assert!(
            !errors.contains("id_rsa"),
            "the value is not echoed: {errors}"
        );
    }
}
