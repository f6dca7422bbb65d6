//! The pinned definitions file (issue 40): `tool-pins.json` beside the approvals file, private
//! (0600, its directory 0700), written as the approvals file is — a locked read-modify-write
//! that replaces the file atomically.
//!
//! `{"version": 1, "servers": {"<connection id>": {"server": NAME, "baseline": LISTS,
//! "pending": LISTS}}}` where `LISTS` is `{"tools": {NAME: ITEM}, "prompts": {NAME: ITEM}}` and
//! `ITEM` is `{"digest": "pin1:<sha256>", "definition": <the item as listed>}`. The baseline is
//! what was approved; `pending` is what a session saw change since and withholds (or warns
//! of), kept so that `mcp-reconcile review-tools` can show the difference without connecting.
//!
//! Fail closed: a file that cannot be read or parsed is an error for every reader, which then
//! treats every enforced server's items as waiting; a session never rewrites such a file (it
//! would drop every baseline). Only the review, a person's decision, replaces it, after keeping
//! the damaged bytes as `<file>.bak`.

use std::collections::BTreeMap;
use std::fs;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};

use anyhow::Context;
use serde::{Deserialize, Serialize};

use crate::approvals_store::{lock_dir, read_bounded, write_atomic};

/// The file's name, in the approvals file's directory.
pub const FILE_NAME: &str = "tool-pins.json";

/// The pins file beside `approvals`.
pub fn pins_path(approvals: &Path) -> PathBuf {
    match approvals.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.join(FILE_NAME),
        _ => PathBuf::from(FILE_NAME),
    }
}

/// One pinned tool or prompt.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Item {
    /// [`mcp_reconcile_kernel::pin::tool_digest`] or `prompt_digest`.
    pub digest: String,
    /// The item as the server listed it (for the review's diff).
    pub definition: serde_json::Value,
}

/// Tools and prompts by the server's own names.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Lists {
    /// Tools.
    #[serde(default)]
    pub tools: BTreeMap<String, Item>,
    /// Prompts.
    #[serde(default)]
    pub prompts: BTreeMap<String, Item>,
    /// Skills (SEP-2640) by the URI of their `SKILL.md`. `None` in a baseline recorded before
    /// skills were pinned: the next listing's skills become its skills' baseline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skills: Option<BTreeMap<String, Item>>,
}

impl Lists {
    /// Whether every list is empty.
    pub fn is_empty(&self) -> bool {
        self.tools.is_empty()
            && self.prompts.is_empty()
            && self.skills.as_ref().is_none_or(BTreeMap::is_empty)
    }
}

/// One connection identity's pins.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Pinned {
    /// The server's name when it was pinned.
    pub server: String,
    /// What was approved.
    pub baseline: Lists,
    /// What changed or is new since, as last seen.
    #[serde(default, skip_serializing_if = "Lists::is_empty")]
    pub pending: Lists,
}

/// The whole file.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PinsFile {
    /// Format version, 1.
    pub version: u32,
    /// By connection id.
    #[serde(default)]
    pub servers: BTreeMap<String, Pinned>,
}

/// The pins file of a session or of the review.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PinsStore {
    path: PathBuf,
}

impl PinsStore {
    /// A store at `path` (which need not exist).
    pub fn new(path: PathBuf) -> Self {
        PinsStore { path }
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Reads the file: missing is empty.
    ///
    /// # Errors
    /// An unreadable or malformed file (fail closed: see the module docs).
    pub fn load(&self) -> Result<PinsFile, String> {
        match read_bounded(&self.path) {
            Ok(bytes) => parse(&bytes).map_err(|e| {
                format!(
                    "the pinned tools file {} is damaged ({e}); every pinned server's tools wait \
                     for review",
                    self.path.display()
                )
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(PinsFile::default()),
            Err(e) => Err(format!(
                "cannot read the pinned tools file {}: {e}",
                self.path.display()
            )),
        }
    }

    /// Changes the file under its directory's lock: `change` gets what it holds now and says
    /// whether it changed it (nothing is written otherwise).
    ///
    /// # Errors
    /// When the directory cannot be made or locked, or the file cannot be read or written.
    /// A damaged file is an error unless `replace_damaged` (the review only): then its bytes are
    /// kept as `<file>.bak` and `change` starts from an empty file.
    pub fn update(
        &self,
        replace_damaged: bool,
        change: impl FnOnce(&mut PinsFile) -> bool,
    ) -> anyhow::Result<()> {
        let dir = match self.path.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
            _ => PathBuf::from("."),
        };
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .with_context(|| format!("cannot create {}", dir.display()))?;
        let _lock = lock_dir(&dir)?;
        let mut file = match read_bounded(&self.path) {
            Ok(bytes) => match parse(&bytes) {
                Ok(file) => file,
                Err(_) if replace_damaged => {
                    let bak = self.path.with_extension("json.bak");
                    write_atomic(&bak, &bytes)
                        .with_context(|| format!("cannot keep a copy at {}", bak.display()))?;
                    PinsFile::default()
                }
                Err(e) => anyhow::bail!(
                    "the pinned tools file {} is damaged ({e}); left unchanged",
                    self.path.display()
                ),
            },
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => PinsFile::default(),
            Err(e) => return Err(e).context(format!("cannot read {}", self.path.display())),
        };
        if !change(&mut file) {
            return Ok(());
        }
        file.version = 1;
        let mut text = serde_json::to_string_pretty(&file)?;
        text.push('\n');
        write_atomic(&self.path, text.as_bytes())
            .with_context(|| format!("cannot write {}", self.path.display()))
    }
}

/// Parses the file's bytes.
fn parse(bytes: &[u8]) -> Result<PinsFile, String> {
    let file: PinsFile = serde_json::from_slice(bytes).map_err(|e| e.to_string())?;
    if file.version != 1 {
        return Err(format!("unknown version {}", file.version));
    }
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_damaged_file_fails_closed_and_only_the_review_replaces_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = PinsStore::new(dir.path().join(FILE_NAME));
        assert_eq!(store.load(), Ok(PinsFile::default()));
        fs::write(store.path(), b"{not json").expect("write");
        assert!(store.load().is_err());
        assert!(store.update(false, |_| true).is_err());
        assert_eq!(fs::read(store.path()).expect("read"), b"{not json");
        store
            .update(true, |file| {
                file.servers.insert("s:1".into(), Pinned::default());
                true
            })
            .expect("review replaces");
        assert_eq!(store.load().expect("load").servers.len(), 1);
        let bak = fs::read(dir.path().join("tool-pins.json.bak")).expect("backup");
        assert_eq!(bak, b"{not json");
        use std::os::unix::fs::PermissionsExt;
        let mode = fs::metadata(store.path())
            .expect("meta")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
    }
}
