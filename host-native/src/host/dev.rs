//! Dev mode in the session engine (issue 25): a server whose entry says
//! `"dev": {"watch": "src/**/*.ts"}` is restarted when one of those files changes.
//!
//! 1. After every pass the session arms the watches of the servers it admits (a project
//!    entry only once approved: `dev` is covered by its approval hash): for each glob, the
//!    directory its literal prefix names — relative to the server's working directory
//!    ([`server_dir`]), or absolute — and the directories below it as deep as the glob
//!    reaches, walked without following links, skipping `node_modules` and `.git` unless the
//!    glob names them, at most [`MAX_WATCHED_DIRS`] per session: a server whose globs need
//!    more is not watched, and its file and name are in the session's errors.
//! 2. A changed path goes to the kernel's [`DevMatcher`]; each server it matches is a
//!    [`FileSource::DevWatch`] for the reload scheduler, so a burst of saves is one debounced
//!    run like a burst of settings edits. A directory that appeared or vanished re-arms.
//! 3. That run restarts the servers ([`dev::restart`]): a `reconnect` to the same connection
//!    id, make before break like any edited entry, reported with `source changed: PATH`.
//! 4. Each server's [`Brake`] decides whether that run restarts it: a server restarted
//!    [`BRAKE_RESTARTS`](dev::BRAKE_RESTARTS) times within the brake's window (one that writes
//!    into its own watched folder) has its dev restarts paused until its sources are quiet, a
//!    reconnect or a reload; status says so while it lasts (an error line, which the gateway's
//!    attention reads).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use mcp_reconcile_kernel::dev::{
    self, dev_globs, paused_text, Brake, DevMatcher, GlobRoot, MAX_WATCHED_DIRS,
};
use mcp_reconcile_kernel::reload::{Arrival, FileSource};
use tokio::sync::mpsc;

use super::blocking::off_the_loop;
use super::{Backend, Host};
use crate::launch::{server_dir, Launch};
use crate::watcher::{self, DirWatch, TooMany};

/// At most this many changed paths are read at once (the rest on the next turn of the loop).
const BATCH: usize = 4096;

/// The session's dev-mode watches. See the module docs.
pub(super) struct Dev {
    project_dir: PathBuf,
    launch: Option<Arc<Launch>>,
    tx: mpsc::UnboundedSender<PathBuf>,
    rx: mpsc::UnboundedReceiver<PathBuf>,
    watch: Option<DirWatch>,
    /// What the watches were armed for.
    armed: Vec<Spec>,
    /// A watched directory vanished or a directory appeared: walk again.
    stale: bool,
    matcher: DevMatcher,
    dirs: BTreeSet<PathBuf>,
    /// Each watched server's working directory (real path): changed paths are shown
    /// relative to it.
    bases: BTreeMap<String, PathBuf>,
    /// Servers whose sources changed since their last restart, with the first path that did.
    pending: BTreeMap<String, String>,
    /// Servers not watched, and why (the file they come from is added when shown).
    problems: Vec<(String, String)>,
    /// Each restarted server's restart-storm brake.
    brakes: BTreeMap<String, Brake>,
}

/// One server's globs and where relative ones start.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Spec {
    name: String,
    globs: Vec<String>,
    base: PathBuf,
}

impl Dev {
    /// Dev mode for a session of `project_dir` whose servers start in `launch` (a daemon
    /// session's) or this process's directory. Nothing is watched until the first pass.
    pub(super) fn new(project_dir: PathBuf, launch: Option<Arc<Launch>>) -> Dev {
        let (tx, rx) = mpsc::unbounded_channel();
        Dev {
            project_dir,
            launch,
            tx,
            rx,
            watch: None,
            armed: Vec::new(),
            stale: false,
            matcher: DevMatcher::new(),
            dirs: BTreeSet::new(),
            bases: BTreeMap::new(),
            pending: BTreeMap::new(),
            problems: Vec::new(),
            brakes: BTreeMap::new(),
        }
    }

    /// The next changed path. Cancel-safe; pending while nothing is watched.
    pub(super) async fn next(&mut self) -> PathBuf {
        match self.rx.recv().await {
            Some(path) => path,
            None => std::future::pending().await,
        }
    }

    /// The first changed path of each server in `names` that has one, taken: the run that
    /// restarts them is starting at `now`. Only those their [`Brake`] lets restart are
    /// returned.
    fn take(
        &mut self,
        names: impl Iterator<Item = String>,
        now: mcp_reconcile_kernel::Millis,
    ) -> Vec<(String, String)> {
        let mut restarted = Vec::new();
        for name in names {
            let Some(path) = self.pending.remove(&name) else {
                continue;
            };
            if self
                .brakes
                .entry(name.clone())
                .or_default()
                .change(now, &path)
            {
                restarted.push((name, path));
            }
        }
        restarted
    }

    /// The user restarted `names` (a reconnect) or every server (`None`, a reload): their dev
    /// restarts resume.
    pub(super) fn release(&mut self, names: Option<&[String]>) {
        match names {
            None => self.brakes.clear(),
            Some(names) => {
                for name in names {
                    self.brakes.remove(name);
                }
            }
        }
    }

    /// The first path that changed for `name` since its last restart, as shown (relative to
    /// its working directory when inside it).
    pub(super) fn shown(&self, name: &str) -> Option<&str> {
        self.pending.get(name).map(String::as_str)
    }

    /// Notes `paths`; the servers they belong to (each once). Reads only whether a path is a
    /// directory now.
    fn observe(&mut self, paths: &[PathBuf]) -> Vec<String> {
        let mut servers: Vec<String> = Vec::new();
        for path in paths {
            let is_dir = std::fs::symlink_metadata(path).is_ok_and(|m| m.is_dir());
            self.stale |= is_dir || self.dirs.contains(path);
            let Some(text) = path.to_str() else {
                continue;
            };
            for server in self.matcher.servers(text) {
                if !self.pending.contains_key(server) {
                    let shown = self
                        .bases
                        .get(server)
                        .and_then(|base| path.strip_prefix(base).ok())
                        .unwrap_or(path);
                    self.pending
                        .insert(server.to_owned(), shown.display().to_string());
                }
                if !servers.iter().any(|s| s == server) {
                    servers.push(server.to_owned());
                }
            }
        }
        servers
    }

    /// Watches what `specs` need (see the module docs), replacing the current watch.
    fn arm(&mut self, specs: Vec<Spec>, mut problems: Vec<(String, String)>) {
        let mut dirs: BTreeSet<PathBuf> = BTreeSet::new();
        let mut matcher = DevMatcher::new();
        let mut bases = BTreeMap::new();
        for spec in &specs {
            let base = spec
                .base
                .canonicalize()
                .unwrap_or_else(|_| spec.base.clone());
            let left = MAX_WATCHED_DIRS.saturating_sub(dirs.len());
            match server_dirs(spec, &base, left) {
                Ok((mine, patterns)) => {
                    if let Err(e) = matcher.watch(&spec.name, &patterns) {
                        problems.push((spec.name.clone(), e.to_string()));
                        continue;
                    }
                    dirs.extend(mine);
                    bases.insert(spec.name.clone(), base);
                }
                Err(problem) => problems.push((spec.name.clone(), problem)),
            }
        }
        // The new watch before the old one goes: directories both need stay watched.
        self.watch = if dirs.is_empty() {
            None
        } else {
            match watcher::watch_dirs(dirs.clone(), self.tx.clone()) {
                Ok(watch) => Some(watch),
                Err(e) => {
                    problems.extend(specs.iter().map(|s| (s.name.clone(), format!("{e:#}"))));
                    None
                }
            }
        };
        self.armed = specs;
        self.stale = false;
        self.matcher = matcher;
        self.dirs = dirs;
        self.bases = bases;
        self.problems = problems;
    }
}

/// The directories `spec`'s globs need (at most `left`) and its globs anchored at their real
/// directories; or why it cannot be watched.
fn server_dirs(
    spec: &Spec,
    base: &Path,
    left: usize,
) -> Result<(BTreeSet<PathBuf>, Vec<String>), String> {
    let mut dirs = BTreeSet::new();
    let mut patterns = Vec::new();
    for glob in &spec.globs {
        let root = GlobRoot::of(glob);
        let named = base.join(&root.dir);
        let Some(real) = named.canonicalize().ok().filter(|real| real.is_dir()) else {
            // Not there yet: its nearest existing ancestor sees it appear (then the watches
            // are armed again).
            if let Some(ancestor) = named.ancestors().find(|dir| dir.is_dir()) {
                dirs.insert(ancestor.canonicalize().unwrap_or_else(|_| ancestor.into()));
            }
            patterns.push(
                root.anchored(&named.to_string_lossy())
                    .map_err(|e| e.to_string())?,
            );
            continue;
        };
        patterns.push(
            root.anchored(&real.to_string_lossy())
                .map_err(|e| e.to_string())?,
        );
        let budget = left.saturating_sub(dirs.len());
        match watcher::tree(&real, root.depth, |name| root.descends(name), budget) {
            Ok(found) => dirs.extend(found),
            Err(TooMany) => {
                return Err(format!(
                    "its dev.watch glob \"{glob}\" needs more than {budget} directories under {} \
                     (a session watches at most {MAX_WATCHED_DIRS} for dev mode; node_modules \
                     and .git are skipped unless the glob names them); narrow it to the \
                     server's sources, e.g. \"src/**/*.ts\"",
                    real.display()
                ))
            }
        }
    }
    Ok((dirs, patterns))
}

impl<B: Backend> Host<B> {
    /// Arms the dev-mode watches for the servers admitted now, unless they are armed for
    /// exactly these already (and no directory appeared or vanished since).
    pub(super) fn arm_dev(&mut self) {
        let trusted = self.snapshot.as_ref().is_some_and(|s| s.trusted);
        let mut specs = Vec::new();
        let mut problems = Vec::new();
        for (name, config) in self.desired.iter() {
            if !trusted || self.gating.denial(name, config).is_some() {
                continue;
            }
            match dev_globs(config) {
                Ok(globs) if globs.is_empty() => {}
                Ok(globs) => specs.push(Spec {
                    name: name.clone(),
                    globs,
                    base: server_dir(
                        config,
                        Some(&self.dev.project_dir),
                        self.dev.launch.as_deref(),
                    ),
                }),
                Err(e) => problems.push((name.clone(), e.to_string())),
            }
        }
        // A server no longer configured takes its brake with it.
        let desired = &self.desired;
        self.dev.brakes.retain(|name, _| desired.contains_key(name));
        if specs == self.dev.armed && !self.dev.stale {
            return;
        }
        off_the_loop(|| self.dev.arm(specs, problems));
    }

    /// Changed paths arrived (`first`, and what else is queued): each server they belong to
    /// joins the scheduler's next run.
    pub(super) fn handle_source_change(&mut self, first: PathBuf) {
        let mut paths = vec![first];
        while paths.len() < BATCH {
            match self.dev.rx.try_recv() {
                Ok(path) => paths.push(path),
                Err(_) => break,
            }
        }
        let servers = off_the_loop(|| self.dev.observe(&paths));
        let now = self.now();
        for server in servers {
            // Not complete until quiet: a burst of saves is one restart.
            self.scheduler
                .handle_file_arrival(now, FileSource::DevWatch(server), Arrival::Partial);
        }
        if self.dev.stale {
            self.arm_dev();
        }
    }

    /// The servers a pass restarts for changed sources, with the first path that changed:
    /// those named in `changed` (every one waiting for a manual or the start-up run).
    pub(super) fn take_source_changes(
        &mut self,
        changed: Option<&[FileSource]>,
    ) -> Vec<(String, String)> {
        let names: Vec<String> = match changed {
            None => self.dev.pending.keys().cloned().collect(),
            Some(sources) => sources
                .iter()
                .filter_map(|source| match source {
                    FileSource::DevWatch(name) => Some(name.clone()),
                    _ => None,
                })
                .collect(),
        };
        let now = self.now();
        self.dev.take(names.into_iter(), now)
    }

    /// The servers dev mode cannot watch, each with its file and why; then those whose dev
    /// restarts are paused, and why.
    pub(super) fn dev_problems(&self) -> Vec<String> {
        let mut problems = self.dev_off();
        problems.extend(self.dev.brakes.iter().filter_map(|(name, brake)| {
            let paused = brake.paused().filter(|_| self.desired.contains_key(name))?;
            let shown = dev::Paused {
                path: crate::display::safe(&paused.path).into_owned(),
                ..paused.clone()
            };
            Some(paused_text(&crate::display::safe(name), &shown))
        }));
        problems
    }

    /// The servers dev mode cannot watch, each with its file and why.
    fn dev_off(&self) -> Vec<String> {
        if self.dev.problems.is_empty() {
            return Vec::new();
        }
        self.dev
            .problems
            .iter()
            .map(|(name, why)| {
                let origin = self.snapshot.as_ref().and_then(|s| s.origin(name));
                let file = origin.map_or_else(
                    || "its settings".to_owned(),
                    |o| o.place().display().to_string(),
                );
                format!("dev mode is off for server \"{name}\" ({file}): {why}")
            })
            .collect()
    }
}

/// The plan with the servers whose sources changed restarted (see [`dev::restart`]).
pub(super) fn restart(
    plan: mcp_reconcile_kernel::plan::Plan,
    changes: &[(String, String)],
    desired: &mcp_reconcile_kernel::Servers,
) -> mcp_reconcile_kernel::plan::Plan {
    if changes.is_empty() {
        return plan;
    }
    let names: Vec<String> = changes.iter().map(|(name, _)| name.clone()).collect();
    dev::restart(plan, &names, desired)
}
