//! What a session sees of a server: its tools after the server's own `includeTools` /
//! `excludeTools`, under qualified names `mcp__<server>__<name>` (the kernel's
//! [`tool_prefix`]), plus its `trust` flag.
//!
//! Names a server lists are checked before anyone sees them ([`drop_invalid_names`]): MCP tool
//! names (SEP-986, spec 2025-11-25) are 1–128 characters of `A-Z a-z 0-9 _ - .`, and strict
//! clients reject a whole `tools/list` over one bad name. A tool or prompt whose own name breaks
//! that rule, or whose qualified name would be longer than 128 characters, is dropped with a
//! warning. `/` (allowed by some drafts) is not accepted: no client relies on it and several
//! reject it.
//!
//! A session-mode host applies these to its own connections; a pool session applies its own
//! config's fields to a shared connection, so two sessions with different filters share one
//! process and still see different tools.

use mcp_reconcile_kernel::gating::tool_prefix;
use mcp_reconcile_kernel::json::Value;
use mcp_reconcile_kernel::ServerConfig;

use crate::display::safe;
use crate::transport::Catalog;

/// The longest tool or prompt name MCP allows, own or qualified.
pub const MAX_NAME_LEN: usize = 128;

/// How many dropped names one listing warns about one by one; the rest are counted.
const MAX_NAME_WARNINGS: usize = 20;

/// Whether `name` is a valid MCP tool name: 1–[`MAX_NAME_LEN`] characters of
/// `A-Z a-z 0-9 _ - .`.
pub fn valid_name(name: &str) -> bool {
    (1..=MAX_NAME_LEN).contains(&name.len())
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'))
}

/// Why server `server`'s tool or prompt `name` cannot be offered, if it cannot: an invalid
/// name, or a qualified name `mcp__<server>__<name>` longer than [`MAX_NAME_LEN`].
pub fn name_problem(server: &str, name: &str) -> Option<String> {
    if !valid_name(name) {
        return Some(format!(
            "it is not a valid MCP name (1–{MAX_NAME_LEN} characters of A-Z a-z 0-9 _ - .)"
        ));
    }
    let qualified_len = tool_prefix(server).len() + name.len();
    (qualified_len > MAX_NAME_LEN).then(|| {
        format!(
            "its qualified name {} would be {qualified_len} characters, more than \
             {MAX_NAME_LEN} (shorten the server name)",
            safe(&qualified(server, name))
        )
    })
}

/// `name` for a log line: escaped, and cut to 60 characters with its length when longer.
fn shown_name(name: &str) -> String {
    let count = name.chars().count();
    if count <= 60 {
        return safe(name).into_owned();
    }
    let head: String = name.chars().take(60).collect();
    format!("{}… ({count} characters)", safe(&head))
}

/// `catalog` without the tools and prompts whose names cannot be offered ([`name_problem`]),
/// with one warning per dropped name (the first [`MAX_NAME_WARNINGS`] of a listing, then one
/// line with the count of the rest).
pub fn drop_invalid_names(server: &str, mut catalog: Catalog) -> Catalog {
    let mut dropped = 0usize;
    let mut check = |kind: &str, name: &str| -> bool {
        let Some(problem) = name_problem(server, name) else {
            return true;
        };
        dropped += 1;
        if dropped <= MAX_NAME_WARNINGS {
            tracing::warn!(
                server = %safe(server),
                "not offering {kind} \"{}\": {problem}; MCP clients would reject it",
                shown_name(name)
            );
        }
        false
    };
    catalog.tools.retain(|t| check("tool", &t.name));
    catalog.prompts.retain(|p| check("prompt", &p.name));
    if dropped > MAX_NAME_WARNINGS {
        tracing::warn!(
            server = %safe(server),
            "not offering {} more tools or prompts with invalid names",
            dropped - MAX_NAME_WARNINGS
        );
    }
    catalog
}

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

    #[test]
    fn invalid_and_too_long_names_are_dropped() {
        use crate::transport::{Prompt, Tool};
        let tool = |name: &str| Tool::new(name.to_owned(), "d", serde_json::Map::new());
        let long = "a".repeat(5000);
        let fits = "b".repeat(MAX_NAME_LEN - tool_prefix("srv").len());
        let too_long_qualified = "c".repeat(MAX_NAME_LEN - 5);
        let catalog = Catalog {
            tools: [
                "ok_tool-1.v2",
                "bad\u{1b}[2J",
                "",
                "with space",
                "slash/name",
                "ünï",
                &long,
                &fits,
                &too_long_qualified,
            ]
            .map(tool)
            .to_vec(),
            prompts: vec![
                Prompt::new("greet", None::<String>, None),
                Prompt::new("bad\nprompt", None::<String>, None),
            ],
            resources: Vec::new(),
        };
        let kept = drop_invalid_names("srv", catalog);
        let names: Vec<&str> = kept.tools.iter().map(|t| t.name.as_ref()).collect();
        assert_eq!(names, ["ok_tool-1.v2", fits.as_str()]);
        assert_eq!(qualified("srv", &fits).len(), MAX_NAME_LEN);
        let prompts: Vec<&str> = kept.prompts.iter().map(|p| p.name.as_str()).collect();
        assert_eq!(prompts, ["greet"]);
        assert!(
            name_problem("srv", &too_long_qualified).is_some_and(|p| p.contains("more than 128"))
        );
        assert!(shown_name(&long).ends_with("(5000 characters)"));
    }
}
