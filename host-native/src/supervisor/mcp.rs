//! [`Mcp`]: the [`ConnectionKind`] of MCP connections ([`transport::connect`]).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use futures::future::BoxFuture;
use mcp_reconcile_kernel::{ServerConfig, Transport};
use tokio::sync::mpsc;

use super::{ConnectionKind, Event, StartError};
use crate::transport::{self, Catalog, ConnEvent, ConnectErrorKind, ConnectOptions, Connection};

/// How long a replaced connection waits for the calls routed to it before it is stopped.
pub(crate) const RETIRE_DRAIN: Duration = Duration::from_secs(5);

/// MCP connections ([`transport::connect`]). `pub` only as the default kind of the public
/// `host::Own`; it is not reachable from outside the crate.
pub struct Mcp {
    /// A relative `cwd` is resolved against this.
    pub(crate) base_dir: Option<PathBuf>,
    /// The OAuth token file (`None`: the default one).
    pub(crate) tokens: Option<crate::auth::TokenFile>,
}

impl ConnectionKind for Mcp {
    type Config = ServerConfig;
    type Connection = Connection;
    type Catalog = Catalog;
    type Event = ConnEvent;

    fn start(
        &self,
        name: &str,
        config: &ServerConfig,
        generation: u64,
        events: mpsc::UnboundedSender<ConnEvent>,
    ) -> BoxFuture<'static, Result<Connection, StartError>> {
        self.start_in(name, config, None, generation, events)
    }

    fn stop(connection: Connection) -> BoxFuture<'static, ()> {
        Box::pin(connection.close())
    }

    fn retire(connection: Connection) -> BoxFuture<'static, ()> {
        Box::pin(connection.retire(RETIRE_DRAIN))
    }

    fn catalog(connection: &Connection) -> Catalog {
        connection.catalog().clone()
    }

    fn pid(connection: &Connection) -> Option<u32> {
        connection.pid()
    }

    fn spawns_process(config: &ServerConfig) -> bool {
        config.transport() == Transport::Stdio
    }

    fn event(event: ConnEvent) -> (u64, Event<Catalog>) {
        match event {
            ConnEvent::CatalogChanged {
                generation,
                catalog,
                ..
            } => (generation, Event::CatalogChanged(catalog)),
            ConnEvent::Closed {
                generation, error, ..
            } => (generation, Event::Closed(error)),
        }
    }
}

/// A kind of connection that yields MCP [`Connection`]s, as [`Mcp`] does: what a session's
/// own supervisor runs (`host::Own`) — [`Mcp`], or in the crate's unit tests the in-memory
/// kind (`crate::testkit::Memory`).
pub(crate) trait McpKind:
    ConnectionKind<Config = ServerConfig, Connection = Connection, Catalog = Catalog, Event = ConnEvent>
{
}

impl<C> McpKind for C where
    C: ConnectionKind<
        Config = ServerConfig,
        Connection = Connection,
        Catalog = Catalog,
        Event = ConnEvent,
    >
{
}

impl Mcp {
    /// [`ConnectionKind::start`] in a daemon session's directory and environment.
    pub(crate) fn start_in(
        &self,
        name: &str,
        config: &ServerConfig,
        launch: Option<Arc<crate::launch::Launch>>,
        generation: u64,
        events: mpsc::UnboundedSender<ConnEvent>,
    ) -> BoxFuture<'static, Result<Connection, StartError>> {
        let options = ConnectOptions {
            generation,
            events,
            handshake_timeout: Duration::from_millis(config.discovery_timeout_ms()),
            base_dir: self.base_dir.clone(),
            tokens: launch
                .as_ref()
                .and_then(|l| l.tokens.clone())
                .or_else(|| self.tokens.clone()),
            launch,
            elicitation: None,
        };
        let (name, config) = (name.to_owned(), config.clone());
        Box::pin(async move {
            transport::connect(&name, &config, options)
                .await
                .map_err(|e| StartError {
                    unsupported: e.kind == ConnectErrorKind::Unsupported,
                    needs_auth: e.kind == ConnectErrorKind::NeedsAuth,
                    message: e.message,
                })
        })
    }
}
