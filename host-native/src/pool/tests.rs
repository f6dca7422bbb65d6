//! The shared pool on the in-memory connection kind ([`crate::testkit`]): two sessions' leases
//! (the engine's pool [`Backend`]) on one [`SharedPool`], every timer on a [`ManualClock`].

use std::time::Duration;

use mcp_reconcile_kernel::plan::Status;
use mcp_reconcile_kernel::share::{Share, ShareSettings};
use mcp_reconcile_kernel::{Gating, Servers as Desired};

use super::{Lease, PoolOptions, SharedPool};
use crate::clock::ManualClock;
use crate::host::Backend;
use crate::supervisor::Report;
use crate::testkit::{entry, eventually, Servers, PATIENCE};

/// A pool on in-memory servers, its clock, and a lease named `name` on it, made here only.
struct Pool {
    servers: Servers,
    pool: SharedPool,
    time: ManualClock,
}

impl Pool {
    fn start(drain: Duration) -> Pool {
        let (servers, time) = (Servers::default(), ManualClock::new());
        let options = PoolOptions {
            drain,
            clock: time.clock(),
            ..PoolOptions::default()
        };
        let pool = SharedPool::start_in_memory(options, &servers);
        Pool {
            servers,
            pool,
            time,
        }
    }

    /// Session `name`'s lease, its stdio servers shared with every session (`share: user`).
    fn lease(&self, name: &str) -> Lease {
        let mut lease = Lease::new(&self.pool, name.to_owned(), None, self.time.clock());
        let share = ShareSettings {
            default: Share::User,
            workspace_cap: None,
        };
        lease.admit(&Desired::new(), &Gating::default(), &share);
        lease
    }
}

/// Starts `a` (the in-memory entry 1) on `lease` and waits for that start's report.
async fn acquire(lease: &mut Lease) {
    let generation = lease.start("a", &entry(1), None, false);
    until(lease, |report| {
        matches!(report, Report::Started { key, generation: g, .. } if key == "a" && *g == generation)
    })
    .await;
}

/// Reads `lease`'s reports until `done` picks one, bounded.
async fn until(lease: &mut Lease, done: impl Fn(&Report<String>) -> bool) {
    let wait = async {
        loop {
            if done(&lease.next().await) {
                return;
            }
        }
    };
    tokio::time::timeout(PATIENCE, wait)
        .await
        .expect("the report in time");
}

fn status_of(lease: &Lease) -> Option<Status> {
    lease.held("a").map(|held| held.health.status)
}

/// Two sessions acquiring the same connection id in a shared scope hold one connection.
#[tokio::test]
async fn two_sessions_acquiring_the_same_id_share_one_connection() {
    let p = Pool::start(Duration::ZERO);
    let (mut one, mut two) = (p.lease("one"), p.lease("two"));
    acquire(&mut one).await;
    acquire(&mut two).await;
    let a = p.servers.server("a");
    assert_eq!((a.starts(), a.live()), (1, 1), "one start, one session");
    assert_eq!(status_of(&one), Some(Status::Connected));
    assert_eq!(status_of(&two), Some(Status::Connected));
    assert_eq!(two.held("a").and_then(|held| held.sessions), Some(2));
    let status = p.pool.status().await.expect("the pool runs");
    assert_eq!(status.len(), 1);
    assert_eq!(status[0].holders, ["one", "two"]);
    one.shutdown().await;
    two.shutdown().await;
    p.pool.shutdown().await;
}

/// A connection stays while a session holds it, and stops once the last holder's plan
/// releases it (a plan's release does not drain: nobody is configured to run it any more).
#[tokio::test]
async fn the_last_holders_release_stops_the_connection() {
    let p = Pool::start(Duration::from_secs(30));
    let (mut one, mut two) = (p.lease("one"), p.lease("two"));
    acquire(&mut one).await;
    acquire(&mut two).await;
    let a = p.servers.server("a");
    one.stop("a", true);
    let status = p.pool.status().await.expect("the pool runs");
    assert_eq!(status[0].holders, ["two"], "one let go");
    assert_eq!(a.live(), 1, "two still holds it");
    two.stop("a", true);
    eventually("the released connection closed", || a.live() == 0).await;
    assert!(p.pool.status().await.expect("the pool runs").is_empty());
    one.shutdown().await;
    two.shutdown().await;
    p.pool.shutdown().await;
}

/// When the sessions holding a connection end, it drains: kept for the drain delay on the
/// pool's clock (a session starting meanwhile would take it over), then stopped.
#[tokio::test]
async fn the_last_ending_session_leaves_the_connection_draining_until_the_delay() {
    let p = Pool::start(Duration::from_secs(30));
    let (mut one, mut two) = (p.lease("one"), p.lease("two"));
    acquire(&mut one).await;
    acquire(&mut two).await;
    let a = p.servers.server("a");
    one.shutdown().await;
    two.shutdown().await;
    let status = p.pool.status().await.expect("the pool runs");
    assert!(status.iter().all(|c| c.draining), "{status:#?}");
    assert_eq!(a.live(), 1, "kept through the drain delay");
    p.time.advance(Duration::from_secs(30));
    eventually("the drained connection closed", || a.live() == 0).await;
    p.pool.shutdown().await;
}

/// A shared connection that ends by itself is reported to each session holding it, as failed
/// with a retry time.
#[tokio::test]
async fn a_crash_is_reported_to_each_holder() {
    let p = Pool::start(Duration::ZERO);
    let (mut one, mut two) = (p.lease("one"), p.lease("two"));
    acquire(&mut one).await;
    acquire(&mut two).await;
    p.servers.server("a").close();
    for lease in [&mut one, &mut two] {
        until(
            lease,
            |report| matches!(report, Report::Updated(key) if key == "a"),
        )
        .await;
        let held = lease.held("a").expect("held");
        assert_eq!(held.health.status, Status::Failed);
        assert!(held.health.retry_at.is_some(), "a retry time");
        assert!(held.caller.is_none(), "nothing to call");
    }
    one.shutdown().await;
    two.shutdown().await;
    p.pool.shutdown().await;
}
