//! The A/B of issue 27 (feature `ab`, never in the package): each side of a
//! typed export's call crossing as JSON text or as a JS value, chosen per
//! call, for `bench/wasm-ab.mjs`. Build it with
//! `MCP_WASM_AB=1 bash scripts/wasm-build.sh`.

use mcp_reconcile_kernel::json::{Object, Value};
use mcp_reconcile_kernel::ErrorKind;
use wasm_bindgen::prelude::*;

use crate::values::result_as_value;
use crate::{fields_from_text, fields_of, result_as_text, run, throwable, OPS};

/// The request crosses as a JS value (else as JSON text).
const REQUEST_AS_VALUE: u32 = 1;
/// The result crosses as a JS value, objects and arrays too (else as JSON text).
const RESULT_AS_VALUE: u32 = 2;

/// Op number `op` (its index in the facade's op list) on `request`'s
/// fields, each side crossing the way `mode` says: bit 0 the request as a
/// JS value, bit 1 the result; 0 is JSON text both ways, as every typed
/// export crossed before issue 27. Returns the `ok` value; throws as a typed
/// export does.
#[wasm_bindgen(js_name = crossAb, skip_typescript)]
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
