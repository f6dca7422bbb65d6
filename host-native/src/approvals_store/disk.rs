//! The approvals file on disk: the lock, atomic 0600 writes, rotated backups, the sweep of
//! temporary files left by crashed writers, and `JSON.stringify(_, null, 2)` text.

use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::SystemTime;

use anyhow::Context;
use mcp_reconcile_kernel::json::{self, Value};
use nix::fcntl::{Flock, FlockArg};

use super::{backup_paths, Contents, STALE_TMP_AGE};

/// Removes the temporary files crashed writes of `target` (or of its
/// backups) left in its directory: `.<name>.<pid>.<n>.tmp` whose pid no
/// longer runs or that is older than [`STALE_TMP_AGE`]. Best effort: called
/// under the store's lock, where no live writer of this store has one open.
pub fn sweep_stale_tmp(target: &Path) {
    let dir = parent_dir(target);
    let Some(name) = target.file_name().map(|n| n.to_string_lossy().into_owned()) else {
        return;
    };
    let Ok(entries) = fs::read_dir(&dir) else {
        return;
    };
    let bases: Vec<String> = std::iter::once(name.clone())
        .chain(
            backup_paths(target)
                .iter()
                .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned())),
        )
        .collect();
    for entry in entries.flatten() {
        let file_name = entry.file_name().to_string_lossy().into_owned();
        let Some(pid) = tmp_writer(&file_name, &bases) else {
            continue;
        };
        let old = entry
            .metadata()
            .ok()
            .and_then(|m| m.modified().ok())
            .and_then(|t| SystemTime::now().duration_since(t).ok())
            .is_some_and(|age| age >= STALE_TMP_AGE);
        if old || !pid_runs(pid) {
            match fs::remove_file(entry.path()) {
                Ok(()) => tracing::info!(
                    file = %entry.path().display(),
                    "removed a temporary file left by an interrupted approvals write"
                ),
                Err(e) => tracing::warn!(
                    file = %entry.path().display(),
                    "cannot remove a stale temporary approvals file: {e}"
                ),
            }
        }
    }
}

/// The writer pid of `file_name` when it is a temporary file
/// [`write_atomic`] makes for one of `bases`: `.<base>.<pid>.<n>.tmp`.
pub(super) fn tmp_writer(file_name: &str, bases: &[String]) -> Option<i32> {
    let rest = file_name.strip_prefix('.')?.strip_suffix(".tmp")?;
    let (rest, counter) = rest.rsplit_once('.')?;
    let (base, pid) = rest.rsplit_once('.')?;
    let digits = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit());
    if !digits(counter) || !digits(pid) || !bases.iter().any(|b| b == base) {
        return None;
    }
    pid.parse().ok()
}

/// Whether process `pid` exists (`kill(pid, 0)`; `EPERM` means it does).
fn pid_runs(pid: i32) -> bool {
    if pid <= 0 {
        return false;
    }
    !matches!(
        nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None),
        Err(nix::errno::Errno::ESRCH)
    )
}

/// The most an approvals or pins file is read: far above any real one (a record is about a
/// hundred bytes). A larger file is unreadable, which fails closed like any unreadable file.
pub(crate) const MAX_STORE_BYTES: u64 = 64 * 1024 * 1024;

/// [`fs::read`] for the stores' own files, bounded and never blocking: opened without
/// waiting (a FIFO put in a file's place would block a plain read forever), and only a
/// regular file of at most [`MAX_STORE_BYTES`] is read; anything else is an `InvalidData`
/// error. A missing file is `NotFound`, as with [`fs::read`].
pub(crate) fn read_bounded(path: &Path) -> io::Result<Vec<u8>> {
    use std::io::Read as _;
    let file = fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::fcntl::OFlag::O_NONBLOCK.bits())
        .open(path)?;
    let refused = |why: String| io::Error::new(io::ErrorKind::InvalidData, why);
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(refused(format!("{} is not a regular file", path.display())));
    }
    let mut bytes = Vec::new();
    file.take(MAX_STORE_BYTES + 1).read_to_end(&mut bytes)?;
    if bytes.len() as u64 > MAX_STORE_BYTES {
        return Err(refused(format!(
            "{} is larger than {} MiB",
            path.display(),
            MAX_STORE_BYTES / (1024 * 1024)
        )));
    }
    Ok(bytes)
}

pub(super) fn read_contents(path: &Path) -> io::Result<Contents> {
    // A file (or directory) another user can write may hold their approvals, not ours: it is
    // unreadable, so everything it would approve stays pending and nothing is written over it.
    let dir = parent_dir(path);
    let foreign = crate::private::foreign_writer(path).or_else(|| {
        fs::symlink_metadata(path)
            .is_err()
            .then(|| crate::private::foreign_writer(&dir))
            .flatten()
    });
    if let Some(why) = foreign {
        return Err(io::Error::new(io::ErrorKind::PermissionDenied, why));
    }
    let bytes = match read_bounded(path) {
        Ok(bytes) => bytes,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Contents::Missing),
        Err(e) => return Err(e),
    };
    let text = match std::str::from_utf8(&bytes) {
        Ok(text) => text,
        Err(e) => {
            return Ok(Contents::Malformed {
                reason: format!("the approvals file is not UTF-8 text: {e}"),
                bytes,
            })
        }
    };
    match json::parse_jsonc(text) {
        Ok(value) => Ok(Contents::Parsed { value, bytes }),
        Err(e) => Ok(Contents::Malformed {
            reason: if text.trim().is_empty() {
                "the approvals file is empty".to_owned()
            } else {
                format!("the approvals file is not valid JSON: {e}")
            },
            bytes,
        }),
    }
}

/// Where a write goes: through a symlink to its target, so a linked file
/// stays linked.
pub(super) fn write_target(path: &Path) -> PathBuf {
    let is_link = fs::symlink_metadata(path).is_ok_and(|m| m.file_type().is_symlink());
    if !is_link {
        return path.to_path_buf();
    }
    if let Ok(real) = fs::canonicalize(path) {
        return real;
    }
    // A dangling link: follow it one step.
    match fs::read_link(path) {
        Ok(link) if link.is_absolute() => link,
        Ok(link) => parent_dir(path).join(link),
        Err(_) => path.to_path_buf(),
    }
}

pub(super) fn parent_dir(path: &Path) -> PathBuf {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

/// Locks `dir` (exclusive `flock`) for a read-modify-write of a file in it;
/// the lock ends with the returned handle.
pub(crate) fn lock_dir(dir: &Path) -> anyhow::Result<Flock<fs::File>> {
    let handle =
        fs::File::open(dir).with_context(|| format!("cannot open {} to lock it", dir.display()))?;
    Flock::lock(handle, FlockArg::LockExclusive).map_err(|(_, errno)| {
        anyhow::anyhow!(
            "cannot lock {} to write a file in it: {errno}",
            dir.display()
        )
    })
}

/// Keeps `bytes` (the damaged original of `target`) as the newest backup,
/// shifting the older ones down and dropping the oldest. Bytes equal to the
/// newest backup are already kept.
pub(super) fn backup(target: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let slots = backup_paths(target);
    let bak = slots[0].clone();
    if read_bounded(&bak).is_ok_and(|kept| kept == bytes) {
        return Ok(());
    }
    for i in (1..slots.len()).rev() {
        match fs::rename(&slots[i - 1], &slots[i]) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::NotFound => {}
            Err(e) => {
                return Err(e).with_context(|| {
                    format!(
                        "cannot rotate the approvals backup {} to {}; the approvals file {} is \
                         left unchanged — move the backups away, then decide again",
                        slots[i - 1].display(),
                        slots[i].display(),
                        target.display()
                    )
                })
            }
        }
    }
    write_atomic(&bak, bytes).with_context(|| {
        format!(
            "cannot back up the malformed approvals file {} to {}; it is left unchanged — \
             move it away, then decide again",
            target.display(),
            bak.display()
        )
    })?;
    tracing::warn!(
        file = %target.display(),
        backup = %bak.display(),
        "the approvals file was malformed; kept a copy before replacing it"
    );
    Ok(())
}

/// Writes `bytes` to `path` atomically with mode 0600: a new temporary file
/// in the same directory, synced, then renamed over `path`.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> io::Result<()> {
    let dir = parent_dir(path);
    let tmp = write_temporary(path, bytes, 0o600)?;
    let result = fs::rename(&tmp, path);
    if result.is_err() {
        let _ = fs::remove_file(&tmp);
    }
    result?;
    // Make the rename itself durable; not every filesystem supports it.
    if let Ok(d) = fs::File::open(&dir) {
        let _ = d.sync_all();
    }
    Ok(())
}

/// `bytes` in a new temporary file beside `path` (`.NAME.PID.N.tmp`, which
/// [`sweep_stale_tmp`] clears after a crash) with `mode`, synced; removed again if
/// it cannot be written. The caller renames it over `path`.
pub fn write_temporary(path: &Path, bytes: &[u8], mode: u32) -> io::Result<PathBuf> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let tmp = parent_dir(path).join(format!(
        ".{name}.{}.{}.tmp",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let written = (|| {
        let mut file = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?;
        file.set_permissions(fs::Permissions::from_mode(mode))?;
        file.write_all(bytes)?;
        file.sync_all()
    })();
    if let Err(e) = written {
        let _ = fs::remove_file(&tmp);
        return Err(e);
    }
    Ok(tmp)
}

/// `JSON.stringify(value, null, 2)`: two-space indentation, `{}` / `[]` for
/// empty containers, no trailing newline.
pub fn to_pretty_json(value: &Value) -> String {
    let mut out = String::new();
    write_pretty(&mut out, value, 0);
    out
}

fn write_pretty(out: &mut String, value: &Value, depth: usize) {
    let indent = |out: &mut String, depth: usize| {
        out.push('\n');
        out.extend(std::iter::repeat_n("  ", depth));
    };
    match value {
        Value::Array(items) if !items.is_empty() => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                indent(out, depth + 1);
                write_pretty(out, item, depth + 1);
            }
            indent(out, depth);
            out.push(']');
        }
        Value::Object(object) if !object.is_empty() => {
            out.push('{');
            for (i, (key, item)) in object.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                indent(out, depth + 1);
                json::write_json_string(out, key);
                out.push_str(": ");
                write_pretty(out, item, depth + 1);
            }
            indent(out, depth);
            out.push('}');
        }
        other => json::write_json(out, other),
    }
}
