//! MCP Apps (SEP-1865, the `io.modelcontextprotocol/ui` extension) through the gateway.
//!
//! An app is a server's `ui://` HTML resource that a host renders for a tool whose
//! `_meta.ui.resourceUri` names it; inside it, the app calls tools by the **server's own names**
//! and reads `ui://` resources the server need not list. Behind the gateway:
//! * every upstream connection declares the extension to its server (`transport/handler.rs`):
//!   a connection is made before any client and may serve several, so it cannot declare per
//!   client; a gateway client that did not declare it does not get the tools only an app may
//!   call (`visibility` without `"model"`), which a server would not show it either
//!   ([`Gateway::for_client`]);
//! * tools' `_meta` (with `ui.resourceUri`) and results' `_meta` pass unchanged: a `ui://` URI
//!   is the server's own and is never rewritten, whatever the tool is called;
//! * a `ui://` read no server lists goes to the one server whose tool names that URI as its
//!   `resourceUri` — the tool is the proof of ownership ([`Gateway::ui_route`]);
//! * a call by a server's own tool name (`get-time` for `mcp__clock__get-time`) goes to the one
//!   server that offers a tool of that name; when several do, the call gets a tool error that
//!   names each one's gateway name ([`Gateway::bare_alias`]). Under `--passthrough` the names
//!   are the server's own already.

use rmcp::model::Tool;
use rmcp::service::RequestContext;
use rmcp::{ErrorData, RoleServer};
use serde_json::Value;

use super::Gateway;
use crate::host::{Route, Target};
use crate::session::Session;
use crate::transport::apps::UI_EXTENSION;

/// Whether the client of `context` declared the extension (in `initialize`, or in this
/// request's `_meta` for a client of 2026-07-28).
pub fn declares_ui(context: &RequestContext<RoleServer>) -> bool {
    context
        .client_capabilities()
        .and_then(|capabilities| capabilities.extensions)
        .is_some_and(|extensions| extensions.contains_key(UI_EXTENSION))
}

/// `tool`'s `_meta.ui`, when it is an object.
fn ui_meta(tool: &Tool) -> Option<&serde_json::Map<String, Value>> {
    tool.meta.as_ref()?.get("ui")?.as_object()
}

/// The `ui://` resource `tool` is rendered with: `_meta.ui.resourceUri`, or the deprecated
/// flat `_meta["ui/resourceUri"]`.
pub fn resource_uri(tool: &Tool) -> Option<&str> {
    ui_meta(tool)
        .and_then(|ui| ui.get("resourceUri"))
        .or_else(|| tool.meta.as_ref()?.get("ui/resourceUri"))
        .and_then(Value::as_str)
}

/// Whether only an app may call `tool`: its `_meta.ui.visibility` is a list without
/// `"model"` (absent, it is `["model", "app"]`).
pub fn app_only(tool: &Tool) -> bool {
    ui_meta(tool)
        .and_then(|ui| ui.get("visibility"))
        .and_then(Value::as_array)
        .is_some_and(|visibility| !visibility.iter().any(|v| v == "model"))
}

/// What a call by a bare name resolves to.
#[derive(Debug, PartialEq, Eq)]
pub enum Alias {
    /// No offered tool has that own name: the name stays as it was.
    None,
    /// Exactly one: its name as the session routes it.
    One(String),
    /// Several: the message the call gets.
    Ambiguous(String),
}

/// The tool error of a bare `name` several servers offer, naming each one's gateway `names`.
fn ambiguous(name: &str, names: &[String]) -> String {
    // A server's own tool name is the server's to choose: escaped (never cut, it must stay
    // callable), as every name from a repository's servers reaches the model.
    let listed: Vec<String> = names
        .iter()
        .map(|n| format!("`{}`", crate::display::safe(n)))
        .collect();
    format!(
        "tool `{}` not found: more than one server offers a tool of that name, so it cannot \
         be called by it alone; call one of {}",
        crate::display::short_name(name),
        listed.join(", ")
    )
}

impl<S: Session> Gateway<S> {
    /// `tools` as the client of `context` is offered them: without the extension, not the
    /// tools only an app may call.
    pub(super) fn for_client(&self, tools: &mut Vec<Tool>, context: &RequestContext<RoleServer>) {
        if !declares_ui(context) {
            tools.retain(|tool| !app_only(tool));
        }
    }

    /// The offered tool(s) whose server's own name is `name`, which names no offered tool
    /// itself. Passthrough names are the server's own: nothing to resolve.
    pub(super) async fn bare_alias(&self, name: &str) -> Result<Alias, ErrorData> {
        if self.only.is_some() {
            return Ok(Alias::None);
        }
        let suffix = format!("__{name}");
        let tools = self.visible().await?.tools;
        if tools.iter().any(|tool| tool.name == name) {
            return Ok(Alias::None);
        }
        let mut found = Vec::new();
        for tool in tools.iter().filter(|t| t.name.ends_with(&suffix)) {
            let qualified = self.qualify(&tool.name);
            if let Some(route) = self.own_route(Target::Tool(qualified.clone())).await? {
                if route.name == name {
                    found.push((tool.name.to_string(), qualified));
                }
            }
        }
        Ok(match found.len() {
            0 => Alias::None,
            1 => Alias::One(found.remove(0).1),
            _ => Alias::Ambiguous(ambiguous(
                name,
                &found
                    .into_iter()
                    .map(|(shown, _)| shown)
                    .collect::<Vec<_>>(),
            )),
        })
    }

    /// The route of a call whose name `sent` (`name` as the session routes it) routed nowhere
    /// with `message`: the one offered tool whose own name `sent` is (kept under `name`, so the
    /// next call goes straight there while the session is unchanged), else `message`, or the
    /// message that names the candidates when several servers offer it.
    pub(super) async fn alias_route(
        &self,
        sent: &str,
        name: &str,
        message: String,
    ) -> Result<Result<Route, String>, ErrorData> {
        match self.bare_alias(sent).await? {
            Alias::None => Ok(Err(message)),
            Alias::Ambiguous(text) => Ok(Err(text)),
            Alias::One(qualified) => {
                let route = self.tool_route(&qualified).await?;
                if let Ok(route) = &route {
                    self.routes.keep(name, route);
                }
                Ok(route)
            }
        }
    }

    /// The route of a `ui://` `uri` no server lists: the server whose offered tools name it as
    /// their `resourceUri`, when exactly one server's do.
    pub(super) async fn ui_route(&self, uri: &str) -> Result<Option<Route>, ErrorData> {
        if !uri.starts_with("ui://") {
            return Ok(None);
        }
        let tools = self.visible().await?.tools;
        let mut owner: Option<Route> = None;
        for tool in tools.iter().filter(|t| resource_uri(t) == Some(uri)) {
            let Some(route) = self
                .own_route(Target::Tool(self.qualify(&tool.name)))
                .await?
            else {
                continue;
            };
            match &owner {
                Some(first) if first.server != route.server => return Ok(None),
                Some(_) => {}
                None => owner = Some(route),
            }
        }
        Ok(owner.map(|mut route| {
            route.name = uri.to_owned();
            route
        }))
    }
}

#[cfg(test)]
mod tests;
