//! `watch` as a session of the per-user daemon: the daemon runs the session (the same engine as
//! `watch --no-daemon`) and sends each of its events; this process prints them and asks about
//! approvals with the same printer as an in-process `watch` ([`print_watch`]).

use anyhow::Context;
use mcp_reconcile::daemon::{self, bridge, relay, DaemonRequest};
use mcp_reconcile::display;
use mcp_reconcile::host::HostEvent;
use mcp_reconcile::inputs::{HostEnv, Inputs, Options};
use mcp_reconcile::ipc::SessionRequest;
use rmcp::model::CustomNotification;
use rmcp::service::NotificationContext;
use rmcp::{ClientHandler, RoleClient, ServiceExt};
use tokio::sync::mpsc;

use super::prompt::restore_terminal;
use super::watch::{print_watch, say, Output, Stores};

/// Hands the daemon session's events to the printer.
#[derive(Clone)]
struct Events(mpsc::UnboundedSender<HostEvent>);

impl ClientHandler for Events {
    async fn on_custom_notification(
        &self,
        notification: CustomNotification,
        _context: NotificationContext<RoleClient>,
    ) {
        if notification.method != daemon::attached::EVENT {
            return;
        }
        let line = serde_json::json!({
            "method": notification.method,
            "params": notification.params,
        });
        if let Some(Some(event)) = relay::session_event(&line.to_string()) {
            let _ = self.0.send(event);
        }
    }
}

/// The daemon could not be reached or started: the session can run in this process instead.
#[derive(Debug, thiserror::Error)]
#[error("{0:#}")]
pub struct Unreachable(anyhow::Error);

/// Attaches as a `watch` session and prints its events until Ctrl-C, SIGTERM or the daemon
/// closes the session; SIGHUP reloads the files (every daemon session of them, as
/// `mcp-reconcile reload` does).
///
/// # Errors
/// [`Unreachable`], or the daemon refuses the session.
pub async fn watch_attached(options: Options, output: Output) -> anyhow::Result<()> {
    let env = HostEnv::from_process()?;
    let dir = daemon::socket_dir(&env);
    let exe = std::env::current_exe().context("cannot find the mcp-reconcile binary")?;
    // The decisions are stored from this process's own reading of the files: a decision is
    // stored only for the entry this `watch` reviewed, bound to its hash.
    let inputs = Inputs::new(&options)?;
    let stores = Stores {
        mcp: inputs.approvals_store().clone(),
        lsp: inputs.lsp_approvals_store().clone(),
    };
    let project_root = inputs.project_root().to_owned();
    let reload = DaemonRequest::Session {
        id: inputs.session_id(),
        request: SessionRequest::Reload,
    };
    // An older daemon retires when this newer binary attaches: the second round starts ours.
    let mut round = 0;
    let (session, reader, write) = loop {
        round += 1;
        let stream = bridge::connect_or_start(&dir, &exe)
            .await
            .map_err(Unreachable)?;
        let attached = bridge::attach(
            stream,
            &options,
            env.clone(),
            "watch",
            mcp_reconcile::gateway::ToolNames::Mcp,
            false,
        )
        .await;
        match attached {
            Err(e) if round < 3 && e.downcast_ref::<bridge::Retired>().is_some() => continue,
            attached => break attached?,
        }
    };
    if output != Output::Json {
        say(&format!(
            "attached to the mcp-reconcile daemon as session {}; Ctrl-C stops watching\n",
            display::safe(&session)
        ));
    }
    let (tx, events) = mpsc::unbounded_channel();
    let client = Events(tx)
        .serve((reader, write))
        .await
        .context("the daemon's session did not complete the MCP handshake")?;
    let printer = tokio::spawn(print_watch(events, output, stores, project_root));
    let hangups = async {
        use tokio::signal::unix::{signal, SignalKind};
        let Ok(mut hup) = signal(SignalKind::hangup()) else {
            return std::future::pending().await;
        };
        while hup.recv().await.is_some() {
            if let Err(e) = bridge::ask(&dir, &reload).await {
                eprintln!("! reload: {}", display::safe_multiline(&format!("{e:#}")));
            }
        }
    };
    tokio::select! {
        _ = printer => {}
        () = hangups => {}
        () = mcp_reconcile::signal::stop_signal() => {}
    }
    let _ = client.cancel().await;
    restore_terminal();
    match output {
        Output::Json => say(&super::events::json_line(&super::events::stopped_event())),
        Output::Text { .. } => {
            say("stopped watching; the daemon keeps the servers other sessions hold\n");
        }
    }
    Ok(())
}
