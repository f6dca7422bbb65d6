//! Names a server lists are checked before anyone sees them ([`drop_invalid_names`]): MCP tool
//! names (SEP-986, spec 2025-11-25) are 1–128 characters of `A-Z a-z 0-9 _ - .`, and strict
//! clients reject a whole `tools/list` over one bad name. A tool or prompt whose own name breaks
//! that rule, or whose qualified name `mcp__<server>__<name>` would be longer than 128
//! characters, is dropped with a warning. `/` (allowed by some drafts) is not accepted: no client
//! relies on it and several reject it.

use mcp_reconcile_kernel::gating::tool_prefix;

use super::Catalog;
use crate::display::safe;

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
            safe(&format!("{}{name}", tool_prefix(server)))
        )
    })
}

/// `name` for a log line: escaped, and cut to 60 characters with its length when longer.
pub(crate) fn shown_name(name: &str) -> String {
    let count = name.chars().count();
    if count <= 60 {
        return safe(name).into_owned();
    }
    let head: String = name.chars().take(60).collect();
    format!("{}… ({count} characters)", safe(&head))
}

/// `catalog` without the tools and prompts whose names cannot be offered ([`name_problem`]),
/// with one warning per dropped name (the first `MAX_NAME_WARNINGS` of a listing, then one
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
