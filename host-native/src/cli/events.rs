//! `watch --events json`: one JSON object per line on stdout for tools that follow a session.
//! The shapes are documented in docs/COMMANDS.md ("Following a session") and in `watch --help`.
//!
//! Secrets are never in an event (errors come redacted from the host, changes from
//! [`mcp_reconcile::diff`] hide env and header values); every character that could act on a
//! terminal is written as a `\u` escape ([`json_line`]), so the stream is safe to `tail`.

use mcp_reconcile::display::is_unsafe;
use mcp_reconcile::host::{HostEvent, PlanReport, Step};
use mcp_reconcile::review::ApprovalRequest;
use mcp_reconcile::status::{lsp_status_json, status_json};
use serde_json::{json, Map, Value};

/// The events for one host event (an approval request per server).
pub fn event_values(event: &HostEvent) -> Vec<Value> {
    match event {
        HostEvent::PlanApplied(report) => vec![plan_event(report)],
        HostEvent::ApprovalNeeded(requests) => requests.iter().map(approval_event).collect(),
        HostEvent::ReloadFailed(message) => {
            vec![json!({"event": "reload_failed", "message": message})]
        }
        HostEvent::ClientUpdate(status) => vec![tagged("server", status_json(status))],
        HostEvent::CatalogChanged(change) => vec![json!({
            "event": "catalog_changed",
            "tools": change.tools,
            "prompts": change.prompts,
            "resources": change.resources,
        })],
        HostEvent::LspPlanApplied(actions) => {
            let actions: Vec<Value> = actions
                .iter()
                .map(|a| serde_json::to_value(a).unwrap_or(Value::Null))
                .collect();
            vec![json!({"event": "lsp_plan", "actions": actions})]
        }
        HostEvent::LspUpdate(status) => vec![tagged("lsp_server", lsp_status_json(status))],
        HostEvent::Idle { passes } => vec![json!({"event": "idle", "passes": passes})],
    }
}

/// `{"event": "stopped"}`: the last line, once every server is stopped.
pub fn stopped_event() -> Value {
    json!({"event": "stopped"})
}

/// `value` as one line (with its newline), every [`is_unsafe`] character `\u`-escaped.
pub fn json_line(value: &Value) -> String {
    let text = value.to_string();
    let mut out = String::with_capacity(text.len() + 1);
    for c in text.chars() {
        if is_unsafe(c) {
            // Outside strings JSON has no such characters; inside, `\uXXXX` is the same string.
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                out.push_str(&format!("\\u{unit:04x}"));
            }
        } else {
            out.push(c);
        }
    }
    out.push('\n');
    out
}

fn plan_event(report: &PlanReport) -> Value {
    json!({
        "event": "plan",
        "run": report.run,
        "trigger": report.trigger,
        "elapsedMs": millis(report.elapsed),
        "steps": report.steps.iter().map(step_value).collect::<Vec<_>>(),
        "inputErrors": report.input_errors,
    })
}

/// A SPEC §10 action object with what the pass learned executing it.
fn step_value(step: &Step) -> Value {
    let mut value = serde_json::to_value(&step.action).unwrap_or(Value::Null);
    if let Value::Object(object) = &mut value {
        object.insert("elapsedMs".into(), millis(step.elapsed).into());
        if let Some(error) = &step.error {
            object.insert("error".into(), error.as_str().into());
        }
        if let Some(status) = &step.status {
            object.insert("retryInMs".into(), json!(status.retry_in_ms));
            object.insert("attempts".into(), status.attempts.into());
        }
        if !step.changes.is_empty() {
            let changes: Vec<Value> = step
                .changes
                .iter()
                .map(|c| {
                    json!({"field": c.field, "before": c.before, "after": c.after, "hidden": c.hidden})
                })
                .collect();
            object.insert("changes".into(), changes.into());
        }
        if let Some(reason) = &step.reason {
            object.insert("cause".into(), reason.as_str().into());
        }
        if let Some(tools) = &step.tools {
            object.insert(
                "tools".into(),
                json!({"before": tools.before, "after": tools.after}),
            );
        }
    }
    value
}

fn approval_event(request: &ApprovalRequest) -> Value {
    json!({
        "event": "approval_needed",
        "name": request.name,
        "lsp": request.lsp,
        "file": request.file.to_string_lossy(),
        "hash": request.hash,
        "approveCommand": request.approve_command(),
    })
}

/// `value` (an object) with `"event": kind` first.
fn tagged(kind: &str, value: Value) -> Value {
    let mut object = Map::new();
    object.insert("event".into(), kind.into());
    if let Value::Object(fields) = value {
        object.extend(fields);
    }
    Value::Object(object)
}

fn millis(d: std::time::Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_is_one_json_object_with_terminal_controls_escaped() {
        let value = json!({"event": "reload_failed", "message": "a\u{1b}[2J\u{9b}b\u{202e}c\nd"});
        let line = json_line(&value);
        assert!(
            line.ends_with('\n') && line.matches('\n').count() == 1,
            "{line:?}"
        );
        assert!(!line.trim_end().chars().any(is_unsafe), "{line:?}");
        let back: Value = serde_json::from_str(&line).expect("still JSON");
        assert_eq!(back, value);
    }
}
