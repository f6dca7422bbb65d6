//! MCP Apps (SEP-1865) through `serve`, in front of a real Apps server: the npm
//! `@modelcontextprotocol/server-basic-vanillajs` 2.0.3 (pinned in the root `package.json`), on
//! stdio, whose tool `get-time` names its HTML view `ui://get-time/mcp-app.html` in
//! `_meta.ui.resourceUri`. The client renders nothing but makes the calls a host and its app
//! make: it declares the `io.modelcontextprotocol/ui` extension, lists the tool and reads its
//! `ui://` resource, then calls the tool by the **server's own name** (`get-time`, as the app
//! inside the view does) and by the gateway's name. Over stdio through a daemon session, and
//! over `serve --http` for a client of each protocol era; prefixed, short and `--passthrough`
//! names. A client without the extension is offered the tool exactly as the server lists it
//! to a client that connects to it directly (this server offers it to every client).

use crate::common;

use std::fs;
use std::os::unix::process::CommandExt;
use std::process::Stdio;
use std::time::{Duration, Instant};

use common::*;
use rmcp::model::{
    CallToolRequestParams, ClientCapabilities, ClientConfig, Implementation,
    PaginatedRequestParams, ProtocolVersion, ReadResourceRequestParams, ResourceContents, Tool,
};
use rmcp::service::{ClientLifecycleMode, ClientServiceExt, RunningService};
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, TokioChildProcess};
use rmcp::{RoleClient, ServiceExt};
use serde_json::{json, Value};

/// The app's view, as the server's tool names it.
const VIEW: &str = "ui://get-time/mcp-app.html";
/// The MIME type of an app's HTML.
const APP_MIME: &str = "text/html;profile=mcp-app";

/// The installed server's entry point (`node_modules/.bin/mcp-server-basic-vanillajs`).
fn apps_server() -> String {
    require_node_20("the MCP Apps server");
    installed("node_modules/@modelcontextprotocol/server-basic-vanillajs/dist/index.js")
}

/// Settings with the Apps server as `clock` beside a fixture server `other`.
fn settings(p: &Project) -> Value {
    json!({"mcpServers": {
        "clock": {"command": "node", "args": [apps_server(), "--stdio"]},
        "other": p.server("other", "echo"),
    }})
}

/// A client's configuration; `ui`: it declares the extension; `modern`: MCP 2026-07-28.
fn config(ui: bool, modern: bool) -> ClientConfig {
    let mut capabilities = ClientCapabilities::default();
    if ui {
        let settings = json!({"mimeTypes": [APP_MIME]});
        capabilities.extensions = Some(
            [(
                "io.modelcontextprotocol/ui".to_owned(),
                settings.as_object().cloned().unwrap_or_default(),
            )]
            .into_iter()
            .collect(),
        );
    }
    let config = ClientConfig::new(capabilities, Implementation::new("apps-test", "0"));
    if modern {
        config.with_protocol_version(ProtocolVersion::V_2026_07_28)
    } else {
        config
    }
}

/// The tool list once it names `tool` (the server is node: its start may outlast the grace).
async fn wait_listed(client: &RunningService<RoleClient, ClientConfig>, tool: &str) -> Vec<Tool> {
    let start = Instant::now();
    loop {
        let tools = client
            .list_tools(Some(PaginatedRequestParams::default()))
            .await
            .expect("tools/list")
            .tools;
        if tools.iter().any(|t| t.name == tool) {
            return tools;
        }
        assert!(start.elapsed() < PATIENCE, "{tool} never listed: {tools:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// What a host and its app do, with `shown` the gateway's name of `get-time`: the tool is
/// listed with its `_meta.ui` as the server gave it, its view reads as the app's HTML, and a
/// call by the server's own name and one by `shown` both answer with the server's result.
async fn app_round(client: &RunningService<RoleClient, ClientConfig>, shown: &str) {
    let tools = wait_listed(client, shown).await;
    let tool = tools.iter().find(|t| t.name == shown).expect("listed");
    let meta = serde_json::to_value(&tool.meta).expect("json");
    assert_eq!(meta["ui"]["resourceUri"], VIEW, "{meta}");

    let read = client
        .read_resource(ReadResourceRequestParams::new(VIEW))
        .await
        .expect("resources/read of the view");
    match &read.contents[0] {
        ResourceContents::TextResourceContents {
            uri,
            mime_type,
            text,
            ..
        } => {
            assert_eq!(uri, VIEW);
            assert_eq!(mime_type.as_deref(), Some(APP_MIME));
            assert!(
                text.to_lowercase().contains("<html"),
                "not HTML: {text:.200}"
            );
        }
        other => panic!("the view is not text: {other:?}"),
    }

    for name in ["get-time", shown] {
        let result = client
            .call_tool(CallToolRequestParams::new(name.to_owned()))
            .await
            .expect("tools/call");
        assert_ne!(result.is_error, Some(true), "{name}: {result:?}");
        let time = result
            .structured_content
            .as_ref()
            .and_then(|s| s["time"].as_str())
            .unwrap_or_default();
        assert!(
            time.contains('T') && time.ends_with('Z'),
            "{name}: {result:?}"
        );
    }
}

/// A daemon of the test's own for `p` (in `p`'s private runtime dir), stopped on drop.
fn own_daemon(p: &Project) -> Group {
    let runtime = p.path("run");
    fs::create_dir_all(&runtime).expect("runtime dir");
    start_daemon(p, &runtime)
}

/// `serve` over stdio with `extra` flags, a session of the daemon [`own_daemon`] started; its
/// process group is stopped when the guard drops.
fn stdio_serve(p: &Project, extra: &[&str]) -> (tokio::process::Child, KillGroup) {
    let mut command = std::process::Command::new(cli());
    command
        .arg("serve")
        .args(p.flags())
        .args(["--debounce-ms", "150"])
        .args(extra)
        .env("XDG_RUNTIME_DIR", p.path("run"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .process_group(0);
    let child = tokio::process::Command::from(command)
        .spawn()
        .expect("serve starts");
    let group = KillGroup(child.id().expect("a pid"));
    (child, group)
}

/// Connects `config` to a `serve` child over its stdio (`initialize`, or `server/discover`
/// for a modern one).
async fn over_stdio(
    child: &mut tokio::process::Child,
    config: ClientConfig,
    modern: bool,
) -> RunningService<RoleClient, ClientConfig> {
    let stdout = child.stdout.take().expect("stdout");
    let stdin = child.stdin.take().expect("stdin");
    let connecting = async {
        if modern {
            let lifecycle = ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            };
            config
                .serve_with_lifecycle((stdout, stdin), lifecycle)
                .await
        } else {
            config.serve((stdout, stdin)).await
        }
    };
    tokio::time::timeout(PATIENCE, connecting)
        .await
        .expect("handshake in time")
        .expect("serve answers the handshake")
}

/// Connects `config` to `serve --http` at `url` (with `token` unless empty).
async fn over_http(
    url: &str,
    token: &str,
    config: ClientConfig,
    modern: bool,
) -> RunningService<RoleClient, ClientConfig> {
    mcp_reconcile::tls::install_crypto_provider();
    let http = reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("HTTP client");
    let mut transport_config = StreamableHttpClientTransportConfig::with_uri(url.to_owned());
    if !token.is_empty() {
        transport_config = transport_config.auth_header(token.to_owned());
    }
    let transport = StreamableHttpClientTransport::with_client(http, transport_config);
    let connecting = async {
        if modern {
            let lifecycle = ClientLifecycleMode::Discover {
                preferred_versions: vec![ProtocolVersion::V_2026_07_28],
            };
            config.serve_with_lifecycle(transport, lifecycle).await
        } else {
            config.serve(transport).await
        }
    };
    tokio::time::timeout(PATIENCE, connecting)
        .await
        .expect("handshake in time")
        .expect("serve answers the handshake")
}

/// Over stdio through a daemon session, with `--tool-names short`: the app's calls work; and
/// the client of a second `serve` on that daemon, without the extension, is offered the tool
/// as the server lists it to a client of its own.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_app_host_on_stdio_reads_the_view_and_calls_the_tool_by_the_servers_own_name() {
    let p = Project::new();
    p.write_settings(settings(&p));
    let _daemon = own_daemon(&p);
    let (mut child, _serve) = stdio_serve(&p, &["--tool-names", "short"]);
    let client = over_stdio(&mut child, config(true, false), false).await;
    app_round(&client, "clock__get-time").await;
    let _ = client.cancel().await;

    // Without the extension: the tool as a direct client of the server sees it.
    let (mut plain_child, _plain) = stdio_serve(&p, &[]);
    let plain = over_stdio(&mut plain_child, config(false, false), false).await;
    let through = wait_listed(&plain, "mcp__clock__get-time").await;
    let through = through
        .iter()
        .find(|t| t.name == "mcp__clock__get-time")
        .expect("listed");
    let direct = direct_listing().await;
    let mut renamed = serde_json::to_value(through).expect("json");
    renamed["name"] = json!("get-time");
    assert_eq!(renamed, serde_json::to_value(&direct).expect("json"));
    let _ = plain.cancel().await;
}

/// `get-time` as the Apps server lists it to a client of its own that declares nothing.
async fn direct_listing() -> Tool {
    let mut command = tokio::process::Command::new("node");
    command.arg(apps_server()).arg("--stdio").process_group(0);
    let transport = TokioChildProcess::new(command).expect("the server starts");
    let client = tokio::time::timeout(PATIENCE, ().serve(transport))
        .await
        .expect("handshake in time")
        .expect("the server answers initialize");
    let tools = client.list_all_tools().await.expect("tools/list");
    let _ = client.cancel().await;
    tools
        .into_iter()
        .find(|t| t.name == "get-time")
        .expect("the server lists get-time")
}

/// Over `serve --http`, a client of 2025-11-25 with short names and one of 2026-07-28 (the
/// extension declared in each request's `_meta`) with prefixed names, at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn app_hosts_of_both_eras_over_http_read_the_view_and_call_by_the_servers_own_name() {
    let p = Project::new();
    p.write_settings(settings(&p));
    let mut served = ServeHttp::start(&p);
    let token = served.token();
    let modern = over_http(&served.url, &token, config(true, true), true).await;
    let info = modern.peer_info().expect("the discover result");
    assert_eq!(info.protocol_version, ProtocolVersion::V_2026_07_28);
    app_round(&modern, "mcp__clock__get-time").await;
    let legacy = over_http(&served.url, &token, config(true, false), false).await;
    assert_ne!(
        legacy
            .peer_info()
            .expect("the initialize result")
            .protocol_version,
        ProtocolVersion::V_2026_07_28
    );
    app_round(&legacy, "mcp__clock__get-time").await;
    let _ = modern.cancel().await;
    let _ = legacy.cancel().await;
    served.stop();
}

/// `serve --http --passthrough clock`: the names are the server's own, for clients of both
/// eras.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn app_hosts_of_both_eras_use_the_view_through_passthrough() {
    let p = Project::new();
    p.write_settings(settings(&p));
    let (_group, url) = serve_passthrough_no_auth(&p, "clock");
    for modern in [true, false] {
        let client = over_http(&url, "", config(true, modern), modern).await;
        app_round(&client, "get-time").await;
        let _ = client.cancel().await;
    }
}
