//! `watch --daemon`: one more session of the per-user daemon for these files, printing each
//! reconcile's plan, what needs approval (and asking about it, as `watch` does), and the
//! session's tools whenever they change.

use std::collections::{BTreeSet, VecDeque};
use std::io::IsTerminal;

use anyhow::Context;
use mcp_reconcile::daemon::{self, bridge};
use mcp_reconcile::display;
use mcp_reconcile::inputs::{HostEnv, Inputs};
use mcp_reconcile::review::ApprovalRequest;
use rmcp::model::CustomNotification;
use rmcp::service::NotificationContext;
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

use super::args::WatchArgs;
use super::print::{action_line_json, Known};
use super::prompt::{question, read_answer, restore_terminal, Answer, Input};
use super::watch::say;
use super::watch::{store_answer, Stores};

/// What the daemon's session tells this `watch`.
enum Heard {
    ToolsChanged,
    /// A server waiting for approval: its name, the hash of its entry, whether it is a
    /// language server.
    Waiting(String, String, bool),
}

#[derive(Clone)]
struct Changes(mpsc::UnboundedSender<Heard>);

impl ClientHandler for Changes {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        let _ = self.0.send(Heard::ToolsChanged);
    }

    /// The daemon's hints (what needs approval and how to approve it) are for the person.
    async fn on_custom_notification(
        &self,
        notification: CustomNotification,
        _context: NotificationContext<RoleClient>,
    ) {
        if notification.method == daemon::attached::PLAN {
            say(&plan_text(notification.params.as_ref()));
            return;
        }
        if notification.method != daemon::attached::HINT {
            return;
        }
        let Some(params) = notification.params.as_ref() else {
            return;
        };
        if let Some(text) = params.get("text").and_then(|t| t.as_str()) {
            say(&display::safe_multiline(text));
        }
        if let (Some(name), Some(hash)) = (
            params.get("name").and_then(|n| n.as_str()),
            params.get("hash").and_then(|h| h.as_str()),
        ) {
            let lsp = params.get("lsp").and_then(serde_json::Value::as_bool) == Some(true);
            let _ = self
                .0
                .send(Heard::Waiting(name.to_owned(), hash.to_owned(), lsp));
        }
    }
}

/// A reconcile of the session, as `plan` prints its actions (every action but `keep` and
/// `noop`).
fn plan_text(params: Option<&serde_json::Value>) -> String {
    let Some(params) = params else {
        return String::new();
    };
    let rejected: Vec<String> = params
        .get("rejected")
        .and_then(serde_json::Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(|n| n.as_str().map(str::to_owned))
        .collect();
    let known = Known {
        rejected: &rejected,
        ..Known::default()
    };
    let mut text = String::from("reconcile\n");
    for action in params
        .get("plan")
        .and_then(|p| p.get("actions"))
        .and_then(serde_json::Value::as_array)
        .into_iter()
        .flatten()
        .filter(|a| !matches!(a["action"].as_str(), Some("keep" | "noop")))
    {
        text.push_str(&format!("  {}\n", action_line_json(action, known)));
    }
    text
}

/// Attaches as a `watch` session and prints `+ tool` / `- tool` lines until Ctrl-C, SIGTERM
/// or the daemon closes the session.
///
/// # Errors
/// The daemon cannot be started or refuses the session.
pub async fn watch_attached(args: WatchArgs) -> anyhow::Result<()> {
    let env = HostEnv::from_process()?;
    let dir = daemon::socket_dir(&env);
    let exe = std::env::current_exe().context("cannot find the mcp-reconcile binary")?;
    let stream = bridge::connect_or_start(&dir, &exe).await?;
    let (session, reader, write) =
        bridge::attach(stream, &args.layers.options(), env, "watch").await?;
    say(&format!(
        "attached to the mcp-reconcile daemon as session {}; Ctrl-C stops watching\n",
        display::safe(&session)
    ));
    let (tx, mut heard) = mpsc::unbounded_channel();
    let client = Changes(tx)
        .serve((reader, write))
        .await
        .context("the daemon's session did not complete the MCP handshake")?;
    // The questions are asked from this process's own reading of the files: a decision is
    // stored only for the entry this `watch` reviewed, bound to its hash.
    let mut inputs = Inputs::new(&args.layers.options())?;
    let stores = Stores {
        mcp: inputs.approvals_store().clone(),
        lsp: inputs.lsp_approvals_store().clone(),
    };
    let project_root = inputs.project_root().to_owned();
    let mut ask = ask_input(&args);
    let mut waiting: VecDeque<(String, String, bool)> = VecDeque::new();
    let mut asking: Option<(ApprovalRequest, JoinHandle<Option<Answer>>)> = None;
    let mut shown = BTreeSet::new();
    let mut list = true;
    loop {
        if std::mem::take(&mut list) {
            let tools = client
                .list_all_tools()
                .await
                .context("listing the session's tools")?;
            let now: BTreeSet<String> = tools.into_iter().map(|t| t.name.into_owned()).collect();
            for gone in shown.difference(&now) {
                say(&format!("- {}\n", display::safe(gone)));
            }
            for added in now.difference(&shown) {
                say(&format!("+ {}\n", display::safe(added)));
            }
            shown = now;
        }
        while asking.is_none() {
            let (Some(input), Some((name, hash, lsp))) = (ask, waiting.pop_front()) else {
                break;
            };
            if let Some(request) = local_request(&mut inputs, &name, &hash, lsp) {
                say(&question(&request));
                asking = Some((request, tokio::spawn(read_answer(input))));
            }
        }
        tokio::select! {
            told = heard.recv() => match told {
                None => break,
                Some(Heard::ToolsChanged) => list = true,
                Some(Heard::Waiting(name, hash, lsp)) => waiting.push_back((name, hash, lsp)),
            },
            answer = async { (&mut asking.as_mut()?.1).await.ok() }, if asking.is_some() => {
                let Some((request, _)) = asking.take() else { continue };
                say("\n");
                match answer.flatten() {
                    Some(answer) => match store_answer(&stores, &project_root, &request, answer) {
                        Ok(line) => say(&line),
                        Err(line) => eprintln!("{line}"),
                    },
                    // End of input: the rest stay hints.
                    None => ask = None,
                }
            }
            () = mcp_reconcile::signal::stop_signal() => break,
        }
    }
    restore_terminal();
    let _ = client.cancel().await;
    say("stopped watching; the daemon keeps the servers other sessions hold\n");
    Ok(())
}

/// How this `watch` asks (as an in-process `watch` does), or `None` with `--no-prompt`.
fn ask_input(args: &WatchArgs) -> Option<Input> {
    if args.no_prompt {
        None
    } else if std::io::stdin().is_terminal() {
        Some(Input::Key)
    } else {
        Some(Input::Line)
    }
}

/// The approval request for `name` as this process reads the files, if its entry still has
/// `hash` (an entry edited since the daemon's hint is asked about when its own hint comes).
fn local_request(
    inputs: &mut Inputs,
    name: &str,
    hash: &str,
    lsp: bool,
) -> Option<ApprovalRequest> {
    let snapshot = inputs.load(None);
    let request = if lsp {
        ApprovalRequest::language_server(&snapshot, name)?
    } else {
        let servers = snapshot.assembled().servers;
        ApprovalRequest::new(&snapshot, name, servers.get(name)?)
    };
    (request.hash == hash).then_some(request)
}
