//! [`Pooled`]: the pool's kind of connection for the one supervisor — MCP connections, each
//! started in the launch context of the session that acquired it first.

use std::sync::Arc;

use futures::future::BoxFuture;
use mcp_reconcile_kernel::ServerConfig;
use tokio::sync::mpsc;

use crate::launch::Launch;
use crate::supervisor::{ConnectionKind, Event, Mcp, StartError};
use crate::transport::{Catalog, ConnEvent, Connection};

/// The pool's connections: MCP connections, each started in the launch context of the session
/// that acquired it first.
pub(super) enum Pooled {
    /// Servers started as configured ([`Mcp`]).
    Mcp(Mcp),
    /// In the crate's unit tests: in-memory servers, by name (the launch context is not used).
    #[cfg(test)]
    Memory(crate::testkit::Memory),
}

impl ConnectionKind for Pooled {
    type Config = (ServerConfig, Option<Arc<Launch>>);
    type Connection = Connection;
    /// Shared: every session's view of a connection is a copy of the pool's (a refresh copies
    /// the whole view), and a listing is not changed after it is stored.
    type Catalog = Arc<Catalog>;
    type Event = ConnEvent;

    fn start(
        &self,
        name: &str,
        (config, launch): &Self::Config,
        generation: u64,
        events: mpsc::UnboundedSender<ConnEvent>,
    ) -> BoxFuture<'static, Result<Connection, StartError>> {
        match self {
            Pooled::Mcp(mcp) => mcp.start_in(name, config, launch.clone(), generation, events),
            #[cfg(test)]
            Pooled::Memory(memory) => memory.start(name, config, generation, events),
        }
    }

    fn stop(connection: Connection) -> BoxFuture<'static, ()> {
        Mcp::stop(connection)
    }

    fn retire(connection: Connection) -> BoxFuture<'static, ()> {
        Mcp::retire(connection)
    }

    fn catalog(connection: &Connection) -> Arc<Catalog> {
        Arc::new(Mcp::catalog(connection))
    }

    fn pid(connection: &Connection) -> Option<u32> {
        Mcp::pid(connection)
    }

    fn spawns_process((config, _): &Self::Config) -> bool {
        Mcp::spawns_process(config)
    }

    fn event(event: ConnEvent) -> (u64, Event<Arc<Catalog>>) {
        let (generation, event) = Mcp::event(event);
        let event = match event {
            Event::CatalogChanged(catalog) => Event::CatalogChanged(Arc::new(catalog)),
            Event::Closed(error) => Event::Closed(error),
        };
        (generation, event)
    }
}
