//! Language servers as the supervisor's second kind of connection.

use std::path::PathBuf;
use std::sync::Arc;

use futures::future::BoxFuture;
use mcp_reconcile_kernel::json::{Object, Value};
use tokio::sync::mpsc;

use super::connection::{LspConnection, LspEvent, LspStart};
use crate::launch::Launch;
use crate::supervisor::{ConnectionKind, Event, StartError};

/// Language servers of one project: a relative `workspaceFolder` is inside `project_dir`.
pub(crate) struct Lsp {
    pub(crate) project_dir: PathBuf,
    /// A daemon session's environment, which its language servers are spawned in.
    pub(crate) launch: Option<Arc<Launch>>,
}

impl ConnectionKind for Lsp {
    /// The `.lsp.json` entry as it runs (expanded).
    type Config = Object;
    type Connection = LspConnection;
    /// A language server offers no MCP catalog; what it serves is routed by extension.
    type Catalog = ();
    type Event = LspEvent;

    fn start(
        &self,
        name: &str,
        config: &Object,
        generation: u64,
        events: mpsc::UnboundedSender<LspEvent>,
    ) -> BoxFuture<'static, Result<LspConnection, StartError>> {
        let unsupported = matches!(
            config.get("transport"),
            Some(Value::String(t)) if t != "stdio"
        );
        let start = LspStart::from_entry(config, &self.project_dir).map(|start| LspStart {
            launch: self.launch.clone(),
            ..start
        });
        let name = name.to_owned();
        Box::pin(async move {
            let start = start.map_err(|message| StartError {
                message: format!("language server \"{name}\": {message}"),
                unsupported,
                needs_auth: false,
            })?;
            LspConnection::start(&name, start, generation, events)
                .await
                .map_err(|message| StartError {
                    message,
                    unsupported: false,
                    needs_auth: false,
                })
        })
    }

    fn stop(connection: LspConnection) -> BoxFuture<'static, ()> {
        Box::pin(connection.stop())
    }

    fn catalog(_: &LspConnection) {}

    fn pid(connection: &LspConnection) -> Option<u32> {
        connection.pid()
    }

    fn spawns_process(_: &Object) -> bool {
        true
    }

    fn event(event: LspEvent) -> (u64, Event<()>) {
        match event {
            LspEvent::Closed { generation, error } => (generation, Event::Closed(error)),
        }
    }
}
