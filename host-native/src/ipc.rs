//! The session socket: how `status`, `reload`, `reconnect` and `plan` reach a
//! running `watch` for the same files.
//!
//! A Unix socket in the state directory, named by the session id (a hash of
//! the project root and every input path), so every command given the same
//! flags finds the same session. One JSON request line in, one JSON
//! response line out: `{"cmd":"status"|"reload"|"plan"|"reconnect","name"?}`
//! → `{"ok": …}` or `{"error": "…"}`.
//!
//! Only the user running the session may talk to it, whatever the umask:
//! * the state directory is created 0700; an existing one of ours with group
//!   or other bits is tightened to 0700, one owned by another user (or a
//!   shared sticky directory such as `/tmp`) is refused ([`prepare_state_dir`]);
//! * the socket is bound under a temporary name, set to 0600 and only then
//!   renamed into place, so it is never reachable with a looser mode;
//! * every connection's peer uid (`SO_PEERCRED`) must equal our effective uid,
//!   else it is dropped without an answer and a warning names the uid
//!   ([`admit_peer`]);
//! * a request line is at most [`MAX_REQUEST`] bytes (a longer one gets an
//!   error and the connection is closed, nothing more is read) and must
//!   arrive within [`READ_TIMEOUT`]; at most [`MAX_CONNECTIONS`] are served
//!   at once. The client reads at most [`MAX_RESPONSE`] bytes of answer.

use std::fs;
use std::io;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::{mpsc, oneshot, Semaphore};

use crate::host::Control;
use crate::inputs::Inputs;
use crate::status::{plan_json, report_json};

/// The socket path of the session for `inputs`.
pub fn socket_path(inputs: &Inputs) -> PathBuf {
    inputs
        .state_dir()
        .join(format!("{}.sock", inputs.session_id()))
}

/// The longest request line the session reads (without its newline).
pub const MAX_REQUEST: usize = 64 * 1024;
/// The longest answer line [`request`] reads (without its newline).
pub const MAX_RESPONSE: usize = 8 * 1024 * 1024;
/// How long a client may take to send its request line, and to take the answer.
pub const READ_TIMEOUT: Duration = Duration::from_secs(10);
/// Connections served at once; more are closed unanswered until one ends.
pub const MAX_CONNECTIONS: usize = 32;

/// Creates the state directory `dir` with mode 0700, or checks an existing
/// one: it must be a directory owned by our effective uid; group or other
/// bits are removed (with a warning). A directory owned by someone else, or
/// a sticky (shared) one, is refused: whoever can write there could replace
/// the socket.
///
/// # Errors
/// `dir` cannot be created, is not a directory, belongs to another user, is
/// a shared sticky directory, or its mode cannot be tightened.
pub fn prepare_state_dir(dir: &Path) -> anyhow::Result<()> {
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .with_context(|| format!("creating the state directory {}", dir.display()))?;
    let meta = fs::metadata(dir)
        .with_context(|| format!("reading the state directory {}", dir.display()))?;
    if !meta.is_dir() {
        anyhow::bail!(
            "the state directory {} is not a directory; remove it or pass another `--state-dir`",
            dir.display()
        );
    }
    let ours = nix::unistd::geteuid().as_raw();
    if meta.uid() != ours {
        anyhow::bail!(
            "the state directory {} belongs to uid {}, not to you (uid {ours}): its owner could \
             replace the session socket; pass a `--state-dir` of your own",
            dir.display(),
            meta.uid()
        );
    }
    let mode = meta.permissions().mode() & 0o7777;
    if mode & 0o1000 != 0 {
        anyhow::bail!(
            "the state directory {} is a shared sticky directory (mode {mode:o}); pass a \
             `--state-dir` only you can use, e.g. a new directory inside it",
            dir.display()
        );
    }
    if mode & 0o077 != 0 {
        fs::set_permissions(dir, fs::Permissions::from_mode(0o700)).with_context(|| {
            format!(
                "the state directory {} is open to other users (mode {mode:o}) and cannot be \
                 set to 0700; fix its mode by hand",
                dir.display()
            )
        })?;
        tracing::warn!(
            dir = %dir.display(),
            "the state directory was open to other users (mode {mode:o}); set it to 0700"
        );
    }
    Ok(())
}

/// Whether a connection from `peer_uid` (its `SO_PEERCRED` uid, or the error
/// reading it) may talk to a session running as `our_uid`: only the same
/// uid. `Err` says why not, for the log.
pub fn admit_peer(peer_uid: io::Result<u32>, our_uid: u32) -> Result<(), String> {
    match peer_uid {
        Ok(uid) if uid == our_uid => Ok(()),
        Ok(uid) => Err(format!(
            "refused a connection from uid {uid} (the session runs as uid {our_uid})"
        )),
        Err(e) => Err(format!(
            "refused a connection whose peer uid cannot be read: {e}"
        )),
    }
}

/// Listens on `path` and turns requests into [`Control`] messages. Fails if a
/// live session already owns the socket; a stale socket file is replaced.
/// See the module docs for who may connect and what is read.
///
/// # Errors
/// The state directory cannot be prepared ([`prepare_state_dir`]), another
/// session is running, or the socket cannot be bound.
pub async fn serve(
    path: &Path,
    control: mpsc::UnboundedSender<Control>,
) -> anyhow::Result<SocketGuard> {
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
        _ => PathBuf::from("."),
    };
    prepare_state_dir(&dir)?;
    if UnixStream::connect(path).await.is_ok() {
        anyhow::bail!(
            "a session for these files is already running (socket {}); stop it first or use `mcp-reconcile status`",
            path.display()
        );
    }
    let listener = bind_private(path, &dir)?;
    let our_uid = nix::unistd::geteuid().as_raw();
    let slots = Arc::new(Semaphore::new(MAX_CONNECTIONS));
    let task = tokio::spawn(async move {
        loop {
            let stream = match listener.accept().await {
                Ok((stream, _)) => stream,
                Err(e) => {
                    // Out of descriptors and the like: keep listening.
                    tracing::warn!("the session socket cannot accept a connection: {e}");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            if let Err(why) = admit_peer(stream.peer_cred().map(|c| c.uid()), our_uid) {
                tracing::warn!("session socket: {why}");
                continue;
            }
            let Ok(slot) = Arc::clone(&slots).try_acquire_owned() else {
                tracing::warn!(
                    "session socket: {MAX_CONNECTIONS} requests are already open; closed one more"
                );
                continue;
            };
            let control = control.clone();
            tokio::spawn(async move {
                let _ = answer(stream, control).await;
                drop(slot);
            });
        }
    });
    Ok(SocketGuard {
        path: path.to_path_buf(),
        task,
    })
}

/// Binds the socket under a temporary name in `dir` (0700), sets it to 0600
/// and renames it to `path`: the socket is never reachable under `path` with
/// the umask's mode, and a stale socket is replaced atomically.
fn bind_private(path: &Path, dir: &Path) -> anyhow::Result<UnixListener> {
    // Short, so it fits `sun_path` whenever `path` does.
    let tmp = dir.join(format!(".bind-{}", std::process::id()));
    let _ = fs::remove_file(&tmp);
    let bound = (|| {
        let listener = UnixListener::bind(&tmp)?;
        fs::set_permissions(&tmp, fs::Permissions::from_mode(0o600))?;
        fs::rename(&tmp, path)?;
        Ok::<_, io::Error>(listener)
    })();
    bound.map_err(|e| {
        let _ = fs::remove_file(&tmp);
        anyhow::Error::new(e).context(format!(
            "cannot listen on {}; check that the state directory is writable",
            path.display()
        ))
    })
}

/// Removes the socket file and stops listening when dropped.
pub struct SocketGuard {
    path: PathBuf,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for SocketGuard {
    fn drop(&mut self) {
        self.task.abort();
        let _ = std::fs::remove_file(&self.path);
    }
}

async fn answer(stream: UnixStream, control: mpsc::UnboundedSender<Control>) -> io::Result<()> {
    let (read, mut write) = stream.into_split();
    // One byte more than allowed: a line that fills it is too long.
    let mut reader = BufReader::new(read.take(MAX_REQUEST as u64 + 1));
    let mut line = Vec::new();
    match tokio::time::timeout(READ_TIMEOUT, reader.read_until(b'\n', &mut line)).await {
        Ok(read) => read?,
        Err(_) => {
            tracing::debug!("session socket: no request line within {READ_TIMEOUT:?}; closed");
            return Ok(());
        }
    };
    let response = if line.strip_suffix(b"\n").unwrap_or(&line).len() > MAX_REQUEST {
        json!({"error": format!("the request is longer than {MAX_REQUEST} bytes")})
    } else {
        match serde_json::from_slice::<Value>(&line) {
            Ok(request) => handle(&request, &control).await,
            Err(e) => json!({"error": format!("request is not JSON: {e}")}),
        }
    };
    let sent = async {
        write.write_all(format!("{response}\n").as_bytes()).await?;
        write.shutdown().await
    };
    tokio::time::timeout(READ_TIMEOUT, sent)
        .await
        .unwrap_or_else(|_| Err(io::ErrorKind::TimedOut.into()))
}

async fn handle(request: &Value, control: &mpsc::UnboundedSender<Control>) -> Value {
    let gone = || json!({"error": "the session is shutting down"});
    match request.get("cmd").and_then(Value::as_str) {
        Some("status") => {
            let (tx, rx) = oneshot::channel();
            if control.send(Control::Status(tx)).is_err() {
                return gone();
            }
            rx.await
                .map_or_else(|_| gone(), |report| json!({"ok": report_json(&report)}))
        }
        Some("reload") => {
            let (tx, rx) = oneshot::channel();
            if control.send(Control::Reload(tx)).is_err() {
                return gone();
            }
            rx.await.map_or_else(|_| gone(), |()| json!({"ok": true}))
        }
        Some("reconnect") => {
            let name = request
                .get("name")
                .and_then(Value::as_str)
                .map(str::to_owned);
            let (tx, rx) = oneshot::channel();
            if control.send(Control::Reconnect(name, tx)).is_err() {
                return gone();
            }
            match rx.await {
                Ok(Ok(names)) => json!({"ok": names}),
                Ok(Err(message)) => json!({"error": message}),
                Err(_) => gone(),
            }
        }
        Some("plan") => {
            let (tx, rx) = oneshot::channel();
            if control.send(Control::Plan(tx)).is_err() {
                return gone();
            }
            match rx.await {
                Ok(Ok(plan)) => json!({"ok": plan_json(&plan)}),
                Ok(Err(message)) => json!({"error": message}),
                Err(_) => gone(),
            }
        }
        other => json!({"error": format!("unknown command {other:?}")}),
    }
}

/// Sends one request to the running session. `Ok(None)` when no session is
/// running for these files. At most [`MAX_RESPONSE`] bytes of answer are read.
///
/// # Errors
/// The session answered with something that is not JSON, an overlong
/// answer, or nothing at all, or the socket broke mid-request.
pub async fn request(path: &Path, request: &Value) -> anyhow::Result<Option<Value>> {
    let Ok(stream) = UnixStream::connect(path).await else {
        return Ok(None);
    };
    let (read, mut write) = stream.into_split();
    write.write_all(format!("{request}\n").as_bytes()).await?;
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
    let response: Value = serde_json::from_slice(&line).with_context(|| {
        format!(
            "the session at {} answered with something that is not JSON",
            path.display()
        )
    })?;
    if let Some(message) = response.get("error").and_then(Value::as_str) {
        anyhow::bail!("{message}");
    }
    Ok(Some(response.get("ok").cloned().unwrap_or(Value::Null)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_same_uid_is_admitted() {
        assert_eq!(admit_peer(Ok(1000), 1000), Ok(()));
        let refused = admit_peer(Ok(65534), 1000).expect_err("another uid");
        assert!(refused.contains("uid 65534"), "{refused}");
        // Root is another user too: the session trusts only its own uid.
        assert!(admit_peer(Ok(0), 1000).is_err());
        assert!(admit_peer(Err(io::ErrorKind::Unsupported.into()), 1000).is_err());
    }
}
