//! Routes a server's `notifications/progress` to the caller that is waiting for them.
//!
//! rmcp gives every outgoing request its own progress token. A forwarded call subscribes to its
//! token right after sending the request; a notification that arrives before the subscription
//! (the server can be faster than the subscribing task) is kept briefly and handed over on
//! subscribe, so no early progress is lost.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, PoisonError};

use rmcp::model::{ProgressNotificationParam, ProgressToken};
use tokio::sync::mpsc;

/// Notifications for tokens nobody subscribed to yet, kept at most.
const EARLY_LIMIT: usize = 64;

/// Shared between a connection's client handler (which feeds it) and its callers.
#[derive(Clone, Default)]
pub(crate) struct ProgressRouter {
    inner: Arc<Mutex<Routes>>,
}

#[derive(Default)]
struct Routes {
    subscribers: HashMap<ProgressToken, mpsc::UnboundedSender<ProgressNotificationParam>>,
    early: VecDeque<ProgressNotificationParam>,
}

impl ProgressRouter {
    /// Delivers one notification (called by the client handler).
    pub(crate) fn dispatch(&self, param: ProgressNotificationParam) {
        let mut routes = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        match routes.subscribers.get(&param.progress_token) {
            Some(tx) => {
                let _ = tx.send(param);
            }
            None => {
                if routes.early.len() == EARLY_LIMIT {
                    routes.early.pop_front();
                }
                routes.early.push_back(param);
            }
        }
    }

    /// Receives every notification for `token` (including early ones) until the returned
    /// guard is dropped.
    pub(crate) fn subscribe(
        &self,
        token: ProgressToken,
    ) -> (
        Subscription,
        mpsc::UnboundedReceiver<ProgressNotificationParam>,
    ) {
        let (tx, rx) = mpsc::unbounded_channel();
        let mut routes = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
        let early: Vec<ProgressNotificationParam> = {
            let (mine, rest): (Vec<_>, Vec<_>) = routes
                .early
                .drain(..)
                .partition(|p| p.progress_token == token);
            routes.early.extend(rest);
            mine
        };
        for param in early {
            let _ = tx.send(param);
        }
        routes.subscribers.insert(token.clone(), tx);
        drop(routes);
        (
            Subscription {
                router: self.clone(),
                token,
            },
            rx,
        )
    }
}

/// Unsubscribes on drop.
pub(crate) struct Subscription {
    router: ProgressRouter,
    token: ProgressToken,
}

impl Drop for Subscription {
    fn drop(&mut self) {
        let mut routes = self
            .router
            .inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        routes.subscribers.remove(&self.token);
        routes.early.retain(|p| p.progress_token != self.token);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rmcp::model::NumberOrString;

    fn param(token: i64, progress: f64) -> ProgressNotificationParam {
        ProgressNotificationParam::new(ProgressToken(NumberOrString::Number(token)), progress)
    }

    #[test]
    fn early_notifications_are_handed_over_and_others_kept() {
        let router = ProgressRouter::default();
        router.dispatch(param(1, 1.0));
        router.dispatch(param(2, 5.0));
        let (guard, mut rx) = router.subscribe(ProgressToken(NumberOrString::Number(1)));
        router.dispatch(param(1, 2.0));
        assert_eq!(rx.try_recv().map(|p| p.progress).ok(), Some(1.0));
        assert_eq!(rx.try_recv().map(|p| p.progress).ok(), Some(2.0));
        drop(guard);
        router.dispatch(param(1, 3.0));
        assert!(rx.try_recv().is_err());
        let (_guard, mut rx2) = router.subscribe(ProgressToken(NumberOrString::Number(2)));
        assert_eq!(rx2.try_recv().map(|p| p.progress).ok(), Some(5.0));
    }
}
