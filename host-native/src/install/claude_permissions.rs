//! Claude Code's permission rules under the gateway's names. Behind the installed gateway a
//! server's tools reach Claude Code as `mcp__reconcile__SERVER__TOOL`, so a rule the user wrote
//! for `mcp__github__create_issue` (or the whole server, `mcp__github`) no longer matches.
//! `install claude --permissions` rewrites the rules of the user's `~/.claude/settings.json`
//! (`permissions.allow`, `deny`, `ask`) to the gateway's names — `--dry-run` shows the diff
//! first — and uninstall names them back. A project's settings files are the repository's and
//! are left alone.

use serde_json::Value;

use super::{jsonc, read, settle, Change, GATEWAY};
use crate::inputs::{claude_home, HostEnv};

/// The rule lists rewritten.
const LISTS: [&str; 3] = ["allow", "deny", "ask"];

/// One rule under the gateway's names (`forward`), or back under the servers' own.
/// `mcp__S` (every tool of S) becomes `mcp__reconcile__S__*`; `mcp__S__T` becomes
/// `mcp__reconcile__S__T`; anything else (built-in tools, the gateway's own rules) stays.
fn rule(rule: &str, forward: bool) -> String {
    let gateway = format!("mcp__{GATEWAY}__");
    if forward {
        let Some(rest) = rule.strip_prefix("mcp__") else {
            return rule.to_owned();
        };
        if rest.is_empty() || rule == format!("mcp__{GATEWAY}") || rule.starts_with(&gateway) {
            return rule.to_owned();
        }
        if rest.contains("__") {
            format!("{gateway}{rest}")
        } else {
            format!("{gateway}{rest}__*")
        }
    } else {
        match rule.strip_prefix(&gateway) {
            Some(rest) if !rest.is_empty() => format!("mcp__{rest}"),
            _ => rule.to_owned(),
        }
    }
}

/// `text` (a Claude Code settings file) with its permission rules renamed (`forward`: to the
/// gateway's names; else back). Lists that do not change are left byte for byte.
///
/// # Errors
/// The text is not a JSON object.
pub fn rewrite(text: &str, forward: bool) -> anyhow::Result<String> {
    let mut out = text.to_owned();
    for list in LISTS {
        let Some(Value::Array(rules)) = jsonc::get(&out, &["permissions"], list) else {
            continue;
        };
        let renamed: Vec<Value> = rules
            .iter()
            .map(|r| match r {
                Value::String(s) => Value::String(rule(s, forward)),
                other => other.clone(),
            })
            .collect();
        if renamed != rules {
            out = jsonc::set(&out, &["permissions"], list, &Value::Array(renamed))?;
        }
    }
    Ok(out)
}

/// Renames the rules of the user's Claude Code settings file to the gateway's names; with
/// `dry_run`, only says what would change. The change (`changes()` is false: nothing to do).
///
/// # Errors
/// The file cannot be read, is not a JSON object, or cannot be written.
pub fn apply(env: &HostEnv, dry_run: bool) -> anyhow::Result<Change> {
    let (dir, _) = claude_home(env, "Claude Code's settings")?;
    let path = dir.join("settings.json");
    let plan = || -> anyhow::Result<Vec<Change>> {
        let before = read(&path)?;
        let after = match &before {
            Some(text) => Some(rewrite(text, true)?),
            None => None,
        };
        Ok(vec![Change {
            path: path.clone(),
            before,
            after,
        }])
    };
    if dry_run {
        return Ok(plan()?.remove(0));
    }
    // Claude Code locks only its state file, not its settings.
    let mut written = settle::settle(None, plan, |_| Ok(()))?;
    Ok(written.pop().unwrap_or(Change {
        path,
        before: None,
        after: None,
    }))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rules_move_under_the_gateway_and_back() {
        for (before, after) in [
            (
                "mcp__github__create_issue",
                "mcp__reconcile__github__create_issue",
            ),
            ("mcp__github", "mcp__reconcile__github__*"),
            ("mcp__github__*", "mcp__reconcile__github__*"),
            ("mcp__reconcile", "mcp__reconcile"),
            ("mcp__reconcile__notes__echo", "mcp__reconcile__notes__echo"),
            ("Bash(npm test)", "Bash(npm test)"),
            ("mcp__", "mcp__"),
        ] {
            assert_eq!(rule(before, true), after, "{before}");
        }
        assert_eq!(rule("mcp__reconcile__github__*", false), "mcp__github__*");
        assert_eq!(rule("mcp__reconcile__github__x", false), "mcp__github__x");
        assert_eq!(rule("mcp__reconcile", false), "mcp__reconcile");
    }

    #[test]
    fn only_the_permission_lists_change() {
        let text = "{\n  \"permissions\": {\n    \"allow\": [\"mcp__gh__x\", \"Read\"],\n    \"deny\": [\"Bash(rm -rf:*)\"]\n  },\n  \"model\": \"x\"\n}\n";
        let out = rewrite(text, true).expect("rewritten");
        let value: Value = serde_json::from_str(&out).expect("JSON");
        assert_eq!(
            value["permissions"]["allow"],
            serde_json::json!(["mcp__reconcile__gh__x", "Read"])
        );
        assert!(
            out.contains("\"deny\": [\"Bash(rm -rf:*)\"]"),
            "untouched: {out}"
        );
        assert_eq!(
            rewrite(&out, false)
                .expect("back")
                .replace(char::is_whitespace, ""),
            text.replace(char::is_whitespace, "")
        );
    }
}
