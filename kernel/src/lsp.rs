//! Language servers (`.lsp.json`, SPEC §14): parsing, identities, approvals
//! and reconcile plans.
//!
//! A language-server entry splits into two parts:
//! * the **seed** (`command`, `args`, `env`, `transport`, `socket`,
//!   `workspaceFolder`, `initializationOptions`): what the process is started
//!   with, so a change needs a restart; hashed into the [`lsp_seed_id`];
//! * the **live** part (`settings`, `extensionToLanguage`, `startupTimeout`,
//!   `shutdownTimeout`, `restartOnCrash`, `maxRestarts`): pushed to the
//!   running server or applied by the host, so a change is a `reconfigure`.
//!
//! Project entries are gated like project MCP servers (SPEC §5), bound to
//! [`lsp_approval_hash`], which covers everything but routing and policy —
//! `settings` and `initializationOptions` included, because servers run
//! programs named there. [`lsp_plan`] never starts, restarts or reconfigures
//! a project entry that is not approved for its current config.

use crate::approvals::{ApprovalState, Approvals};
use crate::config::{ServerConfig, SCOPE};
use crate::gating::Reason;
use crate::identity::{sha256_hex, sorted_json, ApprovalHash};
use crate::json::{self, whole_number, Object, Value};
use crate::plan::{Online, OnlineEntry, Status};
use crate::sources::expand_env_vars;
use crate::time::Millis;

/// Seed fields (restart on change) and their defaults, in the order of the
/// seed object of SPEC §14.2.
pub const SEED_FIELDS: [&str; 7] = [
    "command",
    "args",
    "env",
    "transport",
    "socket",
    "workspaceFolder",
    "initializationOptions",
];

/// Live fields (applied to a running server) in the order of SPEC §14.2.
pub const LIVE_FIELDS: [&str; 6] = [
    "settings",
    "extensionToLanguage",
    "startupTimeout",
    "shutdownTimeout",
    "restartOnCrash",
    "maxRestarts",
];

/// Top-level keys left out of the approval hash: provenance, routing and
/// host policy (none of them can make the server run anything else).
pub const UNHASHED_FIELDS: [&str; 7] = [
    "scope",
    "extensionToLanguage",
    "startupTimeout",
    "shutdownTimeout",
    "restartOnCrash",
    "maxRestarts",
    "trustRequired",
];

/// The fields whose string values `$VAR` expansion rewrites (SPEC §14.1).
pub const EXPANDED_FIELDS: [&str; 5] = ["command", "args", "env", "workspaceFolder", "socket"];

/// Default of a seed or live field; `None` for a name that is neither.
fn default_of(field: &str) -> Option<Value> {
    Some(match field {
        "command" | "socket" | "workspaceFolder" | "initializationOptions" => Value::Null,
        "args" => Value::Array(Vec::new()),
        "env" | "settings" | "extensionToLanguage" => Value::Object(Object::new()),
        "transport" => "stdio".into(),
        "startupTimeout" => Value::Number(10_000.0),
        "shutdownTimeout" => Value::Number(5_000.0),
        "restartOnCrash" => Value::Bool(true),
        "maxRestarts" => Value::Number(8.0),
        _ => return None,
    })
}

/// The value of `field` in `entry`, or its default when absent or `null`.
fn defaulted(entry: &Object, field: &str) -> Value {
    match entry.get(field) {
        Some(value) if !value.is_null() => value.clone(),
        _ => default_of(field).unwrap_or(Value::Null),
    }
}

/// Canonical JSON (SPEC §14.2) of the defaulted value of `field`.
fn canonical_field(entry: &Object, field: &str) -> String {
    sorted_json(&defaulted(entry, field))
}

/// A language server's seed id: `<name>::` + 16 hex digits of sha256 over
/// the canonical seed. The name may contain `::` (split at the last one).
#[derive(
    Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
#[serde(transparent)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct LspSeedId(pub String);

impl LspSeedId {
    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl std::fmt::Display for LspSeedId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

/// The seed object of `entry` with defaults filled in (SPEC §14.2).
pub fn lsp_seed(entry: &Object) -> Value {
    Value::Object(
        SEED_FIELDS
            .iter()
            .map(|field| ((*field).to_owned(), defaulted(entry, field)))
            .collect(),
    )
}

/// The live part of `entry` with defaults filled in (SPEC §14.2).
pub fn lsp_live(entry: &Object) -> Value {
    Value::Object(
        LIVE_FIELDS
            .iter()
            .map(|field| ((*field).to_owned(), defaulted(entry, field)))
            .collect(),
    )
}

/// `lspSeedId(name, entry)` (SPEC §14.2). Only seed fields count: a
/// `settings` or routing edit keeps the id; `"args": []` equals no `args`.
pub fn lsp_seed_id(name: &str, entry: &Object) -> LspSeedId {
    let digest = sha256_hex(sorted_json(&lsp_seed(entry)).as_bytes());
    LspSeedId(format!("{name}::{}", &digest[..16]))
}

/// `lspApprovalHash(entry)` (SPEC §14.2): sha256 over the canonical JSON of
/// the entry as written (no defaults) minus [`UNHASHED_FIELDS`].
pub fn lsp_approval_hash(entry: &Object) -> ApprovalHash {
    let hashed: Object = entry
        .iter()
        .filter(|(key, _)| !UNHASHED_FIELDS.contains(&key.as_str()))
        .map(|(key, value)| (key.clone(), value.clone()))
        .collect();
    ApprovalHash(sha256_hex(sorted_json(&Value::Object(hashed)).as_bytes()))
}

/// The approval state (SPEC §14.3) of language server `name` with `entry`
/// under project `root`: records as SPEC §5, bound to [`lsp_approval_hash`].
pub fn lsp_approval_state(
    approvals: &Approvals,
    root: &str,
    name: &str,
    entry: &Object,
) -> ApprovalState {
    approvals.state_with_hash(root, name, || lsp_approval_hash(entry).0)
}

/// The fields of `fields` whose defaulted canonical values differ between
/// `before` and `after`, sorted by UTF-16 code units.
fn differing(fields: &[&str], before: &Object, after: &Object) -> Vec<String> {
    let mut out: Vec<String> = fields
        .iter()
        .filter(|field| canonical_field(before, field) != canonical_field(after, field))
        .map(|field| (*field).to_owned())
        .collect();
    json::sort_strings(&mut out);
    out
}

/// Seed fields that differ between two entries (a restart is needed iff
/// this is non-empty), sorted by UTF-16 code units.
pub fn seed_changes(before: &Object, after: &Object) -> Vec<String> {
    differing(&SEED_FIELDS, before, after)
}

/// Live fields that differ between two entries, sorted by UTF-16 code units.
pub fn live_changes(before: &Object, after: &Object) -> Vec<String> {
    differing(&LIVE_FIELDS, before, after)
}

// ---------------------------------------------------------------------------
// Scopes and desired entries

/// Which file a language-server entry came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS), ts(rename_all = "lowercase"))]
pub enum LspScope {
    /// The user's own file: never gated.
    User,
    /// The project's `.lsp.json`: project-controlled, gated by approval.
    Project,
}

impl LspScope {
    /// The JSON spelling (`user`, `project`).
    pub fn as_str(self) -> &'static str {
        match self {
            LspScope::User => "user",
            LspScope::Project => "project",
        }
    }

    /// Reads the JSON spelling.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "user" => Some(LspScope::User),
            "project" => Some(LspScope::Project),
            _ => None,
        }
    }
}

/// One desired language server: its entry (as written, `scope` stamp
/// included) and where it came from.
#[derive(Clone, Debug, PartialEq)]
pub struct LspEntry {
    /// The entry's fields.
    pub config: Object,
    /// Whether the user's file or the project's `.lsp.json` wrote it; a project entry
    /// needs approval.
    pub scope: LspScope,
}

/// Server name → desired language server, in map order.
pub type LspServers = Object<LspEntry>;

/// The desired map of a project file over a user file (SPEC §14.1): a
/// project entry replaces a user entry of the same name whole. Every entry
/// is stamped with its `scope`. Map order: user names first as written, then
/// project-only names (integer-like names first, as ECMAScript orders them).
pub fn merge_lsp(user: &Object<Object>, project: &Object<Object>) -> LspServers {
    let mut out = LspServers::new();
    for (layer, scope) in [(user, LspScope::User), (project, LspScope::Project)] {
        for (name, config) in layer {
            let mut config = config.clone();
            config.remove(SCOPE);
            config.insert(SCOPE.into(), scope.as_str().into());
            out.insert(name.clone(), LspEntry { config, scope });
        }
    }
    out
}

/// Reads a desired map `{name: {..., scope: "user" | "project"}}`.
///
/// # Errors
/// A message naming the first entry that is not an object or has no valid
/// `scope`.
pub fn lsp_servers_from_value(value: &Value) -> Result<LspServers, String> {
    let Value::Object(map) = value else {
        return Err(format!("must be an object, found {}", value.preview(60)));
    };
    map.iter()
        .map(|(name, entry)| {
            let quoted = Value::from(name.as_str()).to_json();
            let Value::Object(config) = entry else {
                return Err(format!(
                    "entry {quoted} must be an object, found {}",
                    entry.preview(60)
                ));
            };
            let scope = match config.get(SCOPE) {
                Some(Value::String(s)) => LspScope::parse(s),
                _ => None,
            }
            .ok_or_else(|| {
                format!(
                    "entry {quoted}: `scope` must be \"user\" or \"project\", found {}",
                    config
                        .get(SCOPE)
                        .map_or("nothing".into(), |v| v.preview(40))
                )
            })?;
            Ok((
                name.clone(),
                LspEntry {
                    config: config.clone(),
                    scope,
                },
            ))
        })
        .collect()
}

// ---------------------------------------------------------------------------
// Plans

/// One step of a language-server plan (SPEC §14.2). `from` / `to` are seed ids.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "action", rename_all = "lowercase")]
#[cfg_attr(
    feature = "ts",
    derive(ts_rs::TS),
    ts(rename = "LspPlanAction", tag = "action", rename_all = "lowercase")
)]
pub enum LspAction {
    /// Start a server that is not online.
    Connect {
        /// The language server's name: its key in the desired or online map.
        name: String,
        /// The seed id of the process to start: `<name>::<digest>` of its seed
        /// fields, the ones only a restart can change.
        to: LspSeedId,
    },
    /// Stop the running process and start one with the new seed.
    Restart {
        /// The language server's name: its key in the desired or online map.
        name: String,
        /// The running server's seed id.
        from: LspSeedId,
        /// The desired seed id.
        to: LspSeedId,
        /// The seed fields that differ, sorted by UTF-16 code units.
        changed: Vec<String>,
    },
    /// Apply the new live fields to the running process (push `settings`,
    /// re-route, adopt the new policy); no restart.
    Reconfigure {
        /// The language server's name: its key in the desired or online map.
        name: String,
        /// The live fields that differ, sorted by UTF-16 code units.
        changed: Vec<String>,
    },
    /// Start a failed or disconnected server again (with the new live fields).
    Retry {
        /// The language server's name: its key in the desired or online map.
        name: String,
        /// The attempt number this start is (`attempts + 1`).
        attempt: u64,
    },
    /// Stop the server.
    Disconnect {
        /// The language server's name: its key in the desired or online map.
        name: String,
        /// `removed`, `rejected` or `pending_approval`.
        reason: Reason,
    },
    /// Leave the server alone.
    Keep {
        /// The language server's name: its key in the desired or online map.
        name: String,
        /// `pending_approval` when it keeps running its last approved config
        /// while an edit waits for approval; else not set.
        #[cfg_attr(feature = "ts", ts(optional))]
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<Reason>,
    },
    /// Do not start the server now.
    Skip {
        /// The language server's name: its key in the desired or online map.
        name: String,
        /// `pending_approval`, `rejected`, `backing_off` or `crash_loop`.
        reason: Reason,
    },
    /// Do nothing at all (untrusted folder).
    Noop {
        /// Why (`untrusted_folder`).
        reason: Reason,
    },
}

impl LspAction {
    /// The JSON spelling of the action kind.
    pub fn kind(&self) -> &'static str {
        match self {
            LspAction::Connect { .. } => "connect",
            LspAction::Restart { .. } => "restart",
            LspAction::Reconfigure { .. } => "reconfigure",
            LspAction::Retry { .. } => "retry",
            LspAction::Disconnect { .. } => "disconnect",
            LspAction::Keep { .. } => "keep",
            LspAction::Skip { .. } => "skip",
            LspAction::Noop { .. } => "noop",
        }
    }

    /// The server the action is about (`None` for `noop`).
    pub fn name(&self) -> Option<&str> {
        match self {
            LspAction::Connect { name, .. }
            | LspAction::Restart { name, .. }
            | LspAction::Reconfigure { name, .. }
            | LspAction::Retry { name, .. }
            | LspAction::Disconnect { name, .. }
            | LspAction::Keep { name, .. }
            | LspAction::Skip { name, .. } => Some(name),
            LspAction::Noop { .. } => None,
        }
    }

    /// Whether the action starts a process.
    pub fn starts(&self) -> bool {
        matches!(
            self,
            LspAction::Connect { .. } | LspAction::Restart { .. } | LspAction::Retry { .. }
        )
    }

    /// Whether the action applies anything of the desired config to a
    /// process (starts one or pushes live fields).
    pub fn applies(&self) -> bool {
        self.starts() || matches!(self, LspAction::Reconfigure { .. })
    }

    /// `{"action", "name"?, "reason"?, "from"?, "to"?, "changed"?, "attempt"?}`
    /// with absent fields omitted (SPEC §10, §14.6).
    pub fn to_value(&self) -> Value {
        let mut object = Object::new();
        object.insert("action".into(), self.kind().into());
        if let Some(name) = self.name() {
            object.insert("name".into(), name.into());
        }
        let changed_value =
            |changed: &[String]| Value::Array(changed.iter().map(|f| f.as_str().into()).collect());
        match self {
            LspAction::Disconnect { reason, .. }
            | LspAction::Skip { reason, .. }
            | LspAction::Noop { reason }
            | LspAction::Keep {
                reason: Some(reason),
                ..
            } => {
                object.insert("reason".into(), reason.as_str().into());
            }
            LspAction::Connect { to, .. } => {
                object.insert("to".into(), to.as_str().into());
            }
            LspAction::Restart {
                from, to, changed, ..
            } => {
                object.insert("from".into(), from.as_str().into());
                object.insert("to".into(), to.as_str().into());
                object.insert("changed".into(), changed_value(changed));
            }
            LspAction::Reconfigure { changed, .. } => {
                object.insert("changed".into(), changed_value(changed));
            }
            LspAction::Retry { attempt, .. } => {
                object.insert("attempt".into(), Value::Number(*attempt as f64));
            }
            LspAction::Keep { reason: None, .. } => {}
        }
        Value::Object(object)
    }
}

/// The ordered actions of one language-server reconcile pass.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct LspPlan {
    /// Groups `disconnect`, `restart`, `reconfigure`, `retry`, `connect`,
    /// `keep`, `skip`; inside each, desired names in map order, then names
    /// only online in online-map order.
    pub actions: Vec<LspAction>,
}

impl LspPlan {
    /// `{"actions": [...]}`.
    pub fn to_value(&self) -> Value {
        let mut object = Object::new();
        object.insert(
            "actions".into(),
            Value::Array(self.actions.iter().map(LspAction::to_value).collect()),
        );
        Value::Object(object)
    }

    /// Whether executing the plan would change nothing.
    pub fn is_quiet(&self) -> bool {
        self.actions.iter().all(|a| {
            matches!(
                a,
                LspAction::Keep { .. } | LspAction::Skip { .. } | LspAction::Noop { .. }
            )
        })
    }
}

/// The inputs of [`lsp_plan`] besides the two maps.
#[derive(Clone, Copy, Debug)]
pub struct LspPlanContext<'a> {
    /// The language-server approval records (SPEC §14.3).
    pub approvals: &'a Approvals,
    /// The project root the records are keyed by (exact string).
    pub project_root: &'a str,
    /// Whether the folder is trusted; if not, the plan is a single `noop`.
    pub trusted_folder: bool,
    /// The host's clock, in milliseconds.
    pub now: Millis,
}

/// The plan that brings the running language servers to the admitted part of
/// `desired` (SPEC §14.2).
///
/// Every name in `desired ∪ online` gets exactly one action from the first
/// matching row of the §14.2 table; an untrusted folder gets one `noop`.
/// Seed edits restart, live edits reconfigure a running server, and a
/// project entry is never started, restarted or reconfigured unless approved
/// for its current config — while an edit waits for approval, a server
/// running its last approved config keeps running it untouched.
pub fn lsp_plan(desired: &LspServers, online: &Online, ctx: LspPlanContext<'_>) -> LspPlan {
    if !ctx.trusted_folder {
        return LspPlan {
            actions: vec![LspAction::Noop {
                reason: Reason::UntrustedFolder,
            }],
        };
    }
    let mut groups: [Vec<LspAction>; 7] = Default::default();
    let mut push = |action: LspAction| {
        let group = match action {
            LspAction::Disconnect { .. } => 0,
            LspAction::Restart { .. } => 1,
            LspAction::Reconfigure { .. } => 2,
            LspAction::Retry { .. } => 3,
            LspAction::Connect { .. } => 4,
            LspAction::Keep { .. } => 5,
            LspAction::Skip { .. } | LspAction::Noop { .. } => 6,
        };
        groups[group].push(action);
    };
    for (name, entry) in desired {
        push(desired_action(name, entry, online.get(name), ctx));
    }
    for name in online.keys() {
        if !desired.contains_key(name) {
            push(LspAction::Disconnect {
                name: name.clone(),
                reason: Reason::Removed,
            });
        }
    }
    LspPlan {
        actions: groups.into_iter().flatten().collect(),
    }
}

/// The action for one desired name (rows 2–9 of the §14.2 table).
fn desired_action(
    name: &str,
    entry: &LspEntry,
    live: Option<&OnlineEntry>,
    ctx: LspPlanContext<'_>,
) -> LspAction {
    let name_owned = name.to_owned();
    let state = match entry.scope {
        LspScope::User => ApprovalState::Approved,
        LspScope::Project => {
            lsp_approval_state(ctx.approvals, ctx.project_root, name, &entry.config)
        }
    };
    let Some(live) = live else {
        return match state {
            ApprovalState::Approved => LspAction::Connect {
                to: lsp_seed_id(name, &entry.config),
                name: name_owned,
            },
            ApprovalState::Rejected => LspAction::Skip {
                name: name_owned,
                reason: Reason::Rejected,
            },
            ApprovalState::Pending => LspAction::Skip {
                name: name_owned,
                reason: Reason::PendingApproval,
            },
        };
    };
    match state {
        ApprovalState::Rejected => {
            return LspAction::Disconnect {
                name: name_owned,
                reason: Reason::Rejected,
            }
        }
        ApprovalState::Pending => {
            let running_approved =
                lsp_approval_state(ctx.approvals, ctx.project_root, name, live.config.object())
                    == ApprovalState::Approved;
            return if running_approved {
                LspAction::Keep {
                    name: name_owned,
                    reason: Some(Reason::PendingApproval),
                }
            } else {
                LspAction::Disconnect {
                    name: name_owned,
                    reason: Reason::PendingApproval,
                }
            };
        }
        ApprovalState::Approved => {}
    }
    let seed = seed_changes(live.config.object(), &entry.config);
    if !seed.is_empty() {
        return LspAction::Restart {
            from: lsp_seed_id(name, live.config.object()),
            to: lsp_seed_id(name, &entry.config),
            changed: seed,
            name: name_owned,
        };
    }
    let healthy = matches!(live.status, Status::Connected | Status::Connecting);
    if healthy {
        let live_fields = live_changes(live.config.object(), &entry.config);
        return if live_fields.is_empty() {
            LspAction::Keep {
                name: name_owned,
                reason: None,
            }
        } else {
            LspAction::Reconfigure {
                name: name_owned,
                changed: live_fields,
            }
        };
    }
    if live.crash_loop {
        LspAction::Skip {
            name: name_owned,
            reason: Reason::CrashLoop,
        }
    } else if live.status == Status::Failed && live.retry_at.is_some_and(|at| ctx.now < at) {
        LspAction::Skip {
            name: name_owned,
            reason: Reason::BackingOff,
        }
    } else {
        LspAction::Retry {
            name: name_owned,
            attempt: u64::from(live.attempts) + 1,
        }
    }
}

/// Every admitted entry of `desired` (user entries, approved project
/// entries), connected with its own config: the online state right after a
/// fully successful reconcile.
pub fn lsp_online_of(desired: &LspServers, approvals: &Approvals, project_root: &str) -> Online {
    desired
        .iter()
        .filter(|(name, entry)| {
            entry.scope == LspScope::User
                || lsp_approval_state(approvals, project_root, name, &entry.config)
                    == ApprovalState::Approved
        })
        .map(|(name, entry)| {
            (
                name.clone(),
                OnlineEntry::connected(ServerConfig::new(entry.config.clone())),
            )
        })
        .collect()
}

// ---------------------------------------------------------------------------
// `.lsp.json`

/// What [`parse_lsp_json`] read from a `.lsp.json` (or the user file).
#[derive(Clone, Debug, PartialEq, Default)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS), ts(rename = "ParsedLspJson"))]
pub struct LspJson {
    /// The valid entries, expanded, a written `scope` removed (and the
    /// requested one stamped), in map order.
    #[cfg_attr(feature = "ts", ts(as = "Object<LspEntry>"))]
    pub servers: Object<Object>,
    /// One sentence per problem: the file is unreadable or not an object, or
    /// an entry is invalid (naming the entry, the field and what to do).
    pub errors: Vec<String>,
}

/// Options of [`parse_lsp_json`].
#[derive(Clone, Copy, Debug)]
pub struct LspParseOptions<'a> {
    /// Variables for `$VAR` / `${VAR}` expansion (the kernel never reads the
    /// process environment); `None` expands nothing.
    pub env: Option<&'a Object>,
    /// `false` turns expansion off (yolo mode).
    pub expand: bool,
    /// The scope to stamp on every entry, if any. A `scope` written in the
    /// file is removed either way: provenance comes from which file it is,
    /// never from the file's own claim ([`merge_lsp`] stamps it too).
    pub scope: Option<LspScope>,
    /// The project root: an absolute `workspaceFolder` must lie inside it.
    /// Without it, only relative folders that stay inside are accepted.
    pub project_root: Option<&'a str>,
}

impl Default for LspParseOptions<'_> {
    fn default() -> Self {
        LspParseOptions {
            env: None,
            expand: true,
            scope: None,
            project_root: None,
        }
    }
}

/// Reads a language-server file (SPEC §14.1).
///
/// A BOM is stripped and comments are allowed; otherwise strict JSON. The
/// top level must be an object mapping names to entries, else one error and
/// no servers. Each entry is expanded (see [`EXPANDED_FIELDS`]), checked,
/// and either kept (unknown fields included, a written `scope` replaced by
/// [`LspParseOptions::scope`] or removed) or reported
/// with one message listing every problem and skipped; the other entries
/// still load.
pub fn parse_lsp_json(text: &str, options: LspParseOptions<'_>) -> LspJson {
    let mut out = LspJson::default();
    let parsed = match json::parse_jsonc(text) {
        Ok(value) => value,
        Err(e) => {
            out.errors.push(format!(
                "failed to parse the language-server file: {e}; fix the JSON (comments are \
                 allowed, trailing commas are not)"
            ));
            return out;
        }
    };
    let Value::Object(entries) = parsed else {
        out.errors.push(format!(
            "the language-server file must be a JSON object mapping server names to entries, \
             found {}",
            parsed.preview(40)
        ));
        return out;
    };
    lsp_json_from_value(&entries, options)
}

/// [`parse_lsp_json`] of a file already parsed: `entries`, its top-level object (a host that
/// parsed the text once to check it reads the entries from that parse).
pub fn lsp_json_from_value(entries: &Object, options: LspParseOptions<'_>) -> LspJson {
    let mut out = LspJson::default();
    for (name, entry) in entries {
        let quoted = Value::from(name.as_str()).to_json();
        let Value::Object(entry) = entry else {
            out.errors.push(format!(
                "language server {quoted}: the entry must be an object like {{\"command\": \
                 \"...\"}}, found {}; skipped",
                entry.preview(40)
            ));
            continue;
        };
        let mut entry = entry.clone();
        if let (true, Some(env)) = (options.expand, options.env) {
            for field in EXPANDED_FIELDS {
                if let Some(value) = entry.get_mut(field) {
                    *value = expand_env_vars(value, env);
                }
            }
        }
        let problems = entry_problems(&entry, options.project_root);
        if !problems.is_empty() {
            out.errors.push(format!(
                "language server {quoted}: {}; skipped",
                problems.join("; ")
            ));
            continue;
        }
        entry.remove(SCOPE);
        if let Some(scope) = options.scope {
            entry.insert(SCOPE.into(), scope.as_str().into());
        }
        out.servers.insert(name.clone(), entry);
    }
    out
}

/// Every problem of one (expanded) entry, each naming its field and the fix.
fn entry_problems(entry: &Object, project_root: Option<&str>) -> Vec<String> {
    let mut problems = Vec::new();
    let field = |key: &str| entry.get(key).filter(|v| !v.is_null());
    let wrong = |problems: &mut Vec<String>, key: &str, expected: &str, found: &Value| {
        problems.push(format!(
            "field `{key}` must be {expected}, found {}",
            found.preview(40)
        ));
    };
    let transport = match field("transport") {
        None => Some("stdio"),
        Some(Value::String(t)) if matches!(t.as_str(), "stdio" | "tcp" | "socket") => {
            Some(t.as_str())
        }
        Some(other) => {
            wrong(
                &mut problems,
                "transport",
                "\"stdio\", \"tcp\" or \"socket\" (or left out for stdio)",
                other,
            );
            None
        }
    };
    match field("command") {
        Some(Value::String(c)) if !c.is_empty() => {}
        Some(other) => wrong(
            &mut problems,
            "command",
            "a non-empty string (the program to run)",
            other,
        ),
        None if transport == Some("stdio") => problems.push(
            "field `command` is missing: a stdio language server needs the program to run".into(),
        ),
        None => {}
    }
    match field("args") {
        None => {}
        Some(Value::Array(items)) if items.iter().all(|v| v.as_str().is_some()) => {}
        Some(other) => wrong(&mut problems, "args", "an array of strings", other),
    }
    for key in ["env", "extensionToLanguage"] {
        match field(key) {
            None => {}
            Some(Value::Object(map)) if map.values().all(|v| v.as_str().is_some()) => {}
            Some(other) => wrong(&mut problems, key, "an object of string values", other),
        }
    }
    match field("socket") {
        None if matches!(transport, Some("tcp" | "socket")) => problems.push(format!(
            "field `socket` is missing: transport {:?} needs a socket path or {{\"host\", \
             \"port\"}}",
            transport.unwrap_or_default()
        )),
        None => {}
        Some(value) if valid_socket(value) => {}
        Some(other) => wrong(
            &mut problems,
            "socket",
            "a socket path or {\"host\": string, \"port\": 1-65535}",
            other,
        ),
    }
    match field("workspaceFolder") {
        None => {}
        Some(Value::String(folder)) if folder_inside(folder, project_root) => {}
        Some(Value::String(folder)) => problems.push(format!(
            "field `workspaceFolder` {} is outside the project root: use a folder \
             inside the project (relative paths are resolved against it)",
            Value::from(folder.as_str()).to_json()
        )),
        Some(other) => wrong(
            &mut problems,
            "workspaceFolder",
            "a path inside the project root",
            other,
        ),
    }
    match field("settings") {
        None | Some(Value::Object(_)) => {}
        Some(other) => wrong(&mut problems, "settings", "an object", other),
    }
    for key in ["startupTimeout", "shutdownTimeout"] {
        match field(key) {
            None => {}
            Some(Value::Number(n)) if n.is_finite() && *n >= 0.0 => {}
            Some(other) => wrong(
                &mut problems,
                key,
                "a non-negative number of milliseconds",
                other,
            ),
        }
    }
    for key in ["restartOnCrash", "trustRequired"] {
        match field(key) {
            None | Some(Value::Bool(_)) => {}
            Some(other) => wrong(&mut problems, key, "true or false", other),
        }
    }
    match field("maxRestarts") {
        None => {}
        Some(v) if whole_number(v, u64::from(u32::MAX)).is_some() => {}
        Some(other) => wrong(
            &mut problems,
            "maxRestarts",
            "a non-negative integer",
            other,
        ),
    }
    problems
}

/// A socket path (non-empty string) or `{host: non-empty string, port: 1-65535}`.
fn valid_socket(value: &Value) -> bool {
    match value {
        Value::String(path) => !path.is_empty(),
        Value::Object(o) => {
            let host = o.get("host").and_then(Value::as_str);
            let port = o.get("port").and_then(|p| whole_number(p, 65_535));
            host.is_some_and(|h| !h.is_empty()) && port.is_some_and(|p| p >= 1)
        }
        _ => false,
    }
}

/// Whether `path` is absolute (POSIX `/…`, Windows `\…`, `C:\…` or `C:/…`).
fn is_absolute(path: &str) -> bool {
    let bytes = path.as_bytes();
    matches!(bytes.first(), Some(b'/' | b'\\'))
        || (bytes.len() >= 2 && bytes[0].is_ascii_alphabetic() && bytes[1] == b':')
}

/// The lexically normalized components of `path` (`.` and empty ones
/// dropped, `..` popping one); `None` when a `..` climbs above the start.
fn normalized(path: &str) -> Option<Vec<&str>> {
    let mut parts = Vec::new();
    for part in path.split(['/', '\\']) {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            other => parts.push(other),
        }
    }
    Some(parts)
}

/// Whether `folder` names the project root or a folder below it, lexically:
/// a relative folder must not climb out with `..`; an absolute one must
/// start with the root's components (and is refused when no root is known).
fn folder_inside(folder: &str, project_root: Option<&str>) -> bool {
    if !is_absolute(folder) {
        return normalized(folder).is_some();
    }
    let Some(root) = project_root else {
        return false;
    };
    match (normalized(folder), normalized(root)) {
        (Some(folder), Some(root)) => folder.starts_with(&root),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The serde form of every kind of language-server action is its §14.6 JSON.
    #[test]
    fn the_serde_form_of_an_lsp_action_is_its_spec_json() {
        let seed = |s: &str| LspSeedId(s.to_owned());
        let actions = [
            LspAction::Connect {
                name: "a".into(),
                to: seed("a::1"),
            },
            LspAction::Restart {
                name: "b".into(),
                from: seed("b::1"),
                to: seed("b::2"),
                changed: vec!["command".into()],
            },
            LspAction::Reconfigure {
                name: "c".into(),
                changed: vec!["settings".into()],
            },
            LspAction::Retry {
                name: "d".into(),
                attempt: 2,
            },
            LspAction::Disconnect {
                name: "e".into(),
                reason: Reason::Removed,
            },
            LspAction::Keep {
                name: "f".into(),
                reason: None,
            },
            LspAction::Keep {
                name: "g".into(),
                reason: Some(Reason::PendingApproval),
            },
            LspAction::Skip {
                name: "h".into(),
                reason: Reason::Rejected,
            },
            LspAction::Noop {
                reason: Reason::UntrustedFolder,
            },
        ];
        for action in actions {
            let spec: serde_json::Value =
                serde_json::from_str(&action.to_value().to_json()).expect("JSON");
            assert_eq!(serde_json::to_value(&action).expect("serializes"), spec);
            let back: LspAction = serde_json::from_value(spec).expect("reads back");
            assert_eq!(back, action);
        }
    }

    const ROOT: &str = "/home/dev/repo";

    fn obj(text: &str) -> Object {
        match json::parse(text) {
            Ok(Value::Object(o)) => o,
            other => panic!("not an object: {other:?}"),
        }
    }

    fn entry(text: &str, scope: LspScope) -> LspEntry {
        LspEntry {
            config: obj(text),
            scope,
        }
    }

    fn online(config: &str, status: Status) -> OnlineEntry {
        OnlineEntry {
            status,
            ..OnlineEntry::connected(ServerConfig::new(obj(config)))
        }
    }

    fn approvals_for(decisions: &[(&str, &str, &str)]) -> Approvals {
        let mut project = Object::new();
        for (name, config, status) in decisions {
            let mut record = Object::new();
            record.insert("hash".into(), lsp_approval_hash(&obj(config)).0.into());
            record.insert("status".into(), (*status).into());
            project.insert((*name).into(), Value::Object(record));
        }
        let mut store = Object::new();
        store.insert(ROOT.into(), Value::Object(project));
        Approvals::new(Value::Object(store))
    }

    fn plan_of(
        desired: &[(&str, LspEntry)],
        on: &[(&str, OnlineEntry)],
        ap: &Approvals,
    ) -> Vec<String> {
        let desired: LspServers = desired
            .iter()
            .map(|(n, e)| ((*n).to_owned(), e.clone()))
            .collect();
        let on: Online = on
            .iter()
            .map(|(n, e)| ((*n).to_owned(), e.clone()))
            .collect();
        let ctx = LspPlanContext {
            approvals: ap,
            project_root: ROOT,
            trusted_folder: true,
            now: Millis(1000),
        };
        lsp_plan(&desired, &on, ctx)
            .actions
            .iter()
            .map(|a| a.to_value().to_json())
            .collect()
    }

    const BASE: &str = r#"{"command":"node","args":["ls.js"],"settings":{"a":1}}"#;

    #[test]
    fn defaults_do_not_change_the_seed_id() {
        let id = lsp_seed_id("j", &obj(r#"{"command":"pylsp"}"#));
        for text in [
            r#"{"command":"pylsp","args":[]}"#,
            r#"{"command":"pylsp","args":null,"env":{}}"#,
            r#"{"command":"pylsp","transport":"stdio","socket":null}"#,
            r#"{"command":"pylsp","settings":{"x":1},"extensionToLanguage":{".py":"python"}}"#,
            r#"{"command":"pylsp","startupTimeout":1,"maxRestarts":0,"restartOnCrash":false}"#,
            r#"{"command":"pylsp","x-unknown":true,"scope":"project","trustRequired":true}"#,
        ] {
            assert_eq!(lsp_seed_id("j", &obj(text)), id, "{text}");
        }
        assert_ne!(lsp_seed_id("k", &obj(r#"{"command":"pylsp"}"#)), id);
    }

    #[test]
    fn seed_id_is_key_order_independent_and_keeps_array_order() {
        let a = lsp_seed_id("s", &obj(r#"{"command":"x","env":{"B":"2","A":"1"}}"#));
        let b = lsp_seed_id("s", &obj(r#"{"env":{"A":"1","B":"2"},"command":"x"}"#));
        assert_eq!(a, b);
        let c = lsp_seed_id("s", &obj(r#"{"command":"x","args":["1","2"]}"#));
        let d = lsp_seed_id("s", &obj(r#"{"command":"x","args":["2","1"]}"#));
        assert_ne!(c, d);
        assert!(lsp_seed_id("a::b", &obj("{}")).0.starts_with("a::b::"));
        assert_eq!(lsp_seed_id("a::b", &obj("{}")).0.len(), "a::b::".len() + 16);
    }

    #[test]
    fn a_proto_subtree_is_hashed_and_compared_like_any_other_key() {
        // `settings` and `initializationOptions` reach the server whole, a
        // `__proto__` member included (JSON.parse makes it an own property
        // and JSON.stringify prints it): the hash must see it too.
        let plain = r#"{"command":"node","settings":{"a":1},"initializationOptions":{"x":1}}"#;
        let with = |settings: &str, options: &str| {
            obj(&format!(
                r#"{{"command":"node","settings":{settings},"initializationOptions":{options}}}"#
            ))
        };
        let in_settings = with(r#"{"a":1,"__proto__":{"cmd":"evil"}}"#, r#"{"x":1}"#);
        let in_options = with(r#"{"a":1}"#, r#"{"x":1,"__proto__":{"cmd":"evil"}}"#);
        let other_value = with(r#"{"a":1,"__proto__":{"cmd":"other"}}"#, r#"{"x":1}"#);
        let base = lsp_approval_hash(&obj(plain));
        for changed in [&in_settings, &in_options, &other_value] {
            assert_ne!(lsp_approval_hash(changed), base);
        }
        assert_ne!(
            lsp_approval_hash(&in_settings),
            lsp_approval_hash(&other_value)
        );
        // A top-level `__proto__` member is hashed as well.
        assert_ne!(
            lsp_approval_hash(&obj(
                r#"{"command":"node","settings":{"a":1},"initializationOptions":{"x":1},"__proto__":{"a":1}}"#
            )),
            base
        );
        // Sorted inside like any object, so key order still does not count.
        assert_eq!(
            sorted_json(&Value::Object(with(
                r#"{"__proto__":{"b":1,"a":2}}"#,
                "null"
            ))),
            r#"{"command":"node","initializationOptions":null,"settings":{"__proto__":{"a":2,"b":1}}}"#
        );
        // And a change there is a change: pushed live, or a restart for the seed.
        assert_eq!(live_changes(&obj(plain), &in_settings), ["settings"]);
        assert_eq!(
            seed_changes(&obj(plain), &in_options),
            ["initializationOptions"]
        );
    }

    #[test]
    fn approval_hash_covers_settings_but_not_routing_or_policy() {
        let base = lsp_approval_hash(&obj(BASE));
        let same = lsp_approval_hash(&obj(
            r#"{"settings":{"a":1},"args":["ls.js"],"command":"node","scope":"project",
                "extensionToLanguage":{".js":"js"},"startupTimeout":1,"shutdownTimeout":2,
                "restartOnCrash":false,"maxRestarts":1,"trustRequired":false}"#,
        ));
        assert_eq!(base, same);
        for text in [
            r#"{"command":"node","args":["ls.js"],"settings":{"a":2}}"#,
            r#"{"command":"node","args":["ls.js"],"settings":{"a":1},"initializationOptions":{}}"#,
            r#"{"command":"node","args":["ls.js"],"settings":{"a":1},"x-note":"n"}"#,
            // As written: an explicit default is a different text.
            r#"{"command":"node","args":["ls.js"],"settings":{"a":1},"env":{}}"#,
        ] {
            assert_ne!(lsp_approval_hash(&obj(text)), base, "{text}");
        }
        assert_eq!(base.0.len(), 64);
    }

    #[test]
    fn changed_fields_are_sorted_and_defaulted() {
        let before = obj(r#"{"command":"a","transport":"stdio","settings":{}}"#);
        let after = obj(
            r#"{"command":"b","args":["x"],"workspaceFolder":"sub","startupTimeout":10000,
                "shutdownTimeout":1,"extensionToLanguage":{".a":"a"}}"#,
        );
        assert_eq!(
            seed_changes(&before, &after),
            ["args", "command", "workspaceFolder"]
        );
        assert_eq!(
            live_changes(&before, &after),
            ["extensionToLanguage", "shutdownTimeout"]
        );
    }

    #[test]
    fn live_edit_reconfigures_and_seed_edit_restarts() {
        let ap = Approvals::empty();
        let edited = r#"{"command":"node","args":["ls.js"],"settings":{"a":2}}"#;
        let got = plan_of(
            &[("j", entry(edited, LspScope::User))],
            &[("j", online(BASE, Status::Connected))],
            &ap,
        );
        assert_eq!(
            got,
            [r#"{"action":"reconfigure","name":"j","changed":["settings"]}"#]
        );
        let edited = r#"{"command":"node","args":["ls.js","-v"],"settings":{"a":2}}"#;
        let got = plan_of(
            &[("j", entry(edited, LspScope::User))],
            &[("j", online(BASE, Status::Connected))],
            &ap,
        );
        assert!(got[0].starts_with(r#"{"action":"restart","name":"j","from":"j::"#));
        assert!(got[0].ends_with(r#""changed":["args"]}"#), "{got:?}");
    }

    #[test]
    fn a_failed_server_with_a_live_edit_retries_instead_of_reconfiguring() {
        let edited = r#"{"command":"node","args":["ls.js"],"settings":{"a":2}}"#;
        let mut failed = online(BASE, Status::Failed);
        failed.attempts = 2;
        let got = plan_of(
            &[("j", entry(edited, LspScope::User))],
            &[("j", failed.clone())],
            &Approvals::empty(),
        );
        assert_eq!(got, [r#"{"action":"retry","name":"j","attempt":3}"#]);
        failed.crash_loop = true;
        let got = plan_of(
            &[("j", entry(edited, LspScope::User))],
            &[("j", failed.clone())],
            &Approvals::empty(),
        );
        assert_eq!(
            got,
            [r#"{"action":"skip","name":"j","reason":"crash_loop"}"#]
        );
        failed.crash_loop = false;
        failed.retry_at = Some(Millis(1001));
        let got = plan_of(
            &[("j", entry(edited, LspScope::User))],
            &[("j", failed)],
            &Approvals::empty(),
        );
        assert_eq!(
            got,
            [r#"{"action":"skip","name":"j","reason":"backing_off"}"#]
        );
    }

    #[test]
    fn project_entries_wait_for_approval() {
        let edited = r#"{"command":"node","args":["ls.js"],"settings":{"a":2}}"#;
        // Not online, no record: never started.
        let got = plan_of(
            &[("p", entry(BASE, LspScope::Project))],
            &[],
            &Approvals::empty(),
        );
        assert_eq!(
            got,
            [r#"{"action":"skip","name":"p","reason":"pending_approval"}"#]
        );
        // Running the approved config while an edit waits: keep, untouched.
        let ap = approvals_for(&[("p", BASE, "approved")]);
        let got = plan_of(
            &[("p", entry(edited, LspScope::Project))],
            &[("p", online(BASE, Status::Connected))],
            &ap,
        );
        assert_eq!(
            got,
            [r#"{"action":"keep","name":"p","reason":"pending_approval"}"#]
        );
        // Running something never approved: stop it.
        let got = plan_of(
            &[("p", entry(edited, LspScope::Project))],
            &[("p", online(BASE, Status::Connected))],
            &Approvals::empty(),
        );
        assert_eq!(
            got,
            [r#"{"action":"disconnect","name":"p","reason":"pending_approval"}"#]
        );
        // Rejected: stop it, and never start it.
        let ap = approvals_for(&[("p", edited, "rejected")]);
        let got = plan_of(
            &[("p", entry(edited, LspScope::Project))],
            &[("p", online(BASE, Status::Connected))],
            &ap,
        );
        assert_eq!(
            got,
            [r#"{"action":"disconnect","name":"p","reason":"rejected"}"#]
        );
        let got = plan_of(&[("p", entry(edited, LspScope::Project))], &[], &ap);
        assert_eq!(got, [r#"{"action":"skip","name":"p","reason":"rejected"}"#]);
        // Approved: connect.
        let ap = approvals_for(&[("p", edited, "approved")]);
        let got = plan_of(&[("p", entry(edited, LspScope::Project))], &[], &ap);
        assert!(got[0].starts_with(r#"{"action":"connect","name":"p","to":"p::"#));
    }

    #[test]
    fn plan_groups_and_orders_actions() {
        let ap = Approvals::empty();
        let got = plan_of(
            &[
                ("b", entry(BASE, LspScope::User)),
                ("a", entry(BASE, LspScope::Project)),
                ("c", entry(r#"{"command":"z"}"#, LspScope::User)),
            ],
            &[
                ("gone", online(BASE, Status::Connected)),
                ("c", online(r#"{"command":"y"}"#, Status::Connected)),
            ],
            &ap,
        );
        let kinds: Vec<&str> = got
            .iter()
            .map(|a| a.split(',').next().unwrap_or(""))
            .collect();
        assert_eq!(
            kinds,
            [
                r#"{"action":"disconnect""#,
                r#"{"action":"restart""#,
                r#"{"action":"connect""#,
                r#"{"action":"skip""#
            ]
        );
        assert!(got[0].contains(r#""name":"gone""#));
        assert!(got[2].contains(r#""name":"b""#));
        assert!(got[3].contains(r#""name":"a""#));
    }

    #[test]
    fn untrusted_folder_is_a_single_noop() {
        let desired: LspServers = [("j".to_owned(), entry(BASE, LspScope::User))]
            .into_iter()
            .collect();
        let ap = Approvals::empty();
        let ctx = LspPlanContext {
            approvals: &ap,
            project_root: ROOT,
            trusted_folder: false,
            now: Millis(0),
        };
        let plan = lsp_plan(&desired, &Online::new(), ctx);
        assert_eq!(
            plan.to_value().to_json(),
            r#"{"actions":[{"action":"noop","reason":"untrusted_folder"}]}"#
        );
    }

    #[test]
    fn parse_keeps_valid_entries_and_reports_each_invalid_one() {
        let text = "\u{feff}// language servers\n{\n\
            \"ok\": {\"command\": \"$BIN/pylsp\", \"args\": [\"${MODE}\"], \"x\": 1, \"scope\": \"user\"},\n\
            \"noCommand\": {\"args\": []},\n\
            \"badTypes\": {\"command\": \"x\", \"args\": \"-v\", \"env\": {\"A\": 1}},\n\
            \"tcp\": {\"transport\": \"tcp\", \"socket\": {\"host\": \"localhost\", \"port\": 2087}},\n\
            \"tcpNoSocket\": {\"transport\": \"tcp\"},\n\
            \"outside\": {\"command\": \"x\", \"workspaceFolder\": \"../other\"},\n\
            \"inside\": {\"command\": \"x\", \"workspaceFolder\": \"a/../b/./c\"},\n\
            \"notObject\": 5\n}";
        let mut env = Object::new();
        env.insert("BIN".into(), "/opt/bin".into());
        env.insert("MODE".into(), "--stdio".into());
        let parsed = parse_lsp_json(
            text,
            LspParseOptions {
                env: Some(&env),
                ..LspParseOptions::default()
            },
        );
        let names: Vec<&String> = parsed.servers.keys().collect();
        assert_eq!(names, ["ok", "tcp", "inside"]);
        assert_eq!(
            Value::Object(parsed.servers.get("ok").cloned().unwrap_or_default()).to_json(),
            r#"{"command":"/opt/bin/pylsp","args":["--stdio"],"x":1}"#
        );
        assert_eq!(parsed.errors.len(), 5, "{:?}", parsed.errors);
        let bad = parsed
            .errors
            .iter()
            .find(|e| e.contains("\"badTypes\""))
            .cloned()
            .unwrap_or_default();
        assert!(bad.contains("`args`") && bad.contains("`env`"), "{bad}");
        assert!(parsed
            .errors
            .iter()
            .any(|e| e.contains("\"noCommand\"") && e.contains("`command`")));
    }

    #[test]
    fn parse_without_expansion_and_with_a_root() {
        let text = r#"{"a": {"command": "$X", "workspaceFolder": "/repo/sub"},
                       "b": {"command": "y", "workspaceFolder": "/elsewhere"}}"#;
        let mut env = Object::new();
        env.insert("X".into(), "expanded".into());
        let parsed = parse_lsp_json(
            text,
            LspParseOptions {
                env: Some(&env),
                expand: false,
                scope: Some(LspScope::User),
                project_root: Some("/repo"),
            },
        );
        assert_eq!(parsed.servers.keys().collect::<Vec<_>>(), ["a"]);
        assert_eq!(
            parsed.servers.get("a").and_then(|a| a.get("command")),
            Some(&Value::from("$X"))
        );
        assert_eq!(
            parsed.servers.get("a").and_then(|a| a.get("scope")),
            Some(&Value::from("user"))
        );
        assert_eq!(parsed.errors.len(), 1);
        // Without a root, an absolute folder cannot be shown to be inside.
        let parsed = parse_lsp_json(text, LspParseOptions::default());
        assert_eq!(parsed.errors.len(), 2);
    }

    #[test]
    fn parse_whole_file_errors() {
        for text in ["", "[]", "{\"a\": {},}", "null", "// only a comment"] {
            let parsed = parse_lsp_json(text, LspParseOptions::default());
            assert!(parsed.servers.is_empty(), "{text}");
            assert_eq!(parsed.errors.len(), 1, "{text}");
        }
        let parsed = parse_lsp_json("{}", LspParseOptions::default());
        assert!(parsed.servers.is_empty() && parsed.errors.is_empty());
    }

    #[test]
    fn folder_checks_are_lexical() {
        assert!(folder_inside("", None));
        assert!(folder_inside(".", None));
        assert!(folder_inside("a/b/..", None));
        assert!(!folder_inside("a/../..", None));
        assert!(!folder_inside("..\\x", None));
        assert!(folder_inside("/r/a", Some("/r")));
        assert!(folder_inside("/r", Some("/r/")));
        assert!(!folder_inside("/rx", Some("/r")));
        assert!(!folder_inside("/r/../etc", Some("/r")));
        assert!(!folder_inside("C:\\x", None));
    }

    #[test]
    fn merge_lets_project_entries_win_whole() {
        let user: Object<Object> = [
            ("a".to_owned(), obj(r#"{"command":"u","settings":{"x":1}}"#)),
            ("b".to_owned(), obj(r#"{"command":"u","scope":"project"}"#)),
        ]
        .into_iter()
        .collect();
        let project: Object<Object> = [("a".to_owned(), obj(r#"{"command":"p"}"#))]
            .into_iter()
            .collect();
        let merged = merge_lsp(&user, &project);
        let a = merged.get("a").cloned();
        assert_eq!(a.as_ref().map(|e| e.scope), Some(LspScope::Project));
        assert_eq!(
            a.map(|e| Value::Object(e.config).to_json()),
            Some(r#"{"command":"p","scope":"project"}"#.to_owned())
        );
        assert_eq!(merged.get("b").map(|e| e.scope), Some(LspScope::User));
        assert_eq!(merged.keys().collect::<Vec<_>>(), ["a", "b"]);
    }
}
