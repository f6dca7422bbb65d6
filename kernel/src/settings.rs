//! Settings files (SPEC §3.3) and what a change to them means (SPEC §7).
//!
//! * [`parse_settings`] reads one settings file;
//! * [`mcp_lists`] and [`server_command`] pull the `mcp.*` keys the kernel
//!   uses out of the settings scopes;
//! * [`settings_diff`] lists the leaf paths an edit changed, and
//!   [`restart_required`] says which of them only take effect after a restart.

use crate::json::{self, cmp_utf16, Object, Value};
use crate::sources::{expand_env_vars, LayerSource};

/// Why a settings file cannot be used; the host keeps its last good content.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SettingsError {
    /// The file holds no JSON at all (only whitespace or comments).
    #[error("settings file is empty")]
    Empty,
    /// The text is not JSON (comments allowed).
    #[error("settings file is not valid JSON: {0}")]
    Syntax(String),
    /// The top level is JSON but not an object.
    #[error("settings file must hold a JSON object, found {0}")]
    NotObject(String),
}

/// Reads one settings file (SPEC §3.3): BOM stripped, comments allowed,
/// strict JSON otherwise, and the top level must be an object. With `env`,
/// every string value (not key) is `$VAR`-expanded from it.
///
/// The host treats a missing file as `{}` itself.
///
/// # Errors
/// [`SettingsError`] for empty text, a syntax error or a non-object.
pub fn parse_settings(text: &str, env: Option<&Object>) -> Result<Value, SettingsError> {
    settings_from_parsed(json::parse_jsonc(text), text, env)
}

/// [`parse_settings`] of `text` whose JSON was parsed already (`parsed`: what
/// [`json::parse_jsonc`] gave for exactly this text), so a host that checked the file parses
/// need not parse it again.
///
/// # Errors
/// As [`parse_settings`].
pub fn settings_from_parsed(
    parsed: Result<Value, json::ParseError>,
    text: &str,
    env: Option<&Object>,
) -> Result<Value, SettingsError> {
    let value = parsed.map_err(|e| {
        if json::strip_comments(text.strip_prefix('\u{feff}').unwrap_or(text))
            .trim()
            .is_empty()
        {
            SettingsError::Empty
        } else {
            SettingsError::Syntax(e.to_string())
        }
    })?;
    if !matches!(value, Value::Object(_)) {
        return Err(SettingsError::NotObject(value.to_json()));
    }
    Ok(match env {
        Some(env) => expand_env_vars(&value, env),
        None => value,
    })
}

/// The admission lists the settings scopes define together (SPEC §3.3).
/// A list that is not set (`None`; in JSON absent or `null`) differs from an
/// empty one (deny all).
#[derive(Clone, Debug, PartialEq, Eq, Default)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS), ts(optional_fields = nullable, rename_all = "camelCase"))]
pub struct McpLists {
    /// `mcp.allowed` of every scope but the workspace.
    pub allowed: Option<Vec<String>>,
    /// `mcp.allowed` of the workspace scope: project-controlled, so it only
    /// narrows (a server must pass `allowed` when set **and** this when set).
    pub workspace_allowed: Option<Vec<String>>,
    /// `mcp.excluded` of all scopes.
    pub excluded: Option<Vec<String>>,
}

impl McpLists {
    /// `{allowed?, excluded?, workspaceAllowed?}`, a field omitted when not
    /// set (the shape the `gating` and `hotReload` requests take as `settings`).
    pub fn to_value(&self) -> Value {
        let mut out = Object::new();
        for (key, list) in [
            ("allowed", &self.allowed),
            ("excluded", &self.excluded),
            ("workspaceAllowed", &self.workspace_allowed),
        ] {
            if let Some(list) = list {
                let items = list.iter().map(|s| Value::from(s.as_str())).collect();
                out.insert(key.into(), Value::Array(items));
            }
        }
        Value::Object(out)
    }
}

/// Merges `mcp.allowed` and `mcp.excluded` over settings scopes (parsed
/// settings objects, tagged with their layer kind).
///
/// Scopes are taken in precedence order (systemDefaults, user, workspace,
/// system; list order within one kind), whatever their order in `scopes`.
/// The arrays are concatenated, non-strings and empty strings are dropped,
/// and duplicates are removed keeping the first. A list is set as soon as one
/// scope writes it as an array, even an empty one; other values are ignored.
///
/// The workspace scope is project-controlled (SPEC §3.3, §13): its
/// `mcp.allowed` is kept apart as [`McpLists::workspace_allowed`], which can
/// only narrow; its `mcp.excluded` joins the others (it only adds).
pub fn mcp_lists(scopes: &[(LayerSource, &Value)]) -> McpLists {
    let mut ordered: Vec<&(LayerSource, &Value)> = scopes.iter().collect();
    ordered.sort_by_key(|(source, _)| *source);
    let merged = |key: &str, take: &dyn Fn(LayerSource) -> bool| -> Option<Vec<String>> {
        let mut out: Option<Vec<String>> = None;
        for (_, settings) in ordered.iter().filter(|(source, _)| take(*source)) {
            let Some(Value::Array(items)) = mcp_field(settings, key) else {
                continue;
            };
            let list = out.get_or_insert_with(Vec::new);
            for item in items {
                if let Value::String(s) = item {
                    if !s.is_empty() && !list.contains(s) {
                        list.push(s.clone());
                    }
                }
            }
        }
        out
    };
    let workspace = |source: LayerSource| source == LayerSource::Workspace;
    McpLists {
        allowed: merged("allowed", &|source| !workspace(source)),
        workspace_allowed: merged("allowed", &workspace),
        excluded: merged("excluded", &|_| true),
    }
}

/// `mcp.allowed` and `mcp.excluded` as Gemini CLI reads them (0.61,
/// `getConsolidatedAllowedMcpServers` and `isBlockedBySettings`), where "not
/// set" and "empty" keep Gemini's meaning (SPEC §15):
///
/// * `allowed` is the intersection of the lists the administrator's and the
///   user's scopes define (system, systemDefaults, user): items compared
///   lowercased and trimmed, the system list's spelling kept (Gemini then
///   matches names exactly). No list, or an empty intersection, restricts
///   nothing — Gemini admits every server when its list is empty.
/// * The workspace scope is project-controlled, so unlike Gemini (which
///   intersects it too, letting a repository's `[]` or a disjoint list lift
///   the user's restriction) its list only narrows, as
///   [`McpLists::workspace_allowed`]; an empty one restricts nothing.
/// * `excluded` is the union over every scope, as [`mcp_lists`] makes it.
pub fn gemini_mcp_lists(scopes: &[(LayerSource, &Value)]) -> McpLists {
    let list = |source: LayerSource| -> Vec<Vec<String>> {
        scopes
            .iter()
            .filter(|(kind, _)| *kind == source)
            .filter_map(|(_, settings)| match mcp_field(settings, "allowed") {
                Some(Value::Array(items)) => Some(
                    items
                        .iter()
                        .filter_map(Value::as_str)
                        .map(str::to_owned)
                        .collect(),
                ),
                _ => None,
            })
            .collect()
    };
    let fold = |s: &str| json::js_trim(&s.to_lowercase()).to_owned();
    let defined: Vec<Vec<String>> = [
        LayerSource::System,
        LayerSource::SystemDefaults,
        LayerSource::User,
    ]
    .into_iter()
    .flat_map(list)
    .collect();
    let allowed = defined.split_first().and_then(|(first, rest)| {
        let folded: Vec<std::collections::HashSet<String>> = rest
            .iter()
            .map(|l| l.iter().map(|item| fold(item)).collect())
            .collect();
        let kept: Vec<String> = first
            .iter()
            .filter(|item| folded.iter().all(|set| set.contains(&fold(item))))
            .cloned()
            .collect();
        (!kept.is_empty()).then_some(kept)
    });
    let workspace_allowed = list(LayerSource::Workspace)
        .into_iter()
        .next_back()
        .filter(|l| !l.is_empty());
    McpLists {
        allowed,
        workspace_allowed,
        excluded: mcp_lists(scopes).excluded,
    }
}

/// `mcp.serverCommand` of one settings object, when it is a non-empty string.
pub fn server_command(settings: &Value) -> Option<String> {
    match mcp_field(settings, "serverCommand") {
        Some(Value::String(s)) if !s.is_empty() => Some(s.clone()),
        _ => None,
    }
}

/// `mcp.serverCommand` over settings scopes: the highest-precedence scope
/// that writes the key decides (an empty string or other value there means
/// none), as a deep merge of the scopes would.
pub fn merged_server_command(scopes: &[(LayerSource, &Value)]) -> Option<String> {
    let mut ordered: Vec<&(LayerSource, &Value)> = scopes.iter().collect();
    ordered.sort_by_key(|(source, _)| *source);
    ordered
        .into_iter()
        .rev()
        .find(|(_, settings)| mcp_field(settings, "serverCommand").is_some())
        .and_then(|(_, settings)| server_command(settings))
}

fn mcp_field<'a>(settings: &'a Value, key: &str) -> Option<&'a Value> {
    settings.as_object()?.get("mcp")?.as_object()?.get(key)
}

/// The leaf paths that differ between two parsed settings values (SPEC §7).
///
/// Objects present on both sides are recursed into; anything else is a leaf
/// compared as a value, where the member order of objects inside arrays does
/// not count; a key present on one side only is a leaf. Paths join keys with
/// `.` below a non-empty prefix (as the TypeScript host does: a child of the
/// empty top-level key gets no leading dot). `null` or any non-object at the
/// top is `{}`. The result is de-duplicated and sorted by UTF-16 code units.
pub fn settings_diff(old: &Value, new: &Value) -> Vec<String> {
    let empty = Object::new();
    let old = old.as_object().unwrap_or(&empty);
    let new = new.as_object().unwrap_or(&empty);
    let mut paths = Vec::new();
    collect_changed(Side::Own(old), Side::Own(new), "", &mut paths);
    paths.sort_by(|a, b| cmp_utf16(a, b));
    paths.dedup();
    paths
}

/// A plain object as the TypeScript host's walk sees it: a parsed object, or
/// `Object.prototype`, which `obj["__proto__"]` yields when the object has
/// no own `__proto__` member (an object with no enumerable keys whose own
/// `__proto__` is `null`).
#[derive(Clone, Copy)]
enum Side<'a> {
    Own(&'a Object),
    ObjectPrototype,
}

/// What `obj[key]` gives.
#[derive(Clone, Copy, PartialEq)]
enum Lookup<'a> {
    Absent,
    Value(&'a Value),
    ObjectPrototype,
}

impl<'a> Side<'a> {
    fn keys(self) -> impl Iterator<Item = &'a String> {
        match self {
            Side::Own(o) => Some(o.keys()),
            Side::ObjectPrototype => None,
        }
        .into_iter()
        .flatten()
    }

    fn has(self, key: &str) -> bool {
        matches!(self, Side::Own(o) if o.contains_key(key))
    }

    fn get(self, key: &str) -> Lookup<'a> {
        match (self, key) {
            (Side::Own(o), _) if o.contains_key(key) => {
                o.get(key).map_or(Lookup::Absent, Lookup::Value)
            }
            (Side::Own(_), "__proto__") => Lookup::ObjectPrototype,
            (Side::ObjectPrototype, "__proto__") => Lookup::Value(&Value::Null),
            // Other inherited members are functions: not plain objects, and
            // JSON.stringify gives `undefined` for them, as for an absent key.
            _ => Lookup::Absent,
        }
    }
}

impl<'a> Lookup<'a> {
    fn as_plain_object(self) -> Option<Side<'a>> {
        match self {
            Lookup::Value(Value::Object(o)) => Some(Side::Own(o)),
            Lookup::ObjectPrototype => Some(Side::ObjectPrototype),
            _ => None,
        }
    }
}

fn collect_changed(old: Side<'_>, new: Side<'_>, prefix: &str, out: &mut Vec<String>) {
    let keys = old.keys().chain(new.keys().filter(|key| !old.has(key)));
    for key in keys {
        let path = if prefix.is_empty() {
            key.clone()
        } else {
            format!("{prefix}.{key}")
        };
        let (a, b) = (old.get(key), new.get(key));
        match (a.as_plain_object(), b.as_plain_object()) {
            (Some(a), Some(b)) => collect_changed(a, b, &path, out),
            // `Value` equality ignores object member order and treats -0 as 0,
            // which is what comparing `JSON.stringify` texts would see, minus
            // the key order the contract says does not matter.
            _ if a == b => {}
            _ => out.push(path),
        }
    }
}

/// The default `requiresRestart` schema: `mcp.*` needs a restart except the
/// admission lists and the sharing default (`mcp.share` applies to the processes started
/// after it changed); server entries are hot.
pub const DEFAULT_RESTART_SCHEMA: [(&str, bool); 6] = [
    ("mcpServers", false),
    ("mcp", true),
    ("mcp.serverCommand", true),
    ("mcp.allowed", false),
    ("mcp.excluded", false),
    ("mcp.share", false),
];

/// Which changed paths need a restart (SPEC §7).
#[derive(Clone, Debug, PartialEq, Default)]
#[cfg_attr(
    feature = "ts",
    derive(ts_rs::TS),
    ts(rename = "RestartRequirement", rename_all = "camelCase")
)]
pub struct RestartRequired {
    /// Every path needs a restart (also true for no paths): a hot reload has
    /// nothing to do and the host should not announce one.
    pub suppressed: bool,
    /// Path → whether it needs a restart, in first-seen order.
    pub per_path: Object<bool>,
}

/// Classifies changed paths with `schema` (dotted key → `requiresRestart`),
/// which replaces [`DEFAULT_RESTART_SCHEMA`] when given.
pub fn restart_required(paths: &[String], schema: Option<&Object>) -> RestartRequired {
    let mut per_path = Object::new();
    for path in paths {
        per_path.insert(path.clone(), is_restart_required(path, schema));
    }
    let suppressed = per_path.values().all(|&restart| restart);
    RestartRequired {
        suppressed,
        per_path,
    }
}

/// Whether one dotted path needs a restart: the longest prefix (whole
/// dot-separated segments) present in the schema decides, and only `true`
/// there means yes; a path no prefix of which is present is hot.
pub fn is_restart_required(path: &str, schema: Option<&Object>) -> bool {
    let lookup = |key: &str| -> Option<bool> {
        match schema {
            Some(schema) => schema.get(key).map(|v| *v == Value::Bool(true)),
            None => DEFAULT_RESTART_SCHEMA
                .iter()
                .find(|(k, _)| *k == key)
                .map(|(_, restart)| *restart),
        }
    };
    let mut prefix = path;
    loop {
        if let Some(restart) = lookup(prefix) {
            return restart;
        }
        match prefix.rfind('.') {
            Some(dot) => prefix = &prefix[..dot],
            None => return false,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::parse;

    fn value(text: &str) -> Value {
        parse(text).expect("json")
    }

    fn diff(old: &str, new: &str) -> Vec<String> {
        settings_diff(&value(old), &value(new))
    }

    #[test]
    fn settings_files_must_hold_an_object() {
        assert_eq!(parse_settings("", None), Err(SettingsError::Empty));
        assert_eq!(
            parse_settings(" // c\n/* d */", None),
            Err(SettingsError::Empty)
        );
        assert!(matches!(
            parse_settings("{,}", None),
            Err(SettingsError::Syntax(_))
        ));
        assert!(matches!(
            parse_settings("[1]", None),
            Err(SettingsError::NotObject(_))
        ));
        assert!(matches!(
            parse_settings("null", None),
            Err(SettingsError::NotObject(_))
        ));
        assert_eq!(
            parse_settings("\u{feff}{\"b\":1,\"2\":\"//\",\"b\":3} // x", None)
                .map(|v| v.to_json()),
            Ok(r#"{"2":"//","b":3}"#.to_owned())
        );
    }

    #[test]
    fn env_expands_every_string_value_but_no_key() {
        let env = value(r#"{"X":"xv"}"#);
        let env = env.as_object();
        let parsed = parse_settings(r#"{"$X":["$X",{"k":"${X}"}],"n":1}"#, env);
        assert_eq!(
            parsed.map(|v| v.to_json()),
            Ok(r#"{"$X":["xv",{"k":"xv"}],"n":1}"#.to_owned())
        );
    }

    #[test]
    fn mcp_lists_concatenate_in_scope_order() {
        let system = value(r#"{"mcp":{"allowed":["s","a"]}}"#);
        let user = value(r#"{"mcp":{"allowed":["u","","a",5,"u"],"excluded":"x"}}"#);
        let defaults = value(r#"{"mcp":{"allowed":["d"]}}"#);
        let lists = mcp_lists(&[
            (LayerSource::System, &system),
            (LayerSource::User, &user),
            (LayerSource::SystemDefaults, &defaults),
        ]);
        assert_eq!(
            lists.allowed,
            Some(vec!["d".into(), "u".into(), "a".into(), "s".into()])
        );
        assert_eq!(lists.excluded, None);
        assert_eq!(
            lists.to_value().to_json(),
            r#"{"allowed":["d","u","a","s"]}"#
        );

        let empty = value(r#"{"mcp":{"excluded":[""]}}"#);
        let lists = mcp_lists(&[(LayerSource::Workspace, &empty)]);
        assert_eq!((lists.allowed, lists.excluded), (None, Some(vec![])));

        // The workspace list stands apart (it narrows); its exclusions add.
        let workspace = value(r#"{"mcp":{"allowed":["w","a"],"excluded":["x"]}}"#);
        let lists = mcp_lists(&[
            (LayerSource::Workspace, &workspace),
            (LayerSource::User, &user),
        ]);
        assert_eq!(lists.allowed, Some(vec!["u".into(), "a".into()]));
        assert_eq!(lists.workspace_allowed, Some(vec!["w".into(), "a".into()]));
        assert_eq!(lists.excluded, Some(vec!["x".into()]));
        assert_eq!(
            lists.to_value().to_json(),
            r#"{"allowed":["u","a"],"excluded":["x"],"workspaceAllowed":["w","a"]}"#
        );
    }

    #[test]
    fn server_command_is_a_non_empty_string_of_the_highest_scope() {
        let user = value(r#"{"mcp":{"serverCommand":"run me"}}"#);
        let blank = value(r#"{"mcp":{"serverCommand":""}}"#);
        let other = value(r#"{"mcp":{}}"#);
        assert_eq!(server_command(&user), Some("run me".into()));
        assert_eq!(server_command(&blank), None);
        assert_eq!(
            merged_server_command(&[(LayerSource::System, &other), (LayerSource::User, &user)]),
            Some("run me".into())
        );
        assert_eq!(
            merged_server_command(&[(LayerSource::Workspace, &blank), (LayerSource::User, &user)]),
            None
        );
    }

    #[test]
    fn diff_reports_leaves_sorted_and_unique() {
        assert_eq!(diff("{}", "{}"), Vec::<String>::new());
        assert_eq!(
            diff(
                r#"{"a":{"b":1},"c":[1]}"#,
                r#"{"a":{"b":2},"c":[1],"d":{"e":1}}"#
            ),
            ["a.b", "d"]
        );
        // Dotted keys can collide with nested paths.
        assert_eq!(
            diff(r#"{"a.b":1,"a":{"b":1}}"#, r#"{"a.b":2,"a":{"b":2}}"#),
            ["a.b"]
        );
        // UTF-16 order, not code point order; integer-like keys are plain strings.
        assert_eq!(
            diff(
                "{}",
                "{\"\u{ff61}\":1,\"\u{1f600}\":1,\"b\":1,\"10\":1,\"2\":1}"
            ),
            ["10", "2", "b", "\u{1f600}", "\u{ff61}"]
        );
    }

    #[test]
    fn diff_compares_arrays_as_values_ignoring_member_order() {
        assert!(diff(
            r#"{"x":[{"a":1,"b":[{"c":1,"d":2}]}]}"#,
            r#"{"x":[{"b":[{"d":2,"c":1}],"a":1}]}"#
        )
        .is_empty());
        assert_eq!(diff(r#"{"x":[1,2]}"#, r#"{"x":[2,1]}"#), ["x"]);
        assert_eq!(diff(r#"{"x":{}}"#, r#"{"x":[]}"#), ["x"]);
        assert_eq!(diff(r#"{"x":null}"#, r#"{"x":{}}"#), ["x"]);
        assert!(diff(r#"{"x":0}"#, r#"{"x":-0.0}"#).is_empty());
        assert!(settings_diff(&Value::Null, &value("{}")).is_empty());
    }

    #[test]
    fn diff_joins_paths_as_the_typescript_host() {
        assert_eq!(diff(r#"{"":{"a":1}}"#, r#"{"":{"a":2}}"#), ["a"]);
        assert_eq!(diff(r#"{"a":{"":1}}"#, r#"{"a":{"":2}}"#), ["a."]);
        assert_eq!(diff(r#"{"":1}"#, r#"{"":2}"#), [""]);
        // Without an own `__proto__`, the TypeScript walk reads
        // Object.prototype there (checked against node).
        assert_eq!(diff("{}", r#"{"__proto__":{"a":1}}"#), ["__proto__.a"]);
        assert!(diff("{}", r#"{"__proto__":{}}"#).is_empty());
        assert_eq!(
            diff("{}", r#"{"__proto__":{"__proto__":{"a":1}}}"#),
            ["__proto__.__proto__"]
        );
        assert_eq!(diff(r#"{"__proto__":1}"#, "{}"), ["__proto__"]);
        assert_eq!(
            diff("{}", r#"{"__proto__":{"constructor":null}}"#),
            ["__proto__.constructor"]
        );
    }

    #[test]
    fn restart_required_walks_from_the_longest_prefix() {
        let paths: Vec<String> = ["mcp.foo", "mcp.allowed.x", "mcpServers.a.args", "mcp", "ui"]
            .map(String::from)
            .to_vec();
        let result = restart_required(&paths, None);
        let flags: Vec<bool> = result.per_path.values().copied().collect();
        assert_eq!(flags, [true, false, false, true, false]);
        assert!(!result.suppressed);
        assert!(restart_required(&[], None).suppressed);
        assert!(restart_required(&["mcp.serverCommand".into()], None).suppressed);

        let schema = value(r#"{"ui":true,"ui.x":null,"mcp":"true"}"#);
        let schema = schema.as_object();
        assert!(is_restart_required("ui.theme", schema));
        assert!(!is_restart_required("ui.x.y", schema));
        assert!(!is_restart_required("mcp.serverCommand", schema));
        assert!(!is_restart_required("", schema));
    }
    #[test]
    fn gemini_intersects_allow_lists_and_an_empty_one_restricts_nothing() {
        let scope = |text: &str| json::parse(text).expect("json");
        let system = scope(r#"{"mcp":{"allowed":["GitHub","notes"]}}"#);
        let user = scope(r#"{"mcp":{"allowed":["github "," linear"],"excluded":["x"]}}"#);
        let lists = gemini_mcp_lists(&[(LayerSource::User, &user), (LayerSource::System, &system)]);
        // Compared folded, the system list's spelling kept.
        assert_eq!(lists.allowed, Some(vec!["GitHub".to_owned()]));
        assert_eq!(lists.excluded, Some(vec!["x".to_owned()]));

        // Disjoint lists, or one empty list: Gemini restricts nothing.
        let other = scope(r#"{"mcp":{"allowed":["slack"]}}"#);
        let empty = scope(r#"{"mcp":{"allowed":[]}}"#);
        assert_eq!(
            gemini_mcp_lists(&[(LayerSource::User, &user), (LayerSource::System, &other)]).allowed,
            None
        );
        assert_eq!(
            gemini_mcp_lists(&[(LayerSource::User, &empty)]).allowed,
            None
        );
        // `[""]` is a list Gemini keeps (it then admits no server); cleaned, it denies all.
        let blank = scope(r#"{"mcp":{"allowed":[""]}}"#);
        assert_eq!(
            gemini_mcp_lists(&[(LayerSource::User, &blank)]).allowed,
            Some(vec![String::new()])
        );

        // The workspace list only narrows; its `[]` or a disjoint list lifts nothing.
        let ws_empty = scope(r#"{"mcp":{"allowed":[]}}"#);
        let lists = gemini_mcp_lists(&[
            (LayerSource::User, &user),
            (LayerSource::Workspace, &ws_empty),
        ]);
        assert_eq!(
            lists.allowed,
            Some(vec!["github ".to_owned(), " linear".to_owned()])
        );
        assert_eq!(lists.workspace_allowed, None);
        let ws = scope(r#"{"mcp":{"allowed":["slack"]}}"#);
        let lists = gemini_mcp_lists(&[(LayerSource::User, &user), (LayerSource::Workspace, &ws)]);
        assert_eq!(lists.workspace_allowed, Some(vec!["slack".to_owned()]));
        assert!(lists.allowed.is_some());
    }
}
