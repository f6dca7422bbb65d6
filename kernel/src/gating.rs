//! Admission (SPEC §4): name patterns, the [`Gating`] lists and why a server
//! is not admitted.
//!
//! * [`compute_gating`] builds the lists in force from settings, the launch
//!   flag ([`cap_from_cli`]) and the approvals store;
//! * [`Gating::denial`] decides admission for a plan;
//! * [`unavailable_reason`] and [`tool_not_found`] explain to a user or a
//!   model why a server or one of its tools is missing;
//! * [`gating_equal`] and [`servers_equal`] tell a reload whether anything
//!   admission-relevant changed (SPEC §7).

use std::collections::HashSet;

use serde::{Deserialize, Serialize};

use crate::approvals::{pending_gated, ApprovalState, Approvals};
use crate::config::{ServerConfig, Servers, Transport};
use crate::json::{
    fast_deep_equal, fast_deep_equal_objects, js_trim, DeepEqualError, Object, Value,
};
use crate::settings::McpLists;

/// Why a server is not connected, or why a plan did what it did.
///
/// Spelled in snake_case exactly as the TypeScript host spells its
/// unavailable reasons; the spellings are part of the JSON contract.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
#[cfg_attr(feature = "ts", derive(ts_rs::TS), ts(rename_all = "snake_case"))]
pub enum Reason {
    /// Removed from the configuration during this session.
    Removed,
    /// Fails the launch-flag cap or `mcp.allowed`.
    NotAllowed,
    /// Matches `mcp.excluded`.
    Excluded,
    /// A gated server without an approval for its current config.
    PendingApproval,
    /// A gated server the user rejected for its current config.
    Rejected,
    /// The entry has no usable transport field.
    NoTransport,
    /// Failed; waiting for its retry time.
    BackingOff,
    /// Failed too often in a row; waits for a config change or reconnect.
    CrashLoop,
    /// The folder is not trusted: nothing is started or stopped.
    UntrustedFolder,
    /// The host cannot speak this transport.
    UnsupportedTransport,
    /// Turned off by the client's own configuration (a client layout's policy lists, its
    /// per-server `enabled = false`; SPEC §15): see [`Gating::blocked`].
    Blocked,
    /// The server wants an (OAuth) authorization the host does not have:
    /// not retried on a timer until its credentials change, a reconnect or a
    /// config change.
    NeedsAuth,
}

impl Reason {
    /// The JSON spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Reason::Removed => "removed",
            Reason::NotAllowed => "not_allowed",
            Reason::Excluded => "excluded",
            Reason::PendingApproval => "pending_approval",
            Reason::Rejected => "rejected",
            Reason::NoTransport => "no_transport",
            Reason::BackingOff => "backing_off",
            Reason::CrashLoop => "crash_loop",
            Reason::UntrustedFolder => "untrusted_folder",
            Reason::UnsupportedTransport => "unsupported_transport",
            Reason::NeedsAuth => "needs_auth",
            Reason::Blocked => "blocked",
        }
    }
}

/// The admission lists in force (SPEC §4). A list that is not set (`None`; in
/// JSON absent or `null`) differs from an empty one for `allowed` and `cap`.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS), ts(optional_fields = nullable, rename_all = "camelCase"))]
pub struct Gating {
    /// `mcp.excluded` patterns; beat `allowed`.
    pub excluded: Option<Vec<String>>,
    /// `mcp.allowed` patterns; not set allows all, empty denies all.
    pub allowed: Option<Vec<String>>,
    /// The launch flag `--allowed-mcp-server-names`; immutable per session.
    pub cap: Option<Vec<String>>,
    /// `mcp.allowed` of the workspace settings (project-controlled): it can
    /// only narrow, so a server must match it too when it is set (SPEC §3.3).
    /// JSON `workspaceAllowed`.
    pub workspace_allowed: Option<Vec<String>>,
    /// Exact names of gated servers not approved for their current config.
    pub pending: Option<Vec<String>>,
    /// Exact names a client's own configuration turns off (SPEC §15): its allow and deny
    /// lists ([`crate::policy`]) and its per-server switches. Checked after `excluded`, with
    /// reason `blocked`; not set equals `[]`. JSON `blocked`.
    pub blocked: Option<Vec<String>>,
}

/// Errors reading a gating object from JSON.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum GatingError {
    /// A list field is not an array of strings.
    #[error("gating field `{field}` must be an array of strings or null, found {found}")]
    NotAStringList {
        /// The field name.
        field: &'static str,
        /// The JSON text found.
        found: String,
    },
    /// The gating value is not an object.
    #[error("gating must be an object, found {0}")]
    NotAnObject(String),
}

impl Gating {
    /// Reads `{excluded?, allowed?, cap?, workspaceAllowed?, pending?, blocked?}`; absent or
    /// `null` is not set.
    ///
    /// # Errors
    /// [`GatingError`] when the value or one of its lists has the wrong type.
    pub fn from_value(value: &Value) -> Result<Self, GatingError> {
        let Value::Object(object) = value else {
            return Err(GatingError::NotAnObject(value.to_json()));
        };
        Ok(Gating {
            excluded: string_list(object, "excluded")?,
            allowed: string_list(object, "allowed")?,
            cap: string_list(object, "cap")?,
            workspace_allowed: string_list(object, "workspaceAllowed")?,
            pending: string_list(object, "pending")?,
            blocked: string_list(object, "blocked")?,
        })
    }

    /// `{excluded, pending?, allowed?, cap?, workspaceAllowed?, blocked?}` as the `gating` op
    /// returns it: `excluded` always an array, the others omitted when not set (`blocked` also
    /// when empty, which equals not set).
    pub fn to_value(&self) -> Value {
        let list = |items: &[String]| {
            Value::Array(items.iter().map(|s| Value::from(s.as_str())).collect())
        };
        let mut object = Object::new();
        object.insert(
            "excluded".into(),
            list(self.excluded.as_deref().unwrap_or(&[])),
        );
        if let Some(pending) = &self.pending {
            object.insert("pending".into(), list(pending));
        }
        if let Some(allowed) = &self.allowed {
            object.insert("allowed".into(), list(allowed));
        }
        if let Some(cap) = &self.cap {
            object.insert("cap".into(), list(cap));
        }
        if let Some(narrow) = &self.workspace_allowed {
            object.insert("workspaceAllowed".into(), list(narrow));
        }
        if let Some(blocked) = self.blocked.as_ref().filter(|b| !b.is_empty()) {
            object.insert("blocked".into(), list(blocked));
        }
        Value::Object(object)
    }

    /// Passes the allow side: matches `cap` (when set), `allowed` (when set)
    /// and `workspace_allowed` (when set).
    pub fn allows(&self, name: &str) -> bool {
        let passes =
            |list: &Option<Vec<String>>| list.as_ref().is_none_or(|l| matches_any(name, l));
        passes(&self.cap) && passes(&self.allowed) && passes(&self.workspace_allowed)
    }

    /// Matches `excluded`.
    pub fn excludes(&self, name: &str) -> bool {
        self.excluded.as_ref().is_some_and(|l| matches_any(name, l))
    }

    /// Is in `blocked` (exact names): the client's own configuration turns it off.
    pub fn blocks(&self, name: &str) -> bool {
        self.blocked
            .as_ref()
            .is_some_and(|l| l.iter().any(|b| b == name))
    }

    /// Is in `pending` (exact names).
    pub fn is_pending(&self, name: &str) -> bool {
        self.pending
            .as_ref()
            .is_some_and(|l| l.iter().any(|p| p == name))
    }

    /// Why `name` with `config` is not admitted, first hit of `not_allowed`,
    /// `excluded`, `blocked`, `pending_approval`, `no_transport`; `None` when admitted.
    pub fn denial(&self, name: &str, config: &ServerConfig) -> Option<Reason> {
        Gate::new(self).denial(name, config)
    }
}

fn string_list(object: &Object, field: &'static str) -> Result<Option<Vec<String>>, GatingError> {
    match object.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::Array(items)) => items
            .iter()
            .map(|item| item.as_str().map(str::to_owned))
            .collect::<Option<Vec<_>>>()
            .map(Some)
            .ok_or_else(|| GatingError::NotAStringList {
                field,
                found: Value::Array(items.clone()).to_json(),
            }),
        Some(other) => Err(GatingError::NotAStringList {
            field,
            found: other.to_json(),
        }),
    }
}

/// `gatingEqual` (SPEC §7): each list compared as a multiset; `excluded` and
/// `pending` not set equal `[]`; `allowed` and `cap` not set differ from `[]`.
pub fn gating_equal(a: &Gating, b: &Gating) -> bool {
    fn sorted(list: Option<&Vec<String>>) -> Vec<&str> {
        let mut v: Vec<&str> = list
            .map(|l| l.iter().map(String::as_str).collect())
            .unwrap_or_default();
        v.sort_unstable();
        v
    }
    let lenient =
        |x: &Option<Vec<String>>, y: &Option<Vec<String>>| sorted(x.as_ref()) == sorted(y.as_ref());
    let strict = |x: &Option<Vec<String>>, y: &Option<Vec<String>>| {
        x.is_some() == y.is_some() && sorted(x.as_ref()) == sorted(y.as_ref())
    };
    lenient(&a.excluded, &b.excluded)
        && lenient(&a.pending, &b.pending)
        && strict(&a.allowed, &b.allowed)
        && strict(&a.cap, &b.cap)
        && strict(&a.workspace_allowed, &b.workspace_allowed)
        && lenient(&a.blocked, &b.blocked)
}

/// Whether `name` matches `pattern`: `*` is any run of UTF-16 code units
/// (including none), `?` exactly one; anchored at both ends; a pattern with
/// neither is compared exactly.
pub fn match_pattern(pattern: &str, name: &str) -> bool {
    if !pattern.contains(['*', '?']) {
        return pattern == name;
    }
    // ASCII text has one UTF-16 code unit per byte: match the bytes without
    // re-encoding (this runs for every server against every wildcard).
    if pattern.is_ascii() && name.is_ascii() {
        return glob(pattern.as_bytes(), name.as_bytes(), b'*', b'?');
    }
    let pattern: Vec<u16> = pattern.encode_utf16().collect();
    let name: Vec<u16> = name.encode_utf16().collect();
    glob(&pattern, &name, u16::from(b'*'), u16::from(b'?'))
}

/// Anchored glob over code units with backtracking to the last `*`.
fn glob<T: Copy + Eq>(pattern: &[T], name: &[T], star: T, any: T) -> bool {
    let (mut ni, mut pi) = (0, 0);
    let mut back: Option<(usize, usize)> = None; // (pattern index of `*`, name index)
    while ni < name.len() {
        if pi < pattern.len() && (pattern[pi] == any || pattern[pi] == name[ni]) {
            ni += 1;
            pi += 1;
        } else if pi < pattern.len() && pattern[pi] == star {
            back = Some((pi, ni));
            pi += 1;
        } else if let Some((star_pi, star_ni)) = back {
            pi = star_pi + 1;
            ni = star_ni + 1;
            back = Some((star_pi, star_ni + 1));
        } else {
            return false;
        }
    }
    while pi < pattern.len() && pattern[pi] == star {
        pi += 1;
    }
    pi == pattern.len()
}

/// Whether `name` matches any of `patterns` (an empty list matches nothing).
pub fn matches_any(name: &str, patterns: &[String]) -> bool {
    patterns.iter().any(|p| match_pattern(p, name))
}

/// The launch-flag cap (SPEC §4): every occurrence of
/// `--allowed-mcp-server-names` split at `,`, each part trimmed (ECMAScript
/// `String.prototype.trim` whitespace), empty parts dropped, duplicates
/// removed keeping the first. `[""]` gives `[]`, which denies all.
pub fn cap_from_cli(occurrences: &[String]) -> Vec<String> {
    let parts = occurrences
        .iter()
        .flat_map(|occurrence| occurrence.split(','))
        .map(js_trim);
    unique_non_empty(parts)
}

/// A settings pattern list cleaned as SPEC §3.3: empty strings dropped,
/// duplicates removed keeping the first.
pub fn clean_list(list: &[String]) -> Vec<String> {
    unique_non_empty(list.iter().map(String::as_str))
}

/// The `gating` op (SPEC §4): the lists in force for `servers`.
///
/// * `excluded` = the settings list, cleaned (always set);
/// * `allowed` = the settings list, cleaned, when set — never intersected
///   with the cap ([`Gating::allows`] applies both);
/// * `workspace_allowed` = the workspace scope's own `mcp.allowed`, cleaned,
///   when set: it narrows, never widens (SPEC §3.3);
/// * `cap` = [`cap_from_cli`] of the launch flag's occurrences, when given;
/// * `pending` = [`pending_gated`] (approval state not approved), unless `yolo`.
pub fn compute_gating(
    servers: &Servers,
    lists: &McpLists,
    cli_allowed: Option<&[String]>,
    approvals: &Approvals,
    root: &str,
    yolo: bool,
) -> Gating {
    gating_with_pending(
        lists,
        cli_allowed,
        (!yolo).then(|| pending_gated(servers, approvals, root)),
    )
}

/// [`compute_gating`] for a caller that already knows the pending list
/// (`None` in yolo), e.g. [`hot_reload`](crate::hot_reload::hot_reload),
/// which reads every gated server's approval state once for both the gating
/// and the prompt.
pub fn gating_with_pending(
    lists: &McpLists,
    cli_allowed: Option<&[String]>,
    pending: Option<Vec<String>>,
) -> Gating {
    Gating {
        excluded: Some(
            lists
                .excluded
                .as_deref()
                .map(clean_list)
                .unwrap_or_default(),
        ),
        allowed: lists.allowed.as_deref().map(clean_list),
        cap: cli_allowed.map(cap_from_cli),
        workspace_allowed: lists.workspace_allowed.as_deref().map(clean_list),
        pending,
        blocked: None,
    }
}

/// Why `name` is unavailable (SPEC §4), first hit wins:
/// `removed` (in `removed`) → not configured (not an own key of `merged`):
/// `None` → `not_allowed` (fails `cap` or `allowed`) → `excluded` → `blocked` →
/// `rejected` (only with `approvals` = (store, project root), for a gated
/// entry whose state is rejected) → `pending_approval` (in `pending`) → `None`.
pub fn unavailable_reason(
    name: &str,
    merged: &Servers,
    gating: &Gating,
    removed: &[String],
    approvals: Option<(&Approvals, &str)>,
) -> Option<Reason> {
    if removed.iter().any(|r| r == name) {
        return Some(Reason::Removed);
    }
    let config = merged.get(name)?;
    if !gating.allows(name) {
        return Some(Reason::NotAllowed);
    }
    if gating.excludes(name) {
        return Some(Reason::Excluded);
    }
    if gating.blocks(name) {
        return Some(Reason::Blocked);
    }
    if let Some((store, root)) = approvals {
        if config.is_gated() && store.state(root, name, config) == ApprovalState::Rejected {
            return Some(Reason::Rejected);
        }
    }
    if gating.is_pending(name) {
        return Some(Reason::PendingApproval);
    }
    None
}

/// What to tell a caller of a missing tool `tool` (SPEC §4); `None` unless the
/// name starts with `mcp__`.
///
/// The owner is the server (names of `merged` in map order, then `removed`
/// in list order) whose qualified prefix [`tool_prefix`] is the longest
/// prefix of `tool` (ties: the first; an empty name owns nothing). The
/// message names the owner, says why (by [`unavailable_reason`]) and what to
/// do about it; it carries
/// exactly one case's token (`removed`, `mcp.allowed`, `mcp.excluded`,
/// `approv`, `no MCP server`, or none for a configured, admitted server). The
/// tool name is quoted only when it does not itself contain another case's
/// token.
pub fn tool_not_found(
    tool: &str,
    merged: &Servers,
    gating: &Gating,
    removed: &[String],
    approvals: Option<(&Approvals, &str)>,
) -> Option<String> {
    if !tool.starts_with(TOOL_PREFIX) {
        return None;
    }
    // An empty name never owns a tool: the TypeScript host tests the owner
    // for truthiness, so `""` reads as "no owner" there.
    let owner = merged
        .keys()
        .chain(removed)
        .filter(|name| !name.is_empty())
        .map(|name| (name, tool_prefix(name)))
        .filter(|(_, prefix)| tool.starts_with(prefix.as_str()))
        .fold(
            None::<(&String, usize)>,
            |best, (name, prefix)| match best {
                Some((_, len)) if len >= prefix.len() => best,
                _ => Some((name, prefix.len())),
            },
        )
        .map(|(name, _)| name);
    let Some(owner) = owner else {
        let subject = subject(tool, NO_SERVER);
        return Some(format!(
            "{subject} not found: no MCP server providing it is currently configured. \
             Configure an MCP server that provides it; a server that was deleted or renamed \
             no longer provides its tools."
        ));
    };
    let quoted = format!("\"{owner}\"");
    let reason = unavailable_reason(owner, merged, gating, removed, approvals);
    let token = match reason {
        Some(Reason::Removed) => REMOVED,
        Some(Reason::NotAllowed) => ALLOWED,
        Some(Reason::Excluded) => EXCLUDED,
        Some(Reason::Blocked) => BLOCKED,
        Some(Reason::PendingApproval | Reason::Rejected) => APPROVAL,
        _ => "",
    };
    let subject = subject(tool, token);
    Some(match reason {
        Some(Reason::Removed) => format!(
            "{subject} is unavailable: the MCP server {quoted} was removed during this session, \
             so its tools were unloaded. Re-add it to your settings to use this tool again."
        ),
        Some(Reason::NotAllowed) => format!(
            "{subject} is unavailable: the MCP server {quoted} is not in the allow-list \
             (mcp.allowed / --allowed-mcp-server-names), so its tools are not loaded. \
             Add it to mcp.allowed or to the launch flag --allowed-mcp-server-names to use \
             this tool."
        ),
        Some(Reason::Excluded) => format!(
            "{subject} is unavailable: the MCP server {quoted} is excluded (mcp.excluded), \
             so its tools are not loaded. Remove it from mcp.excluded to use this tool."
        ),
        Some(Reason::Blocked) => format!(
            "{subject} is unavailable: the MCP server {quoted} is turned off by the client's \
             own configuration (its policy lists, or the server's own enabled switch), so its \
             tools are not loaded. Change that in the client's files to use this tool."
        ),
        Some(Reason::PendingApproval) => format!(
            "{subject} is unavailable: the MCP server {quoted} is awaiting approval, so its \
             tools are not loaded. Approve it to use this tool."
        ),
        Some(Reason::Rejected) => format!(
            "{subject} is unavailable: the MCP server {quoted} was rejected at approval for \
             its current config, so its tools are not loaded. Edit its config to be asked \
             again, or approve it explicitly, to use this tool."
        ),
        _ => format!(
            "{subject} not found on MCP server {quoted}. The server may be disconnected or \
             still starting up, or the tool was renamed."
        ),
    })
}

/// `serversEqual` (SPEC §7): deep equality with object key order ignored and
/// array order significant; a map that is absent or `null` equals `{}`.
/// Computed as the TypeScript host's `fast-deep-equal` does, quirks included
/// (see [`fast_deep_equal`]).
///
/// # Errors
/// [`DeepEqualError`] where that package throws.
pub fn servers_equal(a: Option<&Value>, b: Option<&Value>) -> Result<bool, DeepEqualError> {
    let empty = Value::Object(Object::new());
    let a = match a {
        None | Some(Value::Null) => &empty,
        Some(v) => v,
    };
    let b = match b {
        None | Some(Value::Null) => &empty,
        Some(v) => v,
    };
    fast_deep_equal(a, b)
}

/// [`servers_equal`] of a parsed map `a` and a typed one `b`, without
/// copying `b` into a [`Value`] first.
///
/// # Errors
/// As [`servers_equal`].
pub fn servers_equal_typed(a: Option<&Value>, b: &Servers) -> Result<bool, DeepEqualError> {
    let empty = Object::new();
    let a = match a {
        None | Some(Value::Null) => &empty,
        Some(Value::Object(a)) => a,
        // An array or a primitive never equals an object.
        Some(_) => return Ok(false),
    };
    fast_deep_equal_objects(
        a,
        b,
        |p, q| match p {
            Value::Object(p) => {
                fast_deep_equal_objects(p, q.object(), fast_deep_equal, |m| Some(m))
            }
            _ => Ok(false),
        },
        |_| None,
    )
}

const TOOL_PREFIX: &str = "mcp__";
const REMOVED: &str = "removed";
const ALLOWED: &str = "mcp.allowed";
const EXCLUDED: &str = "mcp.excluded";
const APPROVAL: &str = "approv";
const NO_SERVER: &str = "no MCP server";
const BLOCKED: &str = "turned off";
const CASE_TOKENS: [&str; 6] = [REMOVED, ALLOWED, EXCLUDED, APPROVAL, NO_SERVER, BLOCKED];

/// `mcp__<name>__` with every UTF-16 code unit outside `[A-Za-z0-9_-]`
/// replaced by `_` (a character beyond the BMP becomes `__`), as the host
/// qualifies tool names.
pub fn tool_prefix(server: &str) -> String {
    let mut prefix = String::with_capacity(server.len() + 7);
    prefix.push_str(TOOL_PREFIX);
    for c in server.chars() {
        if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
            prefix.push(c);
        } else {
            for _ in 0..c.len_utf16() {
                prefix.push('_');
            }
        }
    }
    prefix.push_str("__");
    prefix
}

/// `Tool "<tool>"`, or `This tool` when quoting the name would bring in a
/// token of a case other than `own` (the tool's own part is caller-chosen).
fn subject(tool: &str, own: &str) -> String {
    let lower = tool.to_lowercase();
    let foreign = CASE_TOKENS
        .iter()
        .filter(|t| **t != own)
        .any(|t| lower.contains(&t.to_lowercase()));
    if foreign {
        "This tool".to_owned()
    } else {
        format!("Tool \"{tool}\"")
    }
}

fn unique_non_empty<'a>(items: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for item in items {
        if !item.is_empty() && !out.iter().any(|seen| seen == item) {
            out.push(item.to_owned());
        }
    }
    out
}

/// The admission lists indexed once (exact names in sets), so a plan stays
/// linear however long `pending` or an exact-name allow list is. The one
/// implementation of the denial ladder: [`Gating::denial`] and the plan both
/// use it.
pub(crate) struct Gate<'g> {
    cap: Option<Patterns<'g>>,
    allowed: Option<Patterns<'g>>,
    workspace_allowed: Option<Patterns<'g>>,
    excluded: Option<Patterns<'g>>,
    pending: HashSet<&'g str>,
    blocked: HashSet<&'g str>,
}

impl<'g> Gate<'g> {
    pub(crate) fn new(gating: &'g Gating) -> Self {
        Gate {
            cap: gating.cap.as_deref().map(Patterns::new),
            allowed: gating.allowed.as_deref().map(Patterns::new),
            workspace_allowed: gating.workspace_allowed.as_deref().map(Patterns::new),
            excluded: gating.excluded.as_deref().map(Patterns::new),
            pending: gating
                .pending
                .iter()
                .flatten()
                .map(String::as_str)
                .collect(),
            blocked: gating
                .blocked
                .iter()
                .flatten()
                .map(String::as_str)
                .collect(),
        }
    }

    /// Why `name` with `config` is not admitted (see [`Gating::denial`]).
    pub(crate) fn denial(&self, name: &str, config: &ServerConfig) -> Option<Reason> {
        let allows = |list: &Option<Patterns<'_>>| list.as_ref().is_none_or(|p| p.matches(name));
        if !(allows(&self.cap) && allows(&self.allowed) && allows(&self.workspace_allowed)) {
            Some(Reason::NotAllowed)
        } else if self.excluded.as_ref().is_some_and(|p| p.matches(name)) {
            Some(Reason::Excluded)
        } else if self.blocked.contains(name) {
            Some(Reason::Blocked)
        } else if self.pending.contains(name) {
            Some(Reason::PendingApproval)
        } else if config.transport() == Transport::Unknown {
            Some(Reason::NoTransport)
        } else {
            None
        }
    }
}

/// A pattern list split into exact names (a set) and wildcard patterns.
struct Patterns<'g> {
    exact: HashSet<&'g str>,
    wildcard: Vec<&'g str>,
}

impl<'g> Patterns<'g> {
    fn new(list: &'g [String]) -> Self {
        let (wildcard, exact): (Vec<&str>, Vec<&str>) = list
            .iter()
            .map(String::as_str)
            .partition(|p| p.contains(['*', '?']));
        Patterns {
            exact: exact.into_iter().collect(),
            wildcard,
        }
    }

    fn matches(&self, name: &str) -> bool {
        self.exact.contains(name) || self.wildcard.iter().any(|p| match_pattern(p, name))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn patterns() {
        assert!(match_pattern("", ""));
        assert!(!match_pattern("", "a"));
        assert!(match_pattern("*", ""));
        assert!(match_pattern("**", ""));
        assert!(!match_pattern("?", ""));
        assert!(match_pattern("?", "é"));
        assert!(!match_pattern("?", "😀"), "one `?` is one UTF-16 unit");
        assert!(match_pattern("??", "😀"));
        assert!(match_pattern("a*c", "abbbc"));
        assert!(!match_pattern("a*c", "abbbd"));
        assert!(match_pattern("*puppeteer*", "my-puppeteer-server"));
        assert!(match_pattern("a*b*c", "aXbYbZc"));
        assert!(!match_pattern("[ab]", "a"));
        assert!(match_pattern("[ab]", "[ab]"));
    }

    fn strings(items: &[&str]) -> Vec<String> {
        items.iter().map(|s| (*s).to_owned()).collect()
    }

    fn servers(text: &str) -> Servers {
        crate::config::servers_from_value(&crate::json::parse(text).expect("json"))
            .expect("servers")
    }

    #[test]
    fn cap_splits_trims_and_dedups() {
        assert_eq!(cap_from_cli(&strings(&[""])), Vec::<String>::new());
        assert_eq!(cap_from_cli(&strings(&[" , ,"])), Vec::<String>::new());
        assert_eq!(
            cap_from_cli(&strings(&[" a , b,,a", "c", "b,\u{feff}d\u{3000}"])),
            strings(&["a", "b", "c", "d"])
        );
        // U+0085 is not ECMAScript whitespace, so it stays.
        assert_eq!(cap_from_cli(&strings(&["\u{85}x"])), strings(&["\u{85}x"]));
        assert_eq!(
            clean_list(&strings(&["a", "", "a", " "])),
            strings(&["a", " "])
        );
    }

    #[test]
    fn compute_gating_keeps_allowed_apart_from_cap() {
        let s = servers(
            r#"{"a":{"command":"a"},"p":{"command":"p","scope":"project"},
                "w":{"command":"w","scope":"workspace"}}"#,
        );
        let a = Approvals::empty();
        let g = compute_gating(
            &s,
            &McpLists {
                allowed: Some(strings(&["a", "", "p", "a"])),
                ..McpLists::default()
            },
            Some(&strings(&["a"])),
            &a,
            "/r",
            false,
        );
        assert_eq!(g.allowed, Some(strings(&["a", "p"])));
        assert_eq!(g.cap, Some(strings(&["a"])));
        assert_eq!(g.excluded, Some(vec![]));
        assert_eq!(g.pending, Some(strings(&["p", "w"])));
        assert!(!g.allows("p"), "cap narrows even what allowed lists");
        let g = compute_gating(
            &s,
            &McpLists {
                excluded: Some(strings(&[""])),
                ..McpLists::default()
            },
            Some(&strings(&[""])),
            &a,
            "",
            true,
        );
        assert_eq!(g.cap, Some(vec![]));
        assert_eq!(g.pending, None);
        assert_eq!(g.allowed, None);
        assert_eq!(g.to_value().to_json(), r#"{"excluded":[],"cap":[]}"#);
    }

    /// SPEC §3.3: a workspace `mcp.allowed` narrows the other scopes' list
    /// and never widens it; alone it narrows "allow all".
    #[test]
    fn a_workspace_allow_list_only_narrows() {
        let s = servers(r#"{"a":{"command":"a"},"b":{"command":"b"},"c":{"command":"c"}}"#);
        let gate = |allowed: Option<&[&str]>, workspace: Option<&[&str]>| {
            compute_gating(
                &s,
                &McpLists {
                    allowed: allowed.map(strings),
                    workspace_allowed: workspace.map(strings),
                    excluded: None,
                },
                None,
                &Approvals::empty(),
                "/r",
                false,
            )
        };
        let admitted = |g: &Gating| {
            ["a", "b", "c"]
                .into_iter()
                .filter(|n| g.allows(n))
                .collect::<Vec<_>>()
        };
        assert_eq!(admitted(&gate(Some(&["a"]), Some(&["a", "b", "*"]))), ["a"]);
        assert_eq!(admitted(&gate(Some(&["a", "b"]), Some(&["b", "c"]))), ["b"]);
        assert_eq!(admitted(&gate(None, Some(&["c"]))), ["c"]);
        assert_eq!(admitted(&gate(Some(&["a"]), Some(&[]))), Vec::<&str>::new());
        assert_eq!(admitted(&gate(None, None)), ["a", "b", "c"]);
        let g = gate(Some(&["a"]), Some(&["a", "b"]));
        assert_eq!(
            g.to_value().to_json(),
            r#"{"excluded":[],"pending":[],"allowed":["a"],"workspaceAllowed":["a","b"]}"#
        );
        assert_eq!(Gating::from_value(&g.to_value()).as_ref(), Ok(&g));
        assert!(!gating_equal(&g, &gate(Some(&["a"]), None)));
        assert_eq!(
            unavailable_reason("b", &s, &g, &[], None),
            Some(Reason::NotAllowed)
        );
    }

    #[test]
    fn unavailable_reason_precedence() {
        let merged = servers(
            r#"{"a":{"command":"a"},"p":{"command":"p","scope":"project"},
                "u":{"command":"u"}}"#,
        );
        let none = Gating::default();
        let reason = |name: &str, g: &Gating, removed: &[&str]| {
            unavailable_reason(name, &merged, g, &strings(removed), None)
        };
        assert_eq!(reason("a", &none, &["a"]), Some(Reason::Removed));
        let deny_all = Gating {
            allowed: Some(vec![]),
            excluded: Some(strings(&["*"])),
            pending: Some(strings(&["a", "constructor"])),
            ..Gating::default()
        };
        assert_eq!(reason("a", &deny_all, &["a"]), Some(Reason::Removed));
        assert_eq!(reason("ghost", &deny_all, &[]), None);
        assert_eq!(reason("constructor", &deny_all, &[]), None, "own keys only");
        assert_eq!(reason("a", &deny_all, &[]), Some(Reason::NotAllowed));
        let capped = Gating {
            cap: Some(strings(&["p*"])),
            ..Gating::default()
        };
        assert_eq!(reason("a", &capped, &[]), Some(Reason::NotAllowed));
        let excluded = Gating {
            excluded: Some(strings(&["*"])),
            pending: Some(strings(&["a"])),
            ..Gating::default()
        };
        assert_eq!(reason("a", &excluded, &[]), Some(Reason::Excluded));
        let pending = Gating {
            pending: Some(strings(&["p", "u"])),
            ..Gating::default()
        };
        assert_eq!(reason("p", &pending, &[]), Some(Reason::PendingApproval));
        assert_eq!(reason("a", &pending, &[]), None);

        let mut store = Approvals::empty();
        let p = merged.get("p").cloned().unwrap_or_default();
        let u = merged.get("u").cloned().unwrap_or_default();
        store.record("/r", "p", &p, crate::approvals::Decision::Rejected);
        store.record("/r", "u", &u, crate::approvals::Decision::Rejected);
        let with =
            |name: &str| unavailable_reason(name, &merged, &pending, &[], Some((&store, "/r")));
        assert_eq!(with("p"), Some(Reason::Rejected));
        assert_eq!(with("u"), Some(Reason::PendingApproval), "u is not gated");
        let other_root =
            unavailable_reason("p", &merged, &pending, &[], Some((&store, "/elsewhere")));
        assert_eq!(other_root, Some(Reason::PendingApproval));
    }

    #[test]
    fn tool_prefix_sanitizes_utf16_units() {
        assert_eq!(tool_prefix("a.b"), "mcp__a.b__".replace('.', "_"));
        assert_eq!(tool_prefix("é"), "mcp_____");
        assert_eq!(tool_prefix("😀"), "mcp______");
        assert_eq!(tool_prefix("A-z_9"), "mcp__A-z_9__");
    }

    #[test]
    fn tool_not_found_picks_the_longest_prefix_then_the_first() {
        let none = Gating::default();
        let owner_of = |tool: &str, merged: &str, removed: &[&str], g: &Gating| {
            tool_not_found(tool, &servers(merged), g, &strings(removed), None)
        };
        assert_eq!(owner_of("read_file", "{}", &[], &none), None);
        assert_eq!(owner_of("mcp_x", r#"{"x":{}}"#, &[], &none), None);
        let ex = |name: &str| Gating {
            excluded: Some(strings(&[name])),
            ..Gating::default()
        };
        let m = owner_of("mcp__a__b__c", r#"{"a":{},"a__b":{}}"#, &[], &ex("a__b"));
        assert!(m.is_some_and(|m| m.contains("\"a__b\"") && m.contains("mcp.excluded")));
        let m = owner_of("mcp__a_b__x", r#"{"a.b":{},"a_b":{}}"#, &[], &ex("a.b"));
        assert!(m.is_some_and(|m| m.contains("\"a.b\"") && m.contains("mcp.excluded")));
        let m = owner_of("mcp__a_b__x", r#"{"a_b":{}}"#, &["a.b"], &ex("a_b"));
        assert!(
            m.is_some_and(|m| m.contains("\"a_b\"")),
            "merged before removed"
        );
        let m = owner_of("mcp__x__y", "{}", &["z", "x"], &none);
        assert!(m.is_some_and(|m| m.contains("\"x\"") && m.contains("removed")));
        let m = owner_of("mcp______x", r#"{"😀":{}}"#, &[], &none);
        assert!(m.is_some_and(|m| m.contains("😀")));
        let m = owner_of("mcp____", r#"{"":{}}"#, &[], &none);
        assert!(
            m.is_some_and(|m| m.contains("no MCP server")),
            "empty name owns nothing"
        );
    }

    #[test]
    fn tool_not_found_messages_carry_one_token_each() {
        let merged = servers(r#"{"srv":{"command":"s","scope":"project"}}"#);
        let cfg = merged.get("srv").cloned().unwrap_or_default();
        let mut rejected = Approvals::empty();
        rejected.record("/r", "srv", &cfg, crate::approvals::Decision::Rejected);
        let g = |f: fn(&mut Gating)| {
            let mut g = Gating::default();
            f(&mut g);
            g
        };
        let cases: Vec<(Option<String>, &str)> = vec![
            (
                tool_not_found("mcp__srv__t", &merged, &none(), &strings(&["srv"]), None),
                "removed",
            ),
            (
                tool_not_found(
                    "mcp__srv__t",
                    &merged,
                    &g(|g| g.allowed = Some(vec![])),
                    &[],
                    None,
                ),
                "mcp.allowed",
            ),
            (
                tool_not_found(
                    "mcp__srv__t",
                    &merged,
                    &g(|g| g.excluded = Some(vec!["srv".into()])),
                    &[],
                    None,
                ),
                "mcp.excluded",
            ),
            (
                tool_not_found(
                    "mcp__srv__t",
                    &merged,
                    &g(|g| g.pending = Some(vec!["srv".into()])),
                    &[],
                    None,
                ),
                "approv",
            ),
            (
                tool_not_found(
                    "mcp__srv__t",
                    &merged,
                    &none(),
                    &[],
                    Some((&rejected, "/r")),
                ),
                "approv",
            ),
            (
                tool_not_found("mcp__other__t", &merged, &none(), &[], None),
                "no mcp server",
            ),
            (
                tool_not_found("mcp__srv__t", &merged, &none(), &[], None),
                "",
            ),
            // The tool's own part must not smuggle in another case's token.
            (
                tool_not_found(
                    "mcp__srv__approve_removed",
                    &merged,
                    &none(),
                    &strings(&["srv"]),
                    None,
                ),
                "removed",
            ),
        ];
        for (message, token) in cases {
            let message = message.unwrap_or_default().to_lowercase();
            if !token.is_empty() {
                assert!(message.contains(token), "{message}");
            }
            for other in [
                "removed",
                "mcp.allowed",
                "mcp.excluded",
                "approv",
                "no mcp server",
            ] {
                if other != token {
                    assert!(!message.contains(other), "{other:?} in {message}");
                }
            }
        }
        let m = tool_not_found(
            "mcp__srv__t",
            &merged,
            &none(),
            &[],
            Some((&rejected, "/r")),
        );
        assert!(
            m.is_some_and(|m| m.contains("Edit its config") && m.contains("approve it explicitly"))
        );
    }

    fn none() -> Gating {
        Gating::default()
    }

    #[test]
    fn servers_equal_is_deep_and_order_insensitive_for_keys() {
        let v = |t: &str| crate::json::parse(t).expect("json");
        let servers_equal =
            |a: Option<&Value>, b: Option<&Value>| servers_equal(a, b).expect("comparable");
        assert!(servers_equal(None, Some(&v("{}"))));
        assert!(servers_equal(Some(&Value::Null), None));
        assert!(!servers_equal(None, Some(&v("[]"))));
        assert!(servers_equal(
            Some(&v(r#"{"x":{"a":1,"b":[1,{"c":2,"d":3}]}}"#)),
            Some(&v(r#"{"x":{"b":[1.0,{"d":3,"c":2}],"a":1}}"#))
        ));
        assert!(!servers_equal(
            Some(&v(r#"{"x":{"args":["1","2"]}}"#)),
            Some(&v(r#"{"x":{"args":["2","1"]}}"#))
        ));
        assert!(!servers_equal(
            Some(&v(r#"{"x":{"env":[]}}"#)),
            Some(&v(r#"{"x":{"env":{}}}"#))
        ));
        assert!(!servers_equal(
            Some(&v(r#"{"x":{"e":null}}"#)),
            Some(&v(r#"{"x":{"e":{}}}"#))
        ));
        assert!(!servers_equal(
            Some(&v(r#"{"x":{"e":null}}"#)),
            Some(&v(r#"{"x":{}}"#))
        ));
        assert!(servers_equal(
            Some(&v(r#"{"x":-0}"#)),
            Some(&v(r#"{"x":0}"#))
        ));
    }
    #[test]
    fn servers_equal_keeps_fast_deep_equal_quirks() {
        // Checked against node + fast-deep-equal 3: an own `constructor`
        // member holding an object is compared by identity, so a server named
        // `constructor` never equals a copy of itself; an own `valueOf`
        // member is called and throws.
        let v = |t: &str| crate::json::parse(t).expect("json");
        let a = v(r#"{"constructor":{"command":"a"}}"#);
        assert_eq!(servers_equal(Some(&a), Some(&a.clone())), Ok(false));
        let b = v(r#"{"x":{"constructor":"c","command":"a"}}"#);
        assert_eq!(servers_equal(Some(&b), Some(&b.clone())), Ok(true));
        let c = v(r#"{"x":{"valueOf":1}}"#);
        assert!(servers_equal(Some(&c), Some(&c.clone())).is_err());
        // A difference met first (members are visited last to first) wins.
        let d = v(r#"{"x":{"valueOf":1},"y":1}"#);
        let e = v(r#"{"x":{"valueOf":1},"y":2}"#);
        assert_eq!(servers_equal(Some(&d), Some(&e)), Ok(false));
    }

    #[test]
    fn servers_equal_typed_agrees_with_servers_equal() {
        // The typed form skips the copy hot_reload used to make; it must
        // answer exactly as the parsed form, quirks and throws included.
        let v = |t: &str| crate::json::parse(t).expect("json");
        let maps = [
            "{}",
            r#"{"x":{"command":"a","args":["1","2"]}}"#,
            r#"{"x":{"args":["1","2"],"command":"a"}}"#,
            r#"{"x":{"command":"a","args":["2","1"]}}"#,
            r#"{"x":{"command":"a"},"y":{"command":"b"}}"#,
            r#"{"constructor":{"command":"a"}}"#,
            r#"{"x":{"constructor":"c","command":"a"}}"#,
            r#"{"x":{"valueOf":1}}"#,
            r#"{"x":{"valueOf":1},"y":{"e":1}}"#,
            r#"{"x":{"valueOf":1},"y":{"e":2}}"#,
            r#"{"valueOf":{"command":"a"}}"#,
        ];
        let previous = maps.iter().map(|t| Some(v(t))).chain([
            None,
            Some(Value::Null),
            Some(v("[]")),
            Some(v("1")),
        ]);
        for a in previous {
            for b in maps {
                let typed = crate::config::servers_from_value(&v(b)).expect("servers");
                assert_eq!(
                    servers_equal_typed(a.as_ref(), &typed),
                    servers_equal(a.as_ref(), Some(&v(b))),
                    "{a:?} vs {b}"
                );
            }
        }
    }

    #[test]
    fn allowed_empty_denies_all_and_cap_narrows() {
        let g = Gating {
            allowed: Some(vec![]),
            ..Gating::default()
        };
        assert!(!g.allows("a"));
        let g = Gating {
            cap: Some(vec!["a".into()]),
            allowed: Some(vec!["a".into(), "b".into()]),
            ..Gating::default()
        };
        assert!(g.allows("a"));
        assert!(!g.allows("b"), "allowed never widens the cap");
    }
}
