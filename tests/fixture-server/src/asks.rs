//! The tools that ask the client something (`ask`, `ask_later`, `roots`) or flood it
//! (`flood`), so tests can see where a gateway relays a server's own requests and log messages,
//! and what it does with too many of them.
//!
//! A `wait_for` path makes a tool wait (at most [`WAIT_LIMIT`]) until that file exists before
//! it asks: a test decides the moment without timing. What `ask_later` and `flood` learn after
//! their call has returned goes to the marker file (`--marker`), one line each.

#![allow(deprecated)] // logging and roots are deprecated by protocol 2026-07-28; clients use them

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rmcp::model::{
    ClientResult, JsonObject, LoggingLevel, LoggingMessageNotificationParam, ServerRequest,
};
use rmcp::service::RequestContext;
use rmcp::{Peer, RoleServer};
use serde_json::{json, Value};

use crate::faults::append_marker;

/// The longest a `wait_for` waits for its file.
const WAIT_LIMIT: Duration = Duration::from_secs(120);

/// Waits until `path` exists (bounded by [`WAIT_LIMIT`]).
async fn wait_for(path: Option<&str>) {
    let Some(path) = path else { return };
    let start = Instant::now();
    while !Path::new(path).exists() && start.elapsed() < WAIT_LIMIT {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

fn str_arg<'a>(args: &'a JsonObject, key: &str) -> Option<&'a str> {
    args.get(key).and_then(Value::as_str)
}

fn count_arg(args: &JsonObject, key: &str) -> u64 {
    args.get(key).and_then(Value::as_u64).unwrap_or(0)
}

/// Sends the client `method` with `params`; its answer as JSON, or the failure as text.
async fn request(peer: &Peer<RoleServer>, method: &str, params: Value) -> Result<Value, String> {
    let request: ServerRequest =
        serde_json::from_value(json!({"method": method, "params": params}))
            .map_err(|e| e.to_string())?;
    let answer: ClientResult = peer
        .send_request(request)
        .await
        .map_err(|e| e.to_string())?;
    serde_json::to_value(answer).map_err(|e| e.to_string())
}

/// `elicitation/create` with `text` as the message and one `name` field; the answer as
/// `action=… name=…`.
async fn elicit(peer: &Peer<RoleServer>, text: &str) -> String {
    let params = json!({"message": text, "requestedSchema": {"type": "object",
        "properties": {"name": {"type": "string"}}}});
    match request(peer, "elicitation/create", params).await {
        Ok(answer) => format!(
            "action={} name={}",
            answer["action"].as_str().unwrap_or_default(),
            answer["content"]["name"].as_str().unwrap_or_default()
        ),
        Err(e) => format!("failed: {e}"),
    }
}

async fn log(peer: &Peer<RoleServer>, text: String) {
    let message = LoggingMessageNotificationParam::new(LoggingLevel::Info, json!(text))
        .with_logger("fixture");
    let _ = peer.notify_logging_message(message).await;
}

/// `ask`: logs `asking: TEXT`, appends `waiting TEXT` to the marker, waits for `wait_for`,
/// asks the client with `text` and returns its answer.
pub async fn ask(
    args: &JsonObject,
    context: &RequestContext<RoleServer>,
    marker: Option<PathBuf>,
) -> String {
    let text = str_arg(args, "text").unwrap_or_default();
    log(&context.peer, format!("asking: {text}")).await;
    if let Some(marker) = marker {
        let _ = append_marker(&marker, &format!("waiting {text}"));
    }
    wait_for(str_arg(args, "wait_for")).await;
    elicit(&context.peer, text).await
}

/// `ask_later`: returns at once; once `wait_for` exists, asks the client with `text` and
/// appends `asked TEXT: <answer>` to the marker file.
pub fn ask_later(args: &JsonObject, context: &RequestContext<RoleServer>, marker: Option<PathBuf>) {
    let text = str_arg(args, "text").unwrap_or_default().to_owned();
    let wait = str_arg(args, "wait_for").map(str::to_owned);
    let peer = context.peer.clone();
    tokio::spawn(async move {
        wait_for(wait.as_deref()).await;
        let answer = elicit(&peer, &text).await;
        if let Some(marker) = marker {
            let _ = append_marker(&marker, &format!("asked {text}: {answer}"));
        }
    });
}

/// `roots`: waits for `wait_for`, asks the client for its roots and returns their URIs, one a
/// line (`no roots` for none).
pub async fn roots(args: &JsonObject, context: &RequestContext<RoleServer>) -> String {
    wait_for(str_arg(args, "wait_for")).await;
    roots_of(&context.peer).await
}

/// What the client answers to `roots/list`: the URIs, one a line, `no roots`, or the failure.
pub async fn roots_of(peer: &Peer<RoleServer>) -> String {
    match request(peer, "roots/list", json!({})).await {
        Ok(answer) => {
            let uris: Vec<&str> = answer["roots"]
                .as_array()
                .map(|roots| roots.iter().filter_map(|r| r["uri"].as_str()).collect())
                .unwrap_or_default();
            if uris.is_empty() {
                "no roots".to_owned()
            } else {
                uris.join("\n")
            }
        }
        Err(e) => format!("failed: {e}"),
    }
}

/// `flood`: `logs` log messages of `size` bytes (appends `flooded N logs` to the marker once
/// sent), then `elicitations` elicitations at once, each answer appended to the marker as
/// `elicitation action=…`; returns when every one is answered.
pub async fn flood(
    args: &JsonObject,
    context: &RequestContext<RoleServer>,
    marker: Option<PathBuf>,
) -> String {
    let logs = count_arg(args, "logs");
    let size = usize::try_from(count_arg(args, "size"))
        .unwrap_or(200)
        .max(1);
    let filler = "x".repeat(size);
    for i in 0..logs {
        log(&context.peer, format!("{i} {filler}")).await;
    }
    let marker = marker.map(Arc::new);
    let note = |marker: &Option<Arc<PathBuf>>, line: &str| {
        if let Some(marker) = marker {
            let _ = append_marker(marker, line);
        }
    };
    note(&marker, &format!("flooded {logs} logs"));
    let mut asks = tokio::task::JoinSet::new();
    for i in 0..count_arg(args, "elicitations") {
        let peer = context.peer.clone();
        let marker = marker.clone();
        asks.spawn(async move {
            let answer = elicit(&peer, &format!("flood {i}")).await;
            let action = answer.split(' ').next().unwrap_or_default().to_owned();
            note(&marker, &format!("elicitation {action}"));
        });
    }
    let asked = asks.join_all().await.len();
    format!("flooded {logs} logs and {asked} elicitations")
}
