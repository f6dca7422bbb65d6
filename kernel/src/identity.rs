//! Connection identities (SPEC §2), byte-compatible with the TypeScript host.
//!
//! * [`connection_id`]: `"<name>::" + sha256(fingerprint JSON)[..16]` — what a
//!   shared pool keys connections by;
//! * [`session_key`]: connection id plus the session-view fields (`trust`,
//!   tool filters) — what a single session reconnects on;
//! * [`approval_hash`]: sha256 of the whole behavioural config — what an
//!   approval is bound to.

use std::cmp::Ordering;
use std::fmt;

use sha2::{Digest, Sha256};

use crate::config::ServerConfig;
use std::fmt::Write as _;

use crate::json::{array_index, cmp_utf16, js_sort, write_json, write_json_string, Object, Value};

/// Errors computing an identity: the TypeScript host throws on these inputs
/// (spreading a value that is not iterable), so there is no identity to match.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum IdentityError {
    /// A list field holds something that is neither an array nor a string.
    #[error("field `{field}` must be an array of strings, found {found}")]
    NotIterable {
        /// Dotted field name, e.g. `oauth.scopes`.
        field: &'static str,
        /// The JSON text found there.
        found: String,
    },
}

/// `<name>::<16 hex>`; the name may itself contain `::`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct ConnectionId(pub String);

impl ConnectionId {
    /// Splits at the **last** `::` into (server name, fingerprint).
    pub fn parse(id: &str) -> Option<(&str, &str)> {
        let at = id.rfind("::")?;
        Some((&id[..at], &id[at + 2..]))
    }

    /// The server name part.
    pub fn server_name(&self) -> &str {
        Self::parse(&self.0).map_or("", |(name, _)| name)
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ConnectionId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Connection id plus the JSON of the session-view fields.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct SessionKey(pub String);

impl fmt::Display for SessionKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// 64 lowercase hex characters of sha256.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct ApprovalHash(pub String);

impl fmt::Display for ApprovalHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Connection id of `name` with `config` (SPEC §2.1).
///
/// # Errors
/// [`IdentityError::NotIterable`] when `oauth.scopes` / `oauth.audiences` is
/// truthy but neither an array nor a string.
pub fn connection_id(name: &str, config: &ServerConfig) -> Result<ConnectionId, IdentityError> {
    let json = fingerprint_json(config)?;
    let digest = sha256_hex(json.as_bytes());
    Ok(ConnectionId(format!("{name}::{}", &digest[..16])))
}

/// The canonical fingerprint object of SPEC §2.1, as JSON text.
///
/// # Errors
/// As [`connection_id`].
pub fn fingerprint_json(config: &ServerConfig) -> Result<String, IdentityError> {
    let mut out = String::with_capacity(256);
    let field = |out: &mut String, key: &str, value: &Value| {
        out.push(if out.is_empty() { '{' } else { ',' });
        write_json_string(out, key);
        out.push(':');
        write_json(out, value);
    };
    field(&mut out, "transport", &config.transport().as_str().into());
    field(&mut out, "command", &config.get_or_null("command"));
    let args = config
        .get_or_null("args")
        .or_else(|| Value::Array(Vec::new()));
    field(&mut out, "args", &args);
    field(&mut out, "cwd", &config.get_or_null("cwd"));
    out.push_str(",\"env\":");
    write_sorted_entries(&mut out, config.get("env"));
    for key in ["url", "httpUrl", "tcp"] {
        field(&mut out, key, &config.get_or_null(key));
    }
    out.push_str(",\"headers\":");
    write_sorted_entries(&mut out, config.get("headers"));
    field(&mut out, "timeout", &config.get_or_null("timeout"));
    field(&mut out, "oauth", &canonical_oauth(config.get("oauth"))?);
    for key in ["authProviderType", "targetAudience", "targetServiceAccount"] {
        field(&mut out, key, &config.get_or_null(key));
    }
    out.push('}');
    Ok(out)
}

/// Session key of `name` with `config` (SPEC §2.2).
///
/// # Errors
/// As [`connection_id`], and when `includeTools` / `excludeTools` is set but
/// neither an array nor a string.
pub fn session_key(name: &str, config: &ServerConfig) -> Result<SessionKey, IdentityError> {
    let id = connection_id(name, config)?;
    Ok(SessionKey(format!("{id}|{}", session_view_json(config)?)))
}

/// `{trust, includeTools, excludeTools}` as the session key prints it.
///
/// # Errors
/// As [`session_key`].
pub fn session_view_json(config: &ServerConfig) -> Result<String, IdentityError> {
    let mut view = Object::new();
    view.insert("trust".into(), config.get_or_null("trust"));
    view.insert(
        "includeTools".into(),
        sorted_spread(config.get("includeTools"), "includeTools")?,
    );
    view.insert(
        "excludeTools".into(),
        sorted_spread(config.get("excludeTools"), "excludeTools")?,
    );
    Ok(Value::Object(view).to_json())
}

/// Approval hash of `config` (SPEC §2.3).
///
/// Mirrors the TypeScript host, which rebuilds every object by assignment:
/// a key named `__proto__` is swallowed by the prototype setter there, so it
/// never reaches the hashed text here either.
pub fn approval_hash(config: &ServerConfig) -> ApprovalHash {
    let mut text = String::with_capacity(256);
    write_sorted_object(&mut text, &config.0, |key| {
        !matches!(key, "scope" | "extensionName" | "description")
    });
    ApprovalHash(sha256_hex(text.as_bytes()))
}

/// `JSON.stringify` text of `value` with every object at any depth re-emitted
/// with its keys sorted by UTF-16 code units (the canonical form of §2.3, also
/// used by the language-server identities of §14.2). A `__proto__` key is
/// dropped, as the TypeScript host's rebuild by assignment drops it.
pub fn sorted_json(value: &Value) -> String {
    let mut out = String::with_capacity(128);
    write_sorted(&mut out, value);
    out
}

/// Writes [`sorted_json`] of `value` straight into `out` (no re-built copy).
fn write_sorted(out: &mut String, value: &Value) {
    match value {
        Value::Object(object) => write_sorted_object(out, object, |_| true),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_sorted(out, item);
            }
            out.push(']');
        }
        other => write_json(out, other),
    }
}

/// Writes the members of `object` that `keep` accepts, sorted, as a JSON
/// object. The TypeScript host assigns the sorted keys to a fresh object, so
/// they come out in ECMAScript property order: integer-like keys first in
/// numeric order, then the rest in UTF-16 code unit order.
fn write_sorted_object(out: &mut String, object: &Object, keep: impl Fn(&str) -> bool) {
    let mut members: Vec<(&String, &Value)> = object
        .iter()
        .filter(|(key, _)| *key != "__proto__" && keep(key))
        .collect();
    members.sort_by(|(a, _), (b, _)| match (array_index(a), array_index(b)) {
        (Some(x), Some(y)) => x.cmp(&y),
        (Some(_), None) => Ordering::Less,
        (None, Some(_)) => Ordering::Greater,
        (None, None) => cmp_utf16(a, b),
    });
    out.push('{');
    for (i, (key, value)) in members.into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        write_json_string(out, key);
        out.push(':');
        write_sorted(out, value);
    }
    out.push('}');
}

/// Lowercase hex sha256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let digest = Sha256::digest(bytes);
    let mut out = String::with_capacity(64);
    for b in digest {
        out.push(HEX[usize::from(b >> 4)] as char);
        out.push(HEX[usize::from(b & 15)] as char);
    }
    out
}

/// Writes `sortedEntries(obj)`: `[]` for a falsy value, else
/// `Object.entries(obj)` sorted by key, as JSON.
///
/// The entries of a string are its UTF-16 code units, so a character outside
/// the BMP becomes two lone surrogates, which `JSON.stringify` escapes.
fn write_sorted_entries(out: &mut String, value: Option<&Value>) {
    enum Item<'a> {
        Value(&'a Value),
        Unit(u16),
    }
    let mut entries: Vec<(String, Item<'_>)> = match value {
        Some(Value::Object(o)) => o.iter().map(|(k, v)| (k.clone(), Item::Value(v))).collect(),
        Some(Value::Array(items)) => items
            .iter()
            .enumerate()
            .map(|(i, v)| (i.to_string(), Item::Value(v)))
            .collect(),
        Some(Value::String(s)) => s
            .encode_utf16()
            .enumerate()
            .map(|(i, unit)| (i.to_string(), Item::Unit(unit)))
            .collect(),
        // Falsy values and primitives without own enumerable properties.
        _ => Vec::new(),
    };
    entries.sort_by(|a, b| cmp_utf16(&a.0, &b.0));
    out.push('[');
    for (i, (key, item)) in entries.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push('[');
        write_json_string(out, key);
        out.push(',');
        match item {
            Item::Value(v) => write_json(out, v),
            Item::Unit(unit) => match char::from_u32(u32::from(*unit)) {
                Some(c) => write_json_string(out, c.encode_utf8(&mut [0; 4])),
                None => {
                    let _ = write!(out, "\"\\u{unit:04x}\"");
                }
            },
        }
        out.push(']');
    }
    out.push(']');
}

/// `[...(value ?? [])].sort()`.
fn sorted_spread(value: Option<&Value>, field: &'static str) -> Result<Value, IdentityError> {
    match value {
        None | Some(Value::Null) => Ok(Value::Array(Vec::new())),
        Some(v) => spread_sorted(v, field),
    }
}

/// `[...value].sort()` for a value known to be present.
fn spread_sorted(value: &Value, field: &'static str) -> Result<Value, IdentityError> {
    let mut items = match value {
        Value::Array(items) => items.clone(),
        Value::String(s) => s.chars().map(|c| Value::String(c.to_string())).collect(),
        other => {
            return Err(IdentityError::NotIterable {
                field,
                found: other.to_json(),
            })
        }
    };
    js_sort(&mut items);
    Ok(Value::Array(items))
}

/// `canonicalOAuth(o)` of SPEC §2.1.
fn canonical_oauth(value: Option<&Value>) -> Result<Value, IdentityError> {
    let Some(Value::Object(o)) = value else {
        return Ok(Value::Null);
    };
    if !o.get("enabled").is_some_and(Value::truthy) {
        return Ok(Value::Null);
    }
    let field = |key: &str| match o.get(key) {
        None | Some(Value::Null) => Value::Null,
        Some(v) => v.clone(),
    };
    let list = |key: &str, name: &'static str| match o.get(key) {
        Some(v) if v.truthy() => spread_sorted(v, name),
        _ => Ok(Value::Null),
    };
    let mut canonical = Object::new();
    canonical.insert("enabled".into(), Value::Bool(true));
    canonical.insert("clientId".into(), field("clientId"));
    canonical.insert("clientSecret".into(), field("clientSecret"));
    canonical.insert("scopes".into(), list("scopes", "oauth.scopes")?);
    canonical.insert("audiences".into(), list("audiences", "oauth.audiences")?);
    for key in [
        "authorizationUrl",
        "tokenUrl",
        "redirectUri",
        "tokenParamName",
        "registrationUrl",
    ] {
        canonical.insert(key.into(), field(key));
    }
    Ok(Value::Object(canonical))
}

trait OrElseNull {
    fn or_else(self, f: impl FnOnce() -> Value) -> Value;
}

impl OrElseNull for Value {
    /// `value ?? fallback` where `value` came from [`ServerConfig::get_or_null`].
    fn or_else(self, f: impl FnOnce() -> Value) -> Value {
        if self.is_null() {
            f()
        } else {
            self
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(text: &str) -> ServerConfig {
        ServerConfig::from_json(text).expect("a config object")
    }

    #[test]
    fn connection_id_matches_typescript() {
        let id = connection_id(
            "foo",
            &cfg(r#"{"command":"node","args":["./srv.js"],"env":{"FOO":"bar"}}"#),
        );
        assert_eq!(id.expect("id").0, "foo::a95a8356f798a092");
        let id = connection_id("a::b", &cfg(r#"{"command":"node"}"#)).expect("id");
        assert_eq!(
            ConnectionId::parse(&id.0),
            Some(("a::b", "6e0eff748b45f494"))
        );
    }

    #[test]
    fn absent_null_and_empty_lists_give_one_id() {
        let base = connection_id("foo", &cfg(r#"{"command":"node"}"#)).expect("id");
        for text in [
            r#"{"command":"node","args":[]}"#,
            r#"{"command":"node","args":null}"#,
            r#"{"command":"node","env":{}}"#,
            r#"{"command":"node","env":null}"#,
            r#"{"command":"node","env":""}"#,
            r#"{"command":"node","trust":true,"description":"x","scope":"project"}"#,
        ] {
            assert_eq!(
                connection_id("foo", &cfg(text)).expect("id"),
                base,
                "{text}"
            );
        }
    }

    #[test]
    fn session_key_sorts_tool_filters_and_keeps_false_trust() {
        let key = session_key(
            "s",
            &cfg(r#"{"command":"node","args":["srv.js"],"trust":false,"includeTools":["b","a"]}"#),
        );
        assert_eq!(
            key.expect("key").0,
            "s::d496ec48142dd998|{\"trust\":false,\"includeTools\":[\"a\",\"b\"],\"excludeTools\":[]}"
        );
        assert!(session_key("s", &cfg(r#"{"command":"node","includeTools":5}"#)).is_err());
    }

    #[test]
    fn string_entries_split_surrogate_pairs_like_object_entries() {
        // Object.entries("😀") yields two lone surrogates, which JSON.stringify
        // escapes; checked against node.
        let json = fingerprint_json(&cfg(r#"{"command":"\\","headers":"😀"}"#)).expect("json");
        assert!(
            json.contains(r#""headers":[["0","\ud83d"],["1","\ude00"]]"#),
            "{json}"
        );
        let id = connection_id(
            "a*",
            &cfg(r#"{"é":true,"command":"\\","headers":"😀","discoveryTimeoutMs":"B"}"#),
        );
        assert_eq!(id.expect("id").0, "a*::69f90b03cb2f99ec");
    }

    #[test]
    fn approval_hash_drops_proto_keys_like_the_typescript_host() {
        // The TypeScript host rebuilds objects by assignment, and assigning
        // `__proto__` sets the prototype instead of a member.
        let with = approval_hash(&cfg(
            r#"{"command":"node","__proto__":{"a":1},"env":{"__proto__":"x"}}"#,
        ));
        let without = approval_hash(&cfg(r#"{"command":"node","env":{}}"#));
        assert_eq!(with, without);
    }

    #[test]
    fn approval_hash_ignores_provenance_and_key_order() {
        let a = approval_hash(&cfg(
            r#"{"command":"npx","args":["-y","slack-mcp"],"env":{"B":"2","A":"1"},"scope":"project"}"#,
        ));
        assert_eq!(
            a.0,
            "81894bf51311c79513f0cc46b557b2179036c5f3ddc3a9ba6f76c7ea2516d924"
        );
        let b = approval_hash(&cfg(
            r#"{"env":{"A":"1","B":"2"},"args":["-y","slack-mcp"],"command":"npx","description":"d"}"#,
        ));
        assert_eq!(a, b);
    }
}
