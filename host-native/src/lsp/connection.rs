//! One language server over stdio (SPEC §14.4), spoken to with `async-lsp`'s client main loop.
//!
//! Life of a connection:
//! 1. [`LspConnection::start`] spawns the server as the leader of its own process group (the
//!    same [`ChildProcess`] MCP stdio servers use: stderr tail, `PR_SET_PDEATHSIG`, group-wide
//!    stop), cwd = the workspace folder;
//! 2. `initialize` (bounded by `startupTimeout`), `initialized`, then
//!    `workspace/didChangeConfiguration` with the whole `settings` object (push 1);
//! 3. while it runs, the main loop answers the server's requests from [`Shared`] (settings pulls,
//!    registrations, progress tokens, workspace folders; anything else `MethodNotFound`), keeps
//!    the latest `publishDiagnostics` per document, and ignores every other notification
//!    (async-lsp's default would end the loop on the first unknown one);
//! 4. a driver task watches the process and the main loop: if either ends on its own it reports
//!    [`LspEvent::Closed`] (redacted, with the stderr tail) and stops the group;
//! 5. [`LspConnection::stop`]: `shutdown` (bounded by `shutdownTimeout`), `exit`, the main loop
//!    ends (stdin closes), then SIGTERM / SIGKILL to the group. A dropped connection is killed
//!    at once in the background. Nothing waits without a bound.
//!
//! Diagnostics are push-only: the client does not declare `textDocument.diagnostic`, because
//! servers that see it stop pushing (vscode-json-language-server switches to pull mode).

use std::collections::HashMap;
use std::ops::ControlFlow;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use async_lsp::router::Router;
use async_lsp::{AnyNotification, ErrorCode, MainLoop, ResponseError, ServerSocket};
use lsp_types::notification::{
    DidChangeConfiguration, DidChangeTextDocument, DidOpenTextDocument, Exit, Initialized,
    Notification as _, PublishDiagnostics,
};
use lsp_types::request::{
    RegisterCapability, Shutdown, UnregisterCapability, WorkDoneProgressCreate,
    WorkspaceConfiguration, WorkspaceFoldersRequest,
};
use lsp_types::{
    ClientCapabilities, ClientInfo, ConfigurationParams, Diagnostic, DidChangeConfigurationParams,
    DidChangeTextDocumentParams, DidOpenTextDocumentParams, DocumentSymbolClientCapabilities,
    DynamicRegistrationClientCapabilities, GotoCapability, HoverClientCapabilities,
    InitializeParams, InitializedParams, MarkupKind, PublishDiagnosticsClientCapabilities,
    PublishDiagnosticsParams, TextDocumentClientCapabilities, TextDocumentContentChangeEvent,
    TextDocumentItem, TextDocumentSyncClientCapabilities, Url, VersionedTextDocumentIdentifier,
    WindowClientCapabilities, WorkspaceClientCapabilities, WorkspaceFolder,
};
use mcp_reconcile_kernel::json::{Object, Value};
use mcp_reconcile_kernel::ServerConfig;
use tokio::sync::{mpsc, oneshot, watch};
use tokio::task::JoinHandle;
use tokio::time::Instant;
use tokio_util::compat::{TokioAsyncReadCompatExt, TokioAsyncWriteCompatExt};

use crate::redact::{redact_all, secrets};
use crate::transport::stdio::ChildProcess;

/// `startupTimeout` when the entry has none (SPEC §14.1), in ms.
pub const DEFAULT_STARTUP_TIMEOUT_MS: u64 = 10_000;
/// `shutdownTimeout` when the entry has none (SPEC §14.1), in ms.
pub const DEFAULT_SHUTDOWN_TIMEOUT_MS: u64 = 5_000;
/// After a failed start or an exit: how long to wait for the exit status and the last stderr
/// lines before writing the message.
const SETTLE: Duration = Duration::from_millis(500);
/// How long the main loop gets to flush `exit` and close stdin before it is aborted.
const LOOP_CLOSE: Duration = Duration::from_secs(1);
/// Bound on [`LspConnection::stop`]'s process part, in case a stop step misbehaves.
const CLOSE_LIMIT: Duration = Duration::from_secs(15);

/// What a start is made from: a `.lsp.json` entry, already `$VAR`-expanded, made concrete.
#[derive(Clone, Debug, PartialEq)]
pub struct LspStart {
    pub command: String,
    pub args: Vec<String>,
    /// Set over the host's environment.
    pub env: Vec<(String, String)>,
    /// Absolute, inside the project root; the server's cwd, `rootUri` and only workspace folder.
    pub workspace_folder: PathBuf,
    pub initialization_options: Option<serde_json::Value>,
    /// Pushed whole with `workspace/didChangeConfiguration`; answers `workspace/configuration`.
    pub settings: serde_json::Value,
    pub startup_timeout: Duration,
    pub shutdown_timeout: Duration,
}

impl LspStart {
    /// Reads an entry as the kernel holds it (fields `command`, `args`, `env`,
    /// `workspaceFolder`, `initializationOptions`, `settings`, `startupTimeout`,
    /// `shutdownTimeout`; defaults as SPEC §14.1) for a project at `project_root`.
    ///
    /// # Errors
    /// A sentence naming the field: a `tcp` / `socket` transport (unsupported: the host reports
    /// `unsupported_transport`), no `command`, a value of the wrong type, or a
    /// `workspaceFolder` outside the project root.
    pub fn from_entry(entry: &Object, project_root: &Path) -> Result<LspStart, String> {
        let field = |key: &str| entry.get(key).filter(|v| !v.is_null());
        match field("transport") {
            None => {}
            Some(Value::String(t)) if t == "stdio" => {}
            Some(other) => {
                return Err(format!(
                    "field `transport` is {}: only stdio language servers are supported \
                     (unsupported_transport); start the server with `command` instead",
                    other.preview(40)
                ))
            }
        }
        let command = match field("command") {
            Some(Value::String(c)) if !c.is_empty() => c.clone(),
            Some(other) => return Err(wrong("command", "a non-empty string", other)),
            None => return Err("field `command` is missing: name the program to run".into()),
        };
        let args = match field("args") {
            None => Vec::new(),
            Some(Value::Array(items)) => items
                .iter()
                .map(|item| item.as_str().map(str::to_owned))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| wrong("args", "an array of strings", &items.clone().into()))?,
            Some(other) => return Err(wrong("args", "an array of strings", other)),
        };
        let env = match field("env") {
            None => Vec::new(),
            Some(Value::Object(map)) => map
                .iter()
                .map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_owned())))
                .collect::<Option<Vec<_>>>()
                .ok_or_else(|| wrong("env", "an object of string values", &map.clone().into()))?,
            Some(other) => return Err(wrong("env", "an object of string values", other)),
        };
        let folder = match field("workspaceFolder") {
            None => None,
            Some(Value::String(f)) => Some(f.as_str()),
            Some(other) => return Err(wrong("workspaceFolder", "a path string", other)),
        };
        let workspace_folder = resolve_folder(folder, project_root)?;
        let initialization_options = field("initializationOptions").map(to_serde);
        let settings = match field("settings") {
            None => serde_json::Value::Object(serde_json::Map::new()),
            Some(value @ Value::Object(_)) => to_serde(value),
            Some(other) => return Err(wrong("settings", "an object", other)),
        };
        Ok(LspStart {
            command,
            args,
            env,
            workspace_folder,
            initialization_options,
            settings,
            startup_timeout: millis(
                field("startupTimeout"),
                "startupTimeout",
                DEFAULT_STARTUP_TIMEOUT_MS,
            )?,
            shutdown_timeout: millis(
                field("shutdownTimeout"),
                "shutdownTimeout",
                DEFAULT_SHUTDOWN_TIMEOUT_MS,
            )?,
        })
    }
}

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
        let folder_uri = Url::from_file_path(&start.workspace_folder).map_err(|()| {
            fail(format!(
                "has a workspace folder that is not a file URL: {}",
                start.workspace_folder.display()
            ))
        })?;
        let (mut process, pipes) = ChildProcess::spawn(&config, None, secrets.clone(), name)
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
        let main_loop =
            tokio::spawn(main_loop.run_buffered(pipes.stdout.compat(), pipes.stdin.compat_write()));

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
        let deadline = Instant::now() + wait;
        let path = normalized(&self.shared.folder_path.join(path));
        let text = tokio::fs::read_to_string(&path)
            .await
            .map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let uri = Url::from_file_path(&path)
            .map_err(|()| format!("{} is not a file path", path.display()))?;
        let target = self.sync(&uri, language_id, text)?;
        self.published_for(&uri, target, deadline, wait).await
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

    /// Opens or re-sends `uri` as needed; returns what a publish must match to answer.
    fn sync(&self, uri: &Url, language_id: &str, text: String) -> Result<Target, String> {
        let pushes = self.shared.pushes.load(Ordering::SeqCst);
        let mut documents = lock(&self.shared.documents);
        // Publishes counted from here on were sent after the server got this text.
        let after = lock(&self.shared.published).next_seq;
        let sent = match documents.get_mut(uri) {
            None => {
                let document = Document {
                    version: 1,
                    text: text.clone(),
                    pushes,
                    after,
                };
                let sent = self
                    .server
                    .notify::<DidOpenTextDocument>(DidOpenTextDocumentParams {
                        text_document: TextDocumentItem {
                            uri: uri.clone(),
                            language_id: language_id.to_owned(),
                            version: document.version,
                            text,
                        },
                    });
                documents.insert(uri.clone(), document);
                sent
            }
            Some(document) if document.text != text || document.pushes != pushes => {
                document.version += 1;
                document.text.clone_from(&text);
                document.pushes = pushes;
                document.after = after;
                self.server
                    .notify::<DidChangeTextDocument>(DidChangeTextDocumentParams {
                        text_document: VersionedTextDocumentIdentifier {
                            uri: uri.clone(),
                            version: document.version,
                        },
                        // No range: the whole text (valid whatever sync kind the server chose).
                        content_changes: vec![TextDocumentContentChangeEvent {
                            range: None,
                            range_length: None,
                            text,
                        }],
                    })
            }
            Some(_) => Ok(()),
        };
        sent.map_err(|e| self.shared.closed_error(&e.to_string()))?;
        let document = &documents[uri];
        Ok(Target {
            version: document.version,
            after: document.after,
        })
    }

    /// Waits until the diagnostics published for `uri` match `target`.
    async fn published_for(
        &self,
        uri: &Url,
        target: Target,
        deadline: Instant,
        wait: Duration,
    ) -> Result<Vec<Diagnostic>, String> {
        let mut publishes = self.shared.publishes.subscribe();
        let mut ended = self.shared.ended.subscribe();
        loop {
            publishes.borrow_and_update();
            if let Some(found) = lock(&self.shared.published).matching(&document_key(uri), target) {
                return Ok(found);
            }
            if let Some(why) = ended.borrow_and_update().clone() {
                return Err(why);
            }
            tokio::select! {
                _ = publishes.changed() => {}
                _ = ended.changed() => {}
                () = tokio::time::sleep_until(deadline) => {
                    return Err(format!(
                        "language server `{}` published no diagnostics for {} within {} ms",
                        self.shared.name,
                        uri,
                        wait.as_millis()
                    ));
                }
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
// State the main loop and the connection share

/// What the router's handlers and the connection's methods both see.
struct Shared {
    name: String,
    secrets: Vec<String>,
    folder_path: PathBuf,
    folder: WorkspaceFolder,
    /// The settings last pushed: `workspace/configuration` pulls are answered from these.
    settings: Mutex<serde_json::Value>,
    pushes: AtomicU64,
    published: Mutex<Published>,
    /// Bumped after every stored publish, to wake waiters.
    publishes: watch::Sender<u64>,
    documents: Mutex<HashMap<Url, Document>>,
    /// Why the connection ended (redacted), once it did: waiters stop waiting.
    ended: watch::Sender<Option<String>>,
    /// Set by `stop`: an exit from now on is expected, not reported.
    stopping: AtomicBool,
}

impl Shared {
    /// The answer to one `workspace/configuration` item: the value at the dotted `section` of
    /// the settings (the whole object for none or an empty one), `null` when it is missing.
    fn section(&self, section: Option<&str>) -> serde_json::Value {
        let settings = lock(&self.settings);
        let Some(section) = section.filter(|s| !s.is_empty()) else {
            return settings.clone();
        };
        section
            .split('.')
            .try_fold(&*settings, |at, key| at.get(key))
            .cloned()
            .unwrap_or(serde_json::Value::Null)
    }

    fn handle_notification(&self, notification: AnyNotification) {
        match notification.method.as_str() {
            PublishDiagnostics::METHOD => {
                match serde_json::from_value::<PublishDiagnosticsParams>(notification.params) {
                    Ok(params) => {
                        let seq = lock(&self.published).store(params);
                        self.publishes.send_replace(seq);
                    }
                    Err(e) => tracing::debug!(
                        server = %self.name,
                        "ignoring a malformed publishDiagnostics: {e}"
                    ),
                }
            }
            "window/logMessage" | "window/showMessage" => {
                let message = notification
                    .params
                    .get("message")
                    .and_then(serde_json::Value::as_str)
                    .unwrap_or_default();
                tracing::debug!(server = %self.name, "{}", redact_all(message, &self.secrets));
            }
            // Progress, telemetry, server-specific notifications: nothing to do.
            _ => {}
        }
    }

    fn closed_error(&self, cause: &str) -> String {
        self.ended
            .borrow()
            .clone()
            .unwrap_or_else(|| format!("language server `{}` is not running ({cause})", self.name))
    }
}

/// A std mutex guard; a poisoned lock still holds valid data here (plain values).
fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A document the server has open, as last sent.
struct Document {
    version: i32,
    text: String,
    /// `settings_pushes` when it was last sent.
    pushes: u64,
    /// The publish sequence number from which on a version-less publish counts for it.
    after: u64,
}

/// What a publish must match to answer for the current text of a document.
#[derive(Clone, Copy)]
struct Target {
    version: i32,
    after: u64,
}

/// The latest `publishDiagnostics` per document (by [`document_key`]).
#[derive(Default)]
struct Published {
    next_seq: u64,
    latest: HashMap<String, Publish>,
}

/// Which document a URI names: its file path where it has one, so a server that re-encodes
/// the URI it was sent (`%20` vs `%40`, ...) still matches.
fn document_key(uri: &Url) -> String {
    uri.to_file_path()
        .map(|path| path.to_string_lossy().into_owned())
        .unwrap_or_else(|()| uri.to_string())
}

struct Publish {
    seq: u64,
    version: Option<i32>,
    diagnostics: Vec<Diagnostic>,
}

impl Published {
    /// Keeps `params` as the latest publish of its document; returns the next sequence number.
    fn store(&mut self, params: PublishDiagnosticsParams) -> u64 {
        let publish = Publish {
            seq: self.next_seq,
            version: params.version,
            diagnostics: params.diagnostics,
        };
        self.latest.insert(document_key(&params.uri), publish);
        self.next_seq += 1;
        self.next_seq
    }

    fn matching(&self, key: &str, target: Target) -> Option<Vec<Diagnostic>> {
        let publish = self.latest.get(key)?;
        let current = match publish.version {
            Some(version) => version >= target.version,
            None => publish.seq >= target.after,
        };
        current.then(|| publish.diagnostics.clone())
    }
}

// ---------------------------------------------------------------------------------------------
// The client side of the protocol

/// The router's state: the shared view, and a socket that keeps the main loop's channel open
/// (async-lsp's loop panics if every sender is gone while it runs).
struct Client {
    shared: Arc<Shared>,
    _socket: ServerSocket,
}

/// Loop-back event that ends the main loop (after it flushed what was queued before it).
struct StopLoop;

fn client_router(shared: &Arc<Shared>, socket: ServerSocket) -> Router<Client> {
    let mut router = Router::new(Client {
        shared: shared.clone(),
        _socket: socket,
    });
    router
        .request::<WorkspaceConfiguration, _>(|client, params: ConfigurationParams| {
            let answers = params
                .items
                .iter()
                .map(|item| client.shared.section(item.section.as_deref()))
                .collect();
            std::future::ready(Ok(answers))
        })
        .request::<RegisterCapability, _>(|_, _| std::future::ready(Ok(())))
        .request::<UnregisterCapability, _>(|_, _| std::future::ready(Ok(())))
        .request::<WorkDoneProgressCreate, _>(|_, _| std::future::ready(Ok(())))
        .request::<WorkspaceFoldersRequest, _>(|client, ()| {
            std::future::ready(Ok(Some(vec![client.shared.folder.clone()])))
        })
        .unhandled_request(|_, request| {
            std::future::ready(Err(ResponseError::new(
                ErrorCode::METHOD_NOT_FOUND,
                format!("mcp-reconcile does not handle `{}`", request.method),
            )))
        })
        // async-lsp's default ends the loop on an unknown notification; servers send plenty
        // (telemetry, progress, their own extensions) that a client may ignore.
        .unhandled_notification(|client, notification| {
            client.shared.handle_notification(notification);
            ControlFlow::Continue(())
        })
        .event::<StopLoop>(|_, StopLoop| ControlFlow::Break(Ok(())))
        .unhandled_event(|_, _| ControlFlow::Continue(()));
    router
}

/// `initialize` with the answer kept as raw JSON: nothing in it is needed yet, and a capability
/// shape lsp-types 0.95 does not know must not fail the start.
enum InitializeRaw {}

impl lsp_types::request::Request for InitializeRaw {
    type Params = InitializeParams;
    type Result = serde_json::Value;
    const METHOD: &'static str = lsp_types::request::Initialize::METHOD;
}

/// `initialize` as SPEC §14.4 asks: process id, root URI, one workspace folder, the entry's
/// `initializationOptions`, and the capabilities the host uses.
fn initialize_params(start: &LspStart, folder_uri: Url) -> InitializeParams {
    let dynamic = Some(DynamicRegistrationClientCapabilities {
        dynamic_registration: Some(true),
    });
    let capabilities = ClientCapabilities {
        workspace: Some(WorkspaceClientCapabilities {
            configuration: Some(true),
            did_change_configuration: dynamic,
            workspace_folders: Some(true),
            ..Default::default()
        }),
        text_document: Some(TextDocumentClientCapabilities {
            synchronization: Some(TextDocumentSyncClientCapabilities {
                dynamic_registration: Some(true),
                ..Default::default()
            }),
            publish_diagnostics: Some(PublishDiagnosticsClientCapabilities {
                related_information: Some(true),
                version_support: Some(true),
                ..Default::default()
            }),
            hover: Some(HoverClientCapabilities {
                dynamic_registration: Some(true),
                content_format: Some(vec![MarkupKind::Markdown, MarkupKind::PlainText]),
            }),
            definition: Some(GotoCapability {
                dynamic_registration: Some(true),
                link_support: Some(false),
            }),
            references: dynamic,
            document_symbol: Some(DocumentSymbolClientCapabilities {
                dynamic_registration: Some(true),
                hierarchical_document_symbol_support: Some(true),
                ..Default::default()
            }),
            ..Default::default()
        }),
        window: Some(WindowClientCapabilities {
            work_done_progress: Some(true),
            ..Default::default()
        }),
        ..Default::default()
    };
    #[allow(deprecated)] // `root_path` is deprecated in the type, not sent (None).
    InitializeParams {
        process_id: Some(std::process::id()),
        root_path: None,
        root_uri: Some(folder_uri.clone()),
        initialization_options: start.initialization_options.clone(),
        capabilities,
        trace: None,
        workspace_folders: Some(vec![WorkspaceFolder {
            uri: folder_uri,
            name: folder_name(&start.workspace_folder),
        }]),
        client_info: Some(ClientInfo {
            name: "mcp-reconcile".to_owned(),
            version: Some(env!("CARGO_PKG_VERSION").to_owned()),
        }),
        locale: None,
        work_done_progress_params: Default::default(),
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
        Exited(String),
        LoopEnded(String),
        Stop,
        Dropped,
    }
    let ending = tokio::select! {
        status = process.exited() => Ending::Exited(status),
        ended = &mut main_loop => Ending::LoopEnded(match ended {
            Ok(Ok(())) => "closed the connection".to_owned(),
            Ok(Err(e)) => format!("broke the connection: {e}"),
            Err(e) => format!("lost its connection task: {e}"),
        }),
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
        Ending::Exited(what) | Ending::LoopEnded(what) => {
            main_loop.abort();
            process.stderr_settled(SETTLE).await;
            process.stop().await;
            (what, shared.stopping.load(Ordering::SeqCst))
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

// ---------------------------------------------------------------------------------------------
// Reading an entry

fn wrong(field: &str, expected: &str, found: &Value) -> String {
    format!(
        "field `{field}` must be {expected}, found {}",
        found.preview(40)
    )
}

/// A kernel value as serde_json sees it (whole numbers stay integers).
fn to_serde(value: &Value) -> serde_json::Value {
    serde_json::to_value(value).unwrap_or(serde_json::Value::Null)
}

/// A timeout field in ms, or `default_ms` when absent.
fn millis(value: Option<&Value>, field: &str, default_ms: u64) -> Result<Duration, String> {
    match value {
        None => Ok(Duration::from_millis(default_ms)),
        Some(Value::Number(ms)) if ms.is_finite() && *ms >= 0.0 => {
            Ok(Duration::from_millis(ms.min(1e12) as u64))
        }
        Some(other) => Err(wrong(field, "a non-negative number of milliseconds", other)),
    }
}

/// The workspace folder: `folder` resolved against the (absolute) project root, lexically
/// normalized, and required to stay inside it; the root itself when there is none.
fn resolve_folder(folder: Option<&str>, project_root: &Path) -> Result<PathBuf, String> {
    let root = std::path::absolute(project_root)
        .map(|root| normalized(&root))
        .map_err(|e| {
            format!(
                "the project root {} cannot be made absolute: {e}",
                project_root.display()
            )
        })?;
    let Some(folder) = folder else {
        return Ok(root);
    };
    let resolved = normalized(&root.join(folder));
    if resolved.starts_with(&root) {
        Ok(resolved)
    } else {
        Err(format!(
            "field `workspaceFolder` {} is outside the project root {}: use a folder inside the \
             project (relative paths are resolved against it)",
            Value::from(folder).to_json(),
            root.display()
        ))
    }
}

/// `path` without `.` components and with each `..` removing the component before it.
fn normalized(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                out.pop();
            }
            other => out.push(other),
        }
    }
    out
}

fn folder_name(folder: &Path) -> String {
    folder
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_else(|| folder.display().to_string())
}

/// The entry as the stdio spawner reads it: `command`, `args`, `env`, `cwd`.
fn process_config(start: &LspStart) -> Result<ServerConfig, String> {
    let cwd = start.workspace_folder.to_str().ok_or_else(|| {
        format!(
            "the workspace folder {} is not valid UTF-8",
            start.workspace_folder.display()
        )
    })?;
    let mut object = Object::new();
    object.insert("command".into(), start.command.as_str().into());
    object.insert(
        "args".into(),
        Value::Array(start.args.iter().map(|a| a.as_str().into()).collect()),
    );
    object.insert(
        "env".into(),
        Value::Object(
            start
                .env
                .iter()
                .map(|(k, v)| (k.clone(), Value::from(v.as_str())))
                .collect(),
        ),
    );
    object.insert("cwd".into(), cwd.into());
    Ok(ServerConfig::new(object))
}

/// `; stderr:` and the tail when there is one, else nothing.
fn with_stderr(tail: &str) -> String {
    if tail.trim().is_empty() {
        String::new()
    } else {
        format!("; stderr:\n{tail}")
    }
}
