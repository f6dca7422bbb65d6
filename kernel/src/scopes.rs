//! `mcp.<key>` read over the settings scopes, the one way `mcp.share`, `mcp.pinTools` and
//! `mcp.lazy` read it: the default every entry gets is the value of the highest-precedence
//! scope that writes one the caller accepts, and a repository's workspace settings are kept
//! apart where they may only narrow or tighten (never set the default).

use crate::json::Value;
use crate::sources::LayerSource;

/// What the scopes write for one `mcp.<key>`, as the caller's `read` accepted it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Scoped<T> {
    /// The highest-precedence scope other than the workspace that writes an accepted value.
    pub default: Option<T>,
    /// Every accepted value the workspace settings write (the caller caps or floors with them).
    pub workspace: Vec<T>,
}

/// `mcp.<key>` over `scopes` (parsed settings objects tagged with their layer kind, in any
/// order); a value `read` does not accept is ignored, as if unset.
pub fn scoped<T>(
    scopes: &[(LayerSource, &Value)],
    key: &str,
    read: impl Fn(&Value) -> Option<T>,
) -> Scoped<T> {
    let mut ordered: Vec<&(LayerSource, &Value)> = scopes.iter().collect();
    // Highest precedence first.
    ordered.sort_by_key(|(source, _)| std::cmp::Reverse(*source));
    let accepted = |settings: &Value| mcp_member(settings, key).and_then(&read);
    let default = ordered
        .iter()
        .filter(|(source, _)| *source != LayerSource::Workspace)
        .find_map(|(_, settings)| accepted(settings));
    let workspace = ordered
        .iter()
        .filter(|(source, _)| *source == LayerSource::Workspace)
        .filter_map(|(_, settings)| accepted(settings))
        .collect();
    Scoped { default, workspace }
}

/// `settings.mcp[key]`, when there is one.
pub fn mcp_member<'a>(settings: &'a Value, key: &str) -> Option<&'a Value> {
    settings.as_object()?.get("mcp")?.as_object()?.get(key)
}
