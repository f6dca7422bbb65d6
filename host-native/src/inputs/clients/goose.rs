//! Goose (block/goose): `extensions` in its YAML `config.yaml`, in `$GOOSE_PATH_ROOT/config`
//! or `$XDG_CONFIG_HOME/goose` (`~/.config/goose`) — the user's only; Goose reads no
//! project file of extensions — and in `mcp-reconcile.json` beside it, where `install goose`
//! moves them (`install::goose`).
//!
//! Per extension (Goose's `ExtensionEntry`: `enabled` and a `type`-tagged config, both
//! required): `stdio` (`cmd`, `args` required, `envs`), `streamable_http` (`uri`, `headers`,
//! `envs`); `enabled: false` turns it off; `available_tools` (when not empty) is this host's
//! `includeTools`; `timeout` is seconds (this host's is milliseconds). Goose's own kinds —
//! `builtin`, `platform`, `frontend`, `inline_python` — and `sse` (which Goose no longer
//! starts) are skipped with a note. As Goose does, an `envs` entry that would override
//! `PATH`, `LD_PRELOAD` and the like is dropped, and `headers` expand `${VAR}` / `$VAR` from the
//! extension's own variables.
//!
//! `env_keys` names variables whose values Goose keeps in the OS keyring (or takes from the
//! environment first): this host cannot read the keyring, so each comes from the session's
//! environment, and an extension with a key that is not set there is not started — the error
//! names the keys (never a value) — rather than started without its credentials.

use std::path::{Path, PathBuf};

use mcp_reconcile_kernel::{LayerSource, Object, Value};

use super::expand::Context;
use super::normalize::entries;
use super::spec::{ClientSpec, Editor};
use super::{ClientContent, ClientFile, Format, TextFormat};
use crate::inputs::host_env::{xdg, HostEnv};

/// Goose's entry in the table of clients.
pub(super) static SPEC: ClientSpec = ClientSpec {
    name: "goose",
    title: "Goose",
    about: "Goose's config.yaml (extensions)",
    help: "\
$GOOSE_PATH_ROOT/config/config.yaml or $XDG_CONFIG_HOME/goose/config.yaml (and
mcp-reconcile.json beside it)",
    files,
    editor: Some(Editor::new(user_file, "extensions")),
    ..ClientSpec::EDITOR
};

/// Goose's `config.yaml`.
const FORMAT: Format = Format::Text(TextFormat {
    name: "goose",
    complete: |text| yaml(text).is_ok(),
    parse,
});

/// Variables Goose never lets an extension's `envs` set (its `Envs::DISALLOWED_KEYS`).
const DISALLOWED: &[&str] = &[
    "PATH",
    "PATHEXT",
    "SystemRoot",
    "windir",
    "LD_LIBRARY_PATH",
    "LD_PRELOAD",
    "LD_AUDIT",
    "LD_DEBUG",
    "LD_BIND_NOW",
    "LD_ASSUME_KERNEL",
    "DYLD_LIBRARY_PATH",
    "DYLD_INSERT_LIBRARIES",
    "DYLD_FRAMEWORK_PATH",
    "PYTHONPATH",
    "PYTHONHOME",
    "NODE_OPTIONS",
    "RUBYOPT",
    "GEM_PATH",
    "GEM_HOME",
    "CLASSPATH",
    "GO111MODULE",
    "GOROOT",
    "APPINIT_DLLS",
    "SESSIONNAME",
    "ComSpec",
    "TEMP",
    "TMP",
    "LOCALAPPDATA",
    "USERPROFILE",
    "HOMEDRIVE",
    "HOMEPATH",
];

/// Goose's `config.yaml`: `$GOOSE_PATH_ROOT/config/config.yaml`, else
/// `$XDG_CONFIG_HOME/goose/config.yaml` (`~/.config/goose`), as Goose's `Paths` finds it on
/// Linux.
pub(crate) fn user_file(env: &HostEnv) -> anyhow::Result<PathBuf> {
    Ok(match env.var("GOOSE_PATH_ROOT") {
        Some(root) => env.absolute(Path::new(root)).join("config/config.yaml"),
        None => xdg(env, "XDG_CONFIG_HOME", &[".config"], "Goose's config.yaml")?
            .join("goose/config.yaml"),
    })
}

/// The sidecar `install goose` moves extensions to (JSON, which this YAML parser reads), and
/// the user's `config.yaml`.
fn files(_: &Path, env: &HostEnv, _: Option<PathBuf>) -> anyhow::Result<Vec<ClientFile>> {
    Ok(ClientFile::handed_over(FORMAT, user_file(env)?, None))
}

/// The YAML document (an empty file is an empty mapping).
fn yaml(text: &str) -> Result<serde_norway::Value, String> {
    if text.trim().is_empty() {
        return Ok(serde_norway::Value::Mapping(serde_norway::Mapping::new()));
    }
    serde_norway::from_str(text).map_err(|e| format!("is not valid YAML ({e})"))
}

/// A `config.yaml`: its `extensions` as one user layer, those with `enabled: false` switched
/// off, Goose's own kinds noted and skipped.
fn parse(text: &str, scope: LayerSource, ctx: &Context<'_>) -> Result<ClientContent, String> {
    let serde_norway::Value::Mapping(top) = yaml(text)? else {
        return Err("must be a YAML mapping".into());
    };
    let mut out = ClientContent::default();
    let extensions = match top.get("extensions") {
        None | Some(serde_norway::Value::Null) => return Ok(out),
        Some(serde_norway::Value::Mapping(map)) => map,
        Some(_) => {
            out.entry_errors.push(
                "extensions must be a mapping of extension entries — no servers are loaded \
                 from it"
                    .into(),
            );
            return Ok(out);
        }
    };
    let mut map = Object::new();
    for (key, entry) in extensions {
        let Some(name) = key.as_str() else {
            out.entry_errors
                .push("an extension's key is not a string — skipped".into());
            continue;
        };
        match json_of(entry) {
            Some(Value::Object(entry)) => match goose_own(&entry) {
                Some(kind) => {
                    if entry.get("enabled") != Some(&Value::Bool(false)) {
                        out.entry_errors.push(format!(
                            "extension \"{name}\" is of type {kind}, which Goose runs itself — \
                             skipped"
                        ));
                    }
                }
                None => {
                    map.insert(name.to_owned(), Value::Object(entry));
                }
            },
            Some(other) => {
                map.insert(name.to_owned(), other);
            }
            None => out.entry_errors.push(format!(
                "extension \"{name}\" holds a value that is not plain data (a non-string key, \
                 a NaN) — skipped"
            )),
        }
    }
    out.disabled = map
        .iter()
        .filter(|(_, e)| e.as_object().and_then(|e| e.get("enabled")) == Some(&Value::Bool(false)))
        .map(|(name, _)| name.clone())
        .collect();
    let (used, written) = entries(&map, "extensions", &mut out.entry_errors, |e| entry(e, ctx));
    out.layers.push((scope, used, written));
    Ok(out)
}

/// A YAML value as this host's JSON value (`None`: it has no JSON form).
fn json_of(value: &serde_norway::Value) -> Option<Value> {
    let json = serde_json::to_string(value).ok()?;
    mcp_reconcile_kernel::json::parse(&json).ok()
}

/// The kind of an extension Goose runs itself (or no longer runs), if it is one.
fn goose_own(entry: &Object) -> Option<&'static str> {
    match entry.get("type").and_then(Value::as_str)? {
        "builtin" => Some("builtin"),
        "platform" => Some("platform"),
        "frontend" => Some("frontend"),
        "inline_python" => Some("inline_python"),
        "sse" => Some("sse (which Goose no longer starts: it asks you to move to streamable_http)"),
        _ => None,
    }
}

/// One stdio or streamable HTTP extension in this host's fields.
fn entry(object: &Object, ctx: &Context<'_>) -> Result<(Object, Object), String> {
    if !matches!(object.get("enabled"), Some(Value::Bool(_))) {
        return Err("it has no \"enabled\" (true or false), which Goose requires".into());
    }
    let env = environment(object, ctx)?;
    let mut used = Object::new();
    match object.get("type").and_then(Value::as_str) {
        Some("stdio") => {
            let Some(Value::String(cmd)) = object.get("cmd").filter(|c| c.as_str() != Some(""))
            else {
                return Err("its type is stdio but it has no \"cmd\"".into());
            };
            let Some(args @ Value::Array(_)) = object.get("args") else {
                return Err(
                    "it has no \"args\", which Goose requires (an empty [] is fine)".into(),
                );
            };
            used.insert("command".into(), Value::from(cmd.as_str()));
            used.insert("args".into(), args.clone());
            if !env.is_empty() {
                used.insert("env".into(), Value::Object(env));
            }
        }
        Some("streamable_http") => {
            let Some(Value::String(uri)) = object.get("uri").filter(|u| u.as_str() != Some(""))
            else {
                return Err("its type is streamable_http but it has no \"uri\"".into());
            };
            used.insert("httpUrl".into(), Value::from(uri.as_str()));
            if let Some(Value::Object(headers)) = object.get("headers") {
                let headers = headers
                    .iter()
                    .map(|(k, v)| {
                        let v = v
                            .as_str()
                            .map_or_else(|| v.clone(), |s| substitute(s, &env));
                        (k.clone(), v)
                    })
                    .collect();
                used.insert("headers".into(), Value::Object(headers));
            }
        }
        Some(other) => {
            return Err(format!(
                "its type {} is not one of Goose's (stdio, streamable_http)",
                Value::from(other).to_json()
            ))
        }
        None => return Err("it has no \"type\", which Goose requires".into()),
    }
    if let Some(Value::Array(tools)) = object.get("available_tools") {
        if !tools.is_empty() {
            used.insert("includeTools".into(), Value::Array(tools.clone()));
        }
    }
    if let Some(seconds) = object.get("timeout").and_then(Value::as_f64) {
        if seconds > 0.0 {
            used.insert("timeout".into(), Value::from(seconds * 1000.0));
        }
    }
    Ok((used, object.clone()))
}

/// The extension's variables: `envs` (less the ones Goose never lets it set), then each of
/// `env_keys` it does not already hold, from the session's environment; an error names the
/// keys the environment does not have.
fn environment(object: &Object, ctx: &Context<'_>) -> Result<Object, String> {
    let mut env: Object = match object.get("envs") {
        Some(Value::Object(envs)) => envs
            .iter()
            .filter(|(k, _)| !DISALLOWED.iter().any(|d| d.eq_ignore_ascii_case(k)))
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect(),
        _ => Object::new(),
    };
    let mut missing = Vec::new();
    for key in super::names(object.get("env_keys")) {
        if env.contains_key(&key) {
            continue;
        }
        match ctx.vars.get(&key).filter(|v| !v.is_empty()) {
            Some(value) => {
                env.insert(key, Value::from(value.as_str()));
            }
            None => missing.push(key),
        }
    }
    if !missing.is_empty() {
        return Err(format!(
            "its env_keys {} are kept in Goose's keyring, which mcp-reconcile cannot read, and \
             are not set in the environment — set them in the environment the gateway starts \
             in, or write them under \"envs\"",
            missing.join(", ")
        ));
    }
    Ok(env)
}

/// `text` with `${NAME}` and `$NAME` replaced from `env` (an unknown name stays as written),
/// as Goose expands an extension's headers.
fn substitute(text: &str, env: &Object) -> Value {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        let (name, skip) = match after.strip_prefix('{') {
            Some(inner) => match inner.find('}') {
                Some(end) => (inner[..end].trim(), end + 2),
                None => ("", 0),
            },
            None => {
                let end = after
                    .find(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
                    .unwrap_or(after.len());
                (&after[..end], end)
            }
        };
        let valid = name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
            && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        match env.get(name).and_then(Value::as_str).filter(|_| valid) {
            Some(value) => {
                out.push_str(value);
                rest = &after[skip..];
            }
            None => {
                out.push('$');
                rest = after;
            }
        }
    }
    out.push_str(rest);
    Value::from(out.as_str())
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    /// Goose's extension kinds map onto this host's fields; its own kinds are noted; an
    /// extension whose keyring keys are not in the environment is not started, and its error
    /// names the keys only.
    #[test]
    fn gooses_extensions_map_onto_this_hosts_fields() {
        let vars = BTreeMap::from([("GH_TOKEN".to_owned(), "secret-value".to_owned())]);
        let ctx = Context::at_p(&vars);
        let text = r#"
GOOSE_PROVIDER: openai
extensions:
  developer:
    enabled: true
    type: builtin
    name: developer
  local:
    enabled: true
    type: stdio
    name: Local
    cmd: x
    args: [a]
    envs: {K: v, LD_PRELOAD: /tmp/evil.so}
    env_keys: [GH_TOKEN]
    available_tools: [echo]
    timeout: 300
  web:
    enabled: true
    type: streamable_http
    uri: https://e/mcp
    envs: {TOKEN: t}
    headers: {Authorization: "Bearer ${TOKEN}", X: "$NOPE"}
  off:
    enabled: false
    type: stdio
    cmd: y
    args: []
  keyring:
    enabled: true
    type: stdio
    cmd: z
    args: []
    env_keys: [OTHER_SECRET]
  old:
    enabled: true
    type: sse
    uri: https://e/sse
  noenabled:
    type: stdio
    cmd: w
    args: []
"#;
        let content = parse(text, LayerSource::User, &ctx).expect("parses");
        assert_eq!(content.disabled, ["off"]);
        let (_, used, _) = &content.layers[0];
        let json =
            |name: &str| Value::Object(used.get(name).expect(name).object().clone()).to_json();
        assert_eq!(
            json("local"),
            r#"{"command":"x","args":["a"],"env":{"K":"v","GH_TOKEN":"secret-value"},"includeTools":["echo"],"timeout":300000}"#
        );
        assert_eq!(
            json("web"),
            r#"{"httpUrl":"https://e/mcp","headers":{"Authorization":"Bearer t","X":"$NOPE"}}"#
        );
        assert_eq!(used.keys().collect::<Vec<_>>(), ["local", "web", "off"]);
        let errors = content.entry_errors.join("\n");
        assert!(
            errors.contains("\"developer\" is of type builtin"),
            "{errors}"
        );
        assert!(errors.contains("\"old\" is of type sse"), "{errors}");
        assert!(errors.contains("\"keyring\"") && errors.contains("OTHER_SECRET"));
        assert!(errors.contains("\"noenabled\""));
        assert!(!errors.contains("secret-value"));
    }

    /// A billion-laughs file (aliases of aliases) is refused without expanding it, and no
    /// hostile input panics or hangs the parser.
    #[test]
    fn hostile_yaml_is_refused_not_expanded() {
        let mut laughs = String::from(
            "a: &a [\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\",\"lol\"]\n",
        );
        let mut prev = 'a';
        for name in 'b'..='j' {
            laughs.push_str(&format!(
                "{name}: &{name} [*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev},*{prev}]\n"
            ));
            prev = name;
        }
        laughs.push_str("extensions: *j\n");
        let vars = BTreeMap::new();
        let ctx = Context::at_p(&vars);
        assert!(parse(&laughs, LayerSource::User, &ctx).is_err());
        assert!(!(FORMAT_COMPLETE)(&laughs));
        let deep = "[".repeat(100_000);
        for hostile in [
            deep.as_str(),
            "extensions: !!binary AAAA",
            "extensions:\n  a: *nope",
            "extensions: {? [a]: b}",
            "\u{feff}extensions: [",
            "extensions:\n  x: {enabled: true, type: stdio, cmd: .nan, args: []}",
            "extensions:\n  x: {enabled: true, type: stdio, cmd: c, args: [.inf]}",
            "--- a\n--- b",
        ] {
            let _ = parse(hostile, LayerSource::User, &ctx);
        }
    }

    /// The format's completeness check.
    const FORMAT_COMPLETE: fn(&str) -> bool = |text| yaml(text).is_ok();
}
