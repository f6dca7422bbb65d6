//! An MCP connection over an in-memory pipe (tests only): the real client session — the
//! handshake, the listings, `list_changed` re-listing, forwarded calls, the monitor that
//! reports the end — to a server on the other end of a [`tokio::io::duplex`], no process.
//! `crate::testkit` puts an in-process rmcp server on the other end.

use std::sync::Arc;

use mcp_reconcile_kernel::ServerConfig;
use rmcp::transport::async_rw::AsyncRwTransport;
use tokio::io::DuplexStream;
use tokio::sync::Notify;

use super::remote::Failure;
use super::session::{handshake, start, Ending, Handler, Opening};
use super::{ConnectError, ConnectErrorKind, ConnectOptions, Connection, Ctx};

/// Runs the handshake over `pipe` (the server is at its other end) as [`super::connect`] does
/// for a process's pipes; the connection ends when the server closes its end.
///
/// # Errors
/// `Handshake` when the server fails `initialize` or a listing; `Timeout` after the options'
/// `handshake_timeout`.
pub(crate) async fn connect(
    name: &str,
    config: &ServerConfig,
    opts: ConnectOptions,
    pipe: DuplexStream,
) -> Result<Connection, ConnectError> {
    let ctx = Ctx::new(name, config);
    let (read, write) = tokio::io::split(pipe);
    let relist = Arc::new(Notify::new());
    let handler = Handler::new(relist.clone(), opts.elicitation.clone(), &ctx);
    let opened = handshake(
        handler,
        AsyncRwTransport::new_client(read, write),
        None,
        Opening::Initialize,
    );
    match tokio::time::timeout(opts.handshake_timeout, opened).await {
        Ok(Ok((service, catalog))) => {
            let ending = Ending::Remote(Failure::default());
            Ok(start(ctx, opts, service, catalog, relist, ending, None))
        }
        Ok(Err(failure)) => Err(ctx.error(failure.kind, &failure.what)),
        Err(_) => Err(ctx.error(
            ConnectErrorKind::Timeout,
            "did not finish the MCP handshake in time (`discoveryTimeoutMs`)",
        )),
    }
}
