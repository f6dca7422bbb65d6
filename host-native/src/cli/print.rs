//! What people read: the lines `watch` and `serve` print for applied plans
//! and failures, `plan`'s action lines and `status`'s table. Secrets never
//! appear: only names, states and (redacted) errors are printed, and
//! everything a repository wrote is escaped (`mcp_reconcile::display`).

use std::fmt::Write as _;

use mcp_reconcile::display::{safe, safe_multiline};
use mcp_reconcile::host::LspServerStatus;
use mcp_reconcile_kernel::lsp::LspAction;
use mcp_reconcile_kernel::plan::Action;
use mcp_reconcile_kernel::Reason;
use serde_json::Value;

/// The line for one action: `+ connect`, `~ reconnect (args changed)`,
/// `- disconnect (removed)`, `= keep`, `! skip (pending approval)`,
/// `↻ retry (attempt 2)`, with reasons as [`Known`] refines them.
pub fn action_line(action: &Action, known: Known<'_>) -> String {
    let value = serde_json::to_value(action).unwrap_or(Value::Null);
    action_line_json(&value, known)
}

/// What the host knows that the kernel's plan does not say: a server in `rejected` that the
/// plan calls `pending_approval` (it sees only the gating, SPEC §6) is said to be `rejected`;
/// one in `file_missing` that it calls `removed` is said to be `file missing`.
#[derive(Clone, Copy, Debug, Default)]
pub struct Known<'a> {
    /// Gated servers whose approval was rejected.
    pub rejected: &'a [String],
    /// Servers whose file stayed missing past the grace.
    pub file_missing: &'a [String],
}

/// [`action_line`] for a §10 action object.
pub fn action_line_json(action: &Value, known: Known<'_>) -> String {
    let text = |k: &str| action.get(k).and_then(Value::as_str).unwrap_or("");
    let name = safe(text("name"));
    let named = |names: &[String]| names.iter().any(|n| n == text("name"));
    let reason = match text("reason") {
        "pending_approval" if named(known.rejected) => "rejected".to_owned(),
        "removed" if named(known.file_missing) => "file missing".to_owned(),
        reason => reason.replace('_', " "),
    };
    let changed: Vec<String> = action
        .get("changed")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(|f| safe(f).into_owned())
                .collect()
        })
        .unwrap_or_default();
    let changed = |verb: &str| {
        if changed.is_empty() {
            format!("{verb} {name}")
        } else {
            format!("{verb} {name} ({} changed)", changed.join(", "))
        }
    };
    match text("action") {
        "connect" => format!("+ connect {name}"),
        "reconnect" => changed("~ reconnect"),
        "restart" => changed("~ restart"),
        "reconfigure" => changed("⟳ reconfigure"),
        "retry" => format!(
            "↻ retry {name} (attempt {})",
            action.get("attempt").and_then(Value::as_u64).unwrap_or(0)
        ),
        "disconnect" => format!("- disconnect {name} ({reason})"),
        "keep" => format!("= keep {name}"),
        "skip" => format!("! skip {name} ({reason})"),
        "noop" => format!("· nothing to do ({reason})"),
        other => format!("? {other} {name}"),
    }
}

/// The lines `watch` prints when a pass changed language servers.
pub fn lsp_plan_text(actions: &[LspAction]) -> String {
    let mut out = String::from("language servers:\n");
    for action in actions {
        let value = serde_json::to_value(action).unwrap_or(Value::Null);
        let _ = writeln!(out, "  {}", action_line_json(&value, Known::default()));
    }
    out
}

/// The line `watch` and `serve` print when a language server fails.
pub fn lsp_failure_line(s: &LspServerStatus) -> Option<String> {
    let error = s.last_error.as_deref()?;
    let next = match (s.reason, s.retry_in_ms) {
        (Some(Reason::CrashLoop), _) => {
            ", not restarted until its entry changes or `reload`".into()
        }
        (_, Some(ms)) => format!(", retry in {ms} ms"),
        _ => String::new(),
    };
    Some(format!(
        "  language server {} is {} (attempt {}{next}) — {}",
        safe(&s.name),
        s.state,
        s.attempts,
        safe_multiline(error)
    ))
}

/// `status` for people: one line per server object (as [`status_json`]
/// makes them), then the input problems.
pub fn status_text(servers: &[Value], errors: &[String]) -> String {
    let mut out = String::new();
    if servers.is_empty() {
        out.push_str("no MCP servers configured\n");
    }
    for s in servers {
        let text = |k: &str| s.get(k).and_then(Value::as_str).unwrap_or("");
        let mut line = format!("{:<24} {:<12}", safe(text("name")), safe(text("state")));
        if let Some(reason) = s.get("reason").and_then(Value::as_str) {
            let _ = write!(line, " {}", safe(reason));
        }
        if let Some(ms) = s.get("retryInMs").and_then(Value::as_u64) {
            let _ = write!(line, " (retry in {ms} ms)");
        }
        if text("kind") == "lsp" {
            line = format!(
                "{:<24} {:<12}",
                format!("{} (lsp)", safe(text("name"))),
                safe(text("state"))
            );
            if let Some(reason) = s.get("reason").and_then(Value::as_str) {
                let _ = write!(line, " {}", safe(reason));
            }
            if text("state") == "connected" {
                let pushes = s.get("settingsPushes").and_then(Value::as_u64).unwrap_or(0);
                let _ = write!(line, " {pushes} settings pushes");
            }
        } else if matches!(text("state"), "connected" | "dormant") {
            let count = |k: &str| s.get(k).and_then(Value::as_u64).unwrap_or(0);
            let _ = write!(
                line,
                " {} tools, {} prompts",
                count("tools"),
                count("prompts")
            );
        }
        if let Some(pid) = s.get("pid").and_then(Value::as_u64) {
            let _ = write!(line, " pid {pid}");
        }
        write_sharing(&mut line, s);
        if s.get("lazy").and_then(Value::as_bool) == Some(true) {
            line.push_str(" lazy");
        }
        if let Some(protocol) = s.get("protocol").and_then(Value::as_str) {
            let _ = write!(line, " MCP {}", safe(protocol));
        }
        if let Some(approval) = s.get("approval").and_then(Value::as_str) {
            let _ = write!(line, " [{}]", safe(approval));
        }
        if let Some(until) = s.get("authorizedUntil").and_then(Value::as_str) {
            let _ = write!(line, " authorized until {}", safe(until));
        }
        write_withheld(&mut line, s);
        if let Some(error) = s.get("lastError").and_then(Value::as_str) {
            let _ = write!(line, " — {}", safe_multiline(error));
        }
        let _ = writeln!(out, "{}", line.trim_end());
    }
    for error in errors {
        let _ = writeln!(out, "! {}", safe_multiline(error));
    }
    out
}

/// What pinning withholds of the server (issue 40), and the command that reviews it:
/// `withheld (changed since you approved them): a, b — review with: mcp-reconcile review-tools NAME`.
fn write_withheld(line: &mut String, s: &Value) {
    let Some(names) = s.get("withheld").and_then(Value::as_array) else {
        return;
    };
    let names: Vec<String> = names
        .iter()
        .filter_map(Value::as_str)
        .map(|n| safe(n).into_owned())
        .collect();
    if names.is_empty() {
        return;
    }
    let server = safe(s.get("name").and_then(Value::as_str).unwrap_or(""));
    let _ = write!(
        line,
        " withheld (changed since you approved them): {} — review with: mcp-reconcile review-tools {server}",
        names.join(", ")
    );
}

/// A daemon session's pooled server: the scope its process is shared in and how many sessions
/// hold it (`shared project, 3 sessions`).
fn write_sharing(line: &mut String, s: &Value) {
    let sessions = s.get("sessions").and_then(Value::as_u64);
    match (s.get("share").and_then(Value::as_str), sessions) {
        (Some(share), Some(n)) => {
            let plural = if n == 1 { "" } else { "s" };
            let _ = write!(line, " shared {}, {n} session{plural}", safe(share));
        }
        (None, Some(n)) => {
            let plural = if n == 1 { "" } else { "s" };
            let _ = write!(line, " {n} session{plural}");
        }
        (Some(share), None) => {
            let _ = write!(line, " shared {}", safe(share));
        }
        (None, None) => {}
    }
}
