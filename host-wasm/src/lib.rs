//! `mcp-reconcile-wasm`: the kernel's JSON API (SPEC §10) for JavaScript.
//!
//! A uniform, logic-free facade (SPEC §12): every export turns its argument
//! into JSON text with `JSON.stringify`, calls one kernel function, and turns
//! the answer back into plain JS objects with `JSON.parse`. Going through JSON
//! text on both sides keeps numbers, key order and escapes exactly as the
//! native CLI has them, so `JSON.stringify(evaluate(r))` is byte for byte the
//! line `mcp-reconcile eval` prints for `JSON.stringify(r)`. The one
//! exception: a typed export whose result is a string, a boolean or `null`
//! makes it in place with `serde-wasm-bindgen`, skipping the text and
//! `JSON.parse` of a scalar, which cannot differ ([`values`], issue 27).
//!
//! * [`evaluate`] takes any request and returns the §10 response object
//!   (`{ok}` or `{error: {kind, message}}`); it never throws.
//! * One typed export per op (`connectionId`, `plan`, …) takes the op's
//!   fields, returns the `ok` value, and throws a JS `Error` whose `kind` is
//!   the error kind.
//!
//! The TypeScript types in the package's `.d.ts` are `generated/kernel.d.ts`,
//! which the kernel writes from its own op table and the Rust types its
//! codecs decode into and encode from (`tests/typescript.rs` keeps the file
//! fresh and checks it against every vector). Nothing here panics on any
//! input: the kernel never panics, and every conversion failure (a value
//! `JSON.stringify` rejects, a non-object request) becomes an error response.

use js_sys::{Reflect, JSON};
use mcp_reconcile_kernel::json::{self, Object, Value};
use mcp_reconcile_kernel::ErrorKind;
use wasm_bindgen::prelude::*;

#[cfg(feature = "ab")]
mod ab;
mod values;

/// The kernel's request and result types, `Ops`, `Request` and `Response`.
#[wasm_bindgen(typescript_custom_section)]
const KERNEL_TYPES: &'static str = include_str!("../generated/kernel.d.ts");

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
    let fields = fields_from_text(op, &request)?;
    let ok = run(op, &fields)?;
    values::result_to_js(&ok)
}

/// The request's fields, through `JSON.stringify` and the kernel's parser.
fn fields_from_text(op: &str, request: &JsValue) -> Result<Object, JsValue> {
    let text = stringify(request).map_err(|m| throwable(ErrorKind::InvalidJson, &m))?;
    match json::parse(&text) {
        Ok(value) => fields_of(op, value),
        Err(e) => {
            let message = format!("request is not JSON: {e}");
            Err(throwable(ErrorKind::InvalidJson, &message))
        }
    }
}

/// The fields of a request that must be an object.
fn fields_of(op: &str, request: Value) -> Result<Object, JsValue> {
    match request {
        Value::Object(fields) => Ok(fields),
        other => {
            let message = format!(
                "the `{op}` request must be an object of its fields, found {}",
                abbreviate(&other.to_json())
            );
            Err(throwable(ErrorKind::InvalidRequest, &message))
        }
    }
}

/// The kernel's `ok` value for `op`, or its error as a thrown `Error`.
fn run(op: &str, fields: &Object) -> Result<Value, JsValue> {
    mcp_reconcile_kernel::evaluate_op(op, fields).map_err(|e| throwable(e.kind, &e.message))
}

/// The result as plain JS values, through the kernel's JSON text and `JSON.parse`.
fn result_as_text(ok: &Value) -> Result<JsValue, JsValue> {
    let text = ok.to_json();
    JSON::parse(&text).map_err(|_| unparsable(&text))
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
    let error = js_sys::Error::new(message);
    // Setting a data property on a fresh Error object cannot fail.
    let _ = Reflect::set(&error, &"kind".into(), &kind.as_str().into());
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

/// One typed export per op. Its TypeScript signature is the op's entry in
/// the generated `Ops` table; `tests/typescript.rs` checks that this list is
/// the kernel's.
macro_rules! ops {
    ($( $op:literal => $export:ident; )*) => {
        $(
            #[doc = concat!("Op `", $op, "`: its fields in, its `ok` value out.")]
            ///
            /// # Errors
            /// Throws an `Error` with `kind` (`invalid-request`, `invalid-config`,
            /// `invalid-json`) and a message naming the offending field.
            #[wasm_bindgen(js_name = $op, skip_typescript)]
            pub fn $export(request: JsValue) -> Result<JsValue, JsValue> {
                call($op, request)
            }
        )*

        #[wasm_bindgen(typescript_custom_section)]
        const EXPORTS: &'static str = concat!(
            $(
                "/**\n * Op `", $op, "` (see `Ops`): its fields in, its `ok` value out.\n",
                " * Throws an `Error` whose `kind` is the error kind (`invalid-request`,\n",
                " * `invalid-config`, `invalid-json`) and whose message names the field.\n */\n",
                "export function ", $op, "(request: Ops[\"", $op, "\"][\"request\"]): Ops[\"",
                $op, "\"][\"result\"];\n",
            )*
        );

        /// Every op with a typed export.
        #[doc(hidden)]
        pub const OPS: &[&str] = &[$($op),*];
    };
}

ops! {
    "transportOf" => transport_of;
    "connectionId" => connection_id;
    "sessionKey" => session_key;
    "approvalHash" => approval_hash;
    "serversEqual" => servers_equal;
    "gatingEqual" => gating_equal;
    "matchPattern" => match_pattern;
    "parseMcpJson" => parse_mcp_json;
    "parseSettings" => parse_settings;
    "assemble" => assemble;
    "gating" => gating;
    "approvalState" => approval_state;
    "pendingGated" => pending_gated;
    "promptable" => promptable;
    "unavailableReason" => unavailable_reason;
    "toolNotFound" => tool_not_found;
    "plan" => plan;
    "settingsDiff" => settings_diff;
    "restartRequired" => restart_required;
    "hotReload" => hot_reload;
    "backoff" => backoff;
    "parseLspJson" => parse_lsp_json;
    "lspSeedId" => lsp_seed_id;
    "lspApprovalHash" => lsp_approval_hash;
    "lspPlan" => lsp_plan;
    "supervise" => supervise;
    "clientPolicy" => client_policy;
}
