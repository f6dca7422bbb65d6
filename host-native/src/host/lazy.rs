//! Lazy servers (issue 41) in the session engine, on either backend: the kernel's
//! [`decide`](mcp_reconcile_kernel::lazy::decide) executed.
//!
//! * A pass does not start a lazy server that has a listing of its current connection id kept
//!   ([`ListingCache`]): it stays *dormant*, and the merged catalog offers that listing (status
//!   `dormant`). A lazy server without one is started to learn it.
//! * A call, prompt or resource request routed to a dormant server starts it and waits for it
//!   (the route waiters of `waiters`, at most [`STARTUP_WAIT`](super::STARTUP_WAIT)); a start
//!   that fails answers with the server's state and error, naming it.
//! * Every listing of a running lazy server is kept (when it changed), so the catalog offered
//!   while it is dormant is its last one; the switch between the kept listing and the live one
//!   announces nothing when they are equal.
//! * A running lazy server that forwarded nothing for the idle time (`mcp.lazyIdleMs`) is
//!   stopped — its process group with it — and is dormant again.
//! * An edit of a running lazy server replaces it as any other (make before break); of a
//!   dormant one, it only changes what the next start runs, and a new connection id drops the
//!   kept listing (the server is started to learn the new one).

use std::collections::{HashMap, HashSet};

use mcp_reconcile_kernel::identity::{connection_id, ConnectionId};
use mcp_reconcile_kernel::lazy::{decide, effective_lazy, LazySettings, LazyStep, LazyView};
use mcp_reconcile_kernel::plan::{Action, Status};
use mcp_reconcile_kernel::Millis;

use super::{Backend, Host, PrefixOwners, Target};
use crate::listing_cache::ListingCache;
use crate::transport::Catalog;
use crate::view::{lists_template, own_prompt_name, own_tool_name, pick_resource, resource_match};

/// What the session keeps for its lazy servers.
pub(super) struct Lazy {
    /// The kept listings on disk.
    cache: ListingCache,
    /// `mcp.lazy` and `mcp.lazyIdleMs` of the last pass.
    settings: LazySettings,
    /// The configured servers that are lazy, settings order (from the last pass).
    names: Vec<String>,
    /// Each lazy server's last listing, with the connection id it is of.
    listings: HashMap<String, (ConnectionId, Catalog)>,
    /// Lazy servers a request started (or waits for) whose start has not ended.
    waking: HashSet<String>,
    /// Each running lazy server's requests forwarded when last looked at, and when it was last
    /// used (started, or seen to have forwarded more).
    used: HashMap<String, (u64, Millis)>,
    /// When a running lazy server may next have been idle long enough.
    next_check: Option<Millis>,
}

impl Lazy {
    /// Nothing lazy yet; listings kept under `state_dir`.
    pub(super) fn new(state_dir: &std::path::Path) -> Lazy {
        Lazy {
            cache: ListingCache::new(state_dir),
            settings: LazySettings::default(),
            names: Vec::new(),
            listings: HashMap::new(),
            waking: HashSet::new(),
            used: HashMap::new(),
            next_check: None,
        }
    }

    /// When the loop must wake to look for idle servers.
    pub(super) fn next_check(&self) -> Option<Millis> {
        self.next_check
    }

    /// The kept listing of lazy server `name`, if there is one.
    pub(super) fn listing(&self, name: &str) -> Option<&Catalog> {
        self.listings.get(name).map(|(_, catalog)| catalog)
    }

    /// Whether `name` is lazy now.
    pub(super) fn is_lazy(&self, name: &str) -> bool {
        self.names.iter().any(|n| n == name)
    }
}

impl<B: Backend> Host<B> {
    /// A pass adopted new servers and settings: which servers are lazy, and the listings kept
    /// only for them. Only an admitted server counts: a kept listing is never offered for a
    /// server the folder's trust, the lists, a rejection or a pending approval keep off.
    pub(super) fn adopt_lazy(&mut self) {
        let snapshot = self.snapshot.as_ref();
        let settings = snapshot.map(|s| s.lazy).unwrap_or_default();
        let trusted = snapshot.is_some_and(|s| s.trusted);
        let lazy = &mut self.lazy;
        lazy.settings = settings;
        lazy.names = self
            .desired
            .iter()
            .filter(|(name, config)| trusted && self.gating.denial(name, config).is_none())
            .filter(|(_, config)| effective_lazy(config, &settings))
            .map(|(name, _)| name.clone())
            .collect();
        let names = &lazy.names;
        lazy.listings.retain(|name, _| names.contains(name));
        lazy.waking.retain(|name| names.contains(name));
        lazy.used.retain(|name, _| names.contains(name));
    }

    /// Whether the plan's `action` is left undone: it starts a lazy server that has a listing
    /// of its connection id kept, and nothing waits for it ([`Host::stays_dormant`]).
    pub(super) fn left_dormant(&mut self, action: &Action) -> bool {
        let Action::Connect { name, to } = action else {
            return false;
        };
        let dormant = self.stays_dormant(name, to);
        if dormant {
            self.announcer.touch();
        }
        dormant
    }

    /// Whether the plan's start of `name` (connection id `to`) is left undone: it is lazy,
    /// not running, nothing waits for it, and a listing of `to` is kept. A kept listing of
    /// another id is dropped (memory and disk): the entry's identity changed.
    fn stays_dormant(&mut self, name: &str, to: &ConnectionId) -> bool {
        if !self.lazy.is_lazy(name) {
            return false;
        }
        if let Some((old, _)) = self.lazy.listings.get(name) {
            if old != to {
                let cache = self.lazy.cache.clone();
                let old = old.clone();
                super::blocking::off_the_loop(|| cache.remove(&old));
                self.lazy.listings.remove(name);
            }
        }
        if !self.lazy.listings.contains_key(name) {
            let cache = &self.lazy.cache;
            if let Some(catalog) = super::blocking::off_the_loop(|| cache.load(to)) {
                self.lazy
                    .listings
                    .insert(name.to_owned(), (to.clone(), catalog));
            }
        }
        let view = LazyView {
            cached: self.lazy.listings.contains_key(name),
            waiting: self.lazy.waking.contains(name),
            ..LazyView::default()
        };
        decide(&view, self.lazy.settings.idle, self.now()) == LazyStep::Dormant
    }

    /// A lazy server's connection reported (its start ended, or it re-listed): its start is no
    /// longer awaited, and a new listing is kept.
    pub(super) fn lazy_reported(&mut self, name: &str, start_ended: bool) {
        if !self.lazy.is_lazy(name) {
            return;
        }
        let now = self.now();
        if start_ended {
            self.lazy.waking.remove(name);
            self.lazy.used.remove(name);
        }
        let Some(live) = self.backend.held(name) else {
            return;
        };
        if live.caller.is_none() || live.health.status != Status::Connected {
            return;
        }
        let Ok(id) = connection_id(name, live.config) else {
            return;
        };
        let kept = self.lazy.listings.get(name);
        let same = kept.is_some_and(|(kept_id, kept)| {
            *kept_id == id && kept.digests() == live.catalog.digests()
        });
        if same {
            return;
        }
        let catalog = live.catalog.clone();
        let cache = self.lazy.cache.clone();
        if let Some((old, _)) = kept.filter(|(kept_id, _)| *kept_id != id) {
            let old = old.clone();
            let cache = cache.clone();
            tokio::task::spawn_blocking(move || cache.remove(&old));
        }
        let (stored_id, stored) = (id.clone(), catalog.clone());
        tokio::task::spawn_blocking(move || {
            if let Err(e) = cache.store(&stored_id, &stored) {
                tracing::warn!("cannot keep the listing of a lazy server: {e:#}");
            }
        });
        self.lazy.listings.insert(name.to_owned(), (id, catalog));
        self.lazy.used.entry(name.to_owned()).or_insert((0, now));
    }

    /// The dormant lazy server whose kept listing would serve `target`, if one would.
    pub(super) fn dormant_owner(&self, target: &Target) -> Option<String> {
        let owners = PrefixOwners::admitted(&self.desired, &self.gating);
        let mut dormant = self.lazy.names.iter().filter_map(|name| {
            let serving = self.backend.held(name).is_some_and(|l| l.caller.is_some());
            let config = self.desired.get(name)?;
            let listing = self.lazy.listing(name)?;
            (!serving && owners.owns(name)).then_some((name, config, listing))
        });
        let found = match target {
            Target::Tool(tool) => dormant.find(|(name, config, listing)| {
                own_tool_name(name, config, listing, tool).is_some()
            }),
            Target::Prompt(prompt) => {
                dormant.find(|(name, _, listing)| own_prompt_name(name, listing, prompt).is_some())
            }
            Target::Resource(uri) => {
                pick_resource(dormant.map(|server| (resource_match(server.2, uri), false, server)))
            }
            Target::Template(template) => {
                dormant.find(|(_, _, listing)| lists_template(listing, template))
            }
            // A kept listing has no skills (they are listed once the server runs).
            Target::Skill(_) => None,
        };
        found.map(|(name, _, _)| name.clone())
    }

    /// A request waits for dormant lazy server `name`: start it (once). A server already
    /// starting is waited for; one that failed and backs off is not (the request hears why).
    pub(super) fn wake(&mut self, name: &str) {
        if let Some(live) = self.backend.held(name) {
            if live.health.status == Status::Connecting {
                self.lazy.waking.insert(name.to_owned());
            }
            return;
        }
        if !self.lazy.waking.insert(name.to_owned()) {
            return;
        }
        let Some(config) = self.desired.get(name) else {
            self.lazy.waking.remove(name);
            return;
        };
        let to = self.lazy.listings.get(name).map(|(id, _)| id.clone());
        self.announcer.touch();
        self.backend.start(name, config, to.as_ref(), false);
    }

    /// Whether a request for `target` waits for a lazy server a request started.
    pub(super) fn waits_on_a_wake(&self, target: &Target) -> bool {
        !self.lazy.waking.is_empty()
            && self
                .dormant_owner(target)
                .is_some_and(|name| self.lazy.waking.contains(&name))
    }

    /// After anything the loop did: each running lazy server is kept or, idle for the idle
    /// time, stopped (dormant again); the next look is scheduled.
    pub(super) fn check_idle(&mut self) {
        if self.lazy.names.is_empty() {
            self.lazy.next_check = None;
            return;
        }
        let now = self.now();
        let idle = self.lazy.settings.idle;
        let mut next: Option<Millis> = None;
        let mut stop = Vec::new();
        for name in &self.lazy.names.clone() {
            let Some(live) = self.backend.held(name) else {
                continue;
            };
            let activity = live
                .caller
                .as_ref()
                .map(|c| c.activity())
                .unwrap_or_default();
            let used = self
                .lazy
                .used
                .entry(name.clone())
                .or_insert((activity.forwarded, now));
            if activity.forwarded != used.0 {
                *used = (activity.forwarded, now);
            }
            let view = LazyView {
                cached: self.lazy.listings.contains_key(name),
                running: true,
                starting: live.health.status == Status::Connecting,
                waiting: self.lazy.waking.contains(name),
                in_flight: activity.in_flight,
                last_used: used.1,
            };
            match decide(&view, idle, now) {
                LazyStep::Stop => stop.push(name.clone()),
                LazyStep::Keep { check_at } => {
                    next = [next, check_at].into_iter().flatten().min();
                }
                LazyStep::Dormant | LazyStep::Start => {}
            }
        }
        self.lazy.next_check = next;
        for name in stop {
            tracing::info!(
                "stopping lazy server \"{}\": idle for {} ms",
                crate::display::safe(&name),
                idle.0
            );
            self.lazy.used.remove(&name);
            self.teardown(&name, true);
            // Observers (`watch --events json`, a daemon session's client) see it go dormant.
            if let Some(status) = self.status_of(&name) {
                self.announcer.emit(super::HostEvent::ClientUpdate(status));
            }
        }
    }
}
