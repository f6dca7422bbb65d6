//! A session (the engine, [`Host`]) on the in-memory servers of [`super`]: on its own
//! supervisor or on a shared pool, every timer on a [`ManualClock`], its settings in a temp dir,
//! reloads asked for (no watcher). [`start_on`] is the one place the crate's unit tests make a
//! host.

use std::time::Duration;

use serde_json::json;
use tokio::sync::mpsc;

use super::{Servers, PATIENCE};
use crate::clock::ManualClock;
use crate::host::{
    Backend, Host, HostEvent, HostHandle, HostOptions, Own, RunningSession, ServerStatus,
};
use crate::inputs::{HostEnv, Inputs, Options};
use crate::pool::{PoolOptions, SharedPool};
use crate::session::Session as _;
use crate::supervisor::Supervisor;

/// A running host on in-memory servers.
pub(crate) struct Session {
    pub(crate) dir: tempfile::TempDir,
    pub(crate) servers: Servers,
    pub(crate) time: ManualClock,
    pub(crate) handle: HostHandle,
    pub(crate) events: mpsc::UnboundedReceiver<HostEvent>,
    /// The running engine (`None` only while [`start_on`] builds it).
    running: Option<RunningSession>,
    /// The pool its connections live in (a session [`On::Pool`]).
    pool: Option<SharedPool>,
    /// Kept open: the host runs until it is told to stop.
    _files: mpsc::UnboundedSender<crate::watcher::Change>,
}

/// Where a test session's connections live: its own supervisor, or its holds on a shared pool
/// (as a daemon session's) — both on the same in-memory servers and manual clock.
#[derive(Clone, Copy, Debug)]
pub(crate) enum On {
    Own,
    Pool,
}

/// [`super::entry`] as the user settings write it.
pub(crate) fn entry_json(version: u32) -> serde_json::Value {
    json!({"command": "in-memory", "args": [version.to_string()]})
}

/// [`start_on`] its own supervisor.
pub(crate) fn start(servers: serde_json::Value) -> Session {
    start_on(servers, On::Own)
}

/// Writes `servers` as the user settings and runs a host over them on in-memory servers, its
/// connections where `on` says: the one place the crate's unit tests make a host.
pub(crate) fn start_on(servers: serde_json::Value, on: On) -> Session {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = |name: &str| dir.path().join(name);
    let options = Options {
        user_settings: Some(path("settings.json")),
        system_settings: Some(path("no-system-settings.json")),
        system_defaults: Some(path("no-system-defaults.json")),
        project: Some(path("project")),
        approvals: Some(path("approvals.json")),
        user_lsp: Some(path("lsp.json")),
        state_dir: Some(path("state")),
        ..Options::default()
    };
    std::fs::create_dir_all(path("project")).expect("project dir");
    let env = HostEnv {
        cwd: path("project"),
        home: Some(path("home")),
        ..HostEnv::default()
    };
    let mut session = Session {
        servers: Servers::default(),
        time: ManualClock::new(),
        dir,
        handle: HostHandle::new(mpsc::unbounded_channel().0),
        events: mpsc::unbounded_channel().1,
        running: None,
        pool: None,
        _files: mpsc::unbounded_channel().0,
    };
    session.write(servers);
    let inputs = Inputs::with_env(&options, env).expect("inputs");
    let options = HostOptions {
        clock: session.time.clock(),
        ..HostOptions::default()
    };
    match on {
        On::Own => {
            let kind = session.servers.kind();
            let supervisor = Supervisor::new(kind, options.parallelism, options.clock.clone());
            session.run(Host::with_backend(
                inputs,
                options,
                Own::new(supervisor),
                None,
            ));
        }
        On::Pool => {
            let pool = PoolOptions {
                drain: Duration::ZERO,
                clock: session.time.clock(),
                ..PoolOptions::default()
            };
            let pool = SharedPool::start_in_memory(pool, &session.servers);
            session.run(Host::in_pool(inputs, options, &pool, "unit"));
            session.pool = Some(pool);
        }
    }
    session
}

impl Session {
    /// Runs `host` as this session.
    fn run<B: Backend>(&mut self, mut host: Host<B>) {
        self.events = host.subscribe();
        let (files, file_rx) = mpsc::unbounded_channel();
        let running = host.spawn_fed(file_rx);
        self.handle = running.handle().clone();
        self.running = Some(running);
        self._files = files;
    }

    /// Writes the user settings with `servers`.
    pub(crate) fn write(&self, servers: serde_json::Value) {
        let text = json!({ "mcpServers": servers }).to_string();
        std::fs::write(self.dir.path().join("settings.json"), text).expect("settings");
    }

    /// The next pass's report whose trigger is `trigger`, bounded.
    pub(crate) async fn pass(&mut self, trigger: &str) -> crate::host::PlanReport {
        let wait = async {
            loop {
                match self.events.recv().await {
                    Some(HostEvent::PlanApplied(report)) if report.trigger == trigger => {
                        return report
                    }
                    Some(_) => {}
                    None => panic!("the session ended"),
                }
            }
        };
        tokio::time::timeout(PATIENCE, wait)
            .await
            .unwrap_or_else(|_| panic!("no {trigger} pass"))
    }

    /// `name`'s status once `pred` holds for it, bounded.
    pub(crate) async fn wait_server(
        &self,
        name: &str,
        pred: impl Fn(&ServerStatus) -> bool,
    ) -> ServerStatus {
        let deadline = tokio::time::Instant::now() + PATIENCE;
        loop {
            let report = self.handle.status().await.expect("the session runs");
            if let Some(s) = report.servers.iter().find(|s| s.name == name && pred(s)) {
                return s.clone();
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "timed out waiting for {name}: {:#?}",
                report.servers
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }

    pub(crate) async fn stop(self) {
        if let Some(running) = self.running {
            let _ = running.shutdown().await;
        }
        if let Some(pool) = self.pool {
            pool.shutdown().await;
        }
    }
}
