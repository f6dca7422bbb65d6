//! Language-server ops: `parseLspJson`, `lspSeedId`, `lspApprovalHash`,
//! `lspPlan`.

use crate::api::request::Decode;
use crate::api::{ApiError, Request};
use crate::approvals::Approvals;
use crate::identity::ApprovalHash;
use crate::json::{whole_number, Object, Value};
use crate::lsp::{
    lsp_approval_hash, lsp_plan, lsp_seed_id, lsp_servers_from_value, parse_lsp_json, LspJson,
    LspParseOptions, LspPlan, LspPlanContext, LspScope, LspSeedId, LspServers,
};
use crate::plan::{online_from_value, Online};
use crate::time::Millis;

/// `parseLspJson`: a `.lsp.json` file's text and how to read it.
#[cfg_attr(feature = "ts", derive(ts_rs::TS), ts(rename_all = "camelCase"))]
pub(crate) struct ParseLspJsonRequest {
    pub(crate) text: String,
    /// Variables for `$VAR` / `${VAR}` expansion.
    #[cfg_attr(
        feature = "ts",
        ts(as = "Option<crate::api::typescript::Environment>", optional = nullable)
    )]
    pub(crate) env: Option<Object>,
    /// Expand variables (default true).
    #[cfg_attr(feature = "ts", ts(as = "Option<_>", optional = nullable))]
    pub(crate) expand: bool,
    /// Stamp every entry with this scope (default: none).
    #[cfg_attr(feature = "ts", ts(optional = nullable))]
    pub(crate) scope: Option<LspScope>,
    /// Checks an absolute `workspaceFolder` against it.
    #[cfg_attr(feature = "ts", ts(optional = nullable))]
    pub(crate) project_root: Option<String>,
}

impl Decode for ParseLspJsonRequest {
    fn decode(req: &Request<'_>) -> Result<Self, ApiError> {
        let text = req.str("text")?.to_owned();
        let env = match req.get("env") {
            None => None,
            Some(Value::Object(env)) => Some(env.clone()),
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
        Ok(ParseLspJsonRequest {
            text,
            env,
            expand: req.opt_bool("expand")?.unwrap_or(true),
            scope,
            project_root: req.opt_str("projectRoot")?.map(str::to_owned),
        })
    }
}

/// `lspSeedId`: a language-server entry under its name.
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub(crate) struct LspSeedIdRequest {
    pub(crate) name: String,
    #[cfg_attr(feature = "ts", ts(as = "crate::lsp::LspEntry"))]
    pub(crate) config: Object,
}

impl Decode for LspSeedIdRequest {
    fn decode(req: &Request<'_>) -> Result<Self, ApiError> {
        Ok(LspSeedIdRequest {
            name: req.str("name")?.to_owned(),
            config: req.object("config")?.clone(),
        })
    }
}

/// `lspApprovalHash`: one language-server entry.
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub(crate) struct LspApprovalHashRequest {
    #[cfg_attr(feature = "ts", ts(as = "crate::lsp::LspEntry"))]
    pub(crate) config: Object,
}

impl Decode for LspApprovalHashRequest {
    fn decode(req: &Request<'_>) -> Result<Self, ApiError> {
        Ok(LspApprovalHashRequest {
            config: req.object("config")?.clone(),
        })
    }
}

/// `lspPlan`: desired and live language servers and the approval inputs.
#[cfg_attr(feature = "ts", derive(ts_rs::TS), ts(rename_all = "camelCase"))]
pub(crate) struct LspPlanRequest {
    /// Every entry carries `scope`: `"user"` or `"project"`.
    pub(crate) desired: LspServers,
    pub(crate) online: Online,
    /// No decisions when absent or `null`.
    #[cfg_attr(feature = "ts", ts(as = "Option<_>", optional = nullable))]
    pub(crate) approvals: Approvals,
    pub(crate) project_root: String,
    pub(crate) trusted_folder: bool,
    /// Milliseconds on the host's clock.
    pub(crate) now: Millis,
}

impl Decode for LspPlanRequest {
    fn decode(req: &Request<'_>) -> Result<Self, ApiError> {
        let desired = lsp_servers_from_value(req.raw("desired")?)
            .map_err(|e| ApiError::invalid(format!("field `desired`: {e}")))?;
        let online = online_from_value(req.raw("online")?)
            .map_err(|e| ApiError::invalid(format!("field `online`: {e}")))?;
        let approvals = req.approvals();
        let project_root = req.str("projectRoot")?.to_owned();
        let trusted_folder = req.bool("trustedFolder")?;
        let now = req.raw("now")?;
        let now = whole_number(now, u64::MAX).map(Millis).ok_or_else(|| {
            ApiError::invalid(format!(
                "field `now` must be a non-negative integer, found {}",
                now.preview(60)
            ))
        })?;
        Ok(LspPlanRequest {
            desired,
            online,
            approvals,
            project_root,
            trusted_folder,
            now,
        })
    }
}

/// `parseLspJson`: `text`, `env`?, `expand`? (default true), `scope`?
/// (`"user"` / `"project"`: stamp it; default none), `projectRoot`? →
/// `{servers, errors}`.
pub(crate) fn op_parse_lsp_json(req: ParseLspJsonRequest) -> Result<LspJson, ApiError> {
    let options = LspParseOptions {
        env: req.env.as_ref(),
        expand: req.expand,
        scope: req.scope,
        project_root: req.project_root.as_deref(),
    };
    Ok(parse_lsp_json(&req.text, options))
}

/// `lspSeedId`: `name`, `config` → `"<name>::<16hex>"`.
pub(crate) fn op_lsp_seed_id(req: LspSeedIdRequest) -> Result<LspSeedId, ApiError> {
    Ok(lsp_seed_id(&req.name, &req.config))
}

/// `lspApprovalHash`: `config` → 64-hex string.
pub(crate) fn op_lsp_approval_hash(req: LspApprovalHashRequest) -> Result<ApprovalHash, ApiError> {
    Ok(lsp_approval_hash(&req.config))
}

/// `lspPlan`: `desired`, `online`, `approvals`, `projectRoot`,
/// `trustedFolder`, `now` → `{actions}`.
pub(crate) fn op_lsp_plan(req: LspPlanRequest) -> Result<LspPlan, ApiError> {
    let ctx = LspPlanContext {
        approvals: &req.approvals,
        project_root: &req.project_root,
        trusted_folder: req.trusted_folder,
        now: req.now,
    };
    Ok(lsp_plan(&req.desired, &req.online, ctx))
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
