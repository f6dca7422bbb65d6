//! Windsurf (Cascade): `~/.codeium/windsurf/mcp_config.json`, `{"mcpServers": {…}}` in the
//! Claude Desktop shape, read by the `mcpServers` family's parser (`family`). A remote server
//! is `serverUrl` (or `url`): streamable HTTP, `type` optional. `disabled: true` turns a
//! server off and `disabledTools` hides tools (this host's `excludeTools`). Windsurf
//! interpolates `${env:NAME}` and `${file:PATH}` in `command`, `args`, `env`, `serverUrl`,
//! `url` and `headers`; so does this layout, before the approval hash (see [`expand`]).
//! Windsurf has no project file: user scope only. `install windsurf` moves the servers to the
//! sidecar.

use std::path::{Path, PathBuf};

use mcp_reconcile_kernel::Object;

use super::expand::{map_strings, replace_braced, Context};
use super::family::{Family, Url};
use super::spec::{ClientSpec, Editor};
use super::{ClientFile, Format, JsonFormat};
use crate::inputs::host_env::HostEnv;

/// Windsurf's entry in the table of clients.
pub(super) static SPEC: ClientSpec = ClientSpec {
    name: "windsurf",
    title: "Windsurf",
    about: "Windsurf's mcp_config.json",
    help: "~/.codeium/windsurf/mcp_config.json (and mcp-reconcile.json beside it); Windsurf has \
           no project file",
    files,
    editor: Some(Editor::new(user_file, "mcpServers")),
    ..ClientSpec::EDITOR
};

/// How Windsurf spells its entries.
const WINDSURF: Family = Family {
    client: "Windsurf",
    key: "mcpServers",
    off: Some("disabled"),
    disabled_tools: Some("disabledTools"),
    url_aliases: &["serverUrl"],
    bare_url: Url::Http,
    type_aliases: &[],
    types: None,
    nested: None,
    expand: Some(expand),
    own_keys: &[],
};

/// Windsurf's `mcp_config.json`.
const FORMAT: Format = Format::Json(JsonFormat {
    name: "windsurf",
    parse: |top, _, scope, ctx| super::family::parse(&WINDSURF, top, scope, ctx),
});

/// `~/.codeium/windsurf/mcp_config.json`.
fn user_file(env: &HostEnv) -> anyhow::Result<PathBuf> {
    Ok(env
        .home("Windsurf's mcp_config.json")?
        .join(".codeium/windsurf/mcp_config.json"))
}

/// The sidecar, then the user's file.
fn files(_: &Path, env: &HostEnv, _: Option<PathBuf>) -> anyhow::Result<Vec<ClientFile>> {
    Ok(ClientFile::handed_over(FORMAT, user_file(env)?, None))
}

/// The fields Windsurf interpolates.
const FIELDS: &[&str] = &["command", "args", "env", "url", "serverUrl", "headers"];

/// `entry` with Windsurf's variables replaced in [`FIELDS`]: `${env:NAME}` by the variable
/// (unset: empty, as the VS Code family does), `${file:PATH}` by that file's text without its
/// final line break (an absolute path or one under `~/`; read bounded, regular files only,
/// never blocking; what it read is part of the entry as used, so of its identity, and never
/// shown: the entry as written keeps the placeholder). Anything else stays as written.
fn expand(ctx: &Context<'_>, entry: &Object) -> Result<Object, String> {
    let mut out = Object::new();
    for (key, value) in entry {
        let value = if FIELDS.contains(&key.as_str()) {
            map_strings(value, false, &|text| expand_text(ctx, text))
                .map_err(|why| format!("its \"{key}\" {why}"))?
        } else {
            value.clone()
        };
        out.insert(key.clone(), value);
    }
    Ok(out)
}

/// `text` with each `${env:…}` and `${file:…}` replaced.
fn expand_text(ctx: &Context<'_>, text: &str) -> Result<String, String> {
    replace_braced(text, |inner| {
        if let Some(name) = inner.strip_prefix("env:") {
            Ok(Some(ctx.vars.get(name).cloned().unwrap_or_default()))
        } else if let Some(path) = inner.strip_prefix("file:") {
            file_text(ctx, path).map(Some)
        } else {
            Ok(None)
        }
    })
}

/// The text of the file `${file:PATH}` names, without its final line break; the message names
/// the path (never what is in the file).
fn file_text(ctx: &Context<'_>, path: &str) -> Result<String, String> {
    let shown = || crate::display::safe(path);
    let file = match (path.strip_prefix("~/"), ctx.home) {
        (Some(under), Some(home)) => home.join(under),
        (Some(_), None) => {
            return Err(format!(
                "uses ${{file:{}}}, but the home directory is unknown",
                shown()
            ))
        }
        (None, _) if Path::new(path).is_absolute() => PathBuf::from(path),
        (None, _) => {
            return Err(format!(
                "uses ${{file:{}}}: give an absolute path (or one under ~/)",
                shown()
            ))
        }
    };
    match crate::inputs::read_text(&file) {
        Ok(Some(text)) => Ok(text
            .strip_suffix('\n')
            .map(|t| t.strip_suffix('\r').unwrap_or(t))
            .unwrap_or(&text)
            .to_owned()),
        Ok(None) => Err(format!("uses ${{file:{}}}, which does not exist", shown())),
        Err(why) => Err(format!("uses ${{file:{}}}, which {why}", shown())),
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use mcp_reconcile_kernel::Value;

    use super::*;

    /// `${env:}` and `${file:}` are expanded in Windsurf's fields only; the file's final line
    /// break is dropped; a missing file fails the entry naming its path, not its content.
    #[test]
    fn windsurfs_variables_expand_in_its_fields() {
        let dir = tempfile::tempdir().expect("temp dir");
        let secret = dir.path().join("token");
        std::fs::write(&secret, "s3cret\n").expect("write");
        let vars = BTreeMap::from([("KEY".to_owned(), "k".to_owned())]);
        let ctx = Context {
            home: Some(dir.path()),
            ..Context::at_p(&vars)
        };
        let text = format!(
            r#"{{"mcpServers": {{
                "web": {{"serverUrl": "https://x/${{env:KEY}}",
                        "headers": {{"Authorization": "Bearer ${{file:{}}}"}},
                        "note": "${{env:KEY}}"}},
                "home": {{"command": "x", "args": ["${{file:~/token}}", "${{env:NONE}}"]}},
                "gone": {{"command": "x", "env": {{"T": "${{file:/nonexistent/t}}"}}}}
            }}}}"#,
            secret.display()
        );
        let top = mcp_reconcile_kernel::json::parse_jsonc(&text)
            .ok()
            .and_then(|v| v.as_object().cloned())
            .expect("object");
        let content = super::super::family::parse(
            &WINDSURF,
            &top,
            mcp_reconcile_kernel::LayerSource::User,
            &ctx,
        );
        let (_, used, written) = &content.layers[0];
        let json = |servers: &mcp_reconcile_kernel::Servers, name: &str| {
            Value::Object(servers.get(name).expect("entry").object().clone()).to_json()
        };
        assert_eq!(
            json(used, "web"),
            r#"{"headers":{"Authorization":"Bearer s3cret"},"note":"${env:KEY}","httpUrl":"https://x/k"}"#
        );
        assert!(!json(written, "web").contains("s3cret"));
        assert_eq!(
            json(used, "home"),
            r#"{"command":"x","args":["s3cret",""]}"#
        );
        assert!(
            content.entry_errors[0].contains("\"gone\"")
                && content.entry_errors[0].contains("/nonexistent/t"),
            "{:?}",
            content.entry_errors
        );
    }
}
