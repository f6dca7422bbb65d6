//! The way back to a real client: which client of `serve` a server's own requests
//! (`elicitation/create`, `sampling/createMessage`, `roots/list`) and its log messages go to.
//!
//! A connection may serve several clients (the HTTP sessions of one `serve --http`, the sessions
//! of the daemon that share it), and MCP does not say which of them a server's request is about.
//! The answer here: the client whose forwarded request is running on the connection (the newest
//! one when several are), else the client that used the connection last, as long as it is
//! connected. Only a client that declared the capability is asked; without one, elicitation is
//! declined, sampling fails with a sentence that says why, and roots are an empty list.
//! `notifications/resources/updated` goes to the clients that subscribed to the URI.

use std::sync::{Arc, Mutex, PoisonError};

use rmcp::model::ClientCapabilities;
use rmcp::{Peer, RoleServer};

/// The clients a connection may relay to; clones share them.
#[derive(Clone, Default)]
pub struct Askers(Arc<Mutex<Inner>>);

#[derive(Default)]
struct Inner {
    next: u64,
    /// Clients with a forwarded request running, oldest first.
    active: Vec<(u64, Peer<RoleServer>)>,
    /// The client that used the connection last.
    recent: Option<Peer<RoleServer>>,
    /// Resource subscriptions: the URI and the client that asked.
    subscribed: Vec<(String, Peer<RoleServer>)>,
}

/// Keeps a client among the active ones until dropped.
pub struct Asking {
    askers: Askers,
    id: u64,
}

impl Drop for Asking {
    fn drop(&mut self) {
        let mut inner = self.askers.lock();
        inner.active.retain(|(id, _)| *id != self.id);
    }
}

impl Askers {
    fn lock(&self) -> std::sync::MutexGuard<'_, Inner> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// `peer` has a request running on the connection until the guard drops.
    pub fn enter(&self, peer: Peer<RoleServer>) -> Asking {
        let mut inner = self.lock();
        inner.next += 1;
        let id = inner.next;
        inner.recent = Some(peer.clone());
        inner.active.push((id, peer));
        Asking {
            askers: self.clone(),
            id,
        }
    }

    /// The client to relay to: the newest active one that offers what `offers` asks, else the
    /// most recent one if it does; never one whose connection closed.
    pub fn pick(&self, offers: impl Fn(&ClientCapabilities) -> bool) -> Option<Peer<RoleServer>> {
        let inner = self.lock();
        let fits = |peer: &Peer<RoleServer>| {
            !peer.is_transport_closed() && peer.peer_info().is_some_and(|i| offers(&i.capabilities))
        };
        inner
            .active
            .iter()
            .rev()
            .map(|(_, peer)| peer)
            .chain(inner.recent.iter())
            .find(|peer| fits(peer))
            .cloned()
    }

    /// Every distinct open client that is active, or else the most recent one: where a
    /// server's log message goes.
    pub fn listeners(&self) -> Vec<Peer<RoleServer>> {
        let inner = self.lock();
        let mut peers: Vec<Peer<RoleServer>> = Vec::new();
        for (_, peer) in &inner.active {
            if !peer.is_transport_closed() && !peers.iter().any(|p| same(p, peer)) {
                peers.push(peer.clone());
            }
        }
        if peers.is_empty() {
            peers.extend(
                inner
                    .recent
                    .iter()
                    .filter(|p| !p.is_transport_closed())
                    .cloned(),
            );
        }
        peers
    }
}

impl Askers {
    /// Notes that `client` subscribed to `uri` (or unsubscribed).
    pub fn subscription(&self, uri: &str, client: &Peer<RoleServer>, subscribe: bool) {
        let mut inner = self.lock();
        inner
            .subscribed
            .retain(|(u, p)| !(p.is_transport_closed() || (u == uri && same(p, client))));
        if subscribe {
            inner.subscribed.push((uri.to_owned(), client.clone()));
        }
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

/// Whether two handles are the same client connection.
fn same(a: &Peer<RoleServer>, b: &Peer<RoleServer>) -> bool {
    match (a.peer_info(), b.peer_info()) {
        (Some(x), Some(y)) => Arc::ptr_eq(&x, &y),
        _ => false,
    }
}
