//! The names of the gateway's own tools (`mcp_reconcile_*`, which no server's tool can have:
//! a server's tools are qualified `mcp__<server>__…`). Below `attention`, which offers the
//! status tool and names the others in its texts, and `manage`, which answers all three.

/// The tool that says what needs attention (and, with `serve --manage-tools`, always lists
/// every server). Never a server's name: those are qualified `mcp__<server>__…`.
pub const STATUS_TOOL: &str = "mcp_reconcile_status";
/// Reads the files again now (`serve --manage-tools`).
pub const RELOAD_TOOL: &str = "mcp_reconcile_reload";
/// Restarts one server now (`serve --manage-tools`).
pub const RECONNECT_TOOL: &str = "mcp_reconcile_reconnect";
