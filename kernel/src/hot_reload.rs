//! The pure hot-reload decision (SPEC §7): what a host runs when the
//! debounced reload fires.
//!
//! Given the state the session last adopted and freshly read inputs, it
//! computes the next servers and gating, whether anything MCP-relevant
//! changed (only then does the host reconcile and adopt `next`), which
//! servers the user should be asked about, and the names removed during the
//! session (so a call to one of their tools can say "removed").

use crate::approvals::{ApprovalState, Approvals};
use crate::config::Servers;
#[cfg(doc)]
use crate::gating::gating_with_pending;
use crate::gating::{gating_equal, servers_equal_typed, Gating};
use crate::json::{DeepEqualError, Value};
use crate::sources::{assemble, Layer};

/// What the session adopted at its last reconcile.
#[derive(Clone, Debug, Default, PartialEq)]
#[cfg_attr(feature = "ts", derive(ts_rs::TS), ts(rename = "ReloadState"))]
pub struct Previous {
    /// The server map as adopted (compared as the TypeScript host compares
    /// it, so any JSON value; `null` equals `{}`).
    #[cfg_attr(feature = "ts", ts(as = "Option<Servers>", optional = nullable))]
    pub servers: Value,
    /// The gating in force.
    pub gating: Gating,
    /// Names removed during the session, when the host tracks them.
    #[cfg_attr(feature = "ts", ts(optional = nullable))]
    pub removed: Option<Vec<String>>,
}

/// The outcome of [`hot_reload`].
#[derive(Clone, Debug, PartialEq)]
pub struct HotReload {
    /// Servers or gating changed: reconcile and adopt `next`.
    pub reconcile: bool,
    /// The desired servers assembled from the new layers: what the session adopts
    /// (and plans against) when `reconcile` is set.
    pub servers: Servers,
    /// The gating computed for them.
    pub gating: Gating,
    /// `(previous.removed ∪ names that left) − names present`, in first-seen
    /// order; `None` when `previous.removed` was not given.
    pub removed: Option<Vec<String>>,
    /// Gated servers awaiting a decision that pass `cap`, `allowed` and
    /// `excluded`, in map order; empty in yolo.
    pub promptable: Vec<String>,
    /// Raise an approval-needed event: `reconcile && !yolo && promptable ≠ []`.
    pub approval_event: bool,
}

/// Decides a hot reload. `gating_for` computes the gating of the assembled
/// servers from their pending list (gated servers not approved under
/// `approvals` and `project_root`; `None` in yolo): the same function
/// start-up uses (SPEC §13.2), i.e. [`gating_with_pending`] with the host's
/// lists. Each gated server's approval state is read once, for the gating
/// and the prompt alike.
///
/// # Errors
/// [`DeepEqualError`] when comparing the server maps throws in the
/// TypeScript host (an own `valueOf`/`toString` member).
pub fn hot_reload(
    previous: &Previous,
    layers: &[Layer],
    gating_for: impl FnOnce(&Servers, Option<Vec<String>>) -> Gating,
    approvals: &Approvals,
    project_root: &str,
    yolo: bool,
) -> Result<HotReload, DeepEqualError> {
    let servers = assemble(layers).servers;
    let (pending, promptable) = approval_lists(&servers, approvals, project_root, yolo);
    let gating = gating_for(&servers, pending);
    let reconcile = !servers_equal_typed(Some(&previous.servers), &servers)?
        || !gating_equal(&previous.gating, &gating);
    let promptable: Vec<String> = promptable
        .into_iter()
        .filter(|name| gating.allows(name) && !gating.excludes(name) && !gating.blocks(name))
        .collect();
    let removed = previous.removed.as_ref().map(|before| {
        let left = previous
            .servers
            .as_object()
            .into_iter()
            .flat_map(|o| o.keys())
            .filter(|name| !servers.contains_key(name));
        let mut out: Vec<String> = Vec::new();
        for name in before.iter().chain(left) {
            if !servers.contains_key(name) && !out.contains(name) {
                out.push(name.clone());
            }
        }
        out
    });
    let approval_event = reconcile && !yolo && !promptable.is_empty();
    Ok(HotReload {
        reconcile,
        servers,
        gating,
        removed,
        promptable,
        approval_event,
    })
}

/// `(pending_gated, promptable)` of `servers` in one reading of each gated
/// server's approval state: `(None, [])` in yolo.
fn approval_lists(
    servers: &Servers,
    approvals: &Approvals,
    root: &str,
    yolo: bool,
) -> (Option<Vec<String>>, Vec<String>) {
    if yolo {
        return (None, Vec::new());
    }
    let (mut pending, mut promptable) = (Vec::new(), Vec::new());
    for (name, config) in servers.iter().filter(|(_, c)| c.is_gated()) {
        match approvals.state(root, name, config) {
            ApprovalState::Approved => {}
            ApprovalState::Rejected => pending.push(name.clone()),
            ApprovalState::Pending => {
                pending.push(name.clone());
                promptable.push(name.clone());
            }
        }
    }
    (Some(pending), promptable)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::json::parse;
    use crate::settings::McpLists;
    use crate::sources::LayerSource;

    fn layer(source: LayerSource, servers: &str) -> Layer {
        let servers =
            crate::config::servers_from_value(&parse(servers).expect("json")).expect("servers");
        Layer {
            source,
            servers,
            extension: None,
            from_workspace: false,
        }
    }

    fn decide(previous: &Previous, layers: &[Layer], yolo: bool) -> HotReload {
        let approvals = Approvals::empty();
        hot_reload(
            previous,
            layers,
            |_, pending| crate::gating::gating_with_pending(&McpLists::default(), None, pending),
            &approvals,
            "/r",
            yolo,
        )
        .expect("comparable")
    }

    #[test]
    fn unchanged_inputs_do_not_reconcile() {
        let layers = [layer(LayerSource::User, r#"{"a":{"command":"a"}}"#)];
        let previous = Previous {
            servers: parse(r#"{"a":{"command":"a"}}"#).expect("json"),
            gating: Gating::default(),
            removed: None,
        };
        let out = decide(&previous, &layers, false);
        assert!(!out.reconcile);
        assert!(!out.approval_event);
        assert_eq!(out.removed, None);
    }

    #[test]
    fn a_new_project_server_raises_one_approval_event() {
        let layers = [
            layer(LayerSource::User, r#"{"a":{"command":"a"}}"#),
            layer(LayerSource::Project, r#"{"p":{"command":"p"}}"#),
        ];
        let previous = Previous {
            servers: parse(r#"{"a":{"command":"a"}}"#).expect("json"),
            ..Previous::default()
        };
        let out = decide(&previous, &layers, false);
        assert!(out.reconcile);
        assert_eq!(out.promptable, ["p"]);
        assert!(out.approval_event);
        assert!(
            !decide(&previous, &layers, true).approval_event,
            "yolo never prompts"
        );
    }

    #[test]
    fn removed_names_accumulate_and_leave_when_re_added() {
        let previous = Previous {
            servers: parse(r#"{"a":{"command":"a"},"b":{"command":"b"}}"#).expect("json"),
            gating: Gating::default(),
            removed: Some(vec!["z".into(), "a".into()]),
        };
        let out = decide(
            &previous,
            &[layer(LayerSource::User, r#"{"a":{"command":"a"}}"#)],
            false,
        );
        assert_eq!(out.removed, Some(vec!["z".to_owned(), "b".to_owned()]));
    }
}
