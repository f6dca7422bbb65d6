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
use std::io;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context;
use mcp_reconcile_kernel::json::Value;
use mcp_reconcile_kernel::{Approvals, Decision, ServerConfig};

mod disk;
mod salvage;

use self::disk::{backup, parent_dir, read_contents, write_target};
pub(crate) use self::disk::{lock_dir, read_bounded};
pub use self::disk::{sweep_stale_tmp, to_pretty_json, write_atomic, write_temporary};
pub use self::salvage::salvage;

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
        let hash = mcp_reconcile_kernel::approval_hash(config).0;
        self.decide_hash(project_root, name, &hash, decision)
    }

    /// [`ApprovalsStore::decide`] with the approval hash given (a language server's, SPEC
    /// §14.3).
    ///
    /// # Errors
    /// As [`ApprovalsStore::decide`].
    pub fn decide_hash(
        &self,
        project_root: &str,
        name: &str,
        hash: &str,
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
        approvals.record_hash(project_root, name, hash, decision);
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

#[cfg(test)]
mod tests {
    use super::disk::tmp_writer;
    use super::*;
    use mcp_reconcile_kernel::json;

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
