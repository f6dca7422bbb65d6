//! Properties of the reload scheduler (SPEC §8), checked against a log of
//! what a well-behaved host saw while driving it with a virtual clock through
//! a random script of steps.

use mcp_reconcile_kernel::reload::{self, FileSource, Outcome, ReloadScheduler};
use mcp_reconcile_kernel::Millis;
use proptest::prelude::*;

fn source(i: u8) -> FileSource {
    match i % 5 {
        0 => FileSource::Settings("user".into()),
        1 => FileSource::Settings("workspace".into()),
        2 => FileSource::McpJson,
        3 => FileSource::Approvals,
        _ => FileSource::McpConfig("extra.json".into()),
    }
}

/// One step of a host's life.
#[derive(Clone, Debug)]
enum Step {
    /// Let time pass (timers fire on the way).
    Advance(u64),
    /// A watched input changed.
    Event(u8),
    /// `/reload`, SIGHUP, ...
    Manual,
    /// The active run ends (with no active run: a stray completion).
    Finish(bool),
}

fn step() -> impl Strategy<Value = Step> {
    prop_oneof![
        4 => (0u64..700).prop_map(Step::Advance),
        4 => any::<u8>().prop_map(Step::Event),
        1 => Just(Step::Manual),
        3 => any::<bool>().prop_map(Step::Finish),
    ]
}

fn debounce() -> impl Strategy<Value = u64> {
    prop_oneof![Just(0u64), Just(1), Just(300), 0u64..500]
}

/// What the host saw, in order.
#[derive(Clone, Debug, PartialEq)]
enum Entry {
    Startup,
    Event(FileSource),
    Manual,
    /// The host's timer fired and the debounce ran out.
    Fire,
    Start {
        run: u64,
        sources: Vec<FileSource>,
        manual: bool,
    },
    End {
        run: u64,
    },
    Stray,
}

impl Entry {
    fn is_request(&self) -> bool {
        matches!(self, Entry::Startup | Entry::Manual | Entry::Fire)
    }
}

/// A host following the documented drive loop, with a virtual clock.
struct Host {
    scheduler: ReloadScheduler,
    debounce: u64,
    now: u64,
    active: Option<u64>,
    last_event_at: Option<u64>,
    log: Vec<(u64, Entry)>,
}

impl Host {
    fn new(debounce: u64, startup: bool) -> Host {
        let mut host = Host {
            scheduler: ReloadScheduler::new(Millis(debounce)),
            debounce,
            now: 0,
            active: None,
            last_event_at: None,
            log: Vec::new(),
        };
        if startup {
            host.scheduler.start();
            host.record(Entry::Startup);
            host.run_until(0);
        }
        host
    }

    fn record(&mut self, entry: Entry) {
        self.log.push((self.now, entry));
    }

    fn apply(&mut self, step: &Step) {
        match *step {
            Step::Advance(dt) => self.run_until(self.now + dt),
            Step::Event(i) => {
                self.record(Entry::Event(source(i)));
                self.last_event_at = Some(self.now);
                self.scheduler
                    .handle_file_event(Millis(self.now), source(i));
                self.run_until(self.now);
            }
            Step::Manual => {
                self.record(Entry::Manual);
                self.scheduler.handle_manual_reload(Millis(self.now));
                self.run_until(self.now);
            }
            Step::Finish(ok) => self.finish(ok),
        }
    }

    fn finish(&mut self, ok: bool) {
        let outcome = if ok { Outcome::Ok } else { Outcome::Failed };
        match self.active.take() {
            Some(run) => self.record(Entry::End { run }),
            None => self.record(Entry::Stray),
        }
        self.scheduler
            .handle_reconcile_done(Millis(self.now), outcome);
        self.run_until(self.now);
    }

    /// Steps 3–5 of the drive loop up to `target`: drain actions, fire the
    /// timer whenever it is due.
    fn run_until(&mut self, target: u64) {
        loop {
            while let Some(reload::Step::Reconcile {
                run,
                sources,
                manual,
            }) = self.scheduler.poll_step()
            {
                assert_eq!(self.active, None, "two runs at once");
                self.active = Some(run);
                self.record(Entry::Start {
                    run,
                    sources,
                    manual,
                });
            }
            assert_eq!(self.scheduler.is_running(), self.active.is_some());
            assert_eq!(self.scheduler.current_run(), self.active);
            match self.scheduler.poll_timeout() {
                Some(Millis(t)) if t <= target => {
                    assert!(
                        self.scheduler.pending_sources().len() > 0,
                        "a debounce with nothing to reload"
                    );
                    assert_eq!(
                        Some(t),
                        self.last_event_at.map(|at| at + self.debounce),
                        "the debounce runs out exactly one quiet period after the last event"
                    );
                    self.now = self.now.max(t);
                    self.record(Entry::Fire);
                    self.scheduler.handle_timeout(Millis(self.now));
                }
                _ => break,
            }
        }
        self.now = self.now.max(target);
    }

    /// Lets the quiet period pass and completes every run; returns how many
    /// runs that took.
    fn drain(&mut self) -> usize {
        let before = self.starts().count();
        for _ in 0..10 {
            if self.active.is_some() {
                self.finish(true);
            } else if let Some(Millis(t)) = self.scheduler.poll_timeout() {
                self.run_until(t);
            } else {
                break;
            }
        }
        self.starts().count() - before
    }

    fn starts(&self) -> impl Iterator<Item = (usize, u64, &Vec<FileSource>, bool)> + '_ {
        self.log
            .iter()
            .enumerate()
            .filter_map(|(i, (_, e))| match e {
                Entry::Start {
                    run,
                    sources,
                    manual,
                } => Some((i, *run, sources, *manual)),
                _ => None,
            })
    }
}

fn run_script(debounce: u64, startup: bool, steps: &[Step]) -> Host {
    let mut host = Host::new(debounce, startup);
    for s in steps {
        host.apply(s);
    }
    host
}

fn dedup(sources: impl Iterator<Item = FileSource>) -> Vec<FileSource> {
    let mut out: Vec<FileSource> = Vec::new();
    for s in sources {
        if !out.contains(&s) {
            out.push(s);
        }
    }
    out
}

/// Every relation between the log entries that SPEC §8 promises.
fn check_log(host: &Host) -> Result<(), TestCaseError> {
    let log = &host.log;
    let starts: Vec<_> = host.starts().map(|(i, run, _, _)| (i, run)).collect();

    // Runs are numbered 1, 2, 3, ... in start order.
    for (k, (_, run)) in starts.iter().enumerate() {
        prop_assert_eq!(*run, k as u64 + 1);
    }

    let mut previous_start: Option<usize> = None;
    for &(i, run) in &starts {
        let window = previous_start.map_or(0, |p| p + 1)..i;
        // A run answers at least one request made since the previous run
        // started (no stale follow-up, a failure alone never reruns) ...
        prop_assert!(
            log[window.clone()].iter().any(|(_, e)| e.is_request()),
            "run {} answers no request",
            run
        );
        // ... starts right when an input asks for it ...
        prop_assert!(
            i > 0 && (log[i - 1].1.is_request() || matches!(log[i - 1].1, Entry::End { .. })),
            "run {} started on its own",
            run
        );
        // ... and reloads exactly the sources that changed in that window.
        let expected = dedup(log[window].iter().filter_map(|(_, e)| match e {
            Entry::Event(s) => Some(s.clone()),
            _ => None,
        }));
        if let Entry::Start { sources, .. } = &log[i].1 {
            prop_assert_eq!(sources, &expected, "sources of run {}", run);
        }
        previous_start = Some(i);
    }

    // Every request is answered by a run that starts after it.
    if let Some(last_request) = log.iter().rposition(|(_, e)| e.is_request()) {
        prop_assert!(
            starts.iter().any(|&(i, _)| i > last_request),
            "request at entry {} never answered",
            last_request
        );
    }

    // Entry by entry, tracking whether a run is active.
    let mut active_since: Option<usize> = None;
    for (i, (at, entry)) in log.iter().enumerate() {
        let next = log.get(i + 1);
        let next_is_start = |manual_wanted: Option<bool>| {
            matches!(next, Some((t, Entry::Start { manual, .. }))
                if t == at && manual_wanted.is_none_or(|m| m == *manual))
        };
        match entry {
            Entry::Start { .. } => active_since = Some(i),
            Entry::Manual | Entry::Startup if active_since.is_none() => {
                // A manual reload never waits for the debounce.
                prop_assert!(next_is_start(Some(matches!(entry, Entry::Manual))));
            }
            Entry::Fire if active_since.is_none() => prop_assert!(next_is_start(Some(false))),
            Entry::Fire | Entry::Manual => {
                // During a run: marks it dirty, never a second run.
                prop_assert!(!next_is_start(None), "second run at entry {}", i);
            }
            Entry::End { run } => {
                let Some(s) = active_since.take() else {
                    return Err(TestCaseError::fail("end without start"));
                };
                let during = &log[s + 1..i];
                let manual = during.iter().any(|(_, e)| *e == Entry::Manual);
                let last_fire = during.iter().rposition(|(_, e)| *e == Entry::Fire);
                let still_debouncing = last_fire.is_some_and(|f| {
                    during[f + 1..]
                        .iter()
                        .any(|(_, e)| matches!(e, Entry::Event(_)))
                });
                if manual || (last_fire.is_some() && !still_debouncing) {
                    // Dirty: exactly one follow-up, at once.
                    prop_assert!(
                        next_is_start(Some(manual)),
                        "no immediate follow-up after run {}",
                        run
                    );
                } else {
                    // Not dirty yet (or still debouncing): nothing at once.
                    prop_assert!(
                        !next_is_start(None),
                        "run {} was followed without a due request",
                        run
                    );
                }
            }
            _ => {}
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    /// The full set of relations on random scripts, after a quiet period
    /// that always drains the queue.
    #[test]
    fn random_scripts_keep_every_rule(
        debounce in debounce(),
        startup in any::<bool>(),
        steps in prop::collection::vec(step(), 0..60),
    ) {
        let mut host = run_script(debounce, startup, &steps);
        let drained = host.drain();
        prop_assert!(drained <= 2, "drain took {} runs", drained);
        // A quiet period always drains.
        prop_assert_eq!(host.active, None);
        prop_assert!(!host.scheduler.is_running());
        prop_assert_eq!(host.scheduler.poll_step(), None);
        prop_assert_eq!(host.scheduler.poll_timeout(), None);
        prop_assert_eq!(host.scheduler.pending_sources().len(), 0);
        prop_assert!(!host.scheduler.is_run_requested());
        check_log(&host)?;

        let counts = host.scheduler.counts();
        let starts = host.starts().count() as u64;
        prop_assert_eq!(counts.runs_started, starts);
        prop_assert_eq!(counts.runs_succeeded + counts.runs_failed, starts);
        prop_assert_eq!(
            counts.stray_completions,
            host.log.iter().filter(|(_, e)| *e == Entry::Stray).count() as u64
        );
    }

    /// N events, each inside the previous one's quiet period, give one run
    /// that starts one quiet period after the last event and reloads each
    /// changed source once.
    #[test]
    fn a_burst_inside_the_window_is_one_reconcile(
        debounce in 1u64..1000,
        burst in prop::collection::vec((any::<u8>(), any::<u64>()), 1..30),
    ) {
        let mut host = Host::new(debounce, false);
        for (i, gap) in &burst {
            host.apply(&Step::Advance(gap % debounce));
            host.apply(&Step::Event(*i));
        }
        let last_event = host.now;
        host.apply(&Step::Advance(debounce * 3));
        let starts: Vec<_> = host.starts().collect();
        prop_assert_eq!(starts.len(), 1);
        let (i, run, sources, manual) = starts[0];
        prop_assert_eq!(run, 1);
        prop_assert!(!manual);
        prop_assert_eq!(host.log[i].0, last_event + debounce);
        prop_assert_eq!(sources, &dedup(burst.iter().map(|(s, _)| source(*s))));
    }

    /// Requests during a run, however many and of whichever kind, give
    /// exactly one follow-up, whether the run succeeds or fails.
    #[test]
    fn requests_during_a_run_give_exactly_one_follow_up(
        debounce in 0u64..500,
        during in prop::collection::vec(step(), 1..30),
        ok in any::<bool>(),
        end_manual in any::<bool>(),
    ) {
        let mut host = Host::new(debounce, true);
        // At least one request during the run: a manual reload, or an event
        // whose debounce runs out before the run ends.
        let last: Vec<Step> = if end_manual {
            vec![Step::Manual]
        } else {
            vec![Step::Event(0), Step::Advance(debounce)]
        };
        let during: Vec<Step> = during
            .into_iter()
            .filter(|s| !matches!(s, Step::Finish(_)))
            .chain(last)
            .collect();
        for s in &during {
            host.apply(s);
        }
        prop_assert_eq!(host.starts().count(), 1, "still inside run 1");
        host.apply(&Step::Finish(ok));
        host.apply(&Step::Advance(debounce + 1));
        prop_assert_eq!(host.starts().count(), 2, "one follow-up");
        host.apply(&Step::Finish(ok));
        host.apply(&Step::Advance(debounce * 3 + 1));
        prop_assert_eq!(host.starts().count(), 2, "and only one");
    }

    /// Whatever a careless host does — time going backwards, completions
    /// with no run, polling at random, re-timing the debounce — nothing
    /// panics, runs never overlap and are numbered consecutively.
    #[test]
    fn careless_hosts_never_break_it(
        calls in prop::collection::vec((0u8..9, any::<u64>(), any::<u8>()), 0..80),
    ) {
        let mut s = ReloadScheduler::starting(Millis(300));
        let mut active: Option<u64> = None;
        let mut last_run = 0u64;
        for (kind, t, i) in calls {
            let now = Millis(t % 5_000);
            match kind {
                0 | 1 => s.handle_file_event(now, source(i)),
                2 => s.handle_manual_reload(now),
                3 => {
                    s.handle_reconcile_done(now, if i % 2 == 0 { Outcome::Ok } else { Outcome::Failed });
                    active = None;
                }
                4 => s.handle_timeout(now),
                5 => s.handle_timeout(Millis(t)),
                6 => s.set_debounce(Millis(t % 1_000)),
                7 => s.start(),
                _ => {}
            }
            if let Some(reload::Step::Reconcile { run, .. }) = s.poll_step() {
                prop_assert_eq!(active, None, "two runs at once");
                prop_assert_eq!(run, last_run + 1);
                active = Some(run);
                last_run = run;
            }
            prop_assert_eq!(s.current_run(), active);
            prop_assert!(s.poll_timeout().is_none() || s.pending_sources().len() > 0);
        }
    }
}
