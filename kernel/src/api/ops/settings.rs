//! Settings ops: `parseSettings`, `settingsDiff`, `restartRequired`.

use crate::api::encode::Encode;
use crate::api::request::Decode;
use crate::api::{ApiError, Request};
use crate::json::{Object, Value};
use crate::settings::{parse_settings, restart_required, settings_diff, RestartRequired};

/// `parseSettings`: a settings file's text.
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub(crate) struct ParseSettingsRequest {
    pub(crate) text: String,
    /// Variables for `$VAR` / `${VAR}` expansion in every string value.
    #[cfg_attr(feature = "ts", ts(as = "Option<crate::api::typescript::Environment>", optional = nullable))]
    pub(crate) env: Option<Object>,
}

impl Decode for ParseSettingsRequest {
    fn decode(req: &Request<'_>) -> Result<Self, ApiError> {
        let text = req.str("text")?.to_owned();
        let env = req.opt_object("env")?.cloned();
        Ok(ParseSettingsRequest { text, env })
    }
}

/// A parsed settings file: always a JSON object.
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub(crate) struct Settings(#[cfg_attr(feature = "ts", ts(as = "Object"))] pub(crate) Value);

impl Encode for Settings {
    fn encode(self) -> Value {
        self.0
    }
}

/// `settingsDiff`: two parsed settings objects (`null` ≡ `{}`).
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub(crate) struct SettingsDiffRequest {
    #[cfg_attr(feature = "ts", ts(optional = nullable))]
    pub(crate) old: Option<Object>,
    #[cfg_attr(feature = "ts", ts(optional = nullable))]
    pub(crate) new: Option<Object>,
}

impl Decode for SettingsDiffRequest {
    fn decode(req: &Request<'_>) -> Result<Self, ApiError> {
        let old = req.opt_object("old")?.cloned();
        let new = req.opt_object("new")?.cloned();
        Ok(SettingsDiffRequest { old, new })
    }
}

/// `restartRequired`: changed paths and an optional schema.
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub(crate) struct RestartRequiredRequest {
    /// Dotted settings paths, as `settingsDiff` returns them.
    pub(crate) paths: Vec<String>,
    /// Dotted key → requires restart; replaces the default schema.
    #[cfg_attr(feature = "ts", ts(as = "Option<Object<bool>>", optional = nullable))]
    pub(crate) schema: Option<Object>,
}

impl Decode for RestartRequiredRequest {
    fn decode(req: &Request<'_>) -> Result<Self, ApiError> {
        let paths = req.string_list("paths")?;
        let schema = req.opt_object("schema")?.cloned();
        Ok(RestartRequiredRequest { paths, schema })
    }
}

/// `parseSettings`: `text`, `env`? → the settings object.
pub(crate) fn op_parse_settings(req: ParseSettingsRequest) -> Result<Settings, ApiError> {
    Ok(Settings(parse_settings(&req.text, req.env.as_ref())?))
}

/// `settingsDiff`: `old`, `new` (objects or null) → [path].
pub(crate) fn op_settings_diff(req: SettingsDiffRequest) -> Result<Vec<String>, ApiError> {
    let object = |o: Option<Object>| Value::Object(o.unwrap_or_default());
    Ok(settings_diff(&object(req.old), &object(req.new)))
}

/// `restartRequired`: `paths`, `schema`? → `{suppressed, perPath}`.
pub(crate) fn op_restart_required(
    req: RestartRequiredRequest,
) -> Result<RestartRequired, ApiError> {
    Ok(restart_required(&req.paths, req.schema.as_ref()))
}
