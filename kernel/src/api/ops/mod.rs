//! The codecs of every op: each `op_*` function decodes its request's
//! fields, calls the typed domain function and encodes the result as JSON.
//! Grouped by the domain module they front.

pub(crate) mod approvals;
pub(crate) mod gating;
pub(crate) mod hot_reload;
pub(crate) mod identity;
pub(crate) mod lsp;
pub(crate) mod plan;
pub(crate) mod settings;
pub(crate) mod sources;
pub(crate) mod supervise;

use crate::json::Value;

/// A list of names as a JSON array.
pub(crate) fn names_value(names: Vec<String>) -> Value {
    Value::Array(names.into_iter().map(Value::String).collect())
}
