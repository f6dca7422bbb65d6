//! Results that cross as JS values instead of JSON text (issue 27).
//!
//! `serde-wasm-bindgen` can read a request straight from the JS object into
//! the kernel's [`Value`] and write a result as plain JS objects and arrays,
//! with no JSON text on either side. `bench/wasm-ab.mjs` timed that against
//! JSON text and compared the two byte for byte (`docs/BENCHMARKS.md`,
//! "serde-wasm-bindgen A/B (issue 27)"): requests read in place took 1.4–1.9×
//! as long and differ on `undefined` members, `toJSON`, lone surrogates,
//! `NaN` and nesting past the parser's limit; object and array results
//! written in place took up to 1.4× as long and lose `__proto__` keys (the
//! key is assigned, which sets the prototype). Only a scalar result — a
//! string, boolean or `null`, the answer of every one-server op — is
//! faster in place (1–6 % off the call, 19 % for `matchPattern`) and cannot
//! differ, so that is all that crosses this way. The A/B's own export is in
//! `ab.rs` (feature `ab`).

use mcp_reconcile_kernel::json::Value;
use mcp_reconcile_kernel::ErrorKind;
use serde::Serialize;
use serde_wasm_bindgen::Serializer;
use wasm_bindgen::prelude::*;

use crate::{result_as_text, throwable};

/// A typed export's result for JS: a string, boolean or `null` made
/// in place by `serde-wasm-bindgen`, the same JS value `JSON.parse` of its
/// text gives; an object, array or number through JSON text and `JSON.parse`.
pub(crate) fn result_to_js(ok: &Value) -> Result<JsValue, JsValue> {
    match ok {
        // A number too: its text turns -0 into 0, and `JSON.parse` gives 0, where the value
        // in place would stay -0.
        Value::Object(_) | Value::Array(_) | Value::Number(_) => result_as_text(ok),
        Value::Null | Value::Bool(_) | Value::String(_) => result_as_value(ok),
    }
}

/// The result as plain JS values, written by `serde-wasm-bindgen` (objects
/// as plain objects, never `Map`).
pub(crate) fn result_as_value(ok: &Value) -> Result<JsValue, JsValue> {
    ok.serialize(&Serializer::json_compatible()).map_err(|e| {
        let message = format!("the result has no JS value: {e}");
        throwable(ErrorKind::InvalidJson, &message)
    })
}
