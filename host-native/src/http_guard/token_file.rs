//! [`TokenFile`]: the bearer token of one `serve --http` run on disk, locked while the run
//! lives, and the sweep that removes the files of runs that are gone.

use std::fs;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use nix::errno::Errno;
use nix::fcntl::{Flock, FlockArg, OFlag};

use super::Token;

/// A token file written for this run: held with an exclusive `flock` while the run lives
/// (the kernel releases it when the process dies, even by SIGKILL), removed when dropped.
#[derive(Debug)]
pub struct TokenFile {
    path: PathBuf,
    lock: Flock<fs::File>,
}

impl TokenFile {
    /// Writes `token` to `<state_dir>/serve-<session_id>.token`, mode 0600 (the directory is
    /// created with mode 0700 if missing), and holds it locked.
    ///
    /// First every `serve-*.token` in the directory whose run is gone (no process holds its
    /// lock: killed, or written before runs locked them) is removed, so a killed run's
    /// token does not stay on disk. The file is written under a temporary name, locked,
    /// then linked to its name, so no other run ever sees it unlocked.
    ///
    /// # Errors
    /// The directory or the file cannot be created or written, or another running
    /// `serve --http` for the same files holds the token file.
    pub fn write(state_dir: &Path, session_id: &str, token: &Token) -> anyhow::Result<TokenFile> {
        if !state_dir.is_dir() {
            fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(state_dir)
                .with_context(|| format!("creating the state directory {}", state_dir.display()))?;
        }
        let path = state_dir.join(format!("serve-{session_id}.token"));
        remove_stale_token_files(state_dir, &path)?;
        let temporary = Unlinked(state_dir.join(format!(
            "serve-{session_id}.token.{}.tmp",
            std::process::id()
        )));
        let _ = fs::remove_file(&temporary.0);
        let file = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&temporary.0)
            .with_context(|| format!("creating the token file {}", temporary.0.display()))?;
        let mut lock = Flock::lock(file, FlockArg::LockExclusiveNonblock).map_err(|(_, e)| {
            anyhow::anyhow!("cannot lock the token file {}: {e}", temporary.0.display())
        })?;
        // The mode given to open() is filtered by the umask; make sure it is exactly 0600.
        lock.set_permissions(fs::Permissions::from_mode(0o600))
            .and_then(|()| writeln!(lock, "{}", token.expose()))
            .and_then(|()| lock.sync_all())
            .with_context(|| format!("writing the token file {}", temporary.0.display()))?;
        match fs::hard_link(&temporary.0, &path) {
            Ok(()) => Ok(TokenFile { path, lock }),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Err(held_by_another(&path)),
            Err(e) => Err(e).with_context(|| format!("creating the token file {}", path.display())),
        }
    }

    /// Where the token is.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

impl Drop for TokenFile {
    fn drop(&mut self) {
        // Only while the name is still this run's file.
        if same_file(&self.path, &self.lock) {
            let _ = fs::remove_file(&self.path);
        }
    }
}

/// Removes the path it holds when dropped.
struct Unlinked(PathBuf);

impl Drop for Unlinked {
    fn drop(&mut self) {
        let _ = fs::remove_file(&self.0);
    }
}

/// Removes every `serve-*.token` in `dir` that no process holds locked. `own` (this
/// session's name) held by a live run is an error: another `serve --http` for the same files
/// is running. A lock is held only for an instant by another run's sweep, so `own` is tried
/// a few times.
fn remove_stale_token_files(dir: &Path, own: &Path) -> anyhow::Result<()> {
    let entries = fs::read_dir(dir)
        .with_context(|| format!("reading the state directory {}", dir.display()))?;
    for entry in entries.filter_map(Result::ok) {
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if !(name.starts_with("serve-") && name.ends_with(".token")) {
            continue;
        }
        let path = entry.path();
        let mut tries = 0;
        while !remove_if_stale(&path) {
            if path != own {
                break;
            }
            tries += 1;
            if tries == 10 {
                return Err(held_by_another(&path));
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    Ok(())
}

/// Removes `path` if it is a regular file nobody holds locked; `false` when a process holds
/// it (it stays).
fn remove_if_stale(path: &Path) -> bool {
    let Ok(file) = fs::OpenOptions::new()
        .read(true)
        .custom_flags((OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK).bits())
        .open(path)
    else {
        return true;
    };
    if !file.metadata().is_ok_and(|m| m.is_file()) {
        return true;
    }
    match Flock::lock(file, FlockArg::LockExclusiveNonblock) {
        Ok(lock) => {
            // Unlinked while locked, and only if the name is still the file locked.
            if same_file(path, &lock) {
                let _ = fs::remove_file(path);
                tracing::debug!(file = %path.display(), "removed a stale token file");
            }
            true
        }
        Err((_, Errno::EWOULDBLOCK)) => false,
        Err(_) => true,
    }
}

/// Whether `path` (not followed) is the file `open` has open.
fn same_file(path: &Path, open: &fs::File) -> bool {
    match (fs::symlink_metadata(path), open.metadata()) {
        (Ok(named), Ok(held)) => named.dev() == held.dev() && named.ino() == held.ino(),
        _ => false,
    }
}

fn held_by_another(path: &Path) -> anyhow::Error {
    anyhow::anyhow!(
        "another `mcp-reconcile serve --http` for these files is running (it holds the token \
         file {}); stop it, or use it",
        path.display()
    )
}
