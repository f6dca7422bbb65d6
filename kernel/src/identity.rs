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
#[derive(
    Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(transparent)]
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
    Ok(connection_id_of(name, &fingerprint_json(config)?))
}

/// The connection id of `name` whose [`fingerprint_json`] is `fingerprint`
/// (for a caller that already has the text).
pub fn connection_id_of(name: &str, fingerprint: &str) -> ConnectionId {
    let digest = sha256_hex(fingerprint.as_bytes());
    ConnectionId(format!("{name}::{}", &digest[..16]))
}

/// The canonical fingerprint object of SPEC §2.1, as JSON text.
///
/// # Errors
/// As [`connection_id`].
pub fn fingerprint_json(config: &ServerConfig) -> Result<String, IdentityError> {
    Ok(Canonical::fingerprint(config)?.text)
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
    Ok(Canonical::session_view(config)?.text)
}

/// `Ok` exactly when [`fingerprint_json`] of `config` is, with the same
/// error, without printing anything: only `oauth.scopes` / `oauth.audiences`
/// can make it fail.
///
/// # Errors
/// As [`fingerprint_json`].
pub fn check_fingerprint(config: &ServerConfig) -> Result<(), IdentityError> {
    let Some(Value::Object(oauth)) = config.get("oauth") else {
        return Ok(());
    };
    if !oauth.get("enabled").is_some_and(Value::truthy) {
        return Ok(());
    }
    for (key, field) in [("scopes", "oauth.scopes"), ("audiences", "oauth.audiences")] {
        if let Some(value) = oauth.get(key).filter(|v| v.truthy()) {
            iterable(value, field)?;
        }
    }
    Ok(())
}

/// `Ok` exactly when [`session_view_json`] of `config` is, with the same
/// error, without printing anything.
///
/// # Errors
/// As [`session_view_json`].
pub fn check_session_view(config: &ServerConfig) -> Result<(), IdentityError> {
    for field in ["includeTools", "excludeTools"] {
        match config.get(field) {
            None | Some(Value::Null) => {}
            Some(value) => iterable(value, field)?,
        }
    }
    Ok(())
}

/// A canonical identity text (the fingerprint or the session view) and
/// where each top-level member's value sits in it, so two of them can say
/// which members differ without being parsed again.
#[derive(Clone, Debug)]
pub struct Canonical {
    /// The JSON text.
    pub text: String,
    /// Member name → byte range of its value in `text`, in text order.
    spans: Vec<(&'static str, std::ops::Range<usize>)>,
}

impl Canonical {
    /// The fingerprint of SPEC §2.1 ([`fingerprint_json`]).
    ///
    /// # Errors
    /// As [`fingerprint_json`].
    pub fn fingerprint(config: &ServerConfig) -> Result<Self, IdentityError> {
        let mut out = Canonical::with_capacity(256);
        out.member("transport", |o| {
            write_json_string(o, config.transport().as_str());
        });
        out.member("command", |o| write_or_null(o, config.get("command")));
        out.member("args", |o| match config.get("args") {
            None | Some(Value::Null) => o.push_str("[]"),
            Some(v) => write_json(o, v),
        });
        out.member("cwd", |o| write_or_null(o, config.get("cwd")));
        out.member("env", |o| write_sorted_entries(o, config.get("env")));
        for key in ["url", "httpUrl", "tcp"] {
            out.member(key, |o| write_or_null(o, config.get(key)));
        }
        out.member("headers", |o| {
            write_sorted_entries(o, config.get("headers"))
        });
        out.member("timeout", |o| write_or_null(o, config.get("timeout")));
        let oauth = canonical_oauth(config.get("oauth"))?;
        out.member("oauth", |o| write_json(o, &oauth));
        for key in ["authProviderType", "targetAudience", "targetServiceAccount"] {
            out.member(key, |o| write_or_null(o, config.get(key)));
        }
        Ok(out.finish())
    }

    /// The session view of SPEC §2.2 ([`session_view_json`]).
    ///
    /// # Errors
    /// As [`session_view_json`].
    pub fn session_view(config: &ServerConfig) -> Result<Self, IdentityError> {
        let include = sorted_spread(config.get("includeTools"), "includeTools")?;
        let exclude = sorted_spread(config.get("excludeTools"), "excludeTools")?;
        let mut out = Canonical::with_capacity(64);
        out.member("trust", |o| write_or_null(o, config.get("trust")));
        out.member("includeTools", |o| write_json(o, &include));
        out.member("excludeTools", |o| write_json(o, &exclude));
        Ok(out.finish())
    }

    /// The members whose values print differently in `self` and `other`
    /// (two texts of the same kind), in text order.
    pub fn differing(&self, other: &Self) -> Vec<&'static str> {
        self.spans
            .iter()
            .zip(&other.spans)
            .filter(|((_, a), (_, b))| self.text.get(a.clone()) != other.text.get(b.clone()))
            .map(|((name, _), _)| *name)
            .collect()
    }

    fn with_capacity(capacity: usize) -> Self {
        Canonical {
            text: String::with_capacity(capacity),
            spans: Vec::with_capacity(14),
        }
    }

    fn member(&mut self, name: &'static str, write: impl FnOnce(&mut String)) {
        self.text.push(if self.text.is_empty() { '{' } else { ',' });
        write_json_string(&mut self.text, name);
        self.text.push(':');
        let start = self.text.len();
        write(&mut self.text);
        self.spans.push((name, start..self.text.len()));
    }

    fn finish(mut self) -> Self {
        self.text.push('}');
        self
    }
}

impl PartialEq for Canonical {
    fn eq(&self, other: &Self) -> bool {
        self.text == other.text
    }
}

impl Eq for Canonical {}

/// `value ?? null` as JSON.
fn write_or_null(out: &mut String, value: Option<&Value>) {
    match value {
        None => out.push_str("null"),
        Some(v) => write_json(out, v),
    }
}

/// `[...value]` would not throw: an array or a string.
fn iterable(value: &Value, field: &'static str) -> Result<(), IdentityError> {
    match value {
        Value::Array(_) | Value::String(_) => Ok(()),
        other => Err(IdentityError::NotIterable {
            field,
            found: other.to_json(),
        }),
    }
}

/// Approval hash of `config` (SPEC §2.3).
///
/// Mirrors the TypeScript host, which rebuilds every object by assignment:
/// a key named `__proto__` is swallowed by the prototype setter there, so it
/// never reaches the hashed text here either.
pub fn approval_hash(config: &ServerConfig) -> ApprovalHash {
    let mut text = String::with_capacity(256);
    write_sorted_object(&mut text, config.object(), Proto::Drop, |key| {
        !matches!(key, "scope" | "extensionName" | "description")
    });
    ApprovalHash(sha256_hex(text.as_bytes()))
}

/// `JSON.stringify` text of `value` with every object at any depth re-emitted
/// with its keys sorted by UTF-16 code units: the canonical JSON of the
/// language-server identities (SPEC §14.2).
///
/// A `__proto__` key is an ordinary key here (SPEC §2.4), kept as
/// `JSON.stringify(JSON.parse(text))` keeps it: the entry's `settings` and
/// `initializationOptions` are sent to the server whole, so whatever is sent
/// must be in the approval hash. (The MCP [`approval_hash`] drops it instead,
/// as the TypeScript host it is byte-compatible with does.)
pub fn sorted_json(value: &Value) -> String {
    let mut out = String::with_capacity(128);
    write_sorted(&mut out, value, Proto::Keep);
    out
}

/// What the canonical text does with a key named `__proto__`.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Proto {
    /// Left out, as a JavaScript rebuild by assignment loses it (§2.3).
    Drop,
    /// Kept as any other key, as `JSON.parse` + `JSON.stringify` keep it.
    Keep,
}

/// Writes the sorted text of `value` straight into `out` (no re-built copy).
fn write_sorted(out: &mut String, value: &Value, proto: Proto) {
    match value {
        Value::Object(object) => write_sorted_object(out, object, proto, |_| true),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_sorted(out, item, proto);
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
fn write_sorted_object(
    out: &mut String,
    object: &Object,
    proto: Proto,
    keep: impl Fn(&str) -> bool,
) {
    let mut members: Vec<(&String, &Value)> = object
        .iter()
        .filter(|(key, _)| (proto == Proto::Keep || *key != "__proto__") && keep(key))
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
        write_sorted(out, value, proto);
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
    iterable(value, field)?;
    let mut items = match value {
        Value::Array(items) => items.clone(),
        Value::String(s) => s.chars().map(|c| Value::String(c.to_string())).collect(),
        _ => Vec::new(),
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

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(text: &str) -> ServerConfig {
        ServerConfig::from_json(text).expect("a config object")
    }

    #[test]
    fn differing_members_are_those_whose_parsed_values_differ() {
        // The spans must cover exactly each member's value: the members a
        // pair differs in are those whose values in the parsed texts differ.
        let configs = [
            r#"{"command":"a","args":["1"],"env":{"B":"2","A":"1"}}"#,
            r#"{"command":"a","args":["1"],"env":{"A":"1","B":"2"}}"#,
            r#"{"command":"a","args":["1",{"x":1}],"env":{"A":"1"},"cwd":"/x"}"#,
            r#"{"command":"a","trust":true,"includeTools":["b","a"]}"#,
            r#"{"command":"a","trust":false,"excludeTools":"ab","timeout":-0}"#,
            r#"{"httpUrl":"https://x","headers":{"H":"\"v\""},"timeout":0}"#,
            r#"{"url":"https://x","oauth":{"enabled":true,"scopes":["b","a"]}}"#,
            r#"{"type":"sdk","command":"a"}"#,
        ];
        let parsed = |c: &Canonical| match crate::json::parse(&c.text) {
            Ok(Value::Object(o)) => o,
            other => panic!("not an object: {other:?}"),
        };
        for a in configs {
            for b in configs {
                let (a, b) = (cfg(a), cfg(b));
                let pairs = [
                    (
                        Canonical::fingerprint(&a).expect("id"),
                        Canonical::fingerprint(&b).expect("id"),
                    ),
                    (
                        Canonical::session_view(&a).expect("view"),
                        Canonical::session_view(&b).expect("view"),
                    ),
                ];
                for (x, y) in pairs {
                    let (px, py) = (parsed(&x), parsed(&y));
                    let expected: Vec<&str> = px
                        .iter()
                        .filter(|(k, v)| py.get(k).map(Value::to_json) != Some(v.to_json()))
                        .map(|(k, _)| k.as_str())
                        .collect();
                    assert_eq!(x.differing(&y), expected, "{} vs {}", x.text, y.text);
                    assert_eq!(x == y, expected.is_empty());
                }
            }
        }
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
