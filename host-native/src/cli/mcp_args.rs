//! The arguments of `mcp-reconcile mcp …` (run by [`super::mcp`]), apart from it so that the
//! clap types import nothing that imports them.

use clap::{Args, Subcommand, ValueEnum};

/// `mcp-reconcile mcp …` (Claude Code's files).
#[derive(Subcommand, Debug)]
pub enum McpCommand {
    /// Add a server, as `claude mcp add`: `mcp add NAME -- COMMAND [ARGS…]`, or
    /// `mcp add --transport http NAME URL`.
    Add(McpAddArgs),
    /// Remove a server (from the one scope that has it, or `--scope`).
    Remove(McpRemoveArgs),
    /// One server: where it is configured and how it runs (values of `env` and headers are
    /// never shown).
    Get(McpGetArgs),
    /// Every server Claude Code's files configure for this project, with its state.
    List,
}

/// A scope, as Claude Code's `--scope`.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum McpScopeArg {
    /// This project, for you only (`~/.claude.json`; the default).
    Local,
    /// Every project of yours (`~/.claude.json`).
    User,
    /// The project's `.mcp.json`, shared with everyone who clones it.
    Project,
}

/// A transport, as Claude Code's `--transport`.
#[derive(ValueEnum, Clone, Copy, Debug, PartialEq, Eq)]
pub enum McpTransportArg {
    /// A local process (`COMMAND [ARGS…]`).
    Stdio,
    /// Streamable HTTP (`URL`).
    Http,
    /// Server-sent events (`URL`).
    Sse,
}

#[derive(Args, Debug)]
pub struct McpAddArgs {
    /// Where the entry goes
    #[arg(short, long, value_enum, default_value = "local")]
    pub scope: McpScopeArg,
    /// How the gateway reaches the server
    #[arg(short, long, value_enum, default_value = "stdio")]
    pub transport: McpTransportArg,
    /// An environment variable of the server (stdio), `KEY=VALUE`; repeatable
    #[arg(short, long = "env", value_name = "KEY=VALUE")]
    pub env: Vec<String>,
    /// A header sent to the server (http, sse), `"Name: value"`; repeatable
    #[arg(short = 'H', long = "header", value_name = "HEADER")]
    pub headers: Vec<String>,
    /// The server's name
    pub name: String,
    /// The command (stdio) or the URL (http, sse)
    pub command_or_url: String,
    /// The command's arguments (after `--`)
    #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
    pub args: Vec<String>,
}

#[derive(Args, Debug)]
pub struct McpRemoveArgs {
    /// The scope to remove it from (default: the one that has it)
    #[arg(short, long, value_enum)]
    pub scope: Option<McpScopeArg>,
    /// The server's name
    pub name: String,
}

#[derive(Args, Debug)]
pub struct McpGetArgs {
    /// The server's name
    pub name: String,
}
