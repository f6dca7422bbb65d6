//! The client side of the daemon: find (or start) it, attach a session, and bridge a stdio MCP
//! client to that session — what a stdio `serve` runs; [`ask`] for one-shot requests.
//!
//! 1. [`connect_or_start`]: check the directory and the socket, connect, check that the daemon
//!    runs as our uid ([`private::connect`]: nothing is sent to another user's process); when
//!    nothing listens, start
//!    `mcp-reconcile daemon` (own process group, its log in [`LOG`] beside the
//!    socket) and wait until it listens (bounded);
//! 2. [`attach`]: send the [`DaemonRequest::Attach`] line and read the answer (bounded);
//! 3. [`relay_stdio`](super::relay::relay_stdio): relay the client's MCP lines to the session
//!    and back, re-attaching if the daemon goes away.

use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use anyhow::{bail, Context};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::UnixStream;

use super::attached::Attached;
use super::{DaemonRequest, LOG, SOCKET};
use crate::inputs::{HostEnv, Options};
use crate::ipc::Answer;
use crate::{ipc, private};

/// How long a started daemon may take to listen.
pub const START_WAIT: Duration = Duration::from_secs(10);
/// How long an attach may take to be answered: the daemon reads the session's files and
/// answers, without waiting for any of its servers.
pub const ATTACH_WAIT: Duration = Duration::from_secs(30);

/// Connects to the daemon in `dir`, starting `exe daemon` first when none listens.
///
/// # Errors
/// `dir` or its socket is not private to the user, another user's process listens there, the
/// daemon cannot be started, or it does not listen within [`START_WAIT`].
pub async fn connect_or_start(dir: &Path, exe: &Path) -> anyhow::Result<UnixStream> {
    let socket = dir.join(SOCKET);
    if let Some(stream) = private::connect(dir, SOCKET).await? {
        return Ok(stream);
    }
    private::ensure_dir(dir).context("the daemon's directory is not private to you")?;
    let log = {
        use std::os::unix::fs::OpenOptionsExt;
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(dir.join(LOG))
            .with_context(|| format!("opening the daemon log in {}", dir.display()))?
    };
    let mut command = std::process::Command::new(exe);
    command
        .arg("daemon")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(log)
        // Its own group: the client's Ctrl-C or a killed `serve` group does not stop it.
        .process_group(0);
    // Reaped in the background by tokio once it exits; it outlives this process otherwise.
    let _daemon = tokio::process::Command::from(command)
        .spawn()
        .with_context(|| format!("starting `{} daemon`", exe.display()))?;
    let deadline = tokio::time::Instant::now() + START_WAIT;
    loop {
        if let Some(stream) = private::connect(dir, SOCKET).await? {
            return Ok(stream);
        }
        if tokio::time::Instant::now() >= deadline {
            bail!(
                "the mcp-reconcile daemon did not listen on {} within {START_WAIT:?}; see {}",
                socket.display(),
                dir.join(LOG).display()
            );
        }
        tokio::time::sleep(Duration::from_millis(25)).await;
    }
}

/// Sends one request to the daemon in `dir` and reads its [`Answer`] (at most
/// [`ipc::MAX_RESPONSE`] bytes): `Ok(None)` when no daemon listens there.
///
/// # Errors
/// `dir` or its socket is not private to the user or another user's process listens there
/// (nothing is sent), or the daemon broke the connection, answered late, too long or not in
/// JSON.
pub async fn ask(dir: &Path, request: &DaemonRequest) -> anyhow::Result<Option<Answer>> {
    let Some(stream) = private::connect(dir, SOCKET).await? else {
        return Ok(None);
    };
    let (read, mut write) = stream.into_split();
    write.write_all(request.line()?.as_bytes()).await?;
    write.shutdown().await?;
    let mut reader = BufReader::new(read.take(ipc::MAX_RESPONSE as u64 + 1));
    let mut line = Vec::new();
    tokio::time::timeout(ipc::READ_TIMEOUT, reader.read_until(b'\n', &mut line))
        .await
        .context("the mcp-reconcile daemon did not answer in time")??;
    let answer = serde_json::from_slice(&line)
        .context("the mcp-reconcile daemon answered with something that is not an answer")?;
    Ok(Some(answer))
}

/// The daemon answered an attach with an error (the files cannot be resolved, …): trying
/// again would not help.
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct Refused(pub String);

/// The daemon was older than this binary and retired ([`super::version`]): connect again, and
/// a daemon of this version starts.
#[derive(Debug, thiserror::Error)]
#[error("the running mcp-reconcile daemon was older and retired")]
pub struct Retired;

/// Attaches a session for `options` in `env` on `stream` (its gateway with the management
/// tools when `manage_tools`); returns the session's name and the connection, which now
/// speaks MCP to it.
///
/// # Errors
/// [`Refused`] (the message says why: e.g. a missing project directory), [`Retired`] (connect
/// again), or the daemon did not answer within [`ATTACH_WAIT`].
pub async fn attach(
    stream: UnixStream,
    options: &Options,
    env: HostEnv,
    client: &str,
    tool_names: crate::gateway::ToolNames,
    manage_tools: bool,
) -> anyhow::Result<(String, BufReader<OwnedReadHalf>, OwnedWriteHalf)> {
    let (read, mut write) = stream.into_split();
    let request = DaemonRequest::Attach {
        options: Box::new(options.clone()),
        env: Box::new(env),
        client: client.to_owned(),
        pid: std::process::id(),
        tool_names,
        manage_tools,
        version: Some(super::version::ours()),
    };
    write.write_all(request.line()?.as_bytes()).await?;
    let mut reader = BufReader::new(read);
    let mut line = Vec::new();
    let mut limited = (&mut reader).take(ipc::MAX_RESPONSE as u64);
    let answer = limited.read_until(b'\n', &mut line);
    tokio::time::timeout(ATTACH_WAIT, answer)
        .await
        .context("the mcp-reconcile daemon did not answer the attach in time")??;
    let answer: Answer<Attached> = serde_json::from_slice(&line)
        .context("the mcp-reconcile daemon closed the connection or answered with something that is not an answer")?;
    match answer {
        Answer::Ok(attached) => Ok((attached.session, reader, write)),
        Answer::Error(message) if message == super::version::RETIRED => Err(Retired.into()),
        Answer::Error(message) => Err(Refused(message).into()),
        Answer::None(_) => bail!("the mcp-reconcile daemon answered the attach with no session"),
    }
}
