//! The client of the session socket ([`ipc`]): how `status`, `plan`,
//! `reload` and `reconnect` reach a running `watch` or `serve` for the same
//! files. One [`SessionRequest`] line out, one answer line in, at most
//! [`ipc::MAX_RESPONSE`] bytes of it.

use std::path::Path;

use anyhow::{bail, Context};
use mcp_reconcile::daemon::{self, bridge, DaemonRequest};
use mcp_reconcile::inputs::Inputs;
use mcp_reconcile::ipc::{self, Answer, SessionRequest};
use mcp_reconcile::private;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

use ipc::MAX_RESPONSE;

/// Sends one request to the running session. `Ok(None)` when no session is
/// running for these files. At most [`ipc::MAX_RESPONSE`] bytes of answer are read.
///
/// # Errors
/// The state directory or the socket is not private to the user, or another user's process
/// listens there (nothing is sent); the session answered with something that is not JSON, an overlong
/// answer, or nothing at all, or the socket broke mid-request.
pub async fn request(path: &Path, request: &SessionRequest) -> anyhow::Result<Option<Value>> {
    let (Some(dir), Some(name)) = (path.parent(), path.file_name().and_then(|n| n.to_str())) else {
        return Ok(None);
    };
    let Some(stream) = private::connect(dir, name).await? else {
        return Ok(None);
    };
    let (read, mut write) = stream.into_split();
    write.write_all(request.line().as_bytes()).await?;
    write.shutdown().await?;
    let mut reader = BufReader::new(read.take(MAX_RESPONSE as u64 + 1));
    let mut line = Vec::new();
    reader.read_until(b'\n', &mut line).await?;
    if line.is_empty() {
        anyhow::bail!(
            "the session at {} closed the connection without answering; it may run as another \
             user (only the same user may connect) or be shutting down",
            path.display()
        );
    }
    if line.strip_suffix(b"\n").unwrap_or(&line).len() > MAX_RESPONSE {
        anyhow::bail!(
            "the session at {} answered with more than {MAX_RESPONSE} bytes; not reading it",
            path.display()
        );
    }
    let response: Answer = serde_json::from_slice(&line).with_context(|| {
        format!(
            "the session at {} answered with something that is not an answer",
            path.display()
        )
    })?;
    match response.into_result() {
        Ok(value) => Ok(Some(value.unwrap_or(Value::Null))),
        Err(message) => anyhow::bail!("{message}"),
    }
}

/// [`request`] to the session for `inputs`: the one in its own process (`watch`, `serve`)
/// or, without one, the daemon's sessions for the same files. `Ok(None)` when neither runs.
///
/// # Errors
/// As [`request`], or the daemon's answer was an error.
pub async fn ask(inputs: &Inputs, request: &SessionRequest) -> anyhow::Result<Option<Value>> {
    if let Some(value) = self::request(&ipc::socket_path(inputs), request).await? {
        return Ok(Some(value));
    }
    let asked = DaemonRequest::Session {
        id: inputs.session_id(),
        request: request.clone(),
    };
    let Some(answer) = bridge::ask(&daemon::socket_dir(inputs.env()), &asked).await? else {
        return Ok(None);
    };
    answer.into_result().map_err(anyhow::Error::msg)
}

/// [`ask`] the session for `inputs`, which must be running: without
/// one, the error says how to start it.
///
/// # Errors
/// No session runs for these files, or [`ask`] failed.
pub async fn require(inputs: &Inputs, request: &SessionRequest) -> anyhow::Result<Value> {
    match ask(inputs, request).await? {
        Some(value) => Ok(value),
        None => bail!(
            "no running session for these files (looked for {} and the daemon's sessions); start one with `mcp-reconcile watch` and the same flags",
            ipc::socket_path(inputs).display()
        ),
    }
}
