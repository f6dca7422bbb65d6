//! [`InputFile`]: one input file — settings, `.mcp.json` / `--mcp-config`, a client's own file,
//! a language-server file — with what every input has (path, source, last good content,
//! missing state, error) and one reload and one completeness path; its [`Kind`] says only how
//! its text becomes content (and the few ways kinds differ in reading: size bound, who may
//! have written it, whether a vanished file is held).
//!
//! Rules every kind keeps: a read is bounded and never waits ([`read_stamped`]); a file that
//! fails to load keeps its **last good content** and says so; a file that had content and
//! goes missing is held for [`MISSING_GRACE`](super::MISSING_GRACE) (kinds that
//! [`Kind::holds`] something); a file found complete and unchanged since is not read again
//! (`checked`).

use std::path::{Path, PathBuf};

use mcp_reconcile_kernel::reload::FileSource;

use super::checked::{Checked, Stamp, Text};
use super::files::{held_note, kept_note, read_opened_within, Missing};
use super::{InputError, LoadCtx};

/// What [`Kind::parse`] reads: the file's path and text (its JSON parsed at most once), the
/// load's context, and whether the last good content stays in use when this text fails.
pub(super) struct Reading<'a, 'c> {
    pub(super) path: &'a Path,
    pub(super) text: &'a mut Text,
    pub(super) ctx: &'a LoadCtx<'c>,
    pub(super) has_last_good: bool,
}

/// What is particular to one kind of input file: how its text becomes content.
pub(super) trait Kind {
    /// What the file holds, parsed.
    type Content: Clone;

    /// What a missing file (or one that expired) holds.
    fn empty(&self) -> Self::Content;

    /// The most bytes read of it.
    fn limit(&self) -> u64 {
        super::MAX_INPUT_BYTES
    }

    /// Why the file at `path` is not read now (another user could have written it), checked
    /// before every read; the last good content stays.
    fn refused(&self, path: &Path) -> Option<String>;

    /// Whether `content` is worth holding when the file goes missing (its servers would
    /// stop): kinds without a grace period say `false`.
    fn holds(&self, content: &Self::Content) -> bool;

    /// The servers `content` held (what stops when a held file expires).
    fn held(&self, content: &Self::Content) -> Vec<String>;

    /// The error a missing file shows (none: missing reads as empty).
    fn missing_error(&self) -> Option<String> {
        None
    }

    /// The text of an input that is no file (an inline `--mcp-config`).
    fn inline(&self) -> Option<&str> {
        None
    }

    /// `text`, read from `path`, as content, or the whole message for the user (with what
    /// stays in use, [`kept_note`] of `has_last_good`).
    fn parse(&self, reading: Reading<'_, '_>) -> Result<Self::Content, String>;

    /// Whether `text` parses in this kind's format (settle detection); a JSON parse stays in
    /// `text` for the pass.
    fn complete(&self, text: &mut Text) -> bool {
        text.check()
    }

    /// The problems of single entries in `content` (the rest of the file is used).
    fn entry_errors<'a>(&self, content: &'a Self::Content) -> Vec<&'a String>;
}

/// One input file of kind `K` and what was last loaded from it.
#[derive(Debug)]
pub(super) struct InputFile<K: Kind> {
    /// What is particular to its kind.
    pub(super) kind: K,
    /// Where it is read from (what errors name: an inline `--mcp-config` has a label).
    pub(super) path: PathBuf,
    /// How a change of it is reported (`None`: it never changes).
    pub(super) source: Option<FileSource>,
    /// Loaded at least once.
    pub(super) loaded: bool,
    /// The last good content (`None` until one loaded).
    pub(super) good: Option<K::Content>,
    /// Why the last load failed (the last good content stays).
    pub(super) error: Option<String>,
    /// Held or expired while missing.
    pub(super) missing: Missing,
}

impl<K: Kind> InputFile<K> {
    /// A file not loaded yet.
    pub(super) fn with(kind: K, path: PathBuf, source: Option<FileSource>) -> Self {
        InputFile {
            kind,
            path,
            source,
            loaded: false,
            good: None,
            error: None,
            missing: Missing::No,
        }
    }

    /// The content in use: the last good one, or empty.
    pub(super) fn content(&self) -> K::Content {
        self.good.clone().unwrap_or_else(|| self.kind.empty())
    }

    /// The problems of the file as the user sees them: its load error, then its entry errors.
    pub(super) fn errors(&self) -> Vec<InputError> {
        let entry_errors = self.good.iter().flat_map(|g| self.kind.entry_errors(g));
        self.error
            .iter()
            .chain(entry_errors)
            .map(|message| InputError {
                file: self.path.clone(),
                message: message.clone(),
            })
            .collect()
    }

    /// The text to load: the inline text, the one its completeness check read when the file
    /// has not changed since, or read now. `Err` ends the reload (the error is set).
    fn text(&mut self, checked: &mut Checked) -> Result<Text, ()> {
        if let Some(text) = self.kind.inline() {
            return Ok(Text::new(text.to_owned()));
        }
        let has_last_good = self.good.is_some();
        if let Some(why) = self.kind.refused(&self.path) {
            self.error = Some(format!("{why}; {}", kept_note(has_last_good)));
            return Err(());
        }
        let kept = self
            .source
            .as_ref()
            .and_then(|s| checked.take(s, &self.path));
        let read = match kept {
            Some(text) => Ok(Some(text)),
            None => read_stamped(&self.path, self.kind.limit()).map(|r| r.map(|(t, _)| t)),
        };
        match read {
            Ok(Some(text)) => {
                self.missing = Missing::No;
                Ok(text)
            }
            Ok(None) => {
                let had_content = self.good.as_ref().is_some_and(|g| self.kind.holds(g));
                if had_content && self.missing != Missing::Expired {
                    self.missing = Missing::Held;
                    self.error = Some(held_note());
                } else {
                    self.good = Some(self.kind.empty());
                    self.error = self.kind.missing_error();
                }
                Err(())
            }
            Err(e) => {
                self.error = Some(format!("{e}; {}", kept_note(has_last_good)));
                Err(())
            }
        }
    }
}

/// What the engine of [`Inputs`](super::Inputs) does with any input file, whatever its kind.
pub(super) trait Input {
    /// How a change of it is reported.
    fn source(&self) -> Option<&FileSource>;
    /// Where it is read from.
    fn path(&self) -> &Path;
    /// Loaded at least once.
    fn loaded(&self) -> bool;
    /// Reads the file again (or takes its checked text) and parses it; a failure keeps the
    /// last good content and sets the error.
    fn reload(&mut self, ctx: &LoadCtx<'_>, checked: &mut Checked);
    /// Whether the file is complete now (exists, not empty, parses); what it read and parsed
    /// is kept in `checked` for the pass.
    fn complete(&self, checked: &mut Checked) -> bool;
    /// Held or expired while missing.
    fn missing(&self) -> Missing;
    /// Gives up on a held missing file: from now on it reads as empty. The servers it held.
    fn expire_missing(&mut self) -> Option<Vec<String>>;
}

impl<K: Kind> Input for InputFile<K> {
    fn source(&self) -> Option<&FileSource> {
        self.source.as_ref()
    }

    fn path(&self) -> &Path {
        &self.path
    }

    fn loaded(&self) -> bool {
        self.loaded
    }

    fn reload(&mut self, ctx: &LoadCtx<'_>, checked: &mut Checked) {
        self.loaded = true;
        let Ok(mut text) = self.text(checked) else {
            return;
        };
        match self.kind.parse(Reading {
            path: &self.path,
            text: &mut text,
            ctx,
            has_last_good: self.good.is_some(),
        }) {
            Ok(content) => {
                self.good = Some(content);
                self.error = None;
            }
            Err(message) => self.error = Some(message),
        }
    }

    fn complete(&self, checked: &mut Checked) -> bool {
        let Some(source) = self.source.clone() else {
            return false;
        };
        let Ok(Some((text, stamp))) = read_stamped(&self.path, self.kind.limit()) else {
            return false;
        };
        if text.as_str().trim().is_empty() {
            return false;
        }
        let mut text = checked.same(&source, text.as_str()).unwrap_or(text);
        let complete = self.kind.complete(&mut text);
        if complete {
            checked.keep(source, stamp, text);
        }
        complete
    }

    fn missing(&self) -> Missing {
        self.missing
    }

    fn expire_missing(&mut self) -> Option<Vec<String>> {
        if self.missing != Missing::Held {
            return None;
        }
        self.missing = Missing::Expired;
        self.error = None;
        let held = self.good.replace(self.kind.empty());
        Some(held.map(|g| self.kind.held(&g)).unwrap_or_default())
    }
}

/// Reads an input file as every reloader does: bounded by `limit`, never waiting, regular
/// files only (see [`read_text`](super::read_text)); `None` when it does not exist. With the
/// [`Stamp`] of the file read.
pub(super) fn read_stamped(path: &Path, limit: u64) -> Result<Option<(Text, Stamp)>, String> {
    #[cfg(test)]
    super::checked::counts::READS.with(|n| n.set(n.get() + 1));
    let Some(file) = super::files::open_input(path)? else {
        return Ok(None);
    };
    let stamp = file
        .metadata()
        .map(|meta| Stamp::of(&meta))
        .map_err(|e| format!("cannot read it: {e}"))?;
    read_opened_within(file, limit).map(|text| Some((Text::new(text), stamp)))
}
