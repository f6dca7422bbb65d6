//! The `hotReload` op.

use super::gating::request_gating;
use super::sources::request_layers;
use crate::api::{ApiError, Request};
use crate::config::{servers_to_value, Servers};
use crate::gating::Gating;
use crate::hot_reload::{hot_reload, Previous};
use crate::json::{Object, Value};

/// `hotReload`: `previous: {servers, gating, removed?}`, `layers`,
/// `settings: {allowed?, excluded?}`, `cliAllowed?`, `approvals`,
/// `projectRoot`, `yolo?`.
pub(crate) fn op_hot_reload(req: &Request<'_>) -> Result<Value, ApiError> {
    let previous = req.object("previous")?;
    let prev = Request { fields: previous };
    let previous = Previous {
        servers: prev.get("servers").cloned().unwrap_or(Value::Null),
        gating: match prev.get("gating") {
            None => Gating::default(),
            Some(g) => Gating::from_value(g)
                .map_err(|e| ApiError::invalid(format!("field `previous.gating`: {e}")))?,
        },
        removed: prev.opt_string_list("removed")?,
    };
    let layers = request_layers(req)?;
    let yolo = req.opt_bool("yolo")?.unwrap_or(false);
    let root = if yolo {
        req.opt_str("projectRoot")?.unwrap_or_default()
    } else {
        req.str("projectRoot")?
    };
    // Read the gating inputs before assembling so a malformed request fails
    // whatever the layers hold.
    request_gating(req, &Servers::new())?;
    let mut gating_error = None;
    let outcome = hot_reload(
        &previous,
        &layers,
        |servers| {
            request_gating(req, servers).unwrap_or_else(|e| {
                gating_error = Some(e);
                Gating::default()
            })
        },
        &req.approvals(),
        root,
        yolo,
    )
    .map_err(|e| ApiError::config(e.to_string()))?;
    if let Some(e) = gating_error {
        return Err(e);
    }
    let list =
        |items: &[String]| Value::Array(items.iter().map(|s| Value::from(s.as_str())).collect());
    let mut next = Object::new();
    next.insert("servers".into(), servers_to_value(&outcome.servers));
    next.insert("gating".into(), outcome.gating.to_value());
    if let Some(removed) = &outcome.removed {
        next.insert("removed".into(), list(removed));
    }
    let mut out = Object::new();
    out.insert("reconcile".into(), outcome.reconcile.into());
    out.insert("next".into(), Value::Object(next));
    out.insert("promptable".into(), list(&outcome.promptable));
    out.insert("approvalEvent".into(), outcome.approval_event.into());
    Ok(Value::Object(out))
}
