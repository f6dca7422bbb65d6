//! Servers, reports and plans as JSON: the `status --json` objects and what
//! the session socket carries. Secrets never appear: only names, states and
//! (redacted) errors. (The lines people read are the binary's.)

use mcp_reconcile_kernel::plan::Plan;
use serde_json::{json, Value};

use crate::host::{LspServerStatus, ServerStatus, StatusReport};

/// One server as a `status --json` object. Stable fields: `name`, `state`,
/// `reason`, `approval`, `tools`, `prompts`, `pid`, `spawns`, `lastError`, `share` (the scope
/// a daemon session's stdio server is shared in) and `sessions` (how many sessions hold its
/// process; `null` outside the daemon), `lazy` (started only when a request needs it; its
/// `state` is `dormant` while it does not run);
/// also `transport`, `resources`, `attempts`, `retryInMs`, `protocol` (the MCP revision a live
/// connection speaks), `withheld` (its tools and prompts, by its own names, that changed since
/// they were approved and wait for `review-tools`) (and `authorizedUntil`, which the `status` command adds from the token
/// file).
pub fn status_json(s: &ServerStatus) -> Value {
    json!({
        "kind": "mcp",
        "name": s.name,
        "state": s.state,
        "reason": s.reason.map(|r| r.as_str()),
        "approval": s.approval.map(|a| a.as_str()),
        "transport": s.transport.as_str(),
        "tools": s.tools,
        "prompts": s.prompts,
        "resources": s.resources,
        "pid": s.pid,
        "protocol": s.protocol,
        "spawns": s.spawns,
        "share": s.share,
        "sessions": s.sessions,
        "lazy": s.lazy,
        "attempts": s.attempts,
        "lastError": s.last_error,
        "retryInMs": s.retry_in_ms,
        "withheld": s.withheld,
    })
}

/// One language server as a `status --json` object (SPEC §14.4): `kind: "lsp"`, `name`,
/// `state`, `reason`, `approval`, `pid`, `spawns`, `attempts`, `lastError`, `retryInMs`,
/// `extensions`, `settingsPushes`.
pub fn lsp_status_json(s: &LspServerStatus) -> Value {
    json!({
        "kind": "lsp",
        "name": s.name,
        "state": s.state,
        "reason": s.reason.map(|r| r.as_str()),
        "approval": s.approval.map(|a| a.as_str()),
        "pid": s.pid,
        "spawns": s.spawns,
        "attempts": s.attempts,
        "lastError": s.last_error,
        "retryInMs": s.retry_in_ms,
        "extensions": s.extensions,
        "settingsPushes": s.settings_pushes,
    })
}

/// `{servers: [...], errors: [...]}` as the session socket carries it: MCP servers, then
/// language servers, each with its `kind`.
pub fn report_json(report: &StatusReport) -> Value {
    json!({
        "servers": report
            .servers
            .iter()
            .map(status_json)
            .chain(report.language_servers.iter().map(lsp_status_json))
            .collect::<Vec<_>>(),
        "errors": report.errors,
    })
}

/// A kernel plan as JSON (§10 action objects): its serde form.
pub fn plan_json(plan: &Plan) -> Value {
    serde_json::to_value(plan).unwrap_or(Value::Null)
}
