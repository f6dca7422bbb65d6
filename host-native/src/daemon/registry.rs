//! The daemon's live sessions ([`Registry`]): what `status` lists, what `status`, `plan`,
//! `reload` and `reconnect` with a file set's flags reach, and the count the idle exit reads.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use serde_json::Value;
use tokio::sync::watch;

use crate::host::{HostHandle, SessionGone};
use crate::ipc::{Answer, SessionRequest};

/// A session as `status` lists it.
#[derive(Clone, Debug)]
pub struct SessionInfo {
    /// Unique among the daemon's sessions: `<client>-<pid>-<n>`.
    pub name: String,
    /// Who attached it.
    pub client: String,
    /// The attached process.
    pub pid: u32,
    /// Its project root (approvals are keyed by it).
    pub project_root: String,
    /// Its file set's id ([`Inputs::session_id`]): what `status`, `reload` and `reconnect`
    /// with the same flags ask for.
    pub id: String,
}

pub(super) struct Entry {
    pub(super) info: SessionInfo,
    pub(super) session: HostHandle,
}

/// The daemon's live sessions; clones share it.
#[derive(Clone)]
pub(crate) struct Registry {
    entries: Arc<Mutex<Entries>>,
    count: Arc<watch::Sender<usize>>,
}

#[derive(Default)]
struct Entries {
    /// Sessions made so far (for unique names).
    made: u64,
    /// Attaches still being set up: they count as sessions, so the daemon does not exit
    /// under them.
    attaching: usize,
    live: BTreeMap<String, Entry>,
}

/// An attach being set up; see [`Registry::attaching`].
pub(crate) struct Attaching(Registry);

impl Drop for Attaching {
    fn drop(&mut self) {
        let mut entries = self.0.lock();
        entries.attaching = entries.attaching.saturating_sub(1);
        self.0
            .count
            .send_replace(entries.attaching + entries.live.len());
    }
}

impl Default for Registry {
    fn default() -> Self {
        Registry {
            entries: Arc::default(),
            count: Arc::new(watch::Sender::new(0)),
        }
    }
}

impl Registry {
    /// The number of live sessions, as it changes.
    pub(crate) fn count(&self) -> watch::Receiver<usize> {
        self.count.subscribe()
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Entries> {
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Counts an attach from the moment its request is read until the guard drops (after
    /// the session is inserted, or the attach failed).
    pub(crate) fn attaching(&self) -> Attaching {
        let mut entries = self.lock();
        entries.attaching += 1;
        self.count
            .send_replace(entries.attaching + entries.live.len());
        Attaching(self.clone())
    }

    /// Every live session, in name order.
    pub(crate) fn sessions(&self) -> Vec<SessionInfo> {
        self.lock().live.values().map(|e| e.info.clone()).collect()
    }

    pub(super) fn next_name(&self, client: &str, pid: u32) -> String {
        let mut entries = self.lock();
        entries.made += 1;
        format!("{client}-{pid}-{}", entries.made)
    }

    pub(super) fn insert(&self, entry: Entry) {
        let mut entries = self.lock();
        entries.live.insert(entry.info.name.clone(), entry);
        self.count
            .send_replace(entries.attaching + entries.live.len());
    }

    pub(super) fn remove(&self, name: &str) {
        let mut entries = self.lock();
        entries.live.remove(name);
        self.count
            .send_replace(entries.attaching + entries.live.len());
    }

    /// Asks every session of the file set `id` ([`Answer::None`] when there is none): the
    /// status or plan of the first (they read the same files), a reload of each, a reconnect
    /// of all of them together.
    pub(crate) async fn ask(&self, id: &str, request: SessionRequest) -> Answer {
        let Some((_, first)) = self.of_file_set(id).into_iter().next() else {
            // Not an error: the command falls back to what the files say.
            return Answer::None(true);
        };
        match request {
            SessionRequest::Status | SessionRequest::Plan => {
                crate::ipc::handle(request, &first).await
            }
            SessionRequest::Reload => {
                self.reload(id).await;
                Answer::Ok(Value::Bool(true))
            }
            SessionRequest::Reconnect { name } => match self.reconnect(id, name).await {
                Some(Ok(Ok(names))) => Answer::json(names),
                Some(Ok(Err(refusal))) => Answer::Error(refusal),
                Some(Err(gone)) => Answer::Error(gone.to_string()),
                None => Answer::None(true),
            },
        }
    }

    /// Reloads every session of the file set `id`; how many there were.
    pub(crate) async fn reload(&self, id: &str) -> usize {
        let targets = self.of_file_set(id);
        for (_, session) in &targets {
            let _ = session.reload().await;
        }
        targets.len()
    }

    /// A reconnect of `name` (every server when `None`) asked by every session of the file
    /// set `id` together: a process these sessions share restarts once; one another file
    /// set's session holds too while it runs is refused with the reason. The servers
    /// restarted (sorted, once each); `None` when no session of `id` runs.
    pub(crate) async fn reconnect(
        &self,
        id: &str,
        name: Option<String>,
    ) -> Option<Result<Result<Vec<String>, String>, SessionGone>> {
        let targets = self.of_file_set(id);
        let (_, first) = targets.first()?;
        let also = targets.iter().map(|(name, _)| name.clone()).collect();
        Some(first.reconnect_with(also, name).await.map(|answer| {
            answer.map(|mut names| {
                names.sort();
                names.dedup();
                names
            })
        }))
    }

    /// The live sessions of the file set `id`, in name order.
    fn of_file_set(&self, id: &str) -> Vec<(String, HostHandle)> {
        self.lock()
            .live
            .values()
            .filter(|e| e.info.id == id)
            .map(|e| (e.info.name.clone(), e.session.clone()))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn an_attach_being_set_up_counts_as_a_session() {
        let registry = Registry::default();
        let count = registry.count();
        assert_eq!(*count.borrow(), 0);
        let attaching = registry.attaching();
        assert_eq!(
            *count.borrow(),
            1,
            "the idle exit must not fire under an attach"
        );
        drop(attaching);
        assert_eq!(*count.borrow(), 0);
        assert_eq!(
            registry.ask("0123", SessionRequest::Status).await,
            Answer::None(true)
        );
        assert_ne!(
            registry.next_name("serve", 7),
            registry.next_name("serve", 7)
        );
    }
}
