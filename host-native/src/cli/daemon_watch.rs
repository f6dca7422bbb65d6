//! `watch --daemon`: one more session of the per-user daemon for these files, printing the
//! session's tools whenever they change (the daemon's sessions have no plan events yet).

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
