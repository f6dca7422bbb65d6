//! A fake OpenAI Chat Completions API on 127.0.0.1 (`POST /v1/chat/completions`, streamed or
//! not) for the real clients that speak it (qwen-code, OpenCode, Cline): each request is
//! answered as the test's [`Script`] says, a tool call or a text.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use axum::response::Response;
use serde_json::{json, Value};

use super::fake_model::{json_reply, not_found, sse_text, FakeModel};

/// One reply of the fake model.
pub enum Turn {
    /// Call this tool with these arguments.
    Call(&'static str, Value),
    Say(String),
}

/// What the fake model answers to one request (its body). It runs on a blocking thread, so it
/// may wait for the gateway.
pub type Script = Arc<dyn Fn(&Value) -> Turn + Send + Sync>;

/// The API, answering each request as `script` says. With `through`, a call goes through
/// that tool of the client's own (qwen-code's `tool_call`, its way to a deferred tool), named
/// in its arguments.
pub async fn fake_chat_completions(script: Script, through: Option<&'static str>) -> FakeModel {
    FakeModel::start(Arc::new(move |path: &str, body: &Value| {
        answer(&script, through, path, body)
    }))
    .await
}

/// The names of the tools a request offers.
pub fn tool_names(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|tool| tool["function"]["name"].as_str())
        .map(str::to_owned)
        .collect()
}

/// The tool results in a request's conversation, as JSON text.
pub fn tool_outputs(body: &Value) -> Vec<String> {
    body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|message| message["role"] == "tool")
        .map(|message| message["content"].to_string())
        .collect()
}

fn answer(script: &Script, through: Option<&str>, path: &str, body: &Value) -> Response {
    if path.split('?').next() != Some("/v1/chat/completions") {
        return not_found();
    }
    let turn = TURN.fetch_add(1, Ordering::SeqCst);
    let (message, finish) = match script(body) {
        Turn::Call(tool, arguments) => {
            let (name, arguments) = match through {
                Some(wrapper) => (wrapper, json!({"name": tool, "arguments": arguments})),
                None => (tool, arguments),
            };
            (
                json!({"role": "assistant", "content": null, "tool_calls": [{
                    "index": 0, "id": format!("call_{turn}"), "type": "function",
                    "function": {"name": name, "arguments": arguments.to_string()},
                }]}),
                "tool_calls",
            )
        }
        Turn::Say(text) => (json!({"role": "assistant", "content": text}), "stop"),
    };
    let usage = json!({"prompt_tokens": 1, "completion_tokens": 1, "total_tokens": 2});
    let head = json!({"id": format!("chatcmpl-{turn}"), "created": 0, "model": body["model"]});
    let with = |object: &str, choice: Value, usage: Option<&Value>| {
        let mut chunk = head.clone();
        chunk["object"] = json!(object);
        chunk["choices"] = json!([choice]);
        if let Some(usage) = usage {
            chunk["usage"] = usage.clone();
        }
        chunk
    };
    if body["stream"] != true {
        let choice = json!({"index": 0, "message": message, "finish_reason": finish});
        return json_reply(&with("chat.completion", choice, Some(&usage)));
    }
    let delta = json!({"index": 0, "delta": message, "finish_reason": null});
    let end = json!({"index": 0, "delta": {}, "finish_reason": finish});
    // The stream ends with `data: [DONE]`, which is not JSON.
    sse_text(format!(
        "data: {}\n\ndata: {}\n\ndata: [DONE]\n\n",
        with("chat.completion.chunk", delta, None),
        with("chat.completion.chunk", end, Some(&usage)),
    ))
}

/// Numbers the fake model's replies and calls (ids must be unique in a conversation).
static TURN: AtomicUsize = AtomicUsize::new(0);
