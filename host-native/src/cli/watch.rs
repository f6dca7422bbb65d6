//! What `watch` shows while it runs: applied plans and failures as text for people (asking
//! about servers that need approval while the plan of the others keeps printing above the
//! question), or `--events json`, one object per line for tools.

use std::collections::VecDeque;
use std::io::{self, Write};

use mcp_reconcile::approvals_store::ApprovalsStore;
use mcp_reconcile::display;
use mcp_reconcile::host::HostEvent;
use mcp_reconcile::review::{quoted, ApprovalRequest};
use mcp_reconcile_kernel::Decision;
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::events::{event_values, json_line};
use super::print::{lsp_failure_line, lsp_plan_text};
use super::prompt::{approval_hint, hint_line, question, read_answer, Answer, Input};
use super::report::{failure_line, report_text, Failures};

/// How `watch` shows a session.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Output {
    /// Text for people; asks about servers that need approval when `ask` says how.
    Text { ask: Option<Input> },
    /// `--events json`: JSON lines on stdout, nothing asked.
    Json,
}

/// The approvals files a prompt's decision goes to.
pub struct Stores {
    pub mcp: ApprovalsStore,
    pub lsp: ApprovalsStore,
}

/// Prints the host's events until the host stops; asks about servers that need approval
/// (one question at a time, the others queued) without holding the printing up.
pub async fn print_watch(
    mut events: mpsc::UnboundedReceiver<HostEvent>,
    output: Output,
    stores: Stores,
    project_root: String,
) {
    let mut screen = Screen {
        ask: match output {
            Output::Text { ask } => ask,
            Output::Json => None,
        },
        question: None,
    };
    let mut failures = Failures::default();
    let mut queue: VecDeque<ApprovalRequest> = VecDeque::new();
    let mut asking: Option<(ApprovalRequest, JoinHandle<Option<Answer>>)> = None;
    let mut approve_all = false;
    loop {
        while asking.is_none() {
            let Some(request) = queue.pop_front() else {
                break;
            };
            if approve_all {
                decide(
                    &stores,
                    &project_root,
                    &request,
                    Answer::Approve,
                    &mut screen,
                );
                continue;
            }
            match screen.ask {
                Some(input) => {
                    screen.say(&request.review());
                    screen.show_question(question(&request));
                    asking = Some((request, tokio::spawn(read_answer(input))));
                }
                None => screen.say(&approval_hint(&request)),
            }
        }
        tokio::select! {
            event = events.recv() => {
                let Some(event) = event else { break };
                if output == Output::Json {
                    for value in event_values(&event) {
                        say(&json_line(&value));
                    }
                    continue;
                }
                if let HostEvent::ApprovalNeeded(requests) = event {
                    queue.extend(requests);
                    continue;
                }
                if let Some(text) = event_text(&event, &mut failures) {
                    screen.say(&text);
                }
            }
            answer = async { (&mut asking.as_mut()?.1).await.ok() }, if asking.is_some() => {
                let Some((request, _)) = asking.take() else { continue };
                let answer = answer.flatten();
                screen.clear_question();
                match answer {
                    Some(answer) => {
                        approve_all |= answer == Answer::ApproveAll;
                        decide(&stores, &project_root, &request, answer, &mut screen);
                    }
                    None => {
                        // End of input: nobody can answer; this one (its review is on the
                        // screen) and the rest get hints.
                        screen.ask = None;
                        screen.say(&hint_line(&request));
                    }
                }
            }
        }
    }
}

/// The text for one event (`None`: nothing to say).
fn event_text(event: &HostEvent, failures: &mut Failures) -> Option<String> {
    match event {
        HostEvent::PlanApplied(report) => Some(report_text(report, failures)),
        HostEvent::ReloadFailed(message) => {
            let _ = writeln!(io::stderr(), "! {}", display::safe_multiline(message));
            None
        }
        HostEvent::ClientUpdate(s) => failure_line(s, failures).map(|l| format!("{l}\n")),
        HostEvent::LspPlanApplied(actions) => Some(lsp_plan_text(actions)),
        HostEvent::LspUpdate(s) => lsp_failure_line(s).map(|l| format!("{l}\n")),
        HostEvent::CatalogChanged(_) | HostEvent::ApprovalNeeded(_) | HostEvent::Idle { .. } => {
            None
        }
    }
}

/// Stores `answer` for `request` and says what was decided.
fn decide(
    stores: &Stores,
    project_root: &str,
    request: &ApprovalRequest,
    answer: Answer,
    screen: &mut Screen,
) {
    match store_answer(stores, project_root, request, answer) {
        Ok(line) => screen.say(&line),
        Err(e) => {
            let _ = writeln!(io::stderr(), "{e}");
        }
    }
}

/// Stores the person's answer for `request` (a skip stores nothing); the line that says what
/// was done, or the error line.
pub(super) fn store_answer(
    stores: &Stores,
    project_root: &str,
    request: &ApprovalRequest,
    answer: Answer,
) -> Result<String, String> {
    let (decision, said) = match answer {
        Answer::Approve => (Some(Decision::Approved), "approved"),
        Answer::ApproveAll => (Some(Decision::Approved), "approved (and every later one)"),
        Answer::Reject => (Some(Decision::Rejected), "rejected"),
        Answer::Skip => (None, "skipped: still pending"),
    };
    let name = quoted(&request.name);
    if let Some(decision) = decision {
        let store = if request.lsp {
            &stores.lsp
        } else {
            &stores.mcp
        };
        if let Err(e) = store.decide_hash(project_root, &request.name, &request.hash, decision) {
            return Err(format!(
                "! could not store the decision for {name}: {}",
                display::safe(&format!("{e:#}"))
            ));
        }
    }
    Ok(format!("? {name}: {said}\n"))
}

/// stdout with the question kept at the bottom: text printed while it waits goes above it.
struct Screen {
    /// How questions are answered; `None` once nobody can answer.
    ask: Option<Input>,
    /// The question waiting for its key, shown on the last line.
    question: Option<String>,
}

impl Screen {
    fn say(&mut self, text: &str) {
        match (&self.question, self.ask) {
            (Some(question), Some(Input::Key)) => {
                // The terminal may be in raw mode (no newline translation): clear the
                // question's line, print, show the question again.
                let text = text.replace('\n', "\r\n");
                say(&format!("\r\x1b[2K{text}{question}"));
            }
            // A pipe or a file: the text on lines of its own, the question again after it.
            (Some(question), Some(Input::Line)) => say(&format!("\n{text}{question}")),
            _ => say(text),
        }
    }

    fn show_question(&mut self, question: String) {
        say(&question);
        self.question = Some(question);
    }

    fn clear_question(&mut self) {
        if self.question.take().is_some() {
            say(if self.ask == Some(Input::Key) {
                "\r\x1b[2K"
            } else {
                "\n"
            });
        }
    }
}

/// Prints to stdout, ignoring a closed stdout (`watch | head` must not take the session
/// down).
pub fn say(text: &str) {
    let mut out = io::stdout().lock();
    let _ = out.write_all(text.as_bytes());
    let _ = out.flush();
}
