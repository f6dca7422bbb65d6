//! Reload scheduling (SPEC §8): one shared trailing debounce over every
//! watched input, at most one reconcile at a time, and exactly one coalesced
//! follow-up for whatever was requested while a run was active.

use indexmap::IndexSet;
use serde::{Deserialize, Serialize};

use crate::time::Millis;

/// The quiet period a file change waits for before it is acted on, unless the
/// host configures another (`--debounce-ms`).
pub const DEFAULT_DEBOUNCE: Millis = Millis(300);

/// The default quiet window of settle detection: a change whose files are all complete is
/// applied once no further event arrived for this long.
pub const DEFAULT_QUIET: Millis = Millis(25);

/// A watched input whose change the host reports (SPEC §8, §13.1).
///
/// Exhaustive on purpose: a host must decide how to reload every kind, so a
/// new kind should fail to compile in a host that does not know it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(tag = "kind", content = "id", rename_all = "kebab-case")]
pub enum FileSource {
    /// A settings layer, named by the host (e.g. `"user"`, `"workspace"`).
    Settings(String),
    /// The project's `.mcp.json`.
    McpJson,
    /// The approvals file.
    Approvals,
    /// A `--mcp-config` file, named by the host (usually its path).
    McpConfig(String),
    /// A language-server file (SPEC §14.1), named by the host (`"user"`, `"project"`).
    LspFile(String),
    /// The language-server approvals file (SPEC §14.3).
    LspApprovals,
    /// The pinned tool definitions file (issue 40, [`crate::pin`]): no pass; the session
    /// re-reads the baselines and re-decides what it withholds.
    Pins,
    /// A source file of the server named, matched by its `dev.watch` globs (dev mode,
    /// [`crate::dev`]): no input to reload; the run restarts that server.
    DevWatch(String),
}

/// How a watched input's change arrived, as far as the host can tell (settle detection).
///
/// The scheduler waits after a change according to the least settled source pending: the full
/// debounce while any is [`Arrival::Partial`], the quiet window while any was
/// [`Arrival::Written`], and nothing when every pending source arrived
/// [`Arrival::Closed`] or [`Arrival::Replaced`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Arrival {
    /// Not known to be complete: it did not parse (empty, half-written), or it was not checked.
    Partial,
    /// It parses now, but it was written in place: the writer may not be done (an editor that
    /// truncates, then writes in several calls, then closes).
    Written,
    /// It parses, and the writer that wrote it in place closed it (Linux: inotify's
    /// `IN_CLOSE_WRITE`): that write is done, as whole as a rename. The changes reported of
    /// the same file while it was being written (pending [`Arrival::Written`] or
    /// [`Arrival::Partial`], nothing else pending) are one save with it, not a burst.
    Closed,
    /// It parses, and it arrived whole: a complete file was renamed over it (how most editors
    /// save). Nothing more of this save can follow, so the run need not wait.
    Replaced,
}

/// How a reconcile run ended. Both end the run the same way for scheduling:
/// a failure alone never schedules a rerun.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Outcome {
    /// The run applied its plan.
    Ok,
    /// The run failed (the host reports the error itself).
    Failed,
}

/// What the host must do next, from [`ReloadScheduler::poll_step`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// Start reconcile run number `run`: reload the changed inputs, compute
    /// the next state (SPEC §7 `hotReload`), execute the plan, then report
    /// [`ReloadScheduler::handle_reconcile_done`].
    Reconcile {
        /// The run's number, counting from 1; run 1 of a scheduler made with
        /// [`ReloadScheduler::starting`] is the start-up reconcile.
        run: u64,
        /// The inputs that changed since the previous run started, each once,
        /// in the order they first changed. The host reloads only these
        /// (every input on the start-up run or when `manual` is set).
        sources: Vec<FileSource>,
        /// A manual reload (`reload` command, SIGHUP, `/reload`) is among the
        /// requests this run answers; the host reloads every input.
        manual: bool,
    },
}

/// How many times each thing happened; for tests and diagnostics.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct ReloadCounts {
    /// File events handled.
    pub file_events: u64,
    /// Manual reloads handled.
    pub manual_reloads: u64,
    /// Times the debounce ran out.
    pub debounce_fires: u64,
    /// Runs started (steps handed out).
    pub runs_started: u64,
    /// Runs that ended with [`Outcome::Ok`].
    pub runs_succeeded: u64,
    /// Runs that ended with [`Outcome::Failed`].
    pub runs_failed: u64,
    /// Completions reported while no run was active (ignored).
    pub stray_completions: u64,
}

/// The reload queue of SPEC §8 as a sans-IO state machine: file events and
/// manual reloads go in, reconcile runs come out, time is passed in.
///
/// # Drive loop
///
/// 1. Create it with [`ReloadScheduler::starting`]; the start-up reconcile is
///    run 1 and is ready at once ([`ReloadScheduler::new`] makes one without
///    a start-up run; [`ReloadScheduler::start`] adds it later).
/// 2. Feed every observation as it happens, with the current time:
///    [`handle_file_event`](Self::handle_file_event) for each change of a
///    watched input, [`handle_manual_reload`](Self::handle_manual_reload),
///    and [`handle_reconcile_done`](Self::handle_reconcile_done) when a run
///    ends (successfully or not).
/// 3. After each input, call [`poll_step`](Self::poll_step) until it
///    returns `None`, and execute each [`Step::Reconcile`] (it returns at
///    most one before that run is reported done).
/// 4. Call [`poll_timeout`](Self::poll_timeout) and arm one timer for the
///    returned instant (none if `None`), replacing any earlier timer.
/// 5. When the timer fires, call [`handle_timeout`](Self::handle_timeout)
///    with the current time and go back to step 3.
///
/// # Rules
///
/// * Every file event restarts one shared trailing debounce; the changed
///   sources accumulate, and the next run takes them all. With settle
///   detection ([`ReloadScheduler::with_quiet`]) its length follows the least
///   settled pending source ([`Arrival`]): the full debounce, the quiet
///   window, or none for a lone whole save (renamed into place, or closed by its writer).
/// * When the debounce runs out, or on a manual reload, a run is requested.
///   A manual reload skips the debounce: it cancels a pending one (the run it
///   requests takes that debounce's sources) and never waits for one.
/// * At most one run is active. A request during a run marks it dirty; when
///   the run ends (either outcome) exactly one follow-up starts if it was
///   dirty, none otherwise. A follow-up answers every request made during the
///   run, with the latest sources.
/// * Chosen timing of the follow-up: if the debounce already ran out during
///   the run (or a manual reload or the start-up run was requested), the
///   follow-up starts the moment the run ends; if a file event's debounce is
///   still pending when the run ends, the follow-up waits for it, so a file
///   that is still being written is not read half-way and the whole burst is
///   still answered by one run.
/// * Starting a run clears the pending debounce: the run reloads its sources.
///
/// It never panics, whatever the order of calls: a completion with no active
/// run is ignored, and a `now` earlier than one seen before is taken as the
/// latest `now` seen (time never goes backwards).
#[derive(Clone, Debug)]
pub struct ReloadScheduler {
    debounce: Millis,
    /// The wait after an event when every pending source is complete (settle detection); the
    /// debounce when it is not shorter.
    quiet: Millis,
    /// Pending sources whose last change was not complete (it did not parse, or it was not
    /// checked): while any is left, the full debounce applies.
    unsettled: IndexSet<FileSource>,
    /// Pending sources whose last change was complete but written in place: while any is left
    /// (and none is unsettled), the quiet window applies; when none is, a change applies at
    /// once.
    written: IndexSet<FileSource>,
    /// The latest `now` seen; inputs never move it backwards.
    now: Millis,
    /// The last file event, while its debounce is pending.
    last_event: Option<Millis>,
    /// When the pending debounce runs out.
    deadline: Option<Millis>,
    /// Sources changed since the last run started, in first-change order.
    pending: IndexSet<FileSource>,
    /// A run has been requested and not yet started (while a run is active:
    /// the dirty flag).
    request: Option<RunRequest>,
    /// The active run's number.
    running: Option<u64>,
    /// The number of the last run started; 0 before the first.
    last_run: u64,
    /// When the last run that took saved changes started: a whole save this soon after it
    /// waits the quiet window, so a burst of saves is one run at once and one after the burst.
    /// (The start-up run and a manual reload with nothing pending are no save: the first save
    /// after them is applied at once.)
    last_start: Option<Millis>,
    /// A change arrived while another was pending: a burst, which waits at least the quiet
    /// window after its last event.
    burst: bool,
    last_outcome: Option<Outcome>,
    counts: ReloadCounts,
}

/// What the outstanding requests ask for, merged.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct RunRequest {
    /// A manual reload is among them.
    manual: bool,
    /// Start without waiting for a pending debounce (manual or start-up).
    immediate: bool,
}

impl RunRequest {
    const DEBOUNCED: RunRequest = RunRequest {
        manual: false,
        immediate: false,
    };
    const STARTUP: RunRequest = RunRequest {
        manual: false,
        immediate: true,
    };
    const MANUAL: RunRequest = RunRequest {
        manual: true,
        immediate: true,
    };

    fn merge(self, other: RunRequest) -> RunRequest {
        RunRequest {
            manual: self.manual || other.manual,
            immediate: self.immediate || other.immediate,
        }
    }
}

impl Default for ReloadScheduler {
    fn default() -> Self {
        ReloadScheduler::new(DEFAULT_DEBOUNCE)
    }
}

impl ReloadScheduler {
    /// An idle scheduler with the given debounce and no start-up run; time
    /// starts at [`Millis::ZERO`].
    pub fn new(debounce: Millis) -> Self {
        ReloadScheduler {
            debounce,
            quiet: debounce,
            unsettled: IndexSet::new(),
            written: IndexSet::new(),
            now: Millis::ZERO,
            last_event: None,
            deadline: None,
            pending: IndexSet::new(),
            request: None,
            running: None,
            last_run: 0,
            last_start: None,
            burst: false,
            last_outcome: None,
            counts: ReloadCounts::default(),
        }
    }

    /// A scheduler whose start-up reconcile, run 1, is ready at once.
    pub fn starting(debounce: Millis) -> Self {
        let mut scheduler = ReloadScheduler::new(debounce);
        scheduler.start();
        scheduler
    }

    /// Requests the start-up reconcile as run 1, without waiting for any
    /// debounce. Does nothing once a run has been started.
    pub fn start(&mut self) {
        if self.last_run == 0 && self.running.is_none() {
            self.request_run(RunRequest::STARTUP);
        }
    }

    /// Turns settle detection on: after a change reported complete
    /// ([`Self::handle_file_arrival`]), a run waits only `quiet` (when shorter than the
    /// debounce) after the last event — as long as every pending source is complete — and not
    /// at all when every pending source arrived whole: renamed into place
    /// ([`Arrival::Replaced`]) or closed by its writer ([`Arrival::Closed`]).
    pub fn with_quiet(mut self, quiet: Millis) -> Self {
        self.quiet = quiet;
        self
    }

    /// The wait after the last event for what is pending now.
    fn wait(&self) -> Millis {
        if !self.unsettled.is_empty() {
            self.debounce
        } else if !self.written.is_empty()
            || self.quiet >= self.debounce
            || self.burst
            || self
                .last_start
                .is_some_and(|at| self.now.0.saturating_sub(at.0) < self.quiet.0)
        {
            // Without settle detection (the quiet window is the debounce) every change waits;
            // so does a save that joins others, or comes right after a run started (a burst
            // goes on: one run after it).
            self.quiet.min(self.debounce)
        } else {
            Millis::ZERO
        }
    }

    /// Changes the quiet period. A pending debounce is re-timed from its last
    /// file event (it may then be due at once: see [`Self::poll_timeout`]).
    pub fn set_debounce(&mut self, debounce: Millis) {
        self.debounce = debounce;
        if let (Some(last), Some(_)) = (self.last_event, self.deadline) {
            self.deadline = Some(last.saturating_add(self.wait().0));
        }
    }

    /// The quiet period in force.
    pub fn debounce(&self) -> Millis {
        self.debounce
    }

    /// A watched input changed: `source` joins the set the next run reloads
    /// and the shared debounce restarts from `now`.
    pub fn handle_file_event(&mut self, now: Millis, source: FileSource) {
        self.handle_file_change(now, source, false);
    }

    /// A watched input changed, and whether what it holds now is `complete` (it parses): this
    /// is [`Self::handle_file_arrival`] with [`Arrival::Written`] or [`Arrival::Partial`].
    pub fn handle_file_change(&mut self, now: Millis, source: FileSource, complete: bool) {
        let arrival = if complete {
            Arrival::Written
        } else {
            Arrival::Partial
        };
        self.handle_file_arrival(now, source, arrival);
    }

    /// A watched input changed and arrived as `arrival`: `source` joins the set the next run
    /// reloads and the shared debounce restarts from `now`, as long as the least settled
    /// pending source needs ([`Arrival`]). A change that needs no wait (every pending source
    /// [`Arrival::Replaced`] or [`Arrival::Closed`], and no run started within the quiet
    /// window) requests its run at once: during a run, that is the one follow-up. A burst of
    /// whole saves is so one run at its first save and one after its last; the writes of one
    /// save in place before its close are not a burst.
    pub fn handle_file_arrival(&mut self, now: Millis, source: FileSource, arrival: Arrival) {
        self.advance(now);
        self.counts.file_events = self.counts.file_events.saturating_add(1);
        let same_write = self.writing_only(&source) && arrival != Arrival::Replaced;
        self.unsettled.shift_remove(&source);
        self.written.shift_remove(&source);
        self.burst |= !self.pending.is_empty() && !same_write;
        match arrival {
            Arrival::Partial => {
                self.unsettled.insert(source.clone());
            }
            Arrival::Written => {
                self.written.insert(source.clone());
            }
            Arrival::Closed | Arrival::Replaced => {}
        }
        self.pending.insert(source);
        self.last_event = Some(self.now);
        self.deadline = Some(self.now.saturating_add(self.wait().0));
        if matches!(arrival, Arrival::Closed | Arrival::Replaced) {
            // Due now: the run is requested by this call, not by a timer the host arms.
            self.advance(self.now);
        }
    }

    /// Whether the only pending change is `source` being written in place, not closed yet (its
    /// last arrival [`Arrival::Written`] or [`Arrival::Partial`]): what arrives of it next
    /// (a further write, or its close) is the same save, not a burst.
    fn writing_only(&self, source: &FileSource) -> bool {
        self.pending.len() == 1
            && (self.written.contains(source) || self.unsettled.contains(source))
    }

    /// A manual reload: requests a run without waiting for the debounce. A
    /// pending debounce is cancelled; the requested run takes its sources.
    pub fn handle_manual_reload(&mut self, now: Millis) {
        self.advance(now);
        self.counts.manual_reloads = self.counts.manual_reloads.saturating_add(1);
        self.deadline = None;
        self.last_event = None;
        self.request_run(RunRequest::MANUAL);
    }

    /// The active run ended. Ignored if no run is active.
    pub fn handle_reconcile_done(&mut self, now: Millis, outcome: Outcome) {
        self.advance(now);
        if self.running.take().is_none() {
            self.counts.stray_completions = self.counts.stray_completions.saturating_add(1);
            return;
        }
        self.last_outcome = Some(outcome);
        match outcome {
            Outcome::Ok => {
                self.counts.runs_succeeded = self.counts.runs_succeeded.saturating_add(1);
            }
            Outcome::Failed => self.counts.runs_failed = self.counts.runs_failed.saturating_add(1),
        }
    }

    /// The timer armed from [`Self::poll_timeout`] fired (early or late calls
    /// are harmless: only a debounce due by `now` runs out).
    pub fn handle_timeout(&mut self, now: Millis) {
        self.advance(now);
    }

    /// When the host should call [`Self::handle_timeout`]: the instant the
    /// pending debounce runs out, or `None` if none is pending. It may lie in
    /// the past; then call it at once.
    pub fn poll_timeout(&self) -> Option<Millis> {
        self.deadline
    }

    /// The next thing to do. Returns a [`Step::Reconcile`] when a run is
    /// requested, none is active and the request need not wait for a pending
    /// debounce; the run counts as active from then on.
    pub fn poll_step(&mut self) -> Option<Step> {
        if self.running.is_some() {
            return None;
        }
        let request = self.request?;
        if !request.immediate && self.deadline.is_some() {
            return None;
        }
        self.request = None;
        self.deadline = None;
        self.last_event = None;
        let run = self.last_run.saturating_add(1);
        self.last_run = run;
        if !self.pending.is_empty() {
            self.last_start = Some(self.now);
        }
        self.running = Some(run);
        self.counts.runs_started = self.counts.runs_started.saturating_add(1);
        self.unsettled.clear();
        self.written.clear();
        self.burst = false;
        let sources = std::mem::take(&mut self.pending).into_iter().collect();
        Some(Step::Reconcile {
            run,
            sources,
            manual: request.manual,
        })
    }

    /// Whether a run is active (handed out and not yet reported done).
    pub fn is_running(&self) -> bool {
        self.running.is_some()
    }

    /// The active run's number.
    pub fn current_run(&self) -> Option<u64> {
        self.running
    }

    /// The number of the last run started; 0 before the first.
    pub fn last_run(&self) -> u64 {
        self.last_run
    }

    /// How the last completed run ended.
    pub fn last_outcome(&self) -> Option<Outcome> {
        self.last_outcome
    }

    /// Whether a run is active and a follow-up is owed when it ends: a run
    /// was requested during it, or a file event's debounce is pending.
    pub fn is_dirty(&self) -> bool {
        self.running.is_some() && (self.request.is_some() || self.deadline.is_some())
    }

    /// Whether a run has been requested and not yet started.
    pub fn is_run_requested(&self) -> bool {
        self.request.is_some()
    }

    /// The sources the next run will reload, in first-change order.
    pub fn pending_sources(&self) -> impl ExactSizeIterator<Item = &FileSource> + '_ {
        self.pending.iter()
    }

    /// The latest `now` seen.
    pub fn now(&self) -> Millis {
        self.now
    }

    /// How many times each thing happened.
    pub fn counts(&self) -> ReloadCounts {
        self.counts
    }

    /// Moves time forward (never back) and lets a due debounce run out.
    fn advance(&mut self, now: Millis) {
        self.now = self.now.max(now);
        let Some(deadline) = self.deadline else {
            return;
        };
        if deadline > self.now {
            return;
        }
        self.deadline = None;
        self.last_event = None;
        self.counts.debounce_fires = self.counts.debounce_fires.saturating_add(1);
        // A debounce whose sources an earlier run already took has nothing
        // left to reload.
        if !self.pending.is_empty() {
            self.request_run(RunRequest::DEBOUNCED);
        }
    }

    fn request_run(&mut self, request: RunRequest) {
        self.request = Some(match self.request {
            Some(earlier) => earlier.merge(request),
            None => request,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const D: Millis = DEFAULT_DEBOUNCE;

    fn settings(layer: &str) -> FileSource {
        FileSource::Settings(layer.to_owned())
    }

    fn reconcile(run: u64, sources: &[FileSource], manual: bool) -> Option<Step> {
        Some(Step::Reconcile {
            run,
            sources: sources.to_vec(),
            manual,
        })
    }

    /// A scheduler whose start-up run 1 has already ended.
    fn idle_after_startup() -> ReloadScheduler {
        let mut s = ReloadScheduler::starting(D);
        assert_eq!(s.poll_step(), reconcile(1, &[], false));
        s.handle_reconcile_done(Millis(0), Outcome::Ok);
        assert_eq!(s.poll_step(), None);
        s
    }

    #[test]
    fn startup_is_run_one_and_ready_at_once() {
        let mut s = ReloadScheduler::starting(D);
        assert_eq!(s.poll_timeout(), None);
        assert_eq!(s.poll_step(), reconcile(1, &[], false));
        assert!(s.is_running());
        assert_eq!(s.poll_step(), None);
        s.start();
        s.handle_reconcile_done(Millis(5), Outcome::Ok);
        assert_eq!(s.poll_step(), None, "start() after run 1 does nothing");
    }

    #[test]
    fn events_during_startup_give_one_follow_up() {
        let mut s = ReloadScheduler::starting(D);
        assert!(s.poll_step().is_some());
        s.handle_file_event(Millis(10), FileSource::McpJson);
        assert!(s.is_dirty());
        s.handle_timeout(Millis(310));
        assert_eq!(s.poll_step(), None, "never two runs at once");
        s.handle_reconcile_done(Millis(400), Outcome::Ok);
        assert_eq!(s.poll_step(), reconcile(2, &[FileSource::McpJson], false));
    }

    #[test]
    fn burst_of_events_coalesces_into_one_run() {
        let mut s = idle_after_startup();
        s.handle_file_event(Millis(0), settings("user"));
        s.handle_file_event(Millis(100), FileSource::McpJson);
        s.handle_file_event(Millis(250), settings("user"));
        assert_eq!(
            s.poll_timeout(),
            Some(Millis(550)),
            "each event restarts it"
        );
        s.handle_timeout(Millis(549));
        assert_eq!(s.poll_step(), None);
        s.handle_timeout(Millis(550));
        assert_eq!(
            s.poll_step(),
            reconcile(2, &[settings("user"), FileSource::McpJson], false)
        );
        assert_eq!(s.poll_timeout(), None);
        assert_eq!(s.counts().debounce_fires, 1);
    }

    #[test]
    fn manual_reload_skips_the_debounce_and_takes_its_sources() {
        let mut s = idle_after_startup();
        s.handle_file_event(Millis(0), FileSource::Approvals);
        s.handle_manual_reload(Millis(10));
        assert_eq!(s.poll_timeout(), None);
        assert_eq!(s.poll_step(), reconcile(2, &[FileSource::Approvals], true));
        s.handle_reconcile_done(Millis(20), Outcome::Ok);
        s.handle_timeout(Millis(1000));
        assert_eq!(s.poll_step(), None, "no stale run for a cancelled debounce");
    }

    #[test]
    fn requests_during_a_run_give_exactly_one_follow_up() {
        let mut s = idle_after_startup();
        s.handle_manual_reload(Millis(0));
        assert!(s.poll_step().is_some());
        s.handle_manual_reload(Millis(1));
        s.handle_file_event(Millis(2), settings("workspace"));
        s.handle_timeout(Millis(302));
        s.handle_manual_reload(Millis(303));
        assert!(s.is_dirty());
        s.handle_reconcile_done(Millis(400), Outcome::Ok);
        assert_eq!(s.poll_step(), reconcile(3, &[settings("workspace")], true));
        s.handle_reconcile_done(Millis(500), Outcome::Ok);
        assert_eq!(s.poll_step(), None);
        assert_eq!(s.poll_timeout(), None);
    }

    #[test]
    fn a_failure_alone_never_schedules_a_rerun() {
        let mut s = idle_after_startup();
        s.handle_manual_reload(Millis(0));
        assert!(s.poll_step().is_some());
        s.handle_reconcile_done(Millis(50), Outcome::Failed);
        assert_eq!(s.poll_step(), None);
        assert_eq!(s.poll_timeout(), None);
        assert_eq!(s.last_outcome(), Some(Outcome::Failed));
        assert_eq!(s.counts().runs_failed, 1);
    }

    #[test]
    fn a_failed_dirty_run_still_gets_its_one_follow_up() {
        let mut s = idle_after_startup();
        s.handle_manual_reload(Millis(0));
        assert!(s.poll_step().is_some());
        s.handle_manual_reload(Millis(5));
        s.handle_reconcile_done(Millis(50), Outcome::Failed);
        assert_eq!(s.poll_step(), reconcile(3, &[], true));
        s.handle_reconcile_done(Millis(60), Outcome::Failed);
        assert_eq!(s.poll_step(), None);
    }

    #[test]
    fn debounce_firing_during_a_run_marks_dirty_and_follows_at_run_end() {
        let mut s = idle_after_startup();
        s.handle_manual_reload(Millis(0));
        assert!(s.poll_step().is_some());
        s.handle_file_event(Millis(10), FileSource::McpConfig("/tmp/x.json".into()));
        s.handle_timeout(Millis(310));
        assert_eq!(s.poll_step(), None);
        assert!(s.is_run_requested());
        s.handle_reconcile_done(Millis(900), Outcome::Ok);
        assert_eq!(
            s.poll_step(),
            reconcile(3, &[FileSource::McpConfig("/tmp/x.json".into())], false)
        );
    }

    #[test]
    fn follow_up_waits_for_a_debounce_still_pending_at_run_end() {
        let mut s = idle_after_startup();
        s.handle_manual_reload(Millis(0));
        assert!(s.poll_step().is_some());
        s.handle_file_event(Millis(10), settings("user"));
        s.handle_timeout(Millis(310)); // fired: dirty
        s.handle_file_event(Millis(350), FileSource::McpJson); // new burst
        s.handle_reconcile_done(Millis(400), Outcome::Ok);
        assert_eq!(s.poll_step(), None, "waits for the quiet period");
        assert_eq!(s.poll_timeout(), Some(Millis(650)));
        s.handle_timeout(Millis(650));
        assert_eq!(
            s.poll_step(),
            reconcile(3, &[settings("user"), FileSource::McpJson], false)
        );
        s.handle_reconcile_done(Millis(700), Outcome::Ok);
        assert_eq!(s.poll_step(), None, "one follow-up for both");
    }

    #[test]
    fn manual_during_a_run_does_not_wait_for_a_pending_debounce() {
        let mut s = idle_after_startup();
        s.handle_manual_reload(Millis(0));
        assert!(s.poll_step().is_some());
        s.handle_manual_reload(Millis(5));
        s.handle_file_event(Millis(10), FileSource::Approvals);
        s.handle_reconcile_done(Millis(20), Outcome::Ok);
        assert_eq!(s.poll_step(), reconcile(3, &[FileSource::Approvals], true));
        assert_eq!(s.poll_timeout(), None);
    }

    #[test]
    fn completion_without_a_run_is_ignored() {
        let mut s = ReloadScheduler::new(D);
        s.handle_reconcile_done(Millis(5), Outcome::Ok);
        s.handle_reconcile_done(Millis(6), Outcome::Failed);
        assert_eq!(s.poll_step(), None);
        assert_eq!(s.counts().stray_completions, 2);
        assert_eq!(s.last_outcome(), None);
    }

    #[test]
    fn time_going_backwards_is_clamped() {
        let mut s = idle_after_startup();
        s.handle_file_event(Millis(1000), FileSource::McpJson);
        s.handle_file_event(Millis(10), FileSource::Approvals);
        assert_eq!(s.now(), Millis(1000));
        assert_eq!(s.poll_timeout(), Some(Millis(1300)));
        s.handle_timeout(Millis(20));
        assert_eq!(s.poll_step(), None);
        s.handle_timeout(Millis(1300));
        assert!(s.poll_step().is_some());
    }

    #[test]
    fn a_late_host_still_fires_the_due_debounce_first() {
        let mut s = idle_after_startup();
        s.handle_file_event(Millis(0), FileSource::McpJson);
        // The host never called handle_timeout at 300: the debounce ran out
        // (a run is requested) but the new burst's debounce is pending, so
        // the run waits for it and answers both.
        s.handle_file_event(Millis(1000), FileSource::Approvals);
        assert_eq!(s.poll_step(), None, "the ready run waits for the new burst");
        s.handle_timeout(Millis(1300));
        assert_eq!(
            s.poll_step(),
            reconcile(2, &[FileSource::McpJson, FileSource::Approvals], false)
        );
    }

    #[test]
    fn zero_debounce_fires_on_the_next_timeout_call() {
        let mut s = ReloadScheduler::new(Millis::ZERO);
        s.handle_file_event(Millis(7), FileSource::McpJson);
        assert_eq!(s.poll_timeout(), Some(Millis(7)));
        s.handle_timeout(Millis(7));
        assert_eq!(s.poll_step(), reconcile(1, &[FileSource::McpJson], false));
    }

    #[test]
    fn set_debounce_retimes_the_pending_debounce() {
        let mut s = ReloadScheduler::new(D);
        s.handle_file_event(Millis(100), FileSource::McpJson);
        s.set_debounce(Millis(50));
        assert_eq!(s.debounce(), Millis(50));
        assert_eq!(s.poll_timeout(), Some(Millis(150)));
        s.handle_file_event(Millis(120), FileSource::McpJson);
        assert_eq!(s.poll_timeout(), Some(Millis(170)));
    }

    #[test]
    fn huge_times_saturate() {
        let mut s = ReloadScheduler::new(Millis(u64::MAX));
        s.handle_file_event(Millis(u64::MAX - 1), FileSource::McpJson);
        assert_eq!(s.poll_timeout(), Some(Millis(u64::MAX)));
        s.handle_timeout(Millis(u64::MAX));
        assert!(s.poll_step().is_some());
    }

    #[test]
    fn source_serializes_with_kind_and_id() {
        let text = serde_json::to_string(&vec![settings("user"), FileSource::McpJson]).ok();
        assert_eq!(
            text.as_deref(),
            Some(r#"[{"kind":"settings","id":"user"},{"kind":"mcp-json"}]"#)
        );
    }
}
