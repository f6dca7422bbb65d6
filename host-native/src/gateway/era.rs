//! What `serve` does differently for a client of MCP 2026-07-28 (SPEC §16), and how a hot
//! reload is announced to the clients of both eras ([`Gateway::announce`](super::Gateway)):
//! the listen streams it is announced on, and the cache hints and `resultType` its results
//! carry. rmcp answers `server/discover`, validates each stateless request's `_meta` and
//! headers, and drops what an older client must not see (`resultType: "complete"`, cache
//! hints); the gateway says what only it knows.

use std::sync::{Arc, Mutex, PoisonError};

use rmcp::model::{
    CacheScope, PromptListChangedNotification, ResourceListChangedNotification, ResultType,
    ServerNotification, SubscriptionFilter, ToolListChangedNotification,
};
use rmcp::service::{SubscriptionContext, SubscriptionSendError, SubscriptionSink};

use rmcp::{Peer, RoleServer};
use tokio::sync::mpsc;

use crate::host::{CatalogChange, HostEvent};

/// How long a client may treat a list or a read as fresh. The catalog follows the settings
/// files, so the next edit may change any list at any moment: a short time, and every change
/// is announced when it happens (`list_changed`, or on a listen stream).
pub const FRESH_MS: u64 = 1_000;

/// Whose a cached list is: this user's (it depends on their settings and approvals).
pub const SCOPE: CacheScope = CacheScope::Private;

/// The `subscriptions/listen` streams of modern clients, each with the filter it accepted.
#[derive(Clone, Default)]
pub struct Listeners(Arc<Mutex<Vec<SubscriptionSink>>>);

impl Listeners {
    /// The part of `requested` the gateway serves: the three list changes. Resource updates
    /// on a listen stream are not relayed yet, so they are left out of the acknowledgement.
    pub fn accepted(requested: &SubscriptionFilter) -> SubscriptionFilter {
        let mut accepted = requested.clone();
        accepted.resource_subscriptions = None;
        accepted
    }

    /// Keeps `subscription` until its client cancels it or the transport closes.
    pub async fn listen(&self, subscription: SubscriptionContext) {
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(subscription.sink().clone());
        subscription.cancelled().await;
        let id = subscription.sink().id().clone();
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .retain(|sink| *sink.id() != id);
    }

    /// Each list `change` names, to every stream that asked for it; returns how many streams
    /// were open.
    pub async fn announce(&self, change: &CatalogChange) -> usize {
        let sinks: Vec<SubscriptionSink> = self
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let mut closed = Vec::new();
        for sink in &sinks {
            let accepted = sink.accepted();
            let mut notes = Vec::new();
            if change.tools && accepted.tools_list_changed == Some(true) {
                notes.push(ServerNotification::ToolListChangedNotification(
                    ToolListChangedNotification::default(),
                ));
            }
            if change.prompts && accepted.prompts_list_changed == Some(true) {
                notes.push(ServerNotification::PromptListChangedNotification(
                    PromptListChangedNotification::default(),
                ));
            }
            if change.resources && accepted.resources_list_changed == Some(true) {
                notes.push(ServerNotification::ResourceListChangedNotification(
                    ResourceListChangedNotification::default(),
                ));
            }
            for note in notes {
                if let Err(SubscriptionSendError::SubscriptionClosed) = sink.send(note).await {
                    closed.push(sink.id().clone());
                    break;
                }
            }
        }
        let mut open = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        open.retain(|sink| !closed.contains(sink.id()));
        open.len()
    }
}

/// `result_type` as a complete result says it, unless the server said otherwise.
pub fn complete(result_type: &mut Option<ResultType>) {
    result_type.get_or_insert(ResultType::COMPLETE);
}

/// Whether the request comes from a client of 2026-07-28 or later (stateless, no requests of
/// the server's can be sent to it).
pub fn is_modern(context: &rmcp::service::RequestContext<rmcp::RoleServer>) -> bool {
    context
        .protocol_version()
        .is_some_and(|v| v.as_str() >= rmcp::model::ProtocolVersion::V_2026_07_28.as_str())
}

impl<S: crate::session::Session> super::Gateway<S> {
    /// Sends `list_changed` to every connected client for each
    /// [`HostEvent::CatalogChanged`] in `events`, and after any event reads again what needs
    /// attention (`attention`: an approval, a failure or a broken file changes it without
    /// changing the catalog); returns when `events` closes.
    pub async fn announce(self, mut events: mpsc::UnboundedReceiver<HostEvent>) {
        while let Some(event) = events.recv().await {
            // What has queued up meanwhile is taken together: one reading of the status for
            // all of it.
            let mut batch = vec![event];
            while let Ok(more) = events.try_recv() {
                batch.push(more);
            }
            self.refresh_skills().await;
            for event in batch {
                if let HostEvent::CatalogChanged(change) = event {
                    self.tell(change).await;
                }
            }
            self.refresh_attention().await;
        }
    }

    /// The lists `change` names as changed, to every client: `list_changed` to those of the
    /// `initialize` era, on the listen streams of 2026-07-28 clients.
    pub(super) async fn tell(&self, change: CatalogChange) {
        let clients = self.live_clients();
        let listening = self.listeners.announce(&change).await;
        tracing::info!(
            clients = clients.len(),
            listening,
            tools = change.tools,
            prompts = change.prompts,
            resources = change.resources,
            "catalog changed"
        );
        for peer in clients {
            if change.tools {
                let _ = peer.notify_tool_list_changed().await;
            }
            if change.prompts {
                let _ = peer.notify_prompt_list_changed().await;
            }
            if change.resources {
                let _ = peer.notify_resource_list_changed().await;
            }
        }
    }

    /// The clients that completed the handshake and are still connected.
    pub(super) fn live_clients(&self) -> Vec<Peer<RoleServer>> {
        let mut clients = self.clients.lock().unwrap_or_else(PoisonError::into_inner);
        clients.retain(|peer| !peer.is_transport_closed());
        clients.clone()
    }
}
