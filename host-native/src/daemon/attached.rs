//! One attached session of the daemon: a session ([`Host`]) whose MCP connections are its
//! holds on the daemon's [`SharedPool`] ([`Lease`](crate::pool::Lease)), served as MCP on the client's connection,
//! and released when the connection closes. It is the same engine `watch --no-daemon` and
//! `serve --no-daemon` run — inputs, scheduler, grace, waiters, approvals, catalog, routing,
//! status, language servers — with another backend. The daemon's list of them is the
//! `Registry` (`daemon/registry.rs`).
//!
//! 1. resolve the client's files in its environment; make the session with its [`Launch`]
//!    (project root, environment, token file) and start it;
//! 2. answer `{"ok":{"session":NAME}}` at once — nothing waits for a server here: the
//!    client's `initialize` and first `tools/list` wait at most the session's start grace
//!    (the engine's `waiters`), and a server ready later is announced as `list_changed` — and
//!    serve MCP on the rest of the connection;
//! 3. every [`HostEvent`] goes to the client as one [`EVENT`] notification (the `serve` bridge
//!    prints what `serve --no-daemon` prints; `watch` prints and asks as in-process), and to
//!    the gateway's announcer: a catalog change as `list_changed`, and what needs attention
//!    read again (the gateway's session is a `Member`: a reload or reconnect through it
//!    reaches the sessions of the same files, as the commands do);
//! 4. when the client closes the connection: unregister, stop the session (its language
//!    servers stop, its holds are released).

use std::sync::Arc;

use rmcp::model::{CustomNotification, ServerNotification};
use rmcp::{Peer, RoleServer};
use tokio::io::BufReader;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::mpsc;

use super::member::Member;
use super::registry::{Entry, Registry, SessionInfo};
use crate::gateway::Gateway;
use crate::host::{Host, HostEvent, HostOptions};
use crate::inputs::{HostEnv, Inputs, Options};
use crate::ipc::Answer;
use crate::launch::Launch;
use crate::pool::SharedPool;

/// The notification that carries one [`HostEvent`] of a daemon session to its client:
/// `params` is the event as serde writes it. The `serve` bridge prints it on stderr and keeps
/// it from the MCP client; `watch` prints it (and asks about approvals) as in-process.
pub const EVENT: &str = "notifications/mcp-reconcile/event";

/// The daemon's answer to an attach: the session's name (the connection speaks MCP to it
/// from then on).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Attached {
    /// Unique among the daemon's sessions: `<client>-<pid>-<n>`.
    pub session: String,
}

/// What a client attaches with (see [`DaemonRequest::Attach`](super::DaemonRequest)).
pub struct Attach {
    /// Its layer flags.
    pub options: Options,
    /// Its environment, current directory and home.
    pub env: HostEnv,
    /// `serve` or `watch`, for `status`.
    pub client: String,
    /// Its process id, for `status`.
    pub pid: u32,
    /// How its gateway names tools and prompts.
    pub tool_names: crate::gateway::ToolNames,
    /// `serve --manage-tools`: the gateway offers the management tools.
    pub manage_tools: bool,
}

/// Runs one attached session until its client closes the connection (see the module docs).
pub(crate) async fn run(
    attach: Attach,
    pool: SharedPool,
    registry: Registry,
    reader: BufReader<OwnedReadHalf>,
    mut write: OwnedWriteHalf,
) {
    let attaching = registry.attaching();
    let tool_names = attach.tool_names;
    let launch_vars = attach.env.vars.clone();
    let launch_raw = attach.env.raw.clone();
    let inputs = match Inputs::with_env(&attach.options, attach.env) {
        Ok(inputs) => inputs,
        Err(e) => {
            let _ = super::reply(&mut write, &Answer::<Attached>::Error(format!("{e:#}"))).await;
            return;
        }
    };
    let name = registry.next_name(&attach.client, attach.pid);
    let launch = Arc::new(Launch {
        dir: inputs.project_dir().to_path_buf(),
        vars: launch_vars,
        raw: launch_raw,
        tokens: Some(inputs.paths().oauth_tokens.clone()),
    });
    let info = SessionInfo {
        name: name.clone(),
        client: attach.client,
        pid: attach.pid,
        project_root: inputs.project_root().to_owned(),
        id: inputs.session_id(),
    };
    let member_id = info.id.clone();
    let manage_tools = attach.manage_tools;
    // The client's own start grace, when its environment sets one.
    let options = HostOptions::default().start_grace_from(inputs.env());
    let mut host = Host::in_pool_launched(inputs, options, &pool, &name, Some(launch));
    let events = host.subscribe();
    let session = match host.spawn() {
        Ok(session) => session,
        Err(e) => {
            let _ = super::reply(&mut write, &Answer::<Attached>::Error(format!("{e:#}"))).await;
            return;
        }
    };
    let handle = session.handle().clone();
    let attached = Attached {
        session: name.clone(),
    };
    if super::reply(&mut write, &Answer::Ok(attached))
        .await
        .is_err()
    {
        let _ = session.shutdown().await;
        return;
    }
    registry.insert(Entry {
        info,
        session: handle.clone(),
    });
    drop(attaching);
    tracing::info!(session = %name, "attached");

    let member = Member {
        session: handle.clone(),
        registry: registry.clone(),
        id: member_id,
    };
    let gateway = Gateway::new(member)
        .with_tool_names(tool_names)
        .with_manage_tools(manage_tools);
    let service = {
        use rmcp::ServiceExt;
        gateway.clone().serve((reader, write)).await
    };
    if let Ok(service) = service {
        let (announce_tx, announce_rx) = mpsc::unbounded_channel();
        let announcer = tokio::spawn(gateway.announce(announce_rx));
        let forwarder = tokio::spawn(forward(events, service.peer().clone(), announce_tx));
        let _ = service.waiting().await;
        forwarder.abort();
        announcer.abort();
    }
    registry.remove(&name);
    tracing::info!(session = %name, "detached; releasing its servers");
    let _ = session.shutdown().await;
}

/// Sends every event of the session to its client as an [`EVENT`] notification (but a catalog
/// change, which the client hears as `list_changed`), and every event to the gateway's
/// announcer.
async fn forward(
    mut events: mpsc::UnboundedReceiver<HostEvent>,
    client: Peer<RoleServer>,
    announce: mpsc::UnboundedSender<HostEvent>,
) {
    while let Some(event) = events.recv().await {
        let _ = announce.send(event.clone());
        if let HostEvent::CatalogChanged(_) = event {
            continue;
        }
        if let HostEvent::ReloadFailed(message) = &event {
            // A repository's file names and contents are in it: escaped for whoever tails the log.
            tracing::warn!("{}", crate::display::safe_multiline(message));
        }
        let Ok(params) = serde_json::to_value(&event) else {
            continue;
        };
        let notification = CustomNotification::new(EVENT, Some(params));
        let _ = client
            .send_notification(ServerNotification::CustomNotification(notification))
            .await;
    }
}
