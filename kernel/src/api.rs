//! The kernel's JSON request/response vocabulary (SPEC §10).
//!
//! One request is `{"op": "<name>", ...}`; the response is `{"ok": <result>}`
//! or `{"error": {"kind": "<kebab-case>", "message": "..."}}`. The native CLI
//! (`mcp-reconcile eval`), the wasm facade and the conformance vectors all go
//! through [`evaluate`], so every host answers byte for byte alike.

use crate::approvals;
use crate::config::{servers_from_value, ServerConfig, Servers};
use crate::gating::{self, match_pattern, Gating};
use crate::identity;
use crate::json::{self, Object, Value};

/// What kind of failure a response reports (spelled in kebab-case).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// The request line is not JSON.
    InvalidJson,
    /// The request is JSON but not a well-formed request for its op.
    InvalidRequest,
    /// `op` names no operation.
    UnknownOp,
    /// A server config the TypeScript host would throw on (e.g. a tool filter
    /// that is a number).
    InvalidConfig,
}

impl ErrorKind {
    /// The kebab-case spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::InvalidJson => "invalid-json",
            ErrorKind::InvalidRequest => "invalid-request",
            ErrorKind::UnknownOp => "unknown-op",
            ErrorKind::InvalidConfig => "invalid-config",
        }
    }
}

/// A failed request.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ApiError {
    /// The failure class.
    pub kind: ErrorKind,
    /// A lower-case sentence naming the offending field or value.
    pub message: String,
}

impl ApiError {
    /// An `invalid-request` error.
    pub fn invalid(message: impl Into<String>) -> Self {
        ApiError {
            kind: ErrorKind::InvalidRequest,
            message: message.into(),
        }
    }

    /// An `invalid-config` error.
    pub fn config(message: impl Into<String>) -> Self {
        ApiError {
            kind: ErrorKind::InvalidConfig,
            message: message.into(),
        }
    }
}

impl From<identity::IdentityError> for ApiError {
    fn from(e: identity::IdentityError) -> Self {
        ApiError::config(e.to_string())
    }
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
    let req = Request { fields };
    let op = req.str("op")?;
    match op {
        "transportOf" => Ok(req.config("config")?.transport().as_str().into()),
        "connectionId" => Ok(
            identity::connection_id(req.str("name")?, &req.config("config")?)?
                .0
                .into(),
        ),
        "sessionKey" => Ok(
            identity::session_key(req.str("name")?, &req.config("config")?)?
                .0
                .into(),
        ),
        "approvalHash" => Ok(identity::approval_hash(&req.config("config")?).0.into()),
        "approvalState" => approvals::op_approval_state(&req),
        "pendingGated" => approvals::op_pending_gated(&req),
        "promptable" => approvals::op_promptable(&req),
        "gating" => gating::op_gating(&req),
        "unavailableReason" => gating::op_unavailable_reason(&req),
        "toolNotFound" => gating::op_tool_not_found(&req),
        "gatingEqual" => gating::op_gating_equal(&req),
        "hotReload" => crate::hot_reload::op_hot_reload(&req),
        "serversEqual" => gating::op_servers_equal(&req),
        "plan" => crate::plan::op_plan(&req),
        "backoff" => crate::backoff::op_backoff(&req),
        "matchPattern" => Ok(match_pattern(req.str("pattern")?, req.str("name")?).into()),
        "parseMcpJson" => crate::sources::op_parse_mcp_json(&req),
        "parseSettings" => crate::settings::op_parse_settings(&req),
        "assemble" => crate::sources::op_assemble(&req),
        "settingsDiff" => crate::settings::op_settings_diff(&req),
        "restartRequired" => crate::settings::op_restart_required(&req),
        "parseLspJson" => crate::lsp::op_parse_lsp_json(&req),
        "lspSeedId" => crate::lsp::op_lsp_seed_id(&req),
        "lspApprovalHash" => crate::lsp::op_lsp_approval_hash(&req),
        "lspPlan" => crate::lsp::op_lsp_plan(&req),
        other => Err(ApiError {
            kind: ErrorKind::UnknownOp,
            message: format!("unknown op {}", Value::from(other).to_json()),
        }),
    }
}

/// Typed access to a request's fields, with errors that name the field.
pub(crate) struct Request<'a> {
    pub(crate) fields: &'a Object,
}

#[allow(dead_code)] // accessors are shared by every op module
impl<'a> Request<'a> {
    /// The field, treating `null` as absent.
    pub(crate) fn get(&self, field: &str) -> Option<&'a Value> {
        match self.fields.get(field) {
            None | Some(Value::Null) => None,
            Some(v) => Some(v),
        }
    }

    /// The field, which must be present (it may be `null`).
    pub(crate) fn raw(&self, field: &str) -> Result<&'a Value, ApiError> {
        self.fields
            .get(field)
            .ok_or_else(|| ApiError::invalid(format!("missing field `{field}`")))
    }

    /// A required string field.
    pub(crate) fn str(&self, field: &str) -> Result<&'a str, ApiError> {
        match self.fields.get(field) {
            Some(Value::String(s)) => Ok(s),
            Some(other) => Err(wrong_type(field, "a string", other)),
            None => Err(ApiError::invalid(format!("missing field `{field}`"))),
        }
    }

    /// An optional string field (`null` is absent).
    pub(crate) fn opt_str(&self, field: &str) -> Result<Option<&'a str>, ApiError> {
        match self.get(field) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(other) => Err(wrong_type(field, "a string", other)),
        }
    }

    /// An optional boolean field (`null` is absent).
    pub(crate) fn opt_bool(&self, field: &str) -> Result<Option<bool>, ApiError> {
        match self.get(field) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(other) => Err(wrong_type(field, "a boolean", other)),
        }
    }

    /// A required boolean field.
    pub(crate) fn bool(&self, field: &str) -> Result<bool, ApiError> {
        self.opt_bool(field)?
            .ok_or_else(|| ApiError::invalid(format!("missing field `{field}`")))
    }

    /// A required object field.
    pub(crate) fn object(&self, field: &str) -> Result<&'a Object, ApiError> {
        match self.fields.get(field) {
            Some(Value::Object(o)) => Ok(o),
            Some(other) => Err(wrong_type(field, "an object", other)),
            None => Err(ApiError::invalid(format!("missing field `{field}`"))),
        }
    }

    /// A required server config (an object).
    pub(crate) fn config(&self, field: &str) -> Result<ServerConfig, ApiError> {
        self.object(field).map(|o| ServerConfig(o.clone()))
    }

    /// A required `{name: config}` map.
    pub(crate) fn servers(&self, field: &str) -> Result<Servers, ApiError> {
        servers_from_value(self.raw(field)?)
            .map_err(|e| ApiError::invalid(format!("field `{field}`: {e}")))
    }

    /// An optional array of strings (`null` is absent).
    pub(crate) fn opt_string_list(&self, field: &str) -> Result<Option<Vec<String>>, ApiError> {
        match self.get(field) {
            None => Ok(None),
            Some(Value::Array(items)) => items
                .iter()
                .map(|v| v.as_str().map(str::to_owned))
                .collect::<Option<Vec<_>>>()
                .map(Some)
                .ok_or_else(|| {
                    wrong_type(field, "an array of strings", &Value::Array(items.clone()))
                }),
            Some(other) => Err(wrong_type(field, "an array of strings", other)),
        }
    }

    /// A required array of strings.
    pub(crate) fn string_list(&self, field: &str) -> Result<Vec<String>, ApiError> {
        self.opt_string_list(field)?
            .ok_or_else(|| ApiError::invalid(format!("missing field `{field}`")))
    }

    /// A required gating object.
    pub(crate) fn gating(&self, field: &str) -> Result<Gating, ApiError> {
        Gating::from_value(self.raw(field)?).map_err(|e| ApiError::invalid(e.to_string()))
    }
}

fn wrong_type(field: &str, expected: &str, found: &Value) -> ApiError {
    ApiError::invalid(format!(
        "field `{field}` must be {expected}, found {}",
        found.preview(77)
    ))
}
