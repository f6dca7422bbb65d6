//! Read once: the completeness check of settle detection reads and parses a changed file, and
//! the pass that follows needs the same text — [`Checked`] keeps each checked file's [`Text`]
//! (and its JSON) per source until the pass takes it, so a save costs one read and one parse,
//! not two of each.
//!
//! How the pass knows the file did not change since its check: the [`Stamp`] (device, inode,
//! length, modification and change times) of the file read at the check is compared with the
//! file's metadata when the pass loads it — a `stat`, not a read. A rename-save gives a new
//! inode, a write in place a new length or time, so a file changed after its check is read
//! afresh. (The scheduler also delivers another event for such a change, whose check replaces
//! the kept text; the stamp makes the pass right even when it runs before that event.)

use std::collections::HashMap;
use std::os::unix::fs::MetadataExt as _;
use std::path::Path;

use mcp_reconcile_kernel::json::{self, Value};
use mcp_reconcile_kernel::reload::FileSource;

/// Which version of a file was read: what a write in place or a rename changes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct Stamp {
    dev: u64,
    ino: u64,
    len: u64,
    mtime: (i64, i64),
    ctime: (i64, i64),
}

impl Stamp {
    /// The stamp of a file's metadata.
    pub(super) fn of(meta: &std::fs::Metadata) -> Self {
        Stamp {
            dev: meta.dev(),
            ino: meta.ino(),
            len: meta.len(),
            mtime: (meta.mtime(), meta.mtime_nsec()),
            ctime: (meta.ctime(), meta.ctime_nsec()),
        }
    }

    /// The stamp of the file at `path` now (symlinks followed, as a read follows them).
    fn at(path: &Path) -> Option<Self> {
        std::fs::metadata(path).ok().map(|meta| Stamp::of(&meta))
    }
}

/// The text of an input as read, and its JSON once parsed: parsed at most once, by whoever
/// asks first (the completeness check, or the pass).
pub(super) struct Text {
    text: String,
    value: Option<Value>,
}

impl Text {
    /// Text just read, not parsed yet.
    pub(super) fn new(text: String) -> Self {
        Text { text, value: None }
    }

    /// The text.
    pub(super) fn as_str(&self) -> &str {
        &self.text
    }

    /// Whether the text parses as JSON (comments allowed); the value is kept for
    /// [`Text::json`].
    pub(super) fn check(&mut self) -> bool {
        if self.value.is_none() {
            match parse(&self.text) {
                Ok(value) => self.value = Some(value),
                Err(_) => return false,
            }
        }
        true
    }

    /// The text's JSON (comments allowed): the value the check parsed (taken), else parsed
    /// now.
    pub(super) fn json(&mut self) -> Result<Value, json::ParseError> {
        match self.value.take() {
            Some(value) => Ok(value),
            None => parse(&self.text),
        }
    }
}

/// The one JSON parse of an input's text (counted in unit tests).
fn parse(text: &str) -> Result<Value, json::ParseError> {
    #[cfg(test)]
    counts::PARSES.with(|n| n.set(n.get() + 1));
    json::parse_jsonc(text)
}

/// The texts found complete since the last pass, per source, each with the [`Stamp`] of the
/// file it was read from.
#[derive(Default)]
pub(super) struct Checked(HashMap<FileSource, (Stamp, Text)>);

impl Checked {
    /// Keeps `text`, read from the file stamped `stamp`, for the pass that loads `source`.
    pub(super) fn keep(&mut self, source: FileSource, stamp: Stamp, text: Text) {
        self.0.insert(source, (stamp, text));
    }

    /// The text kept for `source` when it is exactly `text` (already parsed, if it was):
    /// the events of one save in place (its writes, then its close) are each checked, and all
    /// but the first find the same text.
    pub(super) fn same(&mut self, source: &FileSource, text: &str) -> Option<Text> {
        match self.0.remove(source) {
            Some((_, kept)) if kept.text == text => Some(kept),
            _ => None,
        }
    }

    /// The text kept for `source` (taken) when the file at `path` is still the one it was
    /// read from; `None` when nothing is kept or the file changed since (read it again).
    pub(super) fn take(&mut self, source: &FileSource, path: &Path) -> Option<Text> {
        let (stamp, text) = self.0.remove(source)?;
        (Stamp::at(path) == Some(stamp)).then_some(text)
    }
}

/// Reads and parses counted per thread, for the unit tests that prove a save costs one of
/// each.
#[cfg(test)]
pub(super) mod counts {
    use std::cell::Cell;

    thread_local! {
        /// Input files read (by the reloaders and the completeness check).
        pub(in crate::inputs) static READS: Cell<usize> = const { Cell::new(0) };
        /// Input texts parsed as JSON.
        pub(in crate::inputs) static PARSES: Cell<usize> = const { Cell::new(0) };
    }

    /// (reads, parses) so far on this thread, and both reset.
    pub(in crate::inputs) fn take() -> (usize, usize) {
        (READS.with(|n| n.replace(0)), PARSES.with(|n| n.replace(0)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A text's JSON is parsed once whether the check or the pass asks first, and a kept
    /// text is handed out only while its file is unchanged.
    #[test]
    fn a_kept_text_is_parsed_once_and_served_only_while_its_file_is_unchanged() {
        counts::take();
        let mut text = Text::new("{}".into());
        assert!(text.check() && text.check(), "checked twice");
        assert_eq!(text.json(), json::parse_jsonc("{}"));
        assert_eq!(counts::take().1, 1, "one parse for two checks and the read");
        assert!(!Text::new("{".into()).check(), "not JSON");

        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("f.json");
        std::fs::write(&path, "{}").expect("write");
        let stamp = Stamp::at(&path).expect("stamp");
        let source = FileSource::McpJson;
        let mut checked = Checked::default();
        checked.keep(source.clone(), stamp, Text::new("{}".into()));
        assert!(checked.take(&source, &path).is_some(), "unchanged: served");
        assert!(checked.take(&source, &path).is_none(), "taken once");
        checked.keep(source.clone(), stamp, Text::new("{}".into()));
        std::fs::write(&path, "{\"a\":1}").expect("write again");
        assert!(
            checked.take(&source, &path).is_none(),
            "changed: read again"
        );
    }
}
