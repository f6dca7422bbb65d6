//! What a gateway offers its clients: the catalog as they see it (all of it, or one server's
//! under its own names), the route of a name they send, one caller per server behind it, and
//! resource subscriptions, routed as reads are.

use std::collections::HashMap;
use std::sync::{Mutex, PoisonError};

use rmcp::{ErrorData, Peer, RoleServer};

use super::{gone, Gateway};
use crate::host::{MergedCatalog, Route, Target};
use crate::session::Session;
use crate::transport::{CallError, Caller};

/// How many tool routes a gateway keeps at most (more are dropped, all at once).
const KEPT_ROUTES: usize = 4096;

/// The routes of the tools called lately, kept while the session says they are current
/// ([`Route::is_current`]): a call asks the session's loop (a round trip through its task,
/// for a daemon session in another process's) only for a tool it has not routed since the
/// session last changed.
#[derive(Default)]
pub(super) struct Routes(Mutex<HashMap<String, Route>>);

impl Routes {
    /// The kept route of the tool `name`, while current.
    fn current(&self, name: &str) -> Option<Route> {
        let mut routes = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        match routes.get(name) {
            Some(route) if route.is_current() => Some(route.clone()),
            // One is stale: the session changed, and every route kept before is stale too.
            Some(_) => {
                routes.clear();
                None
            }
            None => None,
        }
    }

    pub(super) fn keep(&self, name: &str, route: &Route) {
        let mut routes = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if routes.len() >= KEPT_ROUTES {
            routes.clear();
        }
        routes.insert(name.to_owned(), route.clone());
    }
}

impl<S: Session> Gateway<S> {
    /// Where a call of the tool `name` (qualified) goes: a kept route while it is current,
    /// else the session's answer (a route is kept; a message is not, it may change).
    pub(super) async fn tool_route(&self, name: &str) -> Result<Result<Route, String>, ErrorData> {
        if let Some(route) = self.routes.current(name) {
            return Ok(Ok(route));
        }
        let route = self
            .session
            .route(Target::Tool(name.to_owned()))
            .await
            .map_err(gone)?;
        if let Ok(route) = &route {
            self.routes.keep(name, route);
        }
        Ok(route)
    }

    /// The catalog as this gateway's clients see it: all of it, or (passthrough) the one
    /// server's entries under their own names.
    pub(super) async fn visible(&self) -> Result<MergedCatalog, ErrorData> {
        let catalog = self.catalog().await?;
        if self.only.is_none() {
            self.skills.note(&catalog);
            return Ok(self.names.rename(catalog));
        }
        let mut visible = MergedCatalog::default();
        for mut tool in catalog.tools {
            if let Some(route) = self.own_route(Target::Tool(tool.name.to_string())).await? {
                tool.name = route.name.into();
                visible.tools.push(tool);
            }
        }
        for mut prompt in catalog.prompts {
            if let Some(route) = self.own_route(Target::Prompt(prompt.name.clone())).await? {
                prompt.name = route.name;
                visible.prompts.push(prompt);
            }
        }
        for resource in catalog.resources {
            if self
                .own_route(Target::Resource(resource.uri.clone()))
                .await?
                .is_some()
            {
                visible.resources.push(resource);
            }
        }
        visible.resource_templates = catalog
            .resource_templates
            .into_iter()
            .filter(|(server, _)| self.only.as_deref() == Some(server.as_str()))
            .collect();
        visible.skills = super::skills::only(catalog.skills, self.only.as_deref());
        self.skills.note(&visible);
        Ok(visible)
    }

    /// `target`'s route when it leads to a server this gateway offers.
    pub(super) async fn own_route(&self, target: Target) -> Result<Option<Route>, ErrorData> {
        Ok(match self.session.route(target).await.map_err(gone)? {
            Ok(route) if self.offers(&route) => Some(route),
            _ => None,
        })
    }

    /// One caller per server this gateway offers anything of, for which `wanted` holds.
    pub(super) async fn callers(
        &self,
        wanted: impl Fn(&Caller) -> bool,
    ) -> Result<Vec<Caller>, ErrorData> {
        let catalog = self.visible().await?;
        let targets = catalog
            .tools
            .iter()
            .map(|t| Target::Tool(t.name.to_string()))
            .chain(
                catalog
                    .prompts
                    .iter()
                    .map(|p| Target::Prompt(p.name.clone())),
            )
            .chain(
                catalog
                    .resources
                    .iter()
                    .map(|r| Target::Resource(r.uri.clone())),
            );
        let mut callers: Vec<Caller> = Vec::new();
        for target in targets {
            let target = match target {
                Target::Tool(name) => Target::Tool(self.qualify(&name)),
                Target::Prompt(name) => Target::Prompt(self.qualify(&name)),
                other => other,
            };
            let Ok(route) = self.session.route(target).await.map_err(gone)? else {
                continue;
            };
            if wanted(&route.caller) && !callers.iter().any(|c| c.server() == route.caller.server())
            {
                callers.push(route.caller);
            }
        }
        Ok(callers)
    }

    /// `resources/subscribe` or `unsubscribe`, routed by URI as a read is.
    pub(super) async fn subscription(
        &self,
        uri: String,
        subscribe: bool,
        client: Peer<RoleServer>,
    ) -> Result<(), ErrorData> {
        let route = self
            .own_route(Target::Resource(uri.clone()))
            .await?
            .ok_or_else(|| {
                ErrorData::resource_not_found(
                    format!("this gateway offers no resource `{uri}`"),
                    None,
                )
            })?;
        match route
            .caller
            .asking(client)
            .subscription(uri, subscribe)
            .await
        {
            Ok(()) => Ok(()),
            Err(CallError::Mcp(error)) => Err(error),
            Err(CallError::Failed(error)) => Err(ErrorData::internal_error(error.message, None)),
        }
    }
}
