//! The other way across the boundary: JS values read and written in place
//! by `serde-wasm-bindgen`, instead of JSON text (issue 27).
//!
//! A request read this way goes from the JS object straight into the
//! kernel's [`Value`] (its `Deserialize`), with no `JSON.stringify` and no
//! text copied into wasm; a result written this way is built as plain JS
//! objects and arrays from the kernel's [`Value`] (its `Serialize`, with
//! [`Serializer::json_compatible`]), with no text and no `JSON.parse`.
//! `bench/wasm-ab.mjs` times both ways against each other and compares their
//! results byte for byte; `docs/BENCHMARKS.md` has the numbers and what was
//! decided from them: requests cross as JSON text (as JS values they took
//! 1.3–1.9× as long, and differ on `undefined` members, `toJSON`, lone
//! surrogates, `NaN` and nesting past the parser's limit), results that are
//! objects or arrays too (1.0–1.4× as long as JS values, and an object made
//! in place loses a `__proto__` key); a scalar result is made in place
//! ([`result_to_js`]), 2–20 % off a one-server call.

use mcp_reconcile_kernel::json::{Object, Value};
use mcp_reconcile_kernel::ErrorKind;
use serde::Serialize;
use serde_wasm_bindgen::Serializer;
use wasm_bindgen::prelude::*;

use crate::{fields_from_text, fields_of, result_as_text, run, throwable, OPS};

/// The request crosses as a JS value (else as JSON text).
const REQUEST_AS_VALUE: u32 = 1;
/// The result crosses as a JS value (else as JSON text).
const RESULT_AS_VALUE: u32 = 2;

/// For the A/B benchmark: op number `op` (its index in the facade's op
/// list) on `request`'s fields, each side crossing the way `mode` says
/// (bit 0: the request as a JS value, bit 1: the result, objects too; 0 is
/// JSON text both ways, as every typed export crossed before issue 27).
/// Returns the `ok` value; throws as a typed export does.
#[wasm_bindgen(js_name = crossAb, skip_typescript)]
#[doc(hidden)]
pub fn cross_ab(op: u32, request: JsValue, mode: u32) -> Result<JsValue, JsValue> {
    let Some(op) = usize::try_from(op).ok().and_then(|i| OPS.get(i)) else {
        return Err(throwable(ErrorKind::UnknownOp, "no op with that number"));
    };
    let fields = if mode & REQUEST_AS_VALUE == 0 {
        fields_from_text(op, &request)?
    } else {
        fields_from_value(op, request)?
    };
    let ok = run(op, &fields)?;
    if mode & RESULT_AS_VALUE == 0 {
        result_as_text(&ok)
    } else {
        result_as_value(&ok)
    }
}

/// A typed export's result for JS: a string, boolean, number or `null` made
/// in place by `serde-wasm-bindgen`, the same JS value `JSON.parse` of its
/// text gives; an object or array through JSON text and `JSON.parse`.
pub(crate) fn result_to_js(ok: &Value) -> Result<JsValue, JsValue> {
    match ok {
        Value::Object(_) | Value::Array(_) => result_as_text(ok),
        Value::Null | Value::Bool(_) | Value::Number(_) | Value::String(_) => result_as_value(ok),
    }
}

/// The request's fields, read from the JS value by `serde-wasm-bindgen`.
fn fields_from_value(op: &str, request: JsValue) -> Result<Object, JsValue> {
    match serde_wasm_bindgen::from_value::<Value>(request) {
        Ok(value) => fields_of(op, value),
        Err(e) => {
            let message = format!("request is not JSON: {e}");
            Err(throwable(ErrorKind::InvalidJson, &message))
        }
    }
}

/// The result as plain JS objects and arrays, written by `serde-wasm-bindgen`.
fn result_as_value(ok: &Value) -> Result<JsValue, JsValue> {
    ok.serialize(&Serializer::json_compatible()).map_err(|e| {
        let message = format!("the result has no JS value: {e}");
        throwable(ErrorKind::InvalidJson, &message)
    })
}
