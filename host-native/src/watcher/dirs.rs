//! Directory watches (dev mode): every change of an entry of a listed directory, reported by
//! path, on the process's one platform watcher beside the file watches.
//!
//! The caller lists every directory itself — [`tree`] walks one, bounded — so nothing is
//! watched recursively behind its back: it decides how deep, which directories are skipped
//! and how many are too many. Only events are read; no file's content ever is, and a walk
//! never follows a symbolic link.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio::sync::mpsc::UnboundedSender;

use super::Hub;

/// A running directory watch. Dropping it stops watching its directories (those no other
/// watch needs).
pub struct DirWatch {
    hub: Arc<Hub>,
    id: u64,
}

impl std::fmt::Debug for DirWatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DirWatch")
            .field("dirs", &self.watched_dirs())
            .finish()
    }
}

/// One directory watch on the hub: its directories and where their events go.
pub(super) struct DirSub {
    pub(super) dirs: BTreeSet<PathBuf>,
    pub(super) events: UnboundedSender<PathBuf>,
}

impl DirSub {
    /// Whether an event about `path` concerns this watch: an entry of one of its directories,
    /// or one of them itself (removed, moved).
    pub(super) fn covers(&self, path: &Path) -> bool {
        self.dirs.contains(path) || path.parent().is_some_and(|dir| self.dirs.contains(dir))
    }
}

/// Watches each of `dirs` (real paths; not recursively); every event about an entry of one
/// of them, or about one of them, sends its path to `events`. A directory that cannot be
/// watched (gone, permission denied) is logged and skipped.
///
/// # Errors
/// When the platform's file watcher cannot be created.
pub fn watch_dirs(
    dirs: BTreeSet<PathBuf>,
    events: UnboundedSender<PathBuf>,
) -> anyhow::Result<DirWatch> {
    let hub = Hub::shared()?;
    let id = {
        let mut state = hub.lock();
        state.next += 1;
        let id = state.next;
        state.dirs.insert(id, DirSub { dirs, events });
        state.rearm_and_report(id);
        id
    };
    Ok(DirWatch { hub, id })
}

impl DirWatch {
    /// The directories watched for this watch right now.
    pub fn watched_dirs(&self) -> Vec<PathBuf> {
        let state = self.hub.lock();
        state.dirs.get(&self.id).map_or_else(Vec::new, |sub| {
            sub.dirs
                .iter()
                .filter(|dir| state.armed.contains(*dir))
                .cloned()
                .collect()
        })
    }
}

impl Drop for DirWatch {
    fn drop(&mut self) {
        let mut state = self.hub.lock();
        state.dirs.remove(&self.id);
        state.rearm_and_report(self.id);
    }
}

/// More directories than the budget allowed.
#[derive(Debug, PartialEq, Eq)]
pub struct TooMany;

/// `root` and the directories below it down to `depth` levels (`None`: any), root first,
/// never through a symbolic link nor into a directory whose name `descend` refuses;
/// unreadable directories are left out. Reads directory listings only.
///
/// # Errors
/// [`TooMany`] as soon as more than `budget` directories were found (the walk stops there).
pub fn tree(
    root: &Path,
    depth: Option<usize>,
    descend: impl Fn(&str) -> bool,
    budget: usize,
) -> Result<Vec<PathBuf>, TooMany> {
    let mut found = vec![root.to_path_buf()];
    let mut next = 0;
    let mut level_end = 1;
    let mut level = 0;
    while next < found.len() {
        if next == level_end {
            level += 1;
            level_end = found.len();
        }
        let dir = found[next].clone();
        next += 1;
        if depth.is_some_and(|d| level >= d) {
            continue;
        }
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            // The entry's own type: a symbolic link is never a directory here.
            let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
            let name = entry.file_name();
            if !is_dir || !name.to_str().is_none_or(&descend) {
                continue;
            }
            if found.len() >= budget {
                return Err(TooMany);
            }
            found.push(entry.path());
        }
    }
    if found.len() > budget {
        return Err(TooMany);
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mkdirs(root: &Path, dirs: &[&str]) {
        for dir in dirs {
            std::fs::create_dir_all(root.join(dir)).expect("mkdir");
        }
    }

    #[test]
    fn a_tree_is_walked_to_its_depth_without_links_or_skipped_names() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let root = tmp.path().canonicalize().expect("real");
        mkdirs(&root, &["a/b/c", "node_modules/x", "d"]);
        std::os::unix::fs::symlink("/", root.join("link")).expect("symlink");
        let walk = |depth, budget| {
            tree(&root, depth, |name| name != "node_modules", budget).map(|dirs| {
                let mut rel: Vec<String> = dirs
                    .iter()
                    .map(|d| d.strip_prefix(&root).expect("inside").display().to_string())
                    .collect();
                rel.sort();
                rel
            })
        };
        assert_eq!(
            walk(None, 100),
            Ok(vec![
                "".into(),
                "a".into(),
                "a/b".into(),
                "a/b/c".into(),
                "d".into()
            ])
        );
        assert_eq!(walk(Some(0), 100), Ok(vec!["".into()]));
        assert_eq!(
            walk(Some(1), 100),
            Ok(vec!["".into(), "a".into(), "d".into()])
        );
        assert_eq!(
            walk(None, 5),
            Ok(vec![
                "".into(),
                "a".into(),
                "a/b".into(),
                "a/b/c".into(),
                "d".into()
            ])
        );
        assert_eq!(walk(None, 4), Err(TooMany));
    }
}
