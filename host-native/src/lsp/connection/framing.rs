//! A language server's output, checked message by message before `async-lsp` reads it.
//!
//! `async-lsp` allocates whatever `Content-Length` says and reads header lines without bound,
//! so one server could make the host allocate 100 GB and abort — every session's servers with
//! it — and it ends the connection on any message `serde_json` refuses, such as one nested
//! deeper than its recursion limit (128). Between the child's stdout and the main loop, each
//! message is read here first:
//! * headers: lines of at most [`MAX_HEADER_LINE`] bytes, at most [`MAX_HEADER_LINES`] of them,
//!   each `Name: value`, a `Content-Length` of digits no larger than [`MAX_MESSAGE_BYTES`];
//!   anything else fails this connection (only this one) with a sentence saying what was sent
//!   and the limit;
//! * the body is read whole (bounded by that cap) and its nesting measured: an answer nested
//!   deeper than [`MAX_DEPTH`] becomes an error answer to the same request, so only that request
//!   fails; a notification or request that deep is dropped (logged);
//! * what passes is framed again with a plain `Content-Length` header.

use std::io;

use futures::stream::TryStreamExt as _;
use tokio::io::{AsyncBufReadExt as _, AsyncRead, AsyncReadExt as _, BufReader};

/// The largest message a language server may send (64 MiB): far above any real answer, far
/// below what would hurt the host.
pub const MAX_MESSAGE_BYTES: u64 = 64 * 1024 * 1024;
/// The longest header line (real ones are about 30 bytes).
pub const MAX_HEADER_LINE: u64 = 1024;
/// The most header lines one message may have (real ones have one or two).
pub const MAX_HEADER_LINES: usize = 16;
/// The deepest nesting of objects and arrays a message may have, the message itself counting
/// as one: below `serde_json`'s recursion limit (128), above any real answer.
pub const MAX_DEPTH: usize = 100;

/// The checked message stream of the server's `stdout`, for `async-lsp`'s main loop.
pub(super) fn checked<R>(stdout: R, server: &str) -> impl futures::io::AsyncBufRead + Send + Unpin
where
    R: AsyncRead + Send + Unpin + 'static,
{
    let server = server.to_owned();
    let frames = futures::stream::try_unfold(BufReader::new(stdout), move |mut reader| {
        let server = server.clone();
        async move {
            let frame = next_frame(&mut reader, &server).await?;
            Ok(frame.map(|frame| (frame, reader)))
        }
    });
    Box::pin(frames).into_async_read()
}

/// The next message that passes, framed; `None` at the end of the output between messages.
async fn next_frame<R: tokio::io::AsyncBufRead + Unpin>(
    reader: &mut R,
    server: &str,
) -> io::Result<Option<Vec<u8>>> {
    loop {
        let Some(length) = read_header(reader).await? else {
            return Ok(None);
        };
        let mut frame = format!("Content-Length: {length}\r\n\r\n").into_bytes();
        let start = frame.len();
        let read = (&mut *reader).take(length).read_to_end(&mut frame).await?;
        if (read as u64) < length {
            return Err(bad("the output ended inside a message".to_owned()));
        }
        if !too_deep(&frame[start..]) {
            return Ok(Some(frame));
        }
        if let Some(answer) = too_deep_answer(&frame[start..], server)? {
            let mut frame = format!("Content-Length: {}\r\n\r\n", answer.len()).into_bytes();
            frame.extend_from_slice(&answer);
            return Ok(Some(frame));
        }
    }
}

/// The `Content-Length` of the next message's header; `None` at a clean end of the output.
async fn read_header<R: tokio::io::AsyncBufRead + Unpin>(
    reader: &mut R,
) -> io::Result<Option<u64>> {
    let mut length = None;
    let mut lines = 0;
    loop {
        let mut line = Vec::new();
        (&mut *reader)
            .take(MAX_HEADER_LINE)
            .read_until(b'\n', &mut line)
            .await?;
        if line.is_empty() && lines == 0 {
            return Ok(None);
        }
        if !line.ends_with(b"\n") {
            return Err(bad(if line.len() as u64 >= MAX_HEADER_LINE {
                format!("a header line longer than {MAX_HEADER_LINE} bytes")
            } else {
                "the output ended inside a message header".to_owned()
            }));
        }
        lines += 1;
        if lines > MAX_HEADER_LINES {
            return Err(bad(format!(
                "more than {MAX_HEADER_LINES} header lines for one message"
            )));
        }
        if line == b"\r\n" {
            break;
        }
        let (name, value) = std::str::from_utf8(&line)
            .ok()
            .and_then(|line| line.strip_suffix("\r\n"))
            .and_then(|line| line.split_once(": "))
            .ok_or_else(|| {
                bad(format!(
                    "a malformed header line {}",
                    crate::display::safe(&format!("{:?}", String::from_utf8_lossy(&line)))
                ))
            })?;
        if name.eq_ignore_ascii_case("Content-Length") {
            if value.is_empty() || !value.bytes().all(|b| b.is_ascii_digit()) {
                return Err(bad(format!(
                    "a Content-Length that is not a number: {}",
                    crate::display::safe(value)
                )));
            }
            match value.parse::<u64>() {
                Ok(n) if n <= MAX_MESSAGE_BYTES => length = Some(n),
                _ => {
                    return Err(bad(format!(
                        "a message of {value} bytes (its Content-Length), over the limit of {} \
                         MiB for one message",
                        MAX_MESSAGE_BYTES / (1024 * 1024)
                    )))
                }
            }
        }
    }
    length
        .map(Some)
        .ok_or_else(|| bad("a message without a Content-Length header".to_owned()))
}

/// The error that ends this connection: what the server sent (the caller names the server).
fn bad(what: String) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, format!("it sent {what}"))
}

/// Whether `body` nests objects and arrays deeper than [`MAX_DEPTH`] (brackets inside strings
/// do not count).
fn too_deep(body: &[u8]) -> bool {
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for &b in body {
        if in_string {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
            continue;
        }
        match b {
            b'"' => in_string = true,
            b'[' | b'{' => {
                depth += 1;
                if depth > MAX_DEPTH {
                    return true;
                }
            }
            b']' | b'}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    false
}

/// What replaces a message that is nested too deep: an error answer to the same request when
/// it is an answer, else nothing (a notification or the server's own request is dropped).
///
/// # Errors
/// The message is not even JSON at its top level: the connection fails as it would have.
fn too_deep_answer(body: &[u8], server: &str) -> io::Result<Option<Vec<u8>>> {
    let top: serde_json::Value = serde_json::from_slice(&shallow(body))
        .map_err(|e| bad(format!("a message that is not JSON ({e})")))?;
    let id = top.get("id").filter(|id| id.is_number() || id.is_string());
    match (id, top.get("method")) {
        (Some(id), None) => {
            let answer = serde_json::json!({
                "jsonrpc": "2.0",
                "id": id,
                "error": {
                    "code": -32603,
                    "message": format!(
                        "its answer is nested more than {MAX_DEPTH} levels deep, over the limit; \
                         it was dropped"
                    ),
                },
            });
            Ok(Some(serde_json::to_vec(&answer).unwrap_or_default()))
        }
        (_, method) => {
            let method = method.and_then(serde_json::Value::as_str).unwrap_or("?");
            tracing::warn!(
                server = %server,
                method = %crate::display::safe(method),
                "dropped a message nested more than {MAX_DEPTH} levels deep"
            );
            Ok(None)
        }
    }
}

/// `body` with every value nested below its top level replaced by `null`: what is left of a
/// message too deep to parse, enough to read its `id` and `method`.
fn shallow(body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    for &b in body {
        let shown = depth <= 1;
        if in_string {
            if escaped {
                escaped = false;
            } else if b == b'\\' {
                escaped = true;
            } else if b == b'"' {
                in_string = false;
            }
        } else {
            match b {
                b'"' => in_string = true,
                b'[' | b'{' => {
                    depth += 1;
                    if depth == 2 {
                        out.extend_from_slice(b"null");
                    }
                    if depth >= 2 {
                        continue;
                    }
                }
                b']' | b'}' => {
                    depth = depth.saturating_sub(1);
                    if depth >= 1 {
                        continue;
                    }
                }
                _ => {}
            }
        }
        if shown {
            out.push(b);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::io::AsyncReadExt as _;

    async fn pass(input: &[u8]) -> Result<Vec<u8>, String> {
        let mut out = Vec::new();
        checked(std::io::Cursor::new(input.to_vec()), "t")
            .read_to_end(&mut out)
            .await
            .map(|_| out)
            .map_err(|e| e.to_string())
    }

    fn message(body: &str) -> Vec<u8> {
        format!("Content-Length: {}\r\n\r\n{body}", body.len()).into_bytes()
    }

    #[tokio::test]
    async fn well_formed_messages_pass_and_bad_headers_fail_the_stream() {
        let a = r#"{"jsonrpc":"2.0","id":1,"result":"[{\"}"}"#;
        let mut two = message(a);
        two.extend(b"content-length: 2\r\nContent-Type: x\r\n\r\n{}");
        let mut expected = message(a);
        expected.extend(message("{}"));
        assert_eq!(pass(&two).await, Ok(expected));
        assert_eq!(pass(b"").await, Ok(Vec::new()));

        for (input, says) in [
            (
                &b"Content-Length: 99999999999\r\n\r\n"[..],
                "over the limit of 64 MiB",
            ),
            (
                b"Content-Length: 99999999999999999999999\r\n\r\n",
                "over the limit",
            ),
            (b"Content-Length: -1\r\n\r\n", "not a number"),
            (b"Content-Length:5\r\n\r\n", "malformed header"),
            (b"X: y\r\n\r\n{}", "without a Content-Length"),
            (b"Content-Length: 9\r\n\r\n{}", "ended inside a message"),
            (b"Content-Length: 2\r\n", "ended inside a message header"),
        ] {
            let error = pass(input).await.expect_err(says);
            assert!(error.contains(says), "{error}");
        }
        let endless = vec![b'a'; 10_000];
        let error = pass(&endless).await.expect_err("an endless header line");
        assert!(error.contains("longer than 1024 bytes"), "{error}");
    }

    #[tokio::test]
    async fn an_answer_nested_too_deep_becomes_an_error_for_that_request_only() {
        let deep = format!(
            r#"{{"jsonrpc":"2.0","result":{}{},"id":7}}"#,
            "[".repeat(200),
            "]".repeat(200)
        );
        let notification = format!(
            r#"{{"jsonrpc":"2.0","method":"x","params":{}{}}}"#,
            "{\"a\":".repeat(150),
            "1".to_owned() + &"}".repeat(150)
        );
        let fine = r#"{"jsonrpc":"2.0","id":8,"result":"[[[[\"]]"}"#;
        let mut input = message(&deep);
        input.extend(message(&notification));
        input.extend(message(fine));
        let out = String::from_utf8(pass(&input).await.expect("passes")).expect("utf-8");
        let bodies: Vec<serde_json::Value> = out
            .split("Content-Length: ")
            .skip(1)
            .map(|m| serde_json::from_str(m.split_once("\r\n\r\n").expect("header").1))
            .collect::<Result<_, _>>()
            .expect("JSON bodies");
        assert_eq!(bodies.len(), 2, "the notification is dropped: {out}");
        assert_eq!(bodies[0]["id"], 7);
        assert_eq!(bodies[0]["error"]["code"], -32603);
        assert!(bodies[0]["error"]["message"]
            .as_str()
            .is_some_and(|m| m.contains("more than 100 levels")));
        assert_eq!(bodies[1]["result"], "[[[[\"]]");
    }
}
