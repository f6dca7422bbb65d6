//! The review of what pinning withholds (`mcp-reconcile review-tools NAME`): a word diff of each
//! changed field of each changed or new tool and prompt, and accepting exactly what was shown
//! into the baseline.
//!
//! The text is the server's: the caller escapes it for the terminal
//! ([`crate::display::safe_multiline`]).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::{Item, Lists, Pinned};

/// Longest text, in words, diffed word by word; longer ones are shown whole, before and after.
const MAX_WORDS: usize = 2000;

/// The review of `pinned`'s pending tools and prompts, one block per item.
pub fn review_text(pinned: &Pinned) -> String {
    let mut out = String::new();
    for (kind, pending, baseline) in [
        ("tool", &pinned.pending.tools, &pinned.baseline.tools),
        ("prompt", &pinned.pending.prompts, &pinned.baseline.prompts),
        (
            "skill",
            pinned.pending.skills.as_ref().unwrap_or(&BTreeMap::new()),
            pinned.baseline.skills.as_ref().unwrap_or(&BTreeMap::new()),
        ),
    ] {
        for (name, item) in pending {
            match baseline.get(name) {
                None => {
                    let _ = writeln!(out, "new {kind} \"{name}\":");
                    for (field, text) in fields(&item.definition) {
                        let _ = writeln!(out, "  {field}: {{+{text}+}}");
                    }
                }
                Some(before) => {
                    let _ = writeln!(out, "changed {kind} \"{name}\":");
                    let old = fields(&before.definition);
                    let new = fields(&item.definition);
                    let names: std::collections::BTreeSet<&String> =
                        old.keys().chain(new.keys()).collect();
                    for field in names {
                        let (a, b) = (old.get(field), new.get(field));
                        if a == b {
                            continue;
                        }
                        let (a, b) = (
                            a.map(String::as_str).unwrap_or(""),
                            b.map(String::as_str).unwrap_or(""),
                        );
                        let _ = writeln!(out, "  {field}: {}", word_diff(a, b));
                    }
                }
            }
        }
    }
    out
}

/// The members of a definition a digest covers, as text ([`text_of`]: sorted keys, so only
/// real changes show).
fn fields(definition: &serde_json::Value) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let Some(object) = definition.as_object() else {
        return out;
    };
    for field in mcp_reconcile_kernel::pin::TOOL_FIELDS
        .iter()
        .chain(&mcp_reconcile_kernel::pin::PROMPT_FIELDS)
        .chain(&mcp_reconcile_kernel::pin::SKILL_FIELDS)
    {
        let Some(value) = object.get(*field) else {
            continue;
        };
        // A skill's frontmatter member by member, so its description diffs as words.
        if let (&"frontmatter", Some(members)) = (field, value.as_object()) {
            for (member, value) in members {
                out.insert(format!("{field}.{member}"), text_of(value));
            }
            continue;
        }
        out.insert((*field).to_owned(), text_of(value));
    }
    out
}

/// A string as it is, anything else as pretty JSON with sorted keys.
fn text_of(value: &serde_json::Value) -> String {
    match value {
        serde_json::Value::String(s) => s.clone(),
        other => serde_json::to_string_pretty(&sorted(other)).unwrap_or_default(),
    }
}

/// `value` with every object's keys sorted.
fn sorted(value: &serde_json::Value) -> serde_json::Value {
    match value {
        serde_json::Value::Object(o) => {
            let map: BTreeMap<&String, serde_json::Value> =
                o.iter().map(|(k, v)| (k, sorted(v))).collect();
            serde_json::Value::Object(map.into_iter().map(|(k, v)| (k.clone(), v)).collect())
        }
        serde_json::Value::Array(items) => {
            serde_json::Value::Array(items.iter().map(sorted).collect())
        }
        other => other.clone(),
    }
}

/// `before` → `after` word by word, as `git diff --word-diff` shows it: `[-removed-]` and
/// `{+added+}`, common words plain.
pub fn word_diff(before: &str, after: &str) -> String {
    let a: Vec<&str> = before.split_whitespace().collect();
    let b: Vec<&str> = after.split_whitespace().collect();
    if a.len() > MAX_WORDS || b.len() > MAX_WORDS {
        return format!("[-{before}-] {{+{after}+}}");
    }
    // Longest common subsequence, by suffix lengths.
    let mut lcs = vec![vec![0u32; b.len() + 1]; a.len() + 1];
    for i in (0..a.len()).rev() {
        for j in (0..b.len()).rev() {
            lcs[i][j] = if a[i] == b[j] {
                lcs[i + 1][j + 1] + 1
            } else {
                lcs[i + 1][j].max(lcs[i][j + 1])
            };
        }
    }
    let mut words: Vec<String> = Vec::new();
    let (mut i, mut j) = (0, 0);
    let (mut removed, mut added): (Vec<&str>, Vec<&str>) = (Vec::new(), Vec::new());
    let flush = |words: &mut Vec<String>, removed: &mut Vec<&str>, added: &mut Vec<&str>| {
        if !removed.is_empty() {
            words.push(format!("[-{}-]", removed.join(" ")));
            removed.clear();
        }
        if !added.is_empty() {
            words.push(format!("{{+{}+}}", added.join(" ")));
            added.clear();
        }
    };
    while i < a.len() || j < b.len() {
        if i < a.len() && j < b.len() && a[i] == b[j] {
            flush(&mut words, &mut removed, &mut added);
            words.push(a[i].to_owned());
            i += 1;
            j += 1;
        } else if j < b.len() && (i == a.len() || lcs[i][j + 1] >= lcs[i + 1][j]) {
            added.push(b[j]);
            j += 1;
        } else {
            removed.push(a[i]);
            i += 1;
        }
    }
    flush(&mut words, &mut removed, &mut added);
    words.join(" ")
}

/// Moves the items of `shown` (what the review showed) into `pinned`'s baseline — each only if
/// it is still what is pending, so a definition that changed again after it was shown is not
/// accepted unseen. Returns how many were accepted.
pub fn accept(pinned: &mut Pinned, shown: &Lists) -> usize {
    fn take(
        baseline: &mut BTreeMap<String, Item>,
        pending: &mut BTreeMap<String, Item>,
        shown: &BTreeMap<String, Item>,
    ) -> usize {
        let mut accepted = 0;
        for (name, item) in shown {
            if pending.get(name) == Some(item) {
                pending.remove(name);
                baseline.insert(name.clone(), item.clone());
                accepted += 1;
            }
        }
        accepted
    }
    take(
        &mut pinned.baseline.tools,
        &mut pinned.pending.tools,
        &shown.tools,
    ) + take(
        &mut pinned.baseline.prompts,
        &mut pinned.pending.prompts,
        &shown.prompts,
    ) + match (&shown.skills, &mut pinned.pending.skills) {
        (Some(shown), Some(pending)) => take(
            pinned.baseline.skills.get_or_insert_with(BTreeMap::new),
            pending,
            shown,
        ),
        _ => 0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_word_diff_marks_only_what_changed() {
        assert_eq!(
            word_diff(
                "Echo the text back",
                "Echo the text back and read ~/.ssh/id_rsa"
            ),
            "Echo the text back {+and read ~/.ssh/id_rsa+}"
        );
        assert_eq!(word_diff("a b c", "a x c"), "a [-b-] {+x+} c");
    }

    #[test]
    fn accepting_takes_only_what_is_still_pending() {
        let item = |d: &str| Item {
            digest: d.into(),
            definition: serde_json::json!({"name": "t", "description": d}),
        };
        let mut pinned = Pinned::default();
        pinned.baseline.tools.insert("t".into(), item("1"));
        pinned.pending.tools.insert("t".into(), item("3"));
        let mut shown = Lists::default();
        shown.tools.insert("t".into(), item("2"));
        assert_eq!(accept(&mut pinned, &shown), 0);
        assert_eq!(pinned.baseline.tools["t"], item("1"));
        shown.tools.insert("t".into(), item("3"));
        assert_eq!(accept(&mut pinned, &shown), 1);
        assert_eq!(pinned.baseline.tools["t"], item("3"));
        assert!(pinned.pending.is_empty());
    }
}
