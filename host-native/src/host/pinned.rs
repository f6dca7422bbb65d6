//! The engine's side of pinned definitions (issue 40, [`crate::pins`]): what it compares after
//! every event, and what it withholds from the merged catalog and from routing.

use std::borrow::Cow;

use mcp_reconcile_kernel::pin::{effective_pin, PinPolicy};

use super::{Backend, Host};
use crate::pins::changed_text;
use crate::transport::Catalog;

impl<B: Backend> Host<B> {
    /// Compares every offered listing with its baseline (see [`crate::pins::Pins::refresh`]).
    pub(super) fn refresh_pins(&mut self) {
        let settings = self.snapshot.as_ref().map(|s| s.pin).unwrap_or_default();
        let mut pins = std::mem::take(&mut self.pins);
        pins.refresh(self.offered().map(|(name, config, listing)| {
            (
                name.as_str(),
                config,
                effective_pin(config, &settings),
                listing,
            )
        }));
        self.pins = pins;
    }

    /// `server`'s listing without what it withholds.
    pub(super) fn pinned_listing<'a>(
        &self,
        server: &str,
        listing: &'a Catalog,
    ) -> Cow<'a, Catalog> {
        let Some(waiting) = self.pins.waiting(server).filter(|w| w.withholds()) else {
            return Cow::Borrowed(listing);
        };
        let mut kept = Catalog {
            tools: listing.tools.clone(),
            prompts: listing.prompts.clone(),
            resources: listing.resources.clone(),
            resource_templates: listing.resource_templates.clone(),
            skills: listing.skills.clone(),
            ..Catalog::default()
        };
        kept.tools.retain(|t| !waiting.withholds_tool(&t.name));
        kept.prompts.retain(|p| !waiting.withholds_prompt(&p.name));
        if let Some(skills) = &mut kept.skills {
            skills.retain(|s| !waiting.withholds_skill(&s.uri));
        }
        Cow::Owned(kept)
    }

    /// Why the tool (or prompt) `own` of `server` is not routed: it waits for review.
    pub(super) fn withheld(&self, server: &str, own: &str, tool: bool) -> Option<String> {
        let waiting = self.pins.waiting(server)?;
        let held = if tool {
            waiting.withholds_tool(own)
        } else {
            waiting.withholds_prompt(own)
        };
        let kind = if tool { "tool" } else { "prompt" };
        held.then(|| changed_text(server, kind, own, PinPolicy::Enforce))
    }

    /// Why the skill at `uri` of `catalog`'s `server`, or the skill whose file `uri` is, is
    /// not routed: it waits for review.
    pub(super) fn withheld_skill(
        &self,
        server: &str,
        catalog: &Catalog,
        uri: &str,
    ) -> Option<String> {
        let waiting = self.pins.waiting(server)?;
        let skill = crate::skills::owning(catalog, uri)?;
        waiting
            .withholds_skill(&skill.uri)
            .then(|| changed_text(server, "skill", &skill.uri, PinPolicy::Enforce))
    }

    /// The tools and prompts of `server` withheld now (its own names), for its status.
    pub(super) fn withheld_names(&self, server: &str) -> Vec<String> {
        self.pins
            .waiting(server)
            .filter(|w| w.withholds())
            .map(|w| {
                let skills = w.skills.iter();
                w.tools
                    .iter()
                    .chain(&w.prompts)
                    .chain(skills)
                    .cloned()
                    .collect()
            })
            .unwrap_or_default()
    }
}
