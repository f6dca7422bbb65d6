//! `mcp-reconcile-wasm`: the kernel's JSON API (SPEC §10) for JavaScript.
//!
//! A uniform, logic-free facade (SPEC §12): every export turns its argument
//! into JSON text with `JSON.stringify`, calls one kernel function, and turns
//! the answer back into plain JS objects with `JSON.parse`. Going through JSON
//! text on both sides keeps numbers, key order and escapes exactly as the
//! native CLI has them, so `JSON.stringify(evaluate(r))` is byte for byte the
//! line `mcp-reconcile eval` prints for `JSON.stringify(r)`.
//!
//! * [`evaluate`] takes any request and returns the §10 response object
//!   (`{ok}` or `{error: {kind, message}}`); it never throws.
//! * One typed export per op (`connectionId`, `plan`, …) takes the op's
//!   fields, returns the `ok` value, and throws a JS `Error` whose `kind` is
//!   the error kind.
//!
//! The TypeScript types in the generated `.d.ts` come from [`types`]. Nothing
//! here panics on any input: the kernel never panics, and every conversion
//! failure (a value `JSON.stringify` rejects, a non-object request) becomes an
//! error response.

use js_sys::{Reflect, JSON};
use mcp_reconcile_kernel::json::{self, Object, Value};
use mcp_reconcile_kernel::ErrorKind;
use tsify::Ts;
use wasm_bindgen::prelude::*;

pub mod types;

use types::*;

/// Answers one request with the §10 response object; never throws.
///
/// A request that `JSON.stringify` cannot write (a `BigInt`, a cycle,
/// `undefined`) gets an `invalid-json` error response.
#[wasm_bindgen(
    js_name = evaluate,
    unchecked_return_type = "Response",
    return_description = "`{ok: result}` or `{error: {kind, message}}`"
)]
pub fn evaluate(#[wasm_bindgen(unchecked_param_type = "Request")] request: JsValue) -> JsValue {
    let response = match stringify(&request) {
        Ok(text) => mcp_reconcile_kernel::evaluate_str(&text),
        Err(message) => error_response(ErrorKind::InvalidJson, message).to_json(),
    };
    JSON::parse(&response).unwrap_or_else(|_| unparsable(&response))
}

/// Runs `op` on the request object's fields; the `ok` value or a thrown error.
fn call(op: &str, request: JsValue) -> Result<JsValue, JsValue> {
    let text = stringify(&request).map_err(|m| throwable(ErrorKind::InvalidJson, &m))?;
    let fields = match json::parse(&text) {
        Ok(Value::Object(fields)) => fields,
        Ok(other) => {
            let message = format!(
                "the `{op}` request must be an object of its fields, found {}",
                abbreviate(&other.to_json())
            );
            return Err(throwable(ErrorKind::InvalidRequest, &message));
        }
        Err(e) => {
            let message = format!("request is not JSON: {e}");
            return Err(throwable(ErrorKind::InvalidJson, &message));
        }
    };
    let mut request = Object::new();
    request.insert("op".into(), op.into());
    for (key, value) in fields.iter().filter(|(key, _)| *key != "op") {
        request.insert(key.clone(), value.clone());
    }
    let response = mcp_reconcile_kernel::evaluate(&Value::Object(request));
    let answer = response.as_object();
    if let Some(ok) = answer.and_then(|a| a.get("ok")) {
        let text = ok.to_json();
        return JSON::parse(&text).map_err(|_| unparsable(&text));
    }
    let error = answer
        .and_then(|a| a.get("error"))
        .and_then(Value::as_object);
    let field = |name: &str| {
        error
            .and_then(|e| e.get(name))
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_owned()
    };
    Err(throwable_kind(&field("kind"), &field("message")))
}

/// `JSON.stringify(value)`, or why there is no JSON text for it.
fn stringify(value: &JsValue) -> Result<String, String> {
    match JSON::stringify(value) {
        Ok(text) => text.as_string().ok_or_else(|| {
            let kind = value.js_typeof().as_string().unwrap_or_default();
            format!("request is not JSON: a value of type {kind} has no JSON form")
        }),
        Err(e) => Err(format!(
            "request is not JSON: JSON.stringify failed: {}",
            describe_thrown(&e)
        )),
    }
}

fn describe_thrown(e: &JsValue) -> String {
    e.dyn_ref::<js_sys::Error>()
        .map(|e| String::from(e.message()))
        .or_else(|| e.as_string())
        .unwrap_or_else(|| "an exception that is not an Error".to_owned())
}

/// The §10 error response for a failure found here rather than in the kernel.
fn error_response(kind: ErrorKind, message: String) -> Value {
    let mut error = Object::new();
    error.insert("kind".into(), kind.as_str().into());
    error.insert("message".into(), message.into());
    let mut response = Object::new();
    response.insert("error".into(), Value::Object(error));
    Value::Object(response)
}

/// A JS `Error` with the message and a `kind` property.
fn throwable(kind: ErrorKind, message: &str) -> JsValue {
    throwable_kind(kind.as_str(), message)
}

fn throwable_kind(kind: &str, message: &str) -> JsValue {
    let error = js_sys::Error::new(message);
    // Setting a data property on a fresh Error object cannot fail.
    let _ = Reflect::set(&error, &"kind".into(), &kind.into());
    error.into()
}

/// Kernel output is always JSON; should `JSON.parse` still refuse it, say so
/// as a response instead of throwing.
fn unparsable(text: &str) -> JsValue {
    let message = format!(
        "the kernel answered with text JSON.parse rejects: {}",
        abbreviate(text)
    );
    let response = error_response(ErrorKind::InvalidJson, message).to_json();
    JSON::parse(&response).unwrap_or_else(|_| JsValue::from_str(&response))
}

fn abbreviate(text: &str) -> String {
    match text.char_indices().nth(80) {
        Some((cut, _)) => format!("{}...", &text[..cut]),
        None => text.to_owned(),
    }
}

/// One typed export per op, plus the `Ops` table the `.d.ts` derives
/// `Request` and `Response` from. The list is the single source of the ops'
/// TypeScript signatures; `tests/api_types.rs` checks it against the kernel.
macro_rules! ops {
    ($( $(#[doc = $doc:literal])* $op:literal => $export:ident($request:ident) -> $result:ident; )*) => {
        $(
            $(#[doc = $doc])*
            ///
            /// # Errors
            /// Throws an `Error` with `kind` (`invalid-request`, `invalid-config`,
            /// `invalid-json`) and a message naming the offending field.
            #[wasm_bindgen(js_name = $op)]
            pub fn $export(request: Ts<$request>) -> Result<Ts<$result>, JsValue> {
                call($op, request.js_value()).map(Ts::new_unchecked)
            }
        )*

        #[wasm_bindgen(typescript_custom_section)]
        const OPS: &'static str = concat!(
            "/** Every op of the kernel's JSON API: its request fields and its `ok` result. */\n",
            "export interface Ops {\n",
            $( "    ", $op, ": { request: ", stringify!($request), "; result: ", stringify!($result), " };\n", )*
            "}\n",
            "/** Any request: `op` plus that op's fields. */\n",
            "export type Request = { [K in keyof Ops]: { op: K } & Ops[K][\"request\"] }[keyof Ops];\n",
            "/** A response: the op's result under `ok`, or an error. */\n",
            "export type Response<K extends keyof Ops = keyof Ops> = { ok: Ops[K][\"result\"] } | { error: KernelError };\n",
        );

        /// The ops and the Rust types their TypeScript signatures come from,
        /// for checking those types against the kernel's real answers.
        #[doc(hidden)]
        pub mod op_types {
            use super::types::*;

            /// Every op name, in SPEC §10 order.
            pub const OPS: &[&str] = &[$($op),*];

            /// Checks that `request` (the fields besides `op`) fits the op's
            /// declared request type.
            pub fn check_request(op: &str, request: &str) -> Result<(), String> {
                match op {
                    $( $op => serde_json::from_str::<$request>(request)
                        .map(drop)
                        .map_err(|e| format!("request does not fit {}: {e}", stringify!($request))), )*
                    other => Err(format!("op {other:?} has no declared types")),
                }
            }

            /// Checks that `result` (an `ok` value) fits the op's declared
            /// result type.
            pub fn check_result(op: &str, result: &str) -> Result<(), String> {
                match op {
                    $( $op => serde_json::from_str::<$result>(result)
                        .map(drop)
                        .map_err(|e| format!("result does not fit {}: {e}", stringify!($result))), )*
                    other => Err(format!("op {other:?} has no declared types")),
                }
            }
        }
    };
}

ops! {
    #[doc = "Transport kind of a server entry."]
    "transportOf" => transport_of(ConfigRequest) -> Transport;
    #[doc = "Connection id: `\"<name>::\" + 16 hex` (SPEC §2.1)."]
    "connectionId" => connection_id(NamedConfigRequest) -> ConnectionId;
    #[doc = "Session key: connection id + session view (SPEC §2.2)."]
    "sessionKey" => session_key(NamedConfigRequest) -> SessionKey;
    #[doc = "Approval hash: 64 hex (SPEC §2.3)."]
    "approvalHash" => approval_hash(ConfigRequest) -> ApprovalHash;
    #[doc = "Whether two server maps are equal (key order ignored)."]
    "serversEqual" => servers_equal(ServersEqualRequest) -> Equal;
    #[doc = "Whether two gating objects are equal (lists as multisets)."]
    "gatingEqual" => gating_equal(GatingEqualRequest) -> Equal;
    #[doc = "Whether a name matches a `*` / `?` pattern."]
    "matchPattern" => match_pattern(MatchPatternRequest) -> Matches;
    #[doc = "Parses `.mcp.json` text (SPEC §3.2)."]
    "parseMcpJson" => parse_mcp_json(ParseMcpJsonRequest) -> ParsedMcpJson;
    #[doc = "Parses a settings file's text (SPEC §3.3)."]
    "parseSettings" => parse_settings(ParseSettingsRequest) -> Settings;
    #[doc = "Merges configuration layers by precedence (SPEC §3.1)."]
    "assemble" => assemble(AssembleRequest) -> Assembled;
    #[doc = "Computes the admission gating (SPEC §4)."]
    "gating" => gating(GatingRequest) -> Gating;
    #[doc = "Approval state of one server (SPEC §5)."]
    "approvalState" => approval_state(ApprovalStateRequest) -> ApprovalState;
    #[doc = "Gated servers that are not approved, in map order."]
    "pendingGated" => pending_gated(GatedServersRequest) -> Names;
    #[doc = "Gated servers to ask the user about, in map order."]
    "promptable" => promptable(GatedServersRequest) -> Names;
    #[doc = "Why a server is not connected, or `null`."]
    "unavailableReason" => unavailable_reason(UnavailableReasonRequest) -> UnavailableReason;
    #[doc = "The message for a call to a missing `mcp__<server>__<tool>`."]
    "toolNotFound" => tool_not_found(ToolNotFoundRequest) -> ToolNotFoundMessage;
    #[doc = "The reconcile plan from desired to online (SPEC §6)."]
    "plan" => plan(PlanRequest) -> Plan;
    #[doc = "Changed leaf paths between two settings objects (SPEC §7)."]
    "settingsDiff" => settings_diff(SettingsDiffRequest) -> SettingsPaths;
    #[doc = "Whether changed paths need a restart (SPEC §7)."]
    "restartRequired" => restart_required(RestartRequiredRequest) -> RestartRequirement;
    #[doc = "What a debounced reload does (SPEC §7)."]
    "hotReload" => hot_reload(HotReloadRequest) -> HotReloadOutcome;
    #[doc = "Delay before the next retry of a failed server (SPEC §9)."]
    "backoff" => backoff(BackoffRequest) -> BackoffDelay;
    #[doc = "Parses `.lsp.json` text (SPEC §14.1)."]
    "parseLspJson" => parse_lsp_json(ParseLspJsonRequest) -> ParsedLspJson;
    #[doc = "A language server's launch-seed id (SPEC §14.2)."]
    "lspSeedId" => lsp_seed_id(LspSeedIdRequest) -> LspSeedId;
    #[doc = "A language-server entry's approval hash (SPEC §14.2)."]
    "lspApprovalHash" => lsp_approval_hash(LspApprovalHashRequest) -> ApprovalHash;
    #[doc = "The language-server plan: restart, reconfigure or keep (SPEC §14.2)."]
    "lspPlan" => lsp_plan(LspPlanRequest) -> LspPlan;
    #[doc = "One step of a connection's supervision: backoff, crash loop, healthy reset (SPEC §9)."]
    "supervise" => supervise(SuperviseRequest) -> Supervised;
}
