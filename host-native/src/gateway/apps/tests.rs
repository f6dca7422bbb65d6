//! MCP Apps through the gateway, on in-memory servers ([`crate::testkit`]): an rmcp client that
//! declares the `io.modelcontextprotocol/ui` extension (or not) talks to the gateway over an
//! in-memory pipe and makes the calls an app makes — its server's own tool names, `ui://`
//! reads the server does not list.

use rmcp::model::ProtocolVersion;
use rmcp::model::{
    CallToolRequestParams, CallToolResult, ClientCapabilities, ClientConfig, Implementation,
    ReadResourceRequestParams, ResourceContents, Tool,
};
use rmcp::service::{ClientLifecycleMode, ClientServiceExt, RunningService};
use rmcp::{RoleClient, ServiceExt};
use serde_json::{json, Value};

use super::{ambiguous, app_only, resource_uri};
use crate::gateway::{Gateway, ToolNames};
use crate::host::HostHandle;
use crate::testkit::session::{entry_json as entry, start, Session};
use crate::transport::apps::UI_EXTENSION;

/// A client of `gateway` over an in-memory pipe; `ui`: it declares the extension.
async fn client(
    gateway: Gateway<HostHandle>,
    ui: bool,
) -> RunningService<RoleClient, ClientConfig> {
    client_of(gateway, ui, false).await
}

/// [`client`], of MCP 2026-07-28 (`server/discover`, capabilities in each request's `_meta`)
/// when `modern`.
async fn client_of(
    gateway: Gateway<HostHandle>,
    ui: bool,
    modern: bool,
) -> RunningService<RoleClient, ClientConfig> {
    let (near, far) = tokio::io::duplex(1 << 16);
    tokio::spawn(async move {
        if let Ok(served) = gateway.serve(far).await {
            let _ = served.waiting().await;
        }
    });
    let mut capabilities = ClientCapabilities::default();
    if ui {
        let settings = json!({"mimeTypes": ["text/html;profile=mcp-app"]});
        capabilities.extensions = Some(
            [(
                UI_EXTENSION.to_owned(),
                settings.as_object().cloned().unwrap_or_default(),
            )]
            .into_iter()
            .collect(),
        );
    }
    let config = ClientConfig::new(capabilities, Implementation::new("app-test", "0"));
    if modern {
        let lifecycle = ClientLifecycleMode::Discover {
            preferred_versions: vec![ProtocolVersion::V_2026_07_28],
        };
        config
            .with_protocol_version(ProtocolVersion::V_2026_07_28)
            .serve_with_lifecycle(near, lifecycle)
            .await
            .expect("the gateway answers server/discover")
    } else {
        config
            .serve(near)
            .await
            .expect("the gateway answers initialize")
    }
}

/// A session of the servers `tools` names (server → its tools), each tool with the `_meta`
/// `meta` names for it (`"server/tool"`), every server up.
async fn servers(tools: &[(&str, &[&str])], meta: &[(&str, Value)]) -> Session {
    let entries: serde_json::Map<String, Value> = tools
        .iter()
        .map(|(s, _)| ((*s).to_owned(), entry(1)))
        .collect();
    let mut s = start(Value::Object(entries));
    for (key, value) in meta {
        let (server, tool) = key.split_once('/').expect("server/tool");
        s.servers.server(server).set_tool_meta(tool, value.clone());
    }
    for (server, names) in tools {
        s.servers.server(server).set_tools(names).await;
    }
    s.pass("start").await;
    for (server, names) in tools {
        s.wait_server(server, |state| state.tools == names.len())
            .await;
    }
    s
}

async fn listed(client: &RunningService<RoleClient, ClientConfig>) -> Vec<Tool> {
    client.list_all_tools().await.expect("tools/list")
}

fn names(tools: &[Tool]) -> Vec<String> {
    tools.iter().map(|t| t.name.to_string()).collect()
}

async fn call(client: &RunningService<RoleClient, ClientConfig>, name: &str) -> CallToolResult {
    client
        .call_tool(CallToolRequestParams::new(name.to_owned()))
        .await
        .expect("a result, not a protocol error")
}

fn text(result: &CallToolResult) -> String {
    serde_json::to_value(&result.content)
        .ok()
        .and_then(|v| v[0]["text"].as_str().map(str::to_owned))
        .unwrap_or_default()
}

/// An app calls its server's tool by the server's own name: the one server that offers a tool
/// of that name gets it, and the result's `_meta` comes back unchanged.
#[tokio::test]
async fn an_apps_call_by_the_servers_own_name_reaches_the_one_server_that_offers_it() {
    let meta = json!({"ui": {"resourceUri": "ui://clock/app.html"}});
    let s = servers(
        &[("clock", &["get-time"]), ("b", &["echo"])],
        &[("clock/get-time", meta)],
    )
    .await;
    for names in [ToolNames::Mcp, ToolNames::Short] {
        let client = client(Gateway::new(s.handle.clone()).with_tool_names(names), true).await;
        let result = call(&client, "get-time").await;
        assert_ne!(result.is_error, Some(true), "{result:?}");
        assert_eq!(text(&result), "clock:get-time");
        let meta = serde_json::to_value(&result.meta).expect("json");
        assert_eq!(meta, json!({"served-by": "clock"}), "{result:?}");
        // Twice: the second goes by the kept route.
        assert_eq!(text(&call(&client, "get-time").await), "clock:get-time");
        let _ = client.cancel().await;
    }
    assert_eq!(s.servers.server("clock").calls().len(), 4);
    assert!(s.servers.server("b").calls().is_empty());
    s.stop().await;
}

/// A bare name two servers offer reaches neither: the call gets a tool error that names both
/// servers' tools as the client calls them.
#[tokio::test]
async fn a_bare_name_two_servers_offer_is_refused_naming_both() {
    let s = servers(&[("a", &["echo"]), ("b", &["echo"])], &[]).await;
    let client = client(
        Gateway::new(s.handle.clone()).with_tool_names(ToolNames::Short),
        true,
    )
    .await;
    let result = call(&client, "echo").await;
    assert_eq!(result.is_error, Some(true), "{result:?}");
    assert_eq!(
        text(&result),
        ambiguous("echo", &["a__echo".into(), "b__echo".into()])
    );
    assert!(s.servers.server("a").calls().is_empty());
    assert!(s.servers.server("b").calls().is_empty());
    // A name nobody offers keeps the session's own message.
    let result = call(&client, "nothing").await;
    assert_eq!(result.is_error, Some(true));
    assert!(
        !text(&result).contains("more than one server"),
        "{}",
        text(&result)
    );
    let _ = client.cancel().await;
    s.stop().await;
}

/// A `ui://` URI no server lists is read from the server whose tool names it; one that no
/// tool names, or that tools of two servers name, is not found.
#[tokio::test]
async fn an_unlisted_ui_resource_is_read_from_the_server_whose_tool_names_it() {
    let shared = json!({"ui": {"resourceUri": "ui://shared/app.html"}});
    let s = servers(
        &[("clock", &["get-time"]), ("b", &["show"])],
        &[
            (
                "clock/get-time",
                json!({"ui": {"resourceUri": "ui://clock/app.html"}}),
            ),
            ("clock/tick", shared.clone()),
            ("b/show", shared),
        ],
    )
    .await;
    let client = client(Gateway::new(s.handle.clone()), true).await;
    let read = |uri: &str| client.read_resource(ReadResourceRequestParams::new(uri.to_owned()));
    let result = read("ui://clock/app.html").await.expect("resources/read");
    match &result.contents[0] {
        ResourceContents::TextResourceContents { text, .. } => {
            assert_eq!(text, "clock:ui://clock/app.html")
        }
        other => panic!("{other:?}"),
    }
    assert!(read("ui://nobody/app.html").await.is_err());
    // `tick` is not offered (not in clock's tools): only b's tool names the shared URI.
    assert!(read("ui://shared/app.html").await.is_ok());
    let _ = client.cancel().await;
    s.stop().await;
}

/// A tool only an app may call stays listed, with its `_meta`, and callable for a client that
/// declared the extension (in `initialize`, or a 2026-07-28 client in its request's `_meta`);
/// a client that did not is not offered it.
#[tokio::test]
async fn an_app_only_tool_is_offered_only_to_a_client_that_declared_the_extension() {
    let refresh = json!({"ui": {"resourceUri": "ui://clock/app.html", "visibility": ["app"]}});
    let s = servers(
        &[("clock", &["get-time", "refresh"])],
        &[("clock/refresh", refresh.clone())],
    )
    .await;
    for modern in [false, true] {
        let apps = client_of(Gateway::new(s.handle.clone()), true, modern).await;
        let tools = listed(&apps).await;
        assert_eq!(
            names(&tools),
            ["mcp__clock__get-time", "mcp__clock__refresh"]
        );
        assert_eq!(serde_json::to_value(&tools[1].meta).expect("json"), refresh);
        assert!(app_only(&tools[1]) && resource_uri(&tools[1]) == Some("ui://clock/app.html"));
        assert_eq!(text(&call(&apps, "refresh").await), "clock:refresh");
        let plain = client_of(Gateway::new(s.handle.clone()), false, modern).await;
        assert_eq!(
            names(&listed(&plain).await),
            ["mcp__clock__get-time"],
            "modern: {modern}"
        );
        let _ = apps.cancel().await;
        let _ = plain.cancel().await;
    }
    s.stop().await;
}

/// Every server connection declares the extension to its server, with the content type the
/// gateway's clients may render: a server that offers UI tools only to such a host offers them.
#[tokio::test]
async fn every_connection_declares_the_ui_extension_to_its_server() {
    let s = servers(&[("clock", &["get-time"])], &[]).await;
    assert_eq!(
        s.servers.server("clock").declared_extensions(),
        [UI_EXTENSION]
    );
    s.stop().await;
}

#[test]
fn a_tools_ui_resource_and_visibility_are_read_from_its_meta() {
    let tool = |meta: Value| {
        let mut tool = Tool::new("t", "d", serde_json::Map::new());
        tool.meta = serde_json::from_value(meta).ok();
        tool
    };
    let both = tool(json!({"ui": {"resourceUri": "ui://a/x.html"}}));
    assert_eq!(resource_uri(&both), Some("ui://a/x.html"));
    assert!(!app_only(&both), "no visibility is model and app");
    let flat = tool(json!({"ui/resourceUri": "ui://a/y.html"}));
    assert_eq!(resource_uri(&flat), Some("ui://a/y.html"));
    assert!(app_only(&tool(json!({"ui": {"visibility": ["app"]}}))));
    assert!(!app_only(&tool(json!({"ui": {"visibility": ["model"]}}))));
    assert!(!app_only(&tool(json!({}))));
}
