//! Which restart an action of the plan is (issue 38): the host names the request, the
//! kernel's [`decide_restart`](mcp_reconcile_kernel::restart::decide_restart) decides the step
//! (make before break or stop first, forgiven or not), the pass executes it. [`Restarts`]
//! holds the requests made between passes (a manual reconnect, a reload's "clear crash
//! loops") until the next pass takes them.

use std::collections::HashSet;

use mcp_reconcile_kernel::plan::Action;
use mcp_reconcile_kernel::restart::RestartRequest;

/// The restart requests waiting for the next pass.
#[derive(Default)]
pub(super) struct Restarts {
    /// Servers a manual reconnect asked to restart.
    manual: Vec<String>,
    /// A reload asked to clear every crash loop.
    clear_crash_loops: bool,
}

impl Restarts {
    /// A manual reconnect of `names`.
    pub(super) fn reconnect(&mut self, names: impl IntoIterator<Item = String>) {
        self.manual.extend(names);
    }

    /// A reload: the next pass clears every crash loop.
    pub(super) fn clear_crash_loops(&mut self) {
        self.clear_crash_loops = true;
    }

    /// Whether the pass taking the requests clears every crash loop (asked once).
    pub(super) fn take_clear_crash_loops(&mut self) -> bool {
        std::mem::take(&mut self.clear_crash_loops)
    }

    /// The servers a manual reconnect asked to restart, taken by the pass.
    pub(super) fn take_manual(&mut self) -> HashSet<String> {
        std::mem::take(&mut self.manual).into_iter().collect()
    }
}

/// Why `action` starts its server again, if it does: a manual reconnect (`manual`), a
/// dev-mode source change (`sources_changed`: a reconnect to the same entry, or a retry), a
/// config edit (a reconnect) or a due retry.
pub(super) fn request<'a>(
    action: &'a Action,
    manual: &HashSet<String>,
    sources_changed: &[(String, String)],
) -> Option<(&'a str, RestartRequest)> {
    let sources = |name: &str| sources_changed.iter().any(|(server, _)| server == name);
    let request = match action {
        Action::Retry { name, .. } if manual.contains(name) => RestartRequest::ManualReconnect,
        Action::Reconnect { name, changed, .. } if changed.is_empty() && sources(name) => {
            RestartRequest::SourcesChanged
        }
        Action::Retry { name, .. } if sources(name) => RestartRequest::SourcesChanged,
        Action::Reconnect { .. } => RestartRequest::ConfigEdited,
        Action::Retry { .. } => RestartRequest::RetryDue,
        _ => return None,
    };
    Some((action.name()?, request))
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcp_reconcile_kernel::identity::connection_id;
    use mcp_reconcile_kernel::ServerConfig;

    fn id() -> mcp_reconcile_kernel::ConnectionId {
        let config = ServerConfig::from_json(r#"{"command":"srv"}"#).expect("config");
        connection_id("a", &config).expect("id")
    }

    /// Each way a plan starts a server again is named for the kernel's one rule.
    #[test]
    fn each_restart_of_a_plan_is_named_for_the_kernel() {
        let reconnect = |changed: Vec<String>| Action::Reconnect {
            name: "a".into(),
            from: id(),
            to: id(),
            changed,
        };
        let retry = Action::Retry {
            name: "a".into(),
            attempt: 1,
        };
        let manual: HashSet<String> = ["a".to_owned()].into();
        let sources = [("a".to_owned(), "src/x.ts".to_owned())];
        let none = HashSet::new();
        let cases = [
            (
                reconnect(vec!["command".into()]),
                &none,
                &sources[..0],
                Some(RestartRequest::ConfigEdited),
            ),
            (
                reconnect(vec!["command".into()]),
                &none,
                &sources[..],
                Some(RestartRequest::ConfigEdited),
            ),
            (
                reconnect(Vec::new()),
                &none,
                &sources[..],
                Some(RestartRequest::SourcesChanged),
            ),
            (
                retry.clone(),
                &manual,
                &sources[..],
                Some(RestartRequest::ManualReconnect),
            ),
            (
                retry.clone(),
                &none,
                &sources[..],
                Some(RestartRequest::SourcesChanged),
            ),
            (
                retry.clone(),
                &none,
                &sources[..0],
                Some(RestartRequest::RetryDue),
            ),
            (
                Action::Keep { name: "a".into() },
                &manual,
                &sources[..],
                None,
            ),
        ];
        for (action, manual, sources, expected) in cases {
            let got = request(&action, manual, sources).map(|(_, request)| request);
            assert_eq!(got, expected, "{action:?}");
        }
    }
}
