//! Where server entries come from (SPEC §3): the ten layer kinds, their
//! precedence, `.mcp.json` and `$VAR` expansion.
//!
//! * [`assemble`] merges layers into the desired server map: a higher layer
//!   replaces a same-named entry whole, extension layers only fill names no
//!   other layer has, and provenance (`scope`, `extensionName`) is stamped by
//!   assembly, never trusted from a file;
//! * [`parse_mcp_json`] reads a project's `.mcp.json`, expanding `$VAR`s from
//!   an env map the host passes in and normalizing Claude-style entries;
//! * [`expand_env_vars`] is the expansion itself, shared with settings files.

use std::collections::HashSet;
use std::fmt;
use std::str::FromStr;

use crate::config::{ServerConfig, Servers, SCOPE};
use crate::json::{self, Object, Value};

/// The kind of a configuration layer, lowest precedence first (SPEC §3.1).
///
/// The derived order is the precedence order.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(rename_all = "camelCase")]
#[cfg_attr(
    feature = "ts",
    derive(ts_rs::TS),
    ts(rename = "Source", rename_all = "camelCase")
)]
pub enum LayerSource {
    /// Servers contributed by an installed extension; fills only names no
    /// other layer has.
    Extension,
    /// System-wide default settings.
    SystemDefaults,
    /// The user's settings file.
    User,
    /// The project's `.mcp.json` (gated: needs approval).
    Project,
    /// The workspace settings file (gated: needs approval).
    Workspace,
    /// System-wide settings that override everything the user writes.
    System,
    /// Servers injected by an IDE or ACP session.
    Session,
    /// `--mcp-config` (a file path or inline JSON).
    CliConfig,
    /// Additions made through the control plane while the session runs.
    Runtime,
    /// The `mcp.serverCommand` server, named `mcp`.
    ServerCommand,
}

impl LayerSource {
    /// Every kind, lowest precedence first.
    pub const ALL: [LayerSource; 10] = [
        LayerSource::Extension,
        LayerSource::SystemDefaults,
        LayerSource::User,
        LayerSource::Project,
        LayerSource::Workspace,
        LayerSource::System,
        LayerSource::Session,
        LayerSource::CliConfig,
        LayerSource::Runtime,
        LayerSource::ServerCommand,
    ];

    /// The JSON spelling (camelCase).
    pub fn as_str(self) -> &'static str {
        match self {
            LayerSource::Extension => "extension",
            LayerSource::SystemDefaults => "systemDefaults",
            LayerSource::User => "user",
            LayerSource::Project => "project",
            LayerSource::Workspace => "workspace",
            LayerSource::System => "system",
            LayerSource::Session => "session",
            LayerSource::CliConfig => "cliConfig",
            LayerSource::Runtime => "runtime",
            LayerSource::ServerCommand => "serverCommand",
        }
    }

    /// The `scope` value stamped on this layer's entries, if any.
    pub fn scope_stamp(self) -> Option<&'static str> {
        match self {
            LayerSource::Project => Some("project"),
            LayerSource::Workspace => Some("workspace"),
            LayerSource::System => Some("system"),
            _ => None,
        }
    }
}

impl fmt::Display for LayerSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A `source` string that names no layer kind.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown layer source \"{0}\"")]
pub struct UnknownLayerSource(pub String);

impl FromStr for LayerSource {
    type Err = UnknownLayerSource;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        LayerSource::ALL
            .into_iter()
            .find(|source| source.as_str() == s)
            .ok_or_else(|| UnknownLayerSource(s.to_owned()))
    }
}

/// One configuration layer: the servers one source contributes.
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct Layer {
    /// Which kind of layer this is; decides its precedence.
    pub source: LayerSource,
    /// The layer's entries, as written (or as [`parse_mcp_json`] returned them).
    pub servers: Servers,
    /// For extension layers: the extension's name, stamped as `extensionName`.
    #[cfg_attr(feature = "ts", ts(optional = nullable))]
    pub extension: Option<String>,
    /// For the `serverCommand` layer: `mcp.serverCommand` came from the
    /// workspace settings file, so its server is project-controlled and
    /// stamped `scope:"workspace"` (gated, SPEC §3.1 row 10). JSON:
    /// `"scope": "workspace"` on the layer.
    #[cfg_attr(
        feature = "ts",
        ts(rename = "scope", as = "Option<WorkspaceScope>", optional = nullable)
    )]
    pub from_workspace: bool,
}

/// The JSON spelling of [`Layer::from_workspace`]: `"scope": "workspace"`.
#[cfg(feature = "ts")]
#[derive(ts_rs::TS)]
#[ts(rename_all = "lowercase")]
pub enum WorkspaceScope {
    /// `mcp.serverCommand` came from the workspace settings.
    Workspace,
}

/// The result of [`assemble`]: the desired server map and where each entry
/// came from, both in map order.
#[derive(Clone, Debug, PartialEq, Default)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct Assembled {
    /// Name → config of the winning layer, stamped.
    pub servers: Servers,
    /// Name → kind of the winning layer.
    pub sources: Object<LayerSource>,
}

/// Merges layers into the desired server map (SPEC §3.1).
///
/// Precedence comes from each layer's [`LayerSource`], not from its position
/// in `layers`; layers of one kind merge in list order (later wins), except
/// extension layers, where the first listed wins and which only contribute
/// names that no other layer has. A winning entry replaces lower ones whole.
/// Every entry loses a written `scope`; project, workspace and system entries
/// get their own `scope`, extension entries get `extensionName`. The output
/// is in the property order of assigning layers from lowest to highest.
pub fn assemble(layers: &[Layer]) -> Assembled {
    let mut ordered: Vec<&Layer> = layers.iter().collect();
    // Stable: same-kind layers stay in list order.
    ordered.sort_by_key(|layer| layer.source);

    // Only extension layers ask who else claims a name; most sessions have none.
    let has_extensions = layers.iter().any(|l| l.source == LayerSource::Extension);
    let claimed: HashSet<&str> = layers
        .iter()
        .filter(|layer| has_extensions && layer.source != LayerSource::Extension)
        .flat_map(|layer| layer.servers.keys().map(String::as_str))
        .collect();
    let mut extension_names: HashSet<&str> = HashSet::new();

    let mut out = Assembled::default();
    for layer in ordered {
        for (name, config) in &layer.servers {
            if layer.source == LayerSource::Extension
                && (claimed.contains(name.as_str()) || !extension_names.insert(name))
            {
                continue;
            }
            out.servers.insert(name.clone(), stamp(config, layer));
            out.sources.insert(name.clone(), layer.source);
        }
    }
    out
}

/// The entry as assembly emits it: provenance comes from the layer only.
///
/// An entry that already reads that way (no `scope` where the layer stamps
/// none; `scope` last with the layer's stamp, as [`parse_mcp_json`] leaves a
/// project entry) is shared, not copied.
fn stamp(config: &ServerConfig, layer: &Layer) -> ServerConfig {
    let scope = match layer.source {
        LayerSource::ServerCommand if layer.from_workspace => Some("workspace"),
        source => source.scope_stamp(),
    };
    let extension = layer
        .extension
        .as_ref()
        .filter(|_| layer.source == LayerSource::Extension);
    let stamped = match scope {
        None => !config.object().contains_key(SCOPE),
        Some(scope) => config
            .object()
            .iter()
            .next_back()
            .is_some_and(|(key, value)| key == SCOPE && value.as_str() == Some(scope)),
    };
    if stamped && extension.is_none() {
        return config.clone();
    }
    let mut entry = config.clone();
    let members = entry.object_mut();
    members.remove(SCOPE);
    if let Some(extension) = extension {
        members.insert("extensionName".into(), extension.clone().into());
    }
    if let Some(scope) = scope {
        members.insert(SCOPE.into(), scope.into());
    }
    entry
}

/// What [`parse_mcp_json`] read from a `.mcp.json`.
#[derive(Clone, Debug, PartialEq, Default)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS), ts(rename = "ParsedMcpJson"))]
pub struct McpJson {
    /// The loadable entries, expanded, normalized and stamped `scope:"project"`.
    pub servers: Servers,
    /// One human-readable sentence per problem (the file is unreadable, has
    /// no `mcpServers` object, or an entry is not an object).
    pub errors: Vec<String>,
}

/// Problems in a `.mcp.json`; [`McpJson::errors`] holds their messages.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum McpJsonError {
    /// The text is not JSON (comments allowed).
    #[error("failed to parse .mcp.json: {0}")]
    Syntax(String),
    /// The top level is not an object with an object `mcpServers`.
    #[error(".mcp.json has no \"mcpServers\" object")]
    NoServers,
    /// One entry is not an object; it is skipped.
    #[error(".mcp.json: server \"{0}\" is not an object, skipped")]
    EntryNotObject(String),
}

/// The fields of an entry whose string values are `$VAR`-expanded.
pub const EXPANDED_FIELDS: [&str; 11] = [
    "command",
    "args",
    "env",
    "cwd",
    "url",
    "httpUrl",
    "headers",
    "tcp",
    "oauth",
    "targetAudience",
    "targetServiceAccount",
];

/// Reads a project's `.mcp.json` (SPEC §3.2).
///
/// A BOM is stripped and comments are allowed. With `expand`, the string
/// values of [`EXPANDED_FIELDS`] are expanded from `env` (see
/// [`expand_env_vars`]) before Claude-style entries are normalized; every
/// entry is then stamped `scope:"project"`. Problems do not fail the call:
/// the entries that can load, load, and each problem adds one message.
pub fn parse_mcp_json(text: &str, env: Option<&Object>, expand: bool) -> McpJson {
    match json::parse_jsonc(text) {
        Ok(value) => mcp_json_from_value(&value, env, expand),
        Err(e) => McpJson {
            errors: vec![McpJsonError::Syntax(e.to_string()).to_string()],
            ..McpJson::default()
        },
    }
}

/// [`parse_mcp_json`] of a file whose JSON was parsed already (`parsed`), so a host that
/// checked the file parses need not parse it again (nor once per reading of it).
pub fn mcp_json_from_value(parsed: &Value, env: Option<&Object>, expand: bool) -> McpJson {
    let mut out = McpJson::default();
    let Some(Value::Object(entries)) = parsed.as_object().and_then(|o| o.get("mcpServers")) else {
        out.errors.push(McpJsonError::NoServers.to_string());
        return out;
    };
    for (name, entry) in entries {
        let Value::Object(entry) = entry else {
            out.errors
                .push(McpJsonError::EntryNotObject(name.clone()).to_string());
            continue;
        };
        let mut entry = entry.clone();
        if let (true, Some(env)) = (expand, env) {
            for field in EXPANDED_FIELDS {
                if let Some(value) = entry.get_mut(field) {
                    *value = expand_env_vars(value, env);
                }
            }
        }
        let mut entry = normalize_claude_entry(entry);
        entry.insert(SCOPE.into(), "project".into());
        out.servers.insert(name.clone(), ServerConfig::new(entry));
    }
    out
}

/// Rewrites a Claude-style entry into this product's shape.
///
/// Mirrors the TypeScript host, truthiness included: an entry with a truthy
/// `command`, `httpUrl` or `tcp` only loses a `type` other than `"sdk"`; else
/// a string `url` is moved to the end of the entry, renamed `httpUrl` when
/// `type` is `"http"`, and `type` is dropped unless it is `"sdk"`; anything
/// else is left alone.
pub fn normalize_claude_entry(mut entry: Object) -> Object {
    let truthy = |key: &str| entry.get(key).is_some_and(Value::truthy);
    let is_sdk = entry.get("type").and_then(Value::as_str) == Some("sdk");
    if truthy("command") || truthy("httpUrl") || truthy("tcp") {
        if !is_sdk {
            entry.remove("type");
        }
        return entry;
    }
    if let Some(Value::String(url)) = entry.get("url") {
        let url = url.clone();
        let is_http = entry.get("type").and_then(Value::as_str) == Some("http");
        entry.remove("url");
        if !is_sdk {
            entry.remove("type");
        }
        let key = if is_http { "httpUrl" } else { "url" };
        entry.insert(key.into(), url.into());
    }
    entry
}

/// Expands `$NAME` and `${NAME}` in every string inside `value` (not in
/// object keys) from `env`; see [`expand_env_vars_in_str`].
pub fn expand_env_vars(value: &Value, env: &Object) -> Value {
    match value {
        Value::String(s) => Value::String(expand_env_vars_in_str(s, env)),
        Value::Array(items) => {
            Value::Array(items.iter().map(|v| expand_env_vars(v, env)).collect())
        }
        Value::Object(object) => Value::Object(
            object
                .iter()
                .map(|(k, v)| (k.clone(), expand_env_vars(v, env)))
                .collect(),
        ),
        other => other.clone(),
    }
}

/// Expands `$NAME` (`NAME` = `[A-Za-z0-9_]+`) and `${NAME}` (`NAME` = one or
/// more characters up to the next `}`) from `env`.
///
/// A reference whose variable is not in `env`, or whose value is not a
/// string, stays verbatim; `${}` and an unterminated `${` are literal text;
/// substituted values are not expanded again. The kernel never reads the
/// process environment: the host passes `env`.
pub fn expand_env_vars_in_str(text: &str, env: &Object) -> String {
    let bytes = text.as_bytes();
    let mut out = String::with_capacity(text.len());
    let mut copied = 0;
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] != b'$' {
            i += 1;
            continue;
        }
        let Some((name, end)) = reference_at(text, i) else {
            i += 1;
            continue;
        };
        if let Some(Value::String(replacement)) = env.get(name) {
            out.push_str(&text[copied..i]);
            out.push_str(replacement);
            copied = end;
        }
        i = end;
    }
    out.push_str(&text[copied..]);
    out
}

/// The variable name of a reference starting with the `$` at `at`, and the
/// byte offset just past the reference.
fn reference_at(text: &str, at: usize) -> Option<(&str, usize)> {
    let rest = text.get(at + 1..)?;
    let word = rest
        .bytes()
        .take_while(|b| b.is_ascii_alphanumeric() || *b == b'_')
        .count();
    if word > 0 {
        return Some((&rest[..word], at + 1 + word));
    }
    let inner = rest.strip_prefix('{')?;
    let close = inner.find('}')?;
    (close > 0).then(|| (&inner[..close], at + 2 + close + 1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::servers_to_value;
    use crate::json::parse;

    fn object(text: &str) -> Object {
        match parse(text).expect("json") {
            Value::Object(o) => o,
            _ => panic!("object expected"),
        }
    }

    fn layer(source: LayerSource, servers: &str) -> Layer {
        Layer {
            source,
            servers: object(servers).map_values(|_, v| match v {
                Value::Object(o) => ServerConfig::new(o),
                _ => panic!("entry must be an object"),
            }),
            extension: None,
            from_workspace: false,
        }
    }

    fn json_of(servers: &Servers) -> String {
        servers_to_value(servers).to_json()
    }

    #[test]
    fn assembly_shares_entries_that_need_no_stamp_and_copies_the_others() {
        let project = parse_mcp_json(
            r#"{"mcpServers":{"p":{"command":"p"},"q":{"scope":"user","command":"q"}}}"#,
            None,
            false,
        )
        .servers;
        let layers = [
            layer(
                LayerSource::User,
                r#"{"u":{"command":"u"},"s":{"command":"s","scope":"project"}}"#,
            ),
            Layer {
                source: LayerSource::Project,
                servers: project,
                extension: None,
                from_workspace: false,
            },
        ];
        let out = assemble(&layers);
        let shared = |name: &str, layer: &Layer| {
            out.servers
                .get(name)
                .expect("assembled")
                .same(layer.servers.get(name).expect("in the layer"))
        };
        assert!(shared("u", &layers[0]), "nothing to stamp");
        assert!(shared("p", &layers[1]), "parse_mcp_json stamped it last");
        assert!(!shared("s", &layers[0]), "a written scope is dropped");
        assert!(!shared("q", &layers[1]), "the written scope kept its place");
        assert_eq!(
            json_of(&out.servers),
            r#"{"u":{"command":"u"},"s":{"command":"s"},"p":{"command":"p","scope":"project"},"q":{"command":"q","scope":"project"}}"#
        );
        assert_eq!(
            layers[0].servers.get("s").and_then(ServerConfig::scope),
            Some("project"),
            "stamping a copy leaves the layer's entry alone"
        );
    }

    #[test]
    fn source_spellings_round_trip() {
        for source in LayerSource::ALL {
            assert_eq!(source.as_str().parse::<LayerSource>(), Ok(source));
        }
        assert!("User".parse::<LayerSource>().is_err());
        assert!(LayerSource::Extension < LayerSource::ServerCommand);
    }

    #[test]
    fn precedence_comes_from_the_source_not_the_list_position() {
        let out = assemble(&[
            layer(LayerSource::Runtime, r#"{"a":{"command":"rt"}}"#),
            layer(
                LayerSource::Workspace,
                r#"{"z":{"command":"w","scope":"user"}}"#,
            ),
            layer(
                LayerSource::User,
                r#"{"z":{"command":"u","x":1},"a":{"command":"u"},"10":{"command":"u"}}"#,
            ),
            layer(LayerSource::User, r#"{"a":{"command":"u2"}}"#),
        ]);
        assert_eq!(
            json_of(&out.servers),
            r#"{"10":{"command":"u"},"z":{"command":"w","scope":"workspace"},"a":{"command":"rt"}}"#
        );
        let sources: Vec<_> = out.sources.iter().map(|(k, v)| (k.as_str(), *v)).collect();
        assert_eq!(
            sources,
            [
                ("10", LayerSource::User),
                ("z", LayerSource::Workspace),
                ("a", LayerSource::Runtime)
            ]
        );
    }

    #[test]
    fn extensions_fill_gaps_and_the_first_listed_wins() {
        let mut e1 = layer(
            LayerSource::Extension,
            r#"{"a":{"command":"e1"},"x":{"extensionName":"fake","command":"e1","scope":"project"}}"#,
        );
        e1.extension = Some("one".into());
        let mut e2 = layer(LayerSource::Extension, r#"{"x":{"command":"e2"},"y":{}}"#);
        e2.extension = Some("two".into());
        let out = assemble(&[
            layer(LayerSource::Session, r#"{"a":{"command":"s"}}"#),
            e1,
            e2,
        ]);
        assert_eq!(
            json_of(&out.servers),
            r#"{"x":{"extensionName":"one","command":"e1"},"y":{"extensionName":"two"},"a":{"command":"s"}}"#
        );
    }

    #[test]
    fn written_scopes_are_dropped_and_gated_layers_stamped() {
        let out = assemble(&[
            layer(
                LayerSource::Project,
                r#"{"p":{"scope":"project","command":"p"}}"#,
            ),
            layer(
                LayerSource::CliConfig,
                r#"{"c":{"scope":"workspace","command":"c"}}"#,
            ),
            layer(LayerSource::System, r#"{"s":{"command":"s"}}"#),
        ]);
        assert_eq!(
            json_of(&out.servers),
            r#"{"p":{"command":"p","scope":"project"},"s":{"command":"s","scope":"system"},"c":{"command":"c"}}"#
        );
    }

    /// SPEC §3.1 row 10: `mcp.serverCommand` from the workspace settings is
    /// project-controlled, so its server is stamped (and gated) as workspace;
    /// from any other scope it carries no scope.
    #[test]
    fn a_workspace_server_command_is_stamped_workspace() {
        let mut from_workspace = layer(
            LayerSource::ServerCommand,
            r#"{"mcp":{"command":"python3","scope":"user"}}"#,
        );
        from_workspace.from_workspace = true;
        let out = assemble(&[from_workspace]);
        assert_eq!(
            json_of(&out.servers),
            r#"{"mcp":{"command":"python3","scope":"workspace"}}"#
        );
        assert!(out.servers.get("mcp").is_some_and(ServerConfig::is_gated));
        let out = assemble(&[layer(
            LayerSource::ServerCommand,
            r#"{"mcp":{"command":"python3"}}"#,
        )]);
        assert!(!out.servers.get("mcp").is_some_and(ServerConfig::is_gated));
    }

    #[test]
    fn expansion_follows_the_typescript_regex() {
        let env = object(r#"{"X":"xv","A B":"sp","1X":"d","E":"","REF":"$X","N":5,"a${X":"w"}"#);
        for (input, want) in [
            ("$X", "xv"),
            ("${X}", "xv"),
            ("$$X", "$xv"),
            ("${}", "${}"),
            ("${X", "${X"),
            ("$", "$"),
            ("a$", "a$"),
            ("${A B}", "sp"),
            ("$1X", "d"),
            ("$X_Y", "$X_Y"),
            ("${a${X}", "w"),
            ("$E!", "!"),
            ("$REF", "$X"),
            ("$N", "$N"),
            ("$constructor", "$constructor"),
            ("a$Xb", "a$Xb"),
            ("${X}}", "xv}"),
            ("${${X}}", "${${X}}"),
            ("é$X€", "éxv€"),
            ("$é", "$é"),
        ] {
            assert_eq!(expand_env_vars_in_str(input, &env), want, "input {input:?}");
        }
    }

    #[test]
    fn mcp_json_keeps_javascript_object_semantics() {
        let parsed = parse_mcp_json(
            "\u{feff}/* c */{\"mcpServers\":{\"b\":{\"command\":\"//x\"},\"10\":{\"command\":\"1\"},\
             \"__proto__\":{\"command\":\"p\"},\"2\":{\"command\":\"2\"},\"b\":{\"command\":\"/*y*/\"}}} // end",
            None,
            true,
        );
        assert!(parsed.errors.is_empty());
        assert_eq!(
            json_of(&parsed.servers),
            r#"{"2":{"command":"2","scope":"project"},"10":{"command":"1","scope":"project"},"b":{"command":"/*y*/","scope":"project"},"__proto__":{"command":"p","scope":"project"}}"#
        );
    }

    #[test]
    fn mcp_json_problems_are_counted_not_fatal() {
        for text in [
            "",
            "// only",
            "{\"mcpServers\":{},}",
            "[]",
            "{\"mcpServers\":[]}",
            "null",
        ] {
            let parsed = parse_mcp_json(text, None, true);
            assert_eq!(parsed.errors.len(), 1, "text {text:?}");
            assert!(parsed.servers.is_empty());
        }
        let parsed = parse_mcp_json(
            r#"{"mcpServers":{"a":null,"b":[],"c":"s","d":{}}}"#,
            None,
            true,
        );
        assert_eq!(parsed.errors.len(), 3);
        assert!(parsed.errors.iter().all(|e| e.contains("server \"")));
        assert_eq!(json_of(&parsed.servers), r#"{"d":{"scope":"project"}}"#);
    }

    #[test]
    fn claude_entries_normalize_like_the_typescript_host() {
        let cases = [
            (
                r#"{"type":"http","url":"u","x":1}"#,
                r#"{"x":1,"httpUrl":"u"}"#,
            ),
            (
                r#"{"type":"http","httpUrl":"","url":"u","x":1}"#,
                r#"{"httpUrl":"u","x":1}"#,
            ),
            (r#"{"type":"sse","url":"u","x":1}"#, r#"{"x":1,"url":"u"}"#),
            (
                r#"{"type":"sdk","url":"u","x":1}"#,
                r#"{"type":"sdk","x":1,"url":"u"}"#,
            ),
            (r#"{"type":"stdio","command":"c"}"#, r#"{"command":"c"}"#),
            (r#"{"type":null,"command":5}"#, r#"{"command":5}"#),
            (
                r#"{"type":"http","command":"","url":5}"#,
                r#"{"type":"http","command":"","url":5}"#,
            ),
            (
                r#"{"type":"http","tcp":"t","url":"u"}"#,
                r#"{"tcp":"t","url":"u"}"#,
            ),
            (r#"{"type":"stdio"}"#, r#"{"type":"stdio"}"#),
        ];
        for (input, want) in cases {
            assert_eq!(
                Value::Object(normalize_claude_entry(object(input))).to_json(),
                want,
                "input {input}"
            );
        }
    }

    #[test]
    fn only_listed_fields_expand_and_only_when_asked() {
        let env = object(r#"{"X":"xv"}"#);
        let text = r#"{"mcpServers":{"a":{"type":"http","url":"$X","description":"$X","env":{"$X":"${X}"},"oauth":{"scopes":["$X"]}}}}"#;
        assert_eq!(
            json_of(&parse_mcp_json(text, Some(&env), true).servers),
            r#"{"a":{"description":"$X","env":{"$X":"xv"},"oauth":{"scopes":["xv"]},"httpUrl":"xv","scope":"project"}}"#
        );
        assert_eq!(
            json_of(&parse_mcp_json(text, Some(&env), false).servers),
            r#"{"a":{"description":"$X","env":{"$X":"${X}"},"oauth":{"scopes":["$X"]},"httpUrl":"$X","scope":"project"}}"#
        );
    }
}
