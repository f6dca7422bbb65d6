//! One language server over stdio (SPEC §14.4), spoken to with `async-lsp`'s client main loop.
//!
//! Life of a connection:
//! 1. [`LspConnection::start`] spawns the server as the leader of its own process group (the
//!    same `ChildProcess` MCP stdio servers use: stderr tail, `PR_SET_PDEATHSIG`, group-wide
//!    stop), cwd = the workspace folder;
//! 2. `initialize` (bounded by `startupTimeout`), `initialized`, then
//!    `workspace/didChangeConfiguration` with the whole `settings` object (push 1);
//! 3. while it runs, the main loop answers the server's requests from the shared state (settings pulls,
//!    registrations, progress tokens, workspace folders; anything else `MethodNotFound`), keeps
//!    the latest `publishDiagnostics` per document, and ignores every other notification
//!    (async-lsp's default would end the loop on the first unknown one);
//! 4. a driver task watches the process and the main loop: if either ends on its own it reports
//!    [`LspEvent::Closed`] (redacted, with the stderr tail) and stops the group;
//! 5. [`LspConnection::stop`]: `shutdown` (bounded by `shutdownTimeout`), `exit`, the main loop
//!    ends (stdin closes), then SIGTERM / SIGKILL to the group. A dropped connection is killed
//!    at once in the background. Nothing waits without a bound.
//!
//! Parts: `start` reads a `.lsp.json` entry into an [`LspStart`]; `client` is what the main
//! loop answers and keeps (shared with the connection) and the `initialize` request;
//! `framing` checks every message the server sends before the main loop reads it (at most
//! [`MAX_MESSAGE_BYTES`], nested at most [`MAX_DEPTH`] deep), so a hostile server fails its own
//! connection, never the process.
//!
//! Diagnostics are push-only: the client does not declare `textDocument.diagnostic`, because
//! servers that see it stop pushing (vscode-json-language-server switches to pull mode).

use std::collections::HashMap;
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_lsp::{MainLoop, ServerSocket};
use lsp_types::notification::{DidChangeConfiguration, Exit, Initialized};
use lsp_types::request::Shutdown;
use lsp_types::{
    Diagnostic, DidChangeConfigurationParams, InitializedParams, Url, WorkspaceFolder,
};
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;
use tokio_util::compat::TokioAsyncWriteCompatExt;

use crate::redact::{redact_all, secrets};
use crate::transport::stdio::ChildProcess;
use client::{client_router, initialize_params, lock, InitializeRaw, Published, Shared, StopLoop};
pub use framing::{MAX_DEPTH, MAX_MESSAGE_BYTES};
pub use queries::LspHandle;
use start::{folder_name, process_config};
pub use start::{LspStart, DEFAULT_SHUTDOWN_TIMEOUT_MS, DEFAULT_STARTUP_TIMEOUT_MS};

mod client;
mod framing;
mod queries;
mod start;

/// After a failed start or an exit: how long to wait for the exit status and the last stderr
/// lines before writing the message.
const SETTLE: Duration = Duration::from_millis(500);
/// How long the main loop gets to flush `exit` and close stdin before it is aborted.
const LOOP_CLOSE: Duration = Duration::from_secs(1);
/// Bound on [`LspConnection::stop`]'s process part, in case a stop step misbehaves.
const CLOSE_LIMIT: Duration = Duration::from_secs(15);

/// Something a live connection reports on its own.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum LspEvent {
    /// The server ended by itself (exit, crash, closed pipes, a protocol error); `error` is
    /// redacted and ends with the stderr tail. Not sent for [`LspConnection::stop`].
    Closed { generation: u64, error: String },
}

/// A running, initialized language server. Stop it with [`LspConnection::stop`].
pub struct LspConnection {
    shared: Arc<Shared>,
    pid: u32,
    server: ServerSocket,
    shutdown_timeout: Duration,
    /// Sent by `stop`; dropped (with the connection) it means "kill now".
    stop: Option<oneshot::Sender<()>>,
    driver: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for LspConnection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LspConnection")
            .field("server", &self.shared.name)
            .field("pid", &self.pid)
            .finish_non_exhaustive()
    }
}

impl LspConnection {
    /// Starts language server `name` and brings it to the configured state (module docs,
    /// steps 1-2). `generation` is echoed in [`LspEvent`]s so the host can drop stale ones.
    ///
    /// # Errors
    /// A redacted sentence naming the server: the program did not start, `initialize` failed or
    /// took longer than `startup_timeout` (the process group is stopped first; the exit status
    /// and stderr tail are included).
    pub async fn start(
        name: &str,
        start: LspStart,
        generation: u64,
        events: mpsc::UnboundedSender<LspEvent>,
    ) -> Result<LspConnection, String> {
        let config =
            process_config(&start).map_err(|e| format!("language server `{name}`: {e}"))?;
        let secrets = secrets(&config);
        let fail = |what: String| redact_all(&format!("language server `{name}` {what}"), &secrets);
        crate::lsp::confined::folder_in_project(&start.project_root, &start.workspace_folder)
            .map_err(|e| fail(format!("was not started: {e}")))?;
        let folder_uri = Url::from_file_path(&start.workspace_folder).map_err(|()| {
            fail(format!(
                "has a workspace folder that is not a file URL: {}",
                start.workspace_folder.display()
            ))
        })?;
        let (mut process, pipes) = ChildProcess::spawn(
            &config,
            None,
            start.launch.as_deref(),
            secrets.clone(),
            name,
        )
        .map_err(|e| {
            fail(format!(
                "could not start `{}`: {e}; check `command`, `workspaceFolder` and PATH",
                start.command
            ))
        })?;
        let shared = Arc::new(Shared {
            name: name.to_owned(),
            secrets: secrets.clone(),
            folder_path: start.workspace_folder.clone(),
            project_root: start.project_root.clone(),
            folder: WorkspaceFolder {
                uri: folder_uri.clone(),
                name: folder_name(&start.workspace_folder),
            },
            settings: Mutex::new(start.settings.clone()),
            pushes: AtomicU64::new(0),
            published: Mutex::new(Published::default()),
            publishes: watch::Sender::new(0),
            documents: Mutex::new(HashMap::new()),
            ended: watch::Sender::new(None),
            stopping: AtomicBool::new(false),
        });
        let (main_loop, server) = MainLoop::new_client(|socket| client_router(&shared, socket));
        // Every message is checked before async-lsp reads it (size, headers, nesting).
        let input = framing::checked(pipes.stdout, name);
        let main_loop = tokio::spawn(main_loop.run(input, pipes.stdin.compat_write()));

        let initialize = server.request::<InitializeRaw>(initialize_params(&start, folder_uri));
        let failure = match tokio::time::timeout(start.startup_timeout, initialize).await {
            Ok(Ok(_)) => None,
            Ok(Err(e)) => Some(format!("failed `initialize`: {e}")),
            Err(_) => Some(format!(
                "did not answer `initialize` within {} ms (`startupTimeout`)",
                start.startup_timeout.as_millis()
            )),
        };
        if let Some(what) = failure {
            // The process usually exited: its status and last words explain the failure.
            let status = process.wait_exit(SETTLE).await;
            main_loop.abort();
            process.stop().await;
            process.stderr_settled(SETTLE).await;
            let exited = status
                .map(|s| format!("; the process exited ({s})"))
                .unwrap_or_else(|| "; stopped it".to_owned());
            return Err(fail(format!(
                "{what}{exited}{}",
                with_stderr(&process.stderr_tail())
            )));
        }
        let configured = server
            .notify::<Initialized>(InitializedParams {})
            .and_then(|()| {
                server.notify::<DidChangeConfiguration>(DidChangeConfigurationParams {
                    settings: start.settings.clone(),
                })
            });
        if let Err(e) = configured {
            main_loop.abort();
            process.stop().await;
            return Err(fail(format!(
                "went away right after `initialize` ({e}){}",
                with_stderr(&process.stderr_tail())
            )));
        }
        shared.pushes.store(1, Ordering::SeqCst);
        let pid = process.pid();
        tracing::debug!(server = %name, pid, "language server initialized");

        let (stop, stop_rx) = oneshot::channel();
        let driver = tokio::spawn(drive(Driver {
            process,
            main_loop,
            server: server.clone(),
            stop: stop_rx,
            shared: shared.clone(),
            generation,
            events,
        }));
        Ok(LspConnection {
            shared,
            pid,
            server,
            shutdown_timeout: start.shutdown_timeout,
            stop: Some(stop),
            driver: Some(driver),
        })
    }

    /// The server's process id (the leader of its process group).
    pub fn pid(&self) -> Option<u32> {
        Some(self.pid)
    }

    /// How many `workspace/didChangeConfiguration` pushes this process received (1 after
    /// start).
    pub fn settings_pushes(&self) -> u64 {
        self.shared.pushes.load(Ordering::SeqCst)
    }

    /// Pushes the full new `settings` (never a diff: servers read a missing key as its
    /// default) and answers later `workspace/configuration` pulls from them. The next
    /// [`Self::diagnostics`] of each open document re-sends its text, so the answer reflects
    /// the new settings even where a server re-validates only on change.
    ///
    /// # Errors
    /// The connection is closed.
    pub fn reconfigure(&self, settings: serde_json::Value) -> Result<(), String> {
        *lock(&self.shared.settings) = settings.clone();
        self.server
            .notify::<DidChangeConfiguration>(DidChangeConfigurationParams { settings })
            .map_err(|e| self.shared.closed_error(&e.to_string()))?;
        self.shared.pushes.fetch_add(1, Ordering::SeqCst);
        Ok(())
    }

    /// The diagnostics of the file at `path` (relative paths are resolved against the
    /// workspace folder) as the server publishes them for its current text on disk.
    ///
    /// Opens the document on first use (`languageId` = `language_id`); sends its new full text
    /// when it changed on disk, or when settings were pushed since it was last sent. Then waits,
    /// at most `wait`, for a `publishDiagnostics` of that version: one that names the version,
    /// or, from servers that name none, the first one after the text was sent. (Such a server
    /// could still be finishing the previous text's validation when the new text arrives; the
    /// servers tested here drop a validation whose document changed meanwhile.)
    ///
    /// # Errors
    /// The file cannot be read (or is not UTF-8), nothing was published within `wait`, or the
    /// connection closed.
    pub async fn diagnostics(
        &self,
        path: &Path,
        language_id: &str,
        wait: Duration,
    ) -> Result<Vec<Diagnostic>, String> {
        self.handle().diagnostics(path, language_id, wait).await
    }

    /// A handle for queries from other tasks (a gateway): cheap to clone, it does not keep the
    /// server alive; once the connection is stopped its requests fail at once.
    pub fn handle(&self) -> LspHandle {
        LspHandle {
            shared: Arc::clone(&self.shared),
            server: self.server.clone(),
        }
    }

    /// Stops the server: `shutdown` (bounded by `shutdownTimeout`), `exit`, the main loop ends
    /// and closes stdin, then the process gets a grace, SIGTERM to its group, a grace, SIGKILL,
    /// and always a final SIGKILL to the group. Never hangs; no [`LspEvent::Closed`] is sent.
    pub async fn stop(mut self) {
        self.shared.stopping.store(true, Ordering::SeqCst);
        let shutdown = self.server.request::<Shutdown>(());
        if let Err(e) = tokio::time::timeout(self.shutdown_timeout, shutdown)
            .await
            .map_err(|_| "timed out".to_owned())
            .and_then(|answer| answer.map_err(|e| e.to_string()))
        {
            tracing::debug!(server = %self.shared.name, "`shutdown` failed: {e}");
        }
        // Sent either way: a server that ignored `shutdown` may still honour `exit`.
        let _ = self.server.notify::<Exit>(());
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(mut driver) = self.driver.take() {
            if tokio::time::timeout(CLOSE_LIMIT, &mut driver)
                .await
                .is_err()
            {
                tracing::warn!(server = %self.shared.name, "stopping took too long; killing it");
                // Dropping the process (inside the aborted task) kills its group.
                driver.abort();
            }
        }
    }
}

impl Drop for LspConnection {
    fn drop(&mut self) {
        // Dropping the sender tells the driver to kill the group in the background.
        self.stop.take();
    }
}

// ---------------------------------------------------------------------------------------------
// The driver: watches the process and the main loop, stops both

struct Driver {
    process: ChildProcess,
    main_loop: JoinHandle<async_lsp::Result<()>>,
    server: ServerSocket,
    stop: oneshot::Receiver<()>,
    shared: Arc<Shared>,
    generation: u64,
    events: mpsc::UnboundedSender<LspEvent>,
}

async fn drive(driver: Driver) {
    let Driver {
        mut process,
        mut main_loop,
        server,
        mut stop,
        shared,
        generation,
        events,
    } = driver;
    enum Ending {
        /// The process exited (`status`), or the connection ended (`connection`) first.
        ByItself {
            status: Option<String>,
            connection: Option<String>,
        },
        Stop,
        Dropped,
    }
    let ending = tokio::select! {
        status = process.exited() => Ending::ByItself { status: Some(status), connection: None },
        ended = &mut main_loop => Ending::ByItself {
            status: None,
            connection: Some(match ended {
                Ok(Ok(())) => "ended".to_owned(),
                Ok(Err(e)) => format!("failed: {e}"),
                Err(e) => format!("task failed: {e}"),
            }),
        },
        asked = &mut stop => if asked.is_ok() { Ending::Stop } else { Ending::Dropped },
    };
    let (why, asked) = match ending {
        Ending::Stop => {
            // `stop` queued `shutdown` and `exit`: end the loop after them, closing stdin.
            let _ = server.emit(StopLoop);
            if tokio::time::timeout(LOOP_CLOSE, &mut main_loop)
                .await
                .is_err()
            {
                main_loop.abort();
            }
            process.stop().await;
            ("was stopped".to_owned(), true)
        }
        Ending::Dropped => {
            main_loop.abort();
            process.kill_group();
            let _ = process.wait_exit(SETTLE).await;
            ("was dropped".to_owned(), true)
        }
        Ending::ByItself { status, connection } => {
            main_loop.abort();
            // Pipes usually close a moment before the exit is reaped: wait for the status.
            let status = match status {
                Some(status) => Some(status),
                None => process.wait_exit(SETTLE).await,
            };
            process.stderr_settled(SETTLE).await;
            process.stop().await;
            let why = match (status, connection) {
                (Some(status), None) => format!("exited ({status})"),
                (Some(status), Some(connection)) => {
                    format!("exited ({status}); its connection {connection}")
                }
                (None, connection) => format!(
                    "was stopped: its connection {}",
                    connection.unwrap_or_default()
                ),
            };
            (why, shared.stopping.load(Ordering::SeqCst))
        }
    };
    let message = redact_all(
        &format!(
            "language server `{}` {why}{}",
            shared.name,
            with_stderr(&process.stderr_tail())
        ),
        &shared.secrets,
    );
    shared.ended.send_replace(Some(message.clone()));
    if !asked {
        let _ = events.send(LspEvent::Closed {
            generation,
            error: message,
        });
    }
}

/// `; stderr:` and the tail when there is one, else nothing.
fn with_stderr(tail: &str) -> String {
    if tail.trim().is_empty() {
        String::new()
    } else {
        format!("; stderr:\n{tail}")
    }
}
