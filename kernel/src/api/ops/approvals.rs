//! Approval ops: `approvalState`, `pendingGated`, `promptable`.

use crate::api::request::Decode;
use crate::api::{ApiError, Request};
use crate::approvals::{pending_gated, promptable, ApprovalState, Approvals};
use crate::config::{ServerConfig, Servers};

/// `approvalState`: one server entry against the approvals store.
#[cfg_attr(feature = "ts", derive(ts_rs::TS), ts(rename_all = "camelCase"))]
pub(crate) struct ApprovalStateRequest {
    /// No decisions when absent or `null`.
    #[cfg_attr(feature = "ts", ts(as = "Option<_>", optional = nullable))]
    pub(crate) approvals: Approvals,
    pub(crate) project_root: String,
    pub(crate) name: String,
    pub(crate) config: ServerConfig,
}

impl Decode for ApprovalStateRequest {
    fn decode(req: &Request<'_>) -> Result<Self, ApiError> {
        Ok(ApprovalStateRequest {
            approvals: req.approvals(),
            project_root: req.str("projectRoot")?.to_owned(),
            name: req.str("name")?.to_owned(),
            config: req.config("config")?,
        })
    }
}

/// `pendingGated` and `promptable`: a server map against the approvals store.
#[cfg_attr(feature = "ts", derive(ts_rs::TS), ts(rename_all = "camelCase"))]
pub(crate) struct GatedServersRequest {
    pub(crate) servers: Servers,
    /// No decisions when absent or `null`.
    #[cfg_attr(feature = "ts", ts(as = "Option<_>", optional = nullable))]
    pub(crate) approvals: Approvals,
    pub(crate) project_root: String,
}

impl Decode for GatedServersRequest {
    fn decode(req: &Request<'_>) -> Result<Self, ApiError> {
        let servers = req.servers("servers")?;
        Ok(GatedServersRequest {
            servers,
            approvals: req.approvals(),
            project_root: req.str("projectRoot")?.to_owned(),
        })
    }
}

/// `approvalState`: `approvals`, `projectRoot`, `name`, `config`.
pub(crate) fn op_approval_state(req: ApprovalStateRequest) -> Result<ApprovalState, ApiError> {
    Ok(req
        .approvals
        .state(&req.project_root, &req.name, &req.config))
}

/// `pendingGated`: `servers`, `approvals`, `projectRoot` → names.
pub(crate) fn op_pending_gated(req: GatedServersRequest) -> Result<Vec<String>, ApiError> {
    Ok(pending_gated(
        &req.servers,
        &req.approvals,
        &req.project_root,
    ))
}

/// `promptable`: `servers`, `approvals`, `projectRoot` → names.
pub(crate) fn op_promptable(req: GatedServersRequest) -> Result<Vec<String>, ApiError> {
    Ok(promptable(&req.servers, &req.approvals, &req.project_root))
}
