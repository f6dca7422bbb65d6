//! The language-server files (SPEC §14.1): the user's file and the project's `.lsp.json`, each
//! keeping its last good content when a reload fails; a broken entry is reported and skipped
//! while the others load.

use std::path::{Path, PathBuf};

use mcp_reconcile_kernel::json::{Object, Value};
use mcp_reconcile_kernel::lsp::{
    lsp_json_from_value, merge_lsp, LspParseOptions, LspScope, LspServers,
};
use mcp_reconcile_kernel::reload::FileSource;
use mcp_reconcile_kernel::Approvals;

use super::files::explain;
use super::files::kept_note;
use super::input_file::{InputFile, Kind, Reading};
use super::lsp_formats::{self, LspFormat};
use super::{InputError, Layout};

/// A language-server file of one scope, in one client's format.
#[derive(Debug)]
pub(super) struct Lsp {
    scope: LspScope,
    /// Whose format the file is read in (a file valid in two formats is read as the layout
    /// says, never guessed).
    format: LspFormat,
}

/// What a language-server file holds.
#[derive(Clone, Debug, Default)]
pub(super) struct LspContent {
    /// The entries in use (expanded, scope stamped).
    servers: Object<Object>,
    /// The entry errors of that content.
    entry_errors: Vec<String>,
    /// The same entries as written (`$VAR`s not expanded): what a review shows.
    written: Object<Object>,
}

impl Kind for Lsp {
    type Content = LspContent;

    fn empty(&self) -> LspContent {
        LspContent::default()
    }

    /// The user's file starts language servers without approval: one another user can write
    /// is not read (the last good content, read while it was private, stays).
    fn refused(&self, path: &Path) -> Option<String> {
        (self.scope == LspScope::User)
            .then(|| crate::private::foreign_writer(path))
            .flatten()
    }

    /// A missing language-server file has no entries at once (no grace period).
    fn holds(&self, _: &LspContent) -> bool {
        false
    }

    fn held(&self, _: &LspContent) -> Vec<String> {
        Vec::new()
    }

    /// A file that is not an object as a whole keeps what ran before (a half-written file
    /// must not stop every language server); entry errors only skip their entry.
    fn parse(&self, reading: Reading<'_, '_>) -> Result<LspContent, String> {
        let Reading {
            text,
            ctx,
            has_last_good,
            ..
        } = reading;
        let mut converted = Vec::new();
        let own = match explain(text.json(), text.as_str(), has_last_good)? {
            Value::Object(top) if self.format != LspFormat::Own => {
                lsp_formats::to_own(self.format, &top, &mut converted).map_err(|message| {
                    format!("{message} — fix it; {}", kept_note(has_last_good))
                })?
            }
            Value::Object(top) => top,
            other => {
                return Err(format!(
                    "must be a JSON object mapping server names to entries, found {} — fix it; {}",
                    other.preview(40),
                    kept_note(has_last_good)
                ))
            }
        };
        let options = LspParseOptions {
            env: Some(ctx.env),
            expand: ctx.expand,
            scope: Some(self.scope),
            project_root: Some(ctx.project_root),
        };
        let parsed = lsp_json_from_value(&own, options);
        let written = lsp_json_from_value(
            &own,
            LspParseOptions {
                env: None,
                expand: false,
                ..options
            },
        )
        .servers;
        converted.extend(parsed.errors);
        Ok(LspContent {
            servers: parsed.servers,
            entry_errors: converted,
            written,
        })
    }

    fn entry_errors<'a>(&self, g: &'a LspContent) -> Vec<&'a String> {
        g.entry_errors.iter().collect()
    }
}

/// One language-server file.
pub(super) type LspFile = InputFile<Lsp>;

impl LspFile {
    pub(super) fn new(path: PathBuf, scope: LspScope, layout: Layout) -> Self {
        let format = layout.spec().lsp;
        let source = FileSource::LspFile(scope.as_str().to_owned());
        InputFile::with(Lsp { scope, format }, path, Some(source))
    }

    /// The entries in use.
    pub(super) fn servers(&self) -> Object<Object> {
        self.content().servers
    }

    /// The entries in use as written.
    pub(super) fn written(&self) -> Object<Object> {
        self.content().written
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
