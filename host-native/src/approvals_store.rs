//! The approvals file (SPEC §5): where approve / reject decisions persist.
//!
//! The format is the TypeScript CLI's `mcpApprovals.json`, so both can share
//! one file:
//! `{"<project root>": {"<server>": {"hash": "<64 hex>", "status": "approved" | "rejected"}}}`,
//! written as `JSON.stringify(store, null, 2)` does.
//!
//! * Reading never fails: a missing file is an empty store; an unreadable or
//!   malformed file (or project entry) is reported and reads as empty, so
//!   every gated server it covers stays pending (fail closed).
//! * Writing ([`ApprovalsStore::decide`]) is a locked read-modify-write: the
//!   parent directory is created, a malformed or unreadable original is
//!   first copied to `<file>.bak`, and the new content replaces the file
//!   atomically (temporary file in the same directory, then rename) with
//!   mode 0600. Records of other servers and projects are kept.
//!
//! The project root is compared as an exact string; callers pass the one
//! canonical root ([`crate::inputs::Inputs::project_root`]) for reads and
//! writes alike.

use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use anyhow::Context;
use mcp_reconcile_kernel::json::{self, Value};
use mcp_reconcile_kernel::{Approvals, Decision, ServerConfig};
use nix::fcntl::{Flock, FlockArg};

/// The approvals file of one session.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApprovalsStore {
    path: PathBuf,
}

/// What reading the file found, before it is turned into [`Approvals`].
enum Contents {
    /// No file: an empty store.
    Missing,
    /// Parsed JSON (possibly with malformed parts, see [`Approvals::problems`]).
    Parsed { value: Value, bytes: Vec<u8> },
    /// Not JSON (or not UTF-8): the reason and the raw bytes, for the backup.
    Malformed { reason: String, bytes: Vec<u8> },
}

impl ApprovalsStore {
    /// A store backed by the file at `path` (which need not exist yet).
    pub fn new(path: PathBuf) -> Self {
        ApprovalsStore { path }
    }

    /// The file's path as configured.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Reads the store. A missing file is empty; an unreadable or malformed
    /// file, or a malformed project entry, is listed in the problems and
    /// reads as empty (every gated server it covers stays pending).
    pub fn load(&self) -> (Approvals, Vec<String>) {
        match self.read() {
            Ok(Contents::Missing) => (Approvals::empty(), Vec::new()),
            Ok(Contents::Parsed { value, .. }) => {
                let approvals = Approvals::new(value);
                let problems = approvals.problems();
                (approvals, problems)
            }
            Ok(Contents::Malformed { reason, .. }) => (Approvals::empty(), vec![reason]),
            Err(e) => (
                Approvals::empty(),
                vec![format!("cannot read the approvals file: {e}")],
            ),
        }
    }

    /// Stores `decision` for server `name` with `config` under
    /// `project_root` (bound to the config's approval hash), keeping every
    /// other record.
    ///
    /// The write is atomic (temporary file in the same directory, then
    /// rename), the file gets mode 0600 and its parent directory is created.
    /// A symlinked file is written through to its target. Concurrent
    /// `decide` calls from several processes are serialized with an advisory
    /// lock on the parent directory.
    ///
    /// # Errors
    /// When the directory cannot be created or locked, the original cannot be
    /// read (it is then left alone: it could not be backed up) or the new
    /// content cannot be written. A malformed original is first copied to
    /// `<file>.bak`; if that copy fails, nothing is written.
    pub fn decide(
        &self,
        project_root: &str,
        name: &str,
        config: &ServerConfig,
        decision: Decision,
    ) -> anyhow::Result<()> {
        let target = write_target(&self.path);
        let dir = parent_dir(&target);
        fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&dir)
            .with_context(|| {
                format!(
                    "cannot create the directory {} for the approvals file",
                    dir.display()
                )
            })?;
        let _lock = lock_dir(&dir)?;

        let contents = read_contents(&target).with_context(|| {
            format!(
                "cannot read the approvals file {}; it is left unchanged (it could not be \
                 backed up) — fix its permissions or move it away, then decide again",
                target.display()
            )
        })?;
        let mut approvals = match contents {
            Contents::Missing => Approvals::empty(),
            Contents::Malformed { bytes, .. } => {
                backup(&target, &bytes)?;
                Approvals::empty()
            }
            Contents::Parsed { value, bytes } => {
                let approvals = Approvals::new(value);
                if !approvals.problems().is_empty() {
                    backup(&target, &bytes)?;
                }
                approvals
            }
        };
        approvals.record(project_root, name, config, decision);
        let text = to_pretty_json(approvals.as_value());
        write_atomic(&target, text.as_bytes()).with_context(|| {
            format!(
                "cannot write the approvals file {}: the decision for \"{name}\" was not stored",
                target.display()
            )
        })
    }

    fn read(&self) -> io::Result<Contents> {
        read_contents(&self.path)
    }
}

/// The backup path of an approvals file: `<file>.bak`.
pub fn backup_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".bak");
    path.with_file_name(name)
}

fn read_contents(path: &Path) -> io::Result<Contents> {
    let bytes = match fs::read(path) {
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
fn write_target(path: &Path) -> PathBuf {
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

fn parent_dir(path: &Path) -> PathBuf {
    match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir.to_path_buf(),
        _ => PathBuf::from("."),
    }
}

fn lock_dir(dir: &Path) -> anyhow::Result<Flock<fs::File>> {
    let handle =
        fs::File::open(dir).with_context(|| format!("cannot open {} to lock it", dir.display()))?;
    Flock::lock(handle, FlockArg::LockExclusive).map_err(|(_, errno)| {
        anyhow::anyhow!(
            "cannot lock {} while writing the approvals file: {errno}",
            dir.display()
        )
    })
}

fn backup(target: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let bak = backup_path(target);
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
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let dir = parent_dir(path);
    let name = path.file_name().unwrap_or_default().to_string_lossy();
    let tmp = dir.join(format!(
        ".{name}.{}.{}.tmp",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let result = (|| {
        let mut file = fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&tmp)?;
        file.set_permissions(fs::Permissions::from_mode(0o600))?;
        file.write_all(bytes)?;
        file.sync_all()?;
        fs::rename(&tmp, path)
    })();
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pretty_json_matches_json_stringify_with_two_spaces() {
        let value = json::parse(
            r#"{"/a":{"x":{"hash":"h","status":"approved"}},"e":{},"l":[],"n":[1,2.5,null,true]}"#,
        )
        .expect("json");
        assert_eq!(
            to_pretty_json(&value),
            "{\n  \"/a\": {\n    \"x\": {\n      \"hash\": \"h\",\n      \"status\": \"approved\"\n    }\n  },\n  \"e\": {},\n  \"l\": [],\n  \"n\": [\n    1,\n    2.5,\n    null,\n    true\n  ]\n}"
        );
        assert_eq!(to_pretty_json(&json::parse("{}").expect("json")), "{}");
    }

    #[test]
    fn backup_path_appends_bak() {
        assert_eq!(
            backup_path(Path::new("/x/mcpApprovals.json")),
            PathBuf::from("/x/mcpApprovals.json.bak")
        );
    }
}
