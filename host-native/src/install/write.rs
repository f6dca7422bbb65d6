//! Writing a client's file the way the client expects: replaced atomically (a temporary file
//! beside it, renamed over it), through a symbolic link to the link's target so the link stays
//! a link, keeping the file's mode (a new file is 0600, a new directory 0700 whatever the
//! umask), and only if the file still holds the bytes the change was computed from — re-read
//! right before the rename, so a write another program made meanwhile is never overwritten
//! (the caller computes the change again).

use std::fs;
use std::io::Write as _;
use std::os::unix::fs::{OpenOptionsExt as _, PermissionsExt as _};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::Context as _;

use super::Change;

/// Links followed at most before giving up (as the kernel's `ELOOP`).
const MAX_LINKS: usize = 40;

/// What writing one change came to.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Written {
    /// The file now holds the change's text (or is removed).
    Done,
    /// The file no longer holds the text the change was computed from: nothing was written.
    Stale,
}

/// The file `path` names after every symbolic link on it is followed (a link to a missing file
/// names that file, which a write then creates). A relative link is taken from the link's own
/// directory.
///
/// # Errors
/// More than [`MAX_LINKS`] links in a row, or a link that cannot be read.
pub(super) fn target(path: &Path) -> anyhow::Result<PathBuf> {
    let mut at = path.to_path_buf();
    for _ in 0..MAX_LINKS {
        match fs::symlink_metadata(&at) {
            Ok(meta) if meta.file_type().is_symlink() => {
                let to = fs::read_link(&at).with_context(|| format!("reading {}", at.display()))?;
                at = match at.parent() {
                    Some(dir) => dir.join(to),
                    None => to,
                };
            }
            _ => return Ok(at),
        }
    }
    anyhow::bail!("{} is a loop of symbolic links", path.display())
}

/// Writes `change` unless the file changed since `change.before` was read; `before_rename`
/// runs once the new text is ready beside the file and the file is found unchanged, right
/// before the rename (install keeps its backup there).
///
/// # Errors
/// A file or directory cannot be read, written or removed, or `before_rename` fails (the file
/// is not touched then).
pub(super) fn write(
    change: &Change,
    before_rename: impl FnOnce() -> anyhow::Result<()>,
) -> anyhow::Result<Written> {
    let file = target(&change.path)?;
    let Some(text) = &change.after else {
        if super::read(&change.path)? != change.before {
            return Ok(Written::Stale);
        }
        before_rename()?;
        return remove(&change.path);
    };
    let dir = match file.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
        _ => PathBuf::from("."),
    };
    crate::private::create_dir(&dir)?;
    let mode = fs::metadata(&file)
        .map(|m| m.permissions().mode() & 0o7777)
        .unwrap_or(0o600);
    let tmp = temporary(&file, text, mode)?;
    let unchanged = || -> anyhow::Result<bool> { Ok(super::read(&change.path)? == change.before) };
    let outcome = (|| {
        if !unchanged()? {
            return Ok(Written::Stale);
        }
        before_rename()?;
        // Once more after the backup, which takes a while: the last read is the one right
        // before the rename.
        if !unchanged()? {
            return Ok(Written::Stale);
        }
        fs::rename(&tmp, &file).with_context(|| format!("writing {}", file.display()))?;
        Ok(Written::Done)
    })();
    if !matches!(outcome, Ok(Written::Done)) {
        let _ = fs::remove_file(&tmp);
    }
    if let Ok(d) = fs::File::open(&dir) {
        let _ = d.sync_all();
    }
    outcome
}

/// `text` in a new temporary file beside `file` with `mode`, flushed to disk.
fn temporary(file: &Path, text: &str, mode: u32) -> anyhow::Result<PathBuf> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let name = file.file_name().unwrap_or_default().to_string_lossy();
    let tmp = file.with_file_name(format!(
        ".{name}.{}.{}.tmp",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let written = (|| {
        let mut out = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?;
        out.set_permissions(fs::Permissions::from_mode(mode))?;
        out.write_all(text.as_bytes())?;
        out.sync_all()
    })();
    if let Err(e) = written {
        let _ = fs::remove_file(&tmp);
        return Err(e).with_context(|| format!("writing beside {}", file.display()));
    }
    Ok(tmp)
}

/// Removes a file install made (the path itself: a link is removed, not its target).
fn remove(path: &Path) -> anyhow::Result<Written> {
    match fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            Err(e).with_context(|| format!("removing {}", path.display()))
        }
        _ => Ok(Written::Done),
    }
}
