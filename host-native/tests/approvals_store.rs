//! The approvals store under damage: a corrupt file is never lost (rotated
//! backups that later writes do not overwrite), the records that still parse
//! survive the rewrite, and temporary files of crashed writes are swept.

use std::fs;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use mcp_reconcile::approvals_store::{backup_path, backup_paths, ApprovalsStore, BACKUPS};
use mcp_reconcile_kernel::json::{self, Value};
use mcp_reconcile_kernel::{ApprovalState, Approvals, Decision, ServerConfig};

const ROOT: &str = "/home/dev/repo";

fn cfg(text: &str) -> ServerConfig {
    match json::parse(text).expect("json") {
        Value::Object(o) => ServerConfig::new(o),
        other => panic!("not an object: {other}"),
    }
}

fn setup() -> (tempfile::TempDir, PathBuf, ApprovalsStore) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("approvals.json");
    let store = ApprovalsStore::new(path.clone());
    (dir, path, store)
}

/// The contents of every backup slot that exists, newest first.
fn backups(path: &Path) -> Vec<String> {
    backup_paths(path)
        .iter()
        .filter_map(|p| fs::read_to_string(p).ok())
        .collect()
}

fn approve(store: &ApprovalsStore, name: &str) -> ServerConfig {
    let config = cfg(&format!(r#"{{"command":"{name}","scope":"project"}}"#));
    store
        .decide(ROOT, name, &config, Decision::Approved)
        .expect("decide");
    config
}

#[test]
fn a_corrupt_file_survives_later_approvals_and_new_corruption() {
    let (_dir, path, store) = setup();
    let first = "{\"/home/dev/repo\": {\"p\": {\"hash\": ";
    fs::write(&path, first).expect("write");

    // Corrupt + two approvals: the original is still on disk, both records
    // are in the file.
    let a = approve(&store, "a");
    let b = approve(&store, "b");
    assert_eq!(backups(&path), [first]);
    let (approvals, problems) = store.load();
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(approvals.state(ROOT, "a", &a), ApprovalState::Approved);
    assert_eq!(approvals.state(ROOT, "b", &b), ApprovalState::Approved);

    // Damaged again: the new damage is kept too, the first is not overwritten.
    let second = "not json at all";
    fs::write(&path, second).expect("write");
    approve(&store, "c");
    assert_eq!(backups(&path), [second, first]);

    // Rotation keeps the last BACKUPS, newest first, each 0600.
    for n in 0..BACKUPS {
        fs::write(&path, format!("damage {n}")).expect("write");
        approve(&store, &format!("d{n}"));
    }
    let want: Vec<String> = (0..BACKUPS).rev().map(|n| format!("damage {n}")).collect();
    assert_eq!(backups(&path), want);
    for slot in backup_paths(&path) {
        let mode = fs::metadata(&slot).expect("slot").permissions().mode();
        assert_eq!(mode & 0o777, 0o600, "{}", slot.display());
    }
    // Nothing beyond the slots.
    let mut extra = backup_path(&path).into_os_string();
    extra.push(format!(".{BACKUPS}"));
    assert!(!PathBuf::from(extra).exists());
}

#[test]
fn a_malformed_entry_carried_over_does_not_rotate_the_original_out() {
    let (_dir, path, store) = setup();
    let original = r#"{"/other": ["kept", "as is"], "/home/dev/repo": "damaged"}"#;
    fs::write(&path, original).expect("write");
    // Replacing this project's damaged entry backs the file up once…
    approve(&store, "a");
    // …and the other project's damaged entry, carried over unchanged, makes
    // no backup on each of the next writes.
    for name in ["b", "c", "d", "e"] {
        approve(&store, name);
    }
    assert_eq!(backups(&path), [original]);
    let value = json::parse(&fs::read_to_string(&path).expect("read")).expect("json");
    let object = value.as_object().expect("object");
    assert_eq!(
        object.get("/other").map(Value::to_json),
        Some(r#"["kept","as is"]"#.to_owned())
    );
}

#[test]
fn records_that_still_parse_survive_a_corrupt_file() {
    let (_dir, path, store) = setup();
    let x = cfg(r#"{"command":"x"}"#);
    let y = cfg(r#"{"command":"y"}"#);
    // Two good records, then the file breaks off in the middle of a third
    // (a disk that filled up, an editor that crashed).
    let mut good = mcp_reconcile_kernel::Approvals::empty();
    good.record("/other", "x", &x, Decision::Rejected);
    good.record(ROOT, "y", &y, Decision::Approved);
    let text = mcp_reconcile::approvals_store::to_pretty_json(good.as_value());
    // Cut inside this project's entry, so its whole records are salvaged
    // one by one.
    let cut = text.strip_suffix("\n  }\n}").expect("pretty JSON ends so");
    let damaged = format!("{cut},\n    \"z\": {{\n      \"hash\": \"0123");
    fs::write(&path, &damaged).expect("write");

    // Reading stays fail closed…
    let (approvals, problems) = store.load();
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert_eq!(approvals.state(ROOT, "y", &y), ApprovalState::Pending);

    // …and the next decision keeps every whole record.
    let a = approve(&store, "a");
    let (approvals, problems) = store.load();
    assert!(problems.is_empty(), "{problems:?}");
    assert_eq!(approvals.state("/other", "x", &x), ApprovalState::Rejected);
    assert_eq!(approvals.state(ROOT, "y", &y), ApprovalState::Approved);
    assert_eq!(approvals.state(ROOT, "a", &a), ApprovalState::Approved);
    assert_eq!(backups(&path), [damaged]);
}

#[test]
fn temporary_files_of_crashed_writes_are_swept() {
    let (dir, path, store) = setup();
    fs::write(&path, "{}").expect("write");
    let me = std::process::id();
    // A pid above the kernel's limit (2^22) never runs.
    let dead = 9_999_999;
    let stale_dead = dir.path().join(format!(".approvals.json.{dead}.0.tmp"));
    let stale_backup = dir.path().join(format!(".approvals.json.bak.{dead}.3.tmp"));
    let stale_old = dir.path().join(format!(".approvals.json.{me}.90.tmp"));
    let fresh_live = dir.path().join(format!(".approvals.json.{me}.91.tmp"));
    let unrelated = dir.path().join(format!(".other.json.{dead}.0.tmp"));
    let not_ours = dir.path().join("approvals.json.tmp");
    for p in [
        &stale_dead,
        &stale_backup,
        &stale_old,
        &fresh_live,
        &unrelated,
        &not_ours,
    ] {
        fs::write(p, "{\"copy\": true}").expect("write tmp");
    }
    let old = SystemTime::now() - Duration::from_secs(3600);
    fs::File::options()
        .write(true)
        .open(&stale_old)
        .expect("open")
        .set_modified(old)
        .expect("age it");

    approve(&store, "a");
    assert!(!stale_dead.exists(), "a dead writer's tmp is swept");
    assert!(!stale_backup.exists(), "a backup's tmp is swept too");
    assert!(!stale_old.exists(), "an hour-old tmp is swept");
    assert!(fresh_live.exists(), "a live writer's fresh tmp is kept");
    assert!(unrelated.exists(), "another file's tmp is not ours");
    assert!(not_ours.exists(), "only the store's own tmp naming matches");
}

/// A FIFO or an oversized file in the approvals file's place is unreadable at once — the load
/// never waits for a writer or reads it into memory — and fails closed: nothing is approved,
/// and a decision is refused rather than written over it.
#[test]
fn a_fifo_or_an_oversized_approvals_file_fails_closed_without_blocking() {
    let (_dir, path, store) = setup();
    nix::unistd::mkfifo(&path, nix::sys::stat::Mode::S_IRWXU).expect("mkfifo");
    let (tx, rx) = std::sync::mpsc::channel();
    let loading = ApprovalsStore::new(path.clone());
    std::thread::spawn(move || {
        let _ = tx.send(loading.load());
    });
    let (approvals, problems) = rx
        .recv_timeout(Duration::from_secs(10))
        .expect("loading a FIFO blocked");
    assert_eq!(approvals, Approvals::empty(), "nothing approved");
    assert!(
        problems.iter().any(|p| p.contains("not a regular file")),
        "{problems:?}"
    );
    assert!(store
        .decide(ROOT, "a", &cfg(r#"{"command":"a"}"#), Decision::Approved)
        .is_err());
    assert!(fs::symlink_metadata(&path)
        .expect("still there")
        .file_type()
        .is_fifo());

    fs::remove_file(&path).expect("remove");
    let file = fs::File::create(&path).expect("create");
    file.set_len(65 * 1024 * 1024)
        .expect("a sparse 65 MiB file");
    let (approvals, problems) = store.load();
    assert_eq!(approvals, Approvals::empty(), "nothing approved");
    assert!(
        problems.iter().any(|p| p.contains("larger than 64 MiB")),
        "{problems:?}"
    );
    assert!(store
        .decide(ROOT, "a", &cfg(r#"{"command":"a"}"#), Decision::Approved)
        .is_err());
    assert_eq!(fs::metadata(&path).expect("kept").len(), 65 * 1024 * 1024);
}
