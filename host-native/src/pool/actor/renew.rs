//! A held connection started again: afresh with its config unchanged (dev mode: the sources
//! of the program it runs changed), by a manual reconnect, or for a due retry — each the step
//! the kernel's [`decide_restart`] gives, as in a session's own pass (issue 38).

use std::sync::Arc;

use mcp_reconcile_kernel::identity::ConnectionId;
use mcp_reconcile_kernel::plan::Status;
use mcp_reconcile_kernel::pool::Acquire;
use mcp_reconcile_kernel::restart::{decide_restart, RestartOrder, RestartRequest};
use mcp_reconcile_kernel::ServerConfig;

use super::Actor;
use crate::launch::Launch;

impl Actor {
    /// `session` asks for its connection `id` of `server` to be started afresh. The process
    /// is replaced make before break ([`Supervisor::replace`](crate::supervisor::Supervisor)):
    /// every session holding it is served by the old one until the new one is up, since they
    /// all run the same program, whose sources changed for all of them. A start already
    /// under way (another session asked first, for the same save) is left to finish. The
    /// session's gating must still admit the server.
    pub(super) fn renew(
        &mut self,
        session: &str,
        server: &str,
        id: &ConnectionId,
        config: (ServerConfig, Option<Arc<Launch>>),
    ) -> Acquire {
        let key = match self.held_and_admitted(session, server, id, &config) {
            Ok(key) => key,
            Err(answer) => return answer,
        };
        match self.conns.get(&key).map(|entry| entry.health().status) {
            Some(Status::Connecting) => {}
            Some(_) => {
                // The fix may be in the new sources: the kernel's step forgives a crash loop.
                let step = decide_restart(
                    RestartRequest::SourcesChanged,
                    Some(config.0.object()),
                    false,
                );
                if step.forgive {
                    self.conns.forgive(&key);
                }
                match step.order {
                    RestartOrder::MakeBeforeBreak => {
                        self.conns.replace(key, server.to_owned(), config);
                    }
                    RestartOrder::StopFirst => {
                        self.conns.start(key, server.to_owned(), config);
                    }
                }
            }
            None => {
                self.conns.start(key, server.to_owned(), config);
            }
        }
        Acquire::Attach {
            refcount: self.pool.refcount(id),
        }
    }

    /// `session`'s engine retries its failed connection `id` of `server`: started again with
    /// its failures kept (the kernel's step for a due retry), once — a start another holder's
    /// retry began, or a connection up again, is left as it is. The session's gating must
    /// still admit it; one it no longer holds is an ordinary acquire.
    pub(super) fn retry(
        &mut self,
        session: &str,
        server: &str,
        id: &ConnectionId,
        config: (ServerConfig, Option<Arc<Launch>>),
    ) -> Acquire {
        let key = match self.held_and_admitted(session, server, id, &config) {
            Ok(key) => key,
            Err(answer) => return answer,
        };
        let failed = self
            .conns
            .get(&key)
            .is_some_and(|entry| entry.health().status == Status::Failed);
        if failed {
            self.restart_held(&key, RestartRequest::RetryDue);
        }
        Acquire::Attach {
            refcount: self.pool.refcount(id),
        }
    }

    /// The key of `session`'s held connection `id` of `server` when its current gating still
    /// admits it; otherwise the answer: an ordinary acquire through the gate (not held any
    /// more), or the refusal.
    fn held_and_admitted(
        &mut self,
        session: &str,
        server: &str,
        id: &ConnectionId,
        config: &(ServerConfig, Option<Arc<Launch>>),
    ) -> Result<super::Key, Acquire> {
        let now = self.now();
        let Some(key) = self.held_key(session, id) else {
            return Err(self.acquire_and_start(session, server, id, config.clone(), now));
        };
        if let Some(reason) = self.denial(session, server, &config.0) {
            return Err(Acquire::Refused { reason });
        }
        Ok(key)
    }

    /// An ordinary acquire of `id` by `session` through the gate, started if nobody runs it.
    fn acquire_and_start(
        &mut self,
        session: &str,
        server: &str,
        id: &ConnectionId,
        config: (ServerConfig, Option<Arc<Launch>>),
        now: mcp_reconcile_kernel::Millis,
    ) -> Acquire {
        let (outcome, key) = self.acquire(session, id, &config.0, now);
        if let Some(key) = key.filter(|key| self.conns.get(key).is_none()) {
            self.conns.start(key, server.to_owned(), config);
        }
        outcome
    }

    /// Why `session`'s current gating refuses `server` with `config`, if it does.
    fn denial(
        &self,
        session: &str,
        server: &str,
        config: &ServerConfig,
    ) -> Option<mcp_reconcile_kernel::Reason> {
        let session = self.sessions.get(session)?;
        session.gating.denial(server, config)
    }

    /// Starts the held connection `key` again for `request` (a manual reconnect, a due retry)
    /// with its config: forgiven and ordered as the kernel's [`decide_restart`] says.
    pub(super) fn restart_held(&mut self, key: &super::Key, request: RestartRequest) {
        let Some(entry) = self.conns.get(key) else {
            return;
        };
        let (name, config) = (entry.name.clone(), entry.config.clone());
        let step = decide_restart(request, Some(config.0.object()), false);
        if step.forgive {
            self.conns.forgive(key);
        }
        match step.order {
            RestartOrder::MakeBeforeBreak => {
                self.conns.replace(key.clone(), name, config);
            }
            RestartOrder::StopFirst => {
                self.conns.restart(key);
            }
        }
    }
}
