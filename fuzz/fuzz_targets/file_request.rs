//! Shared by the parser targets: arbitrary text as a file for one op, with
//! and without variable expansion; the op answers with a result or an error,
//! never a panic.

use mcp_reconcile_kernel::json::{Object, Value};

/// Runs `op` with `text` = the bytes after the first; the first byte's low
/// bits choose whether an `env` map is passed and whether `expand` is off.
pub fn run(op: &str, data: &[u8]) {
    let Some((&flags, rest)) = data.split_first() else {
        return;
    };
    let text = String::from_utf8_lossy(rest).into_owned();
    let mut env = Object::new();
    for (k, v) in [("HOME", "/home/u"), ("X", "$X"), ("EMPTY", ""), ("A B", "sp")] {
        env.insert(k.to_owned(), Value::from(v));
    }
    let mut request = Object::new();
    request.insert("op".into(), op.into());
    request.insert("text".into(), text.into());
    if flags & 1 == 1 {
        request.insert("env".into(), Value::Object(env));
    }
    if flags & 2 == 2 {
        request.insert("expand".into(), Value::Bool(false));
    }
    let response = mcp_reconcile_kernel::evaluate(&Value::Object(request));
    assert!(response.as_object().is_some_and(|o| o.len() == 1));
}
