//! Other clients' language-server files (SPEC §15, last rule), turned into this host's
//! `.lsp.json` form (§14.1) before it is parsed. The layout says which format a file is in: a
//! `.lsp.json` is valid in this host's format and in a Claude Code plugin's, with different
//! meanings (Claude requires `extensionToLanguage`, restarts a server at most 3 times, and
//! refuses fields it does not know), so it is never guessed.

use mcp_reconcile_kernel::json::{Object, Value};

/// Whose format a language-server file is in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum LspFormat {
    /// This host's (and the TypeScript CLI's) `.lsp.json`.
    Own,
    /// A Claude Code plugin's `.lsp.json`.
    ClaudePlugin,
    /// Copilot CLI's `lsp-config.json` / `.github/lsp.json`: `{"lspServers": {…}}`.
    Copilot,
}

/// The fields a Claude Code plugin's entry may have (its schema is strict).
const CLAUDE_FIELDS: [&str; 13] = [
    "command",
    "args",
    "extensionToLanguage",
    "transport",
    "env",
    "initializationOptions",
    "settings",
    "workspaceFolder",
    "startupTimeout",
    "shutdownTimeout",
    "restartOnCrash",
    "maxRestarts",
    "diagnostics",
];

/// Claude Code's restart bound when `maxRestarts` is absent.
const CLAUDE_MAX_RESTARTS: f64 = 3.0;

/// `top` (a file in `format`) as this host's `.lsp.json` object; an entry the client would
/// refuse is left out with a message in `errors`, naming it and the field.
///
/// # Errors
/// The file as a whole is not in that format (the last good content stays).
pub(super) fn to_own(
    format: LspFormat,
    top: &Object,
    errors: &mut Vec<String>,
) -> Result<Object, String> {
    let mut out = Object::new();
    match format {
        LspFormat::Own => return Ok(top.clone()),
        LspFormat::ClaudePlugin => {
            for (name, entry) in top {
                let Value::Object(entry) = entry else {
                    out.insert(name.clone(), entry.clone());
                    continue;
                };
                match claude_entry(entry) {
                    Ok(entry) => {
                        out.insert(name.clone(), Value::Object(entry));
                    }
                    Err(why) => errors.push(format!(
                        "language server \"{name}\": {why} (as Claude Code reads a plugin's \
                         .lsp.json) — it is not started until that is fixed"
                    )),
                }
            }
        }
        LspFormat::Copilot => {
            let servers = match top.get("lspServers") {
                Some(Value::Object(servers)) => servers,
                None => return Ok(Object::new()),
                Some(other) => {
                    return Err(format!(
                        "lspServers must be an object of server entries, found {}",
                        other.preview(40)
                    ))
                }
            };
            for (name, entry) in servers {
                let Value::Object(entry) = entry else {
                    out.insert(name.clone(), entry.clone());
                    continue;
                };
                let mut own = entry.clone();
                match own.remove("fileExtensions") {
                    Some(map @ Value::Object(_)) => {
                        own.insert("extensionToLanguage".into(), map);
                    }
                    _ => {
                        errors.push(format!(
                            "language server \"{name}\": \"fileExtensions\" (an object such as \
                             {{\".rs\": \"rust\"}}) is required by Copilot CLI — it is not \
                             started until that is fixed"
                        ));
                        continue;
                    }
                }
                if let Some(root) = own.remove("rootUri") {
                    own.insert("workspaceFolder".into(), root);
                }
                out.insert(name.clone(), Value::Object(own));
            }
        }
    }
    Ok(out)
}

fn claude_entry(entry: &Object) -> Result<Object, String> {
    if let Some(unknown) = entry.keys().find(|k| !CLAUDE_FIELDS.contains(&k.as_str())) {
        return Err(format!("unknown field \"{unknown}\""));
    }
    for unsupported in ["restartOnCrash", "shutdownTimeout"] {
        if entry.contains_key(unsupported) {
            return Err(format!(
                "\"{unsupported}\" is not implemented by Claude Code yet (it refuses the entry) — \
                 remove it"
            ));
        }
    }
    match entry.get("extensionToLanguage") {
        Some(Value::Object(map)) if !map.is_empty() && map.keys().all(|k| k.starts_with('.')) => {}
        _ => {
            return Err(
                "\"extensionToLanguage\" is required: at least one \".ext\": \"languageId\"".into(),
            )
        }
    }
    let mut own = entry.clone();
    if !own.contains_key("maxRestarts") {
        own.insert("maxRestarts".into(), Value::Number(CLAUDE_MAX_RESTARTS));
    }
    Ok(own)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inputs::object;

    /// The object as JSON text.
    fn text(object: Object) -> String {
        Value::Object(object).to_json()
    }

    #[test]
    fn a_file_valid_in_two_formats_means_what_its_layout_says() {
        // Valid for this host (extensionToLanguage defaults to {}), refused by Claude Code.
        let text = r#"{"py":{"command":"pylsp"},"ts":{"command":"tsserver","extensionToLanguage":{".ts":"typescript"}}}"#;
        let mut errors = Vec::new();
        let own = to_own(LspFormat::Own, &object(text), &mut errors).expect("own");
        assert_eq!(super::tests::text(own), text);
        let claude = to_own(LspFormat::ClaudePlugin, &object(text), &mut errors).expect("claude");
        assert_eq!(
            super::tests::text(claude),
            r#"{"ts":{"command":"tsserver","extensionToLanguage":{".ts":"typescript"},"maxRestarts":3}}"#
        );
        assert_eq!(errors.len(), 1);
        assert!(errors[0].contains("\"py\"") && errors[0].contains("extensionToLanguage"));
    }

    #[test]
    fn claude_refuses_what_its_strict_schema_refuses() {
        let mut errors = Vec::new();
        let text = r#"{"a":{"command":"a","extensionToLanguage":{".a":"a"},"restartOnCrash":true},
                       "b":{"command":"b","extensionToLanguage":{".b":"b"},"bogus":1}}"#;
        let out = to_own(LspFormat::ClaudePlugin, &object(text), &mut errors).expect("claude");
        assert_eq!(super::tests::text(out), "{}");
        assert!(errors[0].contains("restartOnCrash") && errors[1].contains("bogus"));
    }

    #[test]
    fn copilot_lsp_servers_map_onto_this_hosts_fields() {
        let mut errors = Vec::new();
        let text = r#"{"lspServers":{"rust":{"command":"rust-analyzer","fileExtensions":{".rs":"rust"},"rootUri":"crates/x"},"bad":{"command":"x"}}}"#;
        let out = to_own(LspFormat::Copilot, &object(text), &mut errors).expect("copilot");
        assert_eq!(
            super::tests::text(out),
            r#"{"rust":{"command":"rust-analyzer","extensionToLanguage":{".rs":"rust"},"workspaceFolder":"crates/x"}}"#
        );
        assert!(errors[0].contains("\"bad\"") && errors[0].contains("fileExtensions"));
        assert!(to_own(
            LspFormat::Copilot,
            &object(r#"{"lspServers":[]}"#),
            &mut errors
        )
        .is_err());
    }
}
