//! Settings ops: `parseSettings`, `settingsDiff`, `restartRequired`.

use crate::api::{ApiError, Request};
use crate::json::{Object, Value};
use crate::settings::{parse_settings, restart_required, settings_diff};

/// `parseSettings`: `text`, `env`? → the settings object.
pub(crate) fn op_parse_settings(req: &Request<'_>) -> Result<Value, ApiError> {
    let text = req.str("text")?;
    let env = req.opt_object("env")?;
    Ok(parse_settings(text, env)?)
}

/// `settingsDiff`: `old`, `new` (objects or null) → [path].
pub(crate) fn op_settings_diff(req: &Request<'_>) -> Result<Value, ApiError> {
    let empty = Value::Object(Object::new());
    let old = req.opt_object("old")?;
    let new = req.opt_object("new")?;
    let (old, new) = (
        old.map_or(empty.clone(), |o| Value::Object(o.clone())),
        new.map_or(empty, |o| Value::Object(o.clone())),
    );
    Ok(Value::Array(
        settings_diff(&old, &new)
            .into_iter()
            .map(Value::String)
            .collect(),
    ))
}

/// `restartRequired`: `paths`, `schema`? → `{suppressed, perPath}`.
pub(crate) fn op_restart_required(req: &Request<'_>) -> Result<Value, ApiError> {
    let paths = req.string_list("paths")?;
    let schema = req.opt_object("schema")?;
    let result = restart_required(&paths, schema);
    let mut out = Object::new();
    out.insert("suppressed".into(), result.suppressed.into());
    out.insert(
        "perPath".into(),
        Value::Object(result.per_path.map_values(|_, b| b.into())),
    );
    Ok(Value::Object(out))
}
