//! The kernel's JSON request/response vocabulary (SPEC §10): the API layer.
//!
//! One request is `{"op": "<name>", ...}`; the response is `{"ok": <result>}`
//! or `{"error": {"kind": "<kebab-case>", "message": "..."}}`. The native CLI
//! (`mcp-reconcile eval`), the wasm facade and the conformance vectors all go
//! through [`evaluate`], so every host answers byte for byte alike.
//!
//! This layer sits on top of the domain modules and nothing below imports
//! it: `request` decodes fields into each op's request record, `ops` holds
//! one codec per op (the record, and a function from it to a typed result
//! that calls the domain function), `encode` writes results as JSON, `error`
//! maps domain errors onto [`ErrorKind`]s, and this file is the op table.
//! With the `ts` feature, the `typescript` module declares the request and
//! result types of that table in TypeScript.

mod encode;
mod error;
mod ops;
mod request;
#[cfg(feature = "ts")]
pub mod typescript;

pub use error::{ApiError, ErrorKind};
pub(crate) use request::Request;

use crate::json::{self, Object, Value};
use encode::Encode;
use ops::{
    approvals, gating, hot_reload, identity, lsp, plan, policy, settings, sources, supervise,
};
use request::Decode;

/// The op table (SPEC §10 order): each op's name, codec, request record and
/// result type. It is the one list the dispatcher, [`OPS`] and the
/// TypeScript declarations come from.
macro_rules! ops {
    ($( $(#[doc = $doc:literal])+ $op:literal => $codec:path, $request:ty => $result:ty; )*) => {
        /// Every op name, in SPEC §10 order.
        pub const OPS: &[&str] = &[$($op),*];

        /// Runs `op`'s codec, or `None` for an unknown op.
        fn dispatch(op: &str, req: &Request<'_>) -> Option<Result<Value, ApiError>> {
            Some(match op {
                $( $op => run::<$request, $result>(req, $codec), )*
                _ => return None,
            })
        }

        /// Declares every op's request and result type.
        #[cfg(feature = "ts")]
        fn declare_ops(out: &mut typescript::Declarations) {
            $( out.op::<$request, $result>($op, &[$($doc),+]); )*
        }
    };
}

ops! {
    /// Transport kind of a server entry.
    "transportOf" => identity::op_transport_of, identity::ConfigRequest => crate::config::Transport;
    /// Connection id: `"<name>::" + 16 hex` (SPEC §2.1).
    "connectionId" => identity::op_connection_id, identity::NamedConfigRequest => crate::identity::ConnectionId;
    /// Session key: connection id + session view (SPEC §2.2).
    "sessionKey" => identity::op_session_key, identity::NamedConfigRequest => crate::identity::SessionKey;
    /// Approval hash: 64 hex (SPEC §2.3).
    "approvalHash" => identity::op_approval_hash, identity::ConfigRequest => crate::identity::ApprovalHash;
    /// Approval state of one server (SPEC §5).
    "approvalState" => approvals::op_approval_state, approvals::ApprovalStateRequest => crate::approvals::ApprovalState;
    /// Gated servers that are not approved, in map order.
    "pendingGated" => approvals::op_pending_gated, approvals::GatedServersRequest => Vec<String>;
    /// Gated servers to ask the user about, in map order.
    "promptable" => approvals::op_promptable, approvals::GatedServersRequest => Vec<String>;
    /// Computes the admission gating (SPEC §4).
    "gating" => gating::op_gating, gating::GatingRequest => crate::gating::Gating;
    /// Why a server is not connected, or `null`.
    "unavailableReason" => gating::op_unavailable_reason, gating::UnavailableReasonRequest => Option<crate::gating::Reason>;
    /// The message for a call to a missing `mcp__<server>__<tool>`, or `null` for
    /// a name of another shape.
    "toolNotFound" => gating::op_tool_not_found, gating::ToolNotFoundRequest => Option<String>;
    /// Whether two gating objects are equal (lists as multisets).
    "gatingEqual" => gating::op_gating_equal, gating::GatingEqualRequest => bool;
    /// What a debounced reload does (SPEC §7).
    "hotReload" => hot_reload::op_hot_reload, hot_reload::HotReloadRequest => hot_reload::HotReloadOutcome;
    /// Whether two server maps are equal (key order ignored).
    "serversEqual" => gating::op_servers_equal, gating::ServersEqualRequest => bool;
    /// The reconcile plan from desired to online (SPEC §6).
    "plan" => plan::op_plan, plan::PlanRequest => crate::plan::Plan;
    /// Delay before the next retry of a failed server (SPEC §9).
    "backoff" => plan::op_backoff, plan::BackoffRequest => crate::backoff::Backoff;
    /// Whether a name matches a `*` / `?` pattern.
    "matchPattern" => gating::op_match_pattern, gating::MatchPatternRequest => bool;
    /// Parses `.mcp.json` text (SPEC §3.2).
    "parseMcpJson" => sources::op_parse_mcp_json, sources::ParseMcpJsonRequest => crate::sources::McpJson;
    /// Parses a settings file's text (SPEC §3.3).
    "parseSettings" => settings::op_parse_settings, settings::ParseSettingsRequest => settings::Settings;
    /// Merges configuration layers by precedence (SPEC §3.1).
    "assemble" => sources::op_assemble, sources::AssembleRequest => crate::sources::Assembled;
    /// Changed leaf paths between two settings objects (SPEC §7).
    "settingsDiff" => settings::op_settings_diff, settings::SettingsDiffRequest => Vec<String>;
    /// Whether changed paths need a restart (SPEC §7).
    "restartRequired" => settings::op_restart_required, settings::RestartRequiredRequest => crate::settings::RestartRequired;
    /// Parses `.lsp.json` text (SPEC §14.1).
    "parseLspJson" => lsp::op_parse_lsp_json, lsp::ParseLspJsonRequest => crate::lsp::LspJson;
    /// A language server's launch-seed id (SPEC §14.2).
    "lspSeedId" => lsp::op_lsp_seed_id, lsp::LspSeedIdRequest => crate::lsp::LspSeedId;
    /// A language-server entry's approval hash (SPEC §14.2).
    "lspApprovalHash" => lsp::op_lsp_approval_hash, lsp::LspApprovalHashRequest => crate::identity::ApprovalHash;
    /// The language-server plan: restart, reconfigure or keep (SPEC §14.2).
    "lspPlan" => lsp::op_lsp_plan, lsp::LspPlanRequest => crate::lsp::LspPlan;
    /// One step of a connection's supervision: backoff, crash loop, healthy
    /// reset (SPEC §9).
    "supervise" => supervise::op_supervise, supervise::SuperviseRequest => supervise::Supervised;
    /// The servers a client's administrator policy turns off (SPEC §15):
    /// what a host passes on as `blocked`.
    "clientPolicy" => policy::op_client_policy, policy::ClientPolicyRequest => policy::ClientPolicyOutcome;
}

/// Decodes the request record, runs the codec, encodes its result.
fn run<Q: Decode, R: Encode>(
    req: &Request<'_>,
    codec: fn(Q) -> Result<R, ApiError>,
) -> Result<Value, ApiError> {
    Ok(codec(Q::decode(req)?)?.encode())
}

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
    evaluate_op(Request { fields }.str("op")?, fields)
}

/// Runs `op` on a request's other fields (an `op` member among them is not
/// read): the `ok` value of the response [`evaluate`] gives for the request
/// `{op, ...fields}`, or its error. For a caller that knows the op already —
/// the wasm package's typed exports — without building the request object
/// and taking the response apart again.
///
/// # Errors
/// The response's error: `unknown-op`, or what the op's decoding or the op
/// itself reports.
pub fn evaluate_op(op: &str, fields: &Object) -> Result<Value, ApiError> {
    dispatch(op, &Request { fields }).unwrap_or_else(|| {
        Err(ApiError {
            kind: ErrorKind::UnknownOp,
            message: format!("unknown op {}", Value::from(op).to_json()),
        })
    })
}
