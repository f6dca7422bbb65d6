//! Source ops: `parseMcpJson`, `assemble`, and the `layers` decoder
//! `hotReload` shares.

use crate::api::request::Decode;
use crate::api::{ApiError, Request};
use crate::config::{ServerConfig, Servers};
use crate::json::{Object, Value};
use crate::sources::{assemble, parse_mcp_json, Assembled, Layer, LayerSource, McpJson};

/// `parseMcpJson`: a `.mcp.json` file's text and how to read it.
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub(crate) struct ParseMcpJsonRequest {
    pub(crate) text: String,
    /// Variables for `$VAR` / `${VAR}` expansion (`process.env` fits); the
    /// kernel never reads the real environment.
    #[cfg_attr(
        feature = "ts",
        ts(as = "Option<crate::api::typescript::Environment>", optional = nullable)
    )]
    pub(crate) env: Option<Object>,
    /// Expand variables (default true; false in yolo mode).
    #[cfg_attr(feature = "ts", ts(as = "Option<_>", optional = nullable))]
    pub(crate) expand: bool,
}

impl Decode for ParseMcpJsonRequest {
    fn decode(req: &Request<'_>) -> Result<Self, ApiError> {
        let text = req.str("text")?.to_owned();
        let env = match req.get("env") {
            None => None,
            Some(Value::Object(env)) => Some(env.clone()),
            Some(other) => {
                return Err(ApiError::invalid(format!(
                    "field `env` must be an object, found {}",
                    other.to_json()
                )))
            }
        };
        let expand = req.opt_bool("expand")?.unwrap_or(true);
        Ok(ParseMcpJsonRequest { text, env, expand })
    }
}

/// `assemble`: the configuration layers, in any order.
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub(crate) struct AssembleRequest {
    pub(crate) layers: Vec<Layer>,
}

impl Decode for AssembleRequest {
    fn decode(req: &Request<'_>) -> Result<Self, ApiError> {
        Ok(AssembleRequest {
            layers: request_layers(req)?,
        })
    }
}

/// `parseMcpJson`: `text`, `env`?, `expand`? (default true) → `{servers, errors}`.
pub(crate) fn op_parse_mcp_json(req: ParseMcpJsonRequest) -> Result<McpJson, ApiError> {
    Ok(parse_mcp_json(&req.text, req.env.as_ref(), req.expand))
}

/// `assemble`: `layers: [{source, servers, extension?, scope?}]` → `{servers, sources}`.
pub(crate) fn op_assemble(req: AssembleRequest) -> Result<Assembled, ApiError> {
    Ok(assemble(&req.layers))
}

/// The request's `layers` array, each checked and read.
pub(crate) fn request_layers(req: &Request<'_>) -> Result<Vec<Layer>, ApiError> {
    let layers = match req.raw("layers")? {
        Value::Array(items) => items,
        other => {
            return Err(ApiError::invalid(format!(
                "field `layers` must be an array, found {}",
                other.to_json()
            )))
        }
    };
    layers
        .iter()
        .enumerate()
        .map(|(i, layer)| layer_from_value(i, layer))
        .collect()
}

fn layer_from_value(index: usize, value: &Value) -> Result<Layer, ApiError> {
    let Value::Object(fields) = value else {
        return Err(ApiError::invalid(format!(
            "layers[{index}] must be an object, found {}",
            value.to_json()
        )));
    };
    let source = match fields.get("source") {
        Some(Value::String(s)) => s
            .parse::<LayerSource>()
            .map_err(|e| ApiError::invalid(format!("layers[{index}]: {e}")))?,
        Some(other) => {
            return Err(ApiError::invalid(format!(
                "layers[{index}].source must be a string, found {}",
                other.to_json()
            )))
        }
        None => {
            return Err(ApiError::invalid(format!(
                "layers[{index}] has no `source`"
            )))
        }
    };
    let extension = match fields.get("extension") {
        None | Some(Value::Null) => None,
        Some(Value::String(s)) => Some(s.clone()),
        Some(other) => {
            return Err(ApiError::invalid(format!(
                "layers[{index}].extension must be a string, found {}",
                other.to_json()
            )))
        }
    };
    let from_workspace = match fields.get("scope") {
        None | Some(Value::Null) => false,
        Some(Value::String(s)) if s == "workspace" && source == LayerSource::ServerCommand => true,
        Some(other) => {
            return Err(ApiError::invalid(format!(
                "layers[{index}].scope: only a `serverCommand` layer takes a scope, and only \"workspace\"; found {}",
                other.to_json()
            )))
        }
    };
    let servers = match fields.get("servers") {
        None | Some(Value::Null) => Servers::new(),
        Some(Value::Object(entries)) => {
            entries.clone().try_map_values(|name, entry| match entry {
                Value::Object(o) => Ok(ServerConfig::new(o)),
                other => Err(ApiError::invalid(format!(
                    "layers[{index}] ({source}): server \"{name}\" must be an object, found {}",
                    other.to_json()
                ))),
            })?
        }
        Some(other) => {
            return Err(ApiError::invalid(format!(
                "layers[{index}] ({source}): `servers` must be an object, found {}",
                other.to_json()
            )))
        }
    };
    Ok(Layer {
        source,
        servers,
        extension,
        from_workspace,
    })
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_json_op_rejects_malformed_layers() {
        let run = |text: &str| crate::api::evaluate_str(text);
        assert!(
            run(r#"{"op":"assemble","layers":[{"source":"global","servers":{}}]}"#)
                .contains("invalid-request")
        );
        let bad = run(r#"{"op":"assemble","layers":[{"source":"user","servers":{"srv":5}}]}"#);
        assert!(bad.contains("invalid-request") && bad.contains("srv") && bad.contains("user"));
        assert!(run(r#"{"op":"assemble","layers":{}}"#).contains("invalid-request"));
        assert_eq!(
            run(
                r#"{"op":"assemble","layers":[{"source":"extension","servers":{"e":{}},"extension":"x"}]}"#
            ),
            r#"{"ok":{"servers":{"e":{"extensionName":"x"}},"sources":{"e":"extension"}}}"#
        );
    }

    /// The op stamps a workspace `mcp.serverCommand` as the domain does
    /// (`sources::a_workspace_server_command_is_stamped_workspace`), and refuses a scope the
    /// layer's source cannot have.
    #[test]
    fn the_json_op_stamps_a_workspace_server_command() {
        let request = |layer: &str| {
            crate::api::evaluate_str(&format!(r#"{{"op":"assemble","layers":[{layer}]}}"#))
        };
        assert_eq!(
            request(
                r#"{"source":"serverCommand","scope":"workspace","servers":{"mcp":{"command":"x"}}}"#
            ),
            r#"{"ok":{"servers":{"mcp":{"command":"x","scope":"workspace"}},"sources":{"mcp":"serverCommand"}}}"#
        );
        assert!(
            request(r#"{"source":"user","scope":"workspace","servers":{}}"#)
                .contains("invalid-request")
        );
    }
}
