//! End-to-end: a client of MCP 2026-07-28 (SPEC §16) — rmcp's own client started with
//! `server/discover`, never `initialize` — in front of `serve` over stdio, in-process
//! (`--no-daemon`) and through the daemon: it discovers the gateway, lists and calls tools
//! of a legacy upstream server, gets complete results with cache hints, and hears a hot
//! reload's new tool on a `subscriptions/listen` stream that asked for tool changes only.
//!
//! And translation across eras: a legacy server's `elicitation/create` and `roots/list` during
//! such a client's call reach it as input-required results (rmcp's client answers them through
//! its handler and calls again), and a tampered `requestState` is refused with `-32602`.

// Roots are deprecated by SEP-2577 (2026-07-28); a legacy server still asks for them.
#![allow(deprecated)]

use crate::common;

use std::fs;
use std::os::unix::process::CommandExt;
use std::process::Stdio;
use std::time::Duration;

use common::*;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, ClientCapabilities, ClientConfig, ElicitRequestParams,
    ElicitResult, ElicitationAction, ElicitationCapability, Implementation, ListRootsResult,
    PaginatedRequestParams, ProtocolVersion, Root, RootsCapabilities, ServerNotification,
    SubscriptionFilter,
};
use rmcp::service::{
    ClientLifecycleMode, ClientServiceExt, RequestContext, RunningService, ServiceError,
};
use rmcp::{ClientHandler, RoleClient};
use serde_json::json;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_modern_client_uses_serve_in_process_and_hears_a_hot_reload_on_its_listen_stream() {
    modern_client_round(Backend::InProcess).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_modern_client_uses_a_daemon_session_and_hears_a_hot_reload_on_its_listen_stream() {
    modern_client_round(Backend::Daemon).await;
}

/// Where a test's `serve` runs its session: in its own process, or on a daemon.
#[derive(Clone, Copy)]
enum Backend {
    InProcess,
    Daemon,
}

/// `serve` for `p` on `backend`; for a daemon session, a daemon of the test's own (in a
/// private runtime dir) is started and returned, stopped when it drops.
fn serve_command(p: &Project, backend: Backend) -> (std::process::Command, Option<Group>) {
    let mut command = std::process::Command::new(cli());
    command
        .arg("serve")
        .args(p.flags())
        .args(["--debounce-ms", "150"]);
    let daemon = match backend {
        Backend::InProcess => {
            command.arg("--no-daemon");
            None
        }
        Backend::Daemon => {
            let runtime = p.path("run");
            fs::create_dir_all(&runtime).expect("runtime dir");
            command.env("XDG_RUNTIME_DIR", &runtime);
            Some(start_daemon(p, &runtime))
        }
    };
    (command, daemon)
}

/// `serve` on `backend` over stdio, a 2026-07-28 client (`handler`) discovered on it; `serve`'s
/// process group (and the daemon, if any) are stopped when the guards drop.
async fn discover<H: ClientHandler>(
    p: &Project,
    backend: Backend,
    handler: H,
) -> (RunningService<RoleClient, H>, (KillGroup, Option<Group>)) {
    let log = p.path("serve.log");
    let (mut command, daemon) = serve_command(p, backend);
    command
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(fs::File::create(&log).expect("log file"))
        .process_group(0);
    let mut child = tokio::process::Command::from(command)
        .spawn()
        .expect("serve starts");
    let stdout = child.stdout.take().expect("stdout");
    let stdin = child.stdin.take().expect("stdin");

    let group = KillGroup(child.id().expect("a pid"));
    let lifecycle = ClientLifecycleMode::Discover {
        preferred_versions: vec![ProtocolVersion::V_2026_07_28],
    };
    let client = tokio::time::timeout(
        PATIENCE,
        handler.serve_with_lifecycle((stdout, stdin), lifecycle),
    )
    .await
    .expect("discovery in time")
    .unwrap_or_else(|e| {
        panic!(
            "serve answers server/discover: {e}; log:\n{}",
            fs::read_to_string(&log).unwrap_or_default()
        )
    });
    let info = client.peer_info().expect("the gateway's discover result");
    assert_eq!(info.protocol_version, ProtocolVersion::V_2026_07_28);
    // The child is reaped with the group; its handle may go.
    drop(child);
    (client, (group, daemon))
}

async fn modern_client_round(backend: Backend) {
    let p = Project::new();
    p.write_settings(json!({"mcpServers": {"a": p.server("a", "echo")}}));
    let config = ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new("modern-test", "0"),
    )
    .with_protocol_version(ProtocolVersion::V_2026_07_28);
    let (client, _group) = discover(&p, backend, config).await;

    // Lists carry cache hints; the legacy upstream's tool is there, and answers.
    let tools = client
        .list_tools(Some(PaginatedRequestParams::default()))
        .await
        .expect("tools/list");
    let names: Vec<&str> = tools.tools.iter().map(|t| t.name.as_ref()).collect();
    assert_eq!(names, ["mcp__a__echo"]);
    assert_eq!(tools.ttl_ms, Some(1_000), "{tools:?}");
    assert!(tools.cache_scope.is_some(), "{tools:?}");
    let echoed = client
        .call_tool(
            CallToolRequestParams::new("mcp__a__echo").with_arguments(
                json!({"text": "hi"})
                    .as_object()
                    .cloned()
                    .unwrap_or_default(),
            ),
        )
        .await
        .expect("tools/call");
    assert_ne!(echoed.is_error, Some(true), "{echoed:?}");
    assert!(
        serde_json::to_string(&echoed.content)
            .unwrap_or_default()
            .contains("hi"),
        "{echoed:?}"
    );

    // A listen stream for tool changes only: an edit that adds a server is announced on it.
    let mut filter = SubscriptionFilter::default();
    filter.tools_list_changed = Some(true);
    let mut stream = client.listen(filter).await.expect("subscriptions/listen");
    assert_eq!(stream.acknowledged().tools_list_changed, Some(true));
    assert_eq!(stream.acknowledged().prompts_list_changed, None);
    p.write_settings(json!({"mcpServers": {
        "a": p.server("a", "echo"),
        "b": p.server("b", "add"),
    }}));
    let heard = tokio::time::timeout(PATIENCE, stream.next())
        .await
        .expect("a change on the listen stream in time")
        .expect("the stream is open")
        .expect("a notification");
    assert!(
        matches!(heard, ServerNotification::ToolListChangedNotification(_)),
        "{heard:?}"
    );
    let mut names = Vec::new();
    for _ in 0..50 {
        let tools = client
            .list_tools(Some(PaginatedRequestParams::default()))
            .await
            .expect("tools/list");
        names = tools.tools.iter().map(|t| t.name.to_string()).collect();
        if names.len() == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert_eq!(names, ["mcp__a__echo", "mcp__b__add"]);
    assert_eq!(p.spawns("a"), 1, "the untouched server kept its process");

    let _ = stream.cancel().await;
    let _ = client.cancel().await;
}

/// A 2026-07-28 client that answers what a server asks (a name, and one root) and keeps the
/// log messages it is sent.
#[derive(Clone, Default)]
struct Answering {
    logs: std::sync::Arc<std::sync::Mutex<Vec<String>>>,
}

impl ClientHandler for Answering {
    async fn on_logging_message(
        &self,
        params: rmcp::model::LoggingMessageNotificationParam,
        _context: rmcp::service::NotificationContext<RoleClient>,
    ) {
        self.logs
            .lock()
            .expect("logs")
            .push(params.data.to_string());
    }

    async fn create_elicitation(
        &self,
        _request: ElicitRequestParams,
        _context: RequestContext<RoleClient>,
    ) -> Result<ElicitResult, rmcp::ErrorData> {
        Ok(ElicitResult::new(ElicitationAction::Accept).with_content(json!({"name": "Ann"})))
    }

    #[allow(deprecated)]
    async fn list_roots(
        &self,
        _context: RequestContext<RoleClient>,
    ) -> Result<ListRootsResult, rmcp::ErrorData> {
        Ok(ListRootsResult::new(vec![Root::new(
            "file:///work/answering",
        )]))
    }

    fn get_info(&self) -> ClientConfig {
        let mut capabilities = ClientCapabilities::default();
        capabilities.elicitation = Some(ElicitationCapability::default());
        capabilities.roots = Some(RootsCapabilities::default());
        ClientConfig::new(capabilities, Implementation::new("answering", "0"))
            .with_protocol_version(ProtocolVersion::V_2026_07_28)
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_legacy_servers_questions_reach_a_modern_client_in_process() {
    legacy_server_modern_client(Backend::InProcess).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_legacy_servers_questions_reach_a_modern_client_of_a_daemon_session() {
    legacy_server_modern_client(Backend::Daemon).await;
}

/// A legacy server's questions reach a 2026-07-28 client as input-required results; a
/// tampered `requestState` is refused; log messages only at the level the request asks for.
async fn legacy_server_modern_client(backend: Backend) {
    let p = Project::new();
    p.write_settings(json!({"mcpServers": {"a": p.server("a", "ask,roots")}}));
    let answering = Answering::default();
    let logs = answering.logs.clone();
    let (client, _group) = discover(&p, backend, answering).await;
    let call = |name: &str, args: serde_json::Value| {
        CallToolRequestParams::new(name.to_owned())
            .with_arguments(args.as_object().cloned().unwrap_or_default())
    };

    // rmcp's client meets the input-required result, asks its handler, and calls again.
    let asked = client
        .call_tool(call("mcp__a__ask", json!({"text": "who are you?"})))
        .await
        .expect("tools/call completes after one round of input");
    let text = serde_json::to_string(&asked.content).unwrap_or_default();
    assert!(text.contains("action=accept name=Ann"), "{asked:?}");
    let roots = client
        .call_tool(call("mcp__a__roots", json!({})))
        .await
        .expect("tools/call completes after one round of input");
    let text = serde_json::to_string(&roots.content).unwrap_or_default();
    assert!(text.contains("file:///work/answering"), "{roots:?}");

    // One round by hand: the question, then a tampered state, then the real one.
    let first = client
        .call_tool_once(call("mcp__a__ask", json!({"text": "again?"})))
        .await
        .expect("tools/call");
    let CallToolResponse::InputRequired(required) = first else {
        panic!("an input-required result: {first:?}");
    };
    let requests = required.input_requests.clone().unwrap_or_default();
    let (key, _) = requests.iter().next().expect("one question");
    assert_eq!(requests.len(), 1, "{requests:?}");
    let state = required.request_state.clone().expect("a requestState");
    let mut tampered = state.clone();
    tampered.insert(tampered.len() / 2, 'x');
    let answer = json!({"action": "accept", "content": {"name": "Bob"}});
    let responses = || {
        [(key.clone(), answer.clone())]
            .into_iter()
            .collect::<rmcp::model::InputResponses>()
    };
    let refused = client
        .call_tool_once(
            call("mcp__a__ask", json!({"text": "again?"}))
                .with_input_responses(responses())
                .with_request_state(tampered),
        )
        .await;
    match refused {
        Err(ServiceError::McpError(error)) => assert_eq!(error.code.0, -32602, "{error:?}"),
        other => panic!("a tampered requestState is refused: {other:?}"),
    }
    let done = client
        .call_tool_once(
            call("mcp__a__ask", json!({"text": "again?"}))
                .with_input_responses(responses())
                .with_request_state(state),
        )
        .await
        .expect("tools/call");
    let CallToolResponse::Complete(done) = done else {
        panic!("the call completes: {done:?}");
    };
    let text = serde_json::to_string(&done.content).unwrap_or_default();
    assert!(text.contains("action=accept name=Bob"), "{done:?}");

    // The server logged before each question; a 2026-07-28 client that asked for no log level
    // got none of it. One that asks for `info` gets the next call's.
    assert_eq!(*logs.lock().expect("logs"), Vec::<String>::new());
    let mut meta = rmcp::model::RequestMetaObject::new();
    meta.set_log_level(rmcp::model::LoggingLevel::Info);
    let mut logged = call("mcp__a__ask", json!({"text": "logged?"}));
    logged.meta = Some(meta);
    client.call_tool(logged).await.expect("tools/call");
    wait_until_async("the log message of the call that asked for it", || {
        logs.lock()
            .expect("logs")
            .iter()
            .any(|l| l.contains("asking: logged?"))
    })
    .await;
    let _ = client.cancel().await;
}

/// The other way across: a legacy client (it began with `initialize`) calls a tool of a
/// 2026-07-28 server (streamable HTTP, opened with `server/discover`) that answers with an
/// input-required result. The host asks the client with an `elicitation/create` of its own,
/// and calls the server again with the answer and the server's `requestState`.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_modern_servers_question_reaches_a_legacy_client_in_process() {
    modern_server_legacy_client(Backend::InProcess).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_modern_servers_question_reaches_a_legacy_client_of_a_daemon_session() {
    modern_server_legacy_client(Backend::Daemon).await;
}

async fn modern_server_legacy_client(backend: Backend) {
    let mut upstream = HttpFixture::modern_reference();
    let p = Project::new();
    p.write_settings(json!({"mcpServers": {"m": {"httpUrl": upstream.url}}}));
    let (mut command, _daemon) = serve_command(&p, backend);
    let log = p.path("serve.log");
    command.stderr(fs::File::create(&log).expect("log file"));
    let mut served = Served::spawn(command, log).await;
    let result = served
        .call("mcp__m__test_input_required_result_elicitation", json!({}))
        .await;
    assert_ne!(result.is_error, Some(true), "{result:?}");
    let text = serde_json::to_string(&result.content).unwrap_or_default();
    assert!(text.contains("Hello, "), "{result:?}");
    let mut asked = None;
    while let Ok(heard) = served.heard.try_recv() {
        if let Heard::Elicited(message) = heard {
            asked = Some(message);
        }
    }
    assert_eq!(asked.as_deref(), Some("What is your name?"));
    // `status` finds the session where it runs (a daemon session through the test's daemon).
    let out = std::process::Command::new(cli())
        .args(["status", "--json"])
        .args(p.flags())
        .env("XDG_RUNTIME_DIR", p.path("run"))
        .output()
        .expect("status runs");
    let all: serde_json::Value = serde_json::from_slice(&out.stdout).expect("status --json");
    let status = all
        .as_array()
        .and_then(|a| a.iter().find(|s| s["name"] == "m"))
        .expect("m in status");
    assert_eq!(status["protocol"], "2026-07-28", "{status}");
    drop(served);
    upstream.stop();
}
