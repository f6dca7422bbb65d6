//! A client's transport spellings normalized to this host's keys (SPEC §1, §15): `command`
//! (stdio), `httpUrl` (streamable HTTP), `url` (legacy SSE), before the identity is taken.

use mcp_reconcile_kernel::{Object, ServerConfig, Servers, Value};

/// What a `url` without a `type` means in a client's format.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum BareUrl {
    /// An error (Claude Code: `type` is required for a remote server).
    Error,
    /// Streamable HTTP (Cursor, VS Code, Copilot CLI, Codex).
    Http,
}

/// `entry` with its transport written this host's way; the message says what is wrong.
pub(super) fn transport(mut entry: Object, bare_url: BareUrl) -> Result<Object, String> {
    // Windsurf's spelling.
    if let Some(url) = entry.remove("serverUrl") {
        if !entry.contains_key("url") && !entry.contains_key("httpUrl") {
            entry.insert("httpUrl".into(), url);
        }
    }
    let kind = match entry.get("type") {
        None | Some(Value::Null) => None,
        Some(Value::String(kind)) => Some(kind.clone()),
        Some(other) => {
            return Err(format!(
                "its \"type\" must be a string, found {}",
                other.preview(40)
            ))
        }
    };
    let has_url = matches!(entry.get("url"), Some(Value::String(_)));
    let to_http = |entry: &mut Object| {
        if !entry.contains_key("httpUrl") {
            if let Some(url) = entry.remove("url") {
                entry.insert("httpUrl".into(), url);
            }
        }
    };
    match kind.as_deref() {
        Some("stdio" | "local") => {
            if !matches!(entry.get("command"), Some(Value::String(c)) if !c.is_empty()) {
                return Err("its \"type\" is stdio but it has no \"command\"".into());
            }
            entry.remove("type");
        }
        Some("http" | "streamable-http" | "streamableHttp" | "streamable_http") => {
            if !has_url && !entry.contains_key("httpUrl") {
                return Err(format!(
                    "its \"type\" is {} but it has no \"url\"",
                    kind.unwrap_or_default()
                ));
            }
            to_http(&mut entry);
            entry.remove("type");
        }
        Some("sse") => {
            if !has_url {
                return Err("its \"type\" is sse but it has no \"url\"".into());
            }
            entry.remove("type");
        }
        Some("sdk") => {}
        Some(other) => {
            return Err(format!(
                "its \"type\" {} is not a transport mcp-reconcile can start (stdio, http, sse)",
                Value::from(other).to_json()
            ))
        }
        None if has_url => match bare_url {
            BareUrl::Http => to_http(&mut entry),
            BareUrl::Error => {
                return Err(
                    "it has a \"url\" but no \"type\" — Claude Code requires one: add \
                            \"type\": \"http\" (streamable HTTP) or \"type\": \"sse\""
                        .into(),
                )
            }
        },
        None => {}
    }
    Ok(entry)
}

/// A Gemini CLI entry's transport written this host's way, as Gemini CLI 0.61 picks it
/// (`createUrlTransport`): `httpUrl` is streamable HTTP whatever else is set; `url` with
/// `"type": "sse"` is SSE; `url` with any other `type` is streamable HTTP; a `url` without a
/// `type` is streamable HTTP that falls back to SSE when the HTTP handshake fails
/// ([`SSE_FALLBACK`](crate::transport::SSE_FALLBACK)). Never an error: Gemini starts each of
/// these.
pub(in crate::inputs) fn gemini_transport(mut entry: Object) -> Object {
    if matches!(entry.get("httpUrl"), Some(Value::String(_))) {
        return entry;
    }
    if !matches!(entry.get("url"), Some(Value::String(_))) {
        return entry;
    }
    match entry.get("type") {
        Some(Value::String(kind)) if kind == "sse" => {
            entry.remove("type");
        }
        None | Some(Value::Null) => {
            if let Some(url) = entry.remove("url") {
                entry.insert("httpUrl".into(), url);
            }
            entry.insert(crate::transport::SSE_FALLBACK.into(), Value::Bool(true));
        }
        Some(_) => {
            entry.remove("type");
            if let Some(url) = entry.remove("url") {
                entry.insert("httpUrl".into(), url);
            }
        }
    }
    entry
}

/// Reads a map of entries: each object entry through `entry` (which expands and normalizes
/// it), as used and as written; every other entry, and every entry `entry` refuses, becomes
/// an error naming the server and `where_`, and is left out.
pub(super) fn entries(
    map: &Object,
    where_: &str,
    errors: &mut Vec<String>,
    mut entry: impl FnMut(&Object) -> Result<(Object, Object), String>,
) -> (Servers, Servers) {
    let mut used = Servers::new();
    let mut written = Servers::new();
    for (name, value) in map {
        let Value::Object(object) = value else {
            errors.push(format!(
                "server \"{name}\" in {where_} must be an object, found {} — skipped; fix or \
                 remove that entry",
                value.preview(60)
            ));
            continue;
        };
        match entry(object) {
            Ok((as_used, as_written)) => {
                used.insert(name.clone(), ServerConfig::new(as_used));
                written.insert(name.clone(), ServerConfig::new(as_written));
            }
            Err(why) => errors.push(format!(
                "server \"{name}\" in {where_}: {why} — it is not started until that is fixed"
            )),
        }
    }
    (used, written)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::inputs::object;

    fn normalized(text: &str, bare: BareUrl) -> Result<String, String> {
        transport(object(text), bare).map(|o| Value::Object(o).to_json())
    }

    #[test]
    fn every_spelling_of_streamable_http_becomes_http_url() {
        for kind in ["http", "streamable-http", "streamableHttp"] {
            assert_eq!(
                normalized(
                    &format!(r#"{{"type":"{kind}","url":"https://x/mcp"}}"#),
                    BareUrl::Error
                ),
                Ok(r#"{"httpUrl":"https://x/mcp"}"#.to_owned())
            );
        }
        assert_eq!(
            normalized(r#"{"serverUrl":"https://x/mcp"}"#, BareUrl::Http),
            Ok(r#"{"httpUrl":"https://x/mcp"}"#.to_owned())
        );
        assert_eq!(
            normalized(r#"{"url":"https://x/mcp"}"#, BareUrl::Http),
            Ok(r#"{"httpUrl":"https://x/mcp"}"#.to_owned())
        );
    }

    #[test]
    fn sse_and_stdio_keep_their_fields_and_lose_the_type() {
        assert_eq!(
            normalized(r#"{"type":"sse","url":"https://x/sse"}"#, BareUrl::Error),
            Ok(r#"{"url":"https://x/sse"}"#.to_owned())
        );
        assert_eq!(
            normalized(
                r#"{"type":"local","command":"npx","args":["a"]}"#,
                BareUrl::Http
            ),
            Ok(r#"{"command":"npx","args":["a"]}"#.to_owned())
        );
    }

    #[test]
    fn what_cannot_be_started_says_why() {
        assert!(normalized(r#"{"url":"https://x"}"#, BareUrl::Error)
            .expect_err("an error")
            .contains("\"type\": \"http\""));
        assert!(normalized(r#"{"type":"ws","url":"ws://x"}"#, BareUrl::Http)
            .expect_err("an error")
            .contains("\"ws\""));
        assert!(normalized(r#"{"type":"stdio"}"#, BareUrl::Http)
            .expect_err("an error")
            .contains("command"));
        assert!(normalized(r#"{"type":"http"}"#, BareUrl::Http).is_err());
    }
    #[test]
    fn gemini_picks_the_transport_as_gemini_cli_does() {
        let gemini = |text: &str| Value::Object(gemini_transport(object(text))).to_json();
        assert_eq!(
            gemini(r#"{"url":"https://x/mcp","type":"http"}"#),
            r#"{"httpUrl":"https://x/mcp"}"#
        );
        assert_eq!(
            gemini(r#"{"url":"https://x/sse","type":"sse"}"#),
            r#"{"url":"https://x/sse"}"#
        );
        assert_eq!(
            gemini(r#"{"url":"https://x/mcp"}"#),
            r#"{"httpUrl":"https://x/mcp","sseFallback":true}"#
        );
        // `httpUrl` wins over everything, as in Gemini CLI.
        assert_eq!(
            gemini(r#"{"httpUrl":"https://h","url":"https://u","type":"sse"}"#),
            r#"{"httpUrl":"https://h","url":"https://u","type":"sse"}"#
        );
        assert_eq!(
            gemini(r#"{"command":"x","type":"stdio"}"#),
            r#"{"command":"x","type":"stdio"}"#
        );
    }
}
