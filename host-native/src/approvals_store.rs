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
//!   parent directory is created, and the new content replaces the file
//!   atomically (temporary file in the same directory, then rename) with
//!   mode 0600. Records of other servers and projects are kept.
//! * Nothing is lost when a damaged file is rewritten:
//!   - whenever the rewrite would drop content (the file is not JSON, not an
//!     object, or the project entry being written is not an object) the
//!     original bytes are first kept as a backup. Backups rotate and are
//!     never overwritten: the newest is `<file>.bak`, older ones
//!     `<file>.bak.1` and `<file>.bak.2`; a fourth drops the oldest
//!     ([`BACKUPS`], [`backup_paths`]). The same bytes are not backed up
//!     twice, and a malformed entry the rewrite carries over unchanged (another
//!     project's) makes no backup, so repeated writes cannot rotate the
//!     original out;
//!   - from a file that is not JSON, every record that still parses (whole
//!     project entries, or whole server records of a truncated project entry)
//!     is carried into the rewrite ([`salvage`]). Reading stays fail closed:
//!     [`ApprovalsStore::load`] treats such a file as empty until a decision
//!     rewrites it.
//! * Temporary files of writers that crashed (`.<file>.<pid>.<n>.tmp`, also for
//!   the backups) are removed by the next write, under the lock: one whose
//!   writer pid no longer runs, or which is older than [`STALE_TMP_AGE`] (a
//!   write takes milliseconds; the age covers a pid reused since).
//!
//! The project root is compared as an exact string; callers pass the one
//! canonical root ([`crate::inputs::Inputs::project_root`]) for reads and
//! writes alike.

use std::fs;
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, SystemTime};

use anyhow::Context;
use mcp_reconcile_kernel::json::{self, Object, Value};
use mcp_reconcile_kernel::{Approvals, Decision, ServerConfig};
use nix::fcntl::{Flock, FlockArg};

/// How many backups of damaged originals are kept (`<file>.bak`,
/// `<file>.bak.1`, `<file>.bak.2`, newest first).
pub const BACKUPS: usize = 3;

/// A temporary file of the store at least this old is left over from a
/// crashed write, even if its pid runs again (reused).
pub const STALE_TMP_AGE: Duration = Duration::from_secs(60);

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
    /// content cannot be written. A damaged original is first kept as the
    /// newest backup (see the module docs); if that fails, nothing is
    /// written.
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
        sweep_stale_tmp(&target);

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
                let (kept, records) = salvage(&String::from_utf8_lossy(&bytes));
                if records > 0 {
                    tracing::warn!(
                        file = %target.display(),
                        records,
                        "carried the records that still parse over from the damaged approvals file"
                    );
                }
                Approvals::new(Value::Object(kept))
            }
            Contents::Parsed { value, bytes } => {
                let approvals = Approvals::new(value);
                if rewrite_drops_content(&approvals, project_root) {
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

/// The newest backup of an approvals file: `<file>.bak`.
pub fn backup_path(path: &Path) -> PathBuf {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".bak");
    path.with_file_name(name)
}

/// Every backup slot, newest first: `<file>.bak`, `<file>.bak.1`, … (
/// [`BACKUPS`] of them).
pub fn backup_paths(path: &Path) -> Vec<PathBuf> {
    let newest = backup_path(path);
    let mut paths = vec![newest.clone()];
    for i in 1..BACKUPS {
        let mut name = newest.file_name().unwrap_or_default().to_os_string();
        name.push(format!(".{i}"));
        paths.push(newest.with_file_name(name));
    }
    paths
}

/// Whether writing a record for `project_root` into `approvals` would replace
/// something: the store is not an object, or that project's entry is not.
/// A malformed entry of another project is carried over as it is.
fn rewrite_drops_content(approvals: &Approvals, project_root: &str) -> bool {
    match approvals.as_value() {
        Value::Object(store) => store
            .get(project_root)
            .is_some_and(|entry| !matches!(entry, Value::Object(_))),
        _ => true,
    }
}

/// The records that still parse in approvals `text` that is not JSON as a
/// whole (truncated, or damaged in the middle): every top-level member that
/// parses on its own with an object value, and of a project entry that does
/// not, every server record that does. Returns them with their count of
/// server records. Comments are ignored as in [`json::parse_jsonc`].
pub fn salvage(text: &str) -> (Object, usize) {
    let text = json::strip_comments(text.strip_prefix('\u{feff}').unwrap_or(text));
    let mut kept = Object::new();
    let mut records = 0;
    let Some(body) = object_body(&text) else {
        return (kept, 0);
    };
    for member in split_members(body) {
        if let Some((key, Value::Object(project))) = parse_member(member) {
            records += project.len();
            kept.insert(key, Value::Object(project));
            continue;
        }
        // A damaged project entry: keep its whole server records.
        let Some((key, value)) = split_key(member) else {
            continue;
        };
        let Some(inner) = object_body(value) else {
            continue;
        };
        let mut project = Object::new();
        for record in split_members(inner) {
            if let Some((name, record @ Value::Object(_))) = parse_member(record) {
                project.insert(name, record);
            }
        }
        if !project.is_empty() {
            records += project.len();
            kept.insert(key, Value::Object(project));
        }
    }
    (kept, records)
}

/// The text after the `{` that `text` starts with (after whitespace).
fn object_body(text: &str) -> Option<&str> {
    text.trim_start().strip_prefix('{')
}

/// Splits an object's body at its own commas, up to its closing brace or the
/// end of the text (a truncated object). Brackets and strings nest.
fn split_members(body: &str) -> Vec<&str> {
    let mut members = Vec::new();
    let mut depth = 0usize;
    let mut in_string = false;
    let mut escaped = false;
    let mut start = 0;
    for (i, c) in body.char_indices() {
        if in_string {
            match (escaped, c) {
                (true, _) => escaped = false,
                (false, '\\') => escaped = true,
                (false, '"') => in_string = false,
                _ => {}
            }
            continue;
        }
        match c {
            '"' => in_string = true,
            '{' | '[' => depth += 1,
            '}' | ']' if depth == 0 => {
                members.push(&body[start..i]);
                return members;
            }
            '}' | ']' => depth -= 1,
            ',' if depth == 0 => {
                members.push(&body[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    members.push(&body[start..]);
    members
}

/// `"key": value` parsed on its own.
fn parse_member(member: &str) -> Option<(String, Value)> {
    if member.trim().is_empty() {
        return None;
    }
    match json::parse(&format!("{{{member}}}")) {
        Ok(Value::Object(object)) if object.len() == 1 => object.into_iter().next(),
        _ => None,
    }
}

/// The key of `"key": rest` and the text of `rest`, when the key is whole.
fn split_key(member: &str) -> Option<(String, &str)> {
    let member = member.trim_start();
    let body = member.strip_prefix('"')?;
    let mut escaped = false;
    let end = body.char_indices().find_map(|(i, c)| {
        match (escaped, c) {
            (true, _) => escaped = false,
            (false, '\\') => escaped = true,
            (false, '"') => return Some(i),
            _ => {}
        }
        None
    })?;
    let key = match json::parse(&member[..end + 2]) {
        Ok(Value::String(key)) => key,
        _ => return None,
    };
    let rest = body[end + 1..].trim_start().strip_prefix(':')?;
    Some((key, rest))
}

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
fn tmp_writer(file_name: &str, bases: &[String]) -> Option<i32> {
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

/// Keeps `bytes` (the damaged original of `target`) as the newest backup,
/// shifting the older ones down and dropping the oldest. Bytes equal to the
/// newest backup are already kept.
fn backup(target: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    let slots = backup_paths(target);
    let bak = slots[0].clone();
    if fs::read(&bak).is_ok_and(|kept| kept == bytes) {
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
        assert_eq!(
            backup_paths(Path::new("/x/a.json")),
            ["/x/a.json.bak", "/x/a.json.bak.1", "/x/a.json.bak.2"].map(PathBuf::from)
        );
    }

    #[test]
    fn tmp_names_are_recognized_exactly() {
        let bases = ["a.json".to_owned(), "a.json.bak".to_owned()];
        assert_eq!(tmp_writer(".a.json.123.0.tmp", &bases), Some(123));
        assert_eq!(tmp_writer(".a.json.bak.77.12.tmp", &bases), Some(77));
        assert_eq!(tmp_writer(".b.json.123.0.tmp", &bases), None);
        assert_eq!(tmp_writer("a.json.123.0.tmp", &bases), None);
        assert_eq!(tmp_writer(".a.json.x.0.tmp", &bases), None);
        assert_eq!(tmp_writer(".a.json.123.tmp", &bases), None);
    }

    #[test]
    fn salvage_keeps_whole_entries_and_whole_records_of_a_truncated_one() {
        let text = r#"{
  "/a": {"x": {"hash": "h1", "status": "approved"}},
  // a comment, "with, commas {"
  "/b": {"y": {"hash": "h,}2", "status": "rejected"}, "z": {"hash": "h3", "sta"#;
        let (kept, records) = salvage(text);
        assert_eq!(records, 2);
        assert_eq!(
            Value::Object(kept).to_json(),
            r#"{"/a":{"x":{"hash":"h1","status":"approved"}},"/b":{"y":{"hash":"h,}2","status":"rejected"}}}"#
        );
        assert_eq!(salvage("garbage").1, 0);
        assert_eq!(salvage("").1, 0);
    }
}
