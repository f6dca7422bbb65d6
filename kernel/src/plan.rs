//! Reconcile plans (SPEC §6): the actions that make the live connection set
//! equal to the admitted part of the desired set, touching nothing else.
//!
//! [`plan`] diffs `desired` (the assembled settings) against `online` (what
//! the host runs, with the config each connection was started with) by
//! identity — session key in a single session, connection id in a shared
//! pool — so an unchanged server keeps its connection and its tools however
//! much changes around it. The result depends only on its inputs (level
//! triggered): a host may replan at any moment and apply the answer.

use crate::config::{ServerConfig, Servers, Transport};
use crate::gating::{Gate, Gating, Reason};
use crate::identity::{self, Canonical, ConnectionId, IdentityError};
use crate::json::{self, whole_number, Object, Value};

use crate::time::Millis;

/// Whose connections a plan is for.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS), ts(rename_all = "lowercase"))]
pub enum Mode {
    /// One session owns its connections; identity is the session key, so a
    /// `trust` or tool-filter edit reconnects.
    Session,
    /// Sessions share a pool; identity is the connection id, and sessions
    /// apply `trust` and tool filters in their own view.
    Pool,
}

impl Mode {
    /// The JSON spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Mode::Session => "session",
            Mode::Pool => "pool",
        }
    }

    /// Reads the JSON spelling.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "session" => Some(Mode::Session),
            "pool" => Some(Mode::Pool),
            _ => None,
        }
    }
}

/// The state of a live connection as the host reports it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "ts", derive(ts_rs::TS), ts(rename_all = "lowercase"))]
pub enum Status {
    /// Being started (spawned, handshaking).
    Connecting,
    /// Up and serving.
    Connected,
    /// Exited, closed or timed out; see `attempts` and `retry_at`.
    Failed,
    /// Closed without a failure (e.g. the peer ended the session).
    Disconnected,
}

impl Status {
    /// The JSON spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Connecting => "connecting",
            Status::Connected => "connected",
            Status::Failed => "failed",
            Status::Disconnected => "disconnected",
        }
    }

    /// Reads the JSON spelling.
    pub fn parse(text: &str) -> Option<Self> {
        match text {
            "connecting" => Some(Status::Connecting),
            "connected" => Some(Status::Connected),
            "failed" => Some(Status::Failed),
            "disconnected" => Some(Status::Disconnected),
            _ => None,
        }
    }
}

/// One live connection: the config it was started with and how it is doing.
#[derive(Clone, Debug, PartialEq)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS), ts(rename_all = "camelCase"))]
pub struct OnlineEntry {
    /// The config the connection was started with (not the desired one).
    pub config: ServerConfig,
    /// Its current state; with `attempts`, `retry_at`, `crash_loop` and `needs_auth` it
    /// decides between keep, retry and skip.
    pub status: Status,
    /// Consecutive failures (SPEC §9).
    #[cfg_attr(feature = "ts", ts(as = "Option<u32>", optional = nullable))]
    pub attempts: u32,
    /// When a `failed` connection may be retried; not set is "now".
    #[cfg_attr(feature = "ts", ts(optional = nullable))]
    pub retry_at: Option<Millis>,
    /// Failed too often in a row: not retried until its config changes.
    #[cfg_attr(feature = "ts", ts(as = "Option<bool>", optional = nullable))]
    pub crash_loop: bool,
    /// Waits for an authorization the host does not have (`needs_auth`): not
    /// retried until its credentials or config change.
    #[cfg_attr(feature = "ts", ts(as = "Option<bool>", optional = nullable))]
    pub needs_auth: bool,
}

impl OnlineEntry {
    /// A healthy connection started with `config`.
    pub fn connected(config: ServerConfig) -> Self {
        OnlineEntry {
            config,
            status: Status::Connected,
            attempts: 0,
            retry_at: None,
            crash_loop: false,
            needs_auth: false,
        }
    }
}

/// Server name → live connection, in map order.
pub type Online = Object<OnlineEntry>;

/// One step of a plan. `name` is the server name; `from` / `to` are
/// connection ids.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(tag = "action", rename_all = "lowercase")]
#[cfg_attr(
    feature = "ts",
    derive(ts_rs::TS),
    ts(rename = "PlanAction", tag = "action", rename_all = "lowercase")
)]
pub enum Action {
    /// Start a connection that is not online.
    Connect {
        /// The server's name: its key in the desired or online map.
        name: String,
        /// The id of the connection to start: `<name>::<fingerprint>` of the
        /// config's identity fields, so an edit that leaves them alone keeps it.
        to: ConnectionId,
    },
    /// Purge the server's tools, stop the old connection, start the new one.
    Reconnect {
        /// The server's name: its key in the desired or online map.
        name: String,
        /// The running connection's id.
        from: ConnectionId,
        /// The desired connection's id (may equal `from` in session mode).
        to: ConnectionId,
        /// The identity fields that differ, sorted by UTF-16 code units.
        changed: Vec<String>,
    },
    /// Start a failed or disconnected connection again.
    Retry {
        /// The server's name: its key in the desired or online map.
        name: String,
        /// The attempt number this start is (`attempts + 1`).
        attempt: u64,
    },
    /// Purge the server's tools and stop its connection.
    Disconnect {
        /// The server's name: its key in the desired or online map.
        name: String,
        /// Why it may not stay (`removed` or a denial reason).
        reason: Reason,
    },
    /// Leave the connection alone.
    Keep {
        /// The server's name: its key in the desired or online map.
        name: String,
    },
    /// Do not start the server now.
    Skip {
        /// The server's name: its key in the desired or online map.
        name: String,
        /// Why (a denial reason, `backing_off` or `crash_loop`).
        reason: Reason,
    },
    /// Do nothing at all.
    Noop {
        /// Why (`untrusted_folder`).
        reason: Reason,
    },
}

impl Action {
    /// The JSON spelling of the action kind.
    pub fn kind(&self) -> &'static str {
        match self {
            Action::Connect { .. } => "connect",
            Action::Reconnect { .. } => "reconnect",
            Action::Retry { .. } => "retry",
            Action::Disconnect { .. } => "disconnect",
            Action::Keep { .. } => "keep",
            Action::Skip { .. } => "skip",
            Action::Noop { .. } => "noop",
        }
    }

    /// The server the action is about (`None` for `noop`).
    pub fn name(&self) -> Option<&str> {
        match self {
            Action::Connect { name, .. }
            | Action::Reconnect { name, .. }
            | Action::Retry { name, .. }
            | Action::Disconnect { name, .. }
            | Action::Keep { name }
            | Action::Skip { name, .. } => Some(name),
            Action::Noop { .. } => None,
        }
    }

    /// Whether the action starts a connection.
    pub fn starts(&self) -> bool {
        matches!(
            self,
            Action::Connect { .. } | Action::Reconnect { .. } | Action::Retry { .. }
        )
    }

    /// `{"action", "name"?, "reason"?, "from"?, "to"?, "changed"?, "attempt"?}`
    /// with absent fields omitted (SPEC §10).
    pub fn to_value(&self) -> Value {
        let mut object = Object::new();
        object.insert("action".into(), self.kind().into());
        if let Some(name) = self.name() {
            object.insert("name".into(), name.into());
        }
        match self {
            Action::Disconnect { reason, .. }
            | Action::Skip { reason, .. }
            | Action::Noop { reason } => {
                object.insert("reason".into(), reason.as_str().into());
            }
            Action::Connect { to, .. } => {
                object.insert("to".into(), to.as_str().into());
            }
            Action::Reconnect {
                from, to, changed, ..
            } => {
                object.insert("from".into(), from.as_str().into());
                object.insert("to".into(), to.as_str().into());
                let changed = changed.iter().map(|f| Value::from(f.as_str())).collect();
                object.insert("changed".into(), Value::Array(changed));
            }
            Action::Retry { attempt, .. } => {
                object.insert("attempt".into(), Value::Number(*attempt as f64));
            }
            Action::Keep { .. } => {}
        }
        Value::Object(object)
    }
}

/// The ordered actions of one reconcile pass.
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub struct Plan {
    /// Disconnects, reconnects, retries, connects, keeps, skips — in that
    /// order; inside each group desired names in map order, then names that
    /// are only online in online-map order.
    pub actions: Vec<Action>,
}

impl Plan {
    /// `{"actions": [...]}`.
    pub fn to_value(&self) -> Value {
        let actions = self.actions.iter().map(Action::to_value).collect();
        let mut object = Object::new();
        object.insert("actions".into(), Value::Array(actions));
        Value::Object(object)
    }

    /// Whether executing the plan would change nothing (only keeps, skips
    /// and noops).
    pub fn is_quiet(&self) -> bool {
        self.actions.iter().all(|a| {
            matches!(
                a,
                Action::Keep { .. } | Action::Skip { .. } | Action::Noop { .. }
            )
        })
    }
}

/// Errors computing a plan.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum PlanError {
    /// A config has no identity (the TypeScript host throws on it).
    #[error("server \"{name}\" has no identity: {source}")]
    Identity {
        /// The server whose config has no identity.
        name: String,
        /// What is wrong with its config.
        source: IdentityError,
    },
}

/// The plan that brings `online` to the admitted part of `desired` (SPEC §6).
///
/// Every name in `desired ∪ online` gets exactly one action, from the first
/// row of the §6 table that matches; an untrusted folder gets a single
/// `noop`. Linear in the number of servers plus the size of the gating lists.
///
/// # Errors
/// [`PlanError::Identity`] when the identity of an admitted server (desired
/// or online config) cannot be computed.
pub fn plan(
    desired: &Servers,
    online: &Online,
    gating: &Gating,
    trusted_folder: bool,
    mode: Mode,
    now: Millis,
) -> Result<Plan, PlanError> {
    if !trusted_folder {
        return Ok(Plan {
            actions: vec![Action::Noop {
                reason: Reason::UntrustedFolder,
            }],
        });
    }
    let gate = Gate::new(gating);
    let mut groups = Groups::for_servers(desired.len());
    for (name, config) in desired {
        let action = match (online.get(name), gate.denial(name, config)) {
            (Some(_), Some(reason)) => Action::Disconnect {
                name: name.clone(),
                reason,
            },
            (None, Some(reason)) => Action::Skip {
                name: name.clone(),
                reason,
            },
            (Some(live), None) => admitted_online(name, config, live, mode, now)?,
            (None, None) => Action::Connect {
                name: name.clone(),
                to: new_connection_id(name, config, mode)?,
            },
        };
        groups.push(action);
    }
    for name in online.keys() {
        if !desired.contains_key(name) {
            groups.push(Action::Disconnect {
                name: name.clone(),
                reason: Reason::Removed,
            });
        }
    }
    Ok(groups.into_plan())
}

/// Every admitted entry of `desired`, connected with its own config: the
/// online state right after a fully successful reconcile.
pub fn online_of(desired: &Servers, gating: &Gating) -> Online {
    desired
        .iter()
        .filter(|(name, config)| gating.denial(name, config).is_none())
        .map(|(name, config)| (name.clone(), OnlineEntry::connected(config.clone())))
        .collect()
}

/// Rows 3–7 of the §6 table: the server is online, wanted and admitted.
fn admitted_online(
    name: &str,
    wanted: &ServerConfig,
    live: &OnlineEntry,
    mode: Mode,
    now: Millis,
) -> Result<Action, PlanError> {
    let name = name.to_owned();
    if let Some(change) = identity_change(&name, &live.config, wanted, mode)? {
        return Ok(Action::Reconnect {
            name,
            from: change.from,
            to: change.to,
            changed: change.fields,
        });
    }
    Ok(match live.status {
        Status::Connected | Status::Connecting => Action::Keep { name },
        Status::Failed if live.needs_auth => Action::Skip {
            name,
            reason: Reason::NeedsAuth,
        },
        _ if live.crash_loop => Action::Skip {
            name,
            reason: Reason::CrashLoop,
        },
        Status::Failed if live.retry_at.is_some_and(|at| now < at) => Action::Skip {
            name,
            reason: Reason::BackingOff,
        },
        Status::Failed | Status::Disconnected => Action::Retry {
            name,
            attempt: u64::from(live.attempts) + 1,
        },
    })
}

/// The connection id a `connect` starts; in session mode the session key
/// must exist too.
fn new_connection_id(
    name: &str,
    config: &ServerConfig,
    mode: Mode,
) -> Result<ConnectionId, PlanError> {
    let no_identity = |source| PlanError::Identity {
        name: name.to_owned(),
        source,
    };
    if mode == Mode::Session {
        identity::check_session_view(config).map_err(no_identity)?;
    }
    identity::connection_id(name, config).map_err(no_identity)
}

/// How the identity of a server moved between its live and desired config.
struct Change {
    from: ConnectionId,
    to: ConnectionId,
    fields: Vec<String>,
}

/// `None` when `live` and `wanted` have the same identity in `mode`.
fn identity_change(
    name: &str,
    live: &ServerConfig,
    wanted: &ServerConfig,
    mode: Mode,
) -> Result<Option<Change>, PlanError> {
    let no_identity = |source| PlanError::Identity {
        name: name.to_owned(),
        source,
    };
    // Identical configs have identical identities: the common case of a
    // large, mostly unchanged config costs no hashing and no printing, only
    // the check that the identity exists at all.
    if same_config(live, wanted) {
        identity::check_fingerprint(wanted).map_err(no_identity)?;
        if mode == Mode::Session {
            identity::check_session_view(wanted).map_err(no_identity)?;
        }
        return Ok(None);
    }
    let before = Identity::of(live, mode).map_err(no_identity)?;
    let after = Identity::of(wanted, mode).map_err(no_identity)?;
    if before == after {
        return Ok(None);
    }
    Ok(Some(Change {
        from: identity::connection_id_of(name, &before.fingerprint.text),
        to: identity::connection_id_of(name, &after.fingerprint.text),
        fields: before.changed_fields(&after, live, wanted),
    }))
}

/// The canonical texts an identity hashes: the connection fingerprint, plus
/// the session view in session mode. Equal texts ⇔ equal identities.
#[derive(PartialEq, Eq)]
struct Identity {
    fingerprint: Canonical,
    view: Option<Canonical>,
}

impl Identity {
    fn of(config: &ServerConfig, mode: Mode) -> Result<Self, IdentityError> {
        Ok(Identity {
            fingerprint: Canonical::fingerprint(config)?,
            view: match mode {
                Mode::Session => Some(Canonical::session_view(config)?),
                Mode::Pool => None,
            },
        })
    }

    /// The top-level fields whose canonical forms differ, sorted. `transport`
    /// is derived, never listed; a transport change made by `type` (to or
    /// from `"sdk"`) is reported as `type`.
    fn changed_fields(
        &self,
        after: &Self,
        live: &ServerConfig,
        wanted: &ServerConfig,
    ) -> Vec<String> {
        let mut fields = self.fingerprint.differing(&after.fingerprint);
        if let (Some(before), Some(after)) = (&self.view, &after.view) {
            fields.extend(before.differing(after));
        }
        let mut fields: Vec<String> = fields
            .into_iter()
            .filter(|f| *f != "transport")
            .map(str::to_owned)
            .collect();
        if (live.transport() == Transport::Sdk) != (wanted.transport() == Transport::Sdk) {
            fields.push("type".to_owned());
        }
        json::sort_strings(&mut fields);
        fields
    }
}

/// Same top-level members (in any order) with values that print as the
/// same JSON text.
fn same_config(a: &ServerConfig, b: &ServerConfig) -> bool {
    // A live config is usually a clone of the desired one: the very same
    // shared entry, or at least the same key order.
    if a.same(b) {
        return true;
    }
    let (a, b) = (a.object(), b.object());
    let in_order = || {
        a.iter()
            .zip(b.iter())
            .all(|((ka, va), (kb, vb))| ka == kb && same_json(va, vb))
    };
    let by_key = || {
        a.iter()
            .all(|(key, value)| b.get(key).is_some_and(|other| same_json(value, other)))
    };
    a.len() == b.len() && (in_order() || by_key())
}

/// Whether two values print as the same JSON text (member order matters).
fn same_json(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .zip(y.iter())
                    .all(|((kx, vx), (ky, vy))| kx == ky && same_json(vx, vy))
        }
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(vx, vy)| same_json(vx, vy))
        }
        // Doubles equal under `==` print alike (`-0` and `0` both as `0`).
        _ => a == b,
    }
}

/// The actions of a plan, grouped by kind until they are concatenated.
#[derive(Default)]
struct Groups {
    disconnect: Vec<Action>,
    reconnect: Vec<Action>,
    retry: Vec<Action>,
    connect: Vec<Action>,
    keep: Vec<Action>,
    skip: Vec<Action>,
}

impl Groups {
    /// Room for `n` keeps from the start: most servers of a large plan are
    /// kept, and growing that list by doubling copied it ~log₂ n times.
    fn for_servers(n: usize) -> Self {
        Groups {
            keep: Vec::with_capacity(n),
            ..Groups::default()
        }
    }

    fn push(&mut self, action: Action) {
        let group = match action {
            Action::Disconnect { .. } => &mut self.disconnect,
            Action::Reconnect { .. } => &mut self.reconnect,
            Action::Retry { .. } => &mut self.retry,
            Action::Connect { .. } => &mut self.connect,
            Action::Keep { .. } => &mut self.keep,
            // A trusted plan has no noop; if one came, it would do nothing.
            Action::Skip { .. } | Action::Noop { .. } => &mut self.skip,
        };
        group.push(action);
    }

    /// The groups in plan order. A plan with one kind of action (all keeps,
    /// say) is that group's list, not a copy of it.
    fn into_plan(self) -> Plan {
        let mut groups = [
            self.disconnect,
            self.reconnect,
            self.retry,
            self.connect,
            self.keep,
            self.skip,
        ];
        let total = groups.iter().map(Vec::len).sum();
        if let Some(only) = groups.iter_mut().find(|group| group.len() == total) {
            return Plan {
                actions: std::mem::take(only),
            };
        }
        let mut actions = Vec::with_capacity(total);
        for group in groups {
            actions.extend(group);
        }
        Plan { actions }
    }
}

// ---------------------------------------------------------------------------
// JSON API

/// Errors reading the `online` map of a plan request.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum OnlineError {
    /// The map is not an object.
    #[error("online must be an object, found {0}")]
    NotAnObject(String),
    /// An entry or one of its fields is malformed.
    #[error("online entry \"{name}\": {problem}")]
    Entry {
        /// The server name.
        name: String,
        /// What is wrong, naming the field and the value found.
        problem: String,
    },
}

/// Reads `{name: {config, status, attempts?, retryAt?, crashLoop?, needsAuth?}}`; an
/// optional field that is `null` is absent.
///
/// # Errors
/// [`OnlineError`] naming the first malformed entry and field.
pub fn online_from_value(value: &Value) -> Result<Online, OnlineError> {
    let Value::Object(map) = value else {
        return Err(OnlineError::NotAnObject(value.to_json()));
    };
    map.iter()
        .map(|(name, entry)| {
            entry_from_value(entry)
                .map(|entry| (name.clone(), entry))
                .map_err(|problem| OnlineError::Entry {
                    name: name.clone(),
                    problem,
                })
        })
        .collect()
}

/// The `online` map as JSON (optional fields omitted when at their default).
pub fn online_to_value(online: &Online) -> Value {
    let entries = online.iter().map(|(name, entry)| {
        let mut object = Object::new();
        object.insert("config".into(), entry.config.to_value());
        object.insert("status".into(), entry.status.as_str().into());
        if entry.attempts != 0 {
            object.insert("attempts".into(), Value::Number(f64::from(entry.attempts)));
        }
        if let Some(at) = entry.retry_at {
            object.insert("retryAt".into(), Value::Number(at.0 as f64));
        }
        if entry.crash_loop {
            object.insert("crashLoop".into(), true.into());
        }
        if entry.needs_auth {
            object.insert("needsAuth".into(), true.into());
        }
        (name.clone(), Value::Object(object))
    });
    Value::Object(entries.collect())
}

fn entry_from_value(value: &Value) -> Result<OnlineEntry, String> {
    let Value::Object(entry) = value else {
        return Err(format!("must be an object, found {}", value.to_json()));
    };
    let optional = |field: &str| entry.get(field).filter(|v| !v.is_null());
    let config = match entry.get("config") {
        Some(Value::Object(config)) => ServerConfig::new(config.clone()),
        Some(other) => {
            return Err(format!(
                "`config` must be an object, found {}",
                other.to_json()
            ))
        }
        None => return Err("missing field `config`".into()),
    };
    let status = match entry.get("status") {
        Some(Value::String(s)) => Status::parse(s).ok_or_else(|| {
            format!(
                "`status` must be connecting, connected, failed or disconnected, found {}",
                Value::from(s.as_str()).to_json()
            )
        })?,
        Some(other) => {
            return Err(format!(
                "`status` must be a string, found {}",
                other.to_json()
            ))
        }
        None => return Err("missing field `status`".into()),
    };
    let attempts = match optional("attempts") {
        None => 0,
        Some(v) => whole_number(v, u64::from(u32::MAX))
            .and_then(|n| u32::try_from(n).ok())
            .ok_or_else(|| {
                format!(
                    "`attempts` must be an integer from 0 to {}, found {}",
                    u32::MAX,
                    v.to_json()
                )
            })?,
    };
    let retry_at = match optional("retryAt") {
        None => None,
        Some(v) => Some(Millis(whole_number(v, u64::MAX).ok_or_else(|| {
            format!(
                "`retryAt` must be a non-negative integer, found {}",
                v.to_json()
            )
        })?)),
    };
    let flag = |key: &str| match optional(key) {
        None => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(other) => Err(format!(
            "`{key}` must be a boolean, found {}",
            other.to_json()
        )),
    };
    Ok(OnlineEntry {
        config,
        status,
        attempts,
        retry_at,
        crash_loop: flag("crashLoop")?,
        needs_auth: flag("needsAuth")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What crosses a process boundary with serde is the §10 JSON, byte for byte the same
    /// object as `to_value`, for every kind of action.
    #[test]
    fn the_serde_form_of_a_plan_is_its_spec_json() {
        let id = |s: &str| crate::identity::ConnectionId(s.to_owned());
        let plan = Plan {
            actions: vec![
                Action::Disconnect {
                    name: "a".into(),
                    reason: Reason::Removed,
                },
                Action::Reconnect {
                    name: "b".into(),
                    from: id("b::1"),
                    to: id("b::2"),
                    changed: vec!["args".into()],
                },
                Action::Retry {
                    name: "c".into(),
                    attempt: 3,
                },
                Action::Connect {
                    name: "d".into(),
                    to: id("d::1"),
                },
                Action::Keep { name: "e".into() },
                Action::Skip {
                    name: "f".into(),
                    reason: Reason::PendingApproval,
                },
                Action::Noop {
                    reason: Reason::UntrustedFolder,
                },
            ],
        };
        let spec: serde_json::Value =
            serde_json::from_str(&plan.to_value().to_json()).expect("JSON");
        assert_eq!(serde_json::to_value(&plan).expect("serializes"), spec);
        let back: Plan = serde_json::from_value(spec).expect("reads back");
        assert_eq!(back, plan);
    }

    fn servers(text: &str) -> Servers {
        crate::config::servers_from_value(&json::parse(text).expect("json")).expect("servers")
    }

    fn kinds(plan: &Plan) -> Vec<String> {
        plan.actions
            .iter()
            .map(|a| format!("{}:{}", a.kind(), a.name().unwrap_or("")))
            .collect()
    }

    #[test]
    /// The indexed gate answers what the pattern-by-pattern definition of
    /// SPEC §4 says (allow side, then excluded, then pending, then transport).
    fn gate_agrees_with_the_definition() {
        let gating = Gating {
            cap: Some(vec!["a*".into(), "b".into(), "2".into()]),
            allowed: Some(vec!["a?".into(), "b".into(), "2".into(), "z".into()]),
            excluded: Some(vec!["*1".into()]),
            pending: Some(vec!["b".into()]),
            workspace_allowed: Some(vec!["a*".into(), "2".into(), "b".into()]),
            blocked: Some(vec!["a2".into()]),
        };
        let configs = servers(
            r#"{"a1":{"command":"x"},"ab":{"command":"x"},"a2":{"command":"x"},"b":{"command":"x"},"2":{"url":1},"z":{"command":"x"},"a":{"command":"x"}}"#,
        );
        let gate = Gate::new(&gating);
        for (name, config) in &configs {
            let expected = if !gating.allows(name) {
                Some(Reason::NotAllowed)
            } else if gating.excludes(name) {
                Some(Reason::Excluded)
            } else if gating.blocks(name) {
                Some(Reason::Blocked)
            } else if gating.is_pending(name) {
                Some(Reason::PendingApproval)
            } else if config.transport() == Transport::Unknown {
                Some(Reason::NoTransport)
            } else {
                None
            };
            assert_eq!(gate.denial(name, config), expected, "{name}");
        }
        let reasons: Vec<Option<Reason>> = configs
            .iter()
            .map(|(name, config)| gate.denial(name, config))
            .collect();
        for branch in [
            None,
            Some(Reason::NotAllowed),
            Some(Reason::Excluded),
            Some(Reason::Blocked),
            Some(Reason::PendingApproval),
            Some(Reason::NoTransport),
        ] {
            assert!(
                reasons.contains(&branch),
                "{branch:?} not exercised: {reasons:?}"
            );
        }
    }

    #[test]
    fn odd_identical_config_still_has_no_identity() {
        let desired = servers(r#"{"a":{"command":"x","includeTools":5}}"#);
        let online = online_of(&desired, &Gating::default());
        let session = plan(
            &desired,
            &online,
            &Gating::default(),
            true,
            Mode::Session,
            Millis(0),
        );
        assert!(matches!(session, Err(PlanError::Identity { .. })));
        let pool = plan(
            &desired,
            &online,
            &Gating::default(),
            true,
            Mode::Pool,
            Millis(0),
        );
        assert_eq!(kinds(&pool.expect("pool plan")), ["keep:a"]);
    }

    #[test]
    fn a_server_that_needs_auth_is_skipped_as_such() {
        let desired = servers(r#"{"a":{"httpUrl":"h"}}"#);
        let online: Online = desired
            .iter()
            .map(|(name, config)| {
                let entry = OnlineEntry {
                    status: Status::Failed,
                    crash_loop: true,
                    needs_auth: true,
                    ..OnlineEntry::connected(config.clone())
                };
                (name.clone(), entry)
            })
            .collect();
        let plan = plan(
            &desired,
            &online,
            &Gating::default(),
            true,
            Mode::Session,
            Millis(0),
        )
        .expect("plan");
        assert!(
            matches!(
                plan.actions.as_slice(),
                [Action::Skip {
                    reason: Reason::NeedsAuth,
                    ..
                }]
            ),
            "{:?}",
            plan.actions
        );
        let value = online_to_value(&online);
        assert!(value.to_json().contains(r#""needsAuth":true"#));
    }

    #[test]
    fn type_to_or_from_sdk_is_reported_as_type() {
        let desired =
            servers(r#"{"a":{"command":"x","type":"sdk"},"b":{"httpUrl":"h","type":"http"}}"#);
        let online: Online = servers(r#"{"a":{"command":"x"},"b":{"url":"h","type":"sse"}}"#)
            .into_iter()
            .map(|(name, config)| (name, OnlineEntry::connected(config)))
            .collect();
        let plan = plan(
            &desired,
            &online,
            &Gating::default(),
            true,
            Mode::Pool,
            Millis(0),
        )
        .expect("plan");
        let changed: Vec<Vec<String>> = plan
            .actions
            .iter()
            .filter_map(|a| match a {
                Action::Reconnect { changed, .. } => Some(changed.clone()),
                _ => None,
            })
            .collect();
        assert_eq!(changed, [vec!["type"], vec!["httpUrl", "url"]]);
    }
}
