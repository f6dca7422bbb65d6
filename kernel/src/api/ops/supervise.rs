//! Supervision op: `supervise` — one step of a connection's failure
//! bookkeeping (SPEC §9), so a host in another language (the TypeScript
//! `Reconciler`) applies the kernel's policy instead of a copy of it.

use crate::api::encode::Encode;
use crate::api::request::Decode;
use crate::api::{ApiError, Request};
use crate::json::{whole_number, Object, Value};
use crate::plan::Status;
use crate::supervise::{RestartLimit, Supervision, View};
use crate::time::Millis;

/// What happened to a supervised connection.
#[derive(Clone, Copy)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS), ts(rename_all = "camelCase"))]
pub(crate) enum SupervisionEvent {
    /// A start begins (a retry carries the failure count).
    Start,
    /// The connection is up.
    Connected,
    /// A start failed (`error`, `unsupported`?, `needsAuth`?).
    Failed,
    /// A live connection ended on its own (`error`).
    Closed,
    /// Manual reconnect or reload: failures forgotten.
    Forgive,
    /// Nobody may run it: no retry timer.
    Park,
    /// Nothing happened: only the view at `now`.
    View,
}

/// `supervise`: one event in a connection's life.
#[cfg_attr(feature = "ts", derive(ts_rs::TS), ts(rename_all = "camelCase"))]
pub(crate) struct SuperviseRequest {
    /// The state so far (absent: a fresh connection).
    #[cfg_attr(feature = "ts", ts(as = "Option<_>", optional = nullable))]
    pub(crate) supervision: Supervision,
    pub(crate) event: SupervisionEvent,
    /// Milliseconds on the host's clock.
    pub(crate) now: Millis,
    /// Per-connection jitter seed, an unsigned integer ≤ 2^53.
    #[cfg_attr(feature = "ts", ts(as = "Option<_>", optional = nullable))]
    pub(crate) seed: u64,
    /// What went wrong (`failed`, `closed`).
    #[cfg_attr(feature = "ts", ts(optional = nullable))]
    pub(crate) error: Option<String>,
    /// The transport can never work here (`failed`).
    #[cfg_attr(feature = "ts", ts(as = "Option<_>", optional = nullable))]
    pub(crate) unsupported: bool,
    /// The server wants an authorization the host does not have (`failed`):
    /// `needs_auth`, no retry timer.
    #[cfg_attr(feature = "ts", ts(as = "Option<_>", optional = nullable))]
    pub(crate) needs_auth: bool,
    /// The entry whose `restartOnCrash` and `maxRestarts` hold the connection back after a
    /// failure (`failed`, `closed`; a language server's entry, other fields ignored): one
    /// that may not start again is parked (`crashLoop`, no retry timer).
    #[cfg_attr(
        feature = "ts",
        ts(type = "Record<string, unknown>", optional = nullable)
    )]
    pub(crate) restart_policy: Option<RestartLimit>,
}

impl Decode for SuperviseRequest {
    fn decode(req: &Request<'_>) -> Result<Self, ApiError> {
        let supervision = match req.opt_object("supervision")? {
            Some(object) => from_value(object)?,
            None => Supervision::connecting(0, false),
        };
        let now = millis(req.raw("now")?, "now")?;
        let seed = match req.get("seed") {
            None | Some(Value::Null) => 0,
            Some(value) => whole_number(value, crate::backoff::MAX_SEED).ok_or_else(|| {
                ApiError::invalid(format!(
                    "field `seed` must be an integer from 0 to 2^53, found {}",
                    value.preview(60)
                ))
            })?,
        };
        let event = match req.str("event")? {
            "start" => SupervisionEvent::Start,
            "connected" => SupervisionEvent::Connected,
            "failed" => SupervisionEvent::Failed,
            "closed" => SupervisionEvent::Closed,
            "forgive" => SupervisionEvent::Forgive,
            "park" => SupervisionEvent::Park,
            "view" => SupervisionEvent::View,
            other => {
                return Err(ApiError::invalid(format!(
                    "field `event` must be one of start, connected, failed, closed, forgive, \
                     park, view; found {}",
                    Value::from(other).to_json()
                )))
            }
        };
        // Only the events that use them read `error`, `unsupported` and
        // `needsAuth`.
        let restart_policy = match event {
            SupervisionEvent::Failed | SupervisionEvent::Closed => {
                req.opt_object("restartPolicy")?.map(RestartLimit::of_entry)
            }
            _ => None,
        };
        let (error, unsupported, needs_auth) = match event {
            SupervisionEvent::Failed => (
                req.opt_str("error")?.map(str::to_owned),
                req.opt_bool("unsupported")?.unwrap_or(false),
                req.opt_bool("needsAuth")?.unwrap_or(false),
            ),
            SupervisionEvent::Closed => (req.opt_str("error")?.map(str::to_owned), false, false),
            _ => (None, false, false),
        };
        Ok(SuperviseRequest {
            supervision,
            event,
            now,
            seed,
            error,
            unsupported,
            needs_auth,
            restart_policy,
        })
    }
}

/// What `supervise` answers: how to show the connection, and its next state.
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub(crate) struct Supervised {
    pub(crate) view: View,
    pub(crate) supervision: Supervision,
}

/// Op `supervise`: `{supervision?, event, now, seed?, error?, unsupported?,
/// needsAuth?, restartPolicy?}`
/// → `{view, supervision}`.
///
/// `event` is what happened: `start` (a start begins, carrying the failure
/// count and crash-loop state of `supervision`), `connected`, `failed`
/// (a start failed: `error`, `unsupported`?, `needsAuth`?), `closed` (a live connection
/// ended: `error`; with either, `restartPolicy` applies the entry's restart limit),
/// `forgive` (manual reconnect / reload), `park` (nobody may
/// run it: no timer), or `view` (nothing happened; just the view at `now`).
/// An absent `supervision` is a fresh connection.
pub(crate) fn op_supervise(req: SuperviseRequest) -> Result<Supervised, ApiError> {
    let mut s = req.supervision;
    let (now, seed) = (req.now, req.seed);
    let error = || req.error.clone().unwrap_or_default();
    match req.event {
        SupervisionEvent::Start => s = Supervision::connecting(s.attempts, s.crash_loop),
        SupervisionEvent::Connected => s.connected(now),
        SupervisionEvent::Failed if req.needs_auth => s.needs_auth(error()),
        SupervisionEvent::Failed => s.fail(seed, error(), now, req.unsupported),
        SupervisionEvent::Closed => s.closed(seed, error(), now),
        SupervisionEvent::Forgive => s.forgive(),
        SupervisionEvent::Park => s.park(),
        SupervisionEvent::View => {}
    }
    if let Some(limit) = req.restart_policy {
        s.hold_to(limit);
    }
    Ok(Supervised {
        view: s.view(now),
        supervision: s,
    })
}

impl Encode for Supervised {
    fn encode(self) -> Value {
        let mut out = Object::new();
        out.insert("view".into(), view_to_value(&self.view));
        out.insert("supervision".into(), to_value(&self.supervision));
        Value::Object(out)
    }
}

fn millis(value: &Value, field: &str) -> Result<Millis, ApiError> {
    whole_number(value, u64::MAX).map(Millis).ok_or_else(|| {
        ApiError::invalid(format!(
            "field `{field}` must be a non-negative integer, found {}",
            value.preview(60)
        ))
    })
}

fn opt_millis(object: &Object, field: &str) -> Result<Option<Millis>, ApiError> {
    match object.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(value) => millis(value, &format!("supervision.{field}")).map(Some),
    }
}

fn flag(object: &Object, field: &str) -> Result<bool, ApiError> {
    match object.get(field) {
        None | Some(Value::Null) => Ok(false),
        Some(Value::Bool(b)) => Ok(*b),
        Some(other) => Err(ApiError::invalid(format!(
            "field `supervision.{field}` must be a boolean, found {}",
            other.preview(60)
        ))),
    }
}

/// Reads `{status, attempts?, retryAt?, crashLoop?, unsupported?,
/// needsAuth?, healthySince?, lastError?}`.
fn from_value(object: &Object) -> Result<Supervision, ApiError> {
    let status = match object.get("status") {
        Some(Value::String(s)) => Status::parse(s),
        _ => None,
    }
    .ok_or_else(|| {
        ApiError::invalid(
            "field `supervision.status` must be connecting, connected, failed or disconnected",
        )
    })?;
    let attempts = match object.get("attempts") {
        None | Some(Value::Null) => 0,
        Some(value) => whole_number(value, u64::from(u32::MAX))
            .and_then(|n| u32::try_from(n).ok())
            .ok_or_else(|| {
                ApiError::invalid(format!(
                    "field `supervision.attempts` must be a non-negative integer, found {}",
                    value.preview(60)
                ))
            })?,
    };
    let last_error = match object.get("lastError") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(other) => {
            return Err(ApiError::invalid(format!(
                "field `supervision.lastError` must be a string or null, found {}",
                other.preview(60)
            )))
        }
    };
    Ok(Supervision {
        status,
        attempts,
        retry_at: opt_millis(object, "retryAt")?,
        crash_loop: flag(object, "crashLoop")?,
        unsupported: flag(object, "unsupported")?,
        needs_auth: flag(object, "needsAuth")?,
        healthy_since: opt_millis(object, "healthySince")?,
        last_error,
    })
}

fn opt_number(value: Option<Millis>) -> Value {
    value.map_or(Value::Null, |m| Value::Number(m.0 as f64))
}

fn to_value(s: &Supervision) -> Value {
    let mut out = Object::new();
    out.insert("status".into(), s.status.as_str().into());
    out.insert("attempts".into(), Value::Number(f64::from(s.attempts)));
    out.insert("retryAt".into(), opt_number(s.retry_at));
    out.insert("crashLoop".into(), s.crash_loop.into());
    out.insert("unsupported".into(), s.unsupported.into());
    // Written only when set, so the answers for everything else keep their bytes.
    if s.needs_auth {
        out.insert("needsAuth".into(), true.into());
    }
    out.insert("healthySince".into(), opt_number(s.healthy_since));
    out.insert(
        "lastError".into(),
        s.last_error.clone().map_or(Value::Null, Value::String),
    );
    Value::Object(out)
}

fn view_to_value(v: &View) -> Value {
    let mut out = Object::new();
    out.insert("state".into(), v.state.as_str().into());
    out.insert(
        "reason".into(),
        v.reason.map_or(Value::Null, |r| r.as_str().into()),
    );
    out.insert("attempts".into(), Value::Number(f64::from(v.attempts)));
    out.insert(
        "retryInMs".into(),
        v.retry_in_ms
            .map_or(Value::Null, |ms| Value::Number(ms as f64)),
    );
    out.insert(
        "lastError".into(),
        v.last_error.clone().map_or(Value::Null, Value::String),
    );
    Value::Object(out)
}

#[cfg(test)]
mod tests {
    use crate::api::evaluate_str;

    #[test]
    fn a_failure_backs_off_and_the_view_says_so() {
        let response = evaluate_str(
            r#"{"op":"supervise","event":"failed","now":1000,"seed":7,"error":"boom"}"#,
        );
        let delay = crate::backoff::backoff(1, 7).delay_ms;
        assert_eq!(
            response,
            format!(
                r#"{{"ok":{{"view":{{"state":"failed","reason":"backing_off","attempts":1,"retryInMs":{delay},"lastError":"boom"}},"supervision":{{"status":"failed","attempts":1,"retryAt":{},"crashLoop":false,"unsupported":false,"healthySince":null,"lastError":"boom"}}}}}}"#,
                1000 + delay
            )
        );
        // Healthy for five minutes, then closed: attempt 1 again.
        let response = evaluate_str(
            r#"{"op":"supervise","supervision":{"status":"connected","attempts":5,"healthySince":0},"event":"closed","now":300000,"seed":7,"error":"gone"}"#,
        );
        assert!(response.contains(r#""attempts":1,"#), "{response}");
    }

    #[test]
    fn a_server_that_needs_auth_is_parked_and_says_so() {
        let response = evaluate_str(
            r#"{"op":"supervise","supervision":{"status":"connecting","attempts":1},"event":"failed","now":5,"seed":7,"error":"run auth","needsAuth":true}"#,
        );
        assert_eq!(
            response,
            r#"{"ok":{"view":{"state":"failed","reason":"needs_auth","attempts":1,"retryInMs":null,"lastError":"run auth"},"supervision":{"status":"failed","attempts":1,"retryAt":null,"crashLoop":true,"unsupported":false,"needsAuth":true,"healthySince":null,"lastError":"run auth"}}}"#
        );
        // The state it answered reads back the same.
        let again = evaluate_str(
            r#"{"op":"supervise","supervision":{"status":"failed","attempts":1,"needsAuth":true,"lastError":"run auth"},"event":"view","now":9}"#,
        );
        assert!(again.contains(r#""reason":"needs_auth""#), "{again}");
    }

    /// A failure stepped with the entry's `restartPolicy` is parked at its `maxRestarts`,
    /// the rule the session host applies (one kernel function for both executors).
    #[test]
    fn a_restart_policy_parks_a_failure_at_its_limit() {
        let fail = |attempts: u32, policy: &str| {
            evaluate_str(&format!(
                r#"{{"op":"supervise","supervision":{{"status":"connecting","attempts":{attempts}}},"event":"failed","now":5,"seed":7,"error":"boom","restartPolicy":{policy}}}"#
            ))
        };
        let within = fail(0, r#"{"maxRestarts":2}"#);
        assert!(within.contains(r#""reason":"backing_off""#), "{within}");
        let over = fail(1, r#"{"maxRestarts":2}"#);
        assert!(over.contains(r#""reason":"crash_loop""#), "{over}");
        assert!(over.contains(r#""retryInMs":null"#), "{over}");
        let off = fail(0, r#"{"restartOnCrash":false,"command":"x"}"#);
        assert!(off.contains(r#""reason":"crash_loop""#), "{off}");
        let not_an_object = fail(0, "3");
        assert!(not_an_object.starts_with(r#"{"error":{"kind":"invalid-request""#));
    }

    #[test]
    fn malformed_requests_are_typed_errors() {
        for line in [
            r#"{"op":"supervise","event":"nope","now":0}"#,
            r#"{"op":"supervise","event":"view"}"#,
            r#"{"op":"supervise","event":"view","now":-1}"#,
            r#"{"op":"supervise","event":"view","now":0,"supervision":{"status":"up"}}"#,
            r#"{"op":"supervise","event":"view","now":0,"supervision":{"status":"failed","attempts":1.5}}"#,
            r#"{"op":"supervise","event":"failed","now":0,"seed":-3}"#,
        ] {
            let response = evaluate_str(line);
            assert!(
                response.starts_with(r#"{"error":{"kind":"invalid-request""#),
                "{line} → {response}"
            );
        }
    }
}
