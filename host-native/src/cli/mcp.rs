//! `mcp-reconcile mcp add / remove / get / list`: Claude Code's `claude mcp …` commands for a
//! Claude Code behind the installed gateway, which refuses `claude mcp add` (see
//! `mcp_reconcile::install::claude_mcp`). Same arguments, same files and scopes; the gateway
//! applies each change to the running sessions. Nothing here prints a value of `env` or of a
//! header: they are secrets as often as not.

use anyhow::{bail, Context as _};
use mcp_reconcile::display;
use mcp_reconcile::inputs::{HostEnv, Inputs, Layout, Options};
use mcp_reconcile::install::claude_mcp::{self, Scope};
use mcp_reconcile_kernel::assemble;
use serde_json::{json, Map, Value};

use super::mcp_args::{McpAddArgs, McpCommand, McpScopeArg, McpTransportArg};

impl From<McpScopeArg> for Scope {
    fn from(arg: McpScopeArg) -> Self {
        match arg {
            McpScopeArg::Local => Scope::Local,
            McpScopeArg::User => Scope::User,
            McpScopeArg::Project => Scope::Project,
        }
    }
}

/// Runs one `mcp …` command.
///
/// # Errors
/// Bad arguments, or a file cannot be read or written.
pub async fn run(command: McpCommand) -> anyhow::Result<()> {
    let env = HostEnv::from_process()?;
    match command {
        McpCommand::Add(args) => add(&env, &args),
        McpCommand::Remove(args) => {
            let (scope, file) =
                claude_mcp::remove(&env, &env.cwd, args.scope.map(Scope::from), &args.name)?;
            outln!(
                "Removed MCP server \"{}\" from the {} scope ({}); running sessions drop it now",
                display::safe(&args.name),
                scope.as_str(),
                display::safe(&file.display().to_string())
            );
            Ok(())
        }
        McpCommand::Get(args) => get(&args.name),
        McpCommand::List => super::commands::status_of(claude_options(), false).await,
    }
}

/// The entry `mcp add` writes, in Claude Code's shape.
fn entry(args: &McpAddArgs) -> anyhow::Result<Value> {
    let pairs = |items: &[String], split: &str, what: &str| -> anyhow::Result<Map<String, Value>> {
        items
            .iter()
            .map(|item| {
                let (key, value) = item.split_once(split).with_context(|| {
                    format!("{what} `{}` is not `KEY{split}VALUE`", display::safe(item))
                })?;
                Ok((
                    key.trim().to_owned(),
                    Value::String(value.trim_start().to_owned()),
                ))
            })
            .collect()
    };
    Ok(match args.transport {
        McpTransportArg::Stdio => {
            if !args.headers.is_empty() {
                bail!("--header is for http and sse servers");
            }
            json!({
                "type": "stdio",
                "command": args.command_or_url,
                "args": args.args,
                "env": pairs(&args.env, "=", "--env")?,
            })
        }
        McpTransportArg::Http | McpTransportArg::Sse => {
            if !args.args.is_empty() || !args.env.is_empty() {
                bail!("an http or sse server takes a URL only (and --header)");
            }
            let kind = if args.transport == McpTransportArg::Http {
                "http"
            } else {
                "sse"
            };
            let mut entry = json!({"type": kind, "url": args.command_or_url});
            if !args.headers.is_empty() {
                entry["headers"] = Value::Object(pairs(&args.headers, ":", "--header")?);
            }
            entry
        }
    })
}

fn add(env: &HostEnv, args: &McpAddArgs) -> anyhow::Result<()> {
    let entry = entry(args)?;
    let scope = Scope::from(args.scope);
    let file = claude_mcp::add(env, &env.cwd, scope, &args.name, &entry)?;
    outln!(
        "Added {} MCP server \"{}\" to the {} scope ({}); the gateway applies it to running \
         sessions — `mcp-reconcile mcp list` shows it",
        entry["type"].as_str().unwrap_or("stdio"),
        display::safe(&args.name),
        scope.as_str(),
        display::safe(&file.display().to_string())
    );
    if scope == Scope::Project {
        outln!(
            "A project server starts once approved: `mcp-reconcile approve {}`",
            display::safe(&args.name)
        );
    }
    Ok(())
}

/// The files of Claude Code, as the installed gateway reads them.
fn claude_options() -> Options {
    Options {
        layout: Layout::CLAUDE,
        ..Options::default()
    }
}

/// `mcp get NAME`: where the server is configured, how it runs (names of variables and
/// headers, never their values) and its state.
fn get(name: &str) -> anyhow::Result<()> {
    let mut inputs = Inputs::new(&claude_options())?;
    let snapshot = inputs.load(None);
    let servers = assemble(&snapshot.layers).servers;
    let Some(config) = servers.get(name) else {
        bail!(
            "no MCP server named \"{}\" in Claude Code's files; `mcp-reconcile mcp list` shows them",
            display::safe(name)
        );
    };
    let entry: Value = serde_json::from_str(
        &mcp_reconcile_kernel::Value::Object(config.object().clone()).to_json(),
    )
    .unwrap_or(Value::Null);
    outln!("{}:", display::safe(name));
    // Every value the entry treats as secret (env and header values, URL credentials and
    // token parameters) is masked wherever it shows up, args included.
    let secrets = mcp_reconcile::redact::secrets(config);
    let text = |v: &Value| {
        let raw = v.as_str().map_or_else(|| v.to_string(), str::to_owned);
        display::safe(&mcp_reconcile::redact::redact_all(&raw, &secrets)).into_owned()
    };
    for (key, label) in [("command", "Command"), ("httpUrl", "URL"), ("url", "URL")] {
        if let Some(value) = entry.get(key) {
            let shown = match value.as_str() {
                Some(url) if key != "command" => mcp_reconcile::redact::mask_url(url),
                _ => text(value),
            };
            outln!("  {label}: {}", display::safe(&shown));
        }
    }
    if let Some(args) = entry.get("args").and_then(Value::as_array) {
        let args: Vec<String> = args.iter().map(text).collect();
        outln!("  Args: {}", args.join(" "));
    }
    for (key, label) in [("env", "Environment"), ("headers", "Headers")] {
        if let Some(map) = entry
            .get(key)
            .and_then(Value::as_object)
            .filter(|m| !m.is_empty())
        {
            let names: Vec<String> = map.keys().map(|k| display::safe(k).into_owned()).collect();
            outln!("  {label}: {} (values not shown)", names.join(", "));
        }
    }
    Ok(())
}
