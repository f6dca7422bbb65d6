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

use crate::transport::Catalog;

pub use crate::transport::names::{drop_invalid_names, name_problem, valid_name, MAX_NAME_LEN};

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
        resource_templates: catalog.resource_templates.clone(),
        skills: catalog.skills.clone(),
        digests: std::sync::OnceLock::new(),
    }
}

/// How a catalog serves a resource URI.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum ResourceMatch {
    /// Not at all.
    None,
    /// By one of its resource templates.
    Template,
    /// Listed as it is.
    Exact,
}

/// Where a read of a resource URI goes among `candidates` (in server order: how each serves the
/// URI ([`resource_match`]), whether its entry is project-controlled, and what the caller needs
/// of it): the first server that lists the URI, else the first whose template matches it —
/// except that a project-controlled server's listing never captures a read a template of one of
/// the user's own servers matches: that template's owner gets it. Approval lets a project
/// server run; it does not give it another server's namespace.
pub fn pick_resource<T>(
    candidates: impl IntoIterator<Item = (ResourceMatch, bool, T)>,
) -> Option<T> {
    let mut list: Vec<(ResourceMatch, bool, T)> = candidates
        .into_iter()
        .filter(|(matched, _, _)| *matched != ResourceMatch::None)
        .collect();
    let exact = list.iter().position(|c| c.0 == ResourceMatch::Exact);
    let template = list.iter().position(|c| c.0 == ResourceMatch::Template);
    let users_template = list
        .iter()
        .position(|c| c.0 == ResourceMatch::Template && !c.1);
    let pick = match (exact, users_template) {
        (Some(listed), Some(users)) if list[listed].1 => {
            tracing::info!(
                "a resource a project server lists goes to the user's server whose template \
                 matches it"
            );
            users
        }
        (Some(listed), _) => listed,
        (None, _) => template?,
    };
    Some(list.swap_remove(pick).2)
}

/// How `catalog` serves `uri`: a listed resource beats a template (a router prefers a server
/// that lists the URI over one whose template would produce it).
pub fn resource_match(catalog: &Catalog, uri: &str) -> ResourceMatch {
    if catalog.resources.iter().any(|r| r.uri == uri) || crate::skills::serves_file(catalog, uri) {
        ResourceMatch::Exact
    } else if catalog
        .resource_templates
        .iter()
        .any(|t| template_matches(&t.uri_template, uri))
    {
        ResourceMatch::Template
    } else {
        ResourceMatch::None
    }
}

/// Whether `catalog` lists the resource template `template` (its `uriTemplate`, as listed):
/// the server a completion of that template's arguments goes to.
pub fn lists_template(catalog: &Catalog, template: &str) -> bool {
    catalog
        .resource_templates
        .iter()
        .any(|t| t.uri_template == template)
}

/// Whether `uri` is an expansion of the RFC 6570 `template`: a simple `{var}` (or `{.x}`,
/// `{;x}`) stands for one or more characters other than `/ ? #`, a `{+var}` or `{#var}` for any
/// one or more, and a `{?x}` / `{&x}` for an optional query part. Bounded: a template of more than
/// 32 parts or a URI over 4096 bytes never matches.
pub fn template_matches(template: &str, uri: &str) -> bool {
    #[derive(Clone, Copy)]
    enum Part<'a> {
        Literal(&'a str),
        Segment,
        Any,
        Query,
    }
    let mut parts = Vec::new();
    let mut rest = template;
    while !rest.is_empty() {
        match rest.find('{') {
            Some(0) => {
                let Some(end) = rest.find('}') else {
                    return false;
                };
                parts.push(match rest[1..end].chars().next() {
                    Some('+' | '#') => Part::Any,
                    Some('?' | '&') => Part::Query,
                    _ => Part::Segment,
                });
                rest = &rest[end + 1..];
            }
            Some(at) => {
                parts.push(Part::Literal(&rest[..at]));
                rest = &rest[at..];
            }
            None => {
                parts.push(Part::Literal(rest));
                rest = "";
            }
        }
    }
    if parts.len() > 32 || uri.len() > 4096 {
        return false;
    }
    // The positions of `uri` each prefix of the template can end at: linear per part.
    let bytes = uri.as_bytes();
    let len = uri.len();
    let mut at = vec![false; len + 1];
    at[0] = true;
    for part in &parts {
        let mut next = vec![false; len + 1];
        match part {
            Part::Literal(text) => {
                for pos in (0..=len).filter(|&p| at[p]) {
                    if uri[pos..].starts_with(text) {
                        next[pos + text.len()] = true;
                    }
                }
            }
            Part::Any => {
                if let Some(first) = (0..=len).find(|&p| at[p]) {
                    next[first + 1..].iter_mut().for_each(|n| *n = true);
                }
            }
            Part::Query => {
                next.clone_from(&at);
                if let Some(first) = (0..len).find(|&p| at[p] && matches!(bytes[p], b'?' | b'&')) {
                    next[first + 1..].iter_mut().for_each(|n| *n = true);
                }
            }
            Part::Segment => {
                let mut end = 0;
                for pos in (0..len).filter(|&p| at[p]) {
                    end = end.max(pos + 1);
                    while end <= len && !matches!(bytes[end - 1], b'/' | b'?' | b'#') {
                        next[end] = true;
                        end += 1;
                    }
                }
            }
        }
        // Only whole characters: a position inside a UTF-8 sequence is no boundary.
        for (pos, reached) in next.iter_mut().enumerate() {
            *reached &= uri.is_char_boundary(pos);
        }
        at = next;
    }
    at[len]
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
    use crate::transport::names::shown_name;
    use mcp_reconcile_kernel::json::parse;

    fn cfg(text: &str) -> ServerConfig {
        match parse(text) {
            Ok(Value::Object(o)) => ServerConfig::new(o),
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
            ..Catalog::default()
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

    #[test]
    fn a_uri_matches_the_templates_it_expands() {
        let yes = [
            ("test://template/{id}/data", "test://template/42/data"),
            ("file:///{+path}", "file:///a/b/c.txt"),
            ("db://{table}{?limit}", "db://users"),
            ("db://{table}{?limit}", "db://users?limit=5"),
            ("x://{a}-{b}", "x://1-2-3"),
            ("u://{name}", "u://ünïcode"),
        ];
        for (template, uri) in yes {
            assert!(template_matches(template, uri), "{template} {uri}");
        }
        let no = [
            ("test://template/{id}/data", "test://template//data"),
            ("test://template/{id}/data", "test://template/4/2/data"),
            ("test://template/{id}/data", "test://template/42/data/more"),
            ("file:///{+path}", "file:///"),
            ("a://{x", "a://y"),
            ("exact://thing", "exact://thing2"),
        ];
        for (template, uri) in no {
            assert!(!template_matches(template, uri), "{template} {uri}");
        }
        // Many adjacent variables over a long URI stay linear (and match).
        let template = "t://".to_owned() + &"{v}".repeat(31);
        assert!(template_matches(
            &template,
            &("t://".to_owned() + &"a".repeat(4000))
        ));
    }
}
