//! A fake model API on 127.0.0.1 for the real-client tests: it records every request and
//! answers each one as the test's script says, in the API's own wire format (the test's
//! [`Answer`] builds the response). Nothing leaves loopback, and no account is needed.

use std::sync::{Arc, Mutex, PoisonError};

use axum::body::Bytes;
use axum::extract::State;
use axum::http::{header, Uri};
use axum::response::{IntoResponse, Response};
use serde_json::{json, Value};

/// Answers one request: its path with the query, and its JSON body (`null` when it has
/// none). It runs on a blocking thread, so a script may wait for the gateway while the client
/// waits for the model.
pub type Answer = Arc<dyn Fn(&str, &Value) -> Response + Send + Sync>;

/// The fake API: its base URL and what it was asked.
pub struct FakeModel {
    /// `http://127.0.0.1:PORT`, without a trailing slash.
    pub url: String,
    requests: Arc<Mutex<Vec<Value>>>,
    server: tokio::task::JoinHandle<()>,
}

impl FakeModel {
    pub async fn start(answer: Answer) -> FakeModel {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
            .await
            .expect("bind the fake model API");
        let url = format!("http://{}", listener.local_addr().expect("address"));
        let requests = Arc::new(Mutex::new(Vec::new()));
        let app = axum::Router::new()
            .fallback(respond)
            .with_state((requests.clone(), answer));
        let server = tokio::spawn(async move {
            let _ = axum::serve(listener, app).await;
        });
        FakeModel {
            url,
            requests,
            server,
        }
    }

    /// Every request so far, in order: `{"path": …, "body": …}`.
    pub fn requests(&self) -> Vec<Value> {
        self.requests
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}

impl Drop for FakeModel {
    fn drop(&mut self) {
        self.server.abort();
    }
}

async fn respond(
    State((requests, answer)): State<(Arc<Mutex<Vec<Value>>>, Answer)>,
    uri: Uri,
    body: Bytes,
) -> Response {
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let path = uri.to_string();
    requests
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .push(json!({"path": path, "body": body}));
    tokio::task::spawn_blocking(move || answer(&path, &body))
        .await
        .unwrap_or_else(|_| {
            (
                axum::http::StatusCode::INTERNAL_SERVER_ERROR,
                "the fake model's script failed",
            )
                .into_response()
        })
}

/// A JSON response.
pub fn json_reply(value: &Value) -> Response {
    (
        [(header::CONTENT_TYPE, "application/json")],
        value.to_string(),
    )
        .into_response()
}

/// An SSE stream of `(event name, data)`; a `None` name writes only the `data:` line.
pub fn sse_reply<'a>(events: impl IntoIterator<Item = (Option<&'a str>, Value)>) -> Response {
    let stream: String = events
        .into_iter()
        .map(|(event, data)| match event {
            Some(event) => format!("event: {event}\ndata: {data}\n\n"),
            None => format!("data: {data}\n\n"),
        })
        .collect();
    sse_text(stream)
}

/// An SSE stream written out already (for a line that is not JSON, such as `data: [DONE]`).
pub fn sse_text(stream: String) -> Response {
    ([(header::CONTENT_TYPE, "text/event-stream")], stream).into_response()
}

/// A 404, for what the API does not answer.
pub fn not_found() -> Response {
    axum::http::StatusCode::NOT_FOUND.into_response()
}
