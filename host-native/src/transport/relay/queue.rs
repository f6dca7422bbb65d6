//! The bounds on what a server can make a gateway hold for its clients: the relayed requests
//! waiting for an answer ([`Relaying`], refused past the cap with one log line per burst), and
//! each client's log messages ([`LogQueue`]: a queue bounded in messages and bytes, drained by
//! one task, dropping while full with one warning per burst, and telling the client the count
//! once it has caught up; one per client, or per request for a client without a session:
//! [`LogKey`]).

// Logging is deprecated by protocol 2026-07-28; clients of the versions the gateway speaks use it.
#![allow(deprecated)]

use std::sync::atomic::{AtomicBool, AtomicU64, AtomicU8, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;

use rmcp::model::{LoggingLevel, LoggingMessageNotificationParam};
use rmcp::{Peer, RoleServer};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::{Askers, Limits, Owner};

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

/// Whose log queue a message waits in: a client's with a session of its own (it began with
/// `initialize`), else the running request's it belongs to.
///
/// A client of MCP 2026-07-28 (`server/discover`) has no session: rmcp keeps no peer info for
/// it, so two handles of it cannot be told the same ([`super::same`]). Keyed by the client, each of
/// its log messages used to get a queue (and a task) of its own, kept until the client left.
pub(super) enum LogKey {
    Client(Peer<RoleServer>),
    Request(u64),
}

impl LogKey {
    /// The queue `owner`'s log messages go through; `None` for a client without a session
    /// that has no request running (it asked for none of them).
    pub(super) fn of(owner: &Owner) -> Option<LogKey> {
        if owner.peer.peer_info().is_some() {
            Some(LogKey::Client(owner.peer.clone()))
        } else {
            owner.request.map(LogKey::Request)
        }
    }

    pub(super) fn is(&self, other: &LogKey) -> bool {
        match (self, other) {
            (LogKey::Client(a), LogKey::Client(b)) => super::same(a, b),
            (LogKey::Request(a), LogKey::Request(b)) => a == b,
            _ => false,
        }
    }
}

/// One client's log messages from one server, on their way.
///
/// Bounded in count ([`Limits::log_queue`]) and bytes ([`Limits::log_bytes`]). Past either the
/// newest messages are dropped, not the oldest: what is queued is already on its way in the
/// server's order (a channel cannot take back its oldest without its receiver), and the client
/// is then told, once the queue has drained, how many were left out in that gap
/// ([`dropped_notice`]).
pub(super) struct LogQueue {
    tx: mpsc::Sender<Queued>,
    state: Arc<QueueState>,
    server: String,
    /// Whether a message is being sent directly (see [`LogQueue::push`]): one at a time.
    direct: Arc<AtomicBool>,
    /// The most bytes the queued messages may hold.
    bytes: usize,
    /// Cancelled when the queue goes: its task then sends what is queued for at most
    /// [`ENDED_WAIT`] more.
    ended: CancellationToken,
}

impl Drop for LogQueue {
    fn drop(&mut self) {
        self.ended.cancel();
    }
}

/// How long a queue's task goes on sending once the queue is gone (its request ended, or its
/// client left): a client reading slowly still gets the messages of a call that has answered,
/// and one that reads nothing holds them no longer than this.
pub(super) const ENDED_WAIT: Duration = Duration::from_secs(10);

/// What a queue and the task that drains it share.
#[derive(Default)]
struct QueueState {
    /// Messages dropped since the client was last told.
    dropped: AtomicU64,
    /// The most severe level among them ([`severity`]).
    dropped_level: AtomicU8,
    /// The bytes of the messages queued now.
    queued_bytes: AtomicUsize,
}

/// A queued log message and the bytes it counts for.
struct Queued {
    message: LoggingMessageNotificationParam,
    bytes: usize,
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
    /// A queue within `limits` and the task that sends it to `client`; the task ends when the
    /// queue is dropped (once it has sent what is queued) or the client goes.
    pub(super) fn start(server: &str, client: Peer<RoleServer>, limits: Limits) -> Self {
        let (tx, rx) = mpsc::channel(limits.log_queue.max(1));
        let state = Arc::new(QueueState::default());
        let ended = CancellationToken::new();
        tokio::spawn(drain(
            server.to_owned(),
            client,
            rx,
            state.clone(),
            ended.clone(),
        ));
        LogQueue {
            tx,
            state,
            server: server.to_owned(),
            direct: Arc::new(AtomicBool::new(false)),
            bytes: limits.log_bytes,
            ended,
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
        let bytes = size_of(&message);
        let queued = &self.state.queued_bytes;
        let room = queued
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |now| {
                (now + bytes <= self.bytes).then_some(now + bytes)
            })
            .is_ok();
        let level = message.level;
        let sent = room && {
            match self.tx.try_send(Queued { message, bytes }) {
                Ok(()) => true,
                Err(_) => {
                    queued.fetch_sub(bytes, Ordering::AcqRel);
                    false
                }
            }
        };
        if !sent {
            self.dropped(level);
        }
        None
    }

    /// Counts a message dropped for want of room.
    fn dropped(&self, level: LoggingLevel) {
        self.state
            .dropped_level
            .fetch_max(severity(level), Ordering::Relaxed);
        if self.state.dropped.fetch_add(1, Ordering::Relaxed) == 0 {
            tracing::warn!(
                server = %self.server,
                "a client reads this server's log messages slower than they come; dropping \
                 them until it catches up"
            );
        }
    }
}

/// The place of `level` in the spec's order, debug lowest.
fn severity(level: LoggingLevel) -> u8 {
    level as u8
}

/// About how many bytes `message` holds: its data as JSON text and its logger. Counted as
/// the data is walked, never written out.
fn size_of(message: &LoggingMessageNotificationParam) -> usize {
    fn value(v: &serde_json::Value) -> usize {
        match v {
            serde_json::Value::String(s) => s.len() + 2,
            serde_json::Value::Array(items) => {
                2 + items.iter().map(|i| value(i) + 1).sum::<usize>()
            }
            serde_json::Value::Object(map) => {
                2 + map
                    .iter()
                    .map(|(k, v)| k.len() + 4 + value(v))
                    .sum::<usize>()
            }
            _ => 8,
        }
    }
    value(&message.data) + message.logger.as_ref().map_or(0, String::len)
}

/// What a client is told after `count` of `server`'s log messages were dropped for it, at
/// the most severe of their levels (so a client that wanted them wants this too).
fn dropped_notice(server: &str, count: u64, level: u8) -> LoggingMessageNotificationParam {
    let level = [
        LoggingLevel::Debug,
        LoggingLevel::Info,
        LoggingLevel::Notice,
        LoggingLevel::Warning,
        LoggingLevel::Error,
        LoggingLevel::Critical,
        LoggingLevel::Alert,
        LoggingLevel::Emergency,
    ]
    .into_iter()
    .find(|l| severity(*l) == level)
    .unwrap_or(LoggingLevel::Warning);
    let text = format!(
        "mcp-reconcile dropped {count} log message{} of this server here: they came faster \
         than they could be sent on",
        if count == 1 { "" } else { "s" }
    );
    LoggingMessageNotificationParam::new(level, serde_json::Value::String(text)).with_logger(server)
}

/// Sends the queued messages to `client` one at a time, and the count of the dropped ones
/// each time it has caught up; once the queue is gone, what is left for at most
/// [`ENDED_WAIT`], then counts the rest as dropped.
async fn drain(
    server: String,
    client: Peer<RoleServer>,
    mut rx: mpsc::Receiver<Queued>,
    state: Arc<QueueState>,
    ended: CancellationToken,
) {
    let expired = async {
        ended.cancelled().await;
        tokio::time::sleep(ENDED_WAIT).await;
    };
    tokio::pin!(expired);
    loop {
        let next = tokio::select! {
            next = rx.recv() => next,
            () = &mut expired => break,
        };
        let Some(Queued { message, bytes }) = next else {
            break;
        };
        let level = message.level;
        let sent = tokio::select! {
            sent = client.notify_logging_message(message) => sent.is_ok(),
            () = &mut expired => false,
        };
        state.queued_bytes.fetch_sub(bytes, Ordering::AcqRel);
        if !sent {
            if client.is_transport_closed() {
                return;
            }
            state
                .dropped_level
                .fetch_max(severity(level), Ordering::Relaxed);
            state.dropped.fetch_add(1, Ordering::Relaxed);
            if ended.is_cancelled() {
                break;
            }
            continue;
        }
        if rx.is_empty() {
            tell_dropped(&server, &client, &state).await;
        }
    }
    // What the queue still holds is dropped with it; the client hears the count if it reads.
    rx.close();
    while let Ok(left) = rx.try_recv() {
        state.queued_bytes.fetch_sub(left.bytes, Ordering::AcqRel);
        state
            .dropped_level
            .fetch_max(severity(left.message.level), Ordering::Relaxed);
        state.dropped.fetch_add(1, Ordering::Relaxed);
    }
    let _ = tokio::time::timeout(ENDED_WAIT, tell_dropped(&server, &client, &state)).await;
}

/// Tells the client how many messages were dropped since it was last told, if any.
async fn tell_dropped(server: &str, client: &Peer<RoleServer>, state: &QueueState) {
    let count = state.dropped.swap(0, Ordering::Relaxed);
    if count == 0 || client.is_transport_closed() {
        return;
    }
    let level = state.dropped_level.swap(0, Ordering::Relaxed);
    tracing::info!(
        server,
        dropped = count,
        "log messages dropped for a slow client"
    );
    let _ = client
        .notify_logging_message(dropped_notice(server, count, level))
        .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_size_of_a_message_follows_its_data_and_logger() {
        let small = LoggingMessageNotificationParam::new(
            LoggingLevel::Info,
            serde_json::json!({"text": "hi"}),
        );
        let big = LoggingMessageNotificationParam::new(
            LoggingLevel::Info,
            serde_json::json!({"text": "x".repeat(10_000)}),
        )
        .with_logger("server");
        assert!(size_of(&small) < 64, "{}", size_of(&small));
        assert!(
            (10_000..10_100).contains(&size_of(&big)),
            "{}",
            size_of(&big)
        );
    }

    #[test]
    fn the_dropped_notice_counts_and_keeps_the_most_severe_level() {
        let notice = dropped_notice("a", 3, severity(LoggingLevel::Error));
        assert_eq!(notice.level, LoggingLevel::Error);
        assert_eq!(notice.logger.as_deref(), Some("a"));
        assert!(notice.data.to_string().contains("dropped 3 log messages"));
    }
}
