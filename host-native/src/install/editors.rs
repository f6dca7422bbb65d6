//! The editors' files (Cursor's and VS Code's `mcp.json`, Copilot CLI's `mcp-config.json`).
//! These clients have no switch that keeps a server listed but not started, so install hands
//! the servers over: every entry of the user's file moves, as written, into
//! `mcp-reconcile.json` beside it (same format, same key, read live by `--layout CLIENT`), and
//! the gateway's entry is left in the editor's file. A server added to the editor's file later
//! is started by the editor itself (the layout says so) until install runs again.

use anyhow::Context as _;
use serde_json::Value;

use super::{jsonc, GATEWAY};

/// `(editor file, sidecar)` after install: every entry but the gateway's moved from the
/// editor's `key` into the sidecar's (an entry of the same name there is replaced: the editor's
/// is the newer), and the gateway's entry set.
pub(super) fn install(
    editor: &str,
    sidecar: &str,
    key: &str,
    entry: &Value,
) -> anyhow::Result<(String, String)> {
    let mut editor = editor.to_owned();
    let mut sidecar = sidecar.to_owned();
    for name in jsonc::keys(&editor, &[key]) {
        if name == GATEWAY {
            continue;
        }
        let server = jsonc::get(&editor, &[key], &name)
            .with_context(|| format!("the entry {name:?} cannot be read"))?;
        if !startable(&server) {
            continue;
        }
        sidecar = jsonc::set(&sidecar, &[key], &name, &server)?;
        editor = jsonc::remove(&editor, &[key], &name)?;
    }
    let editor = jsonc::set(&editor, &[key], GATEWAY, entry)?;
    Ok((editor, sidecar))
}

/// Whether the entry moves to the sidecar: every entry but a Zed extension's (`settings`
/// only, or `"source": "extension"`, without a command or URL), which configures a server the
/// editor's extension starts and so stays in the editor's file, where it does its work. (An
/// entry of another shape moves: OpenCode's V2 `servers` object, its switch-only
/// `{"enabled": false}`.)
fn startable(server: &Value) -> bool {
    let runs = ["command", "url", "httpUrl", "serverUrl"]
        .iter()
        .any(|k| server.get(k).is_some());
    let extensions = server.get("settings").is_some()
        || server.get("source").and_then(Value::as_str) == Some("extension");
    runs || !extensions
}

/// The editor's file after uninstall, when it changed since install: without the gateway's
/// entry, and with the sidecar's entries back (an entry the editor's file has by then keeps
/// the editor's version).
pub(super) fn uninstall(editor: &str, sidecar: &str, key: &str) -> anyhow::Result<String> {
    // The editor's file deleted since install: the sidecar's servers go into a new one.
    let mut editor = match editor.trim() {
        "" => String::new(),
        _ => jsonc::remove(editor, &[key], GATEWAY)?,
    };
    let present = jsonc::keys(&editor, &[key]);
    for name in jsonc::keys(sidecar, &[key]) {
        if present.contains(&name) {
            continue;
        }
        if let Some(server) = jsonc::get(sidecar, &[key], &name) {
            editor = jsonc::set(&editor, &[key], &name, &server)?;
        }
    }
    Ok(editor)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    const CURSOR: &str = "{\n  \"mcpServers\": {\n    \"github\": {\n      \"command\": \"npx\",\n      \"args\": [\"-y\", \"gh\"]\n    },\n    \"web\": { \"url\": \"https://x/mcp\" }\n  }\n}\n";

    #[test]
    fn the_servers_move_beside_and_come_back() -> anyhow::Result<()> {
        let entry = json!({"command": "mcp-reconcile", "args": ["serve"]});
        let (editor, sidecar) = install(CURSOR, "", "mcpServers", &entry)?;
        assert_eq!(jsonc::keys(&editor, &["mcpServers"]), [GATEWAY]);
        assert_eq!(jsonc::keys(&sidecar, &["mcpServers"]), ["github", "web"]);
        assert_eq!(
            jsonc::get(&sidecar, &["mcpServers"], "github"),
            Some(json!({"command": "npx", "args": ["-y", "gh"]}))
        );
        // Again: nothing more to move.
        let (again, same) = install(&editor, &sidecar, "mcpServers", &entry)?;
        assert_eq!(
            (again.as_str(), same.as_str()),
            (editor.as_str(), sidecar.as_str())
        );

        // A server added to the editor's file later moves on the next install.
        let added = jsonc::set(&editor, &["mcpServers"], "new", &json!({"command": "n"}))?;
        let (editor, sidecar) = install(&added, &sidecar, "mcpServers", &entry)?;
        assert_eq!(
            jsonc::keys(&sidecar, &["mcpServers"]),
            ["github", "web", "new"]
        );

        // An entry the gateway could not start (a Zed extension's settings) stays.
        let zed = "{\"context_servers\": {\"ext\": {\"settings\": {}}, \"x\": {\"command\": \"x\", \"args\": []}}}";
        let (zed, moved) = install(zed, "", "context_servers", &entry)?;
        assert_eq!(jsonc::keys(&zed, &["context_servers"]), ["ext", GATEWAY]);
        assert_eq!(jsonc::keys(&moved, &["context_servers"]), ["x"]);

        let back = uninstall(&editor, &sidecar, "mcpServers")?;
        assert_eq!(
            jsonc::keys(&back, &["mcpServers"]),
            ["github", "web", "new"]
        );
        Ok(())
    }
}
