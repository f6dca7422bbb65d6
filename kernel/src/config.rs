//! Server configuration entries (SPEC §1) and their transport kind.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::json::{Object, Value};

/// One server's settings entry, exactly as written (unknown keys included:
/// they round-trip and feed the approval hash).
///
/// Fields are read with ECMAScript semantics (`cfg.field ?? default`), so an
/// entry with odd types still gets the identity a TypeScript host computes.
///
/// The entry is shared: cloning a config (assembly hands every layer's entry
/// on, the host keeps the adopted map next to the live one) copies a pointer,
/// and [`ServerConfig::object_mut`] copies the entry only when it is shared.
#[derive(Clone, Debug, Default)]
pub struct ServerConfig(Arc<Object>);

impl PartialEq for ServerConfig {
    fn eq(&self, other: &Self) -> bool {
        // JSON text has no NaN, so an entry always equals itself.
        self.same(other) || *self.0 == *other.0
    }
}

/// How a server is reached, derived from its fields (SPEC §1).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "ts", derive(ts_rs::TS), ts(rename_all = "lowercase"))]
pub enum Transport {
    /// Child process speaking MCP on stdin/stdout (`command`).
    Stdio,
    /// Streamable HTTP (`httpUrl`).
    Http,
    /// Legacy server-sent events (`url`).
    Sse,
    /// WebSocket (`tcp`).
    Websocket,
    /// In-process server (`type: "sdk"`).
    Sdk,
    /// No usable transport field.
    Unknown,
}

impl Transport {
    /// The spelling used in JSON and in connection-id fingerprints.
    pub fn as_str(self) -> &'static str {
        match self {
            Transport::Stdio => "stdio",
            Transport::Http => "http",
            Transport::Sse => "sse",
            Transport::Websocket => "websocket",
            Transport::Sdk => "sdk",
            Transport::Unknown => "unknown",
        }
    }
}

/// Top-level keys that assembly owns: a `scope` written in a file is dropped.
pub const SCOPE: &str = "scope";

impl ServerConfig {
    /// Wraps a parsed entry.
    pub fn new(object: Object) -> Self {
        ServerConfig(Arc::new(object))
    }

    /// The entry's members.
    pub fn object(&self) -> &Object {
        &self.0
    }

    /// The entry's members, to change them (copied first when shared).
    pub fn object_mut(&mut self) -> &mut Object {
        Arc::make_mut(&mut self.0)
    }

    /// The entry's members, owned (copied only when shared).
    pub fn into_object(self) -> Object {
        Arc::unwrap_or_clone(self.0)
    }

    /// Whether both are the very same entry (a clone of one another), which
    /// implies equal members without comparing them.
    pub fn same(&self, other: &Self) -> bool {
        Arc::ptr_eq(&self.0, &other.0)
    }

    /// Reads one entry from JSON text, with JS semantics.
    ///
    /// # Errors
    /// [`ConfigError::Syntax`] when the text is not JSON,
    /// [`ConfigError::EntryNotObject`] when it is not an object.
    pub fn from_json(text: &str) -> Result<Self, ConfigError> {
        match crate::json::parse(text) {
            Ok(Value::Object(o)) => Ok(ServerConfig::new(o)),
            Ok(other) => Err(ConfigError::EntryNotObject {
                name: String::new(),
                found: other.preview(60),
            }),
            Err(e) => Err(ConfigError::Syntax(e.to_string())),
        }
    }

    /// `cfg[key]` (absent is `None`; `null` is `Some(Null)`).
    pub fn get(&self, key: &str) -> Option<&Value> {
        self.0.get(key)
    }

    /// `cfg[key] ?? null`.
    pub fn get_or_null(&self, key: &str) -> Value {
        match self.0.get(key) {
            None | Some(Value::Null) => Value::Null,
            Some(v) => v.clone(),
        }
    }

    /// `cfg[key]` when it is a string.
    pub fn str_field(&self, key: &str) -> Option<&str> {
        self.0.get(key).and_then(Value::as_str)
    }

    /// The transport kind, first match wins: `type == "sdk"`, string
    /// `httpUrl`, string `url`, string `tcp`, string `command`.
    pub fn transport(&self) -> Transport {
        if self.str_field("type") == Some("sdk") {
            Transport::Sdk
        } else if self.str_field("httpUrl").is_some() {
            Transport::Http
        } else if self.str_field("url").is_some() {
            Transport::Sse
        } else if self.str_field("tcp").is_some() {
            Transport::Websocket
        } else if self.str_field("command").is_some() {
            Transport::Stdio
        } else {
            Transport::Unknown
        }
    }

    /// The provenance stamp set by assembly (`project`, `workspace`, `system`).
    pub fn scope(&self) -> Option<&str> {
        self.str_field(SCOPE)
    }

    /// Whether the entry comes from a gated (approval-requiring) scope.
    pub fn is_gated(&self) -> bool {
        matches!(self.scope(), Some("project" | "workspace"))
    }

    /// The handshake cap in milliseconds: `discoveryTimeoutMs` clamped to
    /// [100, 300 000] when finite, else 30 000 for stdio and 5 000 for remote.
    pub fn discovery_timeout_ms(&self) -> u64 {
        match self.get("discoveryTimeoutMs").and_then(Value::as_f64) {
            Some(ms) if ms.is_finite() => ms.clamp(100.0, 300_000.0) as u64,
            _ if self.transport() == Transport::Stdio => 30_000,
            _ => 5_000,
        }
    }

    /// The entry as a JSON value.
    pub fn to_value(&self) -> Value {
        Value::Object((*self.0).clone())
    }
}

/// An entry crosses a process boundary (the daemon's events) as its JSON text, read back with
/// JS semantics.
impl serde::Serialize for ServerConfig {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.to_value().to_json())
    }
}

impl<'de> serde::Deserialize<'de> for ServerConfig {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        ServerConfig::from_json(&text).map_err(serde::de::Error::custom)
    }
}

impl From<Object> for ServerConfig {
    fn from(object: Object) -> Self {
        ServerConfig::new(object)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(text: &str) -> ServerConfig {
        ServerConfig::from_json(text).expect("a config object")
    }

    #[test]
    fn transport_precedence_follows_the_spec() {
        assert_eq!(
            cfg(r#"{"type":"sdk","command":"x"}"#).transport(),
            Transport::Sdk
        );
        assert_eq!(
            cfg(r#"{"httpUrl":"","url":"u"}"#).transport(),
            Transport::Http
        );
        assert_eq!(
            cfg(r#"{"url":"u","command":"x"}"#).transport(),
            Transport::Sse
        );
        assert_eq!(
            cfg(r#"{"tcp":"t","command":"x"}"#).transport(),
            Transport::Websocket
        );
        assert_eq!(cfg(r#"{"command":""}"#).transport(), Transport::Stdio);
        assert_eq!(
            cfg(r#"{"command":5,"type":"SDK"}"#).transport(),
            Transport::Unknown
        );
    }

    #[test]
    fn discovery_timeout_defaults_and_clamps() {
        assert_eq!(cfg(r#"{"command":"x"}"#).discovery_timeout_ms(), 30_000);
        assert_eq!(cfg(r#"{"httpUrl":"x"}"#).discovery_timeout_ms(), 5_000);
        assert_eq!(
            cfg(r#"{"command":"x","discoveryTimeoutMs":5}"#).discovery_timeout_ms(),
            100
        );
        assert_eq!(
            cfg(r#"{"command":"x","discoveryTimeoutMs":1e9}"#).discovery_timeout_ms(),
            300_000
        );
        assert_eq!(
            cfg(r#"{"command":"x","discoveryTimeoutMs":"7"}"#).discovery_timeout_ms(),
            30_000
        );
    }
}

/// Server name → config, in ECMAScript property order ("map order").
pub type Servers = Object<ServerConfig>;

/// Errors reading server entries from JSON.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConfigError {
    /// A server entry is not a JSON object.
    #[error("server \"{name}\" must be an object, found {found}")]
    EntryNotObject {
        /// The server name.
        name: String,
        /// The JSON text found.
        found: String,
    },
    /// The server map is not a JSON object.
    #[error("server map must be an object, found {0}")]
    MapNotObject(String),
    /// The text is not JSON.
    #[error("server config is not JSON: {0}")]
    Syntax(String),
}

/// Reads a `{name: config}` map; every entry must be an object.
///
/// # Errors
/// [`ConfigError`] naming the first offending entry.
pub fn servers_from_value(value: &Value) -> Result<Servers, ConfigError> {
    let Value::Object(map) = value else {
        return Err(ConfigError::MapNotObject(value.to_json()));
    };
    map.clone().try_map_values(|name, entry| match entry {
        Value::Object(o) => Ok(ServerConfig::new(o)),
        other => Err(ConfigError::EntryNotObject {
            name: name.to_owned(),
            found: other.to_json(),
        }),
    })
}

/// The map as JSON.
pub fn servers_to_value(servers: &Servers) -> Value {
    Value::Object(
        servers
            .iter()
            .map(|(name, cfg)| (name.clone(), cfg.to_value()))
            .collect(),
    )
}
