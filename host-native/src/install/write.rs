//! Writing a client's file the way the client expects: replaced atomically (a temporary file
//! beside it, renamed over it), through a symbolic link to the link's target so the link stays
//! a link, keeping the file's mode (a new file is 0600, a new directory 0700 whatever the
//! umask), and only if the file still holds the bytes the change was computed from — re-read
//! right before the rename, so a write another program made meanwhile is never overwritten
//! (the caller computes the change again).

use std::fs;
use std::os::unix::fs::PermissionsExt as _;
use std::path::{Path, PathBuf};

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
    make_dirs(&dir)?;
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

/// Makes `dir` and its missing parents with mode 0700 whatever the umask (a client's config
/// directory install is the first to need); existing ones stay as they are.
///
/// # Errors
/// A directory cannot be made.
pub(super) fn make_dirs(dir: &Path) -> anyhow::Result<()> {
    use std::os::unix::fs::DirBuilderExt as _;
    // `mode` is filtered by the umask, which can only take bits away from 0700.
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .with_context(|| format!("creating the directory {}", dir.display()))
}

/// `text` in a new temporary file beside `file` with `mode`, flushed to disk.
fn temporary(file: &Path, text: &str, mode: u32) -> anyhow::Result<PathBuf> {
    crate::approvals_store::write_temporary(file, text.as_bytes(), mode)
        .with_context(|| format!("writing beside {}", file.display()))
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

#[cfg(test)]
mod tests {
    use super::*;

    fn change(path: &Path, before: Option<&str>, after: Option<&str>) -> Change {
        Change {
            path: path.to_path_buf(),
            before: before.map(str::to_owned),
            after: after.map(str::to_owned),
        }
    }

    /// A file another program wrote after the change was computed is left as it is (and
    /// nothing runs before a rename that does not happen); one still as read is replaced,
    /// keeping its mode.
    #[test]
    fn a_file_changed_since_the_plan_is_not_overwritten() -> anyhow::Result<()> {
        let tmp = tempfile::tempdir()?;
        let file = tmp.path().join("settings.json");
        fs::write(&file, "{\"theirs\": 1}")?;
        fs::set_permissions(&file, fs::Permissions::from_mode(0o640))?;
        let stale = change(&file, Some("{}"), Some("{\"ours\": 1}"));
        let written = write(&stale, || {
            panic!("no backup for a write that does not happen")
        })?;
        assert_eq!(written, Written::Stale);
        assert_eq!(fs::read_to_string(&file)?, "{\"theirs\": 1}");

        let fresh = change(&file, Some("{\"theirs\": 1}"), Some("{\"ours\": 1}"));
        let mut backed_up = false;
        let backup = || {
            backed_up = true;
            Ok(())
        };
        assert_eq!(write(&fresh, backup)?, Written::Done);
        assert!(backed_up);
        assert_eq!(fs::read_to_string(&file)?, "{\"ours\": 1}");
        assert_eq!(fs::metadata(&file)?.permissions().mode() & 0o777, 0o640);
        let left: Vec<_> = fs::read_dir(tmp.path())?.collect();
        assert_eq!(left.len(), 1, "no temporary file is left: {left:?}");
        Ok(())
    }

    /// A chain of relative links names the file at its end, even one that does not exist yet.
    #[test]
    fn a_link_chain_names_its_last_target() -> anyhow::Result<()> {
        let tmp = tempfile::tempdir()?;
        fs::create_dir(tmp.path().join("real"))?;
        std::os::unix::fs::symlink("real/middle", tmp.path().join("first"))?;
        std::os::unix::fs::symlink("end.json", tmp.path().join("real/middle"))?;
        assert_eq!(
            target(&tmp.path().join("first"))?,
            tmp.path().join("real/end.json")
        );
        std::os::unix::fs::symlink("loop", tmp.path().join("loop"))?;
        assert!(target(&tmp.path().join("loop")).is_err());
        Ok(())
    }
}
