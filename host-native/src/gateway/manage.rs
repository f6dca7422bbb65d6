//! The gateway's own tools. [`STATUS_TOOL`] is listed while something needs attention
//! (`attention`), and always with `serve --manage-tools`, which adds [`RELOAD_TOOL`] and
//! [`RECONNECT_TOOL`]: what `mcp-reconcile reload` and `mcp-reconcile reconnect NAME` do,
//! reached through the session ([`Session::reload`], [`Session::reconnect`]) as the session
//! socket and the daemon reach them.
//!
//! None of them approves or rejects anything, and none can be made to: approval is a person's
//! act (SPEC §5), done with `mcp-reconcile approve` (or `watch`'s prompt) in a terminal. Each
//! tool takes exactly the arguments its schema names (`additionalProperties: false`, and
//! checked here: anything else is refused, saying so), and a reconnect of a server that waits
//! for approval, was rejected or is off by policy is refused with who can decide — it would
//! not start it anyway, the session's gating decides that.
//!
//! A reconnect is the session's own (a process another session holds is not restarted under
//! it) and rate-limited: one per server per [`RECONNECT_INTERVAL`] for the gateway's session,
//! however often an agent's loop asks ([`Reconnects`], over the kernel's [`ReconnectLimit`]).
//! Every name a call brings or a refusal says is escaped and shortened
//! ([`short_name`]) before it reaches the model or a log.
//!
//! Names: `mcp_reconcile_*`, which no server's tool can have — every server's tools are
//! qualified `mcp__<server>__…` (two underscores after `mcp`), the language tools are `lsp_*`.
//! Under `--passthrough` a server's own tools keep their names, and one named like these wins:
//! the gateway's is then not offered.

use std::sync::{Arc, Mutex, PoisonError};

use rmcp::model::{CallToolRequestParams, CallToolResult, ContentBlock, Tool, ToolAnnotations};
use rmcp::ErrorData;
use serde_json::{json, Map, Value};

use super::attention::{command, status_text, Attention};
use super::tool_names::{RECONNECT_TOOL, RELOAD_TOOL, STATUS_TOOL};
use super::{gone, Gateway};
use crate::clock::Clock;
use crate::display::{safe, short, short_name};
use crate::host::State;
use crate::session::Session;
use mcp_reconcile_kernel::{Millis, Reason, ReconnectLimit, RECONNECT_INTERVAL};

/// The most characters of a refusal the session gives (it may name servers and say why).
const ERROR_SHOWN: usize = 600;

/// Said whenever a call brings arguments a tool does not take.
const NO_APPROVAL: &str = "No tool of this gateway approves or rejects a server: that is the \
                           user's act, with `mcp-reconcile approve NAME` or `mcp-reconcile \
                           reject NAME` in a terminal.";

/// The reconnects one gateway's clients asked for lately, on the clock they are timed by.
#[derive(Default)]
pub(super) struct Reconnects {
    limit: Mutex<ReconnectLimit>,
    clock: Clock,
}

impl Reconnects {
    /// A reconnect of `server` asked now: `Ok` (counted), or how long until one is allowed.
    fn ask(&self, server: &str) -> Result<(), Millis> {
        let now = self.clock.now();
        self.limit
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .ask(server, now)
    }
}

impl<S: Session> Gateway<S> {
    /// Appends the gateway's own tools that are offered now to `tools` (a listing's).
    pub(super) async fn add_own_tools(&self, tools: &mut Vec<Tool>) -> Result<(), ErrorData> {
        let report = self.session.status().await.map_err(gone)?;
        let summary = Attention::of(&report, self.only.as_deref()).summary();
        let mut own = Vec::new();
        if summary.is_some() || self.manage {
            own.push(status_tool(summary));
        }
        if self.manage {
            own.extend([reload_tool(), reconnect_tool()]);
        }
        // Under --passthrough a server's own tool of the same name wins.
        own.retain(|t| !tools.iter().any(|s| s.name == t.name));
        tools.extend(own);
        Ok(())
    }

    /// The answer to a call of one of the gateway's own tools; `None` when `request` names
    /// none (it goes to a server).
    pub(super) async fn own_call(
        &self,
        request: &CallToolRequestParams,
    ) -> Result<Option<CallToolResult>, ErrorData> {
        let name = request.name.as_ref();
        // The status tool answers even when it is not listed (nothing needs attention): a
        // client that saw it a moment ago gets the status, not "no such tool".
        let ours =
            name == STATUS_TOOL || (self.manage && [RELOAD_TOOL, RECONNECT_TOOL].contains(&name));
        if !ours || self.server_has(name).await? {
            return Ok(None);
        }
        let arguments = request.arguments.clone().unwrap_or_default();
        let result = match name {
            STATUS_TOOL => match only_arguments(name, &arguments, &[]) {
                Err(refusal) => refused(refusal),
                Ok(()) => {
                    let report = self.session.status().await.map_err(gone)?;
                    ok(status_text(&report, self.only.as_deref(), self.manage))
                }
            },
            RELOAD_TOOL => match only_arguments(name, &arguments, &[]) {
                Err(refusal) => refused(refusal),
                Ok(()) => {
                    self.session.reload().await.map_err(gone)?;
                    tracing::info!("reload asked through {RELOAD_TOOL}");
                    ok(format!(
                        "Reloading: every settings file is read again now and crash loops are \
                         cleared. The tool list follows when the pass ends (list_changed); call \
                         {STATUS_TOOL} to see each server."
                    ))
                }
            },
            _ => match only_arguments(name, &arguments, &["server"]) {
                Err(refusal) => refused(refusal),
                Ok(()) => self.reconnect(arguments.get("server")).await?,
            },
        };
        Ok(Some(result))
    }

    /// Whether a server this gateway offers (`--passthrough`: under its own names) has a tool
    /// named `name`.
    async fn server_has(&self, name: &str) -> Result<bool, ErrorData> {
        if self.only.is_none() {
            return Ok(false);
        }
        Ok(self.visible().await?.tools.iter().any(|t| t.name == name))
    }

    /// [`RECONNECT_TOOL`] for `server`: refused for a server that is not started by policy
    /// (waiting for approval above all), else the session's reconnect.
    async fn reconnect(&self, server: Option<&Value>) -> Result<CallToolResult, ErrorData> {
        let Some(Value::String(server)) = server else {
            return Ok(refused(format!(
                "{RECONNECT_TOOL} needs `server`: the name of a configured server (as \
                 {STATUS_TOOL} lists it)."
            )));
        };
        if self.only.as_deref().is_some_and(|only| only != server) {
            return Ok(refused(format!(
                "this gateway offers only server \"{}\"",
                short_name(self.only.as_deref().unwrap_or_default())
            )));
        }
        let report = self.session.status().await.map_err(gone)?;
        let status = report.servers.iter().find(|s| s.name == *server);
        if let Some(s) = status.filter(|s| s.state == State::Skipped) {
            let decide = |verb| command(verb, server);
            return Ok(refused(match s.reason {
                Some(Reason::PendingApproval) => format!(
                    "server \"{}\" waits for the user's approval, and no tool can give it: ask \
                     them to run {} in a terminal. A reconnect would not start it.",
                    short_name(server),
                    decide("approve")
                ),
                Some(Reason::Rejected) => format!(
                    "the user rejected server \"{}\": only they can change that ({}).",
                    short_name(server),
                    decide("approve")
                ),
                reason => format!(
                    "server \"{}\" is off by policy ({}): a reconnect would not start it; the \
                     settings decide.",
                    short_name(server),
                    reason.map_or("skipped", Reason::as_str)
                ),
            }));
        }
        if let Err(wait) = self.reconnects.ask(server) {
            return Ok(refused(format!(
                "server \"{}\" was asked to reconnect less than {} s ago: try again in {} s \
                 (one reconnect per server every {} s; a failing server is also retried on its \
                 own).",
                short_name(server),
                RECONNECT_INTERVAL.0 / 1000,
                wait.0.div_ceil(1000),
                RECONNECT_INTERVAL.0 / 1000,
            )));
        }
        Ok(
            match self
                .session
                .reconnect(Some(server.clone()))
                .await
                .map_err(gone)?
            {
                Ok(names) => {
                    tracing::info!(
                        server = %short_name(server),
                        "reconnect asked through {RECONNECT_TOOL}"
                    );
                    ok(format!(
                        "Restarting {}. Call {STATUS_TOOL} to see it connect.",
                        names
                            .iter()
                            .map(|n| format!("\"{}\"", short_name(n)))
                            .collect::<Vec<_>>()
                            .join(", ")
                    ))
                }
                Err(why) => refused(short(&why, ERROR_SHOWN)),
            },
        )
    }
}

/// `Ok` when `arguments` holds only names in `allowed`; else why not, which says that no tool
/// approves or rejects.
fn only_arguments(
    tool: &str,
    arguments: &Map<String, Value>,
    allowed: &[&str],
) -> Result<(), String> {
    let unknown: Vec<String> = arguments
        .keys()
        .filter(|k| !allowed.contains(&k.as_str()))
        .map(|k| format!("`{}`", safe(k).chars().take(60).collect::<String>()))
        .collect();
    if unknown.is_empty() {
        return Ok(());
    }
    let takes = match allowed {
        [] => "no arguments".to_owned(),
        names => format!("only `{}`", names.join("`, `")),
    };
    Err(format!(
        "{tool} takes {takes}, not {}. {NO_APPROVAL}",
        unknown.join(", ")
    ))
}

fn ok(text: String) -> CallToolResult {
    CallToolResult::success(vec![ContentBlock::text(text)])
}

fn refused(text: String) -> CallToolResult {
    CallToolResult::error(vec![ContentBlock::text(text)])
}

/// `{"type": "object", ...}` with `properties` and nothing else allowed.
fn schema(properties: Value, required: &[&str]) -> Arc<Map<String, Value>> {
    let schema = json!({
        "type": "object",
        "properties": properties,
        "required": required,
        "additionalProperties": false,
    });
    match schema {
        Value::Object(schema) => Arc::new(schema),
        _ => Arc::default(),
    }
}

/// [`STATUS_TOOL`]: described by what needs attention, when something does.
fn status_tool(summary: Option<String>) -> Tool {
    let description = match summary {
        Some(summary) => format!(
            "mcp-reconcile (the gateway in front of this session's MCP servers) — {summary} \
             This tool returns every server's state, the reason and what to do."
        ),
        None => "mcp-reconcile (the gateway in front of this session's MCP servers): every \
                 server's state, the reason and what to do. Nothing needs attention now."
            .to_owned(),
    };
    Tool::new(STATUS_TOOL, description, schema(json!({}), &[])).annotate(
        ToolAnnotations::with_title("mcp-reconcile status")
            .read_only(true)
            .open_world(false),
    )
}

fn reload_tool() -> Tool {
    Tool::new(
        RELOAD_TOOL,
        "Read every settings file again now (as `mcp-reconcile reload` or SIGHUP) and clear \
         crash loops; servers whose entries changed are restarted, the rest keep running. It \
         approves nothing: a server waiting for approval stays off until the user approves it.",
        schema(json!({}), &[]),
    )
    .annotate(
        ToolAnnotations::with_title("mcp-reconcile reload")
            .read_only(false)
            .destructive(false)
            .idempotent(true)
            .open_world(false),
    )
}

fn reconnect_tool() -> Tool {
    Tool::new(
        RECONNECT_TOOL,
        "Restart one configured server now and clear its failure state (as `mcp-reconcile \
         reconnect NAME`), e.g. after fixing what made it fail. It cannot start a server that \
         waits for approval, was rejected or is off by policy.",
        schema(
            json!({"server": {
                "type": "string",
                "description": "The server's name, as mcp_reconcile_status lists it.",
            }}),
            &["server"],
        ),
    )
    .annotate(
        ToolAnnotations::with_title("mcp-reconcile reconnect")
            .read_only(false)
            .destructive(false)
            .open_world(false),
    )
}
