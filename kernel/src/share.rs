//! Sharing scopes (issue 41): how widely one stdio server process may be shared between the
//! sessions of a per-user pool.
//!
//! * [`Share::Session`] — one process per session: no agent sees another session's in-memory
//!   state (a browser, a memory server's history). The default.
//! * [`Share::Project`] — shared by the sessions that would start it identically (same working
//!   directory and counted environment; a client's per-session ids do not count).
//! * [`Share::User`] — one process for every project of the user: a neutral working directory
//!   and no project-specific variables (the host decides which those are).
//!
//! An entry asks with `"share"`; the settings give a default with `mcp.share`. The workspace
//! settings are the repository's, so their `mcp.share` only narrows (like `mcp.allowed`), and an
//! entry the repository wrote (gated) never gets more than `project`: a repository's server
//! must not become one process shared with every other project of the user. An entry whose
//! `cwd` is relative runs inside its project, so it cannot be shared wider than `project`
//! either. `share` is not part of the connection id (it changes processes started afterwards,
//! like `stopBeforeRestart`); it is part of the approval hash, as every field of an entry is.
//!
//! The scope applies to stdio servers; remote connections keep the pool's own rule
//! (`pool_remote`), so [`effective_share`] has no scope for them.

use crate::config::{ServerConfig, Transport};
use crate::json::Value;
use crate::scopes::scoped;
use crate::sources::LayerSource;

/// How widely a server process is shared. Ordered from narrowest to widest.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub enum Share {
    /// One process per session.
    #[default]
    Session,
    /// One process per set of sessions that would start it identically.
    Project,
    /// One process for every project of the user.
    User,
}

impl Share {
    /// Reads `session`, `project` or `user`; anything else is no scope.
    pub fn parse(text: &str) -> Option<Share> {
        match text {
            "session" => Some(Share::Session),
            "project" => Some(Share::Project),
            "user" => Some(Share::User),
            _ => None,
        }
    }

    /// The scope as written in a config.
    pub fn as_str(self) -> &'static str {
        match self {
            Share::Session => "session",
            Share::Project => "project",
            Share::User => "user",
        }
    }
}

/// `mcp.share` over the settings scopes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct ShareSettings {
    /// The default for entries without `share`: the highest-precedence scope other than the
    /// workspace that writes a valid `mcp.share`, else [`Share::Session`].
    pub default: Share,
    /// The workspace settings' `mcp.share`: a cap on every server (it only narrows).
    pub workspace_cap: Option<Share>,
}

/// Reads `mcp.share` from the settings scopes (parsed settings objects tagged with their layer
/// kind, in any order). A value that is not one of the three scopes is ignored.
pub fn share_settings(scopes: &[(LayerSource, &Value)]) -> ShareSettings {
    let written = scoped(scopes, "share", |v| Share::parse(v.as_str()?));
    ShareSettings {
        default: written.default.unwrap_or_default(),
        workspace_cap: written.workspace.into_iter().min(),
    }
}

/// The scope `config`'s process is shared in: its own `share` (else the settings' default),
/// capped at `project` for an entry the repository wrote or one with a relative `cwd`, and at
/// the workspace's `mcp.share`. `None` for a transport other than stdio (remote connections
/// keep the pool's own rule).
pub fn effective_share(config: &ServerConfig, settings: &ShareSettings) -> Option<Share> {
    if config.transport() != Transport::Stdio {
        return None;
    }
    let asked = config
        .str_field("share")
        .and_then(Share::parse)
        .unwrap_or(settings.default);
    let relative_cwd = config
        .str_field("cwd")
        .is_some_and(|cwd| !cwd.is_empty() && !cwd.starts_with('/'));
    let mut share = asked;
    if config.is_gated() || relative_cwd {
        share = share.min(Share::Project);
    }
    if let Some(cap) = settings.workspace_cap {
        share = share.min(cap);
    }
    Some(share)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::parse;

    fn cfg(text: &str) -> ServerConfig {
        ServerConfig::from_json(text).expect("config")
    }

    fn settings(scopes: &[(LayerSource, &str)]) -> ShareSettings {
        let values: Vec<(LayerSource, Value)> = scopes
            .iter()
            .map(|(source, text)| (*source, parse(text).expect("json")))
            .collect();
        let refs: Vec<(LayerSource, &Value)> = values.iter().map(|(s, v)| (*s, v)).collect();
        share_settings(&refs)
    }

    #[test]
    fn the_default_is_one_process_per_session() {
        let none = settings(&[]);
        assert_eq!(none.default, Share::Session);
        assert_eq!(
            effective_share(&cfg(r#"{"command":"x"}"#), &none),
            Some(Share::Session)
        );
        // An unknown value is no value.
        assert_eq!(
            effective_share(&cfg(r#"{"command":"x","share":"everyone"}"#), &none),
            Some(Share::Session)
        );
    }

    #[test]
    fn the_highest_settings_scope_but_the_workspace_sets_the_default() {
        let s = settings(&[
            (LayerSource::System, r#"{"mcp":{"share":"project"}}"#),
            (LayerSource::User, r#"{"mcp":{"share":"user"}}"#),
            (
                LayerSource::SystemDefaults,
                r#"{"mcp":{"share":"session"}}"#,
            ),
        ]);
        assert_eq!(s.default, Share::Project);
        let s = settings(&[
            (LayerSource::User, r#"{"mcp":{"share":"user"}}"#),
            (LayerSource::System, r#"{"mcp":{"share":7}}"#),
        ]);
        assert_eq!(s.default, Share::User);
        assert_eq!(s.workspace_cap, None);
    }

    #[test]
    fn a_workspace_share_only_narrows() {
        let user_wide = r#"{"mcp":{"share":"user"}}"#;
        let s = settings(&[
            (LayerSource::User, user_wide),
            (LayerSource::Workspace, r#"{"mcp":{"share":"session"}}"#),
        ]);
        assert_eq!(s.default, Share::User);
        let own = cfg(r#"{"command":"x","share":"user"}"#);
        assert_eq!(effective_share(&own, &s), Some(Share::Session));
        // Asking wider than the user's default widens nothing.
        let s = settings(&[(LayerSource::Workspace, user_wide)]);
        assert_eq!(s.default, Share::Session);
        assert_eq!(
            effective_share(&cfg(r#"{"command":"x"}"#), &s),
            Some(Share::Session)
        );
    }

    #[test]
    fn a_repositorys_entry_is_never_shared_wider_than_its_project() {
        let wide = settings(&[(LayerSource::User, r#"{"mcp":{"share":"user"}}"#)]);
        for scope in ["project", "workspace"] {
            let entry = cfg(&format!(
                r#"{{"command":"x","share":"user","scope":"{scope}"}}"#
            ));
            assert_eq!(effective_share(&entry, &wide), Some(Share::Project));
            let plain = cfg(&format!(r#"{{"command":"x","scope":"{scope}"}}"#));
            assert_eq!(effective_share(&plain, &wide), Some(Share::Project));
        }
        let narrow = cfg(r#"{"command":"x","share":"session","scope":"project"}"#);
        assert_eq!(effective_share(&narrow, &wide), Some(Share::Session));
    }

    #[test]
    fn a_relative_cwd_stays_in_its_project() {
        let none = settings(&[]);
        let relative = cfg(r#"{"command":"x","share":"user","cwd":"srv"}"#);
        assert_eq!(effective_share(&relative, &none), Some(Share::Project));
        let absolute = cfg(r#"{"command":"x","share":"user","cwd":"/srv"}"#);
        assert_eq!(effective_share(&absolute, &none), Some(Share::User));
    }

    #[test]
    fn remote_connections_have_no_scope() {
        let wide = settings(&[(LayerSource::User, r#"{"mcp":{"share":"user"}}"#)]);
        let remote = cfg(r#"{"httpUrl":"https://mcp.example/mcp","share":"user"}"#);
        assert_eq!(effective_share(&remote, &wide), None);
    }

    #[test]
    fn share_is_not_part_of_the_connection_id_but_of_the_approval_hash() {
        use crate::identity::{approval_hash, connection_id};
        let one = cfg(r#"{"command":"x","share":"project"}"#);
        let two = cfg(r#"{"command":"x","share":"user"}"#);
        assert_eq!(connection_id("a", &one), connection_id("a", &two));
        assert_ne!(approval_hash(&one), approval_hash(&two));
    }
}
