//! A stdio `serve`'s relay (its default runtime): the client's MCP lines to its daemon session
//! and back, surviving the daemon.
//!
//! MCP over stdio is one JSON-RPC message per line, so the relay reads lines, not bytes, and
//! keeps just enough to re-attach:
//! * the client's `initialize` request and `notifications/initialized`, replayed to a new
//!   session (the new session's `initialize` answer is swallowed: the client has its own);
//! * the ids of the client's requests not answered yet;
//! * the resources it subscribed to and the log level it last set, sent again to a new
//!   session (ids of the relay's own, `REPLAYED`; their answers are swallowed) — else a
//!   restarted daemon's servers would forget them without the client knowing.
//!
//! When the daemon connection ends while the client is still there (the daemon died or was
//! stopped), every pending request is answered with an error, the daemon is started again
//! ([`bridge::connect_or_start`]) and a session attached with the same flags and environment,
//! and the client gets `notifications/{tools,prompts,resources}/list_changed` — its lists may
//! differ now. After [`REATTACH_TRIES`] failed attempts `serve` gives up with the reason.

use std::collections::BTreeSet;
use std::path::PathBuf;
use std::time::Duration;

use anyhow::Context;
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncWrite, AsyncWriteExt, BufReader, BufWriter, Lines};
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};

use super::bridge;
use crate::host::HostEvent;
use crate::inputs::{HostEnv, Options};
use tokio::sync::mpsc;

/// How many times the relay tries to bring a lost session back before it gives up.
pub const REATTACH_TRIES: u32 = 5;
/// How long the relay waits for a replayed `initialize` to be answered.
const REPLAY_WAIT: Duration = Duration::from_secs(10);

/// The prefix of the ids of the requests the relay replays itself (their answers are not
/// the client's).
const REPLAYED: &str = "mcp-reconcile-replay-";

/// What a new session is attached with.
pub struct Reattach {
    /// The daemon's directory.
    pub dir: PathBuf,
    /// The `mcp-reconcile` binary that runs `daemon`.
    pub exe: PathBuf,
    /// The session's layer flags.
    pub options: Options,
    /// The session's environment.
    pub env: HostEnv,
    /// How the session's gateway names tools and prompts.
    pub tool_names: crate::gateway::ToolNames,
    /// Where the session's events go (for the person, never to the MCP client).
    pub events: mpsc::UnboundedSender<HostEvent>,
    /// `serve --manage-tools`.
    pub manage_tools: bool,
}

/// The messages a new session needs to be where the old one was.
#[derive(Default)]
struct Replay {
    initialize: Option<(Value, String)>,
    initialized: Option<String>,
    /// Ids (as JSON text) of the client's requests not answered yet.
    pending: BTreeSet<String>,
    /// The URIs the client subscribed to (and has not unsubscribed from).
    subscribed: BTreeSet<String>,
    /// The level of the client's last `logging/setLevel`.
    level: Option<Value>,
}

impl Replay {
    /// Notes a line from the client. Only the envelope is decoded (`method`, `id`); `params`
    /// only for the few methods the replay keeps, so a large call costs one scan, no tree.
    fn handle_client_line(&mut self, line: &str) {
        let Ok(message) = serde_json::from_str::<Envelope<'_>>(line) else {
            return;
        };
        match (message.method.as_deref(), message.id) {
            (Some("initialize"), Some(id)) => {
                self.pending.insert(id.to_string());
                self.initialize = Some((id, line.to_owned()));
            }
            (Some("notifications/initialized"), None) => self.initialized = Some(line.to_owned()),
            (Some(method), Some(id)) => {
                self.pending.insert(id.to_string());
                if !matches!(
                    method,
                    "resources/subscribe" | "resources/unsubscribe" | "logging/setLevel"
                ) {
                    return;
                }
                let Some(params) = message
                    .params
                    .and_then(|raw| serde_json::from_str::<Value>(raw.get()).ok())
                else {
                    return;
                };
                match (method, params.get("uri"), params.get("level")) {
                    ("resources/subscribe", Some(Value::String(uri)), _) => {
                        self.subscribed.insert(uri.clone());
                    }
                    ("resources/unsubscribe", Some(Value::String(uri)), _) => {
                        self.subscribed.remove(uri);
                    }
                    ("logging/setLevel", _, Some(level)) => self.level = Some(level.clone()),
                    _ => {}
                }
            }
            _ => {}
        }
    }

    /// The requests that put a new session where the client left the old one: its log level
    /// and its subscriptions, with ids of the relay's own.
    fn restore_lines(&self) -> Vec<String> {
        let level = self
            .level
            .iter()
            .map(|level| ("logging/setLevel", json!({"level": level})));
        let subscriptions = self
            .subscribed
            .iter()
            .map(|uri| ("resources/subscribe", json!({"uri": uri})));
        level
            .chain(subscriptions)
            .enumerate()
            .map(|(n, (method, params))| {
                json!({"jsonrpc": "2.0", "id": format!("{REPLAYED}{n}"), "method": method,
                       "params": params})
                .to_string()
            })
            .collect()
    }

    /// Whether `line` answers one of the relay's own replayed requests.
    fn is_replayed_answer(line: &str) -> bool {
        line.contains(REPLAYED)
            && serde_json::from_str::<Value>(line).is_ok_and(|m| {
                m.get("method").is_none()
                    && m.get("id")
                        .and_then(Value::as_str)
                        .is_some_and(|id| id.starts_with(REPLAYED))
            })
    }

    /// Notes a line from the session: an answer is no longer pending.
    fn handle_session_line(&mut self, line: &str) {
        let Ok(message) = serde_json::from_str::<Envelope<'_>>(line) else {
            return;
        };
        if message.method.is_none() {
            if let Some(id) = message.id {
                self.pending.remove(&id.to_string());
            }
        }
    }
}

/// What the relay reads of a JSON-RPC message: its method and id, and its params unparsed;
/// `result` and everything else is skipped, not built.
#[derive(serde::Deserialize)]
struct Envelope<'a> {
    #[serde(borrow, default)]
    method: Option<std::borrow::Cow<'a, str>>,
    #[serde(default)]
    id: Option<Value>,
    #[serde(borrow, default)]
    params: Option<&'a serde_json::value::RawValue>,
}

/// Attaches a session as `again` says (starting the daemon when none runs) and relays stdin
/// and stdout to it until the client leaves; see the module docs.
///
/// # Errors
/// No session could be attached, or brought back, within [`REATTACH_TRIES`] attempts, or
/// stdout broke.
pub async fn relay_stdio(again: Reattach) -> anyhow::Result<()> {
    let mut replay = Replay::default();
    let (mut session, write) = reattach(&again, &replay).await?;
    let mut write = BufWriter::new(write);
    // Non-blocking pipes where stdin and stdout are pipes (as a client spawns `serve`): a line
    // costs no hop through tokio's blocking pool each way (tokio's stdin/stdout otherwise).
    let (stdin, stdout) = rmcp::transport::io::stdio_pipes();
    let mut client = BufReader::new(stdin).lines();
    let mut stdout = BufWriter::new(stdout);
    loop {
        // Written lines are flushed once no further line is already buffered on their side:
        // one write for a burst of answers (calls in flight), at once for a lone one.
        if !write.buffer().is_empty() && !has_line(client.get_ref().buffer()) {
            // A failed write shows up as the session's end below.
            let _ = write.flush().await;
        }
        if !stdout.buffer().is_empty() && !has_line(session.get_ref().buffer()) {
            stdout.flush().await.context("writing to stdout")?;
        }
        tokio::select! {
            line = client.next_line() => match line {
                Ok(Some(line)) => {
                    replay.handle_client_line(&line);
                    let _ = put(&mut write, &line).await;
                }
                _ => {
                    // The client left: the session ends when its connection does.
                    let _ = write.shutdown().await;
                    let drain = async {
                        while let Ok(Some(line)) = session.next_line().await {
                            let _ = put(&mut stdout, &line).await;
                        }
                        let _ = stdout.flush().await;
                    };
                    let _ = tokio::time::timeout(crate::ipc::READ_TIMEOUT, drain).await;
                    return Ok(());
                }
            },
            line = session.next_line() => match line {
                Ok(Some(line)) => {
                    if let Some(event) = session_event(&line) {
                        // For the person who runs the client, not for the client.
                        if let Some(event) = event {
                            let _ = again.events.send(event);
                        }
                        continue;
                    }
                    if Replay::is_replayed_answer(&line) {
                        if line.contains("\"error\"") {
                            tracing::warn!("restoring a subscription or log level failed: {line}");
                        }
                        continue;
                    }
                    replay.handle_session_line(&line);
                    put(&mut stdout, &line).await.context("writing to stdout")?;
                }
                _ => {
                    tracing::warn!("the daemon connection ended; starting it again");
                    fail_pending(&mut replay, &mut stdout).await?;
                    let (again_session, again_write) = reattach(&again, &replay).await?;
                    (session, write) = (again_session, BufWriter::new(again_write));
                    for list in ["tools", "prompts", "resources"] {
                        let changed = json!({
                            "jsonrpc": "2.0",
                            "method": format!("notifications/{list}/list_changed"),
                        });
                        send(&mut stdout, &changed.to_string()).await?;
                    }
                }
            },
        }
    }
}

/// Whether `buffered` (what a line reader holds unread) has a whole line in it.
fn has_line(buffered: &[u8]) -> bool {
    buffered.contains(&b'\n')
}

/// Writes `line` and its newline into `out`'s buffer (flushed by the caller).
async fn put(out: &mut (impl AsyncWrite + Unpin), line: &str) -> std::io::Result<()> {
    out.write_all(line.as_bytes()).await?;
    out.write_all(b"\n").await
}

/// A daemon session's [`EVENT`](super::attached::EVENT) line, which the relay keeps from
/// the client: `Some(None)` when it is one but cannot be read.
pub fn session_event(line: &str) -> Option<Option<HostEvent>> {
    if !line.contains(super::attached::EVENT) {
        return None;
    }
    let message: Value = serde_json::from_str(line).ok()?;
    if message.get("method").and_then(Value::as_str) != Some(super::attached::EVENT) {
        return None;
    }
    Some(
        message
            .get("params")
            .and_then(|params| serde_json::from_value(params.clone()).ok()),
    )
}

/// Writes `line` and flushes.
async fn send(out: &mut (impl AsyncWrite + Unpin), line: &str) -> std::io::Result<()> {
    put(out, line).await?;
    out.flush().await
}

/// Answers every pending request with an error: its session is gone.
async fn fail_pending(
    replay: &mut Replay,
    stdout: &mut (impl AsyncWrite + Unpin),
) -> anyhow::Result<()> {
    for id in std::mem::take(&mut replay.pending) {
        let id: Value = serde_json::from_str(&id).unwrap_or(Value::Null);
        let error = json!({
            "jsonrpc": "2.0",
            "id": id,
            "error": {
                "code": -32603,
                "message": "the mcp-reconcile daemon stopped before answering; it is being \
                            restarted — try again",
            },
        });
        send(stdout, &error.to_string()).await?;
    }
    Ok(())
}

/// Starts the daemon if needed, attaches a session and replays the handshake.
async fn reattach(
    again: &Reattach,
    replay: &Replay,
) -> anyhow::Result<(Lines<BufReader<OwnedReadHalf>>, OwnedWriteHalf)> {
    let mut last = None;
    let mut retired = false;
    for attempt in 0..REATTACH_TRIES {
        // An older daemon that just retired is replaced at once: no back-off.
        if attempt > 0 && !retired {
            tokio::time::sleep(Duration::from_millis(200 << attempt)).await;
        }
        retired = false;
        match attach_and_replay(again, replay).await {
            Ok(session) => return Ok(session),
            Err(e) if e.downcast_ref::<bridge::Refused>().is_some() => return Err(e),
            Err(e) if e.downcast_ref::<bridge::Retired>().is_some() => {
                tracing::info!("the running daemon was older and retired; starting this version's");
                retired = true;
                last = Some(e);
            }
            Err(e) => {
                tracing::warn!("attaching to the daemon failed: {e:#}");
                last = Some(e);
            }
        }
    }
    Err(last
        .unwrap_or_else(|| anyhow::anyhow!("no attempt made"))
        .context("no session of the mcp-reconcile daemon could be attached"))
}

async fn attach_and_replay(
    again: &Reattach,
    replay: &Replay,
) -> anyhow::Result<(Lines<BufReader<OwnedReadHalf>>, OwnedWriteHalf)> {
    let stream = bridge::connect_or_start(&again.dir, &again.exe).await?;
    let (name, reader, mut write) = bridge::attach(
        stream,
        &again.options,
        again.env.clone(),
        "serve",
        again.tool_names,
        again.manage_tools,
    )
    .await?;
    let mut session = reader.lines();
    if let Some((id, line)) = &replay.initialize {
        write.write_all(format!("{line}\n").as_bytes()).await?;
        let answered = async {
            while let Some(line) = session.next_line().await? {
                let message: Value = serde_json::from_str(&line).unwrap_or(Value::Null);
                if message.get("id") == Some(id) && message.get("method").is_none() {
                    return Ok(());
                }
            }
            anyhow::bail!("the new session closed before answering initialize")
        };
        tokio::time::timeout(REPLAY_WAIT, answered)
            .await
            .context("the new session did not answer initialize in time")??;
        if let Some(initialized) = &replay.initialized {
            write
                .write_all(format!("{initialized}\n").as_bytes())
                .await?;
            for line in replay.restore_lines() {
                write.write_all(format!("{line}\n").as_bytes()).await?;
            }
        }
    }
    tracing::info!(session = %name, "attached to the daemon");
    Ok((session, write))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_replay_keeps_the_handshake_and_unanswered_requests() {
        let mut replay = Replay::default();
        replay.handle_client_line(r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{}}"#);
        replay.handle_session_line(r#"{"jsonrpc":"2.0","id":0,"result":{}}"#);
        replay.handle_client_line(r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#);
        replay.handle_client_line(r#"{"jsonrpc":"2.0","id":1,"method":"tools/list"}"#);
        replay.handle_client_line(r#"{"jsonrpc":"2.0","id":"x","method":"tools/call"}"#);
        replay.handle_session_line(r#"{"jsonrpc":"2.0","id":1,"result":{"tools":[]}}"#);
        // A request of the session's own with the same id is not an answer.
        replay.handle_session_line(r#"{"jsonrpc":"2.0","id":"x","method":"ping"}"#);
        assert_eq!(
            replay.initialize.as_ref().map(|(id, _)| id),
            Some(&json!(0))
        );
        assert!(replay.initialized.is_some());
        assert_eq!(
            replay.pending.iter().collect::<Vec<_>>(),
            [&"\"x\"".to_owned()]
        );
        replay.handle_client_line("not json");
        assert_eq!(replay.pending.len(), 1);
    }

    #[test]
    fn the_replay_restores_subscriptions_and_the_last_log_level() {
        let mut replay = Replay::default();
        let client = |id: u32, method: &str, params: Value| {
            json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}).to_string()
        };
        replay.handle_client_line(&client(1, "resources/subscribe", json!({"uri": "a://1"})));
        replay.handle_client_line(&client(2, "resources/subscribe", json!({"uri": "a://2"})));
        replay.handle_client_line(&client(3, "resources/unsubscribe", json!({"uri": "a://1"})));
        replay.handle_client_line(&client(4, "logging/setLevel", json!({"level": "debug"})));
        replay.handle_client_line(&client(5, "logging/setLevel", json!({"level": "error"})));
        let lines: Vec<Value> = replay
            .restore_lines()
            .iter()
            .map(|l| serde_json::from_str(l).expect("JSON"))
            .collect();
        assert_eq!(
            lines,
            [
                json!({"jsonrpc": "2.0", "id": "mcp-reconcile-replay-0",
                       "method": "logging/setLevel", "params": {"level": "error"}}),
                json!({"jsonrpc": "2.0", "id": "mcp-reconcile-replay-1",
                       "method": "resources/subscribe", "params": {"uri": "a://2"}}),
            ]
        );
        assert!(Replay::is_replayed_answer(
            r#"{"jsonrpc":"2.0","id":"mcp-reconcile-replay-1","result":{}}"#
        ));
        assert!(!Replay::is_replayed_answer(
            r#"{"jsonrpc":"2.0","id":7,"result":{"text":"mcp-reconcile-replay-1"}}"#
        ));
    }

    #[test]
    fn session_events_are_taken_out_of_the_session_stream() {
        let event = HostEvent::ReloadFailed("settings.json: not JSON".into());
        let note = json!({
            "jsonrpc": "2.0",
            "method": crate::daemon::attached::EVENT,
            "params": serde_json::to_value(&event).expect("serializes"),
        });
        let Some(Some(HostEvent::ReloadFailed(message))) = session_event(&note.to_string()) else {
            panic!("an event");
        };
        assert_eq!(message, "settings.json: not JSON");
        let result =
            json!({"jsonrpc": "2.0", "id": 1, "result": {"text": crate::daemon::attached::EVENT}});
        assert!(session_event(&result.to_string()).is_none());
    }
}
