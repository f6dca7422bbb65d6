//! The `hotReload` op.

use super::gating::GatingInputs;
use super::sources::request_layers;
use crate::api::encode::Encode;
use crate::api::request::Decode;
use crate::api::{ApiError, Request};
use crate::config::servers_to_value;
use crate::gating::Gating;
use crate::hot_reload::{hot_reload, Previous};
use crate::json::{Object, Value};
use crate::sources::Layer;

/// `hotReload`: what the host adopted last, the freshly read layers and the
/// admission inputs.
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub(crate) struct HotReloadRequest {
    pub(crate) previous: Previous,
    pub(crate) layers: Vec<Layer>,
    #[cfg_attr(feature = "ts", ts(flatten))]
    pub(crate) inputs: GatingInputs,
}

impl Decode for HotReloadRequest {
    /// `previous: {servers, gating, removed?}`, `layers`,
    /// `settings: {allowed?, excluded?}`, `cliAllowed?`, `approvals`,
    /// `projectRoot`, `yolo?`, `blocked?`.
    fn decode(req: &Request<'_>) -> Result<Self, ApiError> {
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
        // `yolo` and `projectRoot` fail before the settings lists do.
        if req.opt_bool("yolo")?.unwrap_or(false) {
            req.opt_str("projectRoot")?;
        } else {
            req.str("projectRoot")?;
        }
        Ok(HotReloadRequest {
            previous,
            layers,
            inputs: GatingInputs::decode(req)?,
        })
    }
}

/// What `hotReload` answers.
#[cfg_attr(feature = "ts", derive(ts_rs::TS), ts(rename_all = "camelCase"))]
pub(crate) struct HotReloadOutcome {
    /// Whether the host should reconcile (and adopt `next`).
    pub(crate) reconcile: bool,
    /// The servers, gating and removed names to adopt.
    pub(crate) next: Previous,
    /// Newly askable gated servers that pass the allow lists.
    pub(crate) promptable: Vec<String>,
    /// Whether to ask the user about `promptable`.
    pub(crate) approval_event: bool,
}

/// `hotReload` → `{reconcile, next: {servers, gating, removed?}, promptable,
/// approvalEvent}`.
pub(crate) fn op_hot_reload(req: HotReloadRequest) -> Result<HotReloadOutcome, ApiError> {
    let inputs = &req.inputs;
    let outcome = hot_reload(
        &req.previous,
        &req.layers,
        |servers, pending| inputs.gating_with(servers, pending),
        &inputs.approvals,
        &inputs.project_root,
        inputs.yolo,
    )
    .map_err(|e| ApiError::config(e.to_string()))?;
    Ok(HotReloadOutcome {
        reconcile: outcome.reconcile,
        next: Previous {
            servers: servers_to_value(&outcome.servers),
            gating: outcome.gating,
            removed: outcome.removed,
        },
        promptable: outcome.promptable,
        approval_event: outcome.approval_event,
    })
}

impl Encode for HotReloadOutcome {
    fn encode(self) -> Value {
        let mut next = Object::new();
        next.insert("servers".into(), self.next.servers);
        next.insert("gating".into(), self.next.gating.encode());
        if let Some(removed) = self.next.removed {
            next.insert("removed".into(), removed.encode());
        }
        let mut out = Object::new();
        out.insert("reconcile".into(), self.reconcile.into());
        out.insert("next".into(), Value::Object(next));
        out.insert("promptable".into(), self.promptable.encode());
        out.insert("approvalEvent".into(), self.approval_event.into());
        Value::Object(out)
    }
}
