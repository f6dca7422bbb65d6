//! Admission ops: `gating`, `unavailableReason`, `toolNotFound`,
//! `gatingEqual`, `serversEqual`, `matchPattern`.

use crate::api::{ApiError, Request};
use crate::approvals::Approvals;
use crate::config::Servers;
use crate::gating::{
    compute_gating, gating_equal, match_pattern, servers_equal, tool_not_found, unavailable_reason,
    Gating, Reason,
};
use crate::json::{Object, Value};
use crate::settings::McpLists;

/// `gating`: `servers`, `settings: {allowed?, excluded?, workspaceAllowed?}`, `cliAllowed?`,
/// `approvals`, `projectRoot`, `yolo?`.
pub(crate) fn op_gating(req: &Request<'_>) -> Result<Value, ApiError> {
    let servers = req.servers("servers")?;
    Ok(request_gating(req, &servers)?.to_value())
}

/// [`compute_gating`] over the request fields the `gating` and `hotReload`
/// ops share: `settings: {allowed?, excluded?}`, `cliAllowed?`, `approvals`,
/// `projectRoot` (optional in yolo), `yolo?`.
pub(crate) fn request_gating(req: &Request<'_>, servers: &Servers) -> Result<Gating, ApiError> {
    let settings = match req.get("settings") {
        None => Object::new(),
        Some(Value::Object(o)) => o.clone(),
        Some(other) => {
            return Err(ApiError::invalid(format!(
                "field `settings` must be an object, found {}",
                other.to_json()
            )))
        }
    };
    let settings = Request { fields: &settings };
    let lists = McpLists {
        allowed: settings.opt_string_list("allowed")?,
        excluded: settings.opt_string_list("excluded")?,
        workspace_allowed: settings.opt_string_list("workspaceAllowed")?,
    };
    let cli_allowed = req.opt_string_list("cliAllowed")?;
    let yolo = req.opt_bool("yolo")?.unwrap_or(false);
    let root = if yolo {
        req.opt_str("projectRoot")?.unwrap_or_default()
    } else {
        req.str("projectRoot")?
    };
    Ok(compute_gating(
        servers,
        &lists,
        cli_allowed.as_deref(),
        &req.approvals(),
        root,
        yolo,
    ))
}

/// `unavailableReason`: `name`, `merged`, `gating`, `removed`, `approvals?`,
/// `projectRoot?`.
pub(crate) fn op_unavailable_reason(req: &Request<'_>) -> Result<Value, ApiError> {
    let name = req.str("name")?;
    let q = AdmissionQuery::parse(req)?;
    let reason = unavailable_reason(name, &q.merged, &q.gating, &q.removed, q.approvals());
    Ok(reason.map(Reason::as_str).into())
}

/// `toolNotFound`: `tool`, `merged`, `gating`, `removed`, `approvals?`,
/// `projectRoot?`.
pub(crate) fn op_tool_not_found(req: &Request<'_>) -> Result<Value, ApiError> {
    let tool = req.str("tool")?;
    let q = AdmissionQuery::parse(req)?;
    Ok(tool_not_found(tool, &q.merged, &q.gating, &q.removed, q.approvals()).into())
}

/// `gatingEqual`: `a`, `b` (gating objects).
pub(crate) fn op_gating_equal(req: &Request<'_>) -> Result<Value, ApiError> {
    Ok(gating_equal(&req.gating("a")?, &req.gating("b")?).into())
}

/// `serversEqual`: `a`, `b` (maps or `null`).
pub(crate) fn op_servers_equal(req: &Request<'_>) -> Result<Value, ApiError> {
    servers_equal(req.fields.get("a"), req.fields.get("b"))
        .map(Value::Bool)
        .map_err(|e| ApiError::config(e.to_string()))
}

/// `matchPattern`: `pattern`, `name` → whether the glob matches.
pub(crate) fn op_match_pattern(req: &Request<'_>) -> Result<Value, ApiError> {
    Ok(match_pattern(req.str("pattern")?, req.str("name")?).into())
}

/// The fields shared by `unavailableReason` and `toolNotFound`.
struct AdmissionQuery<'a> {
    merged: Servers,
    gating: Gating,
    removed: Vec<String>,
    store: Option<Approvals>,
    root: Option<&'a str>,
}

impl<'a> AdmissionQuery<'a> {
    /// `merged` absent or `null` is `{}`, `gating` absent or `null` is `{}`,
    /// `removed` absent or `null` is `[]`.
    fn parse(req: &Request<'a>) -> Result<Self, ApiError> {
        Ok(AdmissionQuery {
            merged: match req.get("merged") {
                None => Servers::new(),
                Some(_) => req.servers("merged")?,
            },
            gating: match req.get("gating") {
                None => Gating::default(),
                Some(_) => req.gating("gating")?,
            },
            removed: req.opt_string_list("removed")?.unwrap_or_default(),
            store: req.get("approvals").map(|v| Approvals::new(v.clone())),
            root: req.opt_str("projectRoot")?,
        })
    }

    /// Approvals count only when both `approvals` and `projectRoot` are given.
    fn approvals(&self) -> Option<(&Approvals, &str)> {
        self.store.as_ref().zip(self.root)
    }
}
