//! Reconcile ops: `plan` and `backoff`.

use crate::api::request::Decode;
use crate::api::{ApiError, Request};
use crate::backoff::{backoff_wide, Backoff, MAX_SEED};
use crate::config::Servers;
use crate::gating::Gating;
use crate::json::{whole_number, Value};
use crate::plan::{online_from_value, plan, Mode, Online, Plan};
use crate::time::Millis;

/// `plan`: desired and live servers, the gating in force, and the clock.
#[cfg_attr(feature = "ts", derive(ts_rs::TS), ts(rename_all = "camelCase"))]
pub(crate) struct PlanRequest {
    pub(crate) desired: Servers,
    pub(crate) online: Online,
    pub(crate) gating: Gating,
    pub(crate) trusted_folder: bool,
    pub(crate) mode: Mode,
    /// Milliseconds on the host's clock.
    pub(crate) now: Millis,
}

impl Decode for PlanRequest {
    fn decode(req: &Request<'_>) -> Result<Self, ApiError> {
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
        Ok(PlanRequest {
            desired,
            online,
            gating,
            trusted_folder,
            mode,
            now,
        })
    }
}

/// `backoff`: a failure count and a per-server jitter seed.
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub(crate) struct BackoffRequest {
    /// Consecutive failures.
    pub(crate) attempts: u64,
    /// Per-server seed, an unsigned integer ≤ 2^53.
    pub(crate) seed: u64,
}

impl Decode for BackoffRequest {
    fn decode(req: &Request<'_>) -> Result<Self, ApiError> {
        Ok(BackoffRequest {
            attempts: count(req, "attempts", u64::MAX)?,
            seed: count(req, "seed", MAX_SEED)?,
        })
    }
}

/// Op `plan`: `{desired, online, gating, trustedFolder, mode, now}` →
/// `{actions}`.
pub(crate) fn op_plan(req: PlanRequest) -> Result<Plan, ApiError> {
    Ok(plan(
        &req.desired,
        &req.online,
        &req.gating,
        req.trusted_folder,
        req.mode,
        req.now,
    )?)
}

/// Op `backoff`: `{attempts, seed}` → `{delayMs, crashLoop}`.
pub(crate) fn op_backoff(req: BackoffRequest) -> Result<Backoff, ApiError> {
    Ok(backoff_wide(req.attempts, req.seed))
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
