//! The TCP side of `serve --http`: every accepted connection served by hyper's HTTP/1.1
//! server with a header-read timeout, and a cap on the connections open at once.
//!
//! The bearer token is checked only once a request's headers are in, so without limits any
//! local process could hold connections that never finish a request (slowloris) until the
//! process runs out of file descriptors and the user's own client is refused. So:
//! 1. a request's headers must be complete within [`ConnectionLimits::header_timeout`] of
//!    when hyper starts waiting for them; otherwise the connection is closed. hyper starts
//!    that timer for every request head, also when a keep-alive connection waits for its
//!    next request, so the same limit closes an idle keep-alive connection (a response body
//!    being streamed, such as an SSE stream, is not idle);
//! 2. at most [`ConnectionLimits::max_connections`] connections are open. A connection
//!    accepted past the cap closes the oldest one that has not carried the bearer token yet
//!    ([`Authorized`], set by the guard); when every open connection has carried it, the new
//!    one is closed at once. Connections past the cap are not left in the listen backlog:
//!    there the user's client would queue behind every connection of a flood and be served
//!    only after all of them timed out, while closing the oldest unauthenticated connection
//!    lets it in at once and never closes a connection the user's client already uses.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

use crate::http_guard::{Authorized, ConnectionLimits};

/// An open connection, as the accept loop sees it.
struct Open {
    authorized: Authorized,
    close: CancellationToken,
}

/// The open connections by accept order (the oldest first).
type Registry = Arc<Mutex<BTreeMap<u64, Open>>>;

/// Serves `router` on every connection `listener` accepts, within `limits`, until `stop`
/// is cancelled; then ends every connection gracefully (requests in flight are answered)
/// and returns once all are closed.
pub(super) async fn serve(
    listener: TcpListener,
    router: axum::Router,
    limits: ConnectionLimits,
    stop: CancellationToken,
) {
    let registry: Registry = Arc::default();
    let mut tasks = JoinSet::new();
    let mut next_id = 0_u64;
    let mut last_warning: Option<tokio::time::Instant> = None;
    loop {
        let stream = tokio::select! {
            () = stop.cancelled() => break,
            Some(_) = tasks.join_next(), if !tasks.is_empty() => continue,
            accepted = listener.accept() => match accepted {
                Ok((stream, _)) => stream,
                Err(e) => {
                    // Out of file descriptors, say: wait a little instead of spinning.
                    tracing::warn!("the HTTP gateway could not accept a connection: {e}");
                    tokio::select! {
                        () = stop.cancelled() => break,
                        () = tokio::time::sleep(Duration::from_millis(100)) => continue,
                    }
                }
            },
        };
        let id = next_id;
        next_id += 1;
        let Some(open) = admit(&registry, id, limits.max_connections) else {
            warn_at_cap(
                &mut last_warning,
                limits.max_connections,
                "closed a new connection",
            );
            continue;
        };
        if open.evicted {
            warn_at_cap(
                &mut last_warning,
                limits.max_connections,
                "closed the oldest connection that has not sent the token",
            );
        }
        tasks.spawn(serve_connection(
            stream,
            router.clone(),
            limits.header_timeout,
            open,
            stop.clone(),
            Arc::clone(&registry),
        ));
    }
    while tasks.join_next().await.is_some() {}
}

/// What [`admit`] gives a new connection.
struct Admitted {
    id: u64,
    authorized: Authorized,
    close: CancellationToken,
    /// An older connection was closed to make room.
    evicted: bool,
}

/// Registers connection `id`, making room past `max` by closing the oldest connection that
/// has not carried the token; `None` when every open connection has.
fn admit(registry: &Registry, id: u64, max: usize) -> Option<Admitted> {
    let mut open = registry.lock().unwrap_or_else(PoisonError::into_inner);
    let mut evicted = false;
    while open.len() >= max {
        let oldest = open
            .iter()
            .find(|(_, o)| !o.authorized.is_set())
            .map(|(id, _)| *id)?;
        if let Some(old) = open.remove(&oldest) {
            old.close.cancel();
        }
        evicted = true;
    }
    let authorized = Authorized::default();
    let close = CancellationToken::new();
    open.insert(
        id,
        Open {
            authorized: authorized.clone(),
            close: close.clone(),
        },
    );
    Some(Admitted {
        id,
        authorized,
        close,
        evicted,
    })
}

/// Warns that the connection cap was reached, at most every 10 s (a flood must not flood
/// the log too).
fn warn_at_cap(last: &mut Option<tokio::time::Instant>, max: usize, what: &str) {
    let now = tokio::time::Instant::now();
    if last.is_some_and(|at| now.duration_since(at) < Duration::from_secs(10)) {
        return;
    }
    *last = Some(now);
    tracing::warn!(
        "the HTTP gateway has {max} connections open (--max-connections {max}): {what}; \
         further cases are not logged for 10 s"
    );
}

/// One connection: HTTP/1.1 with the header-read timeout, every request marked with the
/// connection's [`Authorized`] for the guard. Ends when the client closes, the timeout
/// fires, the accept loop closes it to make room, or (gracefully) at `stop`.
async fn serve_connection(
    stream: TcpStream,
    router: axum::Router,
    header_timeout: Duration,
    open: Admitted,
    stop: CancellationToken,
    registry: Registry,
) {
    let _ = stream.set_nodelay(true);
    let authorized = open.authorized.clone();
    let service = hyper::service::service_fn(move |mut request: hyper::Request<Incoming>| {
        request.extensions_mut().insert(authorized.clone());
        let mut router = router.clone();
        tower_service::Service::call(&mut router, request)
    });
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder
        .timer(TokioTimer::new())
        .header_read_timeout(header_timeout)
        .keep_alive(true);
    let connection = builder.serve_connection(TokioIo::new(stream), service);
    tokio::pin!(connection);
    tokio::select! {
        result = connection.as_mut() => {
            if let Err(e) = result {
                tracing::debug!("an HTTP connection ended: {e}");
            }
        }
        // Dropping the connection closes the socket.
        () = open.close.cancelled() => {}
        () = stop.cancelled() => {
            connection.as_mut().graceful_shutdown();
            let _ = connection.await;
        }
    }
    registry
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .remove(&open.id);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn past_the_cap_the_oldest_connection_without_the_token_makes_room() {
        let registry: Registry = Arc::default();
        let first = admit(&registry, 0, 3).expect("room");
        let second = admit(&registry, 1, 3).expect("room");
        let third = admit(&registry, 2, 3).expect("room");
        assert!(!first.evicted && !second.evicted && !third.evicted);
        // The first has carried the token: the second is the oldest without.
        first.authorized.set();
        let fourth = admit(&registry, 3, 3).expect("room made");
        assert!(fourth.evicted);
        assert!(second.close.is_cancelled());
        assert!(!first.close.is_cancelled() && !third.close.is_cancelled());
        // Every open connection has carried the token: the new one is refused.
        third.authorized.set();
        fourth.authorized.set();
        assert!(admit(&registry, 4, 3).is_none());
        assert_eq!(registry.lock().expect("lock").len(), 3);
    }
}
