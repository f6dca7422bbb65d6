//! The session socket: how `status`, `reload`, `reconnect` and `plan` reach a
//! running `watch` for the same files.
//!
//! A Unix socket in the state directory, named by the session id (a hash of
//! the project root and every input path), so every command given the same
//! flags finds the same session. One JSON request line in (a
//! [`SessionRequest`], e.g. `{"cmd":"status"}` or
//! `{"cmd":"reconnect","name":null}`), one JSON response line out:
//! `{"ok": …}` or `{"error": "…"}`. The client is the `mcp-reconcile`
//! binary's; it sends [`SessionRequest::line`] and reads at most
//! [`MAX_RESPONSE`] bytes of answer.
//!
//! Only the user running the session may talk to it, whatever the umask:
//! * the state directory is created 0700; an existing one of ours with group
//!   or other bits is tightened to 0700, a symlink, one owned by another user
//!   (or a shared sticky directory such as `/tmp`) is refused
//!   ([`prepare_state_dir`], [`private`]);
//! * a client checks the directory and the socket the same way before it
//!   connects, and the peer's uid before it sends anything
//!   ([`private::connect`]);
//! * the socket is bound under a temporary name, set to 0600 and only then
//!   renamed into place, so it is never reachable with a looser mode;
//! * every connection's peer uid (`SO_PEERCRED`) must equal our effective uid,
//!   else it is dropped without an answer and a warning names the uid
//!   ([`admit_peer`]);
//! * a request line is at most [`MAX_REQUEST`] bytes (a longer one gets an
//!   error and the connection is closed, nothing more is read) and must
//!   arrive within [`READ_TIMEOUT`]; at most [`MAX_CONNECTIONS`] are served
//!   at once. A client reads at most [`MAX_RESPONSE`] bytes of answer.

use std::fs;
use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use serde::{Deserialize, Serialize};
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::Semaphore;

use crate::host::HostHandle;
use crate::inputs::Inputs;
use crate::private;
use crate::session::Session;
use crate::status::{plan_json, report_json};

/// One answer line on the session socket or the daemon's: `{"ok": …}`, `{"error": "…"}`, or
/// `{"none": true}` when the daemon runs no session of the file set asked about.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Answer<T = Value> {
    /// What was asked for.
    Ok(T),
    /// Why it could not be done, for the person who asked.
    Error(String),
    /// No session of that file set runs in the daemon: the command falls back to the files.
    None(bool),
}

impl<T> Answer<T> {
    /// The answer of `result`.
    pub fn of(result: Result<T, String>) -> Answer<T> {
        match result {
            Ok(value) => Answer::Ok(value),
            Err(message) => Answer::Error(message),
        }
    }

    /// What was asked for (`None` when no session runs), or the error message.
    ///
    /// # Errors
    /// The answer was an error.
    pub fn into_result(self) -> Result<Option<T>, String> {
        match self {
            Answer::Ok(value) => Ok(Some(value)),
            Answer::Error(message) => Err(message),
            Answer::None(_) => Ok(None),
        }
    }
}

impl Answer<Value> {
    /// `Ok(value)` as a JSON answer (a value that does not serialize is an error answer).
    pub fn json(value: impl Serialize) -> Answer<Value> {
        match serde_json::to_value(value) {
            Ok(value) => Answer::Ok(value),
            Err(e) => Answer::Error(e.to_string()),
        }
    }

    /// The answer as one JSON line's value.
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

/// The socket path of the session for `inputs`.
pub fn socket_path(inputs: &Inputs) -> PathBuf {
    inputs
        .state_dir()
        .join(format!("{}.sock", inputs.session_id()))
}

/// One request on the session socket, as one JSON line:
/// `{"cmd":"status"}`, `{"cmd":"plan"}`, `{"cmd":"reload"}`,
/// `{"cmd":"reconnect","name":"a"}` (`"name":null` for every server).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "cmd", rename_all = "lowercase")]
pub enum SessionRequest {
    /// Every configured server's status and the input problems
    /// ([`report_json`]).
    Status,
    /// Dry run: what a reconcile would do now ([`plan_json`]).
    Plan,
    /// Reload the files now (no debounce); clears crash loops. Answers `true`.
    Reload,
    /// Clear a server's failure / crash-loop state and restart it now.
    /// Answers the names restarted.
    Reconnect {
        /// The server; `None` for every configured one.
        name: Option<String>,
    },
}

impl SessionRequest {
    /// The request line as sent: the JSON object and a newline.
    pub fn line(&self) -> String {
        // A tagged enum of strings always serializes.
        serde_json::to_string(self).map_or_else(|_| "{}\n".to_owned(), |json| json + "\n")
    }

    /// Reads one request line (without or with its newline); `Err` is the
    /// message the client gets.
    ///
    /// # Errors
    /// The line is not JSON, names no known command, or a known command's
    /// fields have the wrong type.
    pub fn parse(line: &[u8]) -> Result<SessionRequest, String> {
        let value: Value =
            serde_json::from_slice(line).map_err(|e| format!("request is not JSON: {e}"))?;
        let cmd = value.get("cmd").and_then(Value::as_str).map(str::to_owned);
        serde_json::from_value(value).map_err(|e| match cmd.as_deref() {
            Some(known @ ("status" | "plan" | "reload" | "reconnect")) => {
                format!("malformed {known:?} request: {e}")
            }
            other => format!("unknown command {other:?}"),
        })
    }
}

/// The longest request line the session reads (without its newline).
pub const MAX_REQUEST: usize = 64 * 1024;
/// The longest answer line a client reads (without its newline).
pub const MAX_RESPONSE: usize = 8 * 1024 * 1024;
/// How long a client may take to send its request line, and to take the answer.
pub const READ_TIMEOUT: Duration = Duration::from_secs(10);
/// Connections served at once; more are closed unanswered until one ends.
pub const MAX_CONNECTIONS: usize = 32;

/// Creates the state directory `dir` with mode 0700, or checks an existing
/// one ([`private::ensure_dir`]): a symlink, a directory owned by someone else,
/// a shared sticky one or one below a directory others can write is refused —
/// whoever can write there could replace the socket; group or other bits of
/// our own are removed (with a warning).
///
/// # Errors
/// As [`private::ensure_dir`]; the message says to pass another `--state-dir`.
pub fn prepare_state_dir(dir: &Path) -> anyhow::Result<()> {
    private::ensure_dir(dir).with_context(|| {
        format!(
            "the state directory {} cannot hold the session socket; pass a `--state-dir` of \
             your own",
            dir.display()
        )
    })
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

/// Listens on `path` and answers requests through `host`. Fails if a
/// live session already owns the socket; a stale socket file is replaced.
/// See the module docs for who may connect and what is read.
///
/// # Errors
/// The state directory cannot be prepared ([`prepare_state_dir`]), another
/// session is running, or the socket cannot be bound.
pub async fn serve(path: &Path, host: HostHandle) -> anyhow::Result<SocketGuard> {
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
        _ => PathBuf::from("."),
    };
    prepare_state_dir(&dir)?;
    if UnixStream::connect(path).await.is_ok() {
        anyhow::bail!(
            "a session for these files is already running (socket {}); stop it first, use `mcp-reconcile status`, or run `serve` without `--no-daemon` (sessions of the per-user daemon run side by side)",
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
            let host = host.clone();
            tokio::spawn(async move {
                let _ = answer(stream, host).await;
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
pub(crate) fn bind_private(path: &Path, dir: &Path) -> anyhow::Result<UnixListener> {
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

async fn answer(stream: UnixStream, host: HostHandle) -> io::Result<()> {
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
        Answer::Error(format!("the request is longer than {MAX_REQUEST} bytes"))
    } else {
        match SessionRequest::parse(&line) {
            Ok(request) => handle(request, &host).await,
            Err(message) => Answer::Error(message),
        }
    };
    let response = response.to_value();
    let sent = async {
        write.write_all(format!("{response}\n").as_bytes()).await?;
        write.shutdown().await
    };
    tokio::time::timeout(READ_TIMEOUT, sent)
        .await
        .unwrap_or_else(|_| Err(io::ErrorKind::TimedOut.into()))
}

/// Answers one request by asking the session behind `host` (in this process, or one of the
/// daemon's).
pub(crate) async fn handle(request: SessionRequest, host: &HostHandle) -> Answer {
    let answer = match request {
        SessionRequest::Status => host.status().await.map(|report| Ok(report_json(&report))),
        SessionRequest::Reload => host.reload().await.map(|()| Ok(Value::Bool(true))),
        SessionRequest::Reconnect { name } => host
            .reconnect(name)
            .await
            .map(|names| names.map(|names| json!(names))),
        SessionRequest::Plan => host
            .plan()
            .await
            .map(|plan| plan.map(|plan| plan_json(&plan))),
    };
    match answer {
        Ok(result) => Answer::of(result),
        Err(gone) => Answer::Error(gone.to_string()),
    }
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

    #[test]
    fn requests_keep_their_wire_format() {
        let cases = [
            (SessionRequest::Status, r#"{"cmd":"status"}"#),
            (SessionRequest::Plan, r#"{"cmd":"plan"}"#),
            (SessionRequest::Reload, r#"{"cmd":"reload"}"#),
            (
                SessionRequest::Reconnect { name: None },
                r#"{"cmd":"reconnect","name":null}"#,
            ),
            (
                SessionRequest::Reconnect {
                    name: Some("a".into()),
                },
                r#"{"cmd":"reconnect","name":"a"}"#,
            ),
        ];
        for (request, wire) in cases {
            assert_eq!(request.line(), format!("{wire}\n"));
            assert_eq!(SessionRequest::parse(wire.as_bytes()), Ok(request.clone()));
            assert_eq!(
                SessionRequest::parse(request.line().as_bytes()),
                Ok(request)
            );
        }
        // What older clients send is still understood.
        assert_eq!(
            SessionRequest::parse(br#"{"cmd":"reconnect"}"#),
            Ok(SessionRequest::Reconnect { name: None })
        );
        let unknown = SessionRequest::parse(br#"{"cmd":"nope"}"#).expect_err("unknown");
        assert!(unknown.starts_with("unknown command"), "{unknown}");
        let no_cmd = SessionRequest::parse(b"{}").expect_err("no cmd");
        assert!(no_cmd.starts_with("unknown command"), "{no_cmd}");
        let not_json = SessionRequest::parse(b"status").expect_err("not JSON");
        assert!(not_json.starts_with("request is not JSON"), "{not_json}");
        let bad = SessionRequest::parse(br#"{"cmd":"reconnect","name":5}"#).expect_err("bad");
        assert!(bad.contains("malformed"), "{bad}");
    }
}
