//! The host's MCP client (`mcp_reconcile::transport::connect` with an `httpUrl` config, exactly
//! as the host connects a configured streamable-HTTP server) driven through the official MCP
//! conformance suite's client scenarios. Run by `scripts/conformance.sh`:
//! `conformance client --command "conformance_client" --scenario NAME` appends the test
//! server's URL and sets `MCP_CONFORMANCE_SCENARIO`.

use std::process::ExitCode;
use std::time::Duration;

use std::sync::Arc;

use mcp_reconcile::transport::{connect, ConnectOptions, ElicitRequestParams, ElicitResult};
use mcp_reconcile_kernel::json::{parse, Value};
use mcp_reconcile_kernel::ServerConfig;
use rmcp::model::ElicitationAction;
use tokio::sync::mpsc;

#[path = "conformance_client/auth.rs"]
mod auth;

#[tokio::main]
async fn main() -> ExitCode {
    match run().await {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("conformance client: {e:#}");
            ExitCode::FAILURE
        }
    }
}

async fn run() -> anyhow::Result<()> {
    let url = std::env::args()
        .next_back()
        .filter(|a| a.starts_with("http"))
        .ok_or_else(|| anyhow::anyhow!("usage: conformance_client URL"))?;
    let scenario = std::env::var("MCP_CONFORMANCE_SCENARIO").unwrap_or_default();
    if scenario.starts_with("auth/") {
        return auth::run(&url, &scenario).await;
    }
    let text = serde_json::json!({ "httpUrl": url }).to_string();
    let Ok(Value::Object(object)) = parse(&text) else {
        anyhow::bail!("cannot build the server config");
    };
    let config = ServerConfig::new(object);
    let (events, _rx) = mpsc::unbounded_channel();
    // The user of this client accepts every form with its defaults (SEP-1034).
    let options = options(
        events,
        Some(Arc::new(|request| {
            Box::pin(async move { accept_defaults(&request) })
        })),
    );
    let conn = connect("conformance", &config, options).await?;
    eprintln!(
        "connected; tools: {:?}",
        conn.catalog()
            .tools
            .iter()
            .map(|t| t.name.to_string())
            .collect::<Vec<_>>()
    );
    let call = |name: &str, args: serde_json::Value| {
        let arguments = args.as_object().cloned();
        let name = name.to_owned();
        let conn = &conn;
        async move {
            let result = conn.call_tool(&name, arguments).await?;
            eprintln!("{name} → {:?}", result.content);
            anyhow::Ok(())
        }
    };
    // Calls a scenario names in its context (`toolCalls`).
    let context = scenario_context();
    if let Some(calls) = context.get("toolCalls").and_then(|c| c.as_array()) {
        for tool_call in calls {
            let name = tool_call["name"].as_str().unwrap_or_default();
            call(name, tool_call["arguments"].clone()).await?;
        }
    }
    match scenario.as_str() {
        "tools_call" => call("add_numbers", serde_json::json!({"a": 5, "b": 3})).await?,
        // Input-required results answered round after round (SEP-2322).
        "sep-2322-client-request-state" => {
            for tool in [
                "test_mrtr_echo_state",
                "test_mrtr_no_state",
                "test_mrtr_unrelated",
                "test_mrtr_no_result_type",
            ] {
                call(tool, serde_json::json!({})).await?;
            }
        }
        // Every tool the host offers: one with a malformed `x-mcp-header` must not be among
        // them (SEP-2243).
        "http-invalid-tool-headers" => {
            let tools: Vec<String> = conn
                .catalog()
                .tools
                .iter()
                .map(|t| t.name.to_string())
                .collect();
            for tool in tools {
                call(&tool, serde_json::json!({"region": "us-west1"})).await?;
            }
        }
        "sse-retry" => call("test_reconnection", serde_json::json!({})).await?,
        "elicitation-sep1034-client-defaults" => {
            call("test_client_elicitation_defaults", serde_json::json!({})).await?
        }
        _ => {}
    }
    conn.close().await;
    Ok(())
}

/// What the scenario tells its client (`MCP_CONFORMANCE_CONTEXT`, JSON; `null` without it).
fn scenario_context() -> serde_json::Value {
    std::env::var("MCP_CONFORMANCE_CONTEXT")
        .ok()
        .and_then(|text| serde_json::from_str(&text).ok())
        .unwrap_or_default()
}

/// How this client connects: as the host does, with a 10 s handshake.
fn options(
    events: mpsc::UnboundedSender<mcp_reconcile::transport::ConnEvent>,
    elicitation: Option<mcp_reconcile::transport::ElicitationResponder>,
) -> ConnectOptions {
    ConnectOptions {
        generation: 1,
        events,
        // The suite gives each client 60 s (`--timeout 60000` in every run of it here) and
        // starts all of a requirement set's clients at once; a shorter handshake budget made
        // the non-auth scenarios (the ones that connect here) fail on a loaded machine.
        handshake_timeout: Duration::from_secs(60),
        base_dir: None,
        launch: None,
        tokens: None,
        elicitation,
    }
}

/// Accepts a form elicitation with every default the schema gives; declines a URL one.
fn accept_defaults(request: &ElicitRequestParams) -> ElicitResult {
    let ElicitRequestParams::FormElicitationParams {
        requested_schema, ..
    } = request
    else {
        return ElicitResult::new(ElicitationAction::Decline);
    };
    let schema = serde_json::to_value(requested_schema).unwrap_or_default();
    let mut content = serde_json::Map::new();
    if let Some(properties) = schema.get("properties").and_then(|p| p.as_object()) {
        for (name, property) in properties {
            if let Some(default) = property.get("default") {
                content.insert(name.clone(), default.clone());
            }
        }
    }
    ElicitResult::new(ElicitationAction::Accept).with_content(serde_json::Value::Object(content))
}
