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
pub(super) struct RouteWaiter {
    target: Target,
    reply: oneshot::Sender<Result<Route, String>>,
    /// When it is answered anyway.
    until: Millis,
}

impl<B: Backend> Host<B> {
    /// Whether a client's first listing is due: the start pass finished or the start grace
    /// passed.
    fn listing_due(&self) -> bool {
        self.started || self.grace_until.is_none()
    }

    /// The session starts: the start grace runs from now.
    pub(super) fn begin_grace(&mut self) {
        let until = self.now().saturating_add(self.options.start_grace.0);
        self.grace_until = Some(until);
    }

    /// A catalog request: answered now when the first listing is due, else when it is.
    pub(super) fn ask_catalog(&mut self, reply: oneshot::Sender<MergedCatalog>) {
        if self.listing_due() {
            let _ = reply.send(self.hand_out_catalog());
        } else {
            self.catalog_waiters.push(reply);
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
        self.route_waiters.push(RouteWaiter {
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
        if self.started {
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
            Target::Resource(_) | Target::Template(_) => {
                running.starting_servers().next().is_some()
            }
        }
    }

    /// When the loop must wake for the requests waiting here: the end of the grace, the
    /// first route's bound.
    pub(super) fn waiters_wake(&self) -> Option<Millis> {
        let routes = self.route_waiters.iter().map(|w| w.until).min();
        [self.grace_until, routes].into_iter().flatten().min()
    }

    /// After anything the loop did: the grace ends at its time (the catalog waiters get the
    /// servers ready now), and each waiting route is answered once its server is up, its
    /// start ended, or its bound passed.
    pub(super) fn settle_waiters(&mut self) {
        let now = self.now();
        if self.grace_until.is_some_and(|until| until <= now) {
            self.grace_until = None;
            if !self.catalog_waiters.is_empty() {
                self.answer_catalog_waiters();
            }
        }
        if self.route_waiters.is_empty() {
            return;
        }
        for waiter in std::mem::take(&mut self.route_waiters) {
            let routed = self.route(waiter.target.clone());
            if routed.is_ok() || waiter.until <= now || !self.waits_on_a_start(&waiter.target) {
                let _ = waiter.reply.send(routed);
            } else {
                self.route_waiters.push(waiter);
            }
        }
    }

    /// The start pass finished: every request waiting for it is answered as things are now.
    pub(super) fn answer_startup_waiters(&mut self) {
        self.grace_until = None;
        self.answer_catalog_waiters();
        for waiter in std::mem::take(&mut self.route_waiters) {
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
