//! The bounds on what a server can make a gateway hold for its clients: the relayed requests
//! waiting for an answer ([`Relaying`], refused past the cap with one log line per burst), and
//! each client's log messages ([`LogQueue`]: a bounded queue drained by one task, dropping
//! while full with one warning per burst and the count once it has caught up).

// Logging is deprecated by protocol 2026-07-28; clients of the versions the gateway speaks use it.
#![allow(deprecated)]

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;

use rmcp::model::LoggingMessageNotificationParam;
use rmcp::{Peer, RoleServer};
use tokio::sync::mpsc;

use super::Askers;

/// A relayed request waiting for a client's answer; it counts against the cap until dropped.
pub struct Relaying(Askers);

impl Relaying {
    pub(super) fn new(askers: Askers) -> Self {
        Relaying(askers)
    }
}

impl Drop for Relaying {
    fn drop(&mut self) {
        self.0.relayed();
    }
}

/// Requests declined past the cap since the last one was answered.
#[derive(Default)]
pub(super) struct Refusals {
    count: u64,
    server: String,
}

impl Refusals {
    pub(super) fn refused(&mut self, server: &str, what: &str, cap: usize) {
        if self.count == 0 {
            tracing::warn!(
                server,
                "{cap} requests of this server already wait for a client's answer; {what} and \
                 the next ones are declined at once until one is answered"
            );
            server.clone_into(&mut self.server);
        }
        self.count += 1;
    }

    /// A relayed request was answered: room again.
    pub(super) fn settled(&mut self) {
        if self.count > 0 {
            tracing::info!(
                server = %self.server,
                declined = self.count,
                "relayed requests are below the cap again"
            );
            self.count = 0;
        }
    }
}

/// One client's log messages from one server, on their way.
pub(super) struct LogQueue {
    tx: mpsc::Sender<LoggingMessageNotificationParam>,
    dropped: Arc<AtomicU64>,
    server: String,
    /// Whether a message is being sent directly (see [`LogQueue::push`]): one at a time.
    direct: Arc<AtomicBool>,
}

/// A log message to send now, by the task that relays it; the next message may be sent
/// directly once this is dropped.
pub struct Direct {
    pub message: LoggingMessageNotificationParam,
    sending: Arc<AtomicBool>,
}

impl Drop for Direct {
    fn drop(&mut self) {
        self.sending.store(false, Ordering::Release);
    }
}

impl LogQueue {
    /// A queue of `capacity` messages and the task that sends them to `client`; it ends when
    /// the queue is dropped or the client goes.
    pub(super) fn start(server: &str, client: Peer<RoleServer>, capacity: usize) -> Self {
        let (tx, rx) = mpsc::channel(capacity.max(1));
        let dropped = Arc::new(AtomicU64::new(0));
        tokio::spawn(drain(server.to_owned(), client, rx, dropped.clone()));
        LogQueue {
            tx,
            dropped,
            server: server.to_owned(),
            direct: Arc::new(AtomicBool::new(false)),
        }
    }

    /// Queues `message`, or drops it while the queue is full — or, while the client keeps up
    /// (nothing queued, no other message being sent directly), hands it back to be sent at
    /// once by the task relaying it. That keeps a call's log messages as close to the server's
    /// order as the direct relay was: one more hop through the queue's task let the call's
    /// result overtake them. At most one message is sent directly at a time, so a client that
    /// stops reading holds one relaying task, and the rest waits in (or is dropped from) the
    /// queue.
    pub(super) fn push(&self, message: LoggingMessageNotificationParam) -> Option<Direct> {
        if self.tx.capacity() == self.tx.max_capacity() && !self.direct.swap(true, Ordering::AcqRel)
        {
            return Some(Direct {
                message,
                sending: self.direct.clone(),
            });
        }
        if let Err(mpsc::error::TrySendError::Full(_)) = self.tx.try_send(message) {
            if self.dropped.fetch_add(1, Ordering::Relaxed) == 0 {
                tracing::warn!(
                    server = %self.server,
                    "a client reads this server's log messages slower than they come; dropping \
                     them until it catches up"
                );
            }
        }
        None
    }
}

#[allow(deprecated)]
async fn drain(
    server: String,
    client: Peer<RoleServer>,
    mut rx: mpsc::Receiver<LoggingMessageNotificationParam>,
    dropped: Arc<AtomicU64>,
) {
    while let Some(message) = rx.recv().await {
        if client.notify_logging_message(message).await.is_err() && client.is_transport_closed() {
            return;
        }
        if rx.is_empty() {
            let count = dropped.swap(0, Ordering::Relaxed);
            if count > 0 {
                tracing::info!(
                    server,
                    dropped = count,
                    "log messages dropped for a slow client"
                );
            }
        }
    }
}
