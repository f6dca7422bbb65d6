//! Reconcile ops: `plan` and `backoff`.

use crate::api::{ApiError, Request};
use crate::backoff::{backoff_wide, MAX_SEED};
use crate::json::{whole_number, Object, Value};
use crate::plan::{online_from_value, plan, Mode};
use crate::time::Millis;

/// Op `plan`: `{desired, online, gating, trustedFolder, mode, now}` →
/// `{actions}`.
pub(crate) fn op_plan(req: &Request<'_>) -> Result<Value, ApiError> {
    let desired = req.servers("desired")?;
    let online = online_from_value(req.raw("online")?)
        .map_err(|e| ApiError::invalid(format!("field `online`: {e}")))?;
    let gating = req.gating("gating")?;
    let trusted_folder = req.bool("trustedFolder")?;
    let mode = req.str("mode")?;
    let mode = Mode::parse(mode).ok_or_else(|| {
        ApiError::invalid(format!(
            "field `mode` must be \"session\" or \"pool\", found {}",
            Value::from(mode).to_json()
        ))
    })?;
    let now = req.raw("now")?;
    let now = whole_number(now, u64::MAX).map(Millis).ok_or_else(|| {
        ApiError::invalid(format!(
            "field `now` must be a non-negative integer, found {}",
            now.to_json()
        ))
    })?;
    Ok(plan(&desired, &online, &gating, trusted_folder, mode, now)?.to_value())
}

/// Op `backoff`: `{attempts, seed}` → `{delayMs, crashLoop}`.
pub(crate) fn op_backoff(req: &Request<'_>) -> Result<Value, ApiError> {
    let attempts = count(req, "attempts", u64::MAX)?;
    let seed = count(req, "seed", MAX_SEED)?;
    let result = backoff_wide(attempts, seed);
    let mut object = Object::new();
    object.insert("delayMs".into(), Value::Number(result.delay_ms as f64));
    object.insert("crashLoop".into(), result.crash_loop.into());
    Ok(Value::Object(object))
}

fn count(req: &Request<'_>, field: &str, max: u64) -> Result<u64, ApiError> {
    let value = req.raw(field)?;
    whole_number(value, max).ok_or_else(|| {
        ApiError::invalid(format!(
            "field `{field}` must be an integer from 0 to {max}, found {}",
            value.to_json()
        ))
    })
}
