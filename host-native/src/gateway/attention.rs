//! What needs a person's attention, said through MCP itself (issue 25). A client such as
//! Claude Code shows "✔ Connected" with no tools and never shows `serve`'s stderr, so a server
//! that waits for approval, a broken settings file or a failing server would go unnoticed.
//!
//! Three channels, all from one level-triggered reading of the session's status (never from
//! the event that woke the gateway):
//! * the `initialize` (and `server/discover`) result's `instructions` end with a one-line
//!   summary of what needs attention then — read after the start pass, so a server that failed
//!   to start is in it;
//! * while anything needs attention the tool list has [`STATUS_TOOL`]: its description is that
//!   summary, its call returns the full status ([`status_text`]: every server, its state and
//!   reason, and what to do). Whenever the summary changes (the tool comes, changes or goes)
//!   clients get `notifications/tools/list_changed`, and 2026-07-28 clients the same change on
//!   their listen streams;
//! * a problem that was not there at the previous reading goes to every initialized client as a
//!   `notifications/message` at level `warning` (logger `mcp-reconcile`), unless its
//!   `logging/setLevel` asked for `error` or above. A 2026-07-28 client has no log channel
//!   outside a call (SEP-2577): it has the instructions and the tool.
//!
//! What needs attention: a gated server or language server waiting for approval; one that is
//! failing (backing off, retrying after a failure, in a crash loop, or wanting authorization);
//! every input problem `status` lists (a broken settings file, a damaged approvals file, …).
//! Not a rejected server (a person decided), not one off by policy, not one still connecting
//! for the first time.
//!
//! Everything is read from [`StatusReport`], whose errors come redacted from the host (no env
//! or header value, no URL secret: `crate::redact`), so no secret is in it. Names, paths and
//! errors come from a repository's files and its servers: each goes through
//! [`display::safe`] and is shortened before it is written, so nothing can draw on a terminal
//! or flood a client's context.

use std::fmt::Write as _;
use std::sync::{Arc, Mutex, PoisonError};

#[allow(deprecated)]
use rmcp::model::{LoggingLevel, LoggingMessageNotificationParam};
use rmcp::{Peer, RoleServer};

use super::Gateway;
use crate::display::{decide_command, safe};
use crate::host::{CatalogChange, ServerStatus, State, StatusReport};
use crate::session::Session;
use mcp_reconcile_kernel::approvals::ApprovalState;
use mcp_reconcile_kernel::Reason;

/// The tool that says what needs attention (and, with `serve --manage-tools`, always lists
/// every server). Never a server's name: those are qualified `mcp__<server>__…`.
pub const STATUS_TOOL: &str = "mcp_reconcile_status";

/// The logger of the gateway's own log messages.
const LOGGER: &str = "mcp-reconcile";

/// Names listed in a summary; the rest are counted.
const NAMES_SHOWN: usize = 3;
/// The longest name, path or error a summary shows (characters, after escaping).
const SHORT: usize = 160;
/// The longest error the full status shows for one server or input.
const LONG: usize = 600;

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

    /// The summary of `problems` (some of this reading's).
    fn describe(&self, problems: &[Problem]) -> Option<String> {
        if problems.is_empty() {
            return None;
        }
        let mut parts = Vec::new();
        let pending: Vec<(&str, bool)> = problems
            .iter()
            .filter_map(|p| match p {
                Problem::Pending { name, lsp } => Some((name.as_str(), *lsp)),
                _ => None,
            })
            .collect();
        if let Some(&(name, lsp)) = pending.first() {
            let project = short(&self.project, SHORT);
            let (them, run) = match pending.len() {
                1 => (
                    "it",
                    format!("`{}` in {project}", approve_command(name, lsp)),
                ),
                _ => (
                    "them",
                    format!("`mcp-reconcile approve NAME` in {project} for each"),
                ),
            };
            parts.push(format!(
                "{} {} for the user's approval ({}): ask them to run {run} — no tool can \
                 approve {them}",
                count(pending.len(), "server"),
                if pending.len() == 1 { "waits" } else { "wait" },
                names(pending.iter().map(|(name, _)| *name)),
            ));
        }
        let failing: Vec<String> = problems
            .iter()
            .filter_map(|p| match p {
                Problem::Failing { name, reason, .. } => Some(match reason {
                    Some(Reason::CrashLoop) => format!("{} (crash loop)", quoted(name)),
                    Some(Reason::NeedsAuth) => format!(
                        "{} (wants authorization: `{}`)",
                        quoted(name),
                        decide_command("auth", name)
                    ),
                    _ => quoted(name),
                }),
                _ => None,
            })
            .collect();
        if !failing.is_empty() {
            parts.push(format!(
                "{} {} failing ({})",
                count(failing.len(), "server"),
                if failing.len() == 1 { "is" } else { "are" },
                listed(failing),
            ));
        }
        let inputs: Vec<&str> = problems
            .iter()
            .filter_map(|p| match p {
                Problem::Input(message) => Some(message.as_str()),
                _ => None,
            })
            .collect();
        if let Some(first) = inputs.first() {
            parts.push(match inputs.len() {
                1 => format!("a file is broken: {}", short(first, SHORT)),
                n => format!("{n} input problems, the first: {}", short(first, SHORT)),
            });
        }
        let parts = parts.join("; ");
        let stop = if parts.ends_with('…') { "" } else { "." };
        Some(format!(
            "Needs attention: {parts}{stop} Call {STATUS_TOOL} for details."
        ))
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

/// The full status the status tool returns: what needs attention, then every server (MCP,
/// then language servers) with its state, its reason and what to do, then every input
/// problem. `manage`: the management tools are offered, so a reconnect can be done here too.
pub(super) fn status_text(report: &StatusReport, only: Option<&str>, manage: bool) -> String {
    let attention = Attention::of(report, only);
    let mut out = format!(
        "mcp-reconcile: the session for {}\n",
        short(&report.project_root, LONG)
    );
    match attention.summary() {
        Some(summary) => {
            let _ = writeln!(out, "{summary}");
        }
        None => out.push_str("Nothing needs attention.\n"),
    }
    let reconnect = |name: &str| match manage {
        true => format!(
            "the {} tool or `{}`",
            super::manage::RECONNECT_TOOL,
            decide_command("reconnect", name)
        ),
        false => format!("`{}`", decide_command("reconnect", name)),
    };
    out.push_str("\nServers:\n");
    let servers: Vec<&ServerStatus> = report
        .servers
        .iter()
        .filter(|s| only.is_none_or(|only| only == s.name))
        .collect();
    if servers.is_empty() {
        out.push_str("- none configured\n");
    }
    for s in servers {
        if s.state == State::Connected {
            let _ = writeln!(
                out,
                "- {}: connected, {}, {}, {}{}",
                quoted(&s.name),
                count(s.tools, "tool"),
                count(s.prompts, "prompt"),
                count(s.resources, "resource"),
                s.protocol
                    .as_deref()
                    .map(|p| format!(" (MCP {})", short(p, 20)))
                    .unwrap_or_default()
            );
            continue;
        }
        let line = server_line(
            &Line {
                name: &s.name,
                lsp: false,
                state: s.state,
                reason: s.reason,
                approval: s.approval,
                attempts: s.attempts,
                retry_in_ms: s.retry_in_ms,
                last_error: s.last_error.as_deref(),
            },
            &attention.project,
            &reconnect,
        );
        let _ = writeln!(out, "- {line}");
    }
    if only.is_none() && !report.language_servers.is_empty() {
        out.push_str("\nLanguage servers:\n");
        for s in &report.language_servers {
            let line = server_line(
                &Line {
                    name: &s.name,
                    lsp: true,
                    state: s.state,
                    reason: s.reason,
                    approval: s.approval,
                    attempts: s.attempts,
                    retry_in_ms: s.retry_in_ms,
                    last_error: s.last_error.as_deref(),
                },
                &attention.project,
                &|name: &str| format!("`{}`", decide_command("reconnect", name)),
            );
            let _ = writeln!(out, "- {line}");
        }
    }
    if !report.errors.is_empty() {
        out.push_str("\nInput problems (fix the file; the session keeps what it last read):\n");
        for error in &report.errors {
            let _ = writeln!(out, "- {}", short(error, LONG));
        }
    }
    out.push_str(
        "\nApproving or rejecting a server is the user's act: no tool of this gateway can do \
         it.\n",
    );
    out
}

/// What [`server_line`] needs of a server or language server's status.
struct Line<'a> {
    name: &'a str,
    lsp: bool,
    state: State,
    reason: Option<Reason>,
    approval: Option<ApprovalState>,
    attempts: u32,
    retry_in_ms: Option<u64>,
    last_error: Option<&'a str>,
}

/// One server's line of [`status_text`] (without the leading `- `).
fn server_line(s: &Line<'_>, project: &str, reconnect: &dyn Fn(&str) -> String) -> String {
    let name = quoted(s.name);
    let error = s
        .last_error
        .map(|e| format!(": {}", short(e, LONG)))
        .unwrap_or_default();
    match (s.state, s.reason) {
        (State::Skipped, Some(Reason::PendingApproval)) => format!(
            "{name}: waits for the user's approval (it comes from a project file) — ask them to \
             run `{}` in {} (with serve's flags, if it has any); it shows the entry before it \
             approves it",
            approve_command(s.name, s.lsp),
            short(project, LONG)
        ),
        (State::Skipped, Some(Reason::Rejected)) => {
            format!("{name}: rejected by the user; off until they approve it or its entry changes")
        }
        (State::Skipped, reason) => {
            format!("{name}: off ({})", reason.map_or("skipped", Reason::as_str))
        }
        (State::Failed, Some(Reason::CrashLoop)) => format!(
            "{name}: failing, in a crash loop after {}{error} — not restarted until its entry \
             changes, {} or `mcp-reconcile reload`",
            count(s.attempts as usize, "attempt"),
            reconnect(s.name)
        ),
        (State::Failed, Some(Reason::NeedsAuth)) => format!(
            "{name}: wants authorization{error} — ask the user to run `{}`",
            decide_command("auth", s.name)
        ),
        (State::Failed, _) => format!(
            "{name}: failing after {}{}{error} — fix its entry or its program; it is retried on \
             its own, {} restarts it now",
            count(s.attempts as usize, "attempt"),
            s.retry_in_ms
                .map(|ms| format!(", retry in {} s", ms.div_ceil(1000).max(1)))
                .unwrap_or_default(),
            reconnect(s.name)
        ),
        (State::Connecting, _) if s.attempts > 0 => format!(
            "{name}: retrying after {}{error}",
            count(s.attempts as usize, "failed attempt")
        ),
        (state, _) => {
            let approval = match s.approval {
                Some(ApprovalState::Approved) => ", approved",
                _ => "",
            };
            format!("{name}: {state}{approval}{error}")
        }
    }
}

/// The command that approves `name`: `mcp-reconcile approve NAME` (`--lsp` for a language
/// server), the name quoted for the shell and escaped.
fn approve_command(name: &str, lsp: bool) -> String {
    decide_command(if lsp { "approve --lsp" } else { "approve" }, name)
}

/// `name` escaped, shortened and quoted.
fn quoted(name: &str) -> String {
    format!("\"{}\"", short(name, 60))
}

/// The first [`NAMES_SHOWN`] names quoted, and how many more.
fn names<'a>(names: impl Iterator<Item = &'a str>) -> String {
    listed(names.map(quoted).collect())
}

fn listed(items: Vec<String>) -> String {
    let more = items.len().saturating_sub(NAMES_SHOWN);
    let mut shown: Vec<String> = items.into_iter().take(NAMES_SHOWN).collect();
    if more > 0 {
        shown.push(format!("{more} more"));
    }
    shown.join(", ")
}

fn count(n: usize, what: &str) -> String {
    match n {
        1 => format!("1 {what}"),
        n => format!("{n} {what}s"),
    }
}

/// `text` escaped for a terminal ([`safe`]) and cut to `max` characters (with `…`).
fn short(text: &str, max: usize) -> String {
    let text = safe(text);
    if text.chars().count() <= max {
        return text.into_owned();
    }
    let mut cut: String = text.chars().take(max.saturating_sub(1)).collect();
    cut.push('…');
    cut
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
        // The start pass first (bounded by the session): a server that failed to start is
        // then in the summary.
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

    fn server(name: &str, state: State, reason: Option<Reason>) -> ServerStatus {
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
            attempts: u32::from(state == State::Failed),
            last_error: (state == State::Failed).then(|| "exited\u{1b}[2J".into()),
            retry_in_ms: None,
        }
    }

    #[test]
    fn the_summary_names_what_waits_fails_or_is_broken_and_escapes_it() {
        let report = StatusReport {
            servers: vec![
                server("ok", State::Connected, None),
                server(
                    "gated\u{1b}[31m",
                    State::Skipped,
                    Some(Reason::PendingApproval),
                ),
                server("no", State::Skipped, Some(Reason::Rejected)),
                server("bad", State::Failed, Some(Reason::CrashLoop)),
                server("starting", State::Connecting, None),
            ],
            language_servers: Vec::new(),
            errors: vec!["/p/settings.json: not valid JSON\u{7}".into()],
            project_root: "/p".into(),
        };
        let summary = Attention::of(&report, None).summary().expect("attention");
        assert!(summary.contains("1 server waits"), "{summary}");
        assert!(
            summary.contains("`mcp-reconcile approve $'gated\\x1b[31m'` in /p"),
            "{summary}"
        );
        assert!(summary.contains("gated\\e[31m"), "{summary}");
        assert!(summary.contains("in /p"), "{summary}");
        assert!(summary.contains("\"bad\" (crash loop)"), "{summary}");
        assert!(summary.contains("not valid JSON\\u{7}"), "{summary}");
        assert!(!summary.contains("\"no\"") && !summary.contains("starting"));
        assert!(!summary.chars().any(crate::display::is_unsafe), "{summary}");
        let full = status_text(&report, None, true);
        assert!(full.contains("\"no\": rejected"), "{full}");
        assert!(full.contains("exited\\e[2J"), "{full}");
        assert!(
            full.contains(super::super::manage::RECONNECT_TOOL),
            "{full}"
        );
        assert!(!full.contains('\u{1b}'), "{full}");
        // Passthrough: only its server, and the files.
        let only = Attention::of(&report, Some("ok")).summary().expect("files");
        assert!(!only.contains("gated") && only.contains("a file is broken"));
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

    #[test]
    fn long_names_and_errors_are_cut() {
        let long = "x".repeat(5000);
        let report = StatusReport {
            servers: (0..10)
                .map(|i| {
                    server(
                        &format!("{long}{i}"),
                        State::Skipped,
                        Some(Reason::PendingApproval),
                    )
                })
                .collect(),
            errors: vec![long.clone()],
            ..StatusReport::default()
        };
        let summary = Attention::of(&report, None).summary().expect("attention");
        assert!(summary.len() < 1200, "{}", summary.len());
        assert!(summary.contains("7 more"), "{summary}");
    }
}
