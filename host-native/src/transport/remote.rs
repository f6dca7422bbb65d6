//! What streamable HTTP and legacy SSE share: the configured headers, the HTTP client
//! ([`crate::http_client`]), and [`Watched`], a transport wrapper that turns the first transport failure into
//! the end of the connection and remembers why (the HTTP status or transport error), because
//! rmcp's service loop only says "closed".

use std::collections::HashMap;
use std::future::Future;
use std::sync::Arc;

use mcp_reconcile_kernel::json::Value;
use mcp_reconcile_kernel::ServerConfig;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use rmcp::service::{RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use rmcp::RoleClient;
use tokio::sync::watch;

/// Headers the MCP transports set themselves; a configured one would break the protocol.
const TRANSPORT_HEADERS: [&str; 4] = [
    "accept",
    "mcp-session-id",
    "mcp-protocol-version",
    "last-event-id",
];

/// The configured `headers`, every value marked sensitive (never printed by `Debug`). Headers
/// the transport owns (`Accept`, `Mcp-Session-Id`, ...) are left out with a warning.
///
/// # Errors
/// A header name or value that HTTP does not allow (the message names the key, never the value).
pub fn configured_headers(config: &ServerConfig, server: &str) -> Result<HeaderMap, String> {
    let mut headers = HeaderMap::new();
    let Some(Value::Object(map)) = config.get("headers") else {
        return Ok(headers);
    };
    for (key, value) in map.iter() {
        if matches!(value, Value::Null | Value::Object(_) | Value::Array(_)) {
            continue;
        }
        if TRANSPORT_HEADERS
            .iter()
            .any(|h| key.eq_ignore_ascii_case(h))
        {
            tracing::warn!(server, header = %key, "ignoring a header the MCP transport sets itself");
            continue;
        }
        let name = HeaderName::from_bytes(key.as_bytes())
            .map_err(|_| format!("has an invalid header name `{key}` in `headers`"))?;
        let mut value = HeaderValue::from_str(&value.to_js_string())
            .map_err(|_| format!("has an invalid value for `headers.{key}`"))?;
        value.set_sensitive(true);
        headers.append(name, value);
    }
    Ok(headers)
}

/// Splits headers for rmcp's streamable HTTP client: a `Bearer` Authorization becomes its auth
/// token (so rmcp's 401 handling knows it); everything else is sent as is.
pub fn split_bearer(headers: HeaderMap) -> (Option<String>, HashMap<HeaderName, HeaderValue>) {
    let mut token = None;
    let mut rest = HashMap::new();
    for (name, value) in headers.iter() {
        if name == reqwest::header::AUTHORIZATION && token.is_none() {
            if let Some(bearer) = value
                .to_str()
                .ok()
                .and_then(|v| v.split_once(' '))
                .filter(|(scheme, _)| scheme.eq_ignore_ascii_case("bearer"))
                .map(|(_, token)| token.trim().to_owned())
            {
                token = Some(bearer);
                continue;
            }
        }
        rest.insert(name.clone(), value.clone());
    }
    (token, rest)
}

/// The first failure of a remote transport, shared by the transport and the connection monitor,
/// and whether a failure said the server wants an authorization the host does not have.
#[derive(Clone)]
pub struct Failure(
    Arc<watch::Sender<Option<String>>>,
    Arc<std::sync::atomic::AtomicBool>,
);

impl Default for Failure {
    fn default() -> Self {
        Failure(Arc::new(watch::channel(None).0), Arc::default())
    }
}

impl Failure {
    /// Records a failure that asked for authorization ([`crate::auth::is_auth_required`]).
    pub fn record_auth_required(&self) {
        self.1.store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// Whether a failure asked for authorization.
    pub fn auth_required(&self) -> bool {
        self.1.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Records `reason` unless a failure was recorded already (the first one is the cause).
    pub fn record(&self, reason: String) {
        self.0.send_if_modified(|slot| {
            if slot.is_none() {
                *slot = Some(reason);
                true
            } else {
                false
            }
        });
    }

    pub fn get(&self) -> Option<String> {
        self.0.borrow().clone()
    }

    /// Resolves once a failure is recorded.
    pub fn occurred(&self) -> impl Future<Output = ()> + Send + 'static {
        let mut rx = self.0.subscribe();
        async move {
            let _ = rx.wait_for(Option::is_some).await;
        }
    }
}

/// A transport whose first send failure (or a failure its inner transport records) ends the
/// connection: `receive` then returns `None`, so rmcp's service stops and the monitor reports
/// `Closed` with the recorded reason.
pub struct Watched<T> {
    inner: T,
    failure: Failure,
    name: String,
    tokens: Option<crate::auth::TokenStore>,
}

impl<T> Watched<T> {
    /// `name`: the server's, for the messages a failure shows. `tokens`: where a `401` /
    /// `403` challenge is kept (an OAuth connection), for `mcp-reconcile auth NAME`.
    pub fn new(
        inner: T,
        failure: Failure,
        name: &str,
        tokens: Option<crate::auth::TokenStore>,
    ) -> Self {
        Watched {
            inner,
            failure,
            name: name.to_owned(),
            tokens,
        }
    }
}

impl<T> Transport<RoleClient> for Watched<T>
where
    T: Transport<RoleClient>,
{
    type Error = T::Error;

    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        let sending = self.inner.send(item);
        let failure = self.failure.clone();
        let name = self.name.clone();
        let tokens = self.tokens.clone();
        async move {
            let result = sending.await;
            if let Err(e) = &result {
                // Kept before the failure is recorded, so no caller hears of the failure (and
                // runs `auth`) before the challenge is on disk.
                if let (Some(challenge), Some(store)) = (crate::auth::challenge_of(e), &tokens) {
                    if let Err(e) = store.record_challenge(challenge).await {
                        tracing::warn!(error = %e, "cannot keep the server's authorization challenge");
                    }
                }
                if let Some(scope) = crate::auth::step_up_scope(e) {
                    failure.record_auth_required();
                    failure.record(crate::auth::step_up_message(&name, scope.as_deref()));
                } else if crate::auth::is_auth_required(e) {
                    failure.record_auth_required();
                }
                failure.record(super::describe::describe(e));
            }
            result
        }
    }

    fn receive(&mut self) -> impl Future<Output = Option<RxJsonRpcMessage<RoleClient>>> + Send {
        let failed = self.failure.occurred();
        let inner = &mut self.inner;
        async move {
            tokio::select! {
                message = inner.receive() => message,
                () = failed => None,
            }
        }
    }

    fn close(&mut self) -> impl Future<Output = Result<(), Self::Error>> + Send {
        self.inner.close()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::http_client::{http_client, MAX_REDIRECTS};

    fn cfg(text: &str) -> ServerConfig {
        ServerConfig::from_json(text).expect("a config object")
    }

    #[test]
    fn headers_are_sensitive_and_transport_headers_are_dropped() {
        let c = cfg(
            r#"{"httpUrl":"http://x","headers":{"Authorization":"Bearer tok","X-Key":"k1","Accept":"text/html","N":7}}"#,
        );
        let headers = configured_headers(&c, "s").expect("valid headers");
        assert_eq!(headers.len(), 3);
        assert!(headers.get("accept").is_none());
        assert!(headers.values().all(HeaderValue::is_sensitive));
        assert_eq!(headers.get("n").map(|v| v.as_bytes()), Some(&b"7"[..]));
        assert!(!format!("{headers:?}").contains("tok"));

        let (token, rest) = split_bearer(headers);
        assert_eq!(token.as_deref(), Some("tok"));
        assert_eq!(rest.len(), 2);

        let (token, rest) = split_bearer(
            configured_headers(&cfg(r#"{"headers":{"Authorization":"Basic abc"}}"#), "s")
                .expect("valid"),
        );
        assert_eq!(token, None);
        assert_eq!(rest.len(), 1, "a non-bearer Authorization is sent as is");

        let bad = configured_headers(&cfg(r#"{"headers":{"X":"a\nb"}}"#), "s")
            .expect_err("newline in a value");
        assert!(
            bad.contains("`headers.X`") && !bad.contains("a\nb"),
            "{bad}"
        );
    }

    /// A one-request-per-connection HTTP server on 127.0.0.1 that answers with `respond(head)`
    /// and records every request head it saw.
    async fn tiny_server(
        respond: impl Fn(&str) -> String + Send + Sync + 'static,
    ) -> (u16, Arc<std::sync::Mutex<Vec<String>>>) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind");
        let port = listener.local_addr().expect("addr").port();
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let log = seen.clone();
        tokio::spawn(async move {
            while let Ok((mut socket, _)) = listener.accept().await {
                let mut buf = Vec::new();
                let mut chunk = [0u8; 4096];
                while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                    match socket.read(&mut chunk).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => buf.extend_from_slice(&chunk[..n]),
                    }
                }
                let head = String::from_utf8_lossy(&buf).into_owned();
                log.lock().expect("log").push(head.clone());
                let _ = socket.write_all(respond(&head).as_bytes()).await;
                let _ = socket.shutdown().await;
            }
        });
        (port, seen)
    }

    fn redirect_to(location: &str) -> String {
        format!(
            "HTTP/1.1 307 Temporary Redirect\r\nLocation: {location}\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
        )
    }

    const OK: &str = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok";

    #[tokio::test]
    async fn configured_headers_never_follow_a_redirect_to_another_origin() {
        let (other, other_seen) = tiny_server(|_| OK.to_owned()).await;
        let target = format!("http://127.0.0.1:{other}/mcp?api_key=leaked");
        let (first, first_seen) = tiny_server(move |_| redirect_to(&target)).await;
        let client = http_client().expect("client");
        let error = client
            .post(format!("http://127.0.0.1:{first}/mcp"))
            .header("X-Api-Key", "hdr-secret")
            .send()
            .await
            .expect_err("a cross-origin redirect is refused");
        let text = super::super::describe::describe(&error);
        assert!(
            text.contains("redirected to another origin (http://127.0.0.1:")
                && text.contains("headers are not sent there — use the final URL in the config")
                && text.contains("api_key=***")
                && !text.contains("leaked"),
            "{text}"
        );
        assert_eq!(first_seen.lock().expect("log").len(), 1);
        assert!(
            other_seen.lock().expect("log").is_empty(),
            "the other origin got a request"
        );
    }

    #[tokio::test]
    async fn same_origin_redirects_are_followed_up_to_the_limit() {
        let (port, seen) = tiny_server(|head| {
            let path = head.split_whitespace().nth(1).unwrap_or("/");
            match path
                .strip_prefix("/hop/")
                .and_then(|n| n.parse::<usize>().ok())
            {
                Some(0) => OK.to_owned(),
                Some(n) => redirect_to(&format!("/hop/{}", n - 1)),
                None => OK.to_owned(),
            }
        })
        .await;
        let client = http_client().expect("client");
        let response = client
            .get(format!("http://127.0.0.1:{port}/hop/{MAX_REDIRECTS}"))
            .header("X-Api-Key", "hdr-secret")
            .send()
            .await
            .expect("ten same-origin redirects are followed");
        assert!(response.status().is_success());
        let heads = seen.lock().expect("log").clone();
        assert_eq!(heads.len(), MAX_REDIRECTS + 1);
        assert!(heads
            .iter()
            .all(|h| h.to_ascii_lowercase().contains("x-api-key: hdr-secret")));

        let error = client
            .get(format!("http://127.0.0.1:{port}/hop/{}", MAX_REDIRECTS + 1))
            .send()
            .await
            .expect_err("one more is too many");
        assert!(
            super::super::describe::describe(&error).contains("stopped after 10 redirects"),
            "{error}"
        );
    }

    #[tokio::test]
    async fn the_first_failure_wins_and_wakes_waiters() {
        let failure = Failure::default();
        let waiting = tokio::spawn(failure.occurred());
        failure.record("HTTP 502".to_owned());
        failure.record("later".to_owned());
        waiting.await.expect("waiter ends");
        assert_eq!(failure.get().as_deref(), Some("HTTP 502"));
    }
}
