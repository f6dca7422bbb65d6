//! `mcp-reconcile`: apply MCP server configuration edits to a running session.

use std::io::{self, BufRead, IsTerminal, Write};
use std::process::ExitCode;

use anyhow::{bail, Context};
use clap::{Args, Parser, Subcommand};
use mcp_reconcile::display;
use mcp_reconcile::host::{Control, Host, HostEvent, HostOptions};
use mcp_reconcile::inputs::{Inputs, LayerFlags};
use mcp_reconcile::review::{quoted, ApprovalRequest};
use mcp_reconcile::status::{
    action_line_json, failure_line, plan_json, report_text, status_json, status_text,
};
use mcp_reconcile::{demo, gateway, ipc, watcher};
use mcp_reconcile_kernel::approvals::ApprovalState;
use mcp_reconcile_kernel::{assemble, Decision};
use serde_json::{json, Value};
use tokio::sync::mpsc;

/// Keep MCP server connections equal to your settings files while a session
/// runs: only servers that were added, removed or changed are touched; every
/// other server keeps its connection and its tools. Servers from
/// project-controlled files (`.mcp.json`, workspace settings) connect only
/// after you approved exactly that config.
///
/// Every command takes the same file flags, so `status`, `approve`, `reload`
/// … find the same files and the same running `watch`.
///
/// Start with `mcp-reconcile watch --demo`.
#[derive(Parser, Debug)]
#[command(name = "mcp-reconcile", version, about, long_about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Connect the configured servers and keep them equal to the files until
    /// Ctrl-C, printing every applied plan. On a terminal, asks about servers
    /// that need approval.
    Watch(WatchArgs),
    /// Show every configured server: state, reason, approval, tools, pid,
    /// last error. Reads a running `watch`; without one, shows what the files
    /// say (nothing is started).
    Status(StatusArgs),
    /// Approve a project-controlled server (bound to its current config).
    Approve(DecideArgs),
    /// Reject a project-controlled server (until its config changes).
    Reject(DecideArgs),
    /// Dry run: what a reconcile would do now (from the running session's
    /// state, or from nothing when none runs).
    Plan(PlanArgs),
    /// Clear a server's failure / crash-loop state and restart it now.
    Reconnect(ReconnectArgs),
    /// Reload the files now (no debounce); clears crash loops. SIGHUP to a
    /// running `watch` does the same.
    Reload(FlagsOnly),
    /// Run as an MCP server (stdio) that offers the tools, prompts and
    /// resources of every admitted server as `mcp__<server>__<name>`, keeps
    /// them equal to the files, and sends `list_changed` when they change.
    /// Configure it as an MCP client's only server to get hot reload.
    /// Logs go to stderr (`MCP_RECONCILE_LOG=info` for more).
    Serve(ServeArgs),
    /// Answer kernel JSON requests: one per stdin line, one response per
    /// stdout line (see README).
    ///
    /// Example:
    ///   echo '{"op":"connectionId","name":"a","config":{"command":"x"}}' | mcp-reconcile eval
    Eval,
}

#[derive(Args, Debug)]
struct WatchArgs {
    #[command(flatten)]
    layers: LayerFlags,
    /// Write a small demo project (fixture servers, one needing approval) to
    /// a temporary directory and watch it; prints which file to edit.
    #[arg(long)]
    demo: bool,
    /// Baseline mode for benchmarks: restart every server on every change.
    #[arg(long)]
    full_restart: bool,
    /// Never ask on the terminal, even if stdin is one.
    #[arg(long)]
    no_prompt: bool,
}

#[derive(Args, Debug)]
struct ServeArgs {
    #[command(flatten)]
    layers: LayerFlags,
    /// Serve streamable HTTP at http://ADDR/mcp instead of stdio (loopback
    /// only, e.g. 127.0.0.1:8931; port 0 picks one). Prints the URL, then
    /// the path of the file holding the bearer token every request must
    /// send as `Authorization: Bearer <token>` (a new random token per run,
    /// in a 0600 file in the state dir, removed at exit).
    #[arg(long, value_name = "ADDR")]
    http: Option<std::net::SocketAddr>,
    /// With --http: use the token on the first line of this file instead of
    /// a random one. The file must not be accessible by group or others
    /// (`chmod 600`).
    #[arg(long, value_name = "PATH", requires = "http")]
    token_file: Option<std::path::PathBuf>,
    /// With --http: let browser pages from ORIGIN call (exact match, e.g.
    /// http://localhost:5173; repeatable). Requests with any other Origin
    /// header are refused (403); requests without one are not affected.
    #[arg(long = "allow-origin", value_name = "ORIGIN", requires = "http")]
    allow_origin: Vec<String>,
    /// With --http: at most N MCP sessions at once; a new one beyond that
    /// gets 503.
    #[arg(long, value_name = "N", default_value_t = mcp_reconcile::http_guard::DEFAULT_MAX_SESSIONS,
          value_parser = clap::value_parser!(u32).range(1..), requires = "http")]
    max_sessions: u32,
    /// With --http: close a session after SECS without a request.
    #[arg(long, value_name = "SECS", default_value_t = mcp_reconcile::http_guard::DEFAULT_SESSION_IDLE_SECS,
          value_parser = clap::value_parser!(u64).range(1..), requires = "http")]
    session_idle_secs: u64,
}

#[derive(Args, Debug)]
struct StatusArgs {
    #[command(flatten)]
    layers: LayerFlags,
    /// Print a JSON array, one object per server (fields in the README).
    #[arg(long)]
    json: bool,
}

#[derive(Args, Debug)]
struct DecideArgs {
    #[command(flatten)]
    layers: LayerFlags,
    /// The server name.
    #[arg(required_unless_present = "all", conflicts_with = "all")]
    name: Option<String>,
    /// Every gated server that is not already decided this way.
    #[arg(long)]
    all: bool,
    /// Decide only if the entry still has this approval hash (as printed by
    /// the prompt, by `watch`/`serve` and by an earlier `approve`): what was
    /// reviewed is exactly what is decided; a changed entry is refused.
    #[arg(long, value_name = "HASH", conflicts_with = "all")]
    hash: Option<String>,
}

#[derive(Args, Debug)]
struct PlanArgs {
    #[command(flatten)]
    layers: LayerFlags,
    /// Print the plan as JSON (SPEC §10 action objects).
    #[arg(long)]
    json: bool,
}

#[derive(Args, Debug)]
struct ReconnectArgs {
    #[command(flatten)]
    layers: LayerFlags,
    /// The server name.
    #[arg(required_unless_present = "all", conflicts_with = "all")]
    name: Option<String>,
    /// Every configured server.
    #[arg(long)]
    all: bool,
}

#[derive(Args, Debug)]
struct FlagsOnly {
    #[command(flatten)]
    layers: LayerFlags,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Eval => eval(io::stdin().lock(), io::stdout().lock()),
        command => runtime().and_then(|rt| {
            let result = rt.block_on(run(command));
            // A blocking stdin read (serve on a terminal) must not hold up the exit.
            rt.shutdown_timeout(std::time::Duration::from_secs(1));
            result
        }),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("mcp-reconcile: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")
}

async fn run(command: Command) -> anyhow::Result<()> {
    match command {
        Command::Watch(args) => watch(args).await,
        Command::Serve(args) => serve(args).await,
        Command::Status(args) => status(args).await,
        Command::Approve(args) => decide(args, Decision::Approved),
        Command::Reject(args) => decide(args, Decision::Rejected),
        Command::Plan(args) => plan(args).await,
        Command::Reconnect(args) => {
            let inputs = Inputs::new(&args.layers)?;
            let name = if args.all {
                Value::Null
            } else {
                json!(args.name)
            };
            let names = session(&inputs, &json!({"cmd": "reconnect", "name": name})).await?;
            println!("reconnecting {}", join_names(&names));
            Ok(())
        }
        Command::Reload(args) => {
            let inputs = Inputs::new(&args.layers)?;
            session(&inputs, &json!({"cmd": "reload"})).await?;
            println!("reload requested");
            Ok(())
        }
        Command::Eval => Ok(()),
    }
}

/// Sends a request to the running session, or explains how to start one.
async fn session(inputs: &Inputs, request: &Value) -> anyhow::Result<Value> {
    let path = ipc::socket_path(inputs);
    match ipc::request(&path, request).await? {
        Some(value) => Ok(value),
        None => bail!(
            "no running session for these files (looked for {}); start one with `mcp-reconcile watch` and the same flags",
            path.display()
        ),
    }
}

fn join_names(value: &Value) -> String {
    value
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .collect::<Vec<_>>()
                .join(", ")
        })
        .unwrap_or_default()
}

async fn watch(args: WatchArgs) -> anyhow::Result<()> {
    let mut demo_dir = None;
    let layers = if args.demo {
        let demo = demo::write_demo()?;
        say(&demo.instructions);
        demo_dir = Some(demo.dir);
        demo.flags
    } else {
        args.layers
    };
    let inputs = Inputs::new(&layers)?;
    let socket = ipc::socket_path(&inputs);
    let (control_tx, control_rx) = mpsc::unbounded_channel();
    let _guard = ipc::serve(&socket, control_tx.clone()).await?;
    let (file_tx, file_rx) = mpsc::unbounded_channel();
    let _watcher = watcher::watch(inputs.watched(), file_tx)?;
    let store = inputs.approvals_store().clone();
    let project_root = inputs.project_root().to_owned();
    let options = HostOptions {
        full_restart: args.full_restart,
        backoff_scale: backoff_scale(),
        ..HostOptions::default()
    };
    let mut host = Host::new(inputs, options);
    let mut events = host.subscribe();
    let prompt = !args.no_prompt && io::stdin().is_terminal();
    let printer = tokio::spawn(async move {
        let mut decide_all = false;
        while let Some(event) = events.recv().await {
            match event {
                HostEvent::PlanApplied(report) => say(&report_text(&report)),
                HostEvent::ReloadFailed(message) => {
                    let _ = writeln!(io::stderr(), "! {}", display::safe_multiline(&message));
                }
                HostEvent::ClientUpdate(s) => {
                    if let Some(line) = failure_line(&s) {
                        say(&format!("{line}\n"));
                    }
                }
                HostEvent::CatalogChanged(_) => {}
                HostEvent::ApprovalNeeded(requests) => {
                    for request in requests {
                        if !prompt {
                            say(&approval_hint(&request));
                            continue;
                        }
                        let answer = if decide_all {
                            Answer::Approve
                        } else {
                            ask(&request).await
                        };
                        let decision = match answer {
                            Answer::Approve => Some(Decision::Approved),
                            Answer::ApproveAll => {
                                decide_all = true;
                                Some(Decision::Approved)
                            }
                            Answer::Reject => Some(Decision::Rejected),
                            Answer::Skip => None,
                        };
                        if let Some(decision) = decision {
                            let (name, config) = (&request.name, &request.config);
                            if let Err(e) = store.decide(&project_root, name, config, decision) {
                                let _ = writeln!(
                                    io::stderr(),
                                    "! could not store the decision for {}: {}",
                                    quoted(name),
                                    display::safe(&format!("{e:#}"))
                                );
                            }
                        }
                    }
                }
            }
            let _ = io::stdout().flush();
        }
    });
    let stop = control_tx.clone();
    let reload = control_tx.clone();
    tokio::spawn(async move {
        use tokio::signal::unix::{signal, SignalKind};
        let (Ok(mut hup), Ok(mut term)) = (
            signal(SignalKind::hangup()),
            signal(SignalKind::terminate()),
        ) else {
            return;
        };
        loop {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => break,
                _ = term.recv() => break,
                _ = hup.recv() => {
                    let (tx, _rx) = tokio::sync::oneshot::channel();
                    let _ = reload.send(Control::Reload(tx));
                }
            }
        }
        let _ = stop.send(Control::Shutdown);
    });
    drop(control_tx);
    host.run(file_rx, control_rx).await;
    printer.abort();
    say("stopped every server\n");
    if let Some(dir) = demo_dir {
        let _ = std::fs::remove_dir_all(&dir);
    }
    Ok(())
}

/// Prints to stdout, ignoring a closed stdout (`watch | head` must not
/// take the session down).
fn say(text: &str) {
    let mut out = io::stdout().lock();
    let _ = out.write_all(text.as_bytes());
    let _ = out.flush();
}

/// `MCP_RECONCILE_BACKOFF_SCALE`: multiplies retry delays. For tests only
/// (e.g. `0.01` reaches the crash-loop threshold in about a second).
fn backoff_scale() -> f64 {
    std::env::var("MCP_RECONCILE_BACKOFF_SCALE")
        .ok()
        .and_then(|v| v.trim().parse::<f64>().ok())
        .filter(|v| v.is_finite() && *v >= 0.0)
        .unwrap_or(1.0)
}

/// Logs to stderr (stdout may be the MCP channel), filtered by
/// `MCP_RECONCILE_LOG` (default `warn`).
fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("MCP_RECONCILE_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(io::stderr)
        .with_ansi(io::stderr().is_terminal())
        .try_init();
}

async fn serve(args: ServeArgs) -> anyhow::Result<()> {
    init_logging();
    let inputs = Inputs::new(&args.layers)?;
    // The HTTP guard before any server starts: a bad --token-file stops here.
    let http = match args.http {
        Some(addr) => Some((addr, http_guard(&args, &inputs)?)),
        None => None,
    };
    let socket = ipc::socket_path(&inputs);
    let (control_tx, control_rx) = mpsc::unbounded_channel();
    let _guard = ipc::serve(&socket, control_tx.clone()).await?;
    let (file_tx, file_rx) = mpsc::unbounded_channel();
    let _watcher = watcher::watch(inputs.watched(), file_tx)?;
    let options = HostOptions {
        backoff_scale: backoff_scale(),
        ..HostOptions::default()
    };
    let mut host = Host::new(inputs, options);
    let mut log = host.subscribe();
    let announcements = host.subscribe();
    // Everything for people goes to stderr: stdout is the MCP channel.
    let printer = tokio::spawn(async move {
        while let Some(event) = log.recv().await {
            match event {
                HostEvent::PlanApplied(report) => eprint!("{}", report_text(&report)),
                HostEvent::ReloadFailed(message) => {
                    eprintln!("! {}", display::safe_multiline(&message));
                }
                HostEvent::ClientUpdate(s) => {
                    if let Some(line) = failure_line(&s) {
                        eprintln!("{line}");
                    }
                }
                HostEvent::ApprovalNeeded(requests) => {
                    for request in requests {
                        eprint!("{}", approval_hint(&request));
                    }
                }
                HostEvent::CatalogChanged(_) => {}
            }
        }
    });
    let handle = gateway::HostHandle::new(control_tx.clone());
    let gateway = gateway::Gateway::new(handle.clone());
    let announcer = tokio::spawn(gateway.clone().announce(announcements));
    let host_task = tokio::spawn(host.run(file_rx, control_rx));
    drop(control_tx);
    let result = match http {
        None => serve_stdio(gateway).await,
        Some((addr, guard)) => serve_http(addr, guard, gateway).await,
    };
    handle.shutdown();
    let _ = host_task.await;
    printer.abort();
    announcer.abort();
    eprintln!("mcp-reconcile serve: stopped every server");
    result
}

/// Until the client closes stdin (or SIGTERM / Ctrl-C).
async fn serve_stdio(gateway: gateway::Gateway) -> anyhow::Result<()> {
    use rmcp::ServiceExt;
    let service = tokio::select! {
        service = gateway.serve(rmcp::transport::io::stdio_pipes()) => {
            service.context("the MCP client did not complete the handshake on stdin/stdout")?
        }
        () = stop_signal() => return Ok(()),
    };
    let cancel = service.cancellation_token();
    tokio::select! {
        _ = service.waiting() => {}
        () = stop_signal() => cancel.cancel(),
    }
    Ok(())
}

/// What `serve --http` requires of every request: the bearer token (from
/// `--token-file`, or generated into a 0600 file in the state dir, removed
/// when the returned guard is dropped), the allowed origins, the session caps.
struct HttpGuard {
    options: mcp_reconcile::http_guard::GuardOptions,
    token_path: std::path::PathBuf,
    _written: Option<mcp_reconcile::http_guard::TokenFile>,
}

fn http_guard(args: &ServeArgs, inputs: &Inputs) -> anyhow::Result<HttpGuard> {
    use mcp_reconcile::http_guard::{GuardOptions, Token, TokenFile};
    let (token, token_path, written) = match &args.token_file {
        Some(path) => (Token::from_file(path)?, path.clone(), None),
        None => {
            let token = Token::generate()?;
            let file = TokenFile::write(inputs.state_dir(), &inputs.session_id(), &token)?;
            (token, file.path().to_owned(), Some(file))
        }
    };
    Ok(HttpGuard {
        options: GuardOptions {
            token,
            allowed_origins: args.allow_origin.clone(),
            max_sessions: usize::try_from(args.max_sessions).unwrap_or(usize::MAX),
            session_idle: std::time::Duration::from_secs(args.session_idle_secs),
        },
        token_path,
        _written: written,
    })
}

/// Until SIGTERM / Ctrl-C. Prints the URL on stdout, then the path of the
/// token file (both also on stderr); the token itself is never printed.
async fn serve_http(
    addr: std::net::SocketAddr,
    guard: HttpGuard,
    gateway: gateway::Gateway,
) -> anyhow::Result<()> {
    let HttpGuard {
        options,
        token_path,
        _written: written,
    } = guard;
    let stop = tokio_util::sync::CancellationToken::new();
    let (bound, server) = gateway::serve_http(addr, gateway, options, stop.clone()).await?;
    println!("http://{bound}/mcp");
    println!("{}", token_path.display());
    let _ = io::stdout().flush();
    eprintln!(
        "mcp-reconcile serve: listening on http://{bound}/mcp; every request must send \
         `Authorization: Bearer <token>` with the token in {}",
        token_path.display()
    );
    stop_signal().await;
    stop.cancel();
    let _ = tokio::time::timeout(std::time::Duration::from_secs(3), server).await;
    drop(written);
    Ok(())
}

/// The first of SIGTERM and Ctrl-C.
async fn stop_signal() {
    use tokio::signal::unix::{signal, SignalKind};
    match signal(SignalKind::terminate()) {
        Ok(mut term) => {
            tokio::select! {
                _ = tokio::signal::ctrl_c() => {}
                _ = term.recv() => {}
            }
        }
        Err(_) => {
            let _ = tokio::signal::ctrl_c().await;
        }
    }
}

enum Answer {
    Approve,
    ApproveAll,
    Reject,
    Skip,
}

/// What `watch` (without a terminal) and `serve` print for a server that
/// waits: its review and the command that approves exactly that entry.
fn approval_hint(request: &ApprovalRequest) -> String {
    format!(
        "{}! {} needs approval (from a project file): run `{}` with the same flags to approve exactly this entry\n",
        request.review(),
        quoted(&request.name),
        request.approve_command()
    )
}

/// Asks on the terminal, after showing the review. Skip, Esc and end of
/// input store nothing.
async fn ask(request: &ApprovalRequest) -> Answer {
    print!("{}", request.review());
    print!("  [a]pprove, [r]eject, approve [A]ll, [s]kip? ");
    let _ = io::stdout().flush();
    let line = tokio::task::spawn_blocking(|| {
        let mut line = String::new();
        match io::stdin().lock().read_line(&mut line) {
            Ok(0) | Err(_) => None,
            Ok(_) => Some(line),
        }
    })
    .await
    .ok()
    .flatten();
    match line.as_deref().map(str::trim_end) {
        Some("a" | "approve" | "y" | "yes") => Answer::Approve,
        Some("A" | "all") => Answer::ApproveAll,
        Some("r" | "reject" | "n" | "no") => Answer::Reject,
        _ => Answer::Skip,
    }
}

async fn status(args: StatusArgs) -> anyhow::Result<()> {
    let inputs = Inputs::new(&args.layers)?;
    let live = ipc::request(&ipc::socket_path(&inputs), &json!({"cmd": "status"})).await;
    let (servers, errors) = match live {
        Ok(Some(report)) => (
            report
                .get("servers")
                .cloned()
                .unwrap_or(Value::Array(Vec::new())),
            report
                .get("errors")
                .cloned()
                .unwrap_or(Value::Array(Vec::new())),
        ),
        // No running session (or it is unreachable): what the files say.
        _ => {
            let report = Host::config_status(inputs);
            let servers = report.servers.iter().map(status_json).collect();
            (Value::Array(servers), json!(report.errors))
        }
    };
    let errors: Vec<String> = errors
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|e| e.as_str().map(str::to_owned))
        .collect();
    if args.json {
        println!("{servers}");
        for error in &errors {
            eprintln!("! {}", display::safe_multiline(error));
        }
        return Ok(());
    }
    let servers = servers.as_array().cloned().unwrap_or_default();
    print!("{}", status_text(&servers, &errors));
    Ok(())
}

fn decide(args: DecideArgs, decision: Decision) -> anyhow::Result<()> {
    let mut inputs = Inputs::new(&args.layers)?;
    let snapshot = inputs.load(None);
    for error in &snapshot.errors {
        eprintln!("! {}", display::safe_multiline(&error.to_string()));
    }
    let servers = assemble(&snapshot.layers).servers;
    let store = inputs.approvals_store();
    let root = inputs.project_root().to_owned();
    let targets: Vec<String> = match &args.name {
        Some(name) => {
            let Some(config) = servers.get(name) else {
                bail!("no configured server named {}; run `mcp-reconcile status` with the same flags to list them", quoted(name));
            };
            if !config.is_gated() {
                bail!(
                    "{} does not come from a project-controlled file, so it needs no approval",
                    quoted(name)
                );
            }
            vec![name.clone()]
        }
        None => servers
            .iter()
            .filter(|(_, cfg)| cfg.is_gated())
            .filter(|(name, cfg)| {
                let state = snapshot.approvals.state(&root, name, cfg);
                match decision {
                    Decision::Approved => state != ApprovalState::Approved,
                    Decision::Rejected => state == ApprovalState::Pending,
                }
            })
            .map(|(name, _)| name.clone())
            .collect(),
    };
    if targets.is_empty() {
        println!("nothing to decide: no project-controlled server is waiting");
        return Ok(());
    }
    let verb = match decision {
        Decision::Approved => "approved",
        Decision::Rejected => "rejected",
    };
    // What is decided is exactly what is shown: one snapshot, read once.
    let requests: Vec<ApprovalRequest> = targets
        .iter()
        .filter_map(|name| {
            servers
                .get(name)
                .map(|config| ApprovalRequest::new(&snapshot, name, config))
        })
        .collect();
    if let Some(expected) = &args.hash {
        for request in &requests {
            if !request.hash.eq_ignore_ascii_case(expected.trim()) {
                print!("{}", request.review());
                bail!(
                    "{} changed since it was reviewed: its entry now hashes to {}, not {} — nothing was {verb}; review the entry above and run the command again with the new hash",
                    quoted(&request.name),
                    request.hash,
                    display::safe(expected)
                );
            }
        }
    }
    for request in requests {
        print!("{}", request.review());
        store
            .decide(&root, &request.name, &request.config, decision)
            .with_context(|| format!("storing the decision for {}", quoted(&request.name)))?;
        println!("{verb} {} (hash {})", quoted(&request.name), request.hash);
    }
    Ok(())
}

async fn plan(args: PlanArgs) -> anyhow::Result<()> {
    let inputs = Inputs::new(&args.layers)?;
    let live = ipc::request(&ipc::socket_path(&inputs), &json!({"cmd": "plan"})).await?;
    let plan = match live {
        Some(plan) => plan,
        None => plan_json(&Host::config_plan(inputs).map_err(anyhow::Error::msg)?),
    };
    if args.json {
        println!("{plan}");
        return Ok(());
    }
    let actions = plan
        .get("actions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    for action in &actions {
        println!("{}", action_line_json(action));
    }
    Ok(())
}

/// One response line per request line, flushed per line so a driving process
/// can talk to it interactively. Blank lines are skipped.
fn eval(input: impl BufRead, mut output: impl Write) -> anyhow::Result<()> {
    for line in input.split(b'\n') {
        let line = line.context("reading a request from stdin")?;
        let text = String::from_utf8_lossy(&line);
        let text = text.trim_end_matches('\r');
        if text.trim().is_empty() {
            continue;
        }
        let response = mcp_reconcile_kernel::evaluate_str(text);
        match writeln!(output, "{response}").and_then(|()| output.flush()) {
            Ok(()) => {}
            // The reader went away (e.g. `| head`): stop quietly.
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe => return Ok(()),
            Err(e) => return Err(e).context("writing a response to stdout"),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn eval_answers_each_line_and_survives_garbage() {
        let input = b"{\"op\":\"connectionId\",\"name\":\"a\",\"config\":{\"command\":\"x\"}}\n\nnot json\n{\"op\":\"nope\"}\n";
        let mut out = Vec::new();
        eval(&input[..], &mut out).expect("eval runs");
        let text = String::from_utf8(out).expect("utf-8");
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 3);
        assert!(lines[0].starts_with("{\"ok\":\"a::"), "{}", lines[0]);
        assert!(
            lines[1].contains("\"kind\":\"invalid-json\""),
            "{}",
            lines[1]
        );
        assert!(lines[2].contains("\"kind\":\"unknown-op\""), "{}", lines[2]);
    }
}
