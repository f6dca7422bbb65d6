//! The streamable HTTP transport, served with axum at `/mcp` on a loopback address, over plain
//! HTTP or (with a certificate and key) HTTPS.

use std::io::Write;
use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use axum::http::header::CONTENT_TYPE;
use axum::response::IntoResponse;
use axum::Router;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::rustls;
use tokio_rustls::server::TlsStream;
use tokio_rustls::TlsAcceptor;

use crate::faults::GARBAGE;
use crate::server::{Catalog, Fixture};

/// How the HTTP endpoint behaves.
#[derive(Clone, Debug)]
pub enum Mode {
    Mcp,
    /// `--conformance-reference`: what the conformance suite's server scenarios ask for; with
    /// the 2026-07-28 additions under `--modern`.
    Reference(Option<std::sync::Arc<crate::modern::Modern>>),
    /// Accepts every request and never responds.
    Hang,
    /// Responds 200 with a body that is not JSON-RPC.
    Garbage,
}

/// Binds `addr`, announces the URL, and serves until the process exits; over HTTPS when `tls`
/// is given.
pub async fn serve(
    addr: SocketAddr,
    catalog: Arc<Catalog>,
    mode: Mode,
    tls: Option<TlsAcceptor>,
    oauth: Option<Duration>,
) -> anyhow::Result<()> {
    let listener = TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr}"))?;
    let bound = listener
        .local_addr()
        .context("cannot read the bound address")?;
    let scheme = if tls.is_some() { "https" } else { "http" };
    let url = format!("{scheme}://{bound}/mcp");
    announce(&url)?;

    let router = match mode {
        Mode::Mcp => {
            let service = StreamableHttpService::new(
                move || Ok(Fixture::new(catalog.clone())),
                Arc::new(LocalSessionManager::default()),
                StreamableHttpServerConfig::default(),
            );
            let mcp = Router::new().nest_service("/mcp", service);
            match oauth {
                Some(ttl) => {
                    let base = url.trim_end_matches("/mcp").to_owned();
                    crate::oauth::AuthServer::new(base, ttl).router(mcp)
                }
                None => mcp,
            }
        }
        Mode::Reference(modern) => Router::new().nest_service(
            "/mcp",
            StreamableHttpService::new(
                move || Ok(crate::reference::Reference::new(modern.clone())),
                Arc::new(LocalSessionManager::default()),
                StreamableHttpServerConfig::default(),
            ),
        ),
        Mode::Hang => Router::new().fallback(std::future::pending::<()>),
        Mode::Garbage => Router::new()
            .fallback(|| async { ([(CONTENT_TYPE, "application/json")], GARBAGE).into_response() }),
    };
    match tls {
        Some(acceptor) => axum::serve(TlsListener::start(listener, acceptor), router).await,
        // No Nagle: an answer written in parts (headers, SSE chunks) is not held for the
        // client's delayed ACK (40 ms a request otherwise), as any real server does.
        None => {
            use axum::serve::ListenerExt;
            let listener = listener.tap_io(|tcp| {
                let _ = tcp.set_nodelay(true);
            });
            axum::serve(listener, router).await
        }
    }
    .context("the HTTP server stopped")
}

/// A TLS acceptor for the PEM certificate chain in `cert` and the PEM private key in `key`,
/// speaking HTTP/1.1 only (as the server does).
///
/// # Errors
/// A file that cannot be read or holds no certificate / key, or a key that does not fit.
pub fn tls_acceptor(cert: &Path, key: &Path) -> anyhow::Result<TlsAcceptor> {
    let chain = CertificateDer::pem_file_iter(cert)
        .and_then(Iterator::collect::<Result<Vec<_>, _>>)
        .with_context(|| format!("cannot read certificates from {}", cert.display()))?;
    anyhow::ensure!(!chain.is_empty(), "no certificate in {}", cert.display());
    let key = PrivateKeyDer::from_pem_file(key)
        .with_context(|| format!("cannot read a private key from {}", key.display()))?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .context("TLS versions")?
        .with_no_client_auth()
        .with_single_cert(chain, key)
        .context("the certificate and key do not fit together")?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

/// How long a client may take for its TLS handshake.
const TLS_HANDSHAKE: Duration = Duration::from_secs(10);

/// Accepts TCP connections and runs each TLS handshake in its own task, so a slow or failing
/// client (one that does not trust the certificate) holds up nobody else.
struct TlsListener {
    local: SocketAddr,
    ready: mpsc::Receiver<(TlsStream<TcpStream>, SocketAddr)>,
}

impl TlsListener {
    fn start(listener: TcpListener, acceptor: TlsAcceptor) -> Self {
        let local = listener
            .local_addr()
            .unwrap_or_else(|_| SocketAddr::from(([127, 0, 0, 1], 0)));
        let (tx, ready) = mpsc::channel(16);
        tokio::spawn(async move {
            loop {
                let (tcp, peer) = match listener.accept().await {
                    Ok(accepted) => accepted,
                    Err(e) => {
                        eprintln!("fixture: accept failed: {e}");
                        tokio::time::sleep(Duration::from_millis(50)).await;
                        continue;
                    }
                };
                let (acceptor, tx) = (acceptor.clone(), tx.clone());
                tokio::spawn(async move {
                    match tokio::time::timeout(TLS_HANDSHAKE, acceptor.accept(tcp)).await {
                        Ok(Ok(tls)) => {
                            let _ = tx.send((tls, peer)).await;
                        }
                        Ok(Err(e)) => eprintln!("fixture: TLS handshake with {peer} failed: {e}"),
                        Err(_) => eprintln!("fixture: TLS handshake with {peer} timed out"),
                    }
                });
            }
        });
        TlsListener { local, ready }
    }
}

impl axum::serve::Listener for TlsListener {
    type Io = TlsStream<TcpStream>;
    type Addr = SocketAddr;

    async fn accept(&mut self) -> (Self::Io, Self::Addr) {
        match self.ready.recv().await {
            Some(accepted) => accepted,
            // The accept task never ends while the listener lives.
            None => std::future::pending().await,
        }
    }

    fn local_addr(&self) -> std::io::Result<Self::Addr> {
        Ok(self.local)
    }
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
