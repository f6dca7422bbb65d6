//! File watching: turns filesystem events into the kernel's reload
//! [`FileSource`]s (SPEC §8).
//!
//! Files are not watched themselves: their **parent directories** are
//! (non-recursively), so that
//! * editors that save by writing a temporary file and renaming it over the
//!   original,
//! * files that appear, disappear or are recreated, and
//! * symlinked files edited through their target (the target's directory is
//!   watched too)
//!
//! all produce events. Events about other files in those directories are
//! ignored. A parent directory that does not exist yet (e.g. a project's
//! `.qwen/`) is covered by watching its nearest existing ancestor; when the
//! directory appears the watch moves down to it and the file's source is
//! reported once (it may have been created before the new watch was in
//! place). The same happens in reverse when a directory disappears, and a
//! symlink that is re-pointed moves the target watch.
//!
//! Events arrive in bursts (one save is several events); the kernel's
//! [`ReloadScheduler`](mcp_reconcile_kernel::ReloadScheduler) debounces and
//! coalesces them, so this module reports every relevant event as it comes.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc, Mutex, PoisonError};
use std::thread::JoinHandle;

use anyhow::Context;
use mcp_reconcile_kernel::reload::FileSource;
use notify::event::{AccessKind, AccessMode};
use notify::{EventKind, RecommendedWatcher, RecursiveMode, Watcher as _};
use tokio::sync::mpsc::UnboundedSender;

/// A running watch. Dropping it stops watching (and joins its thread).
pub struct Watcher {
    inner: Arc<Mutex<Option<RecommendedWatcher>>>,
    state: Arc<Mutex<Arming>>,
    thread: Option<JoinHandle<()>>,
}

impl std::fmt::Debug for Watcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watcher")
            .field("dirs", &self.watched_dirs())
            .finish()
    }
}

impl Watcher {
    /// The directories watched right now (for diagnostics and tests).
    pub fn watched_dirs(&self) -> Vec<PathBuf> {
        let state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.armed.iter().cloned().collect()
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        // Dropping the notify watcher stops its event loop, which drops the
        // event sender and so ends the worker thread.
        let watcher = self
            .inner
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        drop(watcher);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Starts watching `files`; every event that concerns one of them sends its
/// [`FileSource`] to `events` (a file listed under several sources sends each).
///
/// Directories that cannot be watched (e.g. permission denied) are logged
/// and retried on the next event; they do not fail the call.
///
/// # Errors
/// When the platform's file watcher cannot be created (e.g. the inotify
/// instance limit is reached).
pub fn watch(
    files: Vec<(PathBuf, FileSource)>,
    events: UnboundedSender<FileSource>,
) -> anyhow::Result<Watcher> {
    let (raw_tx, raw_rx) = mpsc::channel::<notify::Result<notify::Event>>();
    let watcher = notify::recommended_watcher(raw_tx)
        .context("cannot start the file watcher (inotify/FSEvents); check the OS watch limits")?;
    let inner = Arc::new(Mutex::new(Some(watcher)));
    let state = Arc::new(Mutex::new(Arming::new(files)));
    {
        let mut guard = inner.lock().unwrap_or_else(PoisonError::into_inner);
        let mut state = state.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(watcher) = guard.as_mut() {
            // Nothing to report on the first arming: the caller loads
            // everything after starting the watch.
            state.rearm(watcher);
        }
    }
    let thread = std::thread::Builder::new()
        .name("mcp-reconcile-watch".into())
        .spawn({
            let inner = Arc::clone(&inner);
            let state = Arc::clone(&state);
            move || run(raw_rx, &inner, &state, &events)
        })
        .context("cannot start the file watcher thread")?;
    Ok(Watcher {
        inner,
        state,
        thread: Some(thread),
    })
}

/// The worker: maps raw events to sources and re-arms directory watches.
fn run(
    raw: mpsc::Receiver<notify::Result<notify::Event>>,
    inner: &Mutex<Option<RecommendedWatcher>>,
    state: &Mutex<Arming>,
    events: &UnboundedSender<FileSource>,
) {
    for event in raw {
        let event = match event {
            Ok(event) => event,
            Err(e) => {
                tracing::warn!(error = %e, "file watcher error");
                continue;
            }
        };
        if is_read_only(&event.kind) && !event.need_rescan() {
            continue;
        }
        let mut hits: Vec<FileSource> = Vec::new();
        {
            let mut guard = inner.lock().unwrap_or_else(PoisonError::into_inner);
            let Some(watcher) = guard.as_mut() else {
                return;
            };
            let mut state = state.lock().unwrap_or_else(PoisonError::into_inner);
            if event.need_rescan() {
                hits.extend(state.files.iter().map(|(_, s)| s.clone()));
            }
            for path in &event.paths {
                if let Some(sources) = state.routes.get(path) {
                    hits.extend(sources.iter().cloned());
                }
            }
            hits.extend(state.rearm(watcher));
        }
        let mut seen = BTreeSet::new();
        for source in hits {
            if seen.insert(source.clone()) && events.send(source).is_err() {
                return;
            }
        }
    }
}

/// Open / read / close-without-write events: our own reads cause them.
fn is_read_only(kind: &EventKind) -> bool {
    matches!(kind, EventKind::Access(access) if *access != AccessKind::Close(AccessMode::Write))
}

/// Which directories must be watched for the files, and which event paths
/// mean which source.
struct Arming {
    files: Vec<(PathBuf, FileSource)>,
    /// Event path → the sources it concerns.
    routes: BTreeMap<PathBuf, Vec<FileSource>>,
    /// Per file (same index as `files`): the directories covering it.
    covering: Vec<Vec<PathBuf>>,
    /// Directories with a live watch.
    armed: BTreeSet<PathBuf>,
    /// Whether `covering` holds a previous arming to compare with.
    armed_once: bool,
}

impl Arming {
    fn new(files: Vec<(PathBuf, FileSource)>) -> Self {
        let covering = vec![Vec::new(); files.len()];
        Arming {
            files,
            routes: BTreeMap::new(),
            covering,
            armed: BTreeSet::new(),
            armed_once: false,
        }
    }

    /// Recomputes the directories to watch and the routes, watches new
    /// directories and unwatches stale ones. Returns the sources of files
    /// whose covering directories changed (a directory or link target
    /// appeared or vanished, so the file may have changed unseen).
    fn rearm(&mut self, watcher: &mut RecommendedWatcher) -> Vec<FileSource> {
        let mut changed = Vec::new();
        // A directory can appear between computing a cover and arming the
        // watch on its parent; computing again once the watches are in place
        // catches it. Bounded: a few levels can appear at once, no more.
        for _ in 0..8 {
            let mut routes: BTreeMap<PathBuf, Vec<FileSource>> = BTreeMap::new();
            let mut wanted: BTreeSet<PathBuf> = BTreeSet::new();
            for (i, (file, source)) in self.files.iter().enumerate() {
                let cover = cover(file);
                for key in &cover.routes {
                    routes.entry(key.clone()).or_default().push(source.clone());
                }
                if self.armed_once && self.covering[i] != cover.dirs && !changed.contains(source) {
                    changed.push(source.clone());
                }
                wanted.extend(cover.dirs.iter().cloned());
                self.covering[i] = cover.dirs;
            }
            self.routes = routes;
            self.armed_once = true;
            if wanted == self.armed {
                break;
            }
            let mut progress = false;
            for dir in self.armed.difference(&wanted).cloned().collect::<Vec<_>>() {
                // The directory may be gone already (its watch died with it).
                let _ = watcher.unwatch(&dir);
                self.armed.remove(&dir);
                progress = true;
            }
            for dir in wanted {
                if self.armed.contains(&dir) {
                    continue;
                }
                match watcher.watch(&dir, RecursiveMode::NonRecursive) {
                    Ok(()) => {
                        tracing::debug!(dir = %dir.display(), "watching");
                        self.armed.insert(dir);
                        progress = true;
                    }
                    Err(e) => {
                        tracing::warn!(dir = %dir.display(), error = %e, "cannot watch directory");
                    }
                }
            }
            if !progress {
                break;
            }
        }
        changed
    }
}

/// How one file is covered right now.
struct Cover {
    /// Directories to watch: the parent (or its nearest existing ancestor)
    /// and, for a symlink, the directory of its final target.
    dirs: Vec<PathBuf>,
    /// Event paths that mean "this file changed".
    routes: Vec<PathBuf>,
}

fn cover(file: &Path) -> Cover {
    let mut dirs = Vec::new();
    let mut routes = vec![file.to_path_buf()];
    let parent = file.parent().unwrap_or(Path::new("/"));
    match nearest_existing_dir(parent) {
        Some(dir) if dir == parent => {
            dirs.push(dir.to_path_buf());
            // Backends that report real paths (FSEvents) name the file by its
            // canonical directory.
            if let (Ok(real), Some(name)) = (parent.canonicalize(), file.file_name()) {
                routes.push(real.join(name));
            }
        }
        Some(ancestor) => {
            // Not there yet: the event that creates the next missing
            // component re-arms (see `Arming::rearm`).
            dirs.push(ancestor.to_path_buf());
        }
        None => {}
    }
    let is_link = std::fs::symlink_metadata(file).is_ok_and(|m| m.file_type().is_symlink());
    if is_link {
        if let Ok(target) = file.canonicalize() {
            if let Some(dir) = target.parent() {
                dirs.push(dir.to_path_buf());
            }
            routes.push(target);
        }
    }
    dirs.sort();
    dirs.dedup();
    Cover { dirs, routes }
}

fn nearest_existing_dir(start: &Path) -> Option<&Path> {
    start.ancestors().find(|dir| dir.is_dir())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_parent_is_covered_by_its_nearest_ancestor() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let file = tmp.path().join("a/b/settings.json");
        let c = cover(&file);
        assert_eq!(c.dirs, vec![tmp.path().to_path_buf()]);
        assert_eq!(c.routes[0], file);
    }

    #[test]
    fn a_symlink_is_covered_by_its_own_and_its_targets_directory() {
        let tmp = tempfile::tempdir().expect("tempdir");
        let real_dir = tmp.path().join("real");
        let link_dir = tmp.path().join("link");
        std::fs::create_dir_all(&real_dir).expect("mkdir");
        std::fs::create_dir_all(&link_dir).expect("mkdir");
        std::fs::write(real_dir.join("s.json"), "{}").expect("write");
        std::os::unix::fs::symlink(real_dir.join("s.json"), link_dir.join("s.json"))
            .expect("symlink");
        let c = cover(&link_dir.join("s.json"));
        let real = real_dir.canonicalize().expect("canonical");
        assert!(c.dirs.contains(&link_dir), "{:?}", c.dirs);
        assert!(c.dirs.contains(&real), "{:?}", c.dirs);
        assert!(c.routes.contains(&real.join("s.json")), "{:?}", c.routes);
    }
}
