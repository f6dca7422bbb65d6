//! The SSE priming event only for clients of MCP 2025-11-25 or later.
//!
//! rmcp starts every SSE response — the `initialize` answer, each request's stream, the GET
//! stream — with a *priming event* (SEP-1699, new in 2025-11-25: an event with an empty
//! `data:` line, an `id:` and `retry:`), and sends another before it closes a stream to make
//! the client poll; it does so whatever version the client negotiated (`sse_retry` is one
//! setting for all). A client of an older version reads every event's data as a JSON-RPC
//! message: the TypeScript SDK bundled in Gemini CLI 0.61 (protocol 2025-06-18) fails with
//! "Unexpected end of JSON input", drops the connection and with it every tool.
//!
//! So [`for_client_era`] finds the version the client negotiated and, below 2025-11-25, takes
//! every priming event out of the SSE body (whole: its `id:` and `retry:` are part of the
//! same 2025-11-25 polling scheme); messages and keep-alive comments pass byte for byte.
//! The version is the `MCP-Protocol-Version` header, which clients of 2025-06-18 and later
//! send on every request after `initialize` (rmcp refuses an unknown one); on the POST that
//! opens a session (no `Mcp-Session-Id`) without it, the body's `initialize` `protocolVersion`
//! (or a stateless request's `_meta` version); otherwise, as the specification says,
//! 2025-03-26.

use axum::body::{Body, Bytes};
use axum::extract::{Request, State};
use axum::http::{header, Method, StatusCode};
use axum::middleware::Next;
use axum::response::Response;
use futures::StreamExt;
use serde_json::Value;

/// The first protocol version whose clients expect priming events.
pub const FIRST_PRIMED: &str = "2025-11-25";

/// The axum middleware; its state is the largest request body rmcp accepts (a body read here
/// to find the version must not be allowed to be larger).
pub async fn for_client_era(
    State(body_limit): State<usize>,
    request: Request,
    next: Next,
) -> Response {
    let (request, version) = match client_version(request, body_limit).await {
        Ok(found) => found,
        Err(refused) => return refused,
    };
    let response = next.run(request).await;
    // Versions are dates, `YYYY-MM-DD`: their order is the strings' order.
    if version.as_deref().is_some_and(|v| v >= FIRST_PRIMED) {
        return response;
    }
    without_priming(response)
}

/// The request (its body read back in if it was read) and the version its client negotiated,
/// if it says one.
async fn client_version(
    request: Request,
    body_limit: usize,
) -> Result<(Request, Option<String>), Response> {
    if let Some(header) = request.headers().get("mcp-protocol-version") {
        let version = header.to_str().ok().map(str::to_owned);
        return Ok((request, version));
    }
    let opens_session =
        request.method() == Method::POST && !request.headers().contains_key("mcp-session-id");
    if !opens_session {
        return Ok((request, None));
    }
    let (parts, body) = request.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, body_limit).await else {
        return Err(refuse_body(body_limit));
    };
    let version = requested_version(&bytes);
    Ok((Request::from_parts(parts, Body::from(bytes)), version))
}

/// `params.protocolVersion` of an `initialize` request, or the version in a stateless
/// (2026-07-28) request's `_meta`.
fn requested_version(body: &[u8]) -> Option<String> {
    let message: Value = serde_json::from_slice(body).ok()?;
    let params = message.get("params")?;
    let version = if message.get("method")? == "initialize" {
        params.get("protocolVersion")
    } else {
        params
            .get("_meta")?
            .get("io.modelcontextprotocol/protocolVersion")
    };
    Some(version?.as_str()?.to_owned())
}

/// What rmcp answers a body over its limit: 413.
fn refuse_body(limit: usize) -> Response {
    let mut response = Response::new(Body::from(format!(
        "Payload Too Large: the request body is not readable or larger than {limit} bytes"
    )));
    *response.status_mut() = StatusCode::PAYLOAD_TOO_LARGE;
    response
}

/// `response` with every priming event left out of its body, if it is an SSE stream.
fn without_priming(response: Response) -> Response {
    let sse = response
        .headers()
        .get(header::CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.starts_with("text/event-stream"));
    if !sse {
        return response;
    }
    let (mut parts, body) = response.into_parts();
    parts.headers.remove(header::CONTENT_LENGTH);
    let state = (body.into_data_stream(), Events::default(), false);
    let events = futures::stream::unfold(state, |(mut body, mut events, ended)| async move {
        if ended {
            return None;
        }
        loop {
            match body.next().await {
                Some(Ok(chunk)) => {
                    let kept = events.push(&chunk);
                    if !kept.is_empty() {
                        return Some((Ok(Bytes::from(kept)), (body, events, false)));
                    }
                }
                Some(Err(e)) => return Some((Err(e), (body, events, false))),
                None => {
                    let rest = events.finish();
                    return (!rest.is_empty())
                        .then(|| (Ok(Bytes::from(rest)), (body, events, true)));
                }
            }
        }
    });
    Response::from_parts(parts, Body::from_stream(events))
}

/// An SSE body read in chunks, cut into events (each ends with an empty line; lines end with
/// LF or CRLF, as rmcp writes them).
#[derive(Default)]
struct Events {
    /// Bytes of events not complete yet.
    pending: Vec<u8>,
    /// How far `pending` was searched for line ends.
    scanned: usize,
}

impl Events {
    /// Takes `chunk`; returns the events it completed, priming events left out.
    fn push(&mut self, chunk: &[u8]) -> Vec<u8> {
        self.pending.extend_from_slice(chunk);
        let mut kept = Vec::new();
        let mut event_start = 0;
        while let Some(offset) = self.pending[self.scanned..]
            .iter()
            .position(|&b| b == b'\n')
        {
            let line_end = self.scanned + offset;
            // `scanned` is always where a line starts.
            let line = &self.pending[self.scanned..line_end];
            if line.is_empty() || line == b"\r" {
                let event = &self.pending[event_start..=line_end];
                if !is_priming(event) {
                    kept.extend_from_slice(event);
                }
                event_start = line_end + 1;
            }
            self.scanned = line_end + 1;
        }
        self.pending.drain(..event_start);
        self.scanned -= event_start;
        kept
    }

    /// The bytes of an event the stream ended in the middle of, unchanged (a client drops
    /// them too).
    fn finish(&mut self) -> Vec<u8> {
        self.scanned = 0;
        std::mem::take(&mut self.pending)
    }
}

/// Whether `event` is a priming event: it has `data` and every `data` value is empty.
fn is_priming(event: &[u8]) -> bool {
    let mut data = false;
    for line in event.split(|&b| b == b'\n') {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        if line.is_empty() || line.starts_with(b":") {
            continue;
        }
        let (field, value) = match line.iter().position(|&b| b == b':') {
            Some(colon) => (&line[..colon], &line[colon + 1..]),
            None => (line, &b""[..]),
        };
        if field == b"data" {
            let value = value.strip_prefix(b" ").unwrap_or(value);
            if !value.is_empty() {
                return false;
            }
            data = true;
        }
    }
    data
}

#[cfg(test)]
mod tests {
    use super::*;

    const PRIMING: &str = "data: \nid: 0\nretry: 3000\n\n";
    const MESSAGE: &str = "data: {\"jsonrpc\":\"2.0\",\"id\":1,\"result\":{}}\nid: 0/1\n\n";
    const KEEP_ALIVE: &str = ":\n\n";

    fn filter(chunks: &[&str]) -> String {
        let mut events = Events::default();
        let mut out = Vec::new();
        for chunk in chunks {
            out.extend(events.push(chunk.as_bytes()));
        }
        out.extend(events.finish());
        String::from_utf8(out).expect("utf-8")
    }

    #[test]
    fn priming_events_are_left_out_and_the_rest_passes_unchanged() {
        let body = format!("{PRIMING}{MESSAGE}{KEEP_ALIVE}{PRIMING}");
        assert_eq!(filter(&[&body]), format!("{MESSAGE}{KEEP_ALIVE}"));
    }

    #[test]
    fn events_split_anywhere_across_chunks_are_found() {
        let body = format!("{PRIMING}{MESSAGE}{KEEP_ALIVE}{PRIMING}{MESSAGE}");
        let want = format!("{MESSAGE}{KEEP_ALIVE}{MESSAGE}");
        for cut in 0..body.len() {
            assert_eq!(filter(&[&body[..cut], &body[cut..]]), want, "cut at {cut}");
        }
        let bytes: Vec<String> = body.chars().map(String::from).collect();
        let bytes: Vec<&str> = bytes.iter().map(String::as_str).collect();
        assert_eq!(filter(&bytes), want);
    }

    #[test]
    fn crlf_lines_and_a_bare_data_field_are_understood() {
        let body = "data\r\nretry: 3000\r\n\r\ndata: {}\r\n\r\n";
        assert_eq!(filter(&[body]), "data: {}\r\n\r\n");
    }

    #[test]
    fn events_without_data_and_unfinished_events_are_kept() {
        assert_eq!(filter(&["id: 4\nretry: 10\n\n"]), "id: 4\nretry: 10\n\n");
        assert_eq!(
            filter(&["data: {}\n\ndata: {\"a\""]),
            "data: {}\n\ndata: {\"a\""
        );
    }

    #[test]
    fn versions_in_a_body() {
        let init = br#"{"jsonrpc":"2.0","id":1,"method":"initialize",
            "params":{"protocolVersion":"2025-06-18","capabilities":{}}}"#;
        assert_eq!(requested_version(init).as_deref(), Some("2025-06-18"));
        let stateless = br#"{"jsonrpc":"2.0","id":1,"method":"tools/list",
            "params":{"_meta":{"io.modelcontextprotocol/protocolVersion":"2026-07-28"}}}"#;
        assert_eq!(requested_version(stateless).as_deref(), Some("2026-07-28"));
        assert_eq!(requested_version(b"{oops"), None);
        assert_eq!(
            requested_version(br#"{"method":"tools/list","params":{}}"#),
            None
        );
    }
}
