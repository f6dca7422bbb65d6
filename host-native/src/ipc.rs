//! The session socket: how `status`, `reload`, `reconnect` and `plan` reach a
//! running `watch` for the same files.
//!
//! A Unix socket in the state directory, named by the session id (a hash of
//! the project root and every input path), so every command given the same
//! flags finds the same session. One JSON request line in, one JSON
//! response line out: `{"cmd":"status"|"reload"|"plan"|"reconnect","name"?}`
//! → `{"ok": …}` or `{"error": "…"}`.

use std::io;
use std::path::{Path, PathBuf};

use anyhow::Context;
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::{mpsc, oneshot};

use crate::host::Control;
use crate::inputs::Inputs;
use crate::status::{plan_json, report_json};

/// The socket path of the session for `inputs`.
pub fn socket_path(inputs: &Inputs) -> PathBuf {
    inputs
        .state_dir()
        .join(format!("{}.sock", inputs.session_id()))
}

/// Listens on `path` and turns requests into [`Control`] messages. Fails if a
/// live session already owns the socket; a stale socket file is replaced.
///
/// # Errors
/// The state directory cannot be created, or another session is running.
pub async fn serve(
    path: &Path,
    control: mpsc::UnboundedSender<Control>,
) -> anyhow::Result<SocketGuard> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir)
            .with_context(|| format!("creating the state directory {}", dir.display()))?;
    }
    if UnixStream::connect(path).await.is_ok() {
        anyhow::bail!(
            "a session for these files is already running (socket {}); stop it first or use `mcp-reconcile status`",
            path.display()
        );
    }
    let _ = std::fs::remove_file(path);
    let listener =
        UnixListener::bind(path).with_context(|| format!("listening on {}", path.display()))?;
    let task = tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let control = control.clone();
            tokio::spawn(async move {
                let _ = answer(stream, control).await;
            });
        }
    });
    Ok(SocketGuard {
        path: path.to_path_buf(),
        task,
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
    let mut line = String::new();
    BufReader::new(read).read_line(&mut line).await?;
    let response = match serde_json::from_str::<Value>(&line) {
        Ok(request) => handle(&request, &control).await,
        Err(e) => json!({"error": format!("request is not JSON: {e}")}),
    };
    write.write_all(format!("{response}\n").as_bytes()).await?;
    write.shutdown().await
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
/// running for these files.
///
/// # Errors
/// The session answered with something that is not JSON, or the socket broke
/// mid-request.
pub async fn request(path: &Path, request: &Value) -> anyhow::Result<Option<Value>> {
    let Ok(stream) = UnixStream::connect(path).await else {
        return Ok(None);
    };
    let (read, mut write) = stream.into_split();
    write.write_all(format!("{request}\n").as_bytes()).await?;
    write.shutdown().await?;
    let mut line = String::new();
    BufReader::new(read).read_line(&mut line).await?;
    let response: Value = serde_json::from_str(&line).with_context(|| {
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
