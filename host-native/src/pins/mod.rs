//! Pinned tool and prompt definitions (issue 40): a session's part that compares every offered
//! server's listing with the baseline kept in the pins file (`store`) and says what waits for
//! review ([`Waiting`]).
//!
//! The baseline is keyed by the server's connection id, so it is the first listing of that
//! exact configuration: a user entry edited into another identity gets a fresh baseline from
//! its first listing; a project entry's new identity connects only once the user approved it,
//! so its baseline is again its first listing after that approval. What changes after the
//! baseline, under `enforce`, is withheld; under `warn`, offered with a warning (once per
//! definition); `mcp-reconcile review-tools NAME` (`cli/review_tools.rs`) shows the difference
//! and moves it into the baseline. No MCP tool can do that.

use std::collections::{HashMap, HashSet};

use mcp_reconcile_kernel::pin::{self, PinPolicy};
use mcp_reconcile_kernel::ServerConfig;

use crate::transport::Catalog;

pub mod review;
mod store;

pub use self::store::{pins_path, Item, Lists, Pinned, PinsFile, PinsStore, FILE_NAME};

/// The key of `name` with `config` in the pins file: its connection id (its approval hash
/// when the config has no connection id, which a config the kernel rejects never reaches).
pub fn connection_key(name: &str, config: &ServerConfig) -> String {
    match mcp_reconcile_kernel::connection_id(name, config) {
        Ok(id) => id.as_str().to_owned(),
        Err(_) => format!("{name}:{}", mcp_reconcile_kernel::approval_hash(config).0),
    }
}

/// The digests and definitions of a listing's tools and prompts.
pub fn listing_items(catalog: &Catalog) -> Lists {
    fn items<T: serde::Serialize>(
        list: &[T],
        name: impl Fn(&T) -> String,
        digest: fn(&mcp_reconcile_kernel::Object) -> String,
    ) -> std::collections::BTreeMap<String, Item> {
        list.iter()
            .filter_map(|item| {
                let definition = serde_json::to_value(item).ok()?;
                let text = serde_json::to_string(&definition).ok()?;
                let object = match mcp_reconcile_kernel::json::parse(&text).ok()? {
                    mcp_reconcile_kernel::Value::Object(object) => object,
                    _ => return None,
                };
                let digest = digest(&object);
                Some((name(item), Item { digest, definition }))
            })
            .collect()
    }
    Lists {
        tools: items(&catalog.tools, |t| t.name.to_string(), pin::tool_digest),
        prompts: items(&catalog.prompts, |p| p.name.clone(), pin::prompt_digest),
        skills: Some(items(
            catalog.skills.as_deref().unwrap_or_default(),
            |s| s.uri.clone(),
            pin::skill_digest,
        )),
    }
}

/// Name → digest of a list of items.
fn digests(items: &std::collections::BTreeMap<String, Item>) -> pin::Digests {
    items
        .iter()
        .map(|(name, item)| (name.clone(), item.digest.clone()))
        .collect()
}

/// What of one server's listing waits for review, by the server's own names.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Waiting {
    /// The server's policy.
    pub policy: PinPolicy,
    /// Tools changed or new since the baseline.
    pub tools: Vec<String>,
    /// Prompts changed or new since the baseline.
    pub prompts: Vec<String>,
    /// Skills (by the URI of their `SKILL.md`) changed or new since the baseline.
    pub skills: Vec<String>,
}

impl Waiting {
    /// Nothing waits.
    fn none(policy: PinPolicy) -> Self {
        Waiting {
            policy,
            tools: Vec::new(),
            prompts: Vec::new(),
            skills: Vec::new(),
        }
    }

    /// Whether anything is withheld (waits under `enforce`).
    pub fn withholds(&self) -> bool {
        self.policy == PinPolicy::Enforce
            && !(self.tools.is_empty() && self.prompts.is_empty() && self.skills.is_empty())
    }

    /// Whether the skill whose `SKILL.md` is at `uri` is withheld.
    pub fn withholds_skill(&self, uri: &str) -> bool {
        self.policy == PinPolicy::Enforce && self.skills.iter().any(|s| s == uri)
    }

    /// Whether the tool `name` (the server's own) is withheld.
    pub fn withholds_tool(&self, name: &str) -> bool {
        self.policy == PinPolicy::Enforce && self.tools.iter().any(|t| t == name)
    }

    /// Whether the prompt `name` (the server's own) is withheld.
    pub fn withholds_prompt(&self, name: &str) -> bool {
        self.policy == PinPolicy::Enforce && self.prompts.iter().any(|p| p == name)
    }
}

/// What a server's [`Waiting`] was computed from: it is computed again only when one changed.
struct Seen {
    id: String,
    /// The entry `id` is of: the same entry (shared) has the same id, without hashing it again.
    config: ServerConfig,
    tools: Vec<u64>,
    prompts: u64,
    /// Resources and skills (a changed skill list changes it).
    resources: u64,
    policy: PinPolicy,
    generation: u64,
}

/// A session's pins: the file as last read, and each offered server's [`Waiting`].
#[derive(Default)]
pub struct Pins {
    store: Option<PinsStore>,
    file: Option<Result<PinsFile, String>>,
    /// Advanced on every read of the file.
    generation: u64,
    seen: HashMap<String, (Seen, Waiting)>,
    warned: HashSet<String>,
}

impl Pins {
    /// Pins kept in `store`.
    pub fn new(store: PinsStore) -> Self {
        Pins {
            store: Some(store),
            ..Pins::default()
        }
    }

    /// Reads the file again (it changed on disk).
    pub fn reload(&mut self) {
        if let Some(store) = &self.store {
            let file = store.load();
            if let Err(problem) = &file {
                tracing::warn!("{problem}");
            }
            self.file = Some(file);
            self.generation += 1;
        }
    }

    /// What waits of `server`'s listing, as last refreshed.
    pub fn waiting(&self, server: &str) -> Option<&Waiting> {
        self.seen.get(server).map(|(_, waiting)| waiting)
    }

    /// Compares each of `offered` (name, config, policy, listing) with its baseline, records a
    /// baseline for a connection id that has none, and keeps what waits; forgets servers not
    /// offered any more.
    pub fn refresh<'a>(
        &mut self,
        offered: impl IntoIterator<Item = (&'a str, &'a ServerConfig, PinPolicy, &'a Catalog)>,
    ) {
        if self.file.is_none() {
            self.reload();
        }
        let mut kept = HashSet::new();
        for (name, config, policy, catalog) in offered {
            kept.insert(name.to_owned());
            let listing = catalog.digests();
            let unchanged = self.seen.get(name).is_some_and(|(old, _)| {
                old.config.same(config)
                    && old.tools == listing.tools
                    && old.prompts == listing.prompts
                    && old.resources == listing.resources
                    && old.policy == policy
                    && old.generation == self.generation
            });
            if unchanged {
                continue;
            }
            let seen = Seen {
                id: connection_key(name, config),
                config: config.clone(),
                tools: listing.tools.clone(),
                prompts: listing.prompts,
                resources: listing.resources,
                policy,
                generation: self.generation,
            };
            let waiting = self.compare(name, &seen.id, policy, catalog);
            self.seen.insert(name.to_owned(), (seen, waiting));
        }
        self.seen.retain(|name, _| kept.contains(name));
    }

    /// [`Waiting`] for one server's listing.
    fn compare(&mut self, name: &str, id: &str, policy: PinPolicy, catalog: &Catalog) -> Waiting {
        if policy == PinPolicy::Off {
            return Waiting::none(policy);
        }
        let listing = listing_items(catalog);
        let items = listing.clone();
        let waiting = match self.file.get_or_insert_with(|| Ok(PinsFile::default())) {
            // Fail closed: nothing can be compared, so everything waits.
            Err(_) => Waiting {
                policy,
                tools: listing.tools.keys().cloned().collect(),
                prompts: listing.prompts.keys().cloned().collect(),
                skills: listing
                    .skills
                    .iter()
                    .flatten()
                    .map(|(k, _)| k.clone())
                    .collect(),
            },
            Ok(file) => match file.servers.get_mut(id) {
                None => {
                    let pinned = Pinned {
                        server: name.to_owned(),
                        baseline: listing,
                        pending: Lists::default(),
                    };
                    file.servers.insert(id.to_owned(), pinned.clone());
                    write(self.store.as_ref(), id, move |entry| match entry {
                        Some(_) => false,
                        None => {
                            *entry = Some(pinned);
                            true
                        }
                    });
                    return Waiting::none(policy);
                }
                Some(pinned) => {
                    adopt_skills(self.store.as_ref(), id, pinned, &listing);
                    let skills = pin::waiting(
                        &digests(
                            pinned
                                .baseline
                                .skills
                                .as_ref()
                                .unwrap_or(&Default::default()),
                        ),
                        &digests(listing.skills.as_ref().unwrap_or(&Default::default())),
                    );
                    let tools =
                        pin::waiting(&digests(&pinned.baseline.tools), &digests(&listing.tools));
                    let prompts = pin::waiting(
                        &digests(&pinned.baseline.prompts),
                        &digests(&listing.prompts),
                    );
                    let pending = Lists {
                        tools: pick(&listing.tools, &tools),
                        prompts: pick(&listing.prompts, &prompts),
                        skills: Some(pick(
                            listing.skills.as_ref().unwrap_or(&Default::default()),
                            &skills,
                        ))
                        .filter(|s| !s.is_empty()),
                    };
                    if pinned.pending != pending {
                        pinned.pending = pending.clone();
                        write(self.store.as_ref(), id, move |entry| match entry {
                            Some(pinned) if pinned.pending != pending => {
                                pinned.pending = pending;
                                true
                            }
                            _ => false,
                        });
                    }
                    Waiting {
                        policy,
                        tools,
                        prompts,
                        skills,
                    }
                }
            },
        };
        if policy == PinPolicy::Warn {
            self.warn(name, &waiting, &items);
        }
        waiting
    }

    /// Logs, once per definition, each item offered although it changed (`warn`).
    fn warn(&mut self, server: &str, waiting: &Waiting, listing: &Lists) {
        for (kind, names, items) in [
            ("tool", &waiting.tools, &listing.tools),
            ("prompt", &waiting.prompts, &listing.prompts),
            (
                "skill",
                &waiting.skills,
                listing.skills.as_ref().unwrap_or(&Default::default()),
            ),
        ] {
            for item in names {
                let digest = items
                    .get(item)
                    .map(|i| i.digest.as_str())
                    .unwrap_or_default();
                if self
                    .warned
                    .insert(format!("{server}\u{0}{kind}\u{0}{item}\u{0}{digest}"))
                {
                    tracing::warn!("{}", changed_text(server, kind, item, PinPolicy::Warn));
                }
            }
        }
    }
}

/// A baseline recorded before skills were pinned takes `listing`'s skills as its skills'
/// baseline (their first listing since), in the file too.
fn adopt_skills(store: Option<&PinsStore>, id: &str, pinned: &mut Pinned, listing: &Lists) {
    if pinned.baseline.skills.is_some() {
        return;
    }
    let skills = listing.skills.clone().unwrap_or_default();
    pinned.baseline.skills = Some(skills.clone());
    write(store, id, move |entry| match entry {
        Some(pinned) if pinned.baseline.skills.is_none() => {
            pinned.baseline.skills = Some(skills);
            true
        }
        _ => false,
    });
}

/// Changes `id`'s record in the file (`change` says whether it did); a failure is logged: the
/// session still compares with what it holds.
fn write(store: Option<&PinsStore>, id: &str, change: impl FnOnce(&mut Option<Pinned>) -> bool) {
    let Some(store) = store else { return };
    let result = store.update(false, |file| {
        let mut entry = file.servers.remove(id);
        let changed = change(&mut entry);
        if let Some(entry) = entry {
            file.servers.insert(id.to_owned(), entry);
        }
        changed
    });
    if let Err(e) = result {
        tracing::warn!("cannot record pinned tool definitions: {e:#}");
    }
}

/// The items of `list` named in `names`.
fn pick(
    list: &std::collections::BTreeMap<String, Item>,
    names: &[String],
) -> std::collections::BTreeMap<String, Item> {
    names
        .iter()
        .filter_map(|name| Some((name.clone(), list.get(name)?.clone())))
        .collect()
}

/// What a person and a model are told of a `kind` ("tool" / "prompt") `item` of `server` that
/// changed since it was approved: withheld under `enforce`, offered under `warn`.
pub fn changed_text(server: &str, kind: &str, item: &str, policy: PinPolicy) -> String {
    let (server, item) = (crate::display::safe(server), crate::display::safe(item));
    let what = if policy == PinPolicy::Enforce {
        "it is withheld until you review it"
    } else {
        "it is offered (pinTools \"warn\")"
    };
    format!(
        "{kind} \"{item}\" of server \"{server}\" changed since you approved it (or is new): \
         {what}; review it with: mcp-reconcile review-tools {server}"
    )
}
