//! [`serve_http`]: the gateway over streamable HTTP, loopback only, behind the HTTP guard.

use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context;
use tokio_util::sync::CancellationToken;

use super::Gateway;
use crate::session::Session;

/// Serves `gateway` over streamable HTTP at `http://ADDR/mcp`; every client session shares
/// the one host. Only loopback addresses are accepted (port 0 picks a free port). Every
/// request passes [`http_guard::check`](crate::http_guard::check) first (Host, Origin, bearer
/// token, session cap); sessions idle for `guard.session_idle` are closed. Connections are
/// bounded by `guard.connections` (a header-read timeout, a cap on open connections: see
/// `gateway/connections.rs`). SSE priming events reach only clients of MCP 2025-11-25 or
/// later (`gateway/priming.rs`). Returns the bound address; the server stops when `stop` is
/// cancelled.
///
/// # Errors
/// A non-loopback address, or the address cannot be bound.
pub async fn serve_http<S: Session>(
    addr: SocketAddr,
    gateway: Gateway<S>,
    guard: crate::http_guard::GuardOptions,
    stop: CancellationToken,
) -> anyhow::Result<(SocketAddr, tokio::task::JoinHandle<()>)> {
    use crate::http_guard::{check, Guard};
    use rmcp::transport::streamable_http_server::session::local::{
        LocalSessionManager, SessionConfig,
    };
    use rmcp::transport::streamable_http_server::{
        StreamableHttpServerConfig, StreamableHttpService,
    };
    if !addr.ip().is_loopback() {
        anyhow::bail!(
            "--http {addr}: only a loopback address (127.0.0.1, [::1]) is allowed; the gateway \
             must not be reachable from other machines"
        );
    }
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr}"))?;
    let bound = listener
        .local_addr()
        .context("cannot read the bound address")?;
    let mut config = StreamableHttpServerConfig::default()
        // Also rmcp's own DNS-rebinding check, with the port (the guard checks first).
        .with_allowed_hosts(Guard::loopback_hosts(bound.port()));
    config.cancellation_token = stop.clone();
    let mut sessions = LocalSessionManager::default();
    let mut session_config = SessionConfig::default();
    // An idle session's worker stops and rmcp removes it from the manager.
    session_config.keep_alive = Some(guard.session_idle);
    sessions.session_config = session_config;
    let sessions = Arc::new(sessions);
    let body_limit = config.max_request_body_bytes;
    let service = StreamableHttpService::new(move || Ok(gateway.clone()), sessions.clone(), config);
    let limits = guard.connections;
    let guard = Arc::new(Guard::new(guard, bound.port(), sessions));
    let router = axum::Router::new()
        .nest_service("/mcp", service)
        // Innermost: it reads the body of a request only the guard has let through.
        .layer(axum::middleware::from_fn_with_state(
            body_limit,
            super::priming::for_client_era,
        ))
        .layer(axum::middleware::from_fn(crate::http_guard::session_ended))
        .layer(axum::middleware::from_fn_with_state(guard, check));
    let task = tokio::spawn(super::connections::serve(listener, router, limits, stop));
    Ok((bound, task))
}
