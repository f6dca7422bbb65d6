//! Roo Code (the VS Code extension): its `mcp_settings.json` in VS Code's globalStorage
//! (`<Code/User>/globalStorage/rooveterinaryinc.roo-cline/settings/`, the user's) and the
//! workspace's `.roo/mcp.json` (gated by this host's approvals; Roo Code itself starts it
//! unasked), both `{"mcpServers": {…}}`, read by the `mcpServers` family's parser (`family`).
//! Checked against Roo Code's `McpHub.ts` and `utils/config.ts`: `type` is `stdio`, `sse` or
//! `streamable-http`; an entry with `command` is stdio, one with `url` must say its `type`;
//! a project entry wins over a user entry of the same name; `disabled: true` turns a server
//! off and `disabledTools` hides tools (this host's `excludeTools`); `alwaysAllow` (its
//! tool-call prompt), `timeout` and `watchPaths` (Roo Code restarts the server when one of
//! them changes; this host does not watch them) are its own. Roo Code replaces `${env:NAME}`
//! (`NAME` of word characters; unset: left as written) and then `${workspaceFolder}` in every
//! string of the entry, backslashes in what it puts in turned to `/`; this layout does the
//! same before the approval hash. `install roo` moves the user's servers to the sidecar.

use std::path::{Path, PathBuf};

use mcp_reconcile_kernel::Object;

use super::expand::{map_strings, replace_braced, Context};
use super::family::{Family, Url};
use super::spec::{ClientSpec, Editor};
use super::{ClientFile, Format, JsonFormat};
use crate::inputs::host_env::HostEnv;

/// Roo Code's entry in the table of clients.
pub(super) static SPEC: ClientSpec = ClientSpec {
    name: "roo",
    title: "Roo Code",
    about: "Roo Code's mcp_settings.json and .roo/mcp.json",
    help: "\
$XDG_CONFIG_HOME/Code/User/globalStorage/rooveterinaryinc.roo-cline/settings/mcp_settings.json
(macOS: under ~/Library/Application Support/Code/User/; and mcp-reconcile.json beside it),
<project>/.roo/mcp.json",
    project_servers: ".roo/mcp.json",
    files,
    editor: Some(Editor::new(user_file, "mcpServers")),
    ..ClientSpec::EDITOR
};

/// How Roo Code spells its entries.
const ROO: Family = Family {
    client: "Roo Code",
    key: "mcpServers",
    off: Some("disabled"),
    disabled_tools: Some("disabledTools"),
    url_aliases: &[],
    bare_url: Url::Required,
    type_aliases: &[],
    types: Some(&["stdio", "sse", "streamable-http"]),
    nested: None,
    expand: Some(expand),
    own_keys: &["alwaysAllow", "timeout", "watchPaths"],
};

/// Roo Code's `mcp_settings.json` and `.roo/mcp.json`.
const FORMAT: Format = Format::Json(JsonFormat {
    name: "roo",
    parse: |top, _, scope, ctx| super::family::parse(&ROO, top, scope, ctx),
});

/// Roo Code's `mcp_settings.json`, in VS Code's globalStorage.
fn user_file(env: &HostEnv) -> anyhow::Result<PathBuf> {
    Ok(super::vscode::user_dir(env)?
        .join("globalStorage/rooveterinaryinc.roo-cline/settings/mcp_settings.json"))
}

/// The sidecar, the user's file, then the workspace's.
fn files(project: &Path, env: &HostEnv, _: Option<PathBuf>) -> anyhow::Result<Vec<ClientFile>> {
    Ok(ClientFile::handed_over(
        FORMAT,
        user_file(env)?,
        Some(project.join(".roo/mcp.json")),
    ))
}

/// `entry` as Roo Code's `injectVariables` leaves it: in every string (keys too, as it
/// rewrites the entry's JSON text), first each `${env:NAME}` of a set variable, then each
/// `${workspaceFolder}`. A value Roo Code would splice into its JSON text so that the text no
/// longer parses (a quote or a control character in it) fails the entry, as it fails there.
fn expand(ctx: &Context<'_>, entry: &Object) -> Result<Object, String> {
    let workspace = posix(&ctx.project_given.to_string_lossy());
    let env = |text: &str| {
        replace_braced(text, |inner| {
            let Some(name) = inner.strip_prefix("env:") else {
                return Ok(None);
            };
            if name.is_empty() || !name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_') {
                return Ok(None);
            }
            match ctx.vars.get(name) {
                Some(value) if value.contains('"') || value.chars().any(char::is_control) => {
                    Err(format!(
                        "uses ${{env:{name}}}, whose value holds a quote or a control \
                         character: Roo Code cannot put it into the entry"
                    ))
                }
                Some(value) => Ok(Some(posix(value))),
                None => Ok(None),
            }
        })
    };
    let folder = |text: &str| {
        replace_braced(text, |inner| {
            Ok::<_, String>((inner == "workspaceFolder").then(|| workspace.clone()))
        })
    };
    let text = |text: &str| env(text).and_then(|text| folder(&text));
    let mut out = Object::new();
    for (key, value) in entry {
        let value =
            map_strings(value, true, &text).map_err(|why| format!("its \"{key}\" {why}"))?;
        out.insert(text(key)?, value);
    }
    Ok(out)
}

/// Roo Code's `toPosix`: backslashes become `/`, except in a Windows extended-length path.
fn posix(text: &str) -> String {
    if text.starts_with(r"\\?\") {
        text.to_owned()
    } else {
        text.replace('\\', "/")
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use mcp_reconcile_kernel::{LayerSource, Value};

    use super::*;

    fn used(text: &str, vars: &[(&str, &str)]) -> (Vec<String>, Vec<String>) {
        let top = mcp_reconcile_kernel::json::parse_jsonc(text)
            .ok()
            .and_then(|v| v.as_object().cloned())
            .expect("object");
        let vars: BTreeMap<String, String> = vars
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        let content =
            super::super::family::parse(&ROO, &top, LayerSource::User, &Context::at_p(&vars));
        let entries = content
            .layers
            .iter()
            .flat_map(|(_, used, _)| used.iter())
            .map(|(name, e)| format!("{name}={}", Value::Object(e.object().clone()).to_json()))
            .collect();
        (entries, content.entry_errors)
    }

    /// `${env:NAME}` and `${workspaceFolder}` are replaced everywhere in the entry, set
    /// variables only, backslashes turned to `/`; an env value holding `${workspaceFolder}`
    /// is replaced too (Roo Code's second pass); anything else stays as written.
    #[test]
    fn roos_variables_expand_as_roo_code_injects_them() {
        let (entries, errors) = used(
            r#"{"mcpServers": {"s": {
                "command": "${env:BIN}",
                "args": ["${workspaceFolder}/x", "${env:UNSET}", "${env:A-B}", "${userHome}"],
                "env": {"${env:KEY}": "${env:NESTED}"},
                "alwaysAllow": ["t"], "timeout": 30, "watchPaths": ["a"]
            }}}"#,
            &[
                ("BIN", r"C:\bin\srv"),
                ("KEY", "K"),
                ("NESTED", "${workspaceFolder}"),
            ],
        );
        assert_eq!(errors, Vec::<String>::new());
        assert_eq!(
            entries,
            [
                r#"s={"command":"C:/bin/srv","args":["/p/x","${env:UNSET}","${env:A-B}","${userHome}"],"env":{"K":"/p"}}"#
            ]
        );
    }

    /// A `url` without its `type` is refused (Roo Code asks for one), as is a `type` Roo Code
    /// does not start, and a value that would break Roo Code's JSON text; the others load.
    #[test]
    fn what_roo_code_refuses_is_refused() {
        let (entries, errors) = used(
            r#"{"mcpServers": {
                "bare": {"url": "https://x/mcp"},
                "http": {"type": "http", "url": "https://x/mcp"},
                "quoted": {"command": "${env:Q}"},
                "remote": {"type": "streamable-http", "url": "https://x/mcp", "disabledTools": ["a"]},
                "events": {"type": "sse", "url": "https://x/sse"}
            }}"#,
            &[("Q", "a\"b")],
        );
        assert_eq!(
            entries,
            [
                r#"remote={"httpUrl":"https://x/mcp","excludeTools":["a"]}"#,
                r#"events={"url":"https://x/sse"}"#,
            ]
        );
        let joined = errors.join("\n");
        for name in ["\"bare\"", "\"http\"", "\"quoted\""] {
            assert!(joined.contains(name), "{name}: {joined}");
        }
        assert!(joined.contains("Roo Code"), "{joined}");
    }
}
