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
//! coalesces them, so this module reports every relevant event as it comes —
//! with how it landed ([`Change::landing`]): a file renamed onto the watched path, or
//! written in place and closed by its writer, arrived whole, so settle detection need not
//! wait for more writes.
//!
//! Where completeness cannot be known the host keeps its quiet window: a write in place not
//! closed yet (the writer still has the file open), and every write in place on platforms
//! whose watcher does not report a close (macOS FSEvents, the BSDs' kqueue, a polling
//! watcher) — there only a rename is known whole.
//!
//! Dev mode's directory watches ([`watch_dirs`], in `dirs`) share the same platform watcher:
//! listed directories, each watched on its own, every event reported by path.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{mpsc, Arc, Mutex, PoisonError};

use anyhow::Context;
use mcp_reconcile_kernel::reload::FileSource;
use notify::event::{AccessKind, AccessMode, ModifyKind, RenameMode};
use notify::{EventKind, RecommendedWatcher, RecursiveMode, Watcher as _};
use tokio::sync::mpsc::UnboundedSender;

mod dirs;
pub use dirs::{tree, watch_dirs, DirWatch, TooMany};

/// One change of a watched file, as the watcher saw it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Change {
    /// The file's source (a file listed under several sources reports each).
    pub source: FileSource,
    /// How it landed: whether what is there now is known to be whole.
    pub landing: Landing,
}

/// How a change landed on a watched path, as far as the platform says.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Landing {
    /// Not known to be whole: a write in place whose writer may still have the file open,
    /// creation, removal, a directory or symlink that appeared, and every rename on platforms
    /// that do not say which side a path is (macOS, the BSDs).
    Changed,
    /// A writer that had the file open for writing closed it (Linux: inotify
    /// `IN_CLOSE_WRITE`): the write in place is done. (A writer that reopens it writes a new
    /// change, reported again.)
    Closed,
    /// A file was renamed onto the watched path (Linux: inotify `IN_MOVED_TO`; Windows: the
    /// rename's new name): an editor's rename save, complete on arrival.
    Renamed,
}

impl Landing {
    /// How an event of `kind` landed.
    fn of(kind: &EventKind) -> Self {
        match kind {
            EventKind::Modify(ModifyKind::Name(RenameMode::To)) => Landing::Renamed,
            EventKind::Access(AccessKind::Close(AccessMode::Write)) => Landing::Closed,
            _ => Landing::Changed,
        }
    }
}

impl Change {
    /// A change not known to be whole on arrival.
    fn of(source: FileSource) -> Self {
        Change {
            source,
            landing: Landing::Changed,
        }
    }
}

/// A running watch. Dropping it stops watching its files (directories no other watch needs
/// are unwatched).
pub struct Watcher {
    hub: Arc<Hub>,
    id: u64,
}

impl std::fmt::Debug for Watcher {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Watcher")
            .field("dirs", &self.watched_dirs())
            .finish()
    }
}

impl Watcher {
    /// The directories watched for this watch's files right now (for diagnostics and tests).
    pub fn watched_dirs(&self) -> Vec<PathBuf> {
        let state = self.hub.lock();
        let Some(sub) = state.subs.get(&self.id) else {
            return Vec::new();
        };
        let wanted: BTreeSet<&PathBuf> = sub.arming.covering.iter().flatten().collect();
        wanted
            .into_iter()
            .filter(|dir| state.armed.contains(*dir))
            .cloned()
            .collect()
    }
}

impl Drop for Watcher {
    fn drop(&mut self) {
        let mut state = self.hub.lock();
        state.subs.remove(&self.id);
        state.rearm_and_report(self.id);
    }
}

/// Starts watching `files`; every event that concerns one of them sends a [`Change`] of its
/// [`FileSource`] to `events` (a file listed under several sources sends each).
///
/// Every watch of the process shares one platform watcher (one inotify instance, one
/// thread): a daemon with many sessions uses one instance, not one per session, so it never
/// uses up the user's inotify instances.
///
/// Directories that cannot be watched (e.g. permission denied) are logged
/// and retried on the next event; they do not fail the call.
///
/// # Errors
/// When the platform's file watcher cannot be created (e.g. the inotify
/// instance limit is reached).
pub fn watch(
    files: Vec<(PathBuf, FileSource)>,
    events: UnboundedSender<Change>,
) -> anyhow::Result<Watcher> {
    let hub = Hub::shared()?;
    let id = {
        let mut state = hub.lock();
        state.next += 1;
        let id = state.next;
        state.subs.insert(
            id,
            Sub {
                arming: Arming::new(files),
                events,
            },
        );
        // Nothing to report to the new watch on its first arming: the caller loads everything
        // after starting it.
        state.rearm_and_report(id);
        id
    };
    Ok(Watcher { hub, id })
}

/// The process's one platform watcher and every watch on it.
struct Hub {
    state: Mutex<HubState>,
}

struct HubState {
    watcher: RecommendedWatcher,
    subs: BTreeMap<u64, Sub>,
    /// Directory watches (dev mode).
    dirs: BTreeMap<u64, dirs::DirSub>,
    next: u64,
    /// Directories with a live watch (the union of what every watch needs).
    armed: BTreeSet<PathBuf>,
}

/// One watch: its files and where their events go.
struct Sub {
    arming: Arming,
    events: UnboundedSender<Change>,
}

impl Hub {
    /// The process's hub, started on first use (and again if starting failed before).
    fn shared() -> anyhow::Result<Arc<Hub>> {
        static SHARED: Mutex<Option<Arc<Hub>>> = Mutex::new(None);
        let mut shared = SHARED.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(hub) = shared.as_ref() {
            return Ok(Arc::clone(hub));
        }
        let (raw_tx, raw_rx) = mpsc::channel::<notify::Result<notify::Event>>();
        let watcher = notify::recommended_watcher(raw_tx).context(
            "cannot start the file watcher (inotify/FSEvents); check the OS watch limits",
        )?;
        let hub = Arc::new(Hub {
            state: Mutex::new(HubState {
                watcher,
                subs: BTreeMap::new(),
                dirs: BTreeMap::new(),
                next: 0,
                armed: BTreeSet::new(),
            }),
        });
        let worker = Arc::downgrade(&hub);
        std::thread::Builder::new()
            .name("mcp-reconcile-watch".into())
            .spawn(move || run(raw_rx, &worker))
            .context("cannot start the file watcher thread")?;
        *shared = Some(Arc::clone(&hub));
        Ok(hub)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HubState> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// The worker: maps raw events to each watch's sources and re-arms directory watches.
fn run(raw: mpsc::Receiver<notify::Result<notify::Event>>, hub: &std::sync::Weak<Hub>) {
    for event in raw {
        let event = match event {
            Ok(event) => event,
            Err(e) => {
                tracing::warn!(error = %e, "file watcher error");
                continue;
            }
        };
        if ignored(&event.kind) && !event.need_rescan() {
            continue;
        }
        let Some(hub) = hub.upgrade() else {
            return;
        };
        let landing = Landing::of(&event.kind);
        let mut sends: Vec<(UnboundedSender<Change>, Vec<Change>)> = Vec::new();
        let mut dir_sends: Vec<(UnboundedSender<PathBuf>, PathBuf)> = Vec::new();
        {
            let mut state = hub.lock();
            for path in &event.paths {
                // A watched directory that is gone took its platform watch with it: forget
                // it, so the watch is made again if it comes back.
                if state.armed.contains(path) && !path.is_dir() {
                    state.armed.remove(path);
                }
            }
            for sub in state.dirs.values() {
                let paths = event.paths.iter().filter(|path| sub.covers(path));
                // A lost event queue: every directory may have changed.
                let lost = sub.dirs.iter().filter(|_| event.need_rescan());
                for path in paths.chain(lost) {
                    dir_sends.push((sub.events.clone(), path.clone()));
                }
            }
            let mut hits: BTreeMap<u64, Vec<Change>> = BTreeMap::new();
            for (id, sub) in &state.subs {
                let hit = hits.entry(*id).or_default();
                if event.need_rescan() {
                    hit.extend(sub.arming.files.iter().map(|(_, s)| Change::of(s.clone())));
                }
                for path in &event.paths {
                    if let Some(sources) = sub.arming.routes.get(path) {
                        hit.extend(sources.iter().map(|source| Change {
                            source: source.clone(),
                            landing,
                        }));
                    }
                }
            }
            if event.need_rescan() || reshapes(&event.kind) {
                for (id, changed) in state.rearm() {
                    hits.entry(id)
                        .or_default()
                        .extend(changed.into_iter().map(Change::of));
                }
            }
            for (id, hit) in hits {
                if let Some(sub) = state.subs.get(&id).filter(|_| !hit.is_empty()) {
                    sends.push((sub.events.clone(), hit));
                }
            }
        }
        for (events, path) in dir_sends {
            let _ = events.send(path);
        }
        for (events, hit) in sends {
            let mut seen = BTreeSet::new();
            for change in hit {
                if seen.insert(change.clone()) && events.send(change).is_err() {
                    break;
                }
            }
        }
    }
}

impl HubState {
    /// [`HubState::rearm`], sending what changed to every watch but `except`.
    fn rearm_and_report(&mut self, except: u64) {
        for (id, changed) in self.rearm() {
            if let Some(sub) = self.subs.get(&id).filter(|_| id != except) {
                for source in changed {
                    let _ = sub.events.send(Change::of(source));
                }
            }
        }
    }

    /// Recomputes every watch's directories, watches new directories and unwatches those no
    /// watch needs any more. Returns, per watch, the sources of files whose covering
    /// directories changed (a directory or link target appeared or vanished, so the file may
    /// have changed unseen).
    fn rearm(&mut self) -> Vec<(u64, Vec<FileSource>)> {
        let mut changed: BTreeMap<u64, Vec<FileSource>> = BTreeMap::new();
        // A directory can appear between computing a cover and arming the
        // watch on its parent; computing again once the watches are in place
        // catches it. Bounded: a few levels can appear at once, no more.
        for _ in 0..8 {
            let mut wanted: BTreeSet<PathBuf> = BTreeSet::new();
            for sub in self.dirs.values() {
                wanted.extend(sub.dirs.iter().cloned());
            }
            for (id, sub) in &mut self.subs {
                let moved = sub.arming.cover_again(&mut wanted);
                let list = changed.entry(*id).or_default();
                for source in moved {
                    if !list.contains(&source) {
                        list.push(source);
                    }
                }
            }
            if wanted == self.armed {
                break;
            }
            let mut progress = false;
            for dir in self.armed.difference(&wanted).cloned().collect::<Vec<_>>() {
                // The directory may be gone already (its watch died with it).
                let _ = self.watcher.unwatch(&dir);
                self.armed.remove(&dir);
                progress = true;
            }
            for dir in wanted {
                if self.armed.contains(&dir) {
                    continue;
                }
                match self.watcher.watch(&dir, RecursiveMode::NonRecursive) {
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
        changed.into_iter().filter(|(_, c)| !c.is_empty()).collect()
    }
}

/// Events that say nothing new: open / read / close-without-write (our own reads cause them),
/// and inotify's pairing of a rename's two sides, which follows the `From` and `To` events that
/// already reported each side (a rename save would otherwise be reported twice, and the second
/// report, arriving while its run is under way, would cost a follow-up run).
fn ignored(kind: &EventKind) -> bool {
    match kind {
        EventKind::Access(access) => *access != AccessKind::Close(AccessMode::Write),
        EventKind::Modify(ModifyKind::Name(RenameMode::Both)) => true,
        _ => false,
    }
}

/// Whether an event can change which directories cover a file: anything but writes to a file's
/// content. (An editor's save writes a temporary file beside the watched one, often in several
/// writes: re-arming after each — a `canonicalize` per watched file — delayed the rename that
/// follows them.)
fn reshapes(kind: &EventKind) -> bool {
    !matches!(
        kind,
        EventKind::Modify(ModifyKind::Data(_)) | EventKind::Access(_)
    )
}

/// Which directories must be watched for the files, and which event paths
/// mean which source.
struct Arming {
    files: Vec<(PathBuf, FileSource)>,
    /// Event path → the sources it concerns.
    routes: BTreeMap<PathBuf, Vec<FileSource>>,
    /// Per file (same index as `files`): the directories covering it.
    covering: Vec<Vec<PathBuf>>,
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
            armed_once: false,
        }
    }

    /// Recomputes the directories this watch needs (added to `wanted`) and its routes.
    /// Returns the sources of files whose covering directories changed since the last time.
    fn cover_again(&mut self, wanted: &mut BTreeSet<PathBuf>) -> Vec<FileSource> {
        let mut changed = Vec::new();
        let mut routes: BTreeMap<PathBuf, Vec<FileSource>> = BTreeMap::new();
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
    // Every directory is watched under its real path: watches of one process share one
    // platform watcher, which knows a directory under one path only — two spellings of it
    // (a symlinked project) would steal each other's events and unwatch each other.
    let real = |dir: &Path| dir.canonicalize().unwrap_or_else(|_| dir.to_path_buf());
    let mut dirs = Vec::new();
    let mut routes = vec![file.to_path_buf()];
    let parent = file.parent().unwrap_or(Path::new("/"));
    match nearest_existing_dir(parent) {
        Some(dir) if dir == parent => {
            dirs.push(real(dir));
            // Events name the file by the directory watched: its real path.
            if let (Ok(real), Some(name)) = (parent.canonicalize(), file.file_name()) {
                routes.push(real.join(name));
            }
        }
        Some(ancestor) => {
            // Not there yet: the event that creates the next missing
            // component re-arms (see `Arming::rearm`).
            dirs.push(real(ancestor));
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
