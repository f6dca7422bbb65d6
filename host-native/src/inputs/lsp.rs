//! The language-server files (SPEC §14.1): the user's file and the project's `.lsp.json`, each
//! keeping its last good content when a reload fails; a broken entry is reported and skipped
//! while the others load.

use std::path::PathBuf;

use mcp_reconcile_kernel::json::{Object, Value};
use mcp_reconcile_kernel::lsp::{merge_lsp, parse_lsp_json, LspParseOptions, LspScope, LspServers};
use mcp_reconcile_kernel::reload::FileSource;
use mcp_reconcile_kernel::Approvals;

use super::files::{file_errors, kept_note, parse_or_explain, read_text};
use super::lsp_formats::{self, LspFormat};
use super::{InputError, Layout};

/// One language-server file.
#[derive(Debug)]
pub(super) struct LspFile {
    pub(super) path: PathBuf,
    scope: LspScope,
    /// Whose format the file is read in (a file valid in two formats is read as the layout
    /// says, never guessed).
    format: LspFormat,
    pub(super) loaded: bool,
    /// The entries in use (expanded, scope stamped) and the entry errors of that content.
    good: Option<(Object<Object>, Vec<String>)>,
    /// The same entries as written (`$VAR`s not expanded): what a review shows.
    written: Object<Object>,
    error: Option<String>,
}

impl LspFile {
    pub(super) fn new(path: PathBuf, scope: LspScope, layout: Layout) -> Self {
        LspFile {
            path,
            scope,
            format: match layout {
                Layout::Claude => LspFormat::ClaudePlugin,
                Layout::Copilot => LspFormat::Copilot,
                _ => LspFormat::Own,
            },
            loaded: false,
            good: None,
            written: Object::new(),
            error: None,
        }
    }

    /// How a change of this file is reported.
    pub(super) fn source(&self) -> FileSource {
        FileSource::LspFile(self.scope.as_str().to_owned())
    }

    /// Reads the file again: a missing file has no entries; an unreadable file, or one that
    /// is not a JSON object, keeps the last good content.
    pub(super) fn reload(&mut self, env: &Object, expand: bool, project_root: &str) {
        self.loaded = true;
        // The user's file starts language servers without approval: one another user can
        // write is not read (the last good content, read while it was private, stays).
        if self.scope == LspScope::User {
            if let Some(why) = crate::private::foreign_writer(&self.path) {
                self.error = Some(format!("{why}; {}", kept_note(self.good.is_some())));
                return;
            }
        }
        let mut text = match read_text(&self.path) {
            Ok(Some(text)) => text,
            Ok(None) => {
                self.good = Some((Object::new(), Vec::new()));
                self.written = Object::new();
                self.error = None;
                return;
            }
            Err(e) => {
                self.error = Some(format!("{e}; {}", kept_note(self.good.is_some())));
                return;
            }
        };
        // A file that is not an object as a whole keeps what ran before (a half-written file
        // must not stop every language server); entry errors only skip their entry.
        let mut converted = Vec::new();
        match parse_or_explain(&text, self.good.is_some()) {
            Ok(Value::Object(top)) if self.format != LspFormat::Own => {
                match lsp_formats::to_own(self.format, &top, &mut converted) {
                    Ok(own) => text = own,
                    Err(message) => {
                        self.error = Some(format!(
                            "{message} — fix it; {}",
                            kept_note(self.good.is_some())
                        ));
                        return;
                    }
                }
            }
            Ok(Value::Object(_)) => {}
            Ok(other) => {
                self.error = Some(format!(
                    "must be a JSON object mapping server names to entries, found {} — fix it; {}",
                    other.preview(40),
                    kept_note(self.good.is_some())
                ));
                return;
            }
            Err(message) => {
                self.error = Some(message);
                return;
            }
        }
        let options = LspParseOptions {
            env: Some(env),
            expand,
            scope: Some(self.scope),
            project_root: Some(project_root),
        };
        let parsed = parse_lsp_json(&text, options);
        self.written = parse_lsp_json(
            &text,
            LspParseOptions {
                env: None,
                expand: false,
                ..options
            },
        )
        .servers;
        converted.extend(parsed.errors);
        self.good = Some((parsed.servers, converted));
        self.error = None;
    }

    /// The entries in use.
    pub(super) fn servers(&self) -> Object<Object> {
        self.good
            .as_ref()
            .map(|(servers, _)| servers.clone())
            .unwrap_or_default()
    }

    /// The entries in use as written.
    pub(super) fn written(&self) -> Object<Object> {
        self.written.clone()
    }

    pub(super) fn errors(&self) -> Vec<InputError> {
        let entry_errors = self.good.iter().flat_map(|(_, e)| e.iter());
        file_errors(&self.path, self.error.as_ref(), entry_errors)
    }
}

/// The desired language servers of `user` under `project` (and as written), with the ones a
/// client's files add (`extra`, in their scope), the language-server approvals, and their
/// problems added to `errors`.
pub(super) fn lsp_part(
    user: Option<&LspFile>,
    project: &LspFile,
    extra: &[super::clients::PluginLsp],
    approvals: Option<&(Approvals, Vec<String>)>,
    store_path: &std::path::Path,
    errors: &mut Vec<InputError>,
) -> (LspServers, LspServers, Approvals) {
    for file in user.into_iter().chain([project]) {
        errors.extend(file.errors());
    }
    let layer = |file: Option<&LspFile>, scope: LspScope, written: bool| {
        let mut servers = match (file, written) {
            (Some(file), false) => file.servers(),
            (Some(file), true) => file.written(),
            (None, _) => Object::new(),
        };
        for (_, used, as_written) in extra.iter().filter(|(s, _, _)| *s == scope) {
            servers.extend(if written { as_written } else { used }.clone());
        }
        servers
    };
    let servers = merge_lsp(
        &layer(user, LspScope::User, false),
        &layer(Some(project), LspScope::Project, false),
    );
    let written = merge_lsp(
        &layer(user, LspScope::User, true),
        &layer(Some(project), LspScope::Project, true),
    );
    let (approvals, problems) = approvals
        .cloned()
        .unwrap_or_else(|| (Approvals::empty(), Vec::new()));
    errors.extend(problems.into_iter().map(|problem| InputError {
        file: store_path.to_path_buf(),
        message: format!(
            "{problem} — every language server from .lsp.json stays pending until it is fixed; \
             repair or delete the file (the next approval keeps a copy as .bak)"
        ),
    }));
    (servers, written, approvals)
}
