//! How a server is started again: THE one place that decides it (issue 38).
//!
//! Whatever asks for a restart — the user (`reconnect NAME`, the gateway's reconnect tool), a
//! dev-mode source change, a failed connection whose backoff ended, an entry whose
//! identity-relevant fields changed (the plan's `reconnect`), a language server whose seed
//! fields changed (the LSP plan's `restart`) — the host hands the [`RestartRequest`] to
//! [`decide_restart`] and executes the [`RestartStep`] it gets: the session host, the shared
//! pool and the language servers alike, so one kind of restart never runs two ways.

use crate::json::{Object, Value};

/// Why a server is started again.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RestartRequest {
    /// The user asked for it (`mcp-reconcile reconnect`, the gateway's reconnect tool).
    ManualReconnect,
    /// Dev mode: sources the server runs changed; its entry did not.
    SourcesChanged,
    /// A failed connection's backoff ended (a retry on the timer).
    RetryDue,
    /// The entry's identity-relevant fields changed (the plan's `reconnect`).
    ConfigEdited,
    /// A language server's seed fields changed (the LSP plan's `restart`).
    LspSeedChanged,
}

/// In which order the old process goes and the new one comes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RestartOrder {
    /// The new process is started beside the running one, which serves until the new one is
    /// up (make before break).
    MakeBeforeBreak,
    /// The old process is stopped before the new one starts.
    StopFirst,
}

/// What the host does for one restart.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RestartStep {
    /// Make before break, or stop first.
    pub order: RestartOrder,
    /// Whether the failure count and crash-loop state are cleared before the start (the
    /// fix may be in what changed, or the user says so); a retry keeps them, so backoff and
    /// the crash-loop limit still apply.
    pub forgive: bool,
}

/// Decides how `request` restarts a server whose entry is `entry` (`None`: not known).
/// `full_restart` is a session that restarts everything on purpose (a benchmark baseline).
///
/// Make before break only where something changed under a working server (its entry, its
/// sources): the running process keeps serving until the new one is up. It is stopped first
/// when the entry says `"stopBeforeRestart": true` (a server that cannot run twice: a port,
/// a lock), for a retry (what ran has failed: nothing serves), for a manual reconnect (the
/// user restarts a server that misbehaves: it must not keep answering), for a language
/// server's new seed (its documents are opened again on the new process), and in a
/// full-restart session. Everything but a retry forgives past failures.
pub fn decide_restart(
    request: RestartRequest,
    entry: Option<&Object>,
    full_restart: bool,
) -> RestartStep {
    let opted_out = entry.is_some_and(stops_before_restart);
    let changed_under_a_working_server = matches!(
        request,
        RestartRequest::ConfigEdited | RestartRequest::SourcesChanged
    );
    let order = if changed_under_a_working_server && !opted_out && !full_restart {
        RestartOrder::MakeBeforeBreak
    } else {
        RestartOrder::StopFirst
    };
    RestartStep {
        order,
        forgive: request != RestartRequest::RetryDue,
    }
}

/// Whether the entry says `"stopBeforeRestart": true`.
fn stops_before_restart(entry: &Object) -> bool {
    matches!(entry.get("stopBeforeRestart"), Some(Value::Bool(true)))
}

#[cfg(test)]
mod tests {
    use super::RestartOrder::{MakeBeforeBreak, StopFirst};
    use super::RestartRequest::*;
    use super::*;

    fn entry(stop_before_restart: Option<bool>) -> Object {
        let mut object = Object::new();
        object.insert("command".into(), Value::from("server"));
        if let Some(flag) = stop_before_restart {
            object.insert("stopBeforeRestart".into(), Value::Bool(flag));
        }
        object
    }

    /// Every request × entry flag × full restart, and the step each one gets.
    #[test]
    fn each_restart_is_decided_by_one_table() {
        // (request, stopBeforeRestart, full restart) → (order, forgive)
        let table = [
            (ConfigEdited, None, false, MakeBeforeBreak, true),
            (ConfigEdited, Some(false), false, MakeBeforeBreak, true),
            (ConfigEdited, Some(true), false, StopFirst, true),
            (ConfigEdited, None, true, StopFirst, true),
            (SourcesChanged, None, false, MakeBeforeBreak, true),
            (SourcesChanged, Some(true), false, StopFirst, true),
            (SourcesChanged, None, true, StopFirst, true),
            (ManualReconnect, None, false, StopFirst, true),
            (ManualReconnect, Some(false), false, StopFirst, true),
            (ManualReconnect, Some(true), true, StopFirst, true),
            (RetryDue, None, false, StopFirst, false),
            (RetryDue, Some(true), false, StopFirst, false),
            (RetryDue, None, true, StopFirst, false),
            (LspSeedChanged, None, false, StopFirst, true),
            (LspSeedChanged, Some(false), true, StopFirst, true),
        ];
        for (request, flag, full, order, forgive) in table {
            let object = entry(flag);
            let step = decide_restart(request, Some(&object), full);
            assert_eq!(
                step,
                RestartStep { order, forgive },
                "{request:?} stopBeforeRestart={flag:?} full_restart={full}"
            );
        }
    }

    /// An unknown entry restarts as one without `stopBeforeRestart`.
    #[test]
    fn an_unknown_entry_restarts_as_a_plain_one() {
        for request in [ConfigEdited, SourcesChanged, ManualReconnect, RetryDue] {
            let plain = entry(None);
            assert_eq!(
                decide_restart(request, None, false),
                decide_restart(request, Some(&plain), false)
            );
        }
    }

    /// A `stopBeforeRestart` that is not `true` (a string, a number) does not opt out.
    #[test]
    fn only_a_true_stop_before_restart_opts_out() {
        let mut object = entry(None);
        object.insert("stopBeforeRestart".into(), Value::from("yes"));
        let step = decide_restart(ConfigEdited, Some(&object), false);
        assert_eq!(step.order, MakeBeforeBreak);
    }
}
