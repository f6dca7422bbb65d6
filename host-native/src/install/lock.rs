//! Claude Code's own lock on `~/.claude.json`, taken the way Claude Code takes it, so that an
//! install and a concurrent `claude mcp add` (or a running session saving its state) never
//! lose each other's write.
//!
//! Claude Code saves that file under `proper-lockfile`'s `lockSync(file, { lockfilePath:
//! file + ".lock" })`: the lock is the *directory* `<file>.lock`, made with `mkdir` (which
//! either creates it or fails, atomically); its holder refreshes the directory's mtime as a
//! heartbeat (every 5 s) and removes it when done; a lock whose mtime is older than 10 s is
//! stale (its holder died) and is removed by the next taker. Claude Code re-reads the file
//! under the lock, writes a temporary file and renames it over the file; install does the
//! same under this lock (`super::write`).

use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant, SystemTime};

use anyhow::bail;

/// After this long without a heartbeat a lock is stale (`proper-lockfile`'s default `stale`).
const STALE: Duration = Duration::from_secs(10);
/// How often a held lock's mtime is refreshed (`proper-lockfile`: `stale / 2`).
const HEARTBEAT: Duration = Duration::from_secs(5);
/// How long install waits for a lock someone else holds (longer than a stale period, so a
/// lock left by a killed process is taken over rather than reported).
const WAIT: Duration = Duration::from_secs(30);

/// The lock on one file, held until dropped.
pub(super) struct FileLock {
    dir: PathBuf,
    stop: Option<mpsc::Sender<()>>,
    heartbeat: Option<thread::JoinHandle<()>>,
}

/// The lock directory Claude Code uses for `file` (the path as the client names it, not the
/// target of a link: Claude Code does not resolve it either).
pub(super) fn lock_dir(file: &Path) -> PathBuf {
    let mut name = file.as_os_str().to_owned();
    name.push(".lock");
    PathBuf::from(name)
}

impl FileLock {
    /// Takes the lock on `file`, waiting while another process holds it and removing one that
    /// went stale.
    ///
    /// # Errors
    /// The lock is held past [`WAIT`] (the message names the lock directory), or the lock
    /// directory cannot be made.
    pub(super) fn acquire(file: &Path) -> anyhow::Result<FileLock> {
        FileLock::acquire_within(file, WAIT)
    }

    /// [`FileLock::acquire`], waiting at most `wait`.
    fn acquire_within(file: &Path, wait: Duration) -> anyhow::Result<FileLock> {
        let dir = lock_dir(file);
        let shown = crate::display::safe(&dir.display().to_string()).into_owned();
        if let Some(parent) = file.parent().filter(|p| !p.as_os_str().is_empty()) {
            super::write::make_dirs(parent)?;
        }
        let deadline = Instant::now() + wait;
        let mut pause = Duration::from_millis(5);
        loop {
            match std::fs::create_dir(&dir) {
                Ok(()) => return Ok(FileLock::held(dir)),
                Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                Err(e) => bail!("cannot take the lock {shown}: {e}"),
            }
            match heartbeat_age(&dir) {
                // Released between the `mkdir` and this look: take it at once. (Never remove
                // it here: another writer may have taken it meanwhile.)
                Age::Gone => continue,
                Age::Stale => {
                    // As `proper-lockfile` does: remove it and try again at once.
                    match std::fs::remove_dir(&dir) {
                        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                            bail!("cannot remove the stale lock {shown}: {e}")
                        }
                        _ => continue,
                    }
                }
                Age::Fresh => {}
            }
            if Instant::now() >= deadline {
                bail!(
                    "{shown} has been locked by another program for {:.1} s (Claude Code saving it, \
                     as a rule); try again — if no Claude Code is running, remove that \
                     directory first",
                    wait.as_secs_f32()
                );
            }
            thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(100));
        }
    }

    /// A lock just made, with its heartbeat running.
    fn held(dir: PathBuf) -> FileLock {
        let (stop, stopped) = mpsc::channel::<()>();
        let beat = dir.clone();
        let heartbeat = thread::spawn(move || {
            while let Err(mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(HEARTBEAT) {
                touch(&beat);
            }
        });
        FileLock {
            dir,
            stop: Some(stop),
            heartbeat: Some(heartbeat),
        }
    }
}

impl Drop for FileLock {
    fn drop(&mut self) {
        drop(self.stop.take());
        if let Some(heartbeat) = self.heartbeat.take() {
            let _ = heartbeat.join();
        }
        let _ = std::fs::remove_dir(&self.dir);
    }
}

/// How old a lock directory's last heartbeat is.
enum Age {
    /// The directory is gone: its holder released it.
    Gone,
    /// Older than [`STALE`]: its holder died.
    Stale,
    /// Held (or its age cannot be read: wait, as for a held one).
    Fresh,
}

/// The age of the lock directory's last heartbeat.
fn heartbeat_age(dir: &Path) -> Age {
    match std::fs::symlink_metadata(dir).and_then(|m| m.modified()) {
        Ok(beat)
            if SystemTime::now()
                .duration_since(beat)
                .is_ok_and(|age| age > STALE) =>
        {
            Age::Stale
        }
        Ok(_) => Age::Fresh,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Age::Gone,
        Err(_) => Age::Fresh,
    }
}

/// Sets `dir`'s mtime to now (the heartbeat).
fn touch(dir: &Path) {
    if let Ok(handle) = std::fs::File::open(dir) {
        let now = SystemTime::now();
        let _ = handle.set_times(
            std::fs::FileTimes::new()
                .set_accessed(now)
                .set_modified(now),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A lock left by a process that died (no heartbeat for longer than the stale period) is
    /// taken over; a live one is waited for, and the lock is gone once released.
    #[test]
    fn a_stale_lock_is_taken_over_and_a_released_one_is_gone() -> anyhow::Result<()> {
        let tmp = tempfile::tempdir()?;
        let file = tmp.path().join(".claude.json");
        let dir = lock_dir(&file);
        std::fs::create_dir(&dir)?;
        let old = SystemTime::now() - Duration::from_secs(60);
        std::fs::File::open(&dir)?.set_times(std::fs::FileTimes::new().set_modified(old))?;
        let lock = FileLock::acquire(&file)?;
        assert!(dir.is_dir());
        let held = std::fs::metadata(&dir)?.modified()?;
        assert!(held > old, "the lock is ours now, with a fresh mtime");
        drop(lock);
        assert!(!dir.exists());
        Ok(())
    }

    /// A live lock (fresh heartbeat) is waited for, and past the wait the error names the lock
    /// directory; the other holder's lock is left alone.
    #[test]
    fn a_held_lock_times_out_naming_its_path() -> anyhow::Result<()> {
        let tmp = tempfile::tempdir()?;
        let file = tmp.path().join(".claude.json");
        let dir = lock_dir(&file);
        std::fs::create_dir(&dir)?;
        let Err(e) = FileLock::acquire_within(&file, Duration::from_millis(200)) else {
            panic!("a held lock was taken");
        };
        assert!(e.to_string().contains(&dir.display().to_string()), "{e}");
        assert!(dir.is_dir(), "someone else's lock stays");
        Ok(())
    }
}
