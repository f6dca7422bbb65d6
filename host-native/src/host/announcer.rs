//! The announcer: what the session tells its observers ([`HostEvent`]s), and when the merged
//! catalog changed since it was last announced.
//!
//! It owns the observers, whether changes are announced yet (from the first catalog handed
//! out or the start pass's end on), whether something happened that can change the catalog,
//! the fingerprint last announced, and which approval requests were already announced. The
//! fingerprint itself is the host's to compute ([`Host::catalog_digests`](super::Host)): it
//! reads the connections.

use tokio::sync::mpsc;

use super::{CatalogChange, HostEvent};
use crate::review::ApprovalRequest;

/// Fingerprints of the merged catalog's (tools, prompts, resources).
pub(super) type Digests = (u64, u64, u64);

/// See the module docs.
#[derive(Default)]
pub(super) struct Announcer {
    observers: Vec<mpsc::UnboundedSender<HostEvent>>,
    /// A catalog was handed out or the start pass finished: changes from now on are announced.
    announcing: bool,
    /// Something that can change the merged catalog happened.
    dirty: bool,
    /// The fingerprint last announced (or handed out).
    digest: Digests,
    /// (name, approval hash) pairs already announced: an edited config is announced again, an
    /// unchanged one only once.
    prompted: Vec<(String, String)>,
    /// [`HostEvent::Idle`] was said and the session has stayed idle since.
    idle: bool,
}

impl Announcer {
    /// A new stream of every event from now on.
    pub(super) fn subscribe(&mut self) -> mpsc::UnboundedReceiver<HostEvent> {
        let (tx, rx) = mpsc::unbounded_channel();
        self.observers.push(tx);
        rx
    }

    /// Sends `event` to every observer still listening.
    pub(super) fn emit(&mut self, event: HostEvent) {
        self.observers.retain(|tx| tx.send(event.clone()).is_ok());
    }

    /// Says [`HostEvent::Idle`] (with the passes so far) when the session has just become
    /// `idle`: once per idle spell.
    pub(super) fn idle(&mut self, idle: bool, passes: u64) {
        if idle && !self.idle {
            self.emit(HostEvent::Idle { passes });
        }
        self.idle = idle;
    }

    /// Something that can change the merged catalog happened.
    pub(super) fn touch(&mut self) {
        self.dirty = true;
    }

    /// Whether changes are announced yet.
    pub(super) fn is_announcing(&self) -> bool {
        self.announcing
    }

    /// The first catalog, whose fingerprint is `digest`, was handed out (or the start pass
    /// finished): changes from now on are announced relative to it.
    pub(super) fn start(&mut self, digest: Digests) {
        self.announcing = true;
        self.digest = digest;
        self.dirty = false;
    }

    /// Whether the catalog must be fingerprinted now: changes are announced and something
    /// happened since the last look.
    pub(super) fn wants_a_look(&mut self) -> bool {
        self.announcing && std::mem::take(&mut self.dirty)
    }

    /// The catalog's fingerprint is `now`: emits [`HostEvent::CatalogChanged`] with the lists
    /// that differ from the one last announced.
    pub(super) fn look(&mut self, now: Digests) {
        let was = std::mem::replace(&mut self.digest, now);
        let change = CatalogChange {
            tools: now.0 != was.0,
            prompts: now.1 != was.1,
            resources: now.2 != was.2,
        };
        if change != CatalogChange::default() {
            self.emit(HostEvent::CatalogChanged(change));
        }
    }

    /// Whether the approval request (name, hash) `key` was announced already.
    pub(super) fn prompted(&self, key: &(String, String)) -> bool {
        self.prompted.contains(key)
    }

    /// Announces `requests` ([`HostEvent::ApprovalNeeded`]) and remembers them; nothing when
    /// there are none.
    pub(super) fn ask_approval(&mut self, requests: Vec<ApprovalRequest>) {
        if requests.is_empty() {
            return;
        }
        let keys = requests.iter().map(|r| (r.name.clone(), r.hash.clone()));
        self.prompted.extend(keys);
        self.emit(HostEvent::ApprovalNeeded(requests));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn changes(rx: &mut mpsc::UnboundedReceiver<HostEvent>) -> Vec<CatalogChange> {
        std::iter::from_fn(|| rx.try_recv().ok())
            .filter_map(|event| match event {
                HostEvent::CatalogChanged(change) => Some(change),
                _ => None,
            })
            .collect()
    }

    /// Guards the announcer's contract: nothing is announced before the first catalog is
    /// handed out, a look after nothing happened announces nothing, and a change names only
    /// the lists whose fingerprint moved.
    #[test]
    fn a_catalog_change_is_announced_once_with_the_lists_that_changed() {
        let mut announcer = Announcer::default();
        let mut events = announcer.subscribe();
        announcer.touch();
        assert!(!announcer.wants_a_look(), "nothing handed out yet");

        announcer.start((1, 2, 3));
        assert!(!announcer.wants_a_look(), "nothing happened since");
        announcer.touch();
        assert!(announcer.wants_a_look());
        announcer.look((1, 2, 3));
        assert!(changes(&mut events).is_empty(), "the same catalog");

        announcer.touch();
        assert!(announcer.wants_a_look());
        announcer.look((9, 2, 3));
        let tools_only = CatalogChange {
            tools: true,
            ..CatalogChange::default()
        };
        assert_eq!(changes(&mut events), [tools_only]);
        assert!(!announcer.wants_a_look(), "looked already");
    }
}
