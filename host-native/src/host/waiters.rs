//! A session's start never waits for a slow server: the requests a gateway makes while the
//! start pass runs, and when each is answered.
//!
//! * The merged catalog ([`Control::Catalog`](super::Control::Catalog), a client's first
//!   `initialize` and `tools/list`): once the start pass finished or the start grace
//!   ([`HostOptions::start_grace`](super::HostOptions), [`START_GRACE`](super::START_GRACE)
//!   from the session's start) passed, whichever comes first — with the servers ready then.
//!   Every server that becomes ready later is announced ([`HostEvent::CatalogChanged`](super::HostEvent),
//!   `list_changed` to the client), as any later change is.
//! * A route ([`Control::Route`](super::Control::Route), a call): at once when a connected
//!   server serves it; while the start pass runs, a call to a tool or prompt of a server still
//!   starting waits for that server alone (a resource, whose server only a listing names, for
//!   the servers still starting), at most [`STARTUP_WAIT`](super::STARTUP_WAIT): a client that
//!   calls a tool it remembers from an earlier session gets it, not "not found", and a call to
//!   a ready server never waits for a slow one.

use mcp_reconcile_kernel::gating::tool_prefix;
use mcp_reconcile_kernel::Millis;
use tokio::sync::oneshot;

use super::{Backend, Host, MergedCatalog, PrefixOwners, Route, Target, STARTUP_WAIT};

/// A route asked for while the server that would serve it was still starting.
struct RouteWaiter {
    target: Target,
    reply: oneshot::Sender<Result<Route, String>>,
    /// When it is answered anyway.
    until: Millis,
}

/// The start waiters: whether the start pass finished, the start grace, and the requests
/// waiting for either.
#[derive(Default)]
pub(super) struct StartWaiters {
    /// The start pass has finished.
    started: bool,
    /// When the start grace ends; `None` before the session runs and once it ended.
    grace_until: Option<Millis>,
    /// Catalog requests waiting for the start pass or the grace.
    catalogs: Vec<oneshot::Sender<MergedCatalog>>,
    /// Route requests waiting for a server still starting.
    routes: Vec<RouteWaiter>,
}

impl StartWaiters {
    /// The session starts: the start grace runs until `until`.
    pub(super) fn begin(&mut self, until: Millis) {
        self.grace_until = Some(until);
    }

    /// Whether a client's first listing is due: the start pass finished or the start grace
    /// passed.
    fn listing_due(&self) -> bool {
        self.started || self.grace_until.is_none()
    }

    /// When the loop must wake for the requests waiting here: the end of the grace, the
    /// first route's bound.
    pub(super) fn wake(&self) -> Option<Millis> {
        let routes = self.routes.iter().map(|w| w.until).min();
        [self.grace_until, routes].into_iter().flatten().min()
    }

    /// Whether the grace ended by `now` (it ends once).
    fn grace_ends(&mut self, now: Millis) -> bool {
        let ends = self.grace_until.is_some_and(|until| until <= now);
        if ends {
            self.grace_until = None;
        }
        ends
    }

    /// The start pass finished: whether this is the first time (the grace ends with it).
    fn finish_start(&mut self) -> bool {
        self.grace_until = None;
        !std::mem::replace(&mut self.started, true)
    }

    /// The catalog requests waiting, taken.
    pub(super) fn take_catalogs(&mut self) -> Vec<oneshot::Sender<MergedCatalog>> {
        std::mem::take(&mut self.catalogs)
    }
}

impl<B: Backend> Host<B> {
    /// The session starts: the start grace runs from now.
    pub(super) fn begin_grace(&mut self) {
        let until = self.now().saturating_add(self.options.start_grace.0);
        self.waiters.begin(until);
    }

    /// A catalog request: answered now when the first listing is due, else when it is.
    pub(super) fn ask_catalog(&mut self, reply: oneshot::Sender<MergedCatalog>) {
        if self.waiters.listing_due() {
            let _ = reply.send(self.hand_out_catalog());
        } else {
            self.waiters.catalogs.push(reply);
        }
    }

    /// A route request: answered now unless the start pass runs and what would serve it is
    /// still starting (see the module docs).
    pub(super) fn ask_route(
        &mut self,
        target: Target,
        reply: oneshot::Sender<Result<Route, String>>,
    ) {
        let routed = self.route(target.clone());
        if routed.is_err() {
            // A dormant lazy server would serve it: start it, and wait for it.
            if let Some(server) = self.dormant_owner(&target) {
                self.wake(&server);
            }
        }
        if routed.is_ok() || !self.waits_on_a_start(&target) {
            let _ = reply.send(routed);
            return;
        }
        let until = self.now().saturating_add(STARTUP_WAIT.0);
        self.waiters.routes.push(RouteWaiter {
            target,
            reply,
            until,
        });
    }

    /// Whether a server that could serve `target` is one of the start pass's starts still
    /// under way: for a tool or prompt, an admitted server whose prefix the name has; for a
    /// resource or template, any.
    fn waits_on_a_start(&self, target: &Target) -> bool {
        if self.waits_on_a_wake(target) {
            return true;
        }
        if self.waiters.started {
            return false;
        }
        let Some(running) = &self.running else {
            return false;
        };
        match target {
            Target::Tool(name) | Target::Prompt(name) => {
                let owners = PrefixOwners::admitted(&self.desired, &self.gating);
                running.starting_servers().any(|server| {
                    owners.owns(server) && name.starts_with(tool_prefix(server).as_str())
                })
            }
            Target::Resource(_) | Target::Template(_) | Target::Skill(_) => {
                running.starting_servers().next().is_some()
            }
        }
    }

    /// After anything the loop did: the grace ends at its time (the catalog waiters get the
    /// servers ready now), and each waiting route is answered once its server is up, its
    /// start ended, or its bound passed.
    pub(super) fn settle_waiters(&mut self) {
        let now = self.now();
        if self.waiters.grace_ends(now) && !self.waiters.catalogs.is_empty() {
            self.answer_catalog_waiters();
        }
        if self.waiters.routes.is_empty() {
            return;
        }
        for waiter in std::mem::take(&mut self.waiters.routes) {
            let routed = self.route(waiter.target.clone());
            if routed.is_ok() || waiter.until <= now || !self.waits_on_a_start(&waiter.target) {
                let _ = waiter.reply.send(routed);
            } else {
                self.waiters.routes.push(waiter);
            }
        }
    }

    /// A pass finished: the first time, every request waiting for the start pass is answered
    /// as things are now.
    pub(super) fn start_pass_finished(&mut self) {
        if !self.waiters.finish_start() {
            return;
        }
        self.answer_catalog_waiters();
        for waiter in std::mem::take(&mut self.waiters.routes) {
            let _ = waiter.reply.send(self.route(waiter.target));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::{HostOptions, START_GRACE, START_GRACE_VAR};
    use crate::inputs::HostEnv;
    use mcp_reconcile_kernel::Millis;

    fn grace(value: Option<&str>) -> Millis {
        let env = HostEnv {
            vars: value
                .map(|v| (START_GRACE_VAR.to_owned(), v.to_owned()))
                .into_iter()
                .collect(),
            cwd: "/".into(),
            home: None,
            raw: Vec::new(),
        };
        HostOptions::default().start_grace_from(&env).start_grace
    }

    /// Guards the knob for clients that never re-list: a number sets the grace, bounded by the
    /// wait of a call; anything else leaves the default.
    #[test]
    fn a_clients_environment_sets_its_start_grace_within_the_bound() {
        assert_eq!(grace(None), START_GRACE);
        assert_eq!(grace(Some("5000")), Millis(5000));
        assert_eq!(grace(Some(" 0 ")), Millis(0));
        assert_eq!(grace(Some("999999999")), super::STARTUP_WAIT);
        assert_eq!(grace(Some("soon")), START_GRACE);
        assert_eq!(grace(Some("-1")), START_GRACE);
    }
}
