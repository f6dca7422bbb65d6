//! The requests of a running host's handles ([`Control`]): status, reload, reconnect, the
//! dry-run plan, and a gateway's catalog, route and language-server requests.

use mcp_reconcile_kernel::assemble;
use mcp_reconcile_kernel::plan::{plan, Plan};
use tokio::sync::oneshot;

use super::blocking::off_the_loop;
use super::{Backend, Control, Host, Restart};

/// The answer to a reconnect: the servers restarted, or why none was.
type ReconnectReply = oneshot::Sender<Result<Vec<String>, String>>;

impl<B: Backend> Host<B> {
    /// Answers `request`, or sets it waiting (`waiters`).
    pub(super) fn handle_control(&mut self, request: Control) {
        match request {
            Control::Status(reply) => {
                let _ = reply.send(self.status());
            }
            Control::Reload(reply) => {
                self.restarts.clear_crash_loops();
                self.dev.release(None);
                let now = self.now();
                self.scheduler.handle_manual_reload(now);
                let _ = reply.send(());
            }
            Control::Reconnect {
                server,
                also,
                reply,
            } => self.reconnect(server, &also, reply),
            Control::Catalog(reply) => self.ask_catalog(reply),
            Control::Route(target, reply) => self.ask_route(target, reply),
            Control::Language(extension, reply) => {
                let _ = reply.send(self.lsp.route(&extension));
            }
            Control::Plan(reply) => {
                let _ = reply.send(self.dry_run_plan());
            }
        }
    }

    /// Restarts `server` (every configured one when `None`), asked together with the pool
    /// sessions `also`: through the next pass, or by the pool when it restarts the processes
    /// itself.
    fn reconnect(&mut self, server: Option<String>, also: &[String], reply: ReconnectReply) {
        let names: Vec<String> = match &server {
            Some(name) if self.desired.contains_key(name) => vec![name.clone()],
            Some(name) => {
                let _ = reply.send(Err(format!(
                    "no configured server named \"{}\"; run `mcp-reconcile status` to list them",
                    crate::display::safe(name)
                )));
                return;
            }
            None => self.desired.keys().cloned().collect(),
        };
        self.dev.release(Some(&names));
        match self.backend.reconnect(server.as_deref(), &names, also) {
            Restart::Pass => {
                self.restarts.reconnect(names.iter().cloned());
                let now = self.now();
                self.scheduler.handle_manual_reload(now);
                let _ = reply.send(Ok(names));
            }
            Restart::Elsewhere(done) => {
                tokio::spawn(async move {
                    let _ = reply.send(done.await);
                });
            }
        }
    }

    /// What a reconcile would do now: the files as they are against the live state.
    fn dry_run_plan(&mut self) -> Result<Plan, String> {
        let snapshot = off_the_loop(|| self.inputs.load(None));
        let servers = assemble(&snapshot.layers).servers;
        let gating = snapshot.gating_for(&servers);
        plan(
            &servers,
            &self.online(),
            &gating,
            snapshot.trusted,
            self.options.mode,
            self.now(),
        )
        .map_err(|e| e.to_string())
    }
}
