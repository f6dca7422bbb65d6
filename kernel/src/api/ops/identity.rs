//! Identity ops: `transportOf`, `connectionId`, `sessionKey`,
//! `approvalHash`.

use crate::api::{ApiError, Request};
use crate::identity::{approval_hash, connection_id, session_key};
use crate::json::Value;

/// `transportOf`: `config` → `"stdio"`, `"http"` or `"sse"`.
pub(crate) fn op_transport_of(req: &Request<'_>) -> Result<Value, ApiError> {
    Ok(req.config("config")?.transport().as_str().into())
}

/// `connectionId`: `name`, `config` → the pool identity.
pub(crate) fn op_connection_id(req: &Request<'_>) -> Result<Value, ApiError> {
    Ok(connection_id(req.str("name")?, &req.config("config")?)?
        .0
        .into())
}

/// `sessionKey`: `name`, `config` → the session identity.
pub(crate) fn op_session_key(req: &Request<'_>) -> Result<Value, ApiError> {
    Ok(session_key(req.str("name")?, &req.config("config")?)?
        .0
        .into())
}

/// `approvalHash`: `config` → 64-hex string.
pub(crate) fn op_approval_hash(req: &Request<'_>) -> Result<Value, ApiError> {
    Ok(approval_hash(&req.config("config")?).0.into())
}
