//! The client side of the protocol: what the main loop answers and keeps (settings for pulls,
//! the latest diagnostics per document), shared with [`super::LspConnection`]; and the
//! `initialize` request.

use std::collections::HashMap;
use std::ops::ControlFlow;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, AtomicU64};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use async_lsp::router::Router;
use async_lsp::{AnyNotification, ErrorCode, ResponseError, ServerSocket};
use lsp_types::notification::{Notification as _, PublishDiagnostics};
use lsp_types::request::{
    RegisterCapability, UnregisterCapability, WorkDoneProgressCreate, WorkspaceConfiguration,
    WorkspaceFoldersRequest,
};
use lsp_types::{
    ClientCapabilities, ClientInfo, ConfigurationParams, Diagnostic,
    DocumentSymbolClientCapabilities, DynamicRegistrationClientCapabilities, GotoCapability,
    HoverClientCapabilities, InitializeParams, MarkupKind, PublishDiagnosticsClientCapabilities,
    PublishDiagnosticsParams, TextDocumentClientCapabilities, TextDocumentSyncClientCapabilities,
    Url, WindowClientCapabilities, WorkspaceClientCapabilities, WorkspaceFolder,
};
use tokio::sync::watch;

use super::start::folder_name;
use super::LspStart;
use crate::redact::redact_all;

/// What the router's handlers and the connection's methods both see.
pub(super) struct Shared {
    pub(super) name: String,
    pub(super) secrets: Vec<String>,
    pub(super) folder_path: PathBuf,
    /// The project root: documents are read only from inside it (after symlinks).
    pub(super) project_root: PathBuf,
    pub(super) folder: WorkspaceFolder,
    /// The settings last pushed: `workspace/configuration` pulls are answered from these.
    pub(super) settings: Mutex<serde_json::Value>,
    pub(super) pushes: AtomicU64,
    pub(super) published: Mutex<Published>,
    /// Bumped after every stored publish, to wake waiters.
    pub(super) publishes: watch::Sender<u64>,
    pub(super) documents: Mutex<HashMap<Url, Document>>,
    /// Why the connection ended (redacted), once it did: waiters stop waiting.
    pub(super) ended: watch::Sender<Option<String>>,
    /// Set by `stop`: an exit from now on is expected, not reported.
    pub(super) stopping: AtomicBool,
}

impl Shared {
    /// The answer to one `workspace/configuration` item: the value at the dotted `section` of
    /// the settings (the whole object for none or an empty one), `null` when it is missing.
    pub(super) fn section(&self, section: Option<&str>) -> serde_json::Value {
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

    pub(super) fn closed_error(&self, cause: &str) -> String {
        self.ended
            .borrow()
            .clone()
            .unwrap_or_else(|| format!("language server `{}` is not running ({cause})", self.name))
    }
}

/// A std mutex guard; a poisoned lock still holds valid data here (plain values).
pub(super) fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A document the server has open, as last sent.
pub(super) struct Document {
    /// The language id it was opened with.
    pub(super) language_id: String,
    pub(super) version: i32,
    pub(super) text: String,
    /// `settings_pushes` when it was last sent.
    pub(super) pushes: u64,
    /// The publish sequence number from which on a version-less publish counts for it.
    pub(super) after: u64,
}

/// What a publish must match to answer for the current text of a document.
#[derive(Clone, Copy)]
pub(super) struct Target {
    pub(super) version: i32,
    pub(super) after: u64,
}

/// The latest `publishDiagnostics` per document (by [`document_key`]).
#[derive(Default)]
pub(super) struct Published {
    pub(super) next_seq: u64,
    latest: HashMap<String, Publish>,
}

/// Which document a URI names: its file path where it has one, so a server that re-encodes
/// the URI it was sent (`%20` vs `%40`, ...) still matches.
pub(super) fn document_key(uri: &Url) -> String {
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
    pub(super) fn store(&mut self, params: PublishDiagnosticsParams) -> u64 {
        let publish = Publish {
            seq: self.next_seq,
            version: params.version,
            diagnostics: params.diagnostics,
        };
        self.latest.insert(document_key(&params.uri), publish);
        self.next_seq += 1;
        self.next_seq
    }

    pub(super) fn matching(&self, key: &str, target: Target) -> Option<Vec<Diagnostic>> {
        let publish = self.latest.get(key)?;
        let current = match publish.version {
            Some(version) => version >= target.version,
            None => publish.seq >= target.after,
        };
        current.then(|| publish.diagnostics.clone())
    }
}

/// The router's state: the shared view, and a socket that keeps the main loop's channel open
/// (async-lsp's loop panics if every sender is gone while it runs).
pub(super) struct Client {
    shared: Arc<Shared>,
    _socket: ServerSocket,
}

/// Loop-back event that ends the main loop (after it flushed what was queued before it).
pub(super) struct StopLoop;

pub(super) fn client_router(shared: &Arc<Shared>, socket: ServerSocket) -> Router<Client> {
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
pub(super) enum InitializeRaw {}

impl lsp_types::request::Request for InitializeRaw {
    type Params = InitializeParams;
    type Result = serde_json::Value;
    const METHOD: &'static str = lsp_types::request::Initialize::METHOD;
}

/// `initialize` as SPEC §14.4 asks: process id, root URI, one workspace folder, the entry's
/// `initializationOptions`, and the capabilities the host uses.
pub(super) fn initialize_params(start: &LspStart, folder_uri: Url) -> InitializeParams {
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

#[cfg(test)]
mod tests {
    use super::*;

    fn publish(uri: &Url, version: Option<i32>, count: usize) -> PublishDiagnosticsParams {
        PublishDiagnosticsParams {
            uri: uri.clone(),
            diagnostics: vec![Diagnostic::default(); count],
            version,
        }
    }

    #[test]
    fn a_publish_answers_the_text_it_was_made_for() {
        let uri = Url::parse("file:///p/a%20b.json").expect("url");
        let mut published = Published::default();
        assert_eq!(
            published.matching(
                &document_key(&uri),
                Target {
                    version: 1,
                    after: 0
                }
            ),
            None
        );

        // Without a version: any publish stored after the text was sent.
        published.store(publish(&uri, None, 2));
        let sent_at = published.next_seq;
        let key = document_key(&uri);
        assert_eq!(
            published
                .matching(
                    &key,
                    Target {
                        version: 1,
                        after: 0
                    }
                )
                .map(|d| d.len()),
            Some(2)
        );
        assert_eq!(
            published.matching(
                &key,
                Target {
                    version: 2,
                    after: sent_at
                }
            ),
            None
        );
        published.store(publish(&uri, None, 0));
        assert_eq!(
            published
                .matching(
                    &key,
                    Target {
                        version: 2,
                        after: sent_at
                    }
                )
                .map(|d| d.len()),
            Some(0)
        );

        // With a version: only that version (or a later one) counts, whenever it arrives.
        published.store(publish(&uri, Some(2), 3));
        assert_eq!(
            published.matching(
                &key,
                Target {
                    version: 3,
                    after: 0
                }
            ),
            None
        );
        published.store(publish(&uri, Some(3), 1));
        assert_eq!(
            published
                .matching(
                    &key,
                    Target {
                        version: 3,
                        after: u64::MAX
                    }
                )
                .map(|d| d.len()),
            Some(1)
        );

        // The same file under another spelling of its URI.
        let respelled = Url::parse("file:///p/a%20%62.json").expect("url");
        assert_ne!(respelled, uri);
        assert_eq!(document_key(&respelled), key);
    }
}
