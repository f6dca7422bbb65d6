//! What install wrote, and the originals it replaced: a private directory per client under
//! the state directory (`$XDG_STATE_HOME/mcp-reconcile/install/<client>/`), with
//! `record.json` and one `<n>.orig` per file that existed. The originals are kept from the
//! first install; a second install only updates what was written.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::{Change, Client};

/// One file install changed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileRecord {
    /// The client's file.
    pub path: PathBuf,
    /// The backup of its original bytes (a file name in the record's directory); `None` when
    /// the file did not exist before install.
    pub backup: Option<String>,
    /// The digest of the text install left in it.
    pub installed: String,
}

/// What install did for one client.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Record {
    /// The client.
    pub client: String,
    /// The files it changed.
    pub files: Vec<FileRecord>,
    /// Where the record and the backups are.
    #[serde(skip)]
    pub dir: PathBuf,
}

/// The SHA-256 of `text`, as hex.
pub fn digest(text: &str) -> String {
    Sha256::digest(text.as_bytes())
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

impl Record {
    /// The record's directory for `client` under `state_dir`.
    pub fn dir_of(state_dir: &Path, client: Client) -> PathBuf {
        state_dir.join("install").join(client.as_str())
    }

    /// The record of `client`, if it is installed.
    ///
    /// # Errors
    /// The record exists but cannot be read or parsed (it is never overwritten then).
    pub fn load(state_dir: &Path, client: Client) -> anyhow::Result<Option<Record>> {
        let dir = Record::dir_of(state_dir, client);
        let path = dir.join("record.json");
        let Some(text) = crate::inputs::read_text(&path)
            .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?
        else {
            return Ok(None);
        };
        let mut record: Record = serde_json::from_str(&text).with_context(|| {
            format!(
                "{} is damaged; the originals are beside it — restore them by hand, then \
                 remove that directory",
                path.display()
            )
        })?;
        record.dir = dir;
        Ok(Some(record))
    }

    /// Saves what `changes` leave in the client's files, keeping the originals: those of
    /// `previous` (an earlier install), else the files' texts before `changes`.
    ///
    /// # Errors
    /// The private directory or a file in it cannot be written.
    pub fn save(
        state_dir: &Path,
        client: Client,
        changes: &[Change],
        previous: Option<&Record>,
    ) -> anyhow::Result<Record> {
        let dir = Record::dir_of(state_dir, client);
        crate::private::ensure_dir(&dir)?;
        let mut files = Vec::new();
        for (i, change) in changes.iter().enumerate() {
            let earlier = previous.and_then(|p| p.files.iter().find(|f| f.path == change.path));
            let backup = match (earlier, &change.before) {
                (Some(earlier), _) => earlier.backup.clone(),
                (None, Some(text)) => {
                    let name = format!("{i}.orig");
                    crate::approvals_store::write_atomic(&dir.join(&name), text.as_bytes())
                        .with_context(|| {
                            format!("keeping the original of {}", change.path.display())
                        })?;
                    Some(name)
                }
                (None, None) => None,
            };
            files.push(FileRecord {
                path: change.path.clone(),
                backup,
                installed: digest(change.after.as_deref().unwrap_or_default()),
            });
        }
        let record = Record {
            client: client.as_str().to_owned(),
            files,
            dir: dir.clone(),
        };
        crate::approvals_store::write_atomic(
            &dir.join("record.json"),
            serde_json::to_string_pretty(&record)?.as_bytes(),
        )?;
        Ok(record)
    }

    /// The original text of `file` (`None`: it did not exist).
    ///
    /// # Errors
    /// The backup cannot be read.
    pub fn original(&self, file: &FileRecord) -> anyhow::Result<Option<String>> {
        let Some(name) = &file.backup else {
            return Ok(None);
        };
        let path = self.dir.join(name);
        crate::inputs::read_text(&path)
            .map_err(|e| anyhow::anyhow!("{}: {e}", path.display()))?
            .map(Some)
            .with_context(|| format!("the original {} is missing", path.display()))
    }

    /// Removes the record and its backups (after a complete uninstall).
    ///
    /// # Errors
    /// The directory cannot be removed.
    pub fn remove(&self) -> anyhow::Result<()> {
        std::fs::remove_dir_all(&self.dir)
            .with_context(|| format!("removing {}", self.dir.display()))
    }
}
