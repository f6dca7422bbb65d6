//! The way back to a real client: which client of `serve` a server's own requests
//! (`elicitation/create`, `sampling/createMessage`, `roots/list`) and its log messages go to.
//!
//! A connection may serve several clients (the HTTP sessions of one `serve --http`, the sessions
//! of the daemon that share it), and over stdio MCP does not say which of them a server's
//! request is about. A question relayed to the wrong client is a phishing channel between
//! sessions (one project's server asks in another project's client, and gets that client's
//! answer, roots or model output), so a server's request goes to its **owner** only:
//! 1. over streamable HTTP, the client whose forwarded request the server answered it on (the
//!    response stream it arrived on, rmcp's [`InboundStreamOrigin`]);
//! 2. else the one client whose forwarded requests are running on the connection, when exactly
//!    one client's are;
//! 3. else, with nothing running, the one client that has ever used the connection, when
//!    exactly one has (it alone can have caused the request) — a client of MCP 2026-07-28
//!    counts among them, but is asked only during its own requests;
//! 4. for `roots/list` on an idle connection several clients used: the client whose
//!    `notifications/roots/list_changed` the gateway forwarded last, once, within
//!    [`ROOTS_CHANGED_WINDOW`] (the server is asking because that client said so).
//!
//! Without an owner ([`Unowned`]) — several clients' calls in flight, or several clients have
//! used an idle connection — elicitation is declined, sampling fails and roots are an empty
//! list, with a log line that names the server (never the contents). The owner must offer the
//! capability itself; no other client is asked instead. A log message goes to its owner (at or
//! above the level that client set) or nowhere: it can carry data of one session's call, so
//! neither "every client" nor "some client" is safe. `notifications/resources/updated` goes to
//! the clients that subscribed to the URI.
//!
//! Subscriptions and log levels are per client over one shared server: a
//! `resources/unsubscribe` reaches the server only when no other client still holds that
//! subscription ([`Askers::others_subscribed`]); `logging/setLevel` sends the server the most
//! verbose level any client asked for ([`Askers::set_level`]), and each client gets only the
//! messages at or above its own.
//!
//! What a server can make a gateway hold is bounded ([`Limits`], [`queue`]).

// Logging is deprecated by protocol 2026-07-28; clients of the versions the gateway speaks use it.
#![allow(deprecated)]

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use rmcp::model::LoggingLevel;
use rmcp::model::{ClientCapabilities, ClientResult, RequestId, ServerRequest};
use rmcp::service::InboundStreamOrigin;
use rmcp::{Peer, RoleServer};
use tokio::sync::{mpsc, oneshot, Notify};

mod queue;
pub(super) use queue::Relaying;
use queue::{LogKey, LogQueue, Refusals};

/// How much a server may make a connection hold for its clients.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    /// Relayed requests (elicitation, sampling, roots) waiting for a client's answer on one
    /// connection; past it a new one is declined (failed, empty) at once.
    pub pending: usize,
    /// How long a relayed `elicitation/create` waits for the person (then `cancel`).
    pub elicitation: Duration,
    /// How long a relayed `sampling/createMessage` waits for the client's model.
    pub sampling: Duration,
    /// How long a relayed `roots/list` waits for the client.
    pub roots: Duration,
    /// Log messages queued per client of a connection (per request for a client of MCP
    /// 2026-07-28); past it they are dropped, and the client is told how many once its queue
    /// has drained.
    pub log_queue: usize,
    /// The bytes those queued log messages may hold at most (their data and logger), so a
    /// server's large messages cannot fill a queue of [`Limits::log_queue`] with megabytes each.
    pub log_bytes: usize,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            pending: 16,
            elicitation: Duration::from_secs(600),
            sampling: Duration::from_secs(600),
            roots: Duration::from_secs(30),
            log_queue: 256,
            log_bytes: 1 << 20,
        }
    }
}

/// Why a server's request or log message has no single client to go to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Unowned {
    /// No client has used the connection yet.
    NoClient,
    /// The client it belongs to has gone.
    Gone,
    /// Calls of this many clients are in flight on the connection.
    Several(usize),
    /// Nothing is in flight and this many clients have used the connection.
    Idle(usize),
    /// Nothing is in flight, and the one client that used the connection speaks MCP
    /// 2026-07-28: it is asked, and sent log messages, only during its own requests.
    BetweenRequests,
}

impl std::fmt::Display for Unowned {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Unowned::NoClient => write!(f, "no client has used this server yet"),
            Unowned::Gone => write!(f, "the client it belongs to has disconnected"),
            Unowned::Several(n) => write!(
                f,
                "calls of {n} sessions are running on this shared server, so which one it \
                 belongs to is unknown"
            ),
            Unowned::Idle(n) => write!(
                f,
                "no call is running and {n} sessions use this shared server, so which one it \
                 belongs to is unknown"
            ),
            Unowned::BetweenRequests => write!(
                f,
                "no call is running, and the client that used this server (MCP 2026-07-28) \
                 can be asked only during its own calls"
            ),
        }
    }
}

/// Where the server's questions for a client of MCP 2026-07-28 go. Such a client cannot be
/// sent a request of the server's; the gateway hands each question to it as an input-required
/// result and answers with what the client sends back (`gateway/translate.rs`).
#[derive(Clone, Debug)]
pub struct Questions {
    /// What the client declared in its request's `_meta`: it is asked only what it offers.
    pub capabilities: ClientCapabilities,
    /// The forwarded call's queue of questions.
    pub queue: mpsc::Sender<Question>,
    /// The log level the request asked for in its `_meta`; without one, no log messages.
    pub log_level: Option<LoggingLevel>,
}

/// One question of the server's (`elicitation/create`, `sampling/createMessage`,
/// `roots/list`) and where its answer goes; dropping `answer` fails the server's request.
#[derive(Debug)]
pub struct Question {
    pub request: ServerRequest,
    pub answer: oneshot::Sender<ClientResult>,
}

/// Who a server's request is for: the client's connection, and for a client of 2026-07-28 the
/// queue its questions go to instead.
#[derive(Clone)]
pub struct Owner {
    pub peer: Peer<RoleServer>,
    pub questions: Option<Questions>,
    /// The running request it was found by, when it was: a client of 2026-07-28 has no
    /// session to key its log queue by, so its log messages go through that request's queue.
    pub(super) request: Option<u64>,
}

impl Owner {
    /// Whether the client declared what `offers` asks for.
    pub fn offers(&self, offers: impl Fn(&ClientCapabilities) -> bool) -> bool {
        match &self.questions {
            Some(questions) => offers(&questions.capabilities),
            None => self::offers(&self.peer, offers),
        }
    }
}

/// How long after a client's `notifications/roots/list_changed` the server's `roots/list` on
/// an idle shared connection is taken to answer it.
pub const ROOTS_CHANGED_WINDOW: Duration = Duration::from_secs(10);

/// The clients a connection may relay to; clones share them.
#[derive(Clone, Default)]
pub struct Askers(Arc<Shared>);

#[derive(Default)]
struct Shared {
    limits: Limits,
    inner: Mutex<Inner>,
    /// Log messages the server sent that are not relayed yet: counted as they arrive, in the
    /// order of the connection, before rmcp hands each to a task of its own.
    unrelayed_logs: AtomicUsize,
    logs_relayed: Notify,
}

#[derive(Default)]
struct Inner {
    next: u64,
    /// Forwarded requests running, oldest first.
    active: Vec<Active>,
    /// The open clients that have used the connection.
    members: Vec<Peer<RoleServer>>,
    /// Clients that used the connection and have gone since.
    departed: usize,
    /// Whether a client without a session (MCP 2026-07-28, which cannot be told apart from
    /// itself) has used the connection: it counts as one more client that may have caused an
    /// idle connection's request, so none is taken to be another client's.
    sessionless: bool,
    /// Resource subscriptions: the URI and the client that asked.
    subscribed: Vec<(String, Peer<RoleServer>)>,
    /// The log level each client asked for.
    levels: Vec<(Peer<RoleServer>, LoggingLevel)>,
    /// Each client's log messages on their way to it.
    logs: Vec<(LogKey, LogQueue)>,
    /// The client that last said its roots changed, and when: the next `roots/list` on an
    /// idle connection within [`ROOTS_CHANGED_WINDOW`] is that client's.
    roots_changed: Option<(Peer<RoleServer>, tokio::time::Instant)>,
    /// Relayed requests waiting for an answer, and the refusals past the cap.
    pending: usize,
    refusals: Refusals,
}

struct Active {
    id: u64,
    client: Peer<RoleServer>,
    /// A 2026-07-28 client's question queue.
    questions: Option<Questions>,
    /// The upstream request, once sent.
    request: Option<RequestId>,
}

impl Active {
    fn owner(&self) -> Result<Owner, Unowned> {
        open(&self.client).map(|peer| Owner {
            peer,
            questions: self.questions.clone(),
            request: Some(self.id),
        })
    }

    /// Whether two running requests are the same client's: the same connection, or for
    /// 2026-07-28 (no connection of its own) the same call's questions.
    fn is(&self, other: &Active) -> bool {
        match (&self.questions, &other.questions) {
            (Some(a), Some(b)) => a.queue.same_channel(&b.queue),
            (None, None) => same(&self.client, &other.client),
            _ => false,
        }
    }
}

impl Inner {
    /// Forgets clients whose connection closed.
    fn prune(&mut self) {
        let before = self.members.len();
        self.members.retain(|p| !p.is_transport_closed());
        self.departed += before - self.members.len();
        self.subscribed.retain(|(_, p)| !p.is_transport_closed());
        self.levels.retain(|(p, _)| !p.is_transport_closed());
        self.logs.retain(|(key, _)| match key {
            LogKey::Client(p) => !p.is_transport_closed(),
            LogKey::Request(_) => true,
        });
    }

    /// Gives back the room a burst of requests left in the lists (10 000 concurrent calls
    /// grow them to 10 000), once they are mostly empty again.
    fn shrink(&mut self) {
        fn shrink<T>(list: &mut Vec<T>) {
            if list.capacity() > 64 && list.len() < list.capacity() / 4 {
                list.shrink_to(list.len() * 2);
            }
        }
        shrink(&mut self.active);
        shrink(&mut self.logs);
    }
}

/// Keeps a client among the active ones until dropped.
pub struct Asking {
    askers: Askers,
    id: u64,
}

impl Asking {
    /// The upstream request this forwarded request was sent as: a server's request that
    /// arrives on its response stream belongs to this client.
    pub fn sent_as(&self, request: RequestId) {
        let mut inner = self.askers.lock();
        if let Some(active) = inner.active.iter_mut().find(|a| a.id == self.id) {
            active.request = Some(request);
        }
    }
}

impl Drop for Asking {
    /// The request ended: it is no longer running, and its log queue (a client of 2026-07-28's)
    /// goes — what it still holds is sent, then its task ends.
    fn drop(&mut self) {
        let mut inner = self.askers.lock();
        inner.active.retain(|a| a.id != self.id);
        let request = LogKey::Request(self.id);
        inner.logs.retain(|(key, _)| !key.is(&request));
        inner.shrink();
    }
}

impl Askers {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.0.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// The limits this connection relays within.
    /// A log message arrived on the connection (counted in the connection's own order, so
    /// before the response that follows it).
    pub fn log_arrived(&self) {
        self.0.unrelayed_logs.fetch_add(1, Ordering::SeqCst);
    }

    /// A log message that arrived has been relayed (or dropped).
    pub fn log_relayed(&self) {
        let left = self
            .0
            .unrelayed_logs
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                Some(n.saturating_sub(1))
            })
            .map_or(0, |was| was.saturating_sub(1));
        if left == 0 {
            self.0.logs_relayed.notify_waiters();
        }
    }

    /// Waits (at most `bound`) until every log message that arrived so far has been relayed:
    /// a call's result then never overtakes the log messages the server sent before it (rmcp
    /// runs each notification in a task of its own, so the response can be seen first).
    pub async fn logs_relayed(&self, bound: Duration) {
        let deadline = tokio::time::Instant::now() + bound;
        loop {
            let relayed = self.0.logs_relayed.notified();
            if self.0.unrelayed_logs.load(Ordering::SeqCst) == 0 {
                return;
            }
            if tokio::time::timeout_at(deadline, relayed).await.is_err() {
                return;
            }
        }
    }

    pub fn limits(&self) -> Limits {
        self.0.limits
    }

    /// `peer` has a request running on the connection until the guard drops; it is a member
    /// of the connection from now on.
    pub fn enter(&self, peer: Peer<RoleServer>, questions: Option<Questions>) -> Asking {
        let mut inner = self.lock();
        inner.prune();
        inner.next += 1;
        let id = inner.next;
        // A client without a session (2026-07-28) cannot be told apart from itself, and is
        // never asked outside its own requests: it is counted once, not listed each time.
        if peer.peer_info().is_none() {
            inner.sessionless = true;
        } else if !inner.members.iter().any(|m| same(m, &peer)) {
            inner.members.push(peer.clone());
        }
        inner.active.push(Active {
            id,
            client: peer,
            questions,
            request: None,
        });
        Asking {
            askers: self.clone(),
            id,
        }
    }

    /// The client a server's request or log message belongs to (see the module docs), with
    /// the question queue of a 2026-07-28 client's call; `origin` is where a request arrived,
    /// when the transport tells.
    pub fn owner_of(&self, origin: Option<&InboundStreamOrigin>) -> Result<Owner, Unowned> {
        let mut inner = self.lock();
        inner.prune();
        if let Some(InboundStreamOrigin::OutboundRequest(id)) = origin {
            if let Some(active) = inner.active.iter().find(|a| a.request.as_ref() == Some(id)) {
                return active.owner();
            }
        }
        let mut calling: Vec<&Active> = Vec::new();
        for active in &inner.active {
            if !calling.iter().any(|a| a.is(active)) {
                calling.push(active);
            }
        }
        match calling.as_slice() {
            [one] => return one.owner(),
            [] => {}
            several => return Err(Unowned::Several(several.len())),
        }
        match (inner.members.as_slice(), inner.departed, inner.sessionless) {
            ([], 0, false) => Err(Unowned::NoClient),
            ([], 0, true) => Err(Unowned::BetweenRequests),
            ([one], 0, false) => open(one).map(|peer| Owner {
                peer,
                questions: None,
                request: None,
            }),
            ([], _, false) => Err(Unowned::Gone),
            (members, departed, sessionless) => Err(Unowned::Idle(
                members.len() + departed + usize::from(sessionless),
            )),
        }
    }

    /// `client` told the server its roots changed ([`ROOTS_CHANGED_WINDOW`]).
    pub fn roots_changed_by(&self, client: &Peer<RoleServer>) {
        self.lock().roots_changed = Some((client.clone(), tokio::time::Instant::now()));
    }

    /// The owner of a `roots/list` ([`Askers::owner_of`]); on an idle connection several clients
    /// used, the client whose `roots/list_changed` the server is answering (once, within
    /// [`ROOTS_CHANGED_WINDOW`]).
    pub fn roots_owner(&self, origin: Option<&InboundStreamOrigin>) -> Result<Owner, Unowned> {
        match self.owner_of(origin) {
            Err(Unowned::Idle(n)) => match self.lock().roots_changed.take() {
                Some((client, at)) if at.elapsed() <= ROOTS_CHANGED_WINDOW => {
                    open(&client).map(|peer| Owner {
                        peer,
                        questions: None,
                        request: None,
                    })
                }
                _ => Err(Unowned::Idle(n)),
            },
            other => other,
        }
    }

    /// A place among the relayed requests waiting for an answer, held until the guard drops;
    /// `None` past [`Limits::pending`] (logged once per burst, naming `server`).
    pub fn relaying(&self, server: &str, what: &str) -> Option<Relaying> {
        let mut inner = self.lock();
        if inner.pending >= self.0.limits.pending {
            inner.refusals.refused(server, what, self.0.limits.pending);
            return None;
        }
        inner.pending += 1;
        Some(Relaying::new(self.clone()))
    }

    fn relayed(&self) {
        let mut inner = self.lock();
        inner.pending = inner.pending.saturating_sub(1);
        inner.refusals.settled();
    }

    /// Relays a log message to its `owner`: at once while the client keeps up, else through
    /// its bounded queue (dropped while that is full, and the client told how many).
    #[allow(deprecated)]
    pub async fn log(
        &self,
        server: &str,
        owner: Owner,
        message: rmcp::model::LoggingMessageNotificationParam,
    ) {
        if let Some(direct) = self.enqueue_log(server, &owner, message) {
            let _ = owner
                .peer
                .notify_logging_message(direct.message.clone())
                .await;
        }
    }

    fn enqueue_log(
        &self,
        server: &str,
        owner: &Owner,
        message: rmcp::model::LoggingMessageNotificationParam,
    ) -> Option<queue::Direct> {
        let key = LogKey::of(owner)?;
        let mut inner = self.lock();
        inner.prune();
        let at = match inner.logs.iter().position(|(k, _)| k.is(&key)) {
            Some(at) => at,
            None => {
                let queue = LogQueue::start(server, owner.peer.clone(), self.0.limits);
                inner.logs.push((key, queue));
                inner.logs.len() - 1
            }
        };
        inner.logs[at].1.push(message)
    }
}

impl Askers {
    /// Notes that `client` subscribed to `uri` (or unsubscribed).
    pub fn subscription(&self, uri: &str, client: &Peer<RoleServer>, subscribe: bool) {
        let mut inner = self.lock();
        inner.prune();
        inner
            .subscribed
            .retain(|(u, p)| !(u == uri && same(p, client)));
        if subscribe {
            inner.subscribed.push((uri.to_owned(), client.clone()));
        }
    }

    /// Whether an open client other than `client` is subscribed to `uri`: then the server
    /// keeps the subscription.
    pub fn others_subscribed(&self, uri: &str, client: &Peer<RoleServer>) -> bool {
        let mut inner = self.lock();
        inner.prune();
        inner
            .subscribed
            .iter()
            .any(|(u, p)| u == uri && !same(p, client))
    }

    /// Notes the log level `client` asked for; the level to send the server: the most
    /// verbose any open client asked for.
    pub fn set_level(&self, client: &Peer<RoleServer>, level: LoggingLevel) -> LoggingLevel {
        let mut inner = self.lock();
        inner.prune();
        inner.levels.retain(|(p, _)| !same(p, client));
        inner.levels.push((client.clone(), level));
        inner
            .levels
            .iter()
            .map(|(_, l)| *l)
            .min_by_key(|l| severity(*l))
            .unwrap_or(level)
    }

    /// Whether `client` wants a message at `level`: at or above the level it asked for (all,
    /// if it asked for none).
    pub fn wants(&self, client: &Peer<RoleServer>, level: LoggingLevel) -> bool {
        self.lock()
            .levels
            .iter()
            .find(|(p, _)| same(p, client))
            .is_none_or(|(_, asked)| severity(level) >= severity(*asked))
    }

    /// The open clients subscribed to `uri`.
    pub fn subscribers(&self, uri: &str) -> Vec<Peer<RoleServer>> {
        self.lock()
            .subscribed
            .iter()
            .filter(|(u, p)| u == uri && !p.is_transport_closed())
            .map(|(_, p)| p.clone())
            .collect()
    }
}

/// The place of `level` in the spec's order, debug lowest.
fn severity(level: LoggingLevel) -> u8 {
    level as u8
}

/// Whether `peer` declared what `offers` asks for.
pub fn offers(peer: &Peer<RoleServer>, offers: impl Fn(&ClientCapabilities) -> bool) -> bool {
    peer.peer_info().is_some_and(|i| offers(&i.capabilities))
}

fn open(peer: &Peer<RoleServer>) -> Result<Peer<RoleServer>, Unowned> {
    if peer.is_transport_closed() {
        Err(Unowned::Gone)
    } else {
        Ok(peer.clone())
    }
}

/// Whether two handles are the same client connection.
fn same(a: &Peer<RoleServer>, b: &Peer<RoleServer>) -> bool {
    match (a.peer_info(), b.peer_info()) {
        (Some(x), Some(y)) => Arc::ptr_eq(&x, &y),
        _ => false,
    }
}
