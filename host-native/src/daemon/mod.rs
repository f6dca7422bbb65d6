//! The per-user daemon: one [`SharedPool`] for every session of the user (SPEC §6 pool mode,
//! issue 12), so a stdio server that several `serve`s would start identically runs once.
//!
//! * **Where.** One Unix socket, `daemon.sock` in [`socket_dir`]: `$XDG_RUNTIME_DIR/mcp-reconcile`,
//!   else `/run/user/<uid>/mcp-reconcile`, else `~/.local/state/mcp-reconcile/daemon` — never a
//!   shared `/tmp` path. The directory is checked before anything is bound *or connected to*
//!   ([`crate::private`]: no symlink, ours, 0700, no ancestor others can write); the socket is
//!   bound 0600 and every connection's peer uid must be ours ([`ipc::admit_peer`]); a client
//!   checks the socket's owner and the daemon's uid (`SO_PEERCRED`) before it sends its
//!   attach ([`bridge`]); `daemon.lock` (held with `flock` for the daemon's life) makes a second
//!   daemon for the same directory exit at once.
//! * **Attach.** A client sends one [`DaemonRequest::Attach`] line — its layer flags, its
//!   environment and current directory — and gets `{"ok":{"session":NAME}}` once the session's
//!   servers are up (bounded); from then on the connection is an MCP connection to a
//!   [`Gateway`](crate::gateway::Gateway) in front of a session of its own
//!   ([`attached`]: the session engine on a [`Lease`](crate::pool::Lease)): its own admission,
//!   approvals (its project root), tool filters and catalog; its stdio servers spawned with
//!   *its* environment in *its* project root ([`crate::launch`]). What needs approval is sent
//!   as an [`attached::EVENT`] notification for the person (the bridge prints it). The session
//!   lives as long as the connection: when the client goes, it releases what it held and the
//!   pool drains those connections.
//! * **Other requests.** [`DaemonRequest::Status`] lists sessions and connections with their
//!   holders; [`DaemonRequest::Session`] asks every session of one file set what the session
//!   socket would (`status`, `reload`, `reconnect`, `plan`).
//! * **Lifetime.** [`run`] returns once no session has been attached for
//!   [`DaemonOptions::idle_exit`] (the pool's drain runs meanwhile), or on SIGTERM / Ctrl-C;
//!   every server is stopped with its process group before it returns.
//! * **Upgrades.** An attach from a newer `serve` makes the daemon retire ([`version`]): it
//!   gives up its socket and lock at once and returns when its last session has ended.
//!
//! Drive loop of [`run`]:
//! 1. prepare the directory, take the lock, bind the socket;
//! 2. accept a connection, check its peer, read one request line (bounded, timed);
//! 3. an attach becomes a task that runs the session until its connection closes; other
//!    requests are answered and the connection closed;
//! 4. whenever the last session leaves, arm the idle timer; a new attach disarms it;
//! 5. on the idle timer or a signal: remove the socket, shut the pool down.

pub mod attached;
pub mod bridge;
mod member;
mod registry;
pub mod relay;
pub mod version;
pub mod wire;

use std::collections::BTreeMap;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use serde_json::{json, Value};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;

use self::registry::Registry;
pub use self::wire::DaemonRequest;
use crate::inputs::HostEnv;
use crate::ipc::{self, Answer};
use crate::pool::{PoolOptions, SharedPool};

/// The socket's file name in [`socket_dir`].
pub const SOCKET: &str = "daemon.sock";
/// The lock's file name in [`socket_dir`].
const LOCK: &str = "daemon.lock";
/// Where a started daemon's log goes, in [`socket_dir`].
pub const LOG: &str = "daemon.log";
/// The longest request line the daemon reads: an attach carries the client's whole
/// environment, which can be larger than a session socket's request.
pub const MAX_REQUEST: usize = 1024 * 1024;

/// How the daemon behaves.
#[derive(Clone, Debug)]
pub struct DaemonOptions {
    /// How long a server keeps running after the last session holding it ended (SPEC default
    /// 30 s); one the sessions' plans stopped stops at once.
    pub drain: Duration,
    /// How long the daemon waits, with no session attached, before it exits.
    pub idle_exit: Duration,
}

impl Default for DaemonOptions {
    fn default() -> Self {
        let drain = PoolOptions::default().drain;
        DaemonOptions {
            drain,
            idle_exit: drain,
        }
    }
}

/// The daemon's directory, private to the user ([`crate::private`]), the same for every client
/// of the user whatever it passed through of its environment:
/// 1. `$XDG_RUNTIME_DIR/mcp-reconcile` when the variable is set (an absolute path);
/// 2. else `/run/user/<uid>/mcp-reconcile` when that runtime directory exists and is ours — the
///    directory `$XDG_RUNTIME_DIR` names in a login session, so a client that was started
///    without the variable (Codex, cron, `sudo -u`) finds the same daemon as the user's
///    terminal;
/// 3. else `~/.local/state/mcp-reconcile/daemon` (macOS, containers): below the home directory,
///    never a shared `/tmp` path another user could create first.
pub fn socket_dir(env: &HostEnv) -> PathBuf {
    if let Some(dir) = env
        .vars
        .get("XDG_RUNTIME_DIR")
        .map(Path::new)
        .filter(|d| d.is_absolute())
    {
        return dir.join("mcp-reconcile");
    }
    let uid = crate::private::uid();
    let run_user = PathBuf::from(format!("/run/user/{uid}"));
    let ours = fs::symlink_metadata(&run_user).is_ok_and(|m| {
        use std::os::unix::fs::MetadataExt;
        m.is_dir() && m.uid() == uid
    });
    if ours {
        return run_user.join("mcp-reconcile");
    }
    env.home
        .clone()
        .unwrap_or_else(|| PathBuf::from("/"))
        .join(".local/state/mcp-reconcile/daemon")
}

/// Runs the daemon in `dir` until it has been idle for [`DaemonOptions::idle_exit`] or is
/// signalled. Returns `Ok(false)` at once when another daemon holds `dir`.
///
/// # Errors
/// The directory is not private to the user, or the socket cannot be bound.
pub async fn run(dir: &Path, options: DaemonOptions) -> anyhow::Result<bool> {
    crate::private::ensure_dir(dir).context("the daemon's directory is not private to you")?;
    let Some(held) = lock(&dir.join(LOCK))? else {
        return Ok(false);
    };
    let path = dir.join(SOCKET);
    let listener = ipc::bind_private(&path, dir)?;
    let retire = Retire {
        socket: path.clone(),
        lock: Arc::new(std::sync::Mutex::new(Some(held))),
        done: Arc::new(tokio::sync::Notify::new()),
    };
    let mut listener = Some(listener);
    let mut retired = false;
    let pool = SharedPool::start(PoolOptions {
        drain: options.drain,
        ..PoolOptions::default()
    });
    let registry = Registry::default();
    let mut count = registry.count();
    let our_uid = nix::unistd::geteuid().as_raw();
    tracing::info!(socket = %path.display(), "daemon listening");
    let mut idle_since = Some(tokio::time::Instant::now());
    loop {
        let idle = async {
            match idle_since {
                Some(at) => tokio::time::sleep_until(at + options.idle_exit).await,
                None => std::future::pending().await,
            }
        };
        let accept = async {
            match &listener {
                Some(listener) => listener.accept().await,
                None => std::future::pending().await,
            }
        };
        tokio::select! {
            accepted = accept => {
                let Ok((stream, _)) = accepted else {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                };
                if let Err(why) = ipc::admit_peer(stream.peer_cred().map(|c| c.uid()), our_uid) {
                    tracing::warn!("daemon socket: {why}");
                    continue;
                }
                tokio::spawn(answer(stream, pool.clone(), registry.clone(), retire.clone()));
            }
            () = retire.done.notified(), if !retired => {
                // The socket and the lock are the newer daemon's now; what is attached stays.
                retired = true;
                listener = None;
                if *count.borrow() == 0 {
                    break;
                }
            }
            changed = count.changed() => {
                if changed.is_err() {
                    break;
                }
                let now = *count.borrow_and_update();
                if retired && now == 0 {
                    tracing::info!("the last session of the retired daemon ended; it stops");
                    break;
                }
                idle_since = match (now, idle_since) {
                    (0, None) => Some(tokio::time::Instant::now()),
                    (0, since) => since,
                    _ => None,
                };
            }
            () = idle => {
                tracing::info!("no session for {:?}; the daemon stops", options.idle_exit);
                break;
            }
            () = crate::signal::stop_signal() => break,
        }
    }
    // The socket goes only while it is still ours (a retired daemon's is the newer one's); a new
    // daemon may start while this one stops its servers: they share nothing.
    retire.give_up();
    drop(listener);
    pool.shutdown().await;
    Ok(true)
}

/// What a daemon gives up when it retires ([`version`]).
#[derive(Clone)]
struct Retire {
    socket: PathBuf,
    lock: Arc<std::sync::Mutex<Option<nix::fcntl::Flock<fs::File>>>>,
    /// Tells [`run`] to stop accepting and to return with its last session.
    done: Arc<tokio::sync::Notify>,
}

impl Retire {
    /// Gives up the socket and the lock *before* the newer `serve` hears of it, so the daemon
    /// it starts can take both; [`run`] stops accepting. Only the first call does anything:
    /// a second newer attach that was already accepted must not remove the socket the newer
    /// daemon has bound by then.
    fn now(&self, theirs: &str) {
        if self.give_up() {
            tracing::info!(
                ours = %version::ours(),
                theirs = %crate::display::safe(theirs),
                "a newer serve attached; this daemon retires once its sessions end"
            );
            self.done.notify_one();
        }
    }

    /// Removes the socket and releases the lock while they are still this daemon's (the lock
    /// is held): whether they were.
    fn give_up(&self) -> bool {
        let mut lock = self
            .lock
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        let Some(held) = lock.take() else {
            return false;
        };
        let _ = fs::remove_file(&self.socket);
        drop(held);
        true
    }
}

/// Answers one connection: an attach runs its session here until the connection closes; an
/// attach from a newer binary makes this daemon retire instead.
async fn answer(stream: UnixStream, pool: SharedPool, registry: Registry, retire: Retire) {
    let (read, mut write) = stream.into_split();
    let mut reader = BufReader::new(read);
    let mut line = Vec::new();
    let mut limited = (&mut reader).take(MAX_REQUEST as u64 + 1);
    let read = limited.read_until(b'\n', &mut line);
    match tokio::time::timeout(ipc::READ_TIMEOUT, read).await {
        Ok(Ok(_)) => {}
        _ => return,
    }
    drop(limited);
    let request = if line.strip_suffix(b"\n").unwrap_or(&line).len() > MAX_REQUEST {
        Err(format!("the request is longer than {MAX_REQUEST} bytes"))
    } else {
        DaemonRequest::parse(&line)
    };
    let response = match request {
        Ok(DaemonRequest::Attach {
            version: Some(theirs),
            ..
        }) if version::newer(&theirs, &version::ours()) => {
            retire.now(&theirs);
            Answer::Error(version::RETIRED.to_owned())
        }
        Ok(DaemonRequest::Attach {
            options,
            env,
            client,
            pid,
            tool_names,
            manage_tools,
            version: _,
        }) => {
            attached::run(
                attached::Attach {
                    options: *options,
                    env: *env,
                    client,
                    pid,
                    tool_names,
                    manage_tools,
                },
                pool,
                registry,
                reader,
                write,
            )
            .await;
            return;
        }
        Ok(DaemonRequest::Status) => Answer::Ok(status(&pool, &registry).await),
        Ok(DaemonRequest::Session { id, request }) => registry.ask(&id, request).await,
        Err(message) => Answer::Error(message),
    };
    let _ = reply(&mut write, &response).await;
}

/// Writes one answer line, bounded by [`ipc::READ_TIMEOUT`].
pub(crate) async fn reply<T: serde::Serialize>(
    write: &mut (impl tokio::io::AsyncWrite + Unpin),
    response: &Answer<T>,
) -> io::Result<()> {
    let text = serde_json::to_string(response).map_err(io::Error::other)? + "\n";
    let sent = write.write_all(text.as_bytes());
    tokio::time::timeout(ipc::READ_TIMEOUT, sent)
        .await
        .unwrap_or_else(|_| Err(io::ErrorKind::TimedOut.into()))
}

/// `{"sessions":[…], "connections":[…]}`: every session (name, client, pid, project, the
/// servers it holds) and every pooled connection (server, state, pid, holders, draining).
async fn status(pool: &SharedPool, registry: &Registry) -> Value {
    let connections = pool.status().await.unwrap_or_default();
    let mut held: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for conn in &connections {
        for holder in &conn.holders {
            held.entry(holder.clone())
                .or_default()
                .push(conn.server.clone());
        }
    }
    let sessions: Vec<Value> = registry
        .sessions()
        .into_iter()
        .map(|s| {
            json!({
                "session": s.name,
                "client": s.client,
                "pid": s.pid,
                "project": s.project_root,
                "id": s.id,
                "servers": held.remove(&s.name).unwrap_or_default(),
            })
        })
        .collect();
    let connections: Vec<Value> = connections
        .iter()
        .map(|c| {
            json!({
                "server": c.server,
                "state": c.state,
                "pid": c.pid,
                "holders": c.holders,
                "draining": c.draining,
                "private": c.private,
                "spawns": c.spawns,
            })
        })
        .collect();
    json!({
        "pid": std::process::id(),
        "version": version::ours(),
        "sessions": sessions,
        "connections": connections,
    })
}

/// Takes the daemon lock without waiting; `None` when another daemon holds it.
fn lock(path: &Path) -> anyhow::Result<Option<nix::fcntl::Flock<fs::File>>> {
    use std::os::unix::fs::OpenOptionsExt;
    let file = fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("opening the daemon lock {}", path.display()))?;
    match nix::fcntl::Flock::lock(file, nix::fcntl::FlockArg::LockExclusiveNonblock) {
        Ok(lock) => Ok(Some(lock)),
        Err((_, nix::errno::Errno::EWOULDBLOCK)) => Ok(None),
        Err((_, e)) => Err(anyhow::anyhow!("cannot lock {}: {e}", path.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Two newer attaches accepted before the first retired the daemon: the second must leave
    /// the socket the newer daemon bound in between.
    #[test]
    fn a_daemon_retires_once_and_never_removes_the_newer_daemons_socket() {
        let dir = tempfile::tempdir().expect("tempdir");
        let socket = dir.path().join(SOCKET);
        fs::write(&socket, "").expect("our socket");
        let held = lock(&dir.path().join(LOCK)).expect("lock").expect("free");
        let retire = Retire {
            socket: socket.clone(),
            lock: Arc::new(std::sync::Mutex::new(Some(held))),
            done: Arc::new(tokio::sync::Notify::new()),
        };
        retire.now("9.9.9");
        assert!(!socket.exists(), "the first retire gives the socket up");
        let newer = lock(&dir.path().join(LOCK)).expect("lock");
        assert!(newer.is_some(), "and the lock");
        fs::write(&socket, "").expect("the newer daemon's socket");
        retire.now("9.9.9");
        assert!(!retire.give_up());
        assert!(socket.exists(), "the newer daemon's socket stays");
    }
}
