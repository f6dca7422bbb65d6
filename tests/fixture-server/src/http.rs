//! The streamable HTTP transport, served with axum at `/mcp` on a loopback address.

use std::io::Write;
use std::net::SocketAddr;
use std::sync::Arc;

use anyhow::Context;
use axum::http::header::CONTENT_TYPE;
use axum::response::IntoResponse;
use axum::Router;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};

use crate::faults::GARBAGE;
use crate::server::{Catalog, Fixture};

/// How the HTTP endpoint behaves.
#[derive(Clone, Copy, Debug)]
pub enum Mode {
    Mcp,
    /// Accepts every request and never responds.
    Hang,
    /// Responds 200 with a body that is not JSON-RPC.
    Garbage,
}

/// Binds `addr`, announces the URL, and serves until the process exits.
pub async fn serve(addr: SocketAddr, catalog: Arc<Catalog>, mode: Mode) -> anyhow::Result<()> {
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr}"))?;
    let bound = listener
        .local_addr()
        .context("cannot read the bound address")?;
    let url = format!("http://{bound}/mcp");
    announce(&url)?;

    let router = match mode {
        Mode::Mcp => {
            let service = StreamableHttpService::new(
                move || Ok(Fixture::new(catalog.clone())),
                Arc::new(LocalSessionManager::default()),
                StreamableHttpServerConfig::default(),
            );
            Router::new().nest_service("/mcp", service)
        }
        Mode::Hang => Router::new().fallback(std::future::pending::<()>),
        Mode::Garbage => Router::new()
            .fallback(|| async { ([(CONTENT_TYPE, "application/json")], GARBAGE).into_response() }),
    };
    axum::serve(listener, router)
        .await
        .context("the HTTP server stopped")
}

/// Prints the URL alone on stdout (for tests using port 0) and as a sentence on stderr.
fn announce(url: &str) -> anyhow::Result<()> {
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "{url}")
        .and_then(|()| stdout.flush())
        .context("writing stdout")?;
    eprintln!("fixture: listening on {url}");
    Ok(())
}
