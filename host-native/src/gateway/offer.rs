//! What a gateway offers its clients: the catalog as they see it (all of it, or one server's
//! under its own names), the route of a name they send, one caller per server behind it, and
//! resource subscriptions, routed as reads are.

use rmcp::{ErrorData, Peer, RoleServer};

use super::{gone, Gateway};
use crate::host::{MergedCatalog, Route, Target};
use crate::session::Session;
use crate::transport::{CallError, Caller};

impl<S: Session> Gateway<S> {
    /// The catalog as this gateway's clients see it: all of it, or (passthrough) the one
    /// server's entries under their own names.
    pub(super) async fn visible(&self) -> Result<MergedCatalog, ErrorData> {
        let catalog = self.catalog().await?;
        if self.only.is_none() {
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
