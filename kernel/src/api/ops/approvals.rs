//! Approval ops: `approvalState`, `pendingGated`, `promptable`.

use super::names_value;
use crate::api::{ApiError, Request};
use crate::approvals::{pending_gated, promptable};
use crate::json::Value;

/// `approvalState`: `approvals`, `projectRoot`, `name`, `config`.
pub(crate) fn op_approval_state(req: &Request<'_>) -> Result<Value, ApiError> {
    let approvals = req.approvals();
    let state = approvals.state(
        req.str("projectRoot")?,
        req.str("name")?,
        &req.config("config")?,
    );
    Ok(state.as_str().into())
}

/// `pendingGated`: `servers`, `approvals`, `projectRoot`.
pub(crate) fn op_pending_gated(req: &Request<'_>) -> Result<Value, ApiError> {
    let servers = req.servers("servers")?;
    let names = pending_gated(&servers, &req.approvals(), req.str("projectRoot")?);
    Ok(names_value(names))
}

/// `promptable`: `servers`, `approvals`, `projectRoot`.
pub(crate) fn op_promptable(req: &Request<'_>) -> Result<Value, ApiError> {
    let servers = req.servers("servers")?;
    let names = promptable(&servers, &req.approvals(), req.str("projectRoot")?);
    Ok(names_value(names))
}
