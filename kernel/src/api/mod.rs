//! The kernel's JSON request/response vocabulary (SPEC §10): the API layer.
//!
//! One request is `{"op": "<name>", ...}`; the response is `{"ok": <result>}`
//! or `{"error": {"kind": "<kebab-case>", "message": "..."}}`. The native CLI
//! (`mcp-reconcile eval`), the wasm facade and the conformance vectors all go
//! through [`evaluate`], so every host answers byte for byte alike.
//!
//! This layer sits on top of the domain modules and nothing below imports
//! it: `request` decodes fields, `ops` holds one codec per op (decode the
//! request, call the typed domain function, encode the result), `error`
//! maps domain errors onto [`ErrorKind`]s, and this file is the op table.

mod error;
mod ops;
mod request;

pub use error::{ApiError, ErrorKind};
pub(crate) use request::Request;

use crate::json::{self, Object, Value};
use ops::{approvals, gating, hot_reload, identity, lsp, plan, settings, sources, supervise};

/// One op's codec.
type Handler = fn(&Request<'_>) -> Result<Value, ApiError>;

/// Answers one request value; never panics, whatever the input.
pub fn evaluate(request: &Value) -> Value {
    respond(handle(request))
}

/// Answers one request line (JSON text) with one response line (JSON text,
/// no newline). Text that is not JSON gets an `invalid-json` error.
pub fn evaluate_str(line: &str) -> String {
    let result = json::parse(line)
        .map_err(|e| ApiError {
            kind: ErrorKind::InvalidJson,
            message: format!("request is not JSON: {e}"),
        })
        .and_then(|request| handle(&request));
    respond(result).to_json()
}

fn respond(result: Result<Value, ApiError>) -> Value {
    let mut response = Object::new();
    match result {
        Ok(value) => response.insert("ok".into(), value),
        Err(e) => {
            let mut error = Object::new();
            error.insert("kind".into(), e.kind.as_str().into());
            error.insert("message".into(), e.message.into());
            response.insert("error".into(), Value::Object(error));
        }
    }
    Value::Object(response)
}

fn handle(request: &Value) -> Result<Value, ApiError> {
    let Value::Object(fields) = request else {
        return Err(ApiError::invalid(format!(
            "a request must be a JSON object, found {}",
            request.to_json()
        )));
    };
    let req = Request { fields };
    let op = req.str("op")?;
    let handler: Handler = match op {
        "transportOf" => identity::op_transport_of,
        "connectionId" => identity::op_connection_id,
        "sessionKey" => identity::op_session_key,
        "approvalHash" => identity::op_approval_hash,
        "approvalState" => approvals::op_approval_state,
        "pendingGated" => approvals::op_pending_gated,
        "promptable" => approvals::op_promptable,
        "gating" => gating::op_gating,
        "unavailableReason" => gating::op_unavailable_reason,
        "toolNotFound" => gating::op_tool_not_found,
        "gatingEqual" => gating::op_gating_equal,
        "hotReload" => hot_reload::op_hot_reload,
        "serversEqual" => gating::op_servers_equal,
        "plan" => plan::op_plan,
        "backoff" => plan::op_backoff,
        "matchPattern" => gating::op_match_pattern,
        "parseMcpJson" => sources::op_parse_mcp_json,
        "parseSettings" => settings::op_parse_settings,
        "assemble" => sources::op_assemble,
        "settingsDiff" => settings::op_settings_diff,
        "restartRequired" => settings::op_restart_required,
        "parseLspJson" => lsp::op_parse_lsp_json,
        "lspSeedId" => lsp::op_lsp_seed_id,
        "lspApprovalHash" => lsp::op_lsp_approval_hash,
        "lspPlan" => lsp::op_lsp_plan,
        "supervise" => supervise::op_supervise,
        other => {
            return Err(ApiError {
                kind: ErrorKind::UnknownOp,
                message: format!("unknown op {}", Value::from(other).to_json()),
            })
        }
    };
    handler(&req)
}
