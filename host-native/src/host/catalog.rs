//! The session's merged catalog: prefix owners, the merger, routing and the announcements of
//! changes.

use std::collections::{HashMap, HashSet};
use std::hash::{Hash, Hasher};

use mcp_reconcile_kernel::config::servers_to_value;
use mcp_reconcile_kernel::gating::{tool_not_found, tool_prefix};
use mcp_reconcile_kernel::hot_reload::{HotReload, Previous};
use mcp_reconcile_kernel::plan::Status;
use mcp_reconcile_kernel::{Gating, ServerConfig, Servers};

use super::{Backend, Held, Host};
use crate::inputs::Snapshot;
use crate::transport::{Caller, Catalog, Prompt, Resource, ResourceTemplate, Tool};
use crate::view::{
    lists_template, own_prompt_name, own_tool_name, pick_resource, resource_match, session_view,
    tool_enabled,
};

/// Which lists of the merged catalog changed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CatalogChange {
    /// Tools (names or definitions).
    pub tools: bool,
    /// Prompts.
    pub prompts: bool,
    /// Resources.
    pub resources: bool,
}

/// What a gateway offers: every connected server's tools and prompts under
/// qualified names `mcp__<server>__<name>` (tools after the server's
/// `includeTools` / `excludeTools`), and its resources by URI; servers in
/// settings order; a name two servers would share is offered once (the
/// first server's).
#[derive(Clone, Debug, Default)]
pub struct MergedCatalog {
    /// Qualified tools.
    pub tools: Vec<Tool>,
    /// Qualified prompts.
    pub prompts: Vec<Prompt>,
    /// Resources, URIs unchanged.
    pub resources: Vec<Resource>,
    /// Resource templates, with the server that offers each (a URI no server lists goes to
    /// the first whose template it matches).
    pub resource_templates: Vec<(String, ResourceTemplate)>,
    /// Skills (SEP-2640), names and URIs unchanged, each with its server, and the servers
    /// that declare the extension ([`crate::skills`]).
    pub skills: crate::skills::SkillMerge,
}

/// Which server owns each tool prefix `mcp__<sanitized name>__`: the first
/// admitted server in settings order that claims it. Sanitizing maps
/// `fs.tools` and `fs_tools` to the same prefix; without an owner, a project
/// server `fs.tools` could take over the tools of a trusted `fs_tools` (or
/// have calls meant for them routed to it). A server whose prefix is owned by
/// another contributes nothing to the merged catalog and is never routed to,
/// whether or not the owner is connected right now.
#[derive(Default)]
pub(crate) struct PrefixOwners {
    owners: HashMap<String, String>,
}

impl PrefixOwners {
    /// Owners among `servers` (admitted ones, settings order).
    pub(crate) fn new<'a>(servers: impl IntoIterator<Item = &'a str>) -> Self {
        let mut owners = HashMap::new();
        for server in servers {
            owners
                .entry(tool_prefix(server))
                .or_insert_with(|| server.to_owned());
        }
        PrefixOwners { owners }
    }

    /// The admitted servers of `servers` under `gating`, settings order.
    pub(crate) fn admitted(servers: &Servers, gating: &Gating) -> Self {
        Self::new(
            servers
                .iter()
                .filter(|(name, config)| gating.denial(name, config).is_none())
                .map(|(name, _)| name.as_str()),
        )
    }

    /// The other server that owns `server`'s prefix, if one does.
    pub(crate) fn taken_by(&self, server: &str) -> Option<&str> {
        self.owners
            .get(&tool_prefix(server))
            .map(String::as_str)
            .filter(|owner| *owner != server)
    }

    /// Whether `server` may offer tools (no other server owns its prefix).
    pub(crate) fn owns(&self, server: &str) -> bool {
        self.taken_by(server).is_none()
    }
}

/// Why `server` is not offered: `owner` holds its tool prefix.
pub(crate) fn prefix_taken(server: &str, owner: &str) -> String {
    format!(
        "server \"{}\" is not offered: its tool prefix {} is taken by \"{}\"; rename one of them",
        crate::display::safe(server),
        crate::display::safe(&tool_prefix(server)),
        crate::display::safe(owner)
    )
}

/// Warns once for each prefix collision among the admitted servers of `new` that was not one
/// among those of `old` (so a pass that changes nothing stays quiet).
fn warn_new_collisions(old: &PrefixOwners, new: &PrefixOwners, servers: &Servers) {
    for server in servers.keys() {
        if let Some(owner) = new.taken_by(server) {
            if old.taken_by(server) != Some(owner) {
                tracing::warn!("{}", prefix_taken(server, owner));
            }
        }
    }
}

/// The [`Previous`] a session keeps once it adopts `decision` in place of `desired` under
/// `gating`; warns of the prefix collisions the change brings.
pub(crate) fn adopt(decision: &HotReload, desired: &Servers, gating: &Gating) -> Previous {
    warn_new_collisions(
        &PrefixOwners::admitted(desired, gating),
        &PrefixOwners::admitted(&decision.servers, &decision.gating),
        &decision.servers,
    );
    Previous {
        servers: servers_to_value(&decision.servers),
        gating: decision.gating.clone(),
        removed: decision.removed.clone(),
    }
}

/// Builds a [`MergedCatalog`] from per-server views, first name wins; a
/// server whose prefix another owns ([`PrefixOwners`]) adds nothing.
pub(crate) struct CatalogMerger {
    merged: MergedCatalog,
    owners: PrefixOwners,
    tools: HashSet<String>,
    prompts: HashSet<String>,
    uris: HashSet<String>,
}

impl CatalogMerger {
    /// A merger whose servers' prefixes are owned as `owners` says.
    pub(crate) fn new(owners: PrefixOwners) -> Self {
        CatalogMerger {
            merged: MergedCatalog::default(),
            owners,
            tools: HashSet::new(),
            prompts: HashSet::new(),
            uris: HashSet::new(),
        }
    }

    /// Adds `server`'s view (already qualified), skipping names taken; nothing
    /// when another server owns its prefix.
    pub(crate) fn add(&mut self, server: &str, view: Catalog) {
        if !self.owners.owns(server) {
            return;
        }
        let (tools, prompts, uris) = (&mut self.tools, &mut self.prompts, &mut self.uris);
        self.merged.tools.extend(
            view.tools
                .into_iter()
                .filter(|t| tools.insert(t.name.to_string())),
        );
        self.merged.prompts.extend(
            view.prompts
                .into_iter()
                .filter(|p| prompts.insert(p.name.clone())),
        );
        self.merged.resources.extend(
            view.resources
                .into_iter()
                .filter(|r| uris.insert(r.uri.clone())),
        );
        self.merged.resource_templates.extend(
            view.resource_templates
                .into_iter()
                .map(|t| (server.to_owned(), t)),
        );
        self.merged.skills.add(server, view.skills);
    }

    /// The merged catalog.
    pub(crate) fn finish(self) -> MergedCatalog {
        self.merged
    }
}

/// A request a gateway wants routed to the connection that serves it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Target {
    /// A qualified tool name.
    Tool(String),
    /// A qualified prompt name.
    Prompt(String),
    /// A resource URI.
    Resource(String),
    /// A resource template, as listed (`uriTemplate`): for completing its arguments.
    Template(String),
    /// A skill, by the URI of its `SKILL.md` (`skills/get`).
    Skill(String),
}

/// Where a routed request goes.
#[derive(Clone, Debug)]
pub struct Route {
    /// The server that serves it.
    pub server: String,
    /// The server's own name for the tool or prompt (the URI for a resource).
    pub name: String,
    /// Forwards the request; fails at once if the connection closes meanwhile.
    pub caller: Caller,
    /// The session's [`RouteEpoch`] and its value when this route was made.
    made: (RouteEpoch, u64),
}

impl Route {
    /// Whether the session has changed nothing a route depends on since this one was made
    /// (its files, gating, connections, catalogs): the same target would be routed here again.
    /// A gateway keeps such routes instead of asking the session's loop on every call.
    pub fn is_current(&self) -> bool {
        self.made.0.now() == self.made.1
    }
}

/// How often a session may have changed what its routes are: advanced by the session's loop
/// after everything it handles but a route request, so a [`Route`] made before is no longer
/// current.
#[derive(Clone, Debug, Default)]
pub(crate) struct RouteEpoch(std::sync::Arc<std::sync::atomic::AtomicU64>);

impl RouteEpoch {
    fn now(&self) -> u64 {
        self.0.load(std::sync::atomic::Ordering::Acquire)
    }

    /// Every route made so far is no longer current.
    pub(super) fn advance(&self) {
        self.0.fetch_add(1, std::sync::atomic::Ordering::AcqRel);
    }
}

impl<B: Backend> Host<B> {
    /// Qualified tool names of every connected server: `mcp__<server>__<tool>`.
    pub fn tool_names(&self) -> Vec<String> {
        self.merged_catalog()
            .tools
            .into_iter()
            .map(|t| t.name.into_owned())
            .collect()
    }

    /// Connected servers with their config and connection, in settings order.
    fn connected(&self) -> impl Iterator<Item = (&String, Held<'_>, Caller)> + '_ {
        self.desired.keys().filter_map(|name| {
            let mut live = self.backend.held(name)?;
            let caller = live.caller.take()?;
            Some((name, live, caller))
        })
    }

    /// The servers whose listing the session offers, in settings order, with the config its
    /// filters come from: each connected server's live listing, and a lazy server's kept
    /// listing while it is dormant or starting (issue 41).
    pub(super) fn offered(&self) -> impl Iterator<Item = (&String, &ServerConfig, &Catalog)> + '_ {
        self.desired.iter().filter_map(|(name, config)| {
            let live = self.backend.held(name);
            if let Some(live) = live.as_ref().filter(|live| live.caller.is_some()) {
                return Some((name, live.config, live.catalog));
            }
            let starting = live
                .as_ref()
                .is_none_or(|live| live.health.status == Status::Connecting);
            let listing = self.lazy.listing(name).filter(|_| starting)?;
            Some((name, config, listing))
        })
    }

    /// See [`MergedCatalog`].
    pub fn merged_catalog(&self) -> MergedCatalog {
        let mut merger = CatalogMerger::new(PrefixOwners::admitted(&self.desired, &self.gating));
        for (name, config, listing) in self.offered() {
            merger.add(
                name,
                session_view(name, config, &self.pinned_listing(name, listing)),
            );
        }
        let mut catalog = merger.finish();
        if self.lsp.any_configured() {
            catalog.tools.extend(crate::lsp::tools::definitions());
        }
        catalog
    }

    /// One fingerprint per list of [`Self::merged_catalog`], without building it: the merged
    /// catalog is a function of, in server order, each connected server's name, whether it
    /// owns its prefix, and its session view — which is its listing's tools that its entry
    /// enables, its prompts and its resources. So those, with each listing's cached
    /// [`Digests`](crate::transport::Digests), are hashed. A change of the merged catalog
    /// always changes its fingerprint; the converse may rarely not hold (a resource another
    /// server already lists changed), which costs an unneeded `list_changed`, never a missed one.
    pub(super) fn catalog_digests(&self) -> (u64, u64, u64) {
        let owners = PrefixOwners::admitted(&self.desired, &self.gating);
        let mut hashers: [std::collections::hash_map::DefaultHasher; 3] = Default::default();
        for (name, config, catalog) in self.offered() {
            if !owners.owns(name) {
                continue;
            }
            let listing = catalog.digests();
            for hasher in &mut hashers {
                name.hash(hasher);
            }
            let [tools, prompts, resources] = &mut hashers;
            for (tool, digest) in catalog.tools.iter().zip(&listing.tools) {
                if tool_enabled(config, &tool.name) {
                    digest.hash(tools);
                }
            }
            // The end of this server's tools: the next server's name cannot look like one.
            u64::MAX.hash(tools);
            listing.prompts.hash(prompts);
            listing.resources.hash(resources);
            // What pinning withholds changes the lists without a new listing (a review).
            if let Some(waiting) = self.pins.waiting(name).filter(|w| w.withholds()) {
                waiting.hash(tools);
                waiting.hash(prompts);
                waiting.hash(resources);
            }
        }
        self.lsp.any_configured().hash(&mut hashers[0]);
        let [tools, prompts, resources] = hashers;
        (tools.finish(), prompts.finish(), resources.finish())
    }

    /// The merged catalog for a client; from the first one on, changes are
    /// announced relative to it.
    pub(super) fn hand_out_catalog(&mut self) -> MergedCatalog {
        self.refresh_pins();
        let catalog = self.merged_catalog();
        if !self.announcer.is_announcing() {
            let digest = self.catalog_digests();
            self.announcer.start(digest);
        }
        catalog
    }

    /// Hands the catalog to every request waiting for it (and from the first one on,
    /// announces changes).
    pub(super) fn answer_catalog_waiters(&mut self) {
        let waiters = self.waiters.take_catalogs();
        if waiters.is_empty() && self.announcer.is_announcing() {
            return;
        }
        let catalog = self.hand_out_catalog();
        for waiter in waiters {
            let _ = waiter.send(catalog.clone());
        }
    }

    /// Emits [`HostEvent::CatalogChanged`](super::HostEvent::CatalogChanged) when the merged catalog changed
    /// since it was last announced (or handed out).
    pub(super) fn announce_catalog(&mut self) {
        self.refresh_pins();
        if self.announcer.wants_a_look() {
            let now = self.catalog_digests();
            self.announcer.look(now);
        }
    }

    /// See [`Control::Route`](super::Control::Route).
    pub(super) fn route(&self, target: Target) -> Result<Route, String> {
        let owners = PrefixOwners::admitted(&self.desired, &self.gating);
        let mut connected = self
            .connected()
            .filter(|(server, _, _)| owners.owns(server));
        let found = match &target {
            Target::Tool(name) => connected.find_map(|(server, live, conn)| {
                own_tool_name(server, live.config, live.catalog, name)
                    .map(|own| (server, own, conn))
            }),
            Target::Prompt(name) => connected.find_map(|(server, live, conn)| {
                own_prompt_name(server, live.catalog, name).map(|own| (server, own, conn))
            }),
            // A server that lists the URI, else the first whose template matches it — a
            // project server's listing never capturing a user server's template.
            Target::Resource(uri) => {
                let gated = self
                    .snapshot
                    .as_ref()
                    .map(Snapshot::project_controlled)
                    .unwrap_or_default();
                pick_resource(connected.map(|(server, live, conn)| {
                    let matched = resource_match(live.catalog, uri);
                    (matched, gated.contains(server), (server, uri.clone(), conn))
                }))
            }
            Target::Template(template) => connected.find_map(|(server, live, conn)| {
                lists_template(live.catalog, template).then(|| (server, template.clone(), conn))
            }),
            Target::Skill(uri) => {
                let owner = self.skill_owner(&owners, uri);
                connected
                    .find(|(server, _, _)| Some(server.as_str()) == owner.as_deref())
                    .map(|(server, _, conn)| (server, uri.clone(), conn))
            }
        };
        if let Some((server, name, conn)) = found {
            let tool = matches!(target, Target::Tool(_));
            if matches!(target, Target::Tool(_) | Target::Prompt(_)) {
                if let Some(message) = self.withheld(server, &name, tool) {
                    return Err(message);
                }
            }
            if let Target::Resource(uri) | Target::Skill(uri) = &target {
                let held = self.backend.held(server);
                if let Some(message) =
                    held.and_then(|live| self.withheld_skill(server, live.catalog, uri))
                {
                    return Err(message);
                }
            }
            return Ok(Route {
                server: server.clone(),
                name,
                caller: conn,
                made: (self.routes.clone(), self.routes.now()),
            });
        }
        Err(match target {
            Target::Tool(name) => self.tool_not_found(&name),
            Target::Prompt(name) => format!(
                "prompt \"{name}\" not found: no connected MCP server offers it (list them with prompts/list)"
            ),
            Target::Resource(uri) => format!(
                "resource \"{uri}\" not found: no connected MCP server lists it (list them with resources/list)"
            ),
            Target::Template(template) => format!(
                "resource template \"{template}\" not found: no connected MCP server lists it (list them with resources/templates/list)"
            ),
            Target::Skill(uri) => format!(
                "skill \"{uri}\" not found: no connected MCP server offers it (list them with skills/list)"
            ),
        })
    }

    /// The server whose skill is at `uri`: the first connected one, in settings order, that
    /// lists its name or URI ([`crate::skills::SkillMerge`]), withheld or not.
    fn skill_owner(&self, owners: &PrefixOwners, uri: &str) -> Option<String> {
        let mut merge = crate::skills::SkillMerge::default();
        for (server, live, _) in self.connected().filter(|(s, _, _)| owners.owns(s)) {
            merge.add(server, live.catalog.skills.clone());
        }
        merge.owner(uri).map(str::to_owned)
    }

    /// The §4 message for a tool that is not available now; for a server that is failing or
    /// connecting, what the host knows of it instead (its state, when it is retried, its last
    /// error).
    pub fn tool_not_found(&self, name: &str) -> String {
        if let Some(message) = self.not_serving(name) {
            return message;
        }
        let removed = self.previous.removed.as_deref().unwrap_or_default();
        let approvals = self
            .snapshot
            .as_ref()
            .map(|s| (&s.approvals, s.project_root.as_str()));
        tool_not_found(name, &self.desired, &self.gating, removed, approvals).unwrap_or_else(|| {
            format!(
                "Tool \"{name}\" not found: the tools of this gateway are named \
                 mcp__<server>__<tool>; list them with tools/list."
            )
        })
    }
}
