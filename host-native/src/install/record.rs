//! What install wrote, and the bytes it replaced: a private directory per client under the
//! state directory (`$XDG_STATE_HOME/mcp-reconcile/install/<client>/`), with `record.json`
//! and a backup of every file's bytes each time an install run overwrote them (`<n>.orig`
//! for the original, `<n>.<k>.orig` for each later run). No backup is ever dropped while the
//! record lives: a second install keeps the first's original *and* backs up what it
//! overwrites itself.
//!
//! Whether uninstall may put a file's original back byte for byte is kept per file
//! ([`FileRecord::exact`]): only while every install run found the file exactly as the run
//! before left it. Once anything else changed it in between (the client's own `mcp add`, the
//! user), the original is stale and uninstall takes out only what install added.

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::Change;
use crate::inputs::Layout;

/// One file install changed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileRecord {
    /// The client's file.
    pub path: PathBuf,
    /// The backup of its original bytes (a file name in the record's directory); `None` when
    /// the file did not exist before install.
    pub backup: Option<String>,
    /// The digest of the text install last left in it.
    pub installed: String,
    /// Whether the original may be put back byte for byte: every install run found the file
    /// as the run before left it. A record written before this field existed cannot say, so
    /// it reads as `false` (uninstall then takes out only what install added).
    #[serde(default)]
    pub exact: bool,
    /// The backups of the bytes each later install run overwrote, oldest first.
    #[serde(default)]
    pub later: Vec<String>,
}

impl FileRecord {
    /// Whether uninstall may put the original back: nothing but install changed the file
    /// since the original was taken, and `now` is what install left in it.
    pub fn untouched_since_install(&self, now: Option<&str>) -> bool {
        self.exact && now.map(digest).as_ref() == Some(&self.installed)
    }
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
    pub fn dir_of(state_dir: &Path, client: Layout) -> PathBuf {
        state_dir.join("install").join(client.as_str())
    }

    /// The record of `client`, if it is installed.
    ///
    /// # Errors
    /// The record exists but cannot be read or parsed (it is never overwritten then).
    pub fn load(state_dir: &Path, client: Layout) -> anyhow::Result<Option<Record>> {
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

    /// The record an install run adds to: the earlier install's, else an empty one (nothing
    /// is written until [`Record::note`]).
    pub fn continue_or_start(state_dir: &Path, client: Layout, previous: Option<Record>) -> Record {
        previous.unwrap_or_else(|| Record {
            client: client.as_str().to_owned(),
            files: Vec::new(),
            dir: Record::dir_of(state_dir, client),
        })
    }

    /// Notes that `change` is about to be written: the bytes it overwrites are backed up and
    /// the record saved before the caller replaces a byte of the client's file.
    ///
    /// # Errors
    /// The private directory or a file in it cannot be written.
    pub fn note(&mut self, change: &Change) -> anyhow::Result<()> {
        crate::private::ensure_dir(&self.dir)?;
        let installed = digest(change.after.as_deref().unwrap_or_default());
        let index = match self.files.iter().position(|f| f.path == change.path) {
            Some(index) => index,
            None => {
                let backup = self.back_up(change, self.files.len(), None)?;
                self.files.push(FileRecord {
                    path: change.path.clone(),
                    backup,
                    installed,
                    exact: true,
                    later: Vec::new(),
                });
                return self.save();
            }
        };
        let run = self.files[index].later.len() + 1;
        let backup = self.back_up(change, index, Some(run))?;
        let file = &mut self.files[index];
        // The chain holds only while this run found what the last one left.
        file.exact &= change.before.as_deref().map(digest).as_ref() == Some(&file.installed);
        file.later.extend(backup);
        file.installed = installed;
        self.save()
    }

    /// Notes the client's files this run found as install needs them (nothing written): a
    /// file an earlier install set up, whose record is gone — say a client saved an old copy
    /// over an uninstall. Uninstall takes install's entries out of them too, and never puts
    /// bytes back (it has none). Nothing is saved unless the record already lists a file.
    ///
    /// # Errors
    /// The record cannot be written.
    pub fn note_found(&mut self, paths: &[PathBuf]) -> anyhow::Result<()> {
        if self.files.is_empty() {
            return Ok(());
        }
        let mut added = false;
        for path in paths {
            if self.files.iter().all(|f| &f.path != path) {
                self.files.push(FileRecord {
                    path: path.clone(),
                    backup: None,
                    installed: String::new(),
                    exact: false,
                    later: Vec::new(),
                });
                added = true;
            }
        }
        if added {
            self.save()?;
        }
        Ok(())
    }

    /// Keeps the bytes `change` overwrites (none when the file does not exist), as
    /// `<index>.orig` or, for a later run, `<index>.<run>.orig`.
    fn back_up(
        &self,
        change: &Change,
        index: usize,
        run: Option<usize>,
    ) -> anyhow::Result<Option<String>> {
        let Some(text) = &change.before else {
            return Ok(None);
        };
        let name = match run {
            None => format!("{index}.orig"),
            Some(run) => format!("{index}.{run}.orig"),
        };
        crate::approvals_store::write_atomic(&self.dir.join(&name), text.as_bytes())
            .with_context(|| format!("keeping the bytes of {}", change.path.display()))?;
        Ok(Some(name))
    }

    fn save(&self) -> anyhow::Result<()> {
        crate::approvals_store::write_atomic(
            &self.dir.join("record.json"),
            serde_json::to_string_pretty(self)?.as_bytes(),
        )
        .with_context(|| format!("writing the install record in {}", self.dir.display()))
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
        // A backup is a client's file as it was: `~/.claude.json` may be tens of MiB.
        crate::inputs::read_client_text(&path)
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
