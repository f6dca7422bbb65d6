//! Admission (SPEC §4): name patterns, the [`Gating`] lists and why a server
//! is not admitted.

use serde::{Deserialize, Serialize};

use crate::config::{ServerConfig, Transport};
use crate::json::{Object, Value};

/// Why a server is not connected, or why a plan did what it did.
///
/// Spelled in snake_case exactly as the TypeScript host spells its
/// unavailable reasons; the spellings are part of the JSON contract.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
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
        }
    }
}

/// The admission lists in force (SPEC §4). `None` is "not set", which is a
/// different value from `Some(vec![])` for `allowed` and `cap`.
#[derive(Clone, Debug, PartialEq, Eq, Default)]
pub struct Gating {
    /// `mcp.excluded` patterns; beat `allowed`.
    pub excluded: Option<Vec<String>>,
    /// `mcp.allowed` patterns; `None` allows all, `Some([])` denies all.
    pub allowed: Option<Vec<String>>,
    /// The launch flag `--allowed-mcp-server-names`; immutable per session.
    pub cap: Option<Vec<String>>,
    /// Exact names of gated servers not approved for their current config.
    pub pending: Option<Vec<String>>,
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
    /// Reads `{excluded?, allowed?, cap?, pending?}`; absent or `null` is not set.
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
            pending: string_list(object, "pending")?,
        })
    }

    /// `{excluded, pending?, allowed?, cap?}` as the `gating` op returns it:
    /// `excluded` always an array, the others omitted when not set.
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
        Value::Object(object)
    }

    /// Passes the allow side: matches `cap` (when set) and `allowed` (when set).
    pub fn allows(&self, name: &str) -> bool {
        let passes =
            |list: &Option<Vec<String>>| list.as_ref().is_none_or(|l| matches_any(name, l));
        passes(&self.cap) && passes(&self.allowed)
    }

    /// Matches `excluded`.
    pub fn excludes(&self, name: &str) -> bool {
        self.excluded.as_ref().is_some_and(|l| matches_any(name, l))
    }

    /// Is in `pending` (exact names).
    pub fn is_pending(&self, name: &str) -> bool {
        self.pending
            .as_ref()
            .is_some_and(|l| l.iter().any(|p| p == name))
    }

    /// Why `name` with `config` is not admitted, first hit of `not_allowed`,
    /// `excluded`, `pending_approval`, `no_transport`; `None` when admitted.
    pub fn denial(&self, name: &str, config: &ServerConfig) -> Option<Reason> {
        if !self.allows(name) {
            Some(Reason::NotAllowed)
        } else if self.excludes(name) {
            Some(Reason::Excluded)
        } else if self.is_pending(name) {
            Some(Reason::PendingApproval)
        } else if config.transport() == Transport::Unknown {
            Some(Reason::NoTransport)
        } else {
            None
        }
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
}

/// Whether `name` matches `pattern`: `*` is any run of UTF-16 code units
/// (including none), `?` exactly one; anchored at both ends; a pattern with
/// neither is compared exactly.
pub fn match_pattern(pattern: &str, name: &str) -> bool {
    if !pattern.contains(['*', '?']) {
        return pattern == name;
    }
    let pattern: Vec<u16> = pattern.encode_utf16().collect();
    let name: Vec<u16> = name.encode_utf16().collect();
    const STAR: u16 = b'*' as u16;
    const ANY: u16 = b'?' as u16;
    let (mut ni, mut pi) = (0, 0);
    let mut star: Option<(usize, usize)> = None; // (pattern index of `*`, name index)
    while ni < name.len() {
        if pi < pattern.len() && (pattern[pi] == ANY || pattern[pi] == name[ni]) {
            ni += 1;
            pi += 1;
        } else if pi < pattern.len() && pattern[pi] == STAR {
            star = Some((pi, ni));
            pi += 1;
        } else if let Some((star_pi, star_ni)) = star {
            pi = star_pi + 1;
            ni = star_ni + 1;
            star = Some((star_pi, star_ni + 1));
        } else {
            return false;
        }
    }
    while pi < pattern.len() && pattern[pi] == STAR {
        pi += 1;
    }
    pi == pattern.len()
}

/// Whether `name` matches any of `patterns` (an empty list matches nothing).
pub fn matches_any(name: &str, patterns: &[String]) -> bool {
    patterns.iter().any(|p| match_pattern(p, name))
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
