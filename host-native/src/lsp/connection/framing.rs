//! A language server's output, checked message by message before `async-lsp` reads it.
//!
//! `async-lsp` allocates whatever `Content-Length` says and reads header lines without bound,
//! so one server could make the host allocate 100 GB and abort — every session's servers with
//! it. Between the child's stdout and the main loop, each message is read here first:
//! * headers: lines of at most [`MAX_HEADER_LINE`] bytes, at most [`MAX_HEADER_LINES`] of them,
//!   each `Name: value`, a `Content-Length` of digits no larger than [`MAX_MESSAGE_BYTES`];
//!   anything else fails this connection (only this one) with a sentence saying what was sent
//!   and the limit;
//! * the body is read whole (bounded by that cap) and framed again with a plain
//!   `Content-Length` header.

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

/// The checked message stream of the server's `stdout`, for `async-lsp`'s main loop.
pub(super) fn checked<R>(stdout: R) -> impl futures::io::AsyncBufRead + Send + Unpin
where
    R: AsyncRead + Send + Unpin + 'static,
{
    let frames = futures::stream::try_unfold(BufReader::new(stdout), |mut reader| async move {
        let frame = next_frame(&mut reader).await?;
        Ok(frame.map(|frame| (frame, reader)))
    });
    Box::pin(frames).into_async_read()
}

/// The next message, framed; `None` at the end of the output between messages.
async fn next_frame<R: tokio::io::AsyncBufRead + Unpin>(
    reader: &mut R,
) -> io::Result<Option<Vec<u8>>> {
    let Some(length) = read_header(reader).await? else {
        return Ok(None);
    };
    let mut frame = format!("Content-Length: {length}\r\n\r\n").into_bytes();
    let read = (&mut *reader).take(length).read_to_end(&mut frame).await?;
    if (read as u64) < length {
        return Err(bad("the output ended inside a message".to_owned()));
    }
    Ok(Some(frame))
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

#[cfg(test)]
mod tests {
    use super::*;
    use futures::io::AsyncReadExt as _;

    async fn pass(input: &[u8]) -> Result<Vec<u8>, String> {
        let mut out = Vec::new();
        checked(std::io::Cursor::new(input.to_vec()))
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
}
