//! Approvals (SPEC §5): decisions about servers from project-controlled
//! files, each bound to the [`approval_hash`] of the config it was made for.
//!
//! The record store is the JSON of the approvals file,
//! `{"<project root>": {"<server>": {"hash": "<64 hex>", "status": "approved" | "rejected"}}}`.
//! [`Approvals`] wraps any JSON value and never fails to construct: whatever
//! part of it is malformed reads as "no decision", so every gated server it
//! covers is pending (fail closed). [`problems`] lists what the host should
//! report about such a store.
//!
//! How a host uses it:
//! 1. read the file (missing → [`Approvals::empty`]) and wrap it with
//!    [`Approvals::new`]; show [`Approvals::problems`];
//! 2. gate with [`pending_gated`] (never start those) and ask the user about
//!    [`promptable`] (never about a rejected config again);
//! 3. store a decision with [`Approvals::record`] and write
//!    [`Approvals::as_value`] back (keeping a `.bak` of a malformed original).

use serde::{Deserialize, Serialize};

use crate::config::{ServerConfig, Servers};
use crate::identity::approval_hash;
use crate::json::{Object, Value};

/// The approval state of one server config under one project root.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "ts", derive(ts_rs::TS), ts(rename_all = "lowercase"))]
pub enum ApprovalState {
    /// Approved for exactly this config.
    Approved,
    /// Rejected for exactly this config; not asked again until it changes.
    Rejected,
    /// No valid decision for this config: ask (and do not start it).
    Pending,
}

impl ApprovalState {
    /// The JSON spelling (`approved`, `rejected`, `pending`).
    pub fn as_str(self) -> &'static str {
        match self {
            ApprovalState::Approved => "approved",
            ApprovalState::Rejected => "rejected",
            ApprovalState::Pending => "pending",
        }
    }
}

/// A decision the user can store (there is no stored "pending").
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
#[cfg_attr(feature = "ts", derive(ts_rs::TS), ts(rename_all = "lowercase"))]
pub enum Decision {
    /// Allow the server with this config to start.
    Approved,
    /// Never start the server with this config, and do not ask again.
    Rejected,
}

impl Decision {
    /// The stored `status` spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Decision::Approved => "approved",
            Decision::Rejected => "rejected",
        }
    }
}

impl From<Decision> for ApprovalState {
    fn from(decision: Decision) -> Self {
        match decision {
            Decision::Approved => ApprovalState::Approved,
            Decision::Rejected => ApprovalState::Rejected,
        }
    }
}

/// The approval record store, as read from the approvals file.
///
/// Any JSON is accepted; malformed parts read as "no decision". Lookups use
/// own keys only and compare the project root as an exact string (the host
/// canonicalizes it before every read and write).
#[derive(Clone, Debug, PartialEq, Default)]
pub struct Approvals {
    store: Value,
}

impl Approvals {
    /// Wraps a parsed store; never fails.
    pub fn new(store: Value) -> Self {
        Approvals { store }
    }

    /// The store of a missing file: `{}`.
    pub fn empty() -> Self {
        Approvals::new(Value::Object(Object::new()))
    }

    /// The store as JSON (what the host writes back).
    pub fn as_value(&self) -> &Value {
        &self.store
    }

    /// The store as JSON, by value.
    pub fn into_value(self) -> Value {
        self.store
    }

    /// What is wrong with the store; see [`problems`].
    pub fn problems(&self) -> Vec<String> {
        problems(&self.store)
    }

    /// The state of server `name` with `config` under project `root`: the
    /// stored status when a well-formed record's hash equals
    /// `approval_hash(config)`, else [`ApprovalState::Pending`].
    pub fn state(&self, root: &str, name: &str, config: &ServerConfig) -> ApprovalState {
        self.state_with_hash(root, name, || approval_hash(config).0)
    }

    /// The state of server `name` under project `root` for a config whose
    /// approval hash `hash` computes (called only when a record exists): the
    /// stored status when a well-formed record's hash equals it, else
    /// [`ApprovalState::Pending`]. Lets other kinds of servers (language
    /// servers, SPEC §14.3) share the record format with their own hash.
    pub fn state_with_hash(
        &self,
        root: &str,
        name: &str,
        hash: impl FnOnce() -> String,
    ) -> ApprovalState {
        let Some(record) = self.project(root).and_then(|p| p.get(name)) else {
            return ApprovalState::Pending;
        };
        let Value::Object(record) = record else {
            return ApprovalState::Pending;
        };
        let hash_matches = record
            .get("hash")
            .and_then(Value::as_str)
            .is_some_and(|stored| stored == hash());
        if !hash_matches {
            return ApprovalState::Pending;
        }
        match record.get("status").and_then(Value::as_str) {
            Some("approved") => ApprovalState::Approved,
            Some("rejected") => ApprovalState::Rejected,
            _ => ApprovalState::Pending,
        }
    }

    /// Stores `{hash: approval_hash(config), status}` for `name` under
    /// `root`, replacing any earlier record of that server. Records of other
    /// servers and projects are kept; a project entry (or a whole store) that
    /// is not an object is replaced by a fresh object.
    pub fn record(&mut self, root: &str, name: &str, config: &ServerConfig, decision: Decision) {
        self.record_hash(root, name, &approval_hash(config).0, decision);
    }

    /// [`Approvals::record`] with the hash given (a language server's is
    /// [`lsp_approval_hash`](crate::lsp::lsp_approval_hash), SPEC §14.3).
    pub fn record_hash(&mut self, root: &str, name: &str, hash: &str, decision: Decision) {
        let mut entry = Object::new();
        entry.insert("hash".into(), hash.into());
        entry.insert("status".into(), decision.as_str().into());
        if !matches!(self.store, Value::Object(_)) {
            self.store = Value::Object(Object::new());
        }
        let Value::Object(store) = &mut self.store else {
            return;
        };
        // Update the project's records in place: copying them per decision
        // made recording n decisions one by one quadratic.
        if !matches!(store.get(root), Some(Value::Object(_))) {
            store.insert(root.to_owned(), Value::Object(Object::new()));
        }
        if let Some(Value::Object(project)) = store.get_mut(root) {
            project.insert(name.to_owned(), Value::Object(entry));
        }
    }

    /// The project entry for `root` when it is an object.
    fn project(&self, root: &str) -> Option<&Object> {
        match &self.store {
            Value::Object(store) => match store.get(root) {
                Some(Value::Object(project)) => Some(project),
                _ => None,
            },
            _ => None,
        }
    }
}

impl From<Value> for Approvals {
    fn from(store: Value) -> Self {
        Approvals::new(store)
    }
}

/// What a host must report about a record store: the store is not an
/// object, or a project entry is not an object (both read as empty, so every
/// gated server they cover is pending). Empty when the store is usable.
pub fn problems(store: &Value) -> Vec<String> {
    let Value::Object(projects) = store else {
        return vec![format!(
            "approvals store must be an object, found {}",
            store.preview(60)
        )];
    };
    projects
        .iter()
        .filter(|(_, entry)| !matches!(entry, Value::Object(_)))
        .map(|(root, entry)| {
            format!(
                "approvals of project {} must be an object, found {}",
                Value::from(root.as_str()).to_json(),
                entry.preview(60)
            )
        })
        .collect()
}

/// Gated entries whose state is not approved (pending or rejected), in map
/// order: the servers nothing may start.
pub fn pending_gated(servers: &Servers, approvals: &Approvals, root: &str) -> Vec<String> {
    gated_where(servers, approvals, root, |s| s != ApprovalState::Approved)
}

/// Gated entries whose state is exactly pending, in map order: the servers to
/// ask about (a rejection is not asked again until the config changes).
pub fn promptable(servers: &Servers, approvals: &Approvals, root: &str) -> Vec<String> {
    gated_where(servers, approvals, root, |s| s == ApprovalState::Pending)
}

fn gated_where(
    servers: &Servers,
    approvals: &Approvals,
    root: &str,
    keep: impl Fn(ApprovalState) -> bool,
) -> Vec<String> {
    servers
        .iter()
        .filter(|(name, config)| config.is_gated() && keep(approvals.state(root, name, config)))
        .map(|(name, _)| name.clone())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::servers_from_value;
    use crate::json::parse;

    fn json(text: &str) -> Value {
        parse(text).expect("json")
    }

    fn cfg(text: &str) -> ServerConfig {
        ServerConfig::from_json(text).expect("a config object")
    }

    const ROOT: &str = "/home/dev/my-repo";

    fn store_with(name: &str, record: &str) -> Approvals {
        Approvals::new(json(&format!(r#"{{"{ROOT}":{{"{name}":{record}}}}}"#)))
    }

    fn slack() -> ServerConfig {
        cfg(r#"{"command":"npx","args":["-y","slack-mcp"],"scope":"project"}"#)
    }

    #[test]
    fn state_follows_hash_and_status() {
        let hash = approval_hash(&slack()).0;
        for (status, want) in [
            ("approved", ApprovalState::Approved),
            ("rejected", ApprovalState::Rejected),
            ("pending", ApprovalState::Pending),
            ("APPROVED", ApprovalState::Pending),
        ] {
            let a = store_with(
                "slack",
                &format!(r#"{{"hash":"{hash}","status":"{status}"}}"#),
            );
            assert_eq!(a.state(ROOT, "slack", &slack()), want, "{status}");
            assert_eq!(a.state("/other", "slack", &slack()), ApprovalState::Pending);
        }
        let edited = cfg(r#"{"command":"npx","args":["-y","slack-mcp","--x"],"scope":"project"}"#);
        let a = store_with(
            "slack",
            &format!(r#"{{"hash":"{hash}","status":"rejected"}}"#),
        );
        assert_eq!(a.state(ROOT, "slack", &edited), ApprovalState::Pending);
    }

    #[test]
    fn malformed_parts_are_pending() {
        let hash = approval_hash(&slack()).0;
        for record in [
            r#"{"status":"approved"}"#.to_owned(),
            r#"{"hash":5,"status":"approved"}"#.to_owned(),
            format!(r#"{{"hash":"{hash}"}}"#),
            format!(r#"{{"hash":"{hash}","status":true}}"#),
            format!(r#"["{hash}","approved"]"#),
            "null".to_owned(),
            r#""approved""#.to_owned(),
        ] {
            let a = store_with("slack", &record);
            assert_eq!(
                a.state(ROOT, "slack", &slack()),
                ApprovalState::Pending,
                "{record}"
            );
        }
        for store in ["null", "[]", "5", r#""x""#, r#"{"/home/dev/my-repo":null}"#] {
            let a = Approvals::new(json(store));
            assert_eq!(
                a.state(ROOT, "slack", &slack()),
                ApprovalState::Pending,
                "{store}"
            );
        }
        // An array project entry is malformed even where an index would hit.
        let a = Approvals::new(json(&format!(
            r#"{{"{ROOT}":[{{"hash":"{hash}","status":"approved"}}]}}"#
        )));
        assert_eq!(a.state(ROOT, "0", &slack()), ApprovalState::Pending);
    }

    #[test]
    fn only_own_keys_count() {
        let a = Approvals::new(json(&format!(r#"{{"{ROOT}":{{}}}}"#)));
        for name in ["constructor", "__proto__", "toString", "hasOwnProperty"] {
            assert_eq!(
                a.state(ROOT, name, &slack()),
                ApprovalState::Pending,
                "{name}"
            );
        }
        let hash = approval_hash(&slack()).0;
        let a = store_with(
            "__proto__",
            &format!(r#"{{"hash":"{hash}","status":"approved"}}"#),
        );
        assert_eq!(
            a.state(ROOT, "__proto__", &slack()),
            ApprovalState::Approved
        );
    }

    #[test]
    fn record_binds_the_hash_and_keeps_other_records() {
        let mut a = Approvals::new(json(&format!(
            r#"{{"/x":{{"k":1}},"{ROOT}":{{"other":{{"hash":"h","status":"approved"}}}}}}"#
        )));
        a.record(ROOT, "slack", &slack(), Decision::Rejected);
        assert_eq!(a.state(ROOT, "slack", &slack()), ApprovalState::Rejected);
        let hash = approval_hash(&slack()).0;
        assert_eq!(
            a.as_value().to_json(),
            format!(
                r#"{{"/x":{{"k":1}},"{ROOT}":{{"other":{{"hash":"h","status":"approved"}},"slack":{{"hash":"{hash}","status":"rejected"}}}}}}"#
            )
        );
        a.record(ROOT, "slack", &slack(), Decision::Approved);
        assert_eq!(a.state(ROOT, "slack", &slack()), ApprovalState::Approved);
        assert!(a.problems().is_empty());
    }

    #[test]
    fn record_replaces_malformed_parts() {
        let mut a = Approvals::new(json(&format!(r#"{{"{ROOT}":"junk","/y":[]}}"#)));
        assert_eq!(a.problems().len(), 2);
        a.record(ROOT, "s", &slack(), Decision::Approved);
        assert_eq!(
            a.problems().len(),
            1,
            "the other project's entry is untouched"
        );
        assert_eq!(a.state(ROOT, "s", &slack()), ApprovalState::Approved);

        let mut a = Approvals::new(json("[1]"));
        a.record(ROOT, "s", &slack(), Decision::Approved);
        assert!(a.problems().is_empty());
        assert_eq!(a.state(ROOT, "s", &slack()), ApprovalState::Approved);
    }

    #[test]
    fn problems_name_the_offending_value() {
        assert!(problems(&json("{}")).is_empty());
        assert!(problems(&json(r#"{"/r":{"s":5}}"#)).is_empty());
        let p = problems(&json("[]"));
        assert_eq!(p, vec!["approvals store must be an object, found []"]);
        assert_eq!(problems(&json("null")).len(), 1);
        let p = problems(&json(r#"{"/a":{},"/r":null,"/s":"x"}"#));
        assert_eq!(
            p,
            vec![
                r#"approvals of project "/r" must be an object, found null"#,
                r#"approvals of project "/s" must be an object, found "x""#
            ]
        );
        let long = problems(&Value::String("y".repeat(500)));
        assert!(long[0].len() < 120);
    }

    #[test]
    fn pending_and_promptable_in_map_order() {
        let servers = servers_from_value(&json(
            r#"{"proj":{"command":"p","scope":"project"},"ws":{"command":"w","scope":"workspace"},
                "sys":{"command":"s","scope":"system"},"usr":{"command":"u"},
                "2":{"command":"n","scope":"project"}}"#,
        ))
        .expect("servers");
        let mut a = Approvals::empty();
        assert_eq!(pending_gated(&servers, &a, ROOT), ["2", "proj", "ws"]);
        assert_eq!(promptable(&servers, &a, ROOT), ["2", "proj", "ws"]);
        let ws = servers.get("ws").cloned().unwrap_or_default();
        let proj = servers.get("proj").cloned().unwrap_or_default();
        a.record(ROOT, "ws", &ws, Decision::Rejected);
        a.record(ROOT, "proj", &proj, Decision::Approved);
        assert_eq!(pending_gated(&servers, &a, ROOT), ["2", "ws"]);
        assert_eq!(promptable(&servers, &a, ROOT), ["2"]);
    }
}
