//! The text `watch` and `serve` print for an applied plan and for a failing server: what
//! changed field by field (`~ reconnect notes: args[3] "echo,add" → "echo,add,sleep"`), the
//! tool delta (`tools 2 → 3: +sleep`), and a failing server's retries one line each — the
//! whole error (with its stderr tail) only the first time it is seen.
//!
//! Everything a repository or a server wrote is escaped ([`safe`]); the changes come
//! redacted from the host ([`mcp_reconcile::diff`]).

use std::collections::HashMap;
use std::fmt::Write as _;

use mcp_reconcile::diff::FieldChange;
use mcp_reconcile::display::{decide_command, safe, safe_multiline};
use mcp_reconcile::host::{PlanReport, ServerStatus, Step, ToolDelta};
use mcp_reconcile_kernel::plan::Action;
use mcp_reconcile_kernel::Reason;

use super::print::{action_line, Known};

/// At most this many tool names are listed in a delta.
const MAX_TOOL_NAMES: usize = 10;

/// The errors already printed whole, per server: a server that fails again the same way gets
/// one line, not its stderr tail again (also after it was up for a while: the session already
/// said it).
#[derive(Default)]
pub struct Failures {
    last: HashMap<String, String>,
}

impl Failures {
    /// Whether `error` differs from the last one printed for `name`; remembers it.
    fn is_new(&mut self, name: &str, error: &str) -> bool {
        if self.last.get(name).is_some_and(|e| e == error) {
            return false;
        }
        self.last.insert(name.to_owned(), error.to_owned());
        true
    }
}

/// The text for an applied plan. A pass that only retries failing servers is one line per
/// retry; any other pass is its header and one line per action.
pub fn report_text(report: &PlanReport, failures: &mut Failures) -> String {
    let mut out = String::new();
    let known = Known {
        rejected: &report.rejected,
        file_missing: &report.file_missing,
    };
    let header = format!("reconcile #{} ({})", report.run, safe(&report.trigger));
    if only_retries(report) {
        let retries = report
            .steps
            .iter()
            .filter(|s| matches!(s.action, Action::Retry { .. }));
        for (i, step) in retries.enumerate() {
            let lead = if i == 0 { header.as_str() } else { " " };
            let _ = writeln!(out, "{lead} {}", retry_line(step, failures));
        }
        return out;
    }
    let _ = writeln!(out, "{header} — {} ms", report.elapsed.as_millis());
    for step in &report.steps {
        let _ = writeln!(out, "  {}", step_line(step, known, failures));
    }
    for error in &report.input_errors {
        let _ = writeln!(out, "  ! {}", safe_multiline(error));
    }
    out
}

/// A retry pass: its starts are all retries, the rest keeps and skips.
fn only_retries(report: &PlanReport) -> bool {
    report.trigger == "retry"
        && report
            .steps
            .iter()
            .any(|s| matches!(s.action, Action::Retry { .. }))
        && report.steps.iter().all(|s| {
            matches!(
                s.action,
                Action::Retry { .. } | Action::Keep { .. } | Action::Skip { .. }
            )
        })
}

/// `↻ crashy (attempt 3) — up in 14 ms, tools 1` or `… — failed again, retry in 1725 ms (same
/// error)`.
fn retry_line(step: &Step, failures: &mut Failures) -> String {
    let (name, attempt) = match &step.action {
        Action::Retry { name, attempt } => (name.as_str(), *attempt),
        _ => ("", 0),
    };
    let mut line = format!("↻ {} (attempt {attempt})", safe(name));
    match &step.error {
        None => {
            let _ = write!(line, " — up in {} ms", step.elapsed.as_millis());
            if let Some(tools) = &step.tools {
                let _ = write!(line, ", {}", tool_delta(tools));
            }
        }
        Some(error) => {
            let _ = write!(
                line,
                " — {}",
                failed(name, error, step.status.as_ref(), failures)
            );
        }
    }
    line
}

/// The line of one action: what it did, how long it took, what changed, the tool delta, and
/// how it failed.
fn step_line(step: &Step, known: Known<'_>, failures: &mut Failures) -> String {
    let mut line = match (&step.action, step.changes.is_empty(), &step.reason) {
        (Action::Reconnect { name, .. }, false, _) => {
            format!(
                "~ reconnect {}: {}",
                safe(name),
                changes_text(&step.changes)
            )
        }
        // Dev mode: the entry is the same, its sources changed.
        (Action::Reconnect { name, .. }, true, Some(reason)) => {
            format!("~ reconnect {} ({})", safe(name), safe(reason))
        }
        (action, _, _) => action_line(action, known),
    };
    if step.action.starts() {
        let _ = write!(line, "  {} ms", step.elapsed.as_millis());
    }
    let name = step.action.name().unwrap_or("");
    match &step.error {
        None if step.action.starts() => {
            if let Some(tools) = &step.tools {
                let _ = write!(line, "  {}", tool_delta(tools));
            }
        }
        None => {}
        Some(error) => {
            let _ = write!(
                line,
                "  — {}",
                failed(name, error, step.status.as_ref(), failures)
            );
        }
    }
    line
}

/// `failed (retry in 863 ms): <error with its stderr tail>` the first time, `failed again
/// (retry in 1725 ms), same error` after.
fn failed(
    name: &str,
    error: &str,
    status: Option<&ServerStatus>,
    failures: &mut Failures,
) -> String {
    let next = status
        .and_then(next_try)
        .map(|n| format!(" ({n})"))
        .unwrap_or_default();
    if failures.is_new(name, error) {
        format!("failed{next}: {}", indented(error))
    } else {
        format!("failed again{next}, same error")
    }
}

/// `retry in 863 ms`, `crash loop: …` or nothing.
fn next_try(s: &ServerStatus) -> Option<String> {
    match (s.reason, s.retry_in_ms) {
        (Some(Reason::CrashLoop), _) => Some(format!(
            "crash loop: not retried until its config changes, `{}` or `reload`",
            decide_command("reconnect", &s.name)
        )),
        (_, Some(ms)) => Some(format!("retry in {ms} ms")),
        _ => None,
    }
}

/// An error escaped, its further lines (a stderr tail) indented under the line it ends.
fn indented(error: &str) -> String {
    safe_multiline(error.trim_end()).replace('\n', "\n      ")
}

/// The line `watch` and `serve` print when a server fails outside a pass (it crashed): the
/// whole error the first time, one line when it fails the same way again.
pub fn failure_line(s: &ServerStatus, failures: &mut Failures) -> Option<String> {
    let error = s.last_error.as_deref()?;
    let attempt = (s.attempts > 0).then(|| format!("attempt {}", s.attempts));
    let about: Vec<String> = attempt.into_iter().chain(next_try(s)).collect();
    let about = if about.is_empty() {
        String::new()
    } else {
        format!(" ({})", about.join(", "))
    };
    let state = format!("  {} is {}{about}", safe(&s.name), s.state);
    Some(if failures.is_new(&s.name, error) {
        format!("{state} — {}", indented(error))
    } else {
        format!("{state}, same error")
    })
}

/// `args[3] "echo,add" → "echo,add,sleep"; env.TOKEN changed (value hidden)`.
pub fn changes_text(changes: &[FieldChange]) -> String {
    changes
        .iter()
        .map(|c| {
            let field = safe(&c.field);
            match (c.hidden, c.before.as_deref(), c.after.as_deref()) {
                (true, _, _) if c.field.ends_with("more changes)") => field.into_owned(),
                (true, _, _) => format!("{field} changed (value hidden)"),
                (false, Some(b), Some(a)) => format!("{field} {} → {}", safe(b), safe(a)),
                (false, None, Some(a)) => format!("{field} added {}", safe(a)),
                (false, Some(b), None) => format!("{field} removed (was {})", safe(b)),
                (false, None, None) => format!("{field} changed"),
            }
        })
        .collect::<Vec<_>>()
        .join("; ")
}

/// `tools 2 → 3: +sleep`, `tools 3 → 2: -sleep`, or `tools 2` when nothing changed or nothing
/// was there before.
pub fn tool_delta(delta: &ToolDelta) -> String {
    let after = &delta.after;
    let Some(before) = &delta.before else {
        return format!("tools {}", after.len());
    };
    let added = after
        .iter()
        .filter(|t| !before.contains(t))
        .map(|t| format!("+{}", safe(t)));
    let removed = before
        .iter()
        .filter(|t| !after.contains(t))
        .map(|t| format!("-{}", safe(t)));
    let names: Vec<String> = added.chain(removed).collect();
    if names.is_empty() {
        return format!("tools {}", after.len());
    }
    let mut listed = names[..names.len().min(MAX_TOOL_NAMES)].join(" ");
    if names.len() > MAX_TOOL_NAMES {
        let _ = write!(listed, " and {} more", names.len() - MAX_TOOL_NAMES);
    }
    format!("tools {} → {}: {listed}", before.len(), after.len())
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use mcp_reconcile_kernel::identity::ConnectionId;

    use super::*;

    fn strings(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| (*s).to_owned()).collect()
    }

    fn step(action: Action, error: Option<&str>) -> Step {
        Step {
            action,
            elapsed: Duration::from_millis(12),
            error: error.map(str::to_owned),
            changes: Vec::new(),
            reason: None,
            tools: None,
            status: None,
        }
    }

    fn report(run: u64, trigger: &str, steps: Vec<Step>) -> PlanReport {
        PlanReport {
            run,
            trigger: trigger.into(),
            steps,
            input_errors: Vec::new(),
            rejected: Vec::new(),
            file_missing: Vec::new(),
            elapsed: Duration::from_millis(20),
        }
    }

    #[test]
    fn a_tool_delta_names_what_came_and_went() {
        let delta = |before: Option<&[&str]>, after: &[&str]| ToolDelta {
            before: before.map(strings),
            after: strings(after),
        };
        let text = tool_delta(&delta(Some(&["echo", "add"]), &["echo", "add", "sleep"]));
        assert_eq!(text, "tools 2 → 3: +sleep");
        let text = tool_delta(&delta(Some(&["echo", "add"]), &["echo", "x\u{1b}[2J"]));
        assert_eq!(text, "tools 2 → 2: +x\\e[2J -add");
        assert_eq!(tool_delta(&delta(None, &["echo"])), "tools 1");
        assert_eq!(tool_delta(&delta(Some(&["echo"]), &["echo"])), "tools 1");
    }

    #[test]
    fn a_reconnect_says_what_changed_and_hides_secret_values() {
        let mut reconnect = step(
            Action::Reconnect {
                name: "notes".into(),
                from: ConnectionId("a".into()),
                to: ConnectionId("b".into()),
                changed: strings(&["args", "env"]),
            },
            None,
        );
        reconnect.changes = vec![
            FieldChange {
                field: "args[3]".into(),
                before: Some("\"echo,add\"".into()),
                after: Some("\"echo,add,sleep\u{1b}]0;x\"".into()),
                hidden: false,
            },
            FieldChange {
                field: "env.TOKEN".into(),
                before: None,
                after: None,
                hidden: true,
            },
        ];
        reconnect.tools = Some(ToolDelta {
            before: Some(strings(&["echo", "add"])),
            after: strings(&["echo", "add", "sleep"]),
        });
        let text = report_text(
            &report(3, "change in user settings", vec![reconnect]),
            &mut Failures::default(),
        );
        assert!(
            text.contains(
                "~ reconnect notes: args[3] \"echo,add\" → \"echo,add,sleep\\e]0;x\"; env.TOKEN changed (value hidden)  12 ms  tools 2 → 3: +sleep"
            ),
            "{text}"
        );
    }

    #[test]
    fn a_restart_for_changed_sources_says_which_file() {
        let id = ConnectionId("dev::0123456789abcdef".into());
        let mut restart = step(
            Action::Reconnect {
                name: "dev".into(),
                from: id.clone(),
                to: id,
                changed: Vec::new(),
            },
            None,
        );
        restart.reason = Some("source changed: src/x\u{1b}[2J.ts".into());
        let text = report_text(
            &report(4, "source changed: src/x.ts", vec![restart]),
            &mut Failures::default(),
        );
        assert!(
            text.contains("~ reconnect dev (source changed: src/x\\e[2J.ts)  12 ms"),
            "{text}"
        );
    }

    #[test]
    fn a_failing_server_says_its_error_once_and_then_one_line_per_retry() {
        let mut failures = Failures::default();
        let error = "server `bad` exited; stderr:\nline 1\nline 2";
        let text = report_text(
            &report(
                1,
                "start",
                vec![step(
                    Action::Connect {
                        name: "bad".into(),
                        to: ConnectionId("c".into()),
                    },
                    Some(error),
                )],
            ),
            &mut failures,
        );
        assert!(
            text.contains("failed: server `bad` exited; stderr:\n      line 1\n      line 2"),
            "{text}"
        );
        let retry = |run, attempt| {
            report(
                run,
                "retry",
                vec![
                    step(Action::Keep { name: "ok".into() }, None),
                    step(
                        Action::Retry {
                            name: "bad".into(),
                            attempt,
                        },
                        Some(error),
                    ),
                ],
            )
        };
        for (run, attempt) in [(2, 2), (3, 3)] {
            let text = report_text(&retry(run, attempt), &mut failures);
            assert_eq!(
                text,
                format!("reconcile #{run} (retry) ↻ bad (attempt {attempt}) — failed again, same error\n")
            );
        }
        let up = report(
            4,
            "retry",
            vec![step(
                Action::Retry {
                    name: "bad".into(),
                    attempt: 4,
                },
                None,
            )],
        );
        assert_eq!(
            report_text(&up, &mut failures),
            "reconcile #4 (retry) ↻ bad (attempt 4) — up in 12 ms\n"
        );
        let other = report(
            6,
            "retry",
            vec![step(
                Action::Retry {
                    name: "bad".into(),
                    attempt: 5,
                },
                Some("server `bad` timed out"),
            )],
        );
        let text = report_text(&other, &mut failures);
        assert!(
            text.contains("failed: server `bad` timed out"),
            "a new error is said whole: {text}"
        );
    }
}
