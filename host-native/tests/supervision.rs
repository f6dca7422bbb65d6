//! Supervision (SPEC §9) end to end: a session host in this process with real fixture servers
//! that crash, its time moved by hand with a [`ManualClock`] — each retry happens when the test
//! advances the clock past it, so the schedule is checked exactly, whatever the machine's load.

use crate::common;

use std::time::{Duration, Instant};

use common::*;
use mcp_reconcile::clock::ManualClock;
use mcp_reconcile::host::{
    Host, HostEvent, HostHandle, HostOptions, PlanReport, RunningSession, ServerStatus,
    StatusReport,
};
use mcp_reconcile::inputs::Inputs;
use mcp_reconcile::session::Session;
use mcp_reconcile_kernel::plan::Action;
use mcp_reconcile_kernel::Reason;
use serde_json::{json, Value};
use tokio::sync::mpsc;

fn crashing(p: &Project, name: &str, after_ms: u64) -> Value {
    let mut server = p.server(name, "echo");
    if let Some(args) = server["args"].as_array_mut() {
        args.extend([json!("--crash-after"), json!(after_ms.to_string())]);
    }
    server
}

/// A host over `p`'s files on a manual clock.
struct Running {
    host: HostHandle,
    time: ManualClock,
    session: RunningSession,
    events: mpsc::UnboundedReceiver<HostEvent>,
    _files: mpsc::UnboundedSender<mcp_reconcile::watcher::Change>,
}

impl Running {
    fn start(p: &Project) -> Running {
        let time = ManualClock::new();
        let inputs = Inputs::new(&p.options()).expect("inputs");
        let mut host = Host::new(
            inputs,
            HostOptions {
                clock: time.clock(),
                ..HostOptions::default()
            },
        );
        let events = host.subscribe();
        let (files, files_rx) = mpsc::unbounded_channel();
        let session = host.spawn_fed(files_rx);
        Running {
            host: session.handle().clone(),
            time,
            session,
            events,
            _files: files,
        }
    }

    /// Forgets the events so far: [`Running::next_pass`] reports the passes after this.
    fn skip_events(&mut self) {
        while self.events.try_recv().is_ok() {}
    }

    /// The next pass the host applies.
    async fn next_pass(&mut self) -> PlanReport {
        let deadline = Instant::now() + PATIENCE;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match tokio::time::timeout(left, self.events.recv()).await {
                Ok(Some(HostEvent::PlanApplied(report))) => return report,
                Ok(Some(_)) => {}
                Ok(None) => panic!("the host stopped"),
                Err(_) => panic!("no pass within {PATIENCE:?}"),
            }
        }
    }

    async fn wait(&self, what: &str, pred: impl Fn(&StatusReport) -> bool) -> StatusReport {
        let start = Instant::now();
        loop {
            let status = self.host.status().await.expect("host runs");
            if pred(&status) {
                return status;
            }
            assert!(
                start.elapsed() < PATIENCE,
                "timed out waiting for {what}: {status:#?}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// Advances the clock past each retry of `name` until it is in crash loop; returns the
    /// `(attempts, retryInMs)` seen while it backed off, in order.
    async fn drive_into_crash_loop(&self, name: &str) -> Vec<(u32, u64)> {
        let mut seen = Vec::new();
        loop {
            let s = self
                .wait(
                    &format!("{name} failed after attempt {}", seen.len() + 1),
                    |s| {
                        let x = server(s, name);
                        x.state == "failed" && x.attempts as usize == seen.len() + 1
                    },
                )
                .await;
            let x = server(&s, name);
            if x.reason == Some(Reason::CrashLoop) {
                return seen;
            }
            assert_eq!(x.reason, Some(Reason::BackingOff), "{x:#?}");
            let wait = x.retry_in_ms.expect("a retry time while backing off");
            seen.push((x.attempts, wait));
            // Not one millisecond early: the retry waits for its time, the host's timer (what
            // `retryInMs` counts down to) is still 1 ms out.
            self.time
                .advance(Duration::from_millis(wait.saturating_sub(1)));
            let early = server(&self.host.status().await.expect("runs"), name);
            assert_eq!(
                (early.attempts, early.retry_in_ms),
                (x.attempts, Some(1)),
                "{early:#?}"
            );
            self.time.advance(Duration::from_millis(1));
        }
    }

    async fn stop(self) {
        self.session.shutdown().await.expect("host task");
    }
}

fn server(status: &StatusReport, name: &str) -> ServerStatus {
    status
        .servers
        .iter()
        .find(|s| s.name == name)
        .cloned()
        .unwrap_or_else(|| panic!("{name} in {status:#?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crashing_server_backs_off_longer_each_time_until_crash_loop_and_reconnect_or_reload_clear_it(
) {
    let p = Project::new();
    p.write_settings(json!({"mcpServers": {
        "crashy": crashing(&p, "crashy", 200),
        "steady": p.server("steady", "echo"),
    }}));
    let mut run = Running::start(&p);

    let backoffs = run.drive_into_crash_loop("crashy").await;
    let attempts: Vec<u32> = backoffs.iter().map(|b| b.0).collect();
    assert_eq!(attempts, [1, 2, 3, 4, 5, 6, 7]);
    assert!(
        backoffs.windows(2).all(|w| w[0].1 < w[1].1),
        "each delay is longer than the last: {backoffs:?}"
    );
    let s = run.host.status().await.expect("runs");
    let c = server(&s, "crashy");
    assert_eq!(
        (c.attempts, c.spawns),
        (8, 8),
        "one process per attempt: {c:#?}"
    );
    assert_eq!(c.retry_in_ms, None, "no timer in crash loop");
    let error = c.last_error.unwrap_or_default();
    assert!(error.contains("crashing as asked"), "stderr tail: {error}");
    assert_eq!(p.spawns("crashy"), 8);
    // A neighbour is untouched.
    assert_eq!(server(&s, "steady").state, "connected");
    assert_eq!(p.spawns("steady"), 1);

    // No timer runs in crash loop, however long it waits. The neighbour is made to fail:
    // its retry is the pass that runs once the hour has passed, and that pass retries every
    // server whose timer ran out by then — crashy, in crash loop, is skipped.
    let steady = KillGroup(server(&s, "steady").pid.expect("steady's pid"));
    run.skip_events();
    steady.kill();
    let down = run
        .wait("steady down, backing off", |s| {
            let x = server(s, "steady");
            x.state == "failed" && x.reason == Some(Reason::BackingOff)
        })
        .await;
    // Gone, and reaped by the host: its pid may be reused from now on.
    steady.disarm();
    assert!(server(&down, "steady").retry_in_ms.is_some(), "{down:#?}");
    run.time.advance(Duration::from_secs(3600));
    let pass = run.next_pass().await;
    assert_eq!(pass.trigger, "retry", "{pass:#?}");
    let action = |name: &str| {
        pass.steps
            .iter()
            .map(|step| &step.action)
            .find(|action| action.name() == Some(name))
            .cloned()
    };
    assert!(
        matches!(action("steady"), Some(Action::Retry { .. })),
        "{pass:#?}"
    );
    assert_eq!(
        action("crashy"),
        Some(Action::Skip {
            name: "crashy".into(),
            reason: Reason::CrashLoop
        }),
        "{pass:#?}"
    );
    assert_eq!(p.spawns("crashy"), 8);
    run.wait("steady back", |s| server(s, "steady").state == "connected")
        .await;

    // `reconnect` clears it: a fresh process, counting from attempt 1 again.
    let restarted = run
        .host
        .reconnect(Some("crashy".into()))
        .await
        .expect("runs")
        .expect("reconnect");
    assert_eq!(restarted, ["crashy"]);
    let again = run.drive_into_crash_loop("crashy").await;
    assert_eq!(again, backoffs, "the same schedule from attempt 1");
    assert_eq!(p.spawns("crashy"), 16);

    // `reload` clears it too.
    run.host.reload().await.expect("runs");
    run.wait("a new first failure after reload", |s| {
        let c = server(s, "crashy");
        c.attempts == 1 && c.spawns == 17
    })
    .await;
    assert_eq!(p.spawns("crashy"), 17);
    assert_eq!(
        p.spawns("steady"),
        2,
        "started, and retried once after it was killed"
    );
    run.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_that_stayed_healthy_starts_over_at_attempt_one() {
    let p = Project::new();
    p.write_settings(json!({"mcpServers": {"flaky": crashing(&p, "flaky", 2500)}}));
    let run = Running::start(&p);
    let connected = |spawns: u64| {
        move |s: &StatusReport| {
            let f = server(s, "flaky");
            f.state == "connected" && f.spawns == spawns
        }
    };
    let failed = |spawns: u64| {
        move |s: &StatusReport| {
            let f = server(s, "flaky");
            f.state == "failed" && f.spawns == spawns
        }
    };

    // Up for the whole 5-minute healthy window before each crash: attempt 1 every time.
    for spawns in 1..=2 {
        run.wait("connected", connected(spawns)).await;
        run.time.advance(Duration::from_secs(301));
        let s = run.wait("its crash", failed(spawns)).await;
        let f = server(&s, "flaky");
        assert_eq!(
            f.attempts, 1,
            "the count starts over after a healthy run: {f:#?}"
        );
        run.time
            .advance(Duration::from_millis(f.retry_in_ms.expect("retry time")));
    }
    // Up for less than the window: the count goes on.
    run.wait("connected", connected(3)).await;
    run.time.advance(Duration::from_secs(299));
    let s = run.wait("its crash", failed(3)).await;
    assert_eq!(server(&s, "flaky").attempts, 2, "{s:#?}");
    run.stop().await;
}

/// A config edit forgives past failures (the kernel's `decide_restart`), as a new connection
/// in the pool and a language server's new seed always were: an edited server that had
/// crash-looped backs off from attempt 1 again instead of falling straight back into crash loop.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_edited_entry_starts_over_after_a_crash_loop() {
    use mcp_reconcile::watcher::{Change, Landing};
    use mcp_reconcile_kernel::reload::FileSource;

    let p = Project::new();
    p.write_settings(json!({"mcpServers": {"crashy": crashing(&p, "crashy", 200)}}));
    let mut run = Running::start(&p);
    run.drive_into_crash_loop("crashy").await;
    assert_eq!(p.spawns("crashy"), 8);

    // The entry is edited (another crash time: a new identity) and the watcher says so.
    p.write_settings(json!({"mcpServers": {"crashy": crashing(&p, "crashy", 300)}}));
    run.skip_events();
    run._files
        .send(Change {
            source: FileSource::Settings("user".into()),
            landing: Landing::Renamed,
        })
        .expect("the host runs");
    // Past the debounce, a little at a time, until the pass for the edit ran.
    let deadline = Instant::now() + PATIENCE;
    let pass = loop {
        assert!(Instant::now() < deadline, "no pass for the edit");
        run.time.advance(Duration::from_millis(100));
        match tokio::time::timeout(Duration::from_millis(50), run.events.recv()).await {
            Ok(Some(HostEvent::PlanApplied(report))) if report.trigger != "retry" => break report,
            Ok(Some(_)) | Err(_) => {}
            Ok(None) => panic!("the host stopped"),
        }
    };
    assert!(
        pass.steps
            .iter()
            .any(|step| matches!(&step.action, Action::Reconnect { name, .. } if name == "crashy")),
        "{pass:#?}"
    );
    let s = run
        .wait("the edited server's first failure", |s| {
            let c = server(s, "crashy");
            c.state == "failed" && c.spawns == 9
        })
        .await;
    let c = server(&s, "crashy");
    assert_eq!(
        (c.attempts, c.reason),
        (1, Some(Reason::BackingOff)),
        "{c:#?}"
    );
    run.stop().await;
}
