//! What a session sees of a server: its tools after the server's own `includeTools` /
//! `excludeTools`, under qualified names `mcp__<server>__<name>` (the kernel's
//! [`tool_prefix`]), plus its `trust` flag.
//!
//! A session-mode host applies these to its own connections; a pool session applies its own
//! config's fields to a shared connection, so two sessions with different filters share one
//! process and still see different tools.

use mcp_reconcile_kernel::gating::tool_prefix;
use mcp_reconcile_kernel::json::Value;
use mcp_reconcile_kernel::ServerConfig;

use crate::transport::Catalog;

/// Whether `tool` (the server's own name for it) is visible under `config`'s filters:
/// `excludeTools` wins; with `includeTools`, only the listed names (an entry may carry an
/// argument pattern, `name(...)`, which admits `name`), as the TypeScript CLI does.
pub fn tool_enabled(config: &ServerConfig, tool: &str) -> bool {
    let names = |key: &str| -> Option<Vec<String>> {
        match config.get(key) {
            Some(Value::Array(items)) => Some(
                items
                    .iter()
                    .filter_map(Value::as_str)
                    .map(str::to_owned)
                    .collect(),
            ),
            _ => None,
        }
    };
    if names("excludeTools").is_some_and(|excluded| excluded.iter().any(|e| e == tool)) {
        return false;
    }
    match names("includeTools") {
        None => true,
        Some(included) => included
            .iter()
            .any(|i| i == tool || i.strip_prefix(tool).is_some_and(|r| r.starts_with('('))),
    }
}

/// Whether the server is trusted (`trust: true`): its tools run without confirmation in
/// clients that ask.
pub fn trusted(config: &ServerConfig) -> bool {
    matches!(config.get("trust"), Some(Value::Bool(true)))
}

/// `mcp__<server>__<name>`.
pub fn qualified(server: &str, name: &str) -> String {
    format!("{}{name}", tool_prefix(server))
}

/// `catalog` as a session with `config` sees it: tools filtered, tool and prompt names
/// qualified; resources keep their URIs.
pub fn session_view(server: &str, config: &ServerConfig, catalog: &Catalog) -> Catalog {
    let prefix = tool_prefix(server);
    let tools = catalog
        .tools
        .iter()
        .filter(|t| tool_enabled(config, &t.name))
        .map(|t| {
            let mut tool = t.clone();
            tool.name = format!("{prefix}{}", t.name).into();
            tool
        })
        .collect();
    let prompts = catalog
        .prompts
        .iter()
        .map(|p| {
            let mut prompt = p.clone();
            prompt.name = format!("{prefix}{}", p.name);
            prompt
        })
        .collect();
    Catalog {
        tools,
        prompts,
        resources: catalog.resources.clone(),
    }
}

/// The server's own name for qualified `name`, if `name` is one of `catalog`'s tools visible
/// under `config`.
pub fn own_tool_name(
    server: &str,
    config: &ServerConfig,
    catalog: &Catalog,
    name: &str,
) -> Option<String> {
    let rest = name.strip_prefix(tool_prefix(server).as_str())?;
    catalog
        .tools
        .iter()
        .find(|t| t.name == rest && tool_enabled(config, rest))
        .map(|t| t.name.to_string())
}

/// The server's own name for qualified prompt `name`.
pub fn own_prompt_name(server: &str, catalog: &Catalog, name: &str) -> Option<String> {
    let rest = name.strip_prefix(tool_prefix(server).as_str())?;
    catalog
        .prompts
        .iter()
        .find(|p| p.name == rest)
        .map(|p| p.name.clone())
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcp_reconcile_kernel::json::parse;

    fn cfg(text: &str) -> ServerConfig {
        match parse(text) {
            Ok(Value::Object(o)) => ServerConfig(o),
            other => panic!("not an object: {other:?}"),
        }
    }

    #[test]
    fn filters_follow_the_typescript_cli() {
        let open = cfg(r#"{"command":"x"}"#);
        assert!(tool_enabled(&open, "a"));
        let include = cfg(r#"{"command":"x","includeTools":["a","run(ls)"]}"#);
        assert!(tool_enabled(&include, "a"));
        assert!(tool_enabled(&include, "run"));
        assert!(!tool_enabled(&include, "b"));
        assert!(!tool_enabled(&include, "ru"));
        let both = cfg(r#"{"command":"x","includeTools":["a"],"excludeTools":["a"]}"#);
        assert!(!tool_enabled(&both, "a"));
        assert_eq!(qualified("my server", "t"), "mcp__my_server__t");
        assert!(trusted(&cfg(r#"{"trust":true}"#)));
        assert!(!trusted(&open));
    }
}
