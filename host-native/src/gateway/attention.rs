//! What needs a person's attention, said through MCP itself (issue 25). A client such as
//! Claude Code shows "✔ Connected" with no tools and never shows `serve`'s stderr, so a server
//! that waits for approval, a broken settings file or a failing server would go unnoticed.
//!
//! Three channels, all from one level-triggered reading of the session's status (never from
//! the event that woke the gateway):
//! * the `initialize` (and `server/discover`) result's `instructions` end with a one-line
//!   summary of what needs attention then — read after the start pass, so a server that failed
//!   to start is in it;
//! * while anything needs attention the tool list has [`STATUS_TOOL`](super::STATUS_TOOL): its
//!   description is that summary, its call returns the full status ([`status_text`]: every server, its state and
//!   reason, and what to do). Whenever the summary changes (the tool comes, changes or goes)
//!   clients get `notifications/tools/list_changed`, and 2026-07-28 clients the same change on
//!   their listen streams;
//! * a problem that was not there at the previous reading goes to every initialized client as a
//!   `notifications/message` at level `warning` (logger `mcp-reconcile`), unless its
//!   `logging/setLevel` asked for `error` or above. A 2026-07-28 client has no log channel
//!   outside a call (SEP-2577): it has the instructions and the tool.
//!
//! What needs attention: a gated server or language server waiting for approval; a server
//! whose tools or prompts pinning withholds (changed since approved, issue 40); one that is
//! failing (backing off, retrying after a failure, in a crash loop, or wanting authorization);
//! every input problem `status` lists (a broken settings file, a damaged approvals file, …).
//! Not a rejected server (a person decided), not one off by policy, not one still connecting
//! for the first time.
//!
//! Everything is read from [`StatusReport`], whose errors come redacted from the host (no env
//! or header value, no URL secret: `crate::redact`), so no secret is in it. Names, paths and
//! errors come from a repository's files and its servers: each goes through
//! [`display::safe`](crate::display::safe) and is shortened before it is written (`text`),
//! so nothing can draw on a terminal or flood a client's context.

use std::sync::{Arc, Mutex, PoisonError};

#[allow(deprecated)]
use rmcp::model::{LoggingLevel, LoggingMessageNotificationParam};
use rmcp::{Peer, RoleServer};

use super::Gateway;
use crate::host::{CatalogChange, State, StatusReport};
use crate::session::Session;
use mcp_reconcile_kernel::Reason;

mod text;
pub(super) use text::{command, status_text};

/// The logger of the gateway's own log messages.
const LOGGER: &str = "mcp-reconcile";

/// One thing that needs attention; two readings compare them to find what is new.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) enum Problem {
    /// A gated server (or language server) without a decision for its current entry.
    Pending { name: String, lsp: bool },
    /// A server that is failing; `reason` only when it says more than "retried on its own"
    /// (a crash loop, or authorization wanted), so a retry that fails again is not new.
    Failing {
        name: String,
        lsp: bool,
        reason: Option<Reason>,
    },
    /// A server's tools or prompts withheld because they changed since they were approved
    /// (issue 40), by the server's own names.
    Withheld { name: String, items: Vec<String> },
    /// An input problem as `status` shows it (`file: message`).
    Input(String),
}

/// What needs attention in one reading of the session, in settings order.
#[derive(Clone, Debug, Default)]
pub(super) struct Attention {
    problems: Vec<Problem>,
    /// The project directory, for the commands a person runs.
    project: String,
}

impl Attention {
    /// What needs attention in `report`; `only` narrows it to one server (`--passthrough`:
    /// its client sees no other, and no language tools), input problems included.
    pub(super) fn of(report: &StatusReport, only: Option<&str>) -> Attention {
        let offered = |name: &str| only.is_none_or(|only| only == name);
        let mut problems = Vec::new();
        for s in report.servers.iter().filter(|s| offered(&s.name)) {
            problems.extend(problem(&s.name, false, s.state, s.reason, s.attempts));
            if !s.withheld.is_empty() {
                problems.push(Problem::Withheld {
                    name: s.name.clone(),
                    items: s.withheld.clone(),
                });
            }
        }
        if only.is_none() {
            for s in &report.language_servers {
                problems.extend(problem(&s.name, true, s.state, s.reason, s.attempts));
            }
        }
        problems.extend(report.errors.iter().cloned().map(Problem::Input));
        Attention {
            problems,
            project: report.project_root.clone(),
        }
    }

    /// The one line that says what needs attention and what to do; `None` when nothing does.
    pub(super) fn summary(&self) -> Option<String> {
        self.describe(&self.problems)
    }
}

/// The problem a server (or language server) in `state` is, if any.
fn problem(
    name: &str,
    lsp: bool,
    state: State,
    reason: Option<Reason>,
    attempts: u32,
) -> Option<Problem> {
    let name = name.to_owned();
    match state {
        State::Skipped if reason == Some(Reason::PendingApproval) => {
            Some(Problem::Pending { name, lsp })
        }
        // A retry after a failure is still the same failure.
        State::Failed | State::Connecting if state == State::Failed || attempts > 0 => {
            Some(Problem::Failing {
                name,
                lsp,
                reason: reason.filter(|r| matches!(r, Reason::CrashLoop | Reason::NeedsAuth)),
            })
        }
        _ => None,
    }
}

/// What the gateway last told its clients, and the log level each asked for.
#[derive(Default)]
pub(super) struct Notices(Mutex<Seen>);

#[derive(Default)]
struct Seen {
    /// The summary of the last reading (the status tool's description).
    summary: Option<String>,
    problems: Vec<Problem>,
    /// Each client's last `logging/setLevel`.
    #[allow(deprecated)]
    levels: Vec<(Peer<RoleServer>, LoggingLevel)>,
}

impl Notices {
    /// Takes `attention` as the current reading: whether the summary changed, and the problems
    /// that were not in the previous reading.
    fn update(&self, attention: &Attention) -> (bool, Vec<Problem>) {
        let mut seen = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        let summary = attention.summary();
        let changed = seen.summary != summary;
        let new = attention
            .problems
            .iter()
            .filter(|p| !seen.problems.contains(p))
            .cloned()
            .collect();
        seen.summary = summary;
        seen.problems = attention.problems.clone();
        (changed, new)
    }

    /// Keeps the level `client` asked for (the gateway's own messages honour it too).
    #[allow(deprecated)]
    pub(super) fn set_level(&self, client: &Peer<RoleServer>, level: LoggingLevel) {
        let mut seen = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        seen.levels
            .retain(|(peer, _)| !peer.is_transport_closed() && !same_client(peer, client));
        seen.levels.push((client.clone(), level));
    }

    /// Whether `client` lets a warning through: yes until it sets a level above `warning`.
    #[allow(deprecated)]
    fn wants_warnings(&self, client: &Peer<RoleServer>) -> bool {
        let seen = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        seen.levels
            .iter()
            .find(|(peer, _)| same_client(peer, client))
            .is_none_or(|(_, level)| *level as u8 <= LoggingLevel::Warning as u8)
    }
}

/// Whether two handles are of the same client: one connection's handles share the
/// `initialize` parameters they were given.
fn same_client(a: &Peer<RoleServer>, b: &Peer<RoleServer>) -> bool {
    match (a.peer_info(), b.peer_info()) {
        (Some(a), Some(b)) => Arc::ptr_eq(&a, &b),
        _ => false,
    }
}

impl<S: Session> Gateway<S> {
    /// Reads the session's status and tells the clients what changed since the last reading
    /// (see the module docs); what needs attention now. `None` when the session is gone.
    pub(super) async fn refresh_attention(&self) -> Option<Attention> {
        let report = self.session.status().await.ok()?;
        let attention = Attention::of(&report, self.only.as_deref());
        let (changed, new) = self.notices.update(&attention);
        tracing::debug!(
            changed,
            new = new.len(),
            clients = self.live_clients().len(),
            "attention read"
        );
        if changed {
            self.tell(CatalogChange {
                tools: true,
                ..CatalogChange::default()
            })
            .await;
        }
        if let Some(text) = attention.describe(&new) {
            self.warn(text).await;
        }
        Some(attention)
    }

    /// `instructions` for a client that starts now: `base` and, after the start pass, the
    /// summary of what needs attention.
    pub(super) async fn instructions(&self, base: Option<String>) -> Option<String> {
        // The start pass first, at most the session's start grace: a server that failed to
        // start by then is in the summary; a later failure comes as the status tool.
        let _ = self.session.catalog().await;
        let summary = self.refresh_attention().await.and_then(|a| a.summary());
        match (base, summary) {
            (Some(base), Some(summary)) => Some(format!("{base}\n\n{summary}")),
            (base, summary) => base.or(summary),
        }
    }

    /// `text` as a warning to every initialized client that lets warnings through.
    #[allow(deprecated)]
    async fn warn(&self, text: String) {
        let message = LoggingMessageNotificationParam::new(
            LoggingLevel::Warning,
            serde_json::Value::String(format!("mcp-reconcile: {text}")),
        )
        .with_logger(LOGGER);
        for client in self.live_clients() {
            if self.notices.wants_warnings(&client) {
                let _ = client.notify_logging_message(message.clone()).await;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::host::ServerStatus;
    use mcp_reconcile_kernel::Transport;

    pub(crate) fn server(name: &str, state: State, reason: Option<Reason>) -> ServerStatus {
        ServerStatus {
            name: name.into(),
            state,
            reason,
            approval: None,
            transport: Transport::Stdio,
            tools: 1,
            prompts: 0,
            resources: 0,
            pid: None,
            protocol: None,
            spawns: 0,
            share: None,
            sessions: None,
            lazy: false,
            attempts: u32::from(state == State::Failed),
            last_error: (state == State::Failed).then(|| "exited\u{1b}[2J".into()),
            retry_in_ms: None,
            withheld: Vec::new(),
        }
    }

    #[test]
    fn nothing_needs_attention_when_all_is_well_or_decided() {
        let report = StatusReport {
            servers: vec![
                server("ok", State::Connected, None),
                server("no", State::Skipped, Some(Reason::Rejected)),
                server("x", State::Skipped, Some(Reason::NotAllowed)),
            ],
            ..StatusReport::default()
        };
        assert_eq!(Attention::of(&report, None).summary(), None);
    }

    #[test]
    fn a_retry_is_not_a_new_problem_but_a_crash_loop_is() {
        let notices = Notices::default();
        let failing = |state, reason, attempts| StatusReport {
            servers: vec![ServerStatus {
                attempts,
                ..server("bad", state, reason)
            }],
            ..StatusReport::default()
        };
        let first = notices.update(&Attention::of(
            &failing(State::Failed, Some(Reason::BackingOff), 1),
            None,
        ));
        assert!(first.0 && first.1.len() == 1);
        let retrying = notices.update(&Attention::of(&failing(State::Connecting, None, 1), None));
        assert_eq!(retrying, (false, Vec::new()));
        let looping = notices.update(&Attention::of(
            &failing(State::Failed, Some(Reason::CrashLoop), 8),
            None,
        ));
        assert!(looping.0 && looping.1.len() == 1, "{looping:?}");
        let healed = notices.update(&Attention::of(&failing(State::Connected, None, 0), None));
        assert_eq!(healed, (true, Vec::new()));
    }
}
