//! `watch --daemon`: one more session of the per-user daemon for these files, printing each
//! reconcile's plan, what needs approval, and the session's tools whenever they change.

use std::collections::BTreeSet;

use anyhow::Context;
use mcp_reconcile::daemon::{self, bridge};
use mcp_reconcile::display;
use mcp_reconcile::inputs::HostEnv;
use rmcp::model::CustomNotification;
use rmcp::service::NotificationContext;
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use tokio::sync::mpsc;

use super::args::WatchArgs;
use super::print::{action_line_json, Known};
use super::watch::say;

#[derive(Clone)]
struct Changes(mpsc::UnboundedSender<()>);

impl ClientHandler for Changes {
    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        let _ = self.0.send(());
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
        if let Some(text) = notification
            .params
            .as_ref()
            .and_then(|p| p.get("text"))
            .and_then(|t| t.as_str())
        {
            say(&display::safe_multiline(text));
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
    let (tx, mut changes) = mpsc::unbounded_channel();
    let client = Changes(tx)
        .serve((reader, write))
        .await
        .context("the daemon's session did not complete the MCP handshake")?;
    let mut shown = BTreeSet::new();
    loop {
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
        tokio::select! {
            changed = changes.recv() => if changed.is_none() { break },
            () = stop_signal() => break,
        }
    }
    let _ = client.cancel().await;
    say("stopped watching; the daemon keeps the servers other sessions hold\n");
    Ok(())
}

async fn stop_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}
