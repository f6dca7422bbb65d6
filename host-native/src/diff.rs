//! What changed in a server's entry, field by field, with its secrets masked: the detail of a
//! `~ reconnect notes: args[3] "echo,add" → "echo,add,sleep"` line.
//!
//! The kernel says *which* top-level fields of an identity changed (`Action::Reconnect {
//! changed }`); this module says *how*, for people. Values stay what they are in the host
//! (no terminal escaping here: the printer escapes, [`crate::display`]), but no secret is in
//! them: `env` and `headers` values are never shown (only that a key was added, removed or
//! changed), nor an `oauth.clientSecret`; URLs go through [`mask_url`]; and every shown value
//! has the secrets of both configs masked ([`redact::secrets`]), so an argument that carries an
//! expanded `$TOKEN` reads `***`.

use mcp_reconcile_kernel::json::Value;
use mcp_reconcile_kernel::ServerConfig;

use crate::redact::{self, mask_url};

/// One changed leaf of an entry.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FieldChange {
    /// Where: `args[3]`, `env.API_KEY`, `url`, `oauth.scopes`.
    pub field: String,
    /// The value before as JSON text, secrets masked; `None` when it was absent or is
    /// [`hidden`](FieldChange::hidden).
    pub before: Option<String>,
    /// The value after, likewise.
    pub after: Option<String>,
    /// The value is a secret (an `env` or `headers` value, a client secret): neither side is
    /// shown, only whether it was added, removed or changed.
    pub hidden: bool,
}

/// At most this many changes are listed per top-level field (a rewritten `args` of 200
/// elements is one line that says so, not 200).
pub const MAX_PER_FIELD: usize = 8;

/// The changes from `before` to `after` in the top-level `fields` (as the kernel's plan lists
/// them), in that order. A field whose difference is not in any leaf (a canonical form
/// changed) is listed as itself with both values.
pub fn field_changes(
    before: &ServerConfig,
    after: &ServerConfig,
    fields: &[String],
) -> Vec<FieldChange> {
    let mut secrets = redact::secrets(before);
    secrets.extend(redact::secrets(after));
    secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
    secrets.dedup();
    let mut out = Vec::new();
    for field in fields {
        let (old, new) = (before.get(field), after.get(field));
        let mut changes = Vec::new();
        let hidden_members = matches!(field.as_str(), "env" | "headers");
        leaf_changes(field, old, new, hidden_members, &mut changes);
        if changes.is_empty() {
            changes.push(FieldChange {
                field: field.clone(),
                before: old.map(|v| shown(field, v, &secrets)),
                after: new.map(|v| shown(field, v, &secrets)),
                hidden: false,
            });
        }
        let more = changes.len().saturating_sub(MAX_PER_FIELD);
        changes.truncate(MAX_PER_FIELD);
        for change in &mut changes {
            if !change.hidden {
                change.before = change
                    .before
                    .take()
                    .map(|v| redact::redact_all(&v, &secrets));
                change.after = change
                    .after
                    .take()
                    .map(|v| redact::redact_all(&v, &secrets));
            }
        }
        out.extend(changes);
        if more > 0 {
            out.push(FieldChange {
                field: format!("{field} (and {more} more changes)"),
                before: None,
                after: None,
                hidden: true,
            });
        }
    }
    out
}

/// The leaves under `path` that differ between `old` and `new`. `secret` marks every member
/// below as hidden (`env`, `headers`).
fn leaf_changes(
    path: &str,
    old: Option<&Value>,
    new: Option<&Value>,
    secret: bool,
    out: &mut Vec<FieldChange>,
) {
    if old == new {
        return;
    }
    match (old, new) {
        (Some(Value::Array(a)), Some(Value::Array(b))) => {
            for i in 0..a.len().max(b.len()) {
                leaf_changes(&format!("{path}[{i}]"), a.get(i), b.get(i), secret, out);
            }
        }
        (Some(Value::Object(a)), Some(Value::Object(b))) => {
            let keys = a.keys().chain(b.keys().filter(|k| !a.contains_key(k)));
            for key in keys {
                let hidden = secret || (path == "oauth" && key == "clientSecret");
                leaf_changes(
                    &format!("{path}.{key}"),
                    a.get(key),
                    b.get(key),
                    hidden,
                    out,
                );
            }
        }
        _ if secret => out.push(FieldChange {
            field: path.to_owned(),
            before: None,
            after: None,
            hidden: true,
        }),
        _ => out.push(FieldChange {
            field: path.to_owned(),
            before: old.map(|v| shown(path, v, &[])),
            after: new.map(|v| shown(path, v, &[])),
            hidden: false,
        }),
    }
}

/// `value` as JSON text; a URL field's string through [`mask_url`].
fn shown(path: &str, value: &Value, secrets: &[String]) -> String {
    let text = match value {
        Value::String(s) if matches!(path, "url" | "httpUrl") => {
            Value::from(mask_url(s).as_str()).to_json()
        }
        other => other.to_json(),
    };
    redact::redact_all(&text, secrets)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(text: &str) -> ServerConfig {
        ServerConfig::from_json(text).expect("a config object")
    }

    fn fields(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    #[test]
    fn an_argument_change_names_its_index_and_both_values() {
        let before = cfg(r#"{"command":"f","args":["--name","notes","--tools","echo,add"]}"#);
        let after = cfg(r#"{"command":"f","args":["--name","notes","--tools","echo,add,sleep"]}"#);
        let changes = field_changes(&before, &after, &fields(&["args"]));
        assert_eq!(
            changes,
            [FieldChange {
                field: "args[3]".into(),
                before: Some("\"echo,add\"".into()),
                after: Some("\"echo,add,sleep\"".into()),
                hidden: false,
            }]
        );
        let longer = cfg(r#"{"command":"f","args":["--name","notes","--tools","echo,add","-v"]}"#);
        let changes = field_changes(&before, &longer, &fields(&["args"]));
        assert_eq!(changes[0].field, "args[4]");
        assert_eq!(
            (changes[0].before.as_deref(), changes[0].after.as_deref()),
            (None, Some("\"-v\""))
        );
    }

    #[test]
    fn secrets_are_never_in_a_change() {
        let before = cfg(
            r#"{"url":"https://user:hunter22@h/mcp?api_key=k3y-old","headers":{"Authorization":"Bearer s3cr3t-old"},"env":{"TOKEN":"s3cr3t-old"},"args":["--t=s3cr3t-old"],"oauth":{"clientSecret":"cl13nt-old"}}"#,
        );
        let after = cfg(
            r#"{"url":"https://user:hunter33@h/mcp?api_key=k3y-new","headers":{"Authorization":"Bearer s3cr3t-new","X-New":"n3w-value"},"env":{"TOKEN":"s3cr3t-new"},"args":["--t=s3cr3t-new"],"oauth":{"clientSecret":"cl13nt-new"}}"#,
        );
        let changes = field_changes(
            &before,
            &after,
            &fields(&["args", "env", "headers", "oauth", "url"]),
        );
        let text = format!("{changes:?}");
        for secret in ["hunter", "k3y", "s3cr3t", "n3w-value", "cl13nt"] {
            assert!(!text.contains(secret), "{secret} in {text}");
        }
        let by_field = |f: &str| changes.iter().find(|c| c.field == f).cloned();
        assert_eq!(
            by_field("args[0]").and_then(|c| c.after),
            Some("\"--t=***\"".into())
        );
        assert!(by_field("env.TOKEN").is_some_and(|c| c.hidden));
        assert!(by_field("headers.X-New").is_some_and(|c| c.hidden));
        assert!(by_field("oauth.clientSecret").is_some_and(|c| c.hidden));
        assert_eq!(
            by_field("url").and_then(|c| c.after),
            Some("\"https://***@h/mcp?api_key=***\"".into())
        );
    }

    #[test]
    fn a_long_rewrite_is_cut_short_and_says_so() {
        let before = cfg(r#"{"args":[]}"#);
        let items: Vec<String> = (0..20).map(|i| format!("\"a{i}\"")).collect();
        let after = cfg(&format!(r#"{{"args":[{}]}}"#, items.join(",")));
        let changes = field_changes(&before, &after, &fields(&["args"]));
        assert_eq!(changes.len(), MAX_PER_FIELD + 1);
        assert_eq!(changes[MAX_PER_FIELD].field, "args (and 12 more changes)");
    }

    #[test]
    fn a_field_changed_only_in_its_canonical_form_is_listed_whole() {
        let before = cfg(r#"{"command":"x","type":"stdio"}"#);
        let after = cfg(r#"{"command":"x","type":"stdio"}"#);
        let changes = field_changes(&before, &after, &fields(&["type"]));
        assert_eq!(changes.len(), 1);
        assert_eq!(changes[0].field, "type");
    }
}
