//! Language-server ops: `parseLspJson`, `lspSeedId`, `lspApprovalHash`,
//! `lspPlan`.

use crate::api::{ApiError, Request};
use crate::json::{whole_number, Object, Value};
use crate::lsp::{
    lsp_approval_hash, lsp_plan, lsp_seed_id, lsp_servers_from_value, parse_lsp_json,
    LspParseOptions, LspPlanContext, LspScope,
};
use crate::plan::online_from_value;
use crate::time::Millis;

/// `parseLspJson`: `text`, `env`?, `expand`? (default true), `scope`?
/// (`"user"` / `"project"`: stamp it; default none), `projectRoot`? →
/// `{servers, errors}`.
pub(crate) fn op_parse_lsp_json(req: &Request<'_>) -> Result<Value, ApiError> {
    let text = req.str("text")?;
    let env = match req.get("env") {
        None => None,
        Some(Value::Object(env)) => Some(env),
        Some(other) => {
            return Err(ApiError::invalid(format!(
                "field `env` must be an object, found {}",
                other.preview(60)
            )))
        }
    };
    let scope = match req.opt_str("scope")? {
        None => None,
        Some(s) => Some(LspScope::parse(s).ok_or_else(|| {
            ApiError::invalid(format!(
                "field `scope` must be \"user\" or \"project\", found {}",
                Value::from(s).to_json()
            ))
        })?),
    };
    let options = LspParseOptions {
        env,
        expand: req.opt_bool("expand")?.unwrap_or(true),
        scope,
        project_root: req.opt_str("projectRoot")?,
    };
    let parsed = parse_lsp_json(text, options);
    let mut out = Object::new();
    out.insert(
        "servers".into(),
        Value::Object(parsed.servers.map_values(|_, entry| Value::Object(entry))),
    );
    out.insert(
        "errors".into(),
        Value::Array(parsed.errors.into_iter().map(Value::String).collect()),
    );
    Ok(Value::Object(out))
}

/// `lspSeedId`: `name`, `config` → `"<name>::<16hex>"`.
pub(crate) fn op_lsp_seed_id(req: &Request<'_>) -> Result<Value, ApiError> {
    Ok(lsp_seed_id(req.str("name")?, req.object("config")?)
        .0
        .into())
}

/// `lspApprovalHash`: `config` → 64-hex string.
pub(crate) fn op_lsp_approval_hash(req: &Request<'_>) -> Result<Value, ApiError> {
    Ok(lsp_approval_hash(req.object("config")?).0.into())
}

/// `lspPlan`: `desired`, `online`, `approvals`, `projectRoot`,
/// `trustedFolder`, `now` → `{actions}`.
pub(crate) fn op_lsp_plan(req: &Request<'_>) -> Result<Value, ApiError> {
    let desired = lsp_servers_from_value(req.raw("desired")?)
        .map_err(|e| ApiError::invalid(format!("field `desired`: {e}")))?;
    let online = online_from_value(req.raw("online")?)
        .map_err(|e| ApiError::invalid(format!("field `online`: {e}")))?;
    let approvals = req.approvals();
    let project_root = req.str("projectRoot")?;
    let trusted_folder = req.bool("trustedFolder")?;
    let now = req.raw("now")?;
    let now = whole_number(now, u64::MAX).map(Millis).ok_or_else(|| {
        ApiError::invalid(format!(
            "field `now` must be a non-negative integer, found {}",
            now.preview(60)
        ))
    })?;
    let ctx = LspPlanContext {
        approvals: &approvals,
        project_root,
        trusted_folder,
        now,
    };
    Ok(lsp_plan(&desired, &online, ctx).to_value())
}

#[cfg(test)]
mod tests {
    use crate::api::evaluate_str;

    #[test]
    fn malformed_requests_are_typed_errors() {
        for line in [
            r#"{"op":"lspPlan"}"#,
            r#"{"op":"lspPlan","desired":[],"online":{},"projectRoot":"/r","trustedFolder":true,"now":0}"#,
            r#"{"op":"lspPlan","desired":{"a":1},"online":{},"projectRoot":"/r","trustedFolder":true,"now":0}"#,
            r#"{"op":"lspPlan","desired":{"a":{"command":"x"}},"online":{},"projectRoot":"/r","trustedFolder":true,"now":0}"#,
            r#"{"op":"lspPlan","desired":{"a":{"scope":"workspace"}},"online":{},"projectRoot":"/r","trustedFolder":true,"now":0}"#,
            r#"{"op":"lspPlan","desired":{},"online":{"a":{"config":{},"status":"up"}},"projectRoot":"/r","trustedFolder":true,"now":0}"#,
            r#"{"op":"lspPlan","desired":{},"online":{},"projectRoot":"/r","trustedFolder":true,"now":-1}"#,
            r#"{"op":"lspSeedId","name":"a","config":[]}"#,
            r#"{"op":"lspSeedId","config":{}}"#,
            r#"{"op":"lspApprovalHash","config":"x"}"#,
            r#"{"op":"parseLspJson","text":5}"#,
            r#"{"op":"parseLspJson","text":"{}","scope":"system"}"#,
            r#"{"op":"parseLspJson","text":"{}","env":[]}"#,
        ] {
            let response = evaluate_str(line);
            assert!(
                response.starts_with(r#"{"error":{"kind":"invalid-request""#),
                "{line} → {response}"
            );
        }
    }

    #[test]
    fn ops_answer_like_the_public_vectors() {
        let response = evaluate_str(
            r#"{"op":"lspSeedId","name":"pyls","config":{"command":"node","env":{"B":"2","A":"1"},"settings":{"json":{"validate":{"enable":false}}}}}"#,
        );
        assert_eq!(response, r#"{"ok":"pyls::32ec4e19d714e5db"}"#);
        let response = evaluate_str(
            r#"{"op":"lspApprovalHash","config":{"command":"/usr/bin/clangd","args":[],"extensionToLanguage":{".yaml":"yaml"},"scope":"user"}}"#,
        );
        assert_eq!(
            response,
            r#"{"ok":"c9b557d47d92832f09ce63552d0b09f65aa3d7b81f2435e627ee50ac1e3ec5d4"}"#
        );
    }
}
