//! Admission ops: `gating`, `unavailableReason`, `toolNotFound`,
//! `gatingEqual`, `serversEqual`, `matchPattern`.

use crate::api::request::Decode;
use crate::api::{ApiError, Request};
use crate::approvals::Approvals;
use crate::config::Servers;
use crate::gating::{
    compute_gating, gating_equal, gating_with_pending, match_pattern, servers_equal,
    tool_not_found, unavailable_reason, Gating, Reason,
};
use crate::json::{Object, Value};
use crate::settings::McpLists;

/// `gating`: a server map and the admission inputs.
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub(crate) struct GatingRequest {
    pub(crate) servers: Servers,
    #[cfg_attr(feature = "ts", ts(flatten))]
    pub(crate) inputs: GatingInputs,
}

impl Decode for GatingRequest {
    fn decode(req: &Request<'_>) -> Result<Self, ApiError> {
        let servers = req.servers("servers")?;
        Ok(GatingRequest {
            servers,
            inputs: GatingInputs::decode(req)?,
        })
    }
}

/// The admission inputs the `gating` and `hotReload` requests share.
#[cfg_attr(feature = "ts", derive(ts_rs::TS), ts(rename_all = "camelCase"))]
pub(crate) struct GatingInputs {
    /// The merged `mcp.*` lists of the settings files (absent: none set).
    #[cfg_attr(feature = "ts", ts(as = "Option<_>", optional = nullable))]
    pub(crate) settings: McpLists,
    /// Occurrences of the `--allowed-mcp-server-names` launch flag.
    #[cfg_attr(feature = "ts", ts(optional = nullable))]
    pub(crate) cli_allowed: Option<Vec<String>>,
    /// No decisions when absent or `null`.
    #[cfg_attr(feature = "ts", ts(as = "Option<_>", optional = nullable))]
    pub(crate) approvals: Approvals,
    /// Needed unless `yolo` (approvals are read only with the gate on).
    #[cfg_attr(feature = "ts", ts(as = "Option<_>", optional = nullable))]
    pub(crate) project_root: String,
    /// Approval gate off: no `pending`.
    #[cfg_attr(feature = "ts", ts(as = "Option<_>", optional = nullable))]
    pub(crate) yolo: bool,
    /// Exact names the client's own configuration turns off (`clientPolicy`'s
    /// `blocked`, a client's per-server switches). Those in the server map
    /// become the gating's `blocked`, in map order (absent: none).
    #[cfg_attr(feature = "ts", ts(optional = nullable))]
    pub(crate) blocked: Option<Vec<String>>,
}

impl Decode for GatingInputs {
    /// `settings: {allowed?, excluded?, workspaceAllowed?}`, `cliAllowed?`,
    /// `approvals`, `projectRoot` (optional in yolo), `yolo?`, `blocked?`.
    fn decode(req: &Request<'_>) -> Result<Self, ApiError> {
        let settings = match req.get("settings") {
            None => Object::new(),
            Some(Value::Object(o)) => o.clone(),
            Some(other) => {
                return Err(ApiError::invalid(format!(
                    "field `settings` must be an object, found {}",
                    other.to_json()
                )))
            }
        };
        let settings = Request { fields: &settings };
        let settings = McpLists {
            allowed: settings.opt_string_list("allowed")?,
            excluded: settings.opt_string_list("excluded")?,
            workspace_allowed: settings.opt_string_list("workspaceAllowed")?,
        };
        let cli_allowed = req.opt_string_list("cliAllowed")?;
        let yolo = req.opt_bool("yolo")?.unwrap_or(false);
        let project_root = if yolo {
            req.opt_str("projectRoot")?.unwrap_or_default()
        } else {
            req.str("projectRoot")?
        };
        let blocked = req.opt_string_list("blocked")?;
        Ok(GatingInputs {
            settings,
            cli_allowed,
            approvals: req.approvals(),
            project_root: project_root.to_owned(),
            yolo,
            blocked,
        })
    }
}

impl GatingInputs {
    /// [`compute_gating`] of `servers` under these inputs, with their `blocked`.
    pub(crate) fn gating(&self, servers: &Servers) -> Gating {
        Gating {
            blocked: self.blocked_in(servers),
            ..compute_gating(
                servers,
                &self.settings,
                self.cli_allowed.as_deref(),
                &self.approvals,
                &self.project_root,
                self.yolo,
            )
        }
    }

    /// [`gating_with_pending`] under these inputs' lists and launch cap, with
    /// their `blocked` among `servers`.
    pub(crate) fn gating_with(&self, servers: &Servers, pending: Option<Vec<String>>) -> Gating {
        Gating {
            blocked: self.blocked_in(servers),
            ..gating_with_pending(&self.settings, self.cli_allowed.as_deref(), pending)
        }
    }

    /// The names of `servers` in `blocked`, in map order; `None` when there
    /// are none (as a native host sets it).
    fn blocked_in(&self, servers: &Servers) -> Option<Vec<String>> {
        let listed = self.blocked.as_deref()?;
        let blocked: Vec<String> = servers
            .keys()
            .filter(|name| listed.contains(name))
            .cloned()
            .collect();
        (!blocked.is_empty()).then_some(blocked)
    }
}

/// The fields shared by `unavailableReason` and `toolNotFound`.
#[cfg_attr(feature = "ts", derive(ts_rs::TS), ts(rename_all = "camelCase"))]
pub(crate) struct AdmissionQuery {
    /// The merged server map (absent or `null`: `{}`).
    #[cfg_attr(feature = "ts", ts(as = "Option<_>", optional = nullable))]
    pub(crate) merged: Servers,
    /// The gating in force (absent or `null`: `{}`).
    #[cfg_attr(feature = "ts", ts(as = "Option<_>", optional = nullable))]
    pub(crate) gating: Gating,
    /// Names removed during this session (absent or `null`: `[]`).
    #[cfg_attr(feature = "ts", ts(as = "Option<_>", optional = nullable))]
    pub(crate) removed: Vec<String>,
    /// Approvals count only when both `approvals` and `projectRoot` are given.
    #[cfg_attr(feature = "ts", ts(optional = nullable))]
    pub(crate) approvals: Option<Approvals>,
    #[cfg_attr(feature = "ts", ts(optional = nullable))]
    pub(crate) project_root: Option<String>,
}

impl Decode for AdmissionQuery {
    fn decode(req: &Request<'_>) -> Result<Self, ApiError> {
        Ok(AdmissionQuery {
            merged: match req.get("merged") {
                None => Servers::new(),
                Some(_) => req.servers("merged")?,
            },
            gating: match req.get("gating") {
                None => Gating::default(),
                Some(_) => req.gating("gating")?,
            },
            removed: req.opt_string_list("removed")?.unwrap_or_default(),
            approvals: req.get("approvals").map(|v| Approvals::new(v.clone())),
            project_root: req.opt_str("projectRoot")?.map(str::to_owned),
        })
    }
}

impl AdmissionQuery {
    fn approvals(&self) -> Option<(&Approvals, &str)> {
        self.approvals.as_ref().zip(self.project_root.as_deref())
    }
}

/// `unavailableReason`: why one server is not connected.
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub(crate) struct UnavailableReasonRequest {
    pub(crate) name: String,
    #[cfg_attr(feature = "ts", ts(flatten))]
    pub(crate) query: AdmissionQuery,
}

impl Decode for UnavailableReasonRequest {
    fn decode(req: &Request<'_>) -> Result<Self, ApiError> {
        let name = req.str("name")?.to_owned();
        Ok(UnavailableReasonRequest {
            name,
            query: AdmissionQuery::decode(req)?,
        })
    }
}

/// `toolNotFound`: why a tool call found no tool.
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub(crate) struct ToolNotFoundRequest {
    /// `mcp__<server>__<tool>`.
    pub(crate) tool: String,
    #[cfg_attr(feature = "ts", ts(flatten))]
    pub(crate) query: AdmissionQuery,
}

impl Decode for ToolNotFoundRequest {
    fn decode(req: &Request<'_>) -> Result<Self, ApiError> {
        let tool = req.str("tool")?.to_owned();
        Ok(ToolNotFoundRequest {
            tool,
            query: AdmissionQuery::decode(req)?,
        })
    }
}

/// `gatingEqual`: two gating objects.
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub(crate) struct GatingEqualRequest {
    pub(crate) a: Gating,
    pub(crate) b: Gating,
}

impl Decode for GatingEqualRequest {
    fn decode(req: &Request<'_>) -> Result<Self, ApiError> {
        Ok(GatingEqualRequest {
            a: req.gating("a")?,
            b: req.gating("b")?,
        })
    }
}

/// `serversEqual`: two server maps (compared as written, so any JSON;
/// `null` equals `{}`).
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub(crate) struct ServersEqualRequest {
    #[cfg_attr(feature = "ts", ts(as = "Option<Servers>", optional = nullable))]
    pub(crate) a: Option<Value>,
    #[cfg_attr(feature = "ts", ts(as = "Option<Servers>", optional = nullable))]
    pub(crate) b: Option<Value>,
}

impl Decode for ServersEqualRequest {
    fn decode(req: &Request<'_>) -> Result<Self, ApiError> {
        Ok(ServersEqualRequest {
            a: req.fields.get("a").cloned(),
            b: req.fields.get("b").cloned(),
        })
    }
}

/// `matchPattern`: a `*` / `?` pattern and a name.
#[cfg_attr(feature = "ts", derive(ts_rs::TS))]
pub(crate) struct MatchPatternRequest {
    pub(crate) pattern: String,
    pub(crate) name: String,
}

impl Decode for MatchPatternRequest {
    fn decode(req: &Request<'_>) -> Result<Self, ApiError> {
        Ok(MatchPatternRequest {
            pattern: req.str("pattern")?.to_owned(),
            name: req.str("name")?.to_owned(),
        })
    }
}

/// `gating`: `servers`, `settings: {allowed?, excluded?, workspaceAllowed?}`, `cliAllowed?`,
/// `approvals`, `projectRoot`, `yolo?`, `blocked?`.
pub(crate) fn op_gating(req: GatingRequest) -> Result<Gating, ApiError> {
    Ok(req.inputs.gating(&req.servers))
}

/// `unavailableReason`: `name`, `merged`, `gating`, `removed`, `approvals?`,
/// `projectRoot?`.
pub(crate) fn op_unavailable_reason(
    req: UnavailableReasonRequest,
) -> Result<Option<Reason>, ApiError> {
    let q = &req.query;
    Ok(unavailable_reason(
        &req.name,
        &q.merged,
        &q.gating,
        &q.removed,
        q.approvals(),
    ))
}

/// `toolNotFound`: `tool`, `merged`, `gating`, `removed`, `approvals?`,
/// `projectRoot?`.
pub(crate) fn op_tool_not_found(req: ToolNotFoundRequest) -> Result<Option<String>, ApiError> {
    let q = &req.query;
    Ok(tool_not_found(
        &req.tool,
        &q.merged,
        &q.gating,
        &q.removed,
        q.approvals(),
    ))
}

/// `gatingEqual`: `a`, `b` (gating objects).
pub(crate) fn op_gating_equal(req: GatingEqualRequest) -> Result<bool, ApiError> {
    Ok(gating_equal(&req.a, &req.b))
}

/// `serversEqual`: `a`, `b` (maps or `null`).
pub(crate) fn op_servers_equal(req: ServersEqualRequest) -> Result<bool, ApiError> {
    servers_equal(req.a.as_ref(), req.b.as_ref()).map_err(|e| ApiError::config(e.to_string()))
}

/// `matchPattern`: `pattern`, `name` → whether the glob matches.
pub(crate) fn op_match_pattern(req: MatchPatternRequest) -> Result<bool, ApiError> {
    Ok(match_pattern(&req.pattern, &req.name))
}
