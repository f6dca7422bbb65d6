//! A client of each MCP era parses every byte `serve --http` sends it. A real `serve` (child
//! process, own process group) in front of the fixture server, driven with raw HTTP requests
//! (reqwest) as a client of 2025-03-26 (no `MCP-Protocol-Version` header), 2025-06-18 and
//! 2025-11-25 sends them: `initialize`, the GET stream, `tools/list`, `tools/call`, and the
//! `list_changed` a settings edit announces on the GET stream.
//!
//! Every SSE event is read as a client of that era reads it: before 2025-11-25 every event's
//! data is a JSON-RPC message (Gemini CLI 0.61 fails on anything else and drops the server's
//! tools), so no SSE priming event (empty `data:`, `retry:`) may come; from 2025-11-25 on the
//! priming event starts each stream (SEP-1699) and everything else is JSON-RPC.

use crate::common;

use std::time::Duration;

use common::*;
use serde_json::{json, Value};

/// A client of one protocol version.
#[derive(Clone, Copy, Debug)]
struct Era {
    version: &'static str,
    /// Sends `MCP-Protocol-Version` after `initialize` (2025-06-18 and later).
    header: bool,
    /// Expects SSE priming events (2025-11-25 and later).
    primed: bool,
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_2025_03_26_client_gets_only_json_rpc_events() {
    session_of(Era {
        version: "2025-03-26",
        header: false,
        primed: false,
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_2025_06_18_client_gets_only_json_rpc_events() {
    session_of(Era {
        version: "2025-06-18",
        header: true,
        primed: false,
    })
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_2025_11_25_client_gets_priming_events_and_json_rpc() {
    session_of(Era {
        version: "2025-11-25",
        header: true,
        primed: true,
    })
    .await;
}

/// One session of a client of `era`; every SSE body it receives is checked with [`check`].
async fn session_of(era: Era) {
    let p = Project::new();
    let settings = |tools: &str| json!({"mcpServers": {"notes": p.server("notes", tools)}});
    p.write_settings(settings("echo"));
    let mut served = ServeHttp::start(&p);
    let mut client = Client {
        http: http(),
        url: served.url.clone(),
        token: served.token(),
        era,
        session: None,
    };

    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": era.version, "capabilities": {},
        "clientInfo": {"name": "era-test", "version": "0"}}});
    let response = client.post(&init).await;
    client.session = response
        .headers()
        .get("mcp-session-id")
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    assert!(client.session.is_some(), "no session id");
    let answered = check(era, "initialize", &body(response).await);
    assert_eq!(
        answer(&answered)["result"]["protocolVersion"],
        era.version,
        "negotiated another version"
    );

    let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    let response = client.post(&initialized).await;
    assert_eq!(response.status(), 202, "notifications/initialized");

    let mut stream = client.get_stream().await;

    // The servers connect while the client starts: list until the fixture's tool is there.
    let mut id = 10;
    wait_for_tools(&mut client, &mut id, &["mcp__notes__echo"], &served).await;

    id += 1;
    let call = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": {
        "name": "mcp__notes__echo", "arguments": {"text": "hello-era"}}});
    let answered = check(era, "tools/call", &body(client.post(&call).await).await);
    let result = &answer(&answered)["result"];
    assert_eq!(result["content"][0]["text"], "hello-era", "{result}");

    // A settings edit: the GET stream announces the new tool list.
    p.write_settings(settings("echo,add"));
    let received = stream
        .read_until(|text| {
            events(text)
                .iter()
                .any(|e| e.data.contains("notifications/tools/list_changed"))
        })
        .await;
    check(era, "the GET stream", &received);
    wait_for_tools(
        &mut client,
        &mut id,
        &["mcp__notes__echo", "mcp__notes__add"],
        &served,
    )
    .await;
    served.stop();
}

/// Lists tools until every one of `names` is offered (each answer checked).
async fn wait_for_tools(client: &mut Client, id: &mut u64, names: &[&str], served: &ServeHttp) {
    let start = std::time::Instant::now();
    loop {
        *id += 1;
        let list = json!({"jsonrpc": "2.0", "id": *id, "method": "tools/list"});
        let events = check(
            client.era,
            "tools/list",
            &body(client.post(&list).await).await,
        );
        let message = answer(&events);
        let offered: Vec<&str> = message["result"]["tools"]
            .as_array()
            .map(|tools| tools.iter().filter_map(|t| t["name"].as_str()).collect())
            .unwrap_or_default();
        if names.iter().all(|n| offered.contains(n)) {
            return;
        }
        assert!(
            start.elapsed() < PATIENCE,
            "{names:?} never offered: {offered:?}; serve log:\n{}",
            served.log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The requests a client of one era sends.
struct Client {
    http: reqwest::Client,
    url: String,
    token: String,
    era: Era,
    session: Option<String>,
}

impl Client {
    fn request(&self, method: reqwest::Method) -> reqwest::RequestBuilder {
        let mut request = self
            .http
            .request(method, &self.url)
            .bearer_auth(&self.token)
            .header("accept", "application/json, text/event-stream");
        if let Some(session) = &self.session {
            request = request.header("mcp-session-id", session);
            if self.era.header {
                request = request.header("mcp-protocol-version", self.era.version);
            }
        }
        request
    }

    async fn post(&self, message: &Value) -> reqwest::Response {
        let request = self
            .request(reqwest::Method::POST)
            .header("content-type", "application/json")
            .body(message.to_string());
        let response = tokio::time::timeout(PATIENCE, request.send())
            .await
            .expect("an answer in time")
            .expect("an HTTP answer");
        assert!(
            response.status().is_success(),
            "{message}: HTTP {}",
            response.status()
        );
        response
    }

    /// The session's GET stream (for server-to-client messages).
    async fn get_stream(&self) -> Stream {
        let request = self
            .request(reqwest::Method::GET)
            .header("accept", "text/event-stream");
        let response = tokio::time::timeout(PATIENCE, request.send())
            .await
            .expect("an answer in time")
            .expect("an HTTP answer");
        assert_eq!(response.status(), 200, "GET stream");
        Stream {
            response,
            received: Vec::new(),
        }
    }
}

/// An SSE stream that stays open.
struct Stream {
    response: reqwest::Response,
    received: Vec<u8>,
}

impl Stream {
    /// Reads until what arrived so far satisfies `done`; returns all of it.
    async fn read_until(&mut self, done: impl Fn(&str) -> bool) -> String {
        loop {
            let text = String::from_utf8(self.received.clone()).expect("UTF-8");
            if done(&text) {
                return text;
            }
            let chunk = tokio::time::timeout(PATIENCE, self.response.chunk())
                .await
                .unwrap_or_else(|_| panic!("timed out; the stream so far:\n{text}"))
                .expect("the stream reads")
                .unwrap_or_else(|| panic!("the stream ended:\n{text}"));
            self.received.extend_from_slice(&chunk);
        }
    }
}

/// The last event's message: the answer to a POST.
fn answer(events: &[Event]) -> Value {
    events.last().map(Event::message).unwrap_or_default()
}

/// A whole response body (a POST's SSE stream ends after its answer).
async fn body(response: reqwest::Response) -> String {
    tokio::time::timeout(PATIENCE, response.text())
        .await
        .expect("the body in time")
        .expect("the body")
}

fn http() -> reqwest::Client {
    mcp_reconcile::tls::install_crypto_provider();
    reqwest::Client::builder()
        .no_proxy()
        .build()
        .expect("HTTP client")
}

/// One dispatched SSE event, as the WHATWG EventSource parser (and the MCP SDKs' parsers)
/// sees it.
#[derive(Debug)]
struct Event {
    data: String,
    retry: Option<String>,
}

impl Event {
    /// The data as JSON (`Null` if it is not JSON).
    fn message(&self) -> Value {
        serde_json::from_str(&self.data).unwrap_or(Value::Null)
    }

    fn is_priming(&self) -> bool {
        self.data.is_empty() && self.retry.is_some()
    }
}

/// The events of `text` that a client dispatches: the complete ones (ended by an empty line)
/// with at least one `data` field; comments (keep-alives) and field-only blocks are not events.
fn events(text: &str) -> Vec<Event> {
    let mut events = Vec::new();
    let mut data: Option<String> = None;
    let mut retry = None;
    let text = text.replace("\r\n", "\n").replace('\r', "\n");
    for line in text.split('\n') {
        if line.is_empty() {
            if let Some(data) = data.take() {
                events.push(Event {
                    data,
                    retry: retry.take(),
                });
            }
            retry = None;
            continue;
        }
        if line.starts_with(':') {
            continue;
        }
        let (field, value) = line.split_once(':').unwrap_or((line, ""));
        let value = value.strip_prefix(' ').unwrap_or(value);
        match field {
            "data" => match &mut data {
                Some(data) => {
                    data.push('\n');
                    data.push_str(value);
                }
                None => data = Some(value.to_owned()),
            },
            "retry" => retry = Some(value.to_owned()),
            _ => {}
        }
    }
    events
}

/// Checks `body` (an SSE stream to a client of `era`) as that client parses it and returns
/// its events: every event is a JSON-RPC message, except — for a client of 2025-11-25 or
/// later, and there it must be — a priming event first.
fn check(era: Era, what: &str, body: &str) -> Vec<Event> {
    let events = events(body);
    assert!(!events.is_empty(), "{what}: no event in {body:?}");
    for event in &events {
        let primes = era.primed && event.is_priming();
        let message = event.message();
        assert!(
            primes || message["jsonrpc"] == "2.0",
            "{what}: a client of {} cannot parse an event's data {:?} as JSON-RPC; the \
             whole body:\n{body}",
            era.version,
            event.data
        );
    }
    if era.primed {
        assert!(
            events[0].is_priming(),
            "{what}: a client of {} gets no priming event first:\n{body}",
            era.version
        );
    } else {
        assert!(
            !body.lines().any(|l| l.starts_with("retry")),
            "{what}: a client of {} gets a retry field (SSE polling is 2025-11-25):\n{body}",
            era.version
        );
    }
    let messages: Vec<Event> = events.into_iter().filter(|e| !e.is_priming()).collect();
    assert!(!messages.is_empty(), "{what}: no message in:\n{body}");
    messages
}
