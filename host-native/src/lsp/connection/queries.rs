//! [`LspHandle`]: what other tasks (a gateway) ask a running language server — documents
//! synced from disk, then diagnostics, hover, definition, references and document symbols.

use std::path::Path;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::Duration;

use async_lsp::ServerSocket;
use lsp_types::notification::{DidChangeTextDocument, DidOpenTextDocument};
use lsp_types::request::{DocumentSymbolRequest, GotoDefinition, HoverRequest, References};
use lsp_types::{
    Diagnostic, DidChangeTextDocumentParams, DidOpenTextDocumentParams, DocumentSymbolParams,
    DocumentSymbolResponse, GotoDefinitionParams, GotoDefinitionResponse, Hover, HoverParams,
    Location, PartialResultParams, Position, ReferenceContext, ReferenceParams,
    TextDocumentContentChangeEvent, TextDocumentIdentifier, TextDocumentItem,
    TextDocumentPositionParams, Url, VersionedTextDocumentIdentifier, WorkDoneProgressParams,
};
use tokio::time::Instant;

use super::client::{document_key, lock, Document, Shared, Target};
use crate::inputs::clean;
use crate::lsp::confined::read_in_project;

/// How long a query (hover, definition, …) may take.
const QUERY_TIMEOUT: Duration = Duration::from_secs(30);

/// Queries one running language server from any task. Cheap to clone; it does not keep the
/// server running: once the connection is stopped, a query fails at once.
#[derive(Clone)]
pub struct LspHandle {
    pub(super) shared: Arc<Shared>,
    pub(super) server: ServerSocket,
}

impl std::fmt::Debug for LspHandle {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LspHandle")
            .field("server", &self.shared.name)
            .finish_non_exhaustive()
    }
}

impl LspHandle {
    /// See [`LspConnection::diagnostics`](super::LspConnection::diagnostics).
    ///
    /// # Errors
    /// The file cannot be read, nothing was published within `wait`, or the connection closed.
    pub async fn diagnostics(
        &self,
        path: &Path,
        language_id: &str,
        wait: Duration,
    ) -> Result<Vec<Diagnostic>, String> {
        let deadline = Instant::now() + wait;
        let (uri, target) = self.open(path, language_id)?;
        self.published_for(&uri, target, deadline, wait).await
    }

    /// Hover at `position` (0-based, as LSP counts) in the file at `path`.
    ///
    /// # Errors
    /// The file cannot be read, the server failed or did not answer in time.
    pub async fn hover(
        &self,
        path: &Path,
        language_id: &str,
        position: Position,
    ) -> Result<Option<Hover>, String> {
        let (uri, _) = self.open(path, language_id)?;
        let params = HoverParams {
            text_document_position_params: at(uri, position),
            work_done_progress_params: WorkDoneProgressParams::default(),
        };
        self.ask::<HoverRequest>(params).await
    }

    /// Where the symbol at `position` is defined.
    ///
    /// # Errors
    /// As [`LspHandle::hover`].
    pub async fn definition(
        &self,
        path: &Path,
        language_id: &str,
        position: Position,
    ) -> Result<Option<GotoDefinitionResponse>, String> {
        let (uri, _) = self.open(path, language_id)?;
        let params = GotoDefinitionParams {
            text_document_position_params: at(uri, position),
            work_done_progress_params: WorkDoneProgressParams::default(),
            partial_result_params: PartialResultParams::default(),
        };
        self.ask::<GotoDefinition>(params).await
    }

    /// Every reference to the symbol at `position`, its declaration included.
    ///
    /// # Errors
    /// As [`LspHandle::hover`].
    pub async fn references(
        &self,
        path: &Path,
        language_id: &str,
        position: Position,
    ) -> Result<Option<Vec<Location>>, String> {
        let (uri, _) = self.open(path, language_id)?;
        let params = ReferenceParams {
            text_document_position: at(uri, position),
            work_done_progress_params: WorkDoneProgressParams::default(),
            partial_result_params: PartialResultParams::default(),
            context: ReferenceContext {
                include_declaration: true,
            },
        };
        self.ask::<References>(params).await
    }

    /// The symbols of the file at `path`.
    ///
    /// # Errors
    /// As [`LspHandle::hover`].
    pub async fn document_symbols(
        &self,
        path: &Path,
        language_id: &str,
    ) -> Result<Option<DocumentSymbolResponse>, String> {
        let (uri, _) = self.open(path, language_id)?;
        let params = DocumentSymbolParams {
            text_document: TextDocumentIdentifier { uri },
            work_done_progress_params: WorkDoneProgressParams::default(),
            partial_result_params: PartialResultParams::default(),
        };
        self.ask::<DocumentSymbolRequest>(params).await
    }

    /// The documents this server has open: `(path, language id)`, to open again on the
    /// process that replaces it.
    pub fn open_documents(&self) -> Vec<(std::path::PathBuf, String)> {
        lock(&self.shared.documents)
            .iter()
            .filter_map(|(uri, document)| {
                Some((uri.to_file_path().ok()?, document.language_id.clone()))
            })
            .collect()
    }

    /// Opens the file at `path` as it is on disk now (or sends its new text) and returns at
    /// once; the read is bounded and never waits (a FIFO or a huge file is refused).
    ///
    /// # Errors
    /// The file cannot be read, or the connection closed.
    pub fn open_document(&self, path: &Path, language_id: &str) -> Result<(), String> {
        self.open(path, language_id).map(|_| ())
    }

    /// Reads `path` (relative to the workspace folder) and opens it, or sends its new text when
    /// it changed on disk (or settings were pushed) since it was last sent. The read is bounded
    /// and never waits, like every read of a repository's file (a FIFO or a huge file is
    /// refused), and confined to the project: a file that leads outside it through a symbolic
    /// link is refused ([`crate::lsp::confined`]). The server is told the resolved path.
    fn open(&self, path: &Path, language_id: &str) -> Result<(Url, Target), String> {
        let path = clean(&self.shared.folder_path.join(path));
        let (path, text) = read_in_project(&self.shared.project_root, &path)?;
        let uri = Url::from_file_path(&path)
            .map_err(|()| format!("{} is not a file path", path.display()))?;
        let target = self.sync(&uri, language_id, text)?;
        Ok((uri, target))
    }

    /// One request, bounded by [`QUERY_TIMEOUT`]; errors name the server.
    async fn ask<R: lsp_types::request::Request>(
        &self,
        params: R::Params,
    ) -> Result<R::Result, String> {
        let name = &self.shared.name;
        match tokio::time::timeout(QUERY_TIMEOUT, self.server.request::<R>(params)).await {
            Ok(Ok(result)) => Ok(result),
            Ok(Err(e)) => Err(format!(
                "language server `{name}` answered {}: {e}",
                R::METHOD
            )),
            Err(_) => Err(format!(
                "language server `{name}` did not answer {} within {} s",
                R::METHOD,
                QUERY_TIMEOUT.as_secs()
            )),
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
                    language_id: language_id.to_owned(),
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

fn at(uri: Url, position: Position) -> TextDocumentPositionParams {
    TextDocumentPositionParams {
        text_document: TextDocumentIdentifier { uri },
        position,
    }
}
