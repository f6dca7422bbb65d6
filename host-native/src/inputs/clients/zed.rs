//! Zed: `context_servers` in the user's `settings.json` (`$FLATPAK_XDG_CONFIG_HOME/zed` or
//! `$XDG_CONFIG_HOME/zed`, `~/.config/zed`) and the project's `.zed/settings.json` (gated;
//! Zed itself starts a project's servers only in a worktree it trusts). Zed's settings are
//! JSON with comments and trailing commas.
//!
//! An entry is one of Zed's three shapes (`ContextServerSettingsContent`, untagged): a local
//! server (`command` a string, `args` required, `env`), a remote one (`url`, `headers`:
//! streamable HTTP), or an extension's (`settings` only: the server comes from a Zed
//! extension, which Zed starts itself — skipped here with a note). `enabled: false` turns a
//! server off; `timeout` is seconds per tool call (this host's `timeout` is milliseconds);
//! `remote` (run it on a remote-development host) and the old `source` tag change nothing here.
//! The older nested `command: {path, args, env}` is refused, as Zed refuses it.

use std::path::{Path, PathBuf};

use mcp_reconcile_kernel::{LayerSource, Object, Value};

use super::expand::Context;
use super::normalize::entries;
use super::spec::{ClientSpec, Editor};
use super::{ClientContent, ClientFile, Format, TextFormat};
use crate::inputs::host_env::{xdg, HostEnv};

/// Zed's entry in the table of clients.
pub(super) static SPEC: ClientSpec = ClientSpec {
    name: "zed",
    title: "Zed",
    about: "Zed's settings.json files (context_servers)",
    help: "\
$XDG_CONFIG_HOME/zed/settings.json (and mcp-reconcile.json beside it),
<project>/.zed/settings.json",
    project_servers: ".zed/settings.json",
    files,
    editor: Some(Editor::new(user_file, "context_servers")),
    ..ClientSpec::EDITOR
};

/// Zed's `settings.json`.
const FORMAT: Format = Format::Text(TextFormat {
    name: "zed",
    complete: |text| parse_lenient(text).is_ok(),
    parse,
});

/// The user's `settings.json`: in `$FLATPAK_XDG_CONFIG_HOME/zed` inside Zed's Flatpak, else
/// `$XDG_CONFIG_HOME/zed` (`~/.config/zed`), as Zed's `paths::config_dir` finds it on Linux.
fn user_file(env: &HostEnv) -> anyhow::Result<PathBuf> {
    let config = match env.var("FLATPAK_XDG_CONFIG_HOME") {
        Some(dir) if Path::new(dir).is_absolute() => PathBuf::from(dir),
        _ => xdg(env, "XDG_CONFIG_HOME", &[".config"], "Zed's settings.json")?,
    };
    Ok(config.join("zed/settings.json"))
}

/// The sidecar `install zed` moves servers to, the user's file, the project's.
fn files(project: &Path, env: &HostEnv, _: Option<PathBuf>) -> anyhow::Result<Vec<ClientFile>> {
    Ok(ClientFile::handed_over(
        FORMAT,
        user_file(env)?,
        Some(project.join(".zed/settings.json")),
    ))
}

/// The text as Zed reads it: JSON with comments and trailing commas.
fn parse_lenient(text: &str) -> Result<Value, String> {
    mcp_reconcile_kernel::json::parse_jsonc(&without_trailing_commas(text))
        .map_err(|e| format!("is not JSON with comments ({e})"))
}

/// `text` without the commas that directly precede a `}` or `]` (comments and whitespace
/// between them allowed); strings and comments are left as they are.
fn without_trailing_commas(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut i = 0;
    let mut copied = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'"' => i = skip_string(bytes, i),
            b'/' if bytes.get(i + 1) == Some(&b'/') || bytes.get(i + 1) == Some(&b'*') => {
                i = skip_comment(bytes, i);
            }
            b',' => {
                let mut j = i + 1;
                loop {
                    while j < bytes.len() && bytes[j].is_ascii_whitespace() {
                        j += 1;
                    }
                    let comment = bytes.get(j) == Some(&b'/')
                        && matches!(bytes.get(j + 1), Some(b'/' | b'*'));
                    if !comment {
                        break;
                    }
                    j = skip_comment(bytes, j);
                }
                if matches!(bytes.get(j), Some(b'}' | b']')) {
                    out.push_str(&text[copied..i]);
                    copied = i + 1;
                }
                i += 1;
            }
            _ => i += 1,
        }
    }
    out.push_str(&text[copied..]);
    out
}

/// The index after the string that starts at `i`.
fn skip_string(bytes: &[u8], mut i: usize) -> usize {
    i += 1;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' => i += 2,
            b'"' => return i + 1,
            _ => i += 1,
        }
    }
    bytes.len()
}

/// The index after the comment that starts at `i` (`//` to the line's end, `/* … */`).
fn skip_comment(bytes: &[u8], i: usize) -> usize {
    let rest = &bytes[i + 2..];
    if bytes[i + 1] == b'/' {
        rest.iter()
            .position(|&b| b == b'\n')
            .map_or(bytes.len(), |p| i + 2 + p)
    } else {
        rest.windows(2)
            .position(|w| w == b"*/")
            .map_or(bytes.len(), |p| i + 2 + p + 2)
    }
}

/// A Zed `settings.json`: its `context_servers` as one layer of kind `scope`, those with
/// `enabled: false` switched off, extensions' entries noted and left to Zed.
fn parse(text: &str, scope: LayerSource, _: &Context<'_>) -> Result<ClientContent, String> {
    let value = parse_lenient(text)?;
    let Value::Object(top) = value else {
        return Err(format!(
            "must be a JSON object, found {}",
            value.preview(60)
        ));
    };
    let mut out = ClientContent::default();
    match top.get("context_servers") {
        None | Some(Value::Null) => {}
        Some(Value::Object(map)) => {
            let off = |e: &Value| {
                e.as_object().and_then(|e| e.get("enabled")) == Some(&Value::Bool(false))
            };
            out.disabled = map
                .iter()
                .filter(|(_, e)| off(e))
                .map(|(name, _)| name.clone())
                .collect();
            let (servers, extensions): (Object, Object) = map
                .iter()
                .map(|(k, v)| (k.clone(), v.clone()))
                .partition(|(_, e)| !is_extension(e));
            for (name, e) in &extensions {
                if !off(e) {
                    out.entry_errors.push(format!(
                        "server \"{name}\" in context_servers comes from a Zed extension (it has \
                         only \"settings\"): Zed starts it itself and mcp-reconcile cannot — \
                         skipped; to run it here, write it as a \"command\" with \"args\""
                    ));
                }
            }
            let (used, written) =
                entries(&servers, "context_servers", &mut out.entry_errors, entry);
            out.layers.push((scope, used, written));
        }
        Some(other) => out.entry_errors.push(format!(
            "context_servers must be an object of server entries, found {} — no servers are \
             loaded from it",
            other.preview(60)
        )),
    }
    Ok(out)
}

/// Whether an entry is an extension's: `settings`, no `command` and no `url`.
fn is_extension(entry: &Value) -> bool {
    entry.as_object().is_some_and(|e| {
        e.contains_key("settings") && !e.contains_key("command") && !e.contains_key("url")
    })
}

/// One entry in this host's fields: a local or a remote server.
fn entry(object: &Object) -> Result<(Object, Object), String> {
    let mut used = Object::new();
    match (object.get("command"), object.get("url")) {
        (Some(Value::String(command)), _) => {
            let Some(args @ Value::Array(_)) = object.get("args") else {
                return Err(
                    "it has a \"command\" but no \"args\" — Zed requires \"args\" (an \
                            empty [] is fine) and does not start it without"
                        .into(),
                );
            };
            used.insert("command".into(), Value::from(command.as_str()));
            used.insert("args".into(), args.clone());
            if let Some(env @ Value::Object(_)) = object.get("env") {
                used.insert("env".into(), env.clone());
            }
        }
        (Some(Value::Object(_)), _) => {
            return Err(
                "its \"command\" is the older nested {path, args, env}, which Zed no \
                        longer reads — write \"command\": \"PATH\" with \"args\" and \"env\" \
                        beside it"
                    .into(),
            )
        }
        (Some(other), _) => {
            return Err(format!(
                "its \"command\" must be a string, found {}",
                other.preview(40)
            ))
        }
        (None, Some(Value::String(url))) => {
            used.insert("httpUrl".into(), Value::from(url.as_str()));
            if let Some(headers @ Value::Object(_)) = object.get("headers") {
                used.insert("headers".into(), headers.clone());
            }
        }
        (None, _) => {
            return Err(
                "it has neither a \"command\" (a local server) nor a \"url\" (a remote one)".into(),
            )
        }
    }
    if let Some(seconds) = object.get("timeout").and_then(Value::as_f64) {
        if seconds > 0.0 {
            used.insert("timeout".into(), Value::from(seconds * 1000.0));
        }
    }
    Ok((used, object.clone()))
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    /// Zed's shapes map onto this host's fields; extensions' entries and the nested command
    /// are noted and left out; trailing commas and comments are read as Zed reads them.
    #[test]
    fn zeds_context_servers_map_onto_this_hosts_fields() {
        let vars = BTreeMap::new();
        let ctx = Context::at_p(&vars);
        let text = r#"{
            // Zed's own settings beside the servers
            "theme": "One Dark",
            "context_servers": {
                "local": {"command": "x", "args": ["a",], "env": {"K": "v"}, "timeout": 2,
                          "remote": false, "source": "custom"},
                "web": {"url": "https://e/mcp", "headers": {"A": "b"}, /* c */ },
                "off": {"command": "y", "args": [], "enabled": false},
                "ext": {"settings": {"key": "v"}},
                "noargs": {"command": "z"},
                "nested": {"command": {"path": "p", "args": []}},
            },
        }"#;
        let content = parse(text, LayerSource::User, &ctx).expect("parses");
        assert_eq!(content.disabled, ["off"]);
        let (_, used, _) = &content.layers[0];
        let json =
            |name: &str| Value::Object(used.get(name).expect(name).object().clone()).to_json();
        assert_eq!(
            json("local"),
            r#"{"command":"x","args":["a"],"env":{"K":"v"},"timeout":2000}"#
        );
        assert_eq!(
            json("web"),
            r#"{"httpUrl":"https://e/mcp","headers":{"A":"b"}}"#
        );
        assert_eq!(
            used.keys().collect::<Vec<_>>(),
            ["local", "web", "off"],
            "the extension's, the argless and the nested entries are left out"
        );
        let errors = content.entry_errors.join("\n");
        assert!(errors.contains("\"ext\"") && errors.contains("Zed extension"));
        assert!(errors.contains("\"noargs\"") && errors.contains("requires \"args\""));
        assert!(errors.contains("\"nested\"") && errors.contains("no longer"));
    }

    /// Only a comma right before a closing bracket goes; commas in strings and comments stay.
    #[test]
    fn only_trailing_commas_are_dropped() {
        assert_eq!(
            without_trailing_commas(r#"{"a": "x,}", "b": [1, 2, /* ,] */ ], // ,}"#),
            r#"{"a": "x,}", "b": [1, 2 /* ,] */ ], // ,}"#
        );
        assert_eq!(without_trailing_commas("[1,\n// c\n]"), "[1\n// c\n]");
        for hostile in ["\"", "/", "/*", ",", "\"\\", "[,/"] {
            let _ = without_trailing_commas(hostile);
            assert!(parse_lenient(hostile).is_err());
        }
    }
}
