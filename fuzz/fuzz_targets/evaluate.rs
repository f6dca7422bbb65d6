//! Arbitrary bytes as a request line: `evaluate_str` must answer with one JSON
//! object holding exactly `ok` or `error`, and never panic.
#![no_main]

use libfuzzer_sys::fuzz_target;
use mcp_reconcile_kernel::json::{parse, Value};

fuzz_target!(|data: &[u8]| {
    let Ok(line) = std::str::from_utf8(data) else {
        return;
    };
    let response = mcp_reconcile_kernel::evaluate_str(line);
    let parsed = parse(&response).expect("a response is JSON");
    let object = parsed.as_object().expect("a response is an object");
    assert_eq!(object.len(), 1, "{response}");
    assert!(object.contains_key("ok") || object.contains_key("error"), "{response}");
    if let Some(Value::Object(error)) = object.get("error") {
        assert!(error.get("kind").and_then(Value::as_str).is_some(), "{response}");
    }
});
