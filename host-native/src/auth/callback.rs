//! The loopback redirect of `mcp-reconcile auth NAME`: the listener takes only the browser's
//! redirect to the exact callback path carrying the `state` the authorization request sent
//! (compared in constant time). Anything else — another path, another method, a missing or
//! wrong `state`, as another local user could send to inject a code of their own (login
//! CSRF) or to abort the login — is answered `400` and ignored, and the login keeps waiting,
//! at most [`LOGIN_WAIT`] in all. Connections are served side by side, so one that sends
//! nothing cannot hold the real redirect back.

use std::time::Duration;

use oauth2::CsrfToken;
use rmcp::transport::auth::AuthError;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;

/// How long a login waits for the browser's redirect in all.
pub const LOGIN_WAIT: Duration = Duration::from_secs(300);
/// How long one connection may take to send its request head.
const REQUEST_WAIT: Duration = Duration::from_secs(5);
/// The largest request head read.
const HEAD_LIMIT: usize = 16 * 1024;
/// How many connections are served at once; more are closed unanswered.
const IN_FLIGHT: usize = 32;

/// The `state` parameter of the authorization URL a login sends the browser to.
///
/// # Errors
/// The URL has none (rmcp always sets one).
pub(super) fn state_of(authorization_url: &str) -> Result<String, AuthError> {
    reqwest::Url::parse(authorization_url)
        .ok()
        .and_then(|url| {
            url.query_pairs()
                .find(|(key, _)| key == "state")
                .map(|(_, value)| value.into_owned())
        })
        .filter(|state| !state.is_empty())
        .ok_or_else(|| {
            AuthError::InternalError("the authorization URL carries no `state`".to_owned())
        })
}

/// Waits (at most `wait`) for the browser's redirect to `path` with `state` and answers it;
/// returns the full redirect URL (with `code` and `state`). Every other request is answered
/// `400` and ignored. Connections are served side by side (at most [`IN_FLIGHT`] at once,
/// each for at most [`REQUEST_WAIT`]; when full, the oldest is dropped for the new one), so
/// connections that send nothing delay no other.
///
/// # Errors
/// No such redirect came within `wait`, or the listener failed.
pub(super) async fn accept_redirect(
    listener: &TcpListener,
    redirect_uri: &str,
    path: &str,
    state: &str,
    wait: Duration,
) -> Result<String, AuthError> {
    let deadline = tokio::time::Instant::now() + wait;
    let expected = std::sync::Arc::new(CsrfToken::new(state.to_owned()));
    let (found, mut redirect) = tokio::sync::mpsc::channel::<String>(1);
    let mut serving = tokio::task::JoinSet::new();
    let mut oldest = std::collections::VecDeque::new();
    let timed_out = || {
        AuthError::InternalError(format!(
            "no authorization redirect arrived within {} s; run the command again",
            wait.as_secs()
        ))
    };
    loop {
        tokio::select! {
            query = redirect.recv() => {
                if let Some(query) = query {
                    return Ok(format!("{redirect_uri}?{query}"));
                }
            }
            accepted = listener.accept() => {
                let (socket, _) = accepted
                    .map_err(|e| AuthError::InternalError(format!("redirect listener: {e}")))?;
                while serving.try_join_next().is_some() {}
                oldest.retain(|task: &tokio::task::AbortHandle| !task.is_finished());
                if oldest.len() >= IN_FLIGHT {
                    // Full: the oldest connection makes room. Refusing the new one instead
                    // would let connections that send nothing, opened again and again, keep
                    // the browser's redirect out until the login times out.
                    if let Some(task) = oldest.pop_front() {
                        task.abort();
                    }
                }
                let (found, expected, path) = (found.clone(), expected.clone(), path.to_owned());
                oldest.push_back(serving.spawn(async move {
                    if let Some(query) = serve(socket, &path, &expected).await {
                        let _ = found.try_send(query);
                    }
                }));
            }
            () = tokio::time::sleep_until(deadline) => return Err(timed_out()),
        }
    }
}

/// Answers one connection; the redirect's query if it is the one awaited.
async fn serve(
    mut socket: tokio::net::TcpStream,
    path: &str,
    expected: &CsrfToken,
) -> Option<String> {
    let head = tokio::time::timeout(REQUEST_WAIT, read_head(&mut socket))
        .await
        .unwrap_or_default();
    let query = redirect_query(&head, path, expected);
    let (status, body) = match query {
        Some(_) => (
            "200 OK",
            "mcp-reconcile: authorized; you can close this page.\n",
        ),
        None => (
            "400 Bad Request",
            "mcp-reconcile: not the authorization redirect this login waits for\n",
        ),
    };
    let response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    let _ = tokio::time::timeout(REQUEST_WAIT, async {
        let _ = socket.write_all(response.as_bytes()).await;
        let _ = socket.shutdown().await;
    })
    .await;
    query
}

/// The request head a connection sends, up to [`HEAD_LIMIT`] bytes.
async fn read_head(socket: &mut tokio::net::TcpStream) -> String {
    let mut head = Vec::new();
    let mut chunk = [0u8; 2048];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < HEAD_LIMIT {
        match socket.read(&mut chunk).await {
            Ok(0) | Err(_) => break,
            Ok(n) => head.extend_from_slice(&chunk[..n]),
        }
    }
    String::from_utf8_lossy(&head).into_owned()
}

/// The query of `head` when it is `GET <path>?…` whose `state` is `expected`.
fn redirect_query(head: &str, path: &str, expected: &CsrfToken) -> Option<String> {
    let target = head
        .lines()
        .next()?
        .strip_prefix("GET ")?
        .split(' ')
        .next()?;
    let (at, query) = target.split_once('?')?;
    if at != path {
        return None;
    }
    let parsed = reqwest::Url::parse(&format!("http://localhost/?{query}")).ok()?;
    let mut states = parsed.query_pairs().filter(|(key, _)| key == "state");
    let state = states.next()?.1.into_owned();
    if states.next().is_some() || CsrfToken::new(state) != *expected {
        return None;
    }
    Some(query.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_callback_path_with_the_state_sent_is_the_redirect() {
        let expected = CsrfToken::new("s3cr3t".to_owned());
        let head = |line: &str| format!("{line}\r\nHost: 127.0.0.1\r\n\r\n");
        let ok = redirect_query(
            &head("GET /callback?code=c&state=s3cr3t HTTP/1.1"),
            "/callback",
            &expected,
        );
        assert_eq!(ok.as_deref(), Some("code=c&state=s3cr3t"));
        for bad in [
            "GET /callback?code=evil&state=wrong HTTP/1.1",
            "GET /callback?code=evil HTTP/1.1",
            "GET /callback?code=evil&state=s3cr3t&state=x HTTP/1.1",
            "GET /callback/x?code=c&state=s3cr3t HTTP/1.1",
            "GET /callbackx?code=c&state=s3cr3t HTTP/1.1",
            "POST /callback?code=c&state=s3cr3t HTTP/1.1",
            "GET /favicon.ico HTTP/1.1",
            "",
        ] {
            assert_eq!(
                redirect_query(&head(bad), "/callback", &expected),
                None,
                "{bad}"
            );
        }
        assert_eq!(
            state_of("http://a/authorize?client_id=x&state=abc%2Fd").expect("state"),
            "abc/d"
        );
        assert!(state_of("http://a/authorize?client_id=x").is_err());
    }

    #[tokio::test]
    async fn connections_that_send_nothing_cannot_keep_the_redirect_out() {
        let listener = TcpListener::bind("127.0.0.1:0").await.expect("bind");
        let addr = listener.local_addr().expect("addr");
        let uri = format!("http://{addr}/callback");
        let waiting = tokio::spawn(async move {
            accept_redirect(
                &listener,
                &uri,
                "/callback",
                "s3cr3t",
                Duration::from_secs(60),
            )
            .await
        });
        // More silent connections than are served at once, held open.
        let mut silent = Vec::new();
        for _ in 0..IN_FLIGHT * 2 {
            silent.push(tokio::net::TcpStream::connect(addr).await.expect("connect"));
        }
        let mut browser = tokio::net::TcpStream::connect(addr).await.expect("connect");
        browser
            .write_all(b"GET /callback?code=c&state=s3cr3t HTTP/1.1\r\nHost: x\r\n\r\n")
            .await
            .expect("send");
        let url = tokio::time::timeout(Duration::from_secs(30), waiting)
            .await
            .expect("the redirect got through in time")
            .expect("joined")
            .expect("the redirect");
        assert!(url.ends_with("/callback?code=c&state=s3cr3t"), "{url}");
        drop(silent);
    }
}
