//! What the attention is said in: the one-line summary (instructions, the status tool's
//! description, the warning) and the full status the status tool returns. Every name, path and
//! error is escaped for a terminal and shortened — a server's name to
//! [`NAME_SHOWN`](crate::display::NAME_SHOWN) characters, also inside a command to run (a name
//! too long to show is named `NAME` there) — and the full status lists a bounded number of
//! servers and problems, then counts the rest: a repository's names cannot flood a model's
//! context or carry instructions to it whole.

use std::fmt::Write as _;

use super::{Attention, Problem};
use crate::display::{decide_command, short, NAME_SHOWN};
use crate::gateway::tool_names::{RECONNECT_TOOL, STATUS_TOOL};
use crate::host::{ServerStatus, State, StatusReport};
use mcp_reconcile_kernel::approvals::ApprovalState;
use mcp_reconcile_kernel::Reason;

/// Names listed in a summary; the rest are counted.
const NAMES_SHOWN: usize = 3;
/// The longest name, path or error a summary shows (characters, after escaping).
const SHORT: usize = 160;
/// The longest error the full status shows for one server or input.
const LONG: usize = 600;
/// Servers (and language servers, and input problems) the full status lists; the rest are
/// counted.
const LISTED: usize = 40;

impl Attention {
    /// The summary of `problems` (some of this reading's).
    pub(super) fn describe(&self, problems: &[Problem]) -> Option<String> {
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
                1 => ("it", format!("{} in {project}", approve_command(name, lsp))),
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
        let withheld: Vec<String> = problems
            .iter()
            .filter_map(|p| match p {
                Problem::Withheld { name, items } => Some(format!(
                    "{} of {} (review: {})",
                    names(items.iter().map(String::as_str)),
                    quoted(name),
                    command("review-tools", name)
                )),
                _ => None,
            })
            .collect();
        if !withheld.is_empty() {
            parts.push(format!(
                "tools changed since the user approved them are withheld: {} — ask them to \
                 review; no tool can accept them",
                listed(withheld)
            ));
        }
        let failing: Vec<String> = problems
            .iter()
            .filter_map(|p| match p {
                Problem::Failing { name, reason, .. } => Some(match reason {
                    Some(Reason::CrashLoop) => format!("{} (crash loop)", quoted(name)),
                    Some(Reason::NeedsAuth) => format!(
                        "{} (wants authorization: {})",
                        quoted(name),
                        command("auth", name)
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

/// The full status the status tool returns: what needs attention, then every server (MCP,
/// then language servers) with its state, its reason and what to do, then every input
/// problem. `manage`: the management tools are offered, so a reconnect can be done here too.
pub(in crate::gateway) fn status_text(
    report: &StatusReport,
    only: Option<&str>,
    manage: bool,
) -> String {
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
            "the {} tool or {}",
            RECONNECT_TOOL,
            command("reconnect", name)
        ),
        false => command("reconnect", name),
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
    let more = servers.len().saturating_sub(LISTED);
    for s in servers.into_iter().take(LISTED) {
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
    and_more(&mut out, more, "server");
    if only.is_none() && !report.language_servers.is_empty() {
        out.push_str("\nLanguage servers:\n");
        for s in report.language_servers.iter().take(LISTED) {
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
                &|name: &str| command("reconnect", name),
            );
            let _ = writeln!(out, "- {line}");
        }
        let more = report.language_servers.len().saturating_sub(LISTED);
        and_more(&mut out, more, "language server");
    }
    if !report.errors.is_empty() {
        out.push_str("\nInput problems (fix the file; the session keeps what it last read):\n");
        for error in report.errors.iter().take(LISTED) {
            let _ = writeln!(out, "- {}", short(error, LONG));
        }
        and_more(
            &mut out,
            report.errors.len().saturating_sub(LISTED),
            "problem",
        );
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
             run {} in {} (with serve's flags, if it has any); it shows the entry before it \
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
            "{name}: wants authorization{error} — ask the user to run {}",
            command("auth", s.name)
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

/// The command that approves `name`, in backticks: `mcp-reconcile approve NAME` (`--lsp` for a
/// language server), as [`command`] writes it.
fn approve_command(name: &str, lsp: bool) -> String {
    command(if lsp { "approve --lsp" } else { "approve" }, name)
}

/// The command `mcp-reconcile VERB NAME` for server `name`, in backticks: the name quoted for
/// the shell and escaped ([`decide_command`]) when it is at most [`NAME_SHOWN`] characters;
/// a longer one is not written out (it would carry whatever it says to the model), the command
/// says `NAME` and where the full name is.
pub(in crate::gateway) fn command(verb: &str, name: &str) -> String {
    if name.chars().count() <= NAME_SHOWN {
        return format!("`{}`", decide_command(verb, name));
    }
    format!(
        "`mcp-reconcile {verb} NAME` with the server's full name (too long to show here; \
         `mcp-reconcile status` in a terminal lists it)"
    )
}

/// `name` escaped, shortened to [`NAME_SHOWN`] and quoted.
fn quoted(name: &str) -> String {
    format!("\"{}\"", short(name, NAME_SHOWN))
}

/// The line that counts the `more` items (of `what`) the full status does not list.
fn and_more(out: &mut String, more: usize, what: &str) {
    if more > 0 {
        let plural = if more == 1 { "" } else { "s" };
        let _ = writeln!(out, "- and {more} more {what}{plural}");
    }
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

#[cfg(test)]
mod tests {
    use super::super::tests::server;
    use super::*;

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
        assert!(full.contains(RECONNECT_TOOL), "{full}");
        assert!(!full.contains('\u{1b}'), "{full}");
        // Passthrough: only its server, and the files.
        let only = Attention::of(&report, Some("ok")).summary().expect("files");
        assert!(!only.contains("gated") && only.contains("a file is broken"));
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
