//! Request decoding: typed access to a request's fields, with errors that
//! name the field.

use super::ApiError;
use crate::approvals::Approvals;
use crate::config::{servers_from_value, ServerConfig, Servers};
use crate::gating::Gating;
use crate::json::{Object, Value};

/// An op's request record: what its codec decodes the request's fields
/// into (and what the TypeScript declarations describe).
pub(crate) trait Decode: Sized {
    /// Reads the record, failing with an error that names the first
    /// malformed field.
    fn decode(req: &Request<'_>) -> Result<Self, ApiError>;
}

/// Typed access to a request's fields, with errors that name the field.
pub(crate) struct Request<'a> {
    pub(crate) fields: &'a Object,
}

impl<'a> Request<'a> {
    /// The field, treating `null` as absent.
    pub(crate) fn get(&self, field: &str) -> Option<&'a Value> {
        match self.fields.get(field) {
            None | Some(Value::Null) => None,
            Some(v) => Some(v),
        }
    }

    /// The field, which must be present (it may be `null`).
    pub(crate) fn raw(&self, field: &str) -> Result<&'a Value, ApiError> {
        self.fields
            .get(field)
            .ok_or_else(|| ApiError::invalid(format!("missing field `{field}`")))
    }

    /// A required string field.
    pub(crate) fn str(&self, field: &str) -> Result<&'a str, ApiError> {
        match self.fields.get(field) {
            Some(Value::String(s)) => Ok(s),
            Some(other) => Err(wrong_type(field, "a string", other)),
            None => Err(ApiError::invalid(format!("missing field `{field}`"))),
        }
    }

    /// An optional string field (`null` is absent).
    pub(crate) fn opt_str(&self, field: &str) -> Result<Option<&'a str>, ApiError> {
        match self.get(field) {
            None => Ok(None),
            Some(Value::String(s)) => Ok(Some(s)),
            Some(other) => Err(wrong_type(field, "a string", other)),
        }
    }

    /// An optional boolean field (`null` is absent).
    pub(crate) fn opt_bool(&self, field: &str) -> Result<Option<bool>, ApiError> {
        match self.get(field) {
            None => Ok(None),
            Some(Value::Bool(b)) => Ok(Some(*b)),
            Some(other) => Err(wrong_type(field, "a boolean", other)),
        }
    }

    /// A required boolean field.
    pub(crate) fn bool(&self, field: &str) -> Result<bool, ApiError> {
        self.opt_bool(field)?
            .ok_or_else(|| ApiError::invalid(format!("missing field `{field}`")))
    }

    /// A required object field.
    pub(crate) fn object(&self, field: &str) -> Result<&'a Object, ApiError> {
        match self.fields.get(field) {
            Some(Value::Object(o)) => Ok(o),
            Some(other) => Err(wrong_type(field, "an object", other)),
            None => Err(ApiError::invalid(format!("missing field `{field}`"))),
        }
    }

    /// A required server config (an object).
    pub(crate) fn config(&self, field: &str) -> Result<ServerConfig, ApiError> {
        self.object(field).map(|o| ServerConfig::new(o.clone()))
    }

    /// A required `{name: config}` map.
    pub(crate) fn servers(&self, field: &str) -> Result<Servers, ApiError> {
        servers_from_value(self.raw(field)?)
            .map_err(|e| ApiError::invalid(format!("field `{field}`: {e}")))
    }

    /// An optional array of strings (`null` is absent).
    pub(crate) fn opt_string_list(&self, field: &str) -> Result<Option<Vec<String>>, ApiError> {
        match self.get(field) {
            None => Ok(None),
            Some(Value::Array(items)) => items
                .iter()
                .map(|v| v.as_str().map(str::to_owned))
                .collect::<Option<Vec<_>>>()
                .map(Some)
                .ok_or_else(|| {
                    wrong_type(field, "an array of strings", &Value::Array(items.clone()))
                }),
            Some(other) => Err(wrong_type(field, "an array of strings", other)),
        }
    }

    /// A required array of strings.
    pub(crate) fn string_list(&self, field: &str) -> Result<Vec<String>, ApiError> {
        self.opt_string_list(field)?
            .ok_or_else(|| ApiError::invalid(format!("missing field `{field}`")))
    }

    /// An optional object field (`null` is absent).
    pub(crate) fn opt_object(&self, field: &str) -> Result<Option<&'a Object>, ApiError> {
        match self.get(field) {
            None => Ok(None),
            Some(Value::Object(o)) => Ok(Some(o)),
            Some(other) => Err(ApiError::invalid(format!(
                "field `{field}` must be an object, found {}",
                other.to_json()
            ))),
        }
    }

    /// The `approvals` store; absent, `null` or malformed reads as empty
    /// (fail closed).
    pub(crate) fn approvals(&self) -> Approvals {
        Approvals::new(self.get("approvals").cloned().unwrap_or_default())
    }

    /// A required gating object.
    pub(crate) fn gating(&self, field: &str) -> Result<Gating, ApiError> {
        Gating::from_value(self.raw(field)?).map_err(|e| ApiError::invalid(e.to_string()))
    }
}

fn wrong_type(field: &str, expected: &str, found: &Value) -> ApiError {
    ApiError::invalid(format!(
        "field `{field}` must be {expected}, found {}",
        found.preview(77)
    ))
}
