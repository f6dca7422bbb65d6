//! The supervisor on an in-memory connection kind: a connection lists the tools it is given,
//! and fails, hangs, holds a lock (a port two processes cannot share) or closes on command. No
//! process, no protocol: what is tested is the supervisor's own bookkeeping — generations,
//! make before break and its fallback, supervision on the clock.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::future::BoxFuture;
use futures::FutureExt;
use mcp_reconcile_kernel::plan::Status;
use mcp_reconcile_kernel::Reason;
use tokio::sync::{mpsc, oneshot};

use super::{ConnectionKind, Event, Report, StartError, Supervisor};
use crate::clock::{Clock, ManualClock};

/// What a start of one fake server does.
#[derive(Clone, Debug, Default)]
struct Fake {
    tools: Vec<&'static str>,
    /// Fails with this message.
    fail: Option<&'static str>,
    /// Never finishes until the test lets it (see [`Memory::release`]).
    hang: bool,
    /// Needs this lock for as long as it runs (a port): a start fails while another holds it.
    lock: Option<&'static str>,
}

/// A running fake connection.
struct Conn {
    tools: Vec<String>,
    lock: Option<Arc<AtomicBool>>,
    stopped: Arc<AtomicUsize>,
}

/// What a fake connection sends about itself: its generation and the event.
type FakeEvent = (u64, Event<Vec<String>>);

#[derive(Clone, Default)]
struct Memory {
    locks: Arc<Mutex<HashMap<&'static str, Arc<AtomicBool>>>>,
    /// Event senders of each generation, to close a connection on command.
    events: Arc<Mutex<HashMap<u64, mpsc::UnboundedSender<FakeEvent>>>>,
    /// Hanging starts waiting to be let go, by server name.
    hanging: Arc<Mutex<HashMap<String, oneshot::Sender<()>>>>,
    stopped: Arc<AtomicUsize>,
}

impl Memory {
    fn close(&self, generation: u64, why: &str) {
        let events = self.events.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(tx) = events.get(&generation) {
            let _ = tx.send((generation, Event::Closed(why.to_owned())));
        }
    }

    fn release(&self, name: &str) {
        let mut hanging = self.hanging.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(go) = hanging.remove(name) {
            let _ = go.send(());
        }
    }
}

impl ConnectionKind for Memory {
    type Config = Fake;
    type Connection = Conn;
    type Catalog = Vec<String>;
    type Event = FakeEvent;

    fn start(
        &self,
        name: &str,
        config: &Fake,
        generation: u64,
        events: mpsc::UnboundedSender<Self::Event>,
    ) -> BoxFuture<'static, Result<Conn, StartError>> {
        self.events
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(generation, events);
        let lock = config.lock.map(|key| {
            self.locks
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .entry(key)
                .or_default()
                .clone()
        });
        let gate = config.hang.then(|| {
            let (go, wait) = oneshot::channel();
            self.hanging
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .insert(name.to_owned(), go);
            wait
        });
        let (config, stopped) = (config.clone(), self.stopped.clone());
        async move {
            if let Some(wait) = gate {
                let _ = wait.await;
            }
            let error = |message: &str| StartError {
                message: message.to_owned(),
                unsupported: false,
                needs_auth: false,
            };
            if let Some(message) = config.fail {
                return Err(error(message));
            }
            if let Some(lock) = &lock {
                if lock.swap(true, Ordering::SeqCst) {
                    return Err(error("address already in use"));
                }
            }
            Ok(Conn {
                tools: config.tools.iter().map(|t| (*t).to_owned()).collect(),
                lock,
                stopped,
            })
        }
        .boxed()
    }

    fn stop(connection: Conn) -> BoxFuture<'static, ()> {
        if let Some(lock) = &connection.lock {
            lock.store(false, Ordering::SeqCst);
        }
        connection.stopped.fetch_add(1, Ordering::SeqCst);
        async {}.boxed()
    }

    fn catalog(connection: &Conn) -> Vec<String> {
        connection.tools.clone()
    }

    fn pid(_: &Conn) -> Option<u32> {
        None
    }

    fn spawns_process(_: &Fake) -> bool {
        true
    }

    fn event(event: Self::Event) -> (u64, Event<Vec<String>>) {
        event
    }
}

fn supervisor(clock: Clock) -> (Supervisor<String, Memory>, Memory) {
    let memory = Memory::default();
    (Supervisor::new(memory.clone(), 4, clock), memory)
}

fn up(tools: &[&'static str]) -> Fake {
    Fake {
        tools: tools.to_vec(),
        ..Fake::default()
    }
}

/// The next report, bounded.
async fn next(s: &mut Supervisor<String, Memory>) -> Report<String> {
    tokio::time::timeout(Duration::from_secs(10), s.next())
        .await
        .expect("a report in time")
}

fn started(report: &Report<String>) -> (u64, bool, Option<String>) {
    match report {
        Report::Started {
            generation,
            current,
            error,
            ..
        } => (*generation, *current, error.clone()),
        _ => panic!("a start's end"),
    }
}

#[tokio::test]
async fn a_superseded_start_is_reported_as_not_current_and_its_connection_closed() {
    let (mut s, memory) = supervisor(Clock::tokio());
    let first = s.start(
        "a".into(),
        "a".into(),
        Fake {
            hang: true,
            ..up(&["old"])
        },
    );
    let second = s.start("a".into(), "a".into(), up(&["new"]));
    assert!(second > first);
    let report = next(&mut s).await;
    assert_eq!(started(&report), (second, true, None));
    assert_eq!(
        s.get(&"a".into()).map(|e| e.catalog.clone()),
        Some(vec!["new".to_owned()])
    );
    memory.release("a");
    let report = next(&mut s).await;
    assert_eq!(started(&report), (first, false, None));
    // Its connection came up superseded: it is closed, the entry keeps the new one.
    tokio::time::timeout(Duration::from_secs(5), async {
        while memory.stopped.load(Ordering::SeqCst) == 0 {
            tokio::select! {
                _ = s.next() => {}
                () = tokio::time::sleep(Duration::from_millis(5)) => {}
            }
        }
    })
    .await
    .expect("the superseded connection is stopped");
    assert_eq!(
        s.get(&"a".into()).map(|e| e.health().status),
        Some(Status::Connected)
    );
}

#[tokio::test]
async fn make_before_break_serves_the_old_connection_until_the_new_one_is_up() {
    let (mut s, memory) = supervisor(Clock::tokio());
    s.start("a".into(), "a".into(), up(&["v1"]));
    next(&mut s).await;
    let generation = s.replace(
        "a".into(),
        "a".into(),
        Fake {
            hang: true,
            ..up(&["v2"])
        },
    );
    let entry = s.get(&"a".into()).expect("entry");
    assert!(
        entry.live().is_some(),
        "the old connection serves meanwhile"
    );
    assert_eq!(entry.catalog, ["v1"]);
    assert_eq!(memory.stopped.load(Ordering::SeqCst), 0);
    memory.release("a");
    assert_eq!(started(&next(&mut s).await), (generation, true, None));
    let entry = s.get(&"a".into()).expect("entry");
    assert_eq!(entry.catalog, ["v2"]);
    assert_eq!(entry.health().status, Status::Connected);
}

#[tokio::test]
async fn a_replacement_that_cannot_run_beside_the_old_one_gets_it_stopped_and_starts_again() {
    let (mut s, memory) = supervisor(Clock::tokio());
    let port = Fake {
        lock: Some("port 8080"),
        ..up(&["v1"])
    };
    s.start("a".into(), "a".into(), port.clone());
    next(&mut s).await;
    let generation = s.replace(
        "a".into(),
        "a".into(),
        Fake {
            tools: vec!["v2"],
            ..port
        },
    );
    let (reported, current, error) = started(&next(&mut s).await);
    assert_eq!((reported, current), (generation, true));
    let error = error.expect("the first try failed");
    assert!(
        error.contains("could not start beside the running one"),
        "{error}"
    );
    assert_eq!(
        memory.stopped.load(Ordering::SeqCst),
        1,
        "the old one was stopped"
    );
    // The second try runs alone and comes up.
    let (again, current, error) = started(&next(&mut s).await);
    assert!(again > generation && current && error.is_none());
    assert_eq!(
        s.get(&"a".into()).map(|e| e.catalog.clone()),
        Some(vec!["v2".to_owned()])
    );
}

#[tokio::test]
async fn a_closed_connection_backs_off_on_the_clock_and_a_stale_event_changes_nothing() {
    let time = ManualClock::new();
    let (mut s, memory) = supervisor(time.clock());
    let first = s.start("a".into(), "a".into(), up(&["t"]));
    next(&mut s).await;
    memory.close(first, "the server exited");
    assert!(matches!(next(&mut s).await, Report::Updated(key) if key == "a"));
    let view = s.view(&"a".into()).expect("view");
    assert_eq!(view.state, Status::Failed);
    assert_eq!(view.reason, Some(Reason::BackingOff));
    let wait = view.retry_in_ms.expect("a retry time");
    assert!(s.due().is_empty(), "not due before its time");
    time.advance(Duration::from_millis(wait));
    assert_eq!(s.due(), ["a"]);
    let second = s.restart(&"a".into()).expect("restarts");
    assert_eq!(started(&next(&mut s).await), (second, true, None));
    // An event of the first generation is stale now.
    memory.close(first, "late");
    assert!(matches!(next(&mut s).await, Report::Stale));
    assert_eq!(
        s.view(&"a".into()).map(|v| v.state),
        Some(Status::Connected)
    );
}
