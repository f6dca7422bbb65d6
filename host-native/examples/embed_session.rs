//! A Rust host that embeds the host library's session with its own list of MCP servers.
//!
//! The program keeps its server list in a settings file of its own (in a temporary directory,
//! with every other input the session reads pointed there too, so nothing of the user's is
//! read), runs a [`Host`] over it, and uses the running session as a gateway would, through the
//! [`Session`] trait: the merged catalog, routing a qualified tool name to the connection that
//! serves it, calling the tool, status. Then it edits its list — one server added, the other
//! untouched — and the session reconnects only what changed: the untouched server keeps its
//! process.
//!
//! It connects to a real stdio MCP server: the repository's fixture server
//! (`tests/fixture-server`), whose path it takes from its first argument or
//! `MCP_RECONCILE_FIXTURE`:
//!
//! ```sh
//! cargo build -p mcp-reconcile-fixture
//! cargo run -p mcp-reconcile --example embed_session -- target/debug/mcp-fixture-server
//! ```

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{bail, Context};
use mcp_reconcile::host::{Host, HostEvent, HostHandle, HostOptions, PlanReport, Target};
use mcp_reconcile::inputs::{Inputs, Options};
use mcp_reconcile::session::Session;
use rmcp::model::{CallToolRequestParams, CallToolResult};
use serde_json::{json, Value};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

const USAGE: &str = "\
usage: embed_session SERVER
       MCP_RECONCILE_FIXTURE=SERVER embed_session

SERVER is the repository's fixture MCP server (`cargo build -p mcp-reconcile-fixture` builds
target/debug/mcp-fixture-server). Without one, there is nothing to connect to: this message.";

/// How long the example waits for a pass before it gives up.
const PATIENCE: Duration = Duration::from_secs(30);

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let Some(server) = std::env::args_os()
        .nth(1)
        .or_else(|| std::env::var_os("MCP_RECONCILE_FIXTURE"))
    else {
        println!("{USAGE}");
        return Ok(());
    };
    let server = std::path::absolute(PathBuf::from(server))?;
    if !server.is_file() {
        bail!(
            "no MCP server at {}; build the fixture server with `cargo build -p mcp-reconcile-fixture`",
            server.display()
        );
    }
    let server = server
        .to_str()
        .with_context(|| format!("{} is not a UTF-8 path", server.display()))?
        .to_owned();

    // The embedder's own inputs: its server list, and every other file the session reads.
    let dir = tempfile::tempdir()?;
    let at = |name: &str| dir.path().join(name);
    std::fs::create_dir(at("project"))?;
    let settings = at("settings.json");
    let notes = json!({ "command": server, "args": ["--name", "notes", "--tools", "echo"] });
    write_servers(&settings, &json!({ "notes": notes }))?;
    let options = Options {
        user_settings: Some(settings.clone()),
        system_settings: Some(at("system.json")),
        system_defaults: Some(at("system-defaults.json")),
        project: Some(at("project")),
        approvals: Some(at("approvals.json")),
        user_lsp: Some(at("lsp.json")),
        lsp_approvals: Some(at("lsp-approvals.json")),
        state_dir: Some(at("state")),
        ..Options::default()
    };

    // The session: a host over those inputs, told of file changes by the library's watcher,
    // asked things through a handle.
    let mut host = Host::new(Inputs::new(&options)?, HostOptions::default());
    let mut events = host.subscribe();
    let running = host.spawn()?;
    let session = running.handle().clone();

    print_pass(&next_pass(&mut events).await?);
    let echoed = call(&session, "mcp__notes__echo", json!({ "text": "hello" })).await?;
    println!("mcp__notes__echo -> {echoed}");
    let notes_pid = pid(&session, "notes").await?;

    // The embedder edits its list: `math` joins, `notes` is left as it was.
    let math = json!({ "command": server, "args": ["--name", "math", "--tools", "add"] });
    write_servers(&settings, &json!({ "notes": notes, "math": math }))?;
    print_pass(&next_pass(&mut events).await?);
    let sum = call(&session, "mcp__math__add", json!({ "a": 2, "b": 3 })).await?;
    println!("mcp__math__add -> {sum}");

    let catalog = session.catalog().await?;
    let tools: Vec<&str> = catalog.tools.iter().map(|t| t.name.as_ref()).collect();
    println!("catalog: {}", tools.join(", "));
    for server in session.status().await?.servers {
        println!(
            "status: {} {} ({} tools, {} spawns)",
            server.name, server.state, server.tools, server.spawns
        );
    }
    if pid(&session, "notes").await? != notes_pid {
        bail!("`notes` was restarted by an edit that did not touch it");
    }
    println!("notes kept its process across the edit (pid {notes_pid})");

    running.shutdown().await?;
    println!("stopped every server");
    Ok(())
}

/// Writes the server list the way an editor saves: a temporary file renamed into place.
fn write_servers(path: &Path, servers: &Value) -> anyhow::Result<()> {
    let temporary = path.with_extension("tmp");
    let text = serde_json::to_string_pretty(&json!({ "mcpServers": servers }))?;
    std::fs::write(&temporary, text)?;
    std::fs::rename(&temporary, path)?;
    Ok(())
}

/// The next reconcile pass the session applies.
async fn next_pass(events: &mut mpsc::UnboundedReceiver<HostEvent>) -> anyhow::Result<PlanReport> {
    let wait = async {
        while let Some(event) = events.recv().await {
            if let HostEvent::PlanApplied(report) = event {
                return Ok(report);
            }
        }
        bail!("the session stopped")
    };
    tokio::time::timeout(PATIENCE, wait)
        .await
        .context("no reconcile pass in time")?
}

fn print_pass(report: &PlanReport) {
    println!("pass {} ({}):", report.run, report.trigger);
    for step in &report.steps {
        let name = step.action.name().unwrap_or("-");
        let outcome = match (&step.error, &step.tools) {
            (Some(error), _) => format!("failed: {error}"),
            (None, Some(tools)) => format!("tools {}", tools.after.join(", ")),
            (None, None) => String::new(),
        };
        let line = format!("  {:<10} {name:<6} {outcome}", step.action.kind());
        println!("{}", line.trim_end());
    }
}

/// Calls a tool by the qualified name a client sees; the session says which connection serves
/// it and under what name.
async fn call(session: &HostHandle, tool: &str, arguments: Value) -> anyhow::Result<String> {
    let route = match session.route(Target::Tool(tool.to_owned())).await? {
        Ok(route) => route,
        Err(message) => bail!("{message}"),
    };
    let Value::Object(arguments) = arguments else {
        bail!("tool arguments must be an object");
    };
    let params = CallToolRequestParams::new(route.name.clone()).with_arguments(arguments);
    let result = route
        .caller
        .call_tool(params, None, CancellationToken::new())
        .await?;
    Ok(text(&result))
}

/// The text parts of a tool's result.
fn text(result: &CallToolResult) -> String {
    result
        .content
        .iter()
        .filter_map(|content| content.as_text().map(|t| t.text.as_str()))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The process id of a running stdio server.
async fn pid(session: &HostHandle, name: &str) -> anyhow::Result<u32> {
    let status = session.status().await?;
    status
        .servers
        .iter()
        .find(|s| s.name == name)
        .and_then(|s| s.pid)
        .with_context(|| format!("`{name}` has no running process"))
}
