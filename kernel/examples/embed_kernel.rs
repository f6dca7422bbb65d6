//! A Rust host that embeds the kernel alone and executes its plans itself.
//!
//! The kernel decides and this program does the IO, in the loop every host runs:
//! 1. read the inputs (here two versions of a user settings file and a project `.mcp.json`,
//!    inline; a real host reads them from disk and passes its environment for `$VAR`s);
//! 2. ask the kernel for the admission lists ([`compute_gating`]) and a [`plan`];
//! 3. execute each action against its own table of running stdio processes (plain
//!    `std::process::Child`ren running `cat`, which lives exactly as long as its stdin, like a
//!    stdio MCP server);
//! 4. report what happened back as data (the `online` map, with failures and retry times),
//!    and plan again when an input changes ([`hot_reload`]) or time passes.
//!
//! Time is an argument: the program moves its own clock, so the back-off of the server that
//! cannot start is shown without waiting for it.
//!
//! Run with `cargo run -p mcp-reconcile-kernel --example embed_kernel`.

use std::collections::BTreeMap;
use std::process::{Child, Command, Stdio};

use mcp_reconcile_kernel::approvals::{Approvals, Decision};
use mcp_reconcile_kernel::config::{servers_from_value, servers_to_value};
use mcp_reconcile_kernel::gating::{compute_gating, gating_with_pending};
use mcp_reconcile_kernel::hot_reload::{hot_reload, Previous};
use mcp_reconcile_kernel::plan::{plan, Action, Mode, Online, OnlineEntry, Plan, Status};
use mcp_reconcile_kernel::settings::{mcp_lists, parse_settings, McpLists};
use mcp_reconcile_kernel::sources::{assemble, parse_mcp_json, Layer, LayerSource};
use mcp_reconcile_kernel::{backoff, Millis, ServerConfig, Servers, Value};

/// The user's settings file as first read: comments are allowed.
const SETTINGS_V1: &str = r#"{
  // Three servers of the user's, one kept out by the exclusion list.
  "mcpServers": {
    "notes": { "command": "cat" },
    "search": { "command": "cat", "env": { "INDEX": "v1" } },
    "broken": { "command": "no-such-mcp-server-binary" },
    "experimental": { "command": "cat" }
  },
  "mcp": { "excluded": ["experimental"] }
}"#;

/// The same file after an edit: `search` gets another environment, `broken` goes, `calendar`
/// comes.
const SETTINGS_V2: &str = r#"{
  "mcpServers": {
    "notes": { "command": "cat" },
    "search": { "command": "cat", "env": { "INDEX": "v2" } },
    "calendar": { "command": "cat" },
    "experimental": { "command": "cat" }
  },
  "mcp": { "excluded": ["experimental"] }
}"#;

/// The project's `.mcp.json`: a repository wrote it, so its server waits for approval.
const MCP_JSON: &str = r#"{ "mcpServers": { "lint": { "command": "cat", "args": ["-"] } } }"#;

/// The project directory: approvals are recorded per project root.
const ROOT: &str = "/home/someone/project";

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let mut host = Processes::default();
    let mut online = Online::new();
    let mut approvals = Approvals::empty();
    let mut now = Millis(0);

    // Start: assemble the layers, gate them, plan from nothing, execute.
    let (layers, lists) = read_inputs(SETTINGS_V1)?;
    let desired = assemble(&layers).servers;
    let gating = compute_gating(&desired, &lists, None, &approvals, ROOT, false);
    let start = plan(&desired, &online, &gating, true, Mode::Session, now)?;
    host.apply("start", &start, &desired, &mut online, now);

    // The person approves the project's server; the host plans again with the new gating.
    let lint = desired
        .get("lint")
        .ok_or("the project's server is not configured")?;
    approvals.record(ROOT, "lint", lint, Decision::Approved);
    println!("\n(the user approves `lint` for {ROOT})");
    let gating = compute_gating(&desired, &lists, None, &approvals, ROOT, false);
    let approved = plan(&desired, &online, &gating, true, Mode::Session, now)?;
    host.apply("approved", &approved, &desired, &mut online, now);

    // Time passes: the server that could not start is retried once its back-off is over.
    now = online.get("broken").and_then(|e| e.retry_at).unwrap_or(now);
    let retry = plan(&desired, &online, &gating, true, Mode::Session, now)?;
    host.apply("retry due", &retry, &desired, &mut online, now);

    // The settings file changes: the kernel says whether anything MCP-relevant changed and
    // what the session adopts; only then does the host reconcile.
    let previous = Previous {
        servers: servers_to_value(&desired),
        gating,
        removed: Some(Vec::new()),
    };
    let (layers, lists) = read_inputs(SETTINGS_V2)?;
    let reload = hot_reload(
        &previous,
        &layers,
        |_, pending| gating_with_pending(&lists, None, pending),
        &approvals,
        ROOT,
        false,
    )?;
    println!("\n(settings changed: reconcile = {})", reload.reconcile);
    let (desired, gating) = (reload.servers, reload.gating);
    let edit = plan(&desired, &online, &gating, true, Mode::Session, now)?;
    host.apply("reload", &edit, &desired, &mut online, now);
    if let Some(removed) = &reload.removed {
        println!("removed this session: {}", removed.join(", "));
    }

    // Level-triggered: planning again from the state the host reported changes nothing.
    let again = plan(&desired, &online, &gating, true, Mode::Session, now)?;
    assert!(again.is_quiet(), "a second plan must be quiet: {again:?}");
    println!("\nconverged: {} processes running", host.running.len());
    host.stop_all();
    Ok(())
}

/// Parses one version of the settings file and the project's `.mcp.json` into the layers the
/// kernel assembles, and the admission lists of the settings.
fn read_inputs(settings_text: &str) -> Result<(Vec<Layer>, McpLists), Box<dyn std::error::Error>> {
    let settings = parse_settings(settings_text, None)?;
    let user_servers = match settings.as_object().and_then(|o| o.get("mcpServers")) {
        Some(servers) => servers_from_value(servers)?,
        None => Servers::new(),
    };
    let lists = mcp_lists(&[(LayerSource::User, &settings)]);
    let project = parse_mcp_json(MCP_JSON, None, true);
    for problem in &project.errors {
        eprintln!(".mcp.json: {problem}");
    }
    let layer = |source, servers| Layer {
        source,
        servers,
        extension: None,
        from_workspace: false,
    };
    let layers = vec![
        layer(LayerSource::User, user_servers),
        layer(LayerSource::Project, project.servers),
    ];
    Ok((layers, lists))
}

/// The host's own executor: one child process per connected server.
#[derive(Default)]
struct Processes {
    running: BTreeMap<String, Child>,
}

impl Processes {
    /// Executes `plan` and records the outcome of every start in `online`.
    fn apply(
        &mut self,
        pass: &str,
        plan: &Plan,
        desired: &Servers,
        online: &mut Online,
        now: Millis,
    ) {
        println!("\n== {pass} (t = {} ms)", now.0);
        for action in &plan.actions {
            let name = action.name().unwrap_or("-");
            // The kernel starts only servers of `desired`.
            let wanted = || desired.get(name).expect("a desired server");
            let detail = match action {
                Action::Connect { .. } => self.start(name, wanted(), 0, online, now),
                Action::Retry { attempt, .. } => {
                    let failures = u32::try_from(attempt - 1).unwrap_or(u32::MAX);
                    self.start(name, wanted(), failures, online, now)
                }
                Action::Reconnect { changed, .. } => {
                    self.stop(name);
                    let started = self.start(name, wanted(), 0, online, now);
                    format!("{} changed; {started}", changed.join(", "))
                }
                Action::Disconnect { reason, .. } => {
                    self.stop(name);
                    online.remove(name);
                    format!("stopped ({})", reason.as_str())
                }
                Action::Skip { reason, .. } | Action::Noop { reason } => {
                    format!("not started ({})", reason.as_str())
                }
                Action::Keep { .. } => "left running".to_owned(),
            };
            println!("  {:<10} {:<12} {detail}", action.kind(), name);
        }
    }

    /// Spawns `name`'s process. `failures` is how many starts failed in a row before this one.
    fn start(
        &mut self,
        name: &str,
        config: &ServerConfig,
        failures: u32,
        online: &mut Online,
        now: Millis,
    ) -> String {
        match spawn(config) {
            Ok(child) => {
                let pid = child.id();
                self.running.insert(name.to_owned(), child);
                online.insert(name.to_owned(), OnlineEntry::connected(config.clone()));
                format!("spawned, pid {pid}")
            }
            Err(error) => {
                // The failure goes back to the kernel as data: the next plan backs off.
                let attempts = failures.saturating_add(1);
                let delay = backoff(attempts, seed(name));
                online.insert(
                    name.to_owned(),
                    OnlineEntry {
                        status: Status::Failed,
                        attempts,
                        retry_at: Some(now.saturating_add(delay.delay_ms)),
                        crash_loop: delay.crash_loop,
                        ..OnlineEntry::connected(config.clone())
                    },
                );
                format!(
                    "failed (attempt {attempts}: {error}); retry in {} ms",
                    delay.delay_ms
                )
            }
        }
    }

    /// Ends `name`'s process: closing its stdin is how a stdio server is asked to go.
    fn stop(&mut self, name: &str) {
        if let Some(mut child) = self.running.remove(name) {
            drop(child.stdin.take());
            if child.wait().is_err() {
                let _ = child.kill();
            }
        }
    }

    fn stop_all(&mut self) {
        let names: Vec<String> = self.running.keys().cloned().collect();
        for name in names {
            self.stop(&name);
        }
    }
}

/// Starts the process an entry describes (`command`, `args`, `env`).
fn spawn(config: &ServerConfig) -> std::io::Result<Child> {
    let command = config.str_field("command").unwrap_or_default();
    let mut process = Command::new(command);
    if let Some(Value::Array(args)) = config.get("args") {
        process.args(args.iter().filter_map(Value::as_str));
    }
    if let Some(Value::Object(env)) = config.get("env") {
        process.envs(env.iter().filter_map(|(k, v)| Some((k, v.as_str()?))));
    }
    process
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
}

/// A per-server jitter seed for the back-off: any stable number will do.
fn seed(name: &str) -> u64 {
    name.bytes()
        .fold(0u64, |h, b| h.wrapping_mul(31).wrapping_add(u64::from(b)))
        % (1 << 53)
}
