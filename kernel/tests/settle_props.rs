//! Settle detection in the reload scheduler: a change whose files all parse is applied after
//! a short quiet window instead of the full debounce; one that does not waits the debounce;
//! one whose files all arrived whole — renamed into place, or written in place and closed — is
//! applied at once.

use mcp_reconcile_kernel::reload::{Arrival, FileSource, Outcome, ReloadScheduler, Step};
use mcp_reconcile_kernel::Millis;
use proptest::prelude::*;

const DEBOUNCE: Millis = Millis(300);
const QUIET: Millis = Millis(25);

fn source(i: u8) -> FileSource {
    match i % 3 {
        0 => FileSource::Settings("user".into()),
        1 => FileSource::McpJson,
        _ => FileSource::LspFile("project".into()),
    }
}

/// A scheduler past its start-up run.
fn idle() -> ReloadScheduler {
    let mut s = ReloadScheduler::starting(DEBOUNCE).with_quiet(QUIET);
    assert!(s.poll_step().is_some());
    s.handle_reconcile_done(Millis(0), Outcome::Ok);
    s
}

/// Drives `s` to `until`, firing timers and finishing each run at once; the runs started.
fn drive(s: &mut ReloadScheduler, mut now: u64, until: u64) -> Vec<Vec<FileSource>> {
    let mut runs = Vec::new();
    loop {
        while let Some(Step::Reconcile { sources, .. }) = s.poll_step() {
            runs.push(sources);
            s.handle_reconcile_done(Millis(now), Outcome::Ok);
        }
        match s.poll_timeout() {
            Some(at) if at.0 <= until => {
                now = now.max(at.0);
                s.handle_timeout(Millis(now));
            }
            _ => return runs,
        }
    }
}

fn arrival() -> impl Strategy<Value = Arrival> {
    prop_oneof![
        Just(Arrival::Partial),
        Just(Arrival::Written),
        Just(Arrival::Closed),
        Just(Arrival::Replaced)
    ]
}

proptest! {
    /// Complete saves closer together than the quiet window are one run, due the quiet window
    /// after the last of them.
    #[test]
    fn a_burst_of_complete_saves_inside_the_window_is_one_run(
        gaps in prop::collection::vec(0u64..QUIET.0, 1..12),
        which in prop::collection::vec(any::<u8>(), 12),
    ) {
        let mut s = idle();
        let mut now = 1000;
        for (i, gap) in gaps.iter().enumerate() {
            now += gap;
            s.handle_file_change(Millis(now), source(which[i]), true);
            prop_assert!(s.poll_step().is_none(), "nothing runs inside the window");
        }
        prop_assert_eq!(s.poll_timeout(), Some(Millis(now + QUIET.0)));
        let runs = drive(&mut s, now, now + 10_000);
        prop_assert_eq!(runs.len(), 1);
    }

    /// A source whose last change did not parse holds the run back for the full debounce
    /// after the last event, however complete the others are; a later complete change of it
    /// releases the quiet window again.
    #[test]
    fn an_incomplete_file_waits_the_debounce_until_it_parses(
        events in prop::collection::vec((any::<u8>(), any::<bool>(), 0u64..QUIET.0), 1..12),
    ) {
        let mut s = idle();
        let mut now = 1000;
        let mut unsettled = std::collections::BTreeSet::new();
        for (which, complete, gap) in &events {
            now += gap;
            s.handle_file_change(Millis(now), source(*which), *complete);
            if *complete {
                unsettled.remove(&(*which % 3));
            } else {
                unsettled.insert(*which % 3);
            }
        }
        let wait = if unsettled.is_empty() { QUIET } else { DEBOUNCE };
        prop_assert_eq!(s.poll_timeout(), Some(Millis(now + wait.0)));
        prop_assert_eq!(drive(&mut s, now, now + 10_000).len(), 1);
    }

    /// Saves during a run are answered by exactly one follow-up: a burst never makes more than
    /// two runs, the one under way and its follow-up.
    #[test]
    fn saves_during_a_run_make_one_follow_up(
        gaps in prop::collection::vec(0u64..QUIET.0, 1..12),
    ) {
        let mut s = idle();
        let mut now = 1000;
        s.handle_file_change(Millis(now), source(0), true);
        now += QUIET.0;
        s.handle_timeout(Millis(now));
        let started = matches!(s.poll_step(), Some(Step::Reconcile { .. }));
        prop_assert!(started, "the first save's run starts");
        for gap in &gaps {
            now += gap;
            s.handle_file_change(Millis(now), source(1), true);
            prop_assert!(s.poll_step().is_none(), "one run at a time");
        }
        s.handle_reconcile_done(Millis(now), Outcome::Ok);
        prop_assert_eq!(drive(&mut s, now, now + 10_000).len(), 1, "one follow-up");
    }

    /// Without a quiet window the scheduler is the plain debounce, however a change arrived.
    #[test]
    fn without_a_quiet_window_every_change_waits_the_debounce(arrival in arrival()) {
        let mut s = ReloadScheduler::new(DEBOUNCE);
        s.handle_file_arrival(Millis(5), source(0), arrival);
        prop_assert_eq!(s.poll_timeout(), Some(Millis(5 + DEBOUNCE.0)));
        prop_assert!(s.poll_step().is_none());
    }

    /// A rename save applies at once when nothing else is pending and no run started within
    /// the quiet window; otherwise the run waits what the least settled pending source needs
    /// (at least the quiet window), from this event.
    #[test]
    fn a_rename_save_waits_only_for_what_else_is_pending(
        earlier in prop::collection::vec((any::<u8>(), arrival(), 0u64..QUIET.0), 0..6),
        last in any::<u8>(),
        gap in 0u64..2 * QUIET.0,
    ) {
        let mut s = idle();
        let mut now = 1000;
        let mut arrivals = std::collections::BTreeMap::new();
        let mut last_start = None;
        for (which, arrival, gap) in &earlier {
            now += gap;
            s.handle_file_arrival(Millis(now), source(*which), *arrival);
            arrivals.insert(*which % 3, *arrival);
            // What ran took its sources.
            if s.poll_step().is_some() {
                s.handle_reconcile_done(Millis(now), Outcome::Ok);
                arrivals.clear();
                last_start = Some(now);
            }
        }
        now += gap;
        s.handle_file_arrival(Millis(now), source(last), Arrival::Replaced);
        let joins = !arrivals.is_empty();
        arrivals.insert(last % 3, Arrival::Replaced);
        let mut least = arrivals.values().min().copied().unwrap_or(Arrival::Replaced);
        let whole = matches!(least, Arrival::Closed | Arrival::Replaced);
        if whole && (joins || last_start.is_some_and(|at| now - at < QUIET.0)) {
            least = Arrival::Written;
        }
        match least {
            Arrival::Closed | Arrival::Replaced => {
                prop_assert!(s.poll_step().is_some(), "applied at once");
            }
            Arrival::Written | Arrival::Partial => {
                prop_assert!(s.poll_step().is_none(), "waits for {:?}", least);
                let wait = if least == Arrival::Partial { DEBOUNCE } else { QUIET };
                prop_assert_eq!(s.poll_timeout(), Some(Millis(now + wait.0)));
            }
        }
    }

    /// A burst of rename saves closer together than the quiet window is one run at its first
    /// save and one after its last, each run finishing at once.
    #[test]
    fn a_burst_of_rename_saves_is_one_run_at_once_and_one_after(
        gaps in prop::collection::vec(0u64..QUIET.0, 1..12),
        which in prop::collection::vec(any::<u8>(), 12),
    ) {
        let mut s = idle();
        let mut now = 1000;
        s.handle_file_arrival(Millis(now), source(which[0]), Arrival::Replaced);
        let mut runs = drive(&mut s, now, now).len();
        prop_assert_eq!(runs, 1, "the first save runs at once");
        for (i, gap) in gaps.iter().enumerate() {
            now += gap;
            s.handle_file_arrival(Millis(now), source(which[i + 1]), Arrival::Replaced);
            runs += drive(&mut s, now, now).len();
        }
        prop_assert_eq!(runs, 1, "the rest of the burst waits");
        prop_assert_eq!(s.poll_timeout(), Some(Millis(now + QUIET.0)));
        prop_assert_eq!(drive(&mut s, now, now + 10_000).len(), 1, "one run after the burst");
    }

    /// A burst of rename saves — each its own run at once — still makes no more than two runs
    /// when it lands inside one run: the run under way and one follow-up.
    #[test]
    fn rename_saves_during_a_run_make_one_follow_up(
        gaps in prop::collection::vec(0u64..QUIET.0, 1..12),
        which in prop::collection::vec(any::<u8>(), 12),
    ) {
        let mut s = idle();
        let mut now = 1000;
        s.handle_file_arrival(Millis(now), source(0), Arrival::Replaced);
        prop_assert!(s.poll_step().is_some(), "the first save's run starts at once");
        for (i, gap) in gaps.iter().enumerate() {
            now += gap;
            s.handle_file_arrival(Millis(now), source(which[i]), Arrival::Replaced);
            prop_assert!(s.poll_step().is_none(), "one run at a time");
        }
        s.handle_reconcile_done(Millis(now), Outcome::Ok);
        prop_assert_eq!(drive(&mut s, now, now + 10_000).len(), 1, "one follow-up");
    }

    /// A save in place is applied at its close: its writes before it (parsing or not) wait,
    /// and its close — nothing else pending, no run started within the quiet window — starts
    /// the run at once, however many writes came first.
    #[test]
    fn a_save_in_place_is_applied_at_its_close(
        writes in prop::collection::vec((any::<bool>(), 0u64..QUIET.0), 0..8),
        which in any::<u8>(),
    ) {
        let mut s = idle();
        let mut now = 1000;
        for (complete, gap) in &writes {
            now += gap;
            s.handle_file_change(Millis(now), source(which), *complete);
            prop_assert!(s.poll_step().is_none(), "a write not closed yet waits");
        }
        now += 1;
        s.handle_file_arrival(Millis(now), source(which), Arrival::Closed);
        prop_assert!(s.poll_step().is_some(), "applied at its close");
    }

    /// A burst of saves in place (each a write, then its close) closer together than the quiet
    /// window is one run at its first close and one after its last, as rename saves are.
    #[test]
    fn a_burst_of_closed_saves_in_place_is_one_run_at_once_and_one_after(
        gaps in prop::collection::vec(0u64..QUIET.0, 1..12),
        which in prop::collection::vec(any::<u8>(), 12),
    ) {
        let mut s = idle();
        let mut now = 1000;
        s.handle_file_change(Millis(now), source(which[0]), true);
        s.handle_file_arrival(Millis(now), source(which[0]), Arrival::Closed);
        let mut runs = drive(&mut s, now, now).len();
        prop_assert_eq!(runs, 1, "the first save runs at its close");
        for (i, gap) in gaps.iter().enumerate() {
            now += gap;
            s.handle_file_change(Millis(now), source(which[i + 1]), true);
            s.handle_file_arrival(Millis(now), source(which[i + 1]), Arrival::Closed);
            runs += drive(&mut s, now, now).len();
        }
        prop_assert_eq!(runs, 1, "the rest of the burst waits");
        prop_assert_eq!(s.poll_timeout(), Some(Millis(now + QUIET.0)));
        prop_assert_eq!(drive(&mut s, now, now + 10_000).len(), 1, "one run after the burst");
    }
}

/// The start-up run is no save: a whole save right after it (inside the quiet window) is
/// applied at once, while one right after a save's run still waits for the burst to end.
#[test]
fn a_whole_save_right_after_the_start_up_run_is_applied_at_once() {
    let mut s = ReloadScheduler::starting(DEBOUNCE).with_quiet(QUIET);
    assert!(s.poll_step().is_some(), "the start-up run");
    s.handle_reconcile_done(Millis(1), Outcome::Ok);
    s.handle_file_arrival(Millis(2), source(0), Arrival::Closed);
    assert!(s.poll_step().is_some(), "applied at once");
    s.handle_reconcile_done(Millis(3), Outcome::Ok);
    s.handle_file_arrival(Millis(4), source(0), Arrival::Closed);
    assert!(s.poll_step().is_none(), "a burst of saves: waits");
    assert_eq!(s.poll_timeout(), Some(Millis(4 + QUIET.0)));
}
