//! Identity ops: `transportOf`, `connectionId`, `sessionKey`,
//! `approvalHash`.

use crate::api::request::Decode;
use crate::api::{ApiError, Request};
use crate::config::{ServerConfig, Transport};
use crate::identity::{
    approval_hash, connection_id, session_key, ApprovalHash, ConnectionId, SessionKey,
};

/// `transportOf` and `approvalHash`: one server entry.
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub(crate) struct ConfigRequest {
    pub(crate) config: ServerConfig,
}

impl Decode for ConfigRequest {
    fn decode(req: &Request<'_>) -> Result<Self, ApiError> {
        Ok(ConfigRequest {
            config: req.config("config")?,
        })
    }
}

/// `connectionId` and `sessionKey`: a server entry under its name.
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub(crate) struct NamedConfigRequest {
    pub(crate) name: String,
    pub(crate) config: ServerConfig,
}

impl Decode for NamedConfigRequest {
    fn decode(req: &Request<'_>) -> Result<Self, ApiError> {
        Ok(NamedConfigRequest {
            name: req.str("name")?.to_owned(),
            config: req.config("config")?,
        })
    }
}

/// `transportOf`: `config` → `"stdio"`, `"http"` or `"sse"`.
pub(crate) fn op_transport_of(req: ConfigRequest) -> Result<Transport, ApiError> {
    Ok(req.config.transport())
}

/// `connectionId`: `name`, `config` → the pool identity.
pub(crate) fn op_connection_id(req: NamedConfigRequest) -> Result<ConnectionId, ApiError> {
    Ok(connection_id(&req.name, &req.config)?)
}

/// `sessionKey`: `name`, `config` → the session identity.
pub(crate) fn op_session_key(req: NamedConfigRequest) -> Result<SessionKey, ApiError> {
    Ok(session_key(&req.name, &req.config)?)
}

/// `approvalHash`: `config` → 64-hex string.
pub(crate) fn op_approval_hash(req: ConfigRequest) -> Result<ApprovalHash, ApiError> {
    Ok(approval_hash(&req.config))
}
