//! The legacy HTTP+SSE client transport (MCP 2024-11-05), which rmcp no longer ships.
//!
//! 1. `GET url` with `Accept: text/event-stream` opens the event stream;
//! 2. the server's first `endpoint` event names the URL to POST to (resolved against `url`, and
//!    required to have the same origin, so configured headers never go elsewhere);
//! 3. every outgoing JSON-RPC message is one `POST` of JSON to that endpoint (the answer comes
//!    on the stream, the POST itself only says 2xx);
//! 4. every `message` event on the stream is one incoming JSON-RPC message.
//!
//! The session lives as long as the stream: its end (or a failed POST) ends the connection, with
//! the reason recorded in the shared [`Failure`]. [`connect`] opens one for a `url` entry.

use std::future::Future;
use std::pin::Pin;

use futures::{Stream, StreamExt};
use reqwest::header::{HeaderMap, HeaderValue, ACCEPT, CONTENT_TYPE};
use reqwest::Url;
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::RoleClient;
use sse_stream::{Sse, SseStream};

use super::remote::{self, Failure, Watched};
use super::session::{handshake, Handler, HandshakeFailure, Opening};
use super::{
    check_http_url, describe, finish_remote, ConnectError, ConnectErrorKind, ConnectOptions,
    Connection, Ctx,
};
use crate::redact::mask_url;
use mcp_reconcile_kernel::ServerConfig;
use std::sync::Arc;
use tokio::sync::Notify;

type EventStream = Pin<Box<dyn Stream<Item = Result<Sse, sse_stream::Error>> + Send>>;

/// Why the SSE transport failed. Every URL in it went through [`mask_url`].
#[derive(Debug, thiserror::Error)]
pub enum SseError {
    #[error("{0} is not an http(s) URL")]
    BadUrl(String),
    #[error("GET {url} failed: {source}")]
    Connect {
        url: String,
        #[source]
        source: reqwest::Error,
    },
    #[error("GET {url} answered HTTP {status}")]
    OpenStatus { url: String, status: u16 },
    #[error("GET {url} answered with content type {content_type:?}, not text/event-stream")]
    NotEventStream { url: String, content_type: String },
    #[error("the event stream ended before the server sent its `endpoint` event")]
    NoEndpoint,
    #[error("the `endpoint` event {0:?} is not a valid URL")]
    BadEndpoint(String),
    #[error("the `endpoint` event points to another origin ({0}); refusing to send to it")]
    ForeignEndpoint(String),
    #[error("the event stream failed: {0}")]
    Stream(String),
    #[error("cannot encode a message: {0}")]
    Encode(#[from] serde_json::Error),
    #[error("POST {url} failed: {source}")]
    Post {
        url: String,
        #[source]
        source: reqwest::Error,
    },
    #[error("POST {url} answered HTTP {status}")]
    PostStatus { url: String, status: u16 },
}

/// A connected legacy SSE session.
pub struct SseTransport {
    client: reqwest::Client,
    endpoint: Url,
    headers: HeaderMap,
    events: Option<EventStream>,
    failure: Failure,
}

impl SseTransport {
    /// Opens the event stream at `url` and waits for the `endpoint` event.
    ///
    /// # Errors
    /// A bad URL, a failed or non-2xx GET, a response that is not an event stream, a stream that
    /// ends before `endpoint`, or an endpoint on another origin.
    pub async fn connect(
        client: reqwest::Client,
        url: &str,
        headers: HeaderMap,
        failure: Failure,
    ) -> Result<Self, SseError> {
        let shown = mask_url(url);
        let base = Url::parse(url).map_err(|_| SseError::BadUrl(shown.clone()))?;
        if !matches!(base.scheme(), "http" | "https") {
            return Err(SseError::BadUrl(shown));
        }
        let response = client
            .get(base.clone())
            .headers(headers.clone())
            .header(ACCEPT, HeaderValue::from_static("text/event-stream"))
            .send()
            .await
            .map_err(|source| SseError::Connect {
                url: shown.clone(),
                source: source.without_url(),
            })?;
        if !response.status().is_success() {
            return Err(SseError::OpenStatus {
                url: shown,
                status: response.status().as_u16(),
            });
        }
        let content_type = response
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_owned();
        if !content_type
            .to_ascii_lowercase()
            .starts_with("text/event-stream")
        {
            return Err(SseError::NotEventStream {
                url: shown,
                content_type,
            });
        }
        let mut events: EventStream =
            Box::pin(SseStream::from_bytes_stream(response.bytes_stream()));

        let endpoint = loop {
            match events.next().await {
                Some(Ok(event)) if event.event.as_deref() == Some("endpoint") => {
                    let data = event.data.unwrap_or_default();
                    let endpoint = base
                        .join(data.trim())
                        .map_err(|_| SseError::BadEndpoint(data.clone()))?;
                    if endpoint.origin() != base.origin() {
                        return Err(SseError::ForeignEndpoint(
                            endpoint.origin().ascii_serialization(),
                        ));
                    }
                    break endpoint;
                }
                Some(Ok(_)) => continue,
                Some(Err(e)) => return Err(SseError::Stream(e.to_string())),
                None => return Err(SseError::NoEndpoint),
            }
        };
        tracing::debug!(endpoint = %mask_url(endpoint.as_str()), "legacy SSE session opened");
        Ok(SseTransport {
            client,
            endpoint,
            headers,
            events: Some(events),
            failure,
        })
    }
}

impl Transport<RoleClient> for SseTransport {
    type Error = SseError;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let body = serde_json::to_vec(&item);
        let request = self
            .client
            .post(self.endpoint.clone())
            .headers(self.headers.clone())
            .header(CONTENT_TYPE, HeaderValue::from_static("application/json"));
        let url = mask_url(self.endpoint.as_str());
        async move {
            let response = request
                .body(body?)
                .send()
                .await
                .map_err(|source| SseError::Post {
                    url: url.clone(),
                    source: source.without_url(),
                })?;
            if response.status().is_success() {
                Ok(())
            } else {
                Err(SseError::PostStatus {
                    url,
                    status: response.status().as_u16(),
                })
            }
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        let events = self.events.as_mut()?;
        loop {
            match events.next().await {
                Some(Ok(event)) => {
                    if !matches!(event.event.as_deref(), None | Some("message")) {
                        continue;
                    }
                    let Some(data) = event.data else { continue };
                    match serde_json::from_str(&data) {
                        Ok(message) => return Some(message),
                        Err(e) => {
                            tracing::warn!("ignoring an SSE message that is not JSON-RPC: {e}");
                        }
                    }
                }
                Some(Err(e)) => {
                    self.failure
                        .record(SseError::Stream(e.to_string()).to_string());
                    return None;
                }
                None => {
                    self.failure
                        .record("the server closed the SSE event stream".to_owned());
                    return None;
                }
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        // Dropping the response body closes the GET; the server then ends the session.
        self.events = None;
        Ok(())
    }
}

/// Connects to a legacy SSE server (`url`): opens the stream, then the legacy handshake.
pub(super) async fn connect(
    ctx: Ctx,
    config: &ServerConfig,
    opts: ConnectOptions,
) -> Result<Connection, ConnectError> {
    let url = config.str_field("url").unwrap_or_default().to_owned();
    let spawn_error = |what: String| ctx.error(ConnectErrorKind::Spawn, &what);
    check_http_url(&url).map_err(spawn_error)?;
    let headers = remote::configured_headers(config, &ctx.name).map_err(spawn_error)?;
    let trust = crate::tls::Trust::of_launch(opts.launch.as_deref());
    let client = crate::http_client::build_http_client_trusting(trust)
        .await
        .map_err(spawn_error)?;
    let failure = Failure::default();
    let relist = Arc::new(Notify::new());
    let attempt = async {
        let transport = SseTransport::connect(client, &url, headers, failure.clone())
            .await
            .map_err(|e| HandshakeFailure {
                kind: ConnectErrorKind::Handshake,
                what: format!(
                    "could not open its SSE stream: {}{}",
                    describe(&e),
                    streamable_type_hint(config)
                ),
                in_initialize: false,
            })?;
        handshake(
            Handler::new(relist.clone(), opts.elicitation.clone(), &ctx),
            Watched::new(transport, failure.clone(), &ctx.name, None),
            None,
            Opening::Initialize,
        )
        .await
    };
    let outcome = tokio::time::timeout(opts.handshake_timeout, attempt).await;
    finish_remote(ctx, opts, outcome, relist, failure, &url)
}

/// For a `url` entry whose `type` is another client's name for streamable HTTP (Claude Code's
/// `http` / `streamable-http`, Cline's `streamableHttp`): where this layout looks for that
/// transport. Here `url` is legacy SSE, so such a server fails to open a stream.
fn streamable_type_hint(config: &ServerConfig) -> &'static str {
    match config.str_field("type") {
        Some("http" | "streamable-http" | "streamableHttp") => {
            "; its `\"type\"` names streamable HTTP, which this file's format reads from \
             `httpUrl` (`url` means legacy SSE here): rename `url` to `httpUrl`"
        }
        _ => "",
    }
}
