//! OpenCode's form of the gateway's entry: OpenCode reads `type: local` with the program and
//! its arguments as one `command` array and the variables under `environment` (its
//! `McpLocalConfig`), so the entry install writes into `opencode.json(c)` is this host's
//! `{command, args, env}` said that way. Its servers move to the sidecar as an editor's do
//! (`editors`): OpenCode has no switch that keeps a server listed but unstarted other than
//! `enabled: false`, which a user flips back in its own `/mcp` dialog.

use serde_json::{json, Value};

/// `entry` (`command`, `args`, `env`) as an OpenCode local entry.
pub(super) fn entry(entry: &Value) -> Value {
    let argv: Vec<Value> = std::iter::once(entry["command"].clone())
        .chain(entry["args"].as_array().into_iter().flatten().cloned())
        .collect();
    json!({
        "type": "local",
        "command": argv,
        "environment": entry["env"].clone(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The gateway's entry keeps its program, arguments and install mark in OpenCode's keys.
    #[test]
    fn the_gateway_entry_is_an_opencode_local_entry() {
        let host = json!({"command": "/bin/mcp-reconcile", "args": ["serve", "--layout", "opencode"],
                          "env": {"MCP_RECONCILE_INSTALLED": "opencode"}});
        assert_eq!(
            entry(&host),
            json!({"type": "local",
                   "command": ["/bin/mcp-reconcile", "serve", "--layout", "opencode"],
                   "environment": {"MCP_RECONCILE_INSTALLED": "opencode"}})
        );
    }
}
