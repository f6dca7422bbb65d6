//! `mcp-reconcile`: apply MCP server configuration edits to a running session.
//!
//! The binary is the command line around the `mcp_reconcile` library: the
//! clap types, the session-socket client, what people read and the demo live
//! in [`cli`]; this file starts sessions (`watch` and `serve` share one path,
//! [`run_session`]).

#[macro_use]
mod cli;

use std::io::{self, IsTerminal, Write};
use std::process::ExitCode;

use anyhow::Context;
use clap::Parser;
use mcp_reconcile::display;
use mcp_reconcile::host::{Host, HostEvent, HostHandle, HostOptions};
use mcp_reconcile::inputs::Inputs;
use mcp_reconcile::{gateway, ipc};
use mcp_reconcile_kernel::Decision;
use tokio::sync::mpsc;

use cli::args::{Cli, Command, DaemonArgs, EventsFormat, ServeArgs, WatchArgs};
use cli::print::{lsp_failure_line, lsp_plan_text};
use cli::prompt::{approval_hint, restore_terminal, Input};
use cli::report::{failure_line, report_text, Failures};
use cli::watch::{print_watch, say, Output, Stores};

fn main() -> ExitCode {
    mcp_reconcile::tls::install_crypto_provider();
    if cli::commands::asks_version() {
        return match runtime().and_then(|rt| rt.block_on(cli::commands::version())) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("mcp-reconcile: {e:#}");
                ExitCode::FAILURE
            }
        };
    }
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Eval => cli::commands::eval(io::stdin().lock(), io::stdout().lock()),
        Command::Reap => {
            mcp_reconcile::reaper::run(io::stdin().lock());
            Ok(())
        }
        command => runtime().and_then(|rt| {
            // Every server group this process spawns is killed even if it is killed itself.
            if let Ok(exe) = std::env::current_exe() {
                mcp_reconcile::reaper::install(exe);
            }
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
    use cli::commands;
    match command {
        Command::Watch(args) => watch(args).await,
        Command::Serve(args) if args.attaches() => serve_attached(args).await,
        Command::Serve(args) => serve(args).await,
        Command::Daemon(args) => daemon(args).await,
        Command::Install(args) => cli::install::install(&args),
        Command::Uninstall(args) => cli::install::uninstall(&args),
        Command::Mcp(command) => cli::mcp::run(command).await,
        Command::Status(args) => commands::status(args).await,
        Command::Approve(args) => commands::decide(args, Decision::Approved),
        Command::Reject(args) => commands::decide(args, Decision::Rejected),
        Command::ReviewTools(args) => cli::review_tools::review_tools(&args),
        Command::Plan(args) => commands::plan(args).await,
        Command::Reconnect(args) => commands::reconnect(args).await,
        Command::Auth(args) => {
            init_logging();
            commands::auth(args).await
        }
        Command::Reload(args) => commands::reload(args).await,
        Command::Eval | Command::Reap => Ok(()),
    }
}

/// What differs between `watch` and `serve`; everything else about a
/// session (the socket, the watcher, the host, the shutdown) is
/// [`run_session`].
enum Front {
    /// `watch`: plans and failures (or JSON events) on stdout; asks about servers that
    /// need approval; runs until Ctrl-C / SIGTERM; SIGHUP reloads.
    Watch(Output),
    /// `serve`: the MCP gateway on stdio, or on HTTP with its guard; logs on
    /// stderr; runs until the client leaves or Ctrl-C / SIGTERM.
    Serve {
        /// `--http`: the address and what every request must carry.
        http: Option<(std::net::SocketAddr, Box<HttpGuard>)>,
        /// `--passthrough NAME`: only that server, under its own names.
        passthrough: Option<String>,
        /// `--tool-names`: how the servers' tools and prompts are named.
        tool_names: gateway::ToolNames,
        /// `--manage-tools`: the status, reload and reconnect tools.
        manage_tools: bool,
    },
}

/// Runs one session for `inputs` until `front` says stop: claims the
/// session socket (refused if one runs for the same files), watches the
/// files, runs the host, then stops every server.
async fn run_session(inputs: Inputs, options: HostOptions, front: Front) -> anyhow::Result<()> {
    let socket = ipc::socket_path(&inputs);
    let stores = Stores {
        mcp: inputs.approvals_store().clone(),
        lsp: inputs.lsp_approvals_store().clone(),
    };
    let project_root = inputs.project_root().to_owned();
    let mut host = Host::new(inputs, options);
    // The socket is claimed before any server starts (refused if a session runs for the same
    // files); its requests wait until the host runs.
    let _guard = ipc::serve(&socket, host.handle()).await?;
    let events = host.subscribe();
    let announcements = matches!(front, Front::Serve { .. }).then(|| host.subscribe());
    let session = host.spawn()?;
    let watching = match &front {
        Front::Watch(output) => Some(*output),
        Front::Serve { .. } => None,
    };
    let printer = match &front {
        Front::Watch(output) => tokio::spawn(print_watch(events, *output, stores, project_root)),
        Front::Serve { .. } => tokio::spawn(print_serve(events)),
    };
    let (result, announcer) = match front {
        Front::Watch(_) => {
            until_stopped_reloading_on_hup(session.handle()).await;
            (Ok(()), None)
        }
        Front::Serve {
            http,
            passthrough,
            tool_names,
            manage_tools,
        } => {
            let handle = session.handle().clone();
            let gateway = match passthrough {
                Some(server) => gateway::Gateway::passthrough(handle, &server),
                None => gateway::Gateway::new(handle).with_tool_names(tool_names),
            }
            .with_manage_tools(manage_tools);
            let announcer =
                announcements.map(|events| tokio::spawn(gateway.clone().announce(events)));
            let result = match http {
                None => serve_stdio(gateway).await,
                Some((addr, guard)) => serve_http(addr, *guard, gateway).await,
            };
            (result, announcer)
        }
    };
    let _ = session.shutdown().await;
    printer.abort();
    if let Some(announcer) = announcer {
        announcer.abort();
    }
    match watching {
        Some(Output::Text { .. }) => {
            restore_terminal();
            say("stopped every server\n");
        }
        Some(Output::Json) => say(&cli::events::json_line(&cli::events::stopped_event())),
        None => eprintln!("mcp-reconcile serve: stopped every server"),
    }
    result
}

async fn watch(args: WatchArgs) -> anyhow::Result<()> {
    let (attaches, insisted) = (args.attaches(), args.daemon);
    // `watch` speaks to people on stdout; library logs only when asked for.
    if std::env::var_os("MCP_RECONCILE_LOG").is_some() {
        init_logging();
    }
    let mut demo_dir = None;
    let layers = if args.demo {
        let demo = cli::demo::write_demo()?;
        if args.events == EventsFormat::Json {
            eprint!("{}", demo.instructions);
        } else {
            say(&demo.instructions);
        }
        demo_dir = Some(demo.dir);
        demo.flags
    } else {
        args.layers
    };
    let output = match args.events {
        EventsFormat::Json => Output::Json,
        EventsFormat::Text if args.no_prompt => Output::Text { ask: None },
        EventsFormat::Text if io::stdin().is_terminal() => Output::Text {
            ask: Some(Input::Key),
        },
        EventsFormat::Text => Output::Text {
            ask: Some(Input::Line),
        },
    };
    if attaches {
        match cli::daemon_watch::watch_attached(layers.options(), output).await {
            Err(e) if !insisted && e.is::<cli::daemon_watch::Unreachable>() => {
                // As `serve`: a daemon that cannot be reached or started is no reason to fail.
                eprintln!(
                    "mcp-reconcile watch: the per-user daemon is not available ({}); running \
                     the session in this process",
                    display::safe_multiline(&format!("{e:#}"))
                );
            }
            done => return done,
        }
    }
    let inputs = Inputs::new(&layers.options())?;
    let options = HostOptions {
        full_restart: args.full_restart,
        ..HostOptions::default()
    };
    let result = run_session(inputs, options, Front::Watch(output)).await;
    if let Some(dir) = demo_dir {
        let _ = std::fs::remove_dir_all(&dir);
    }
    result
}

async fn serve(args: ServeArgs) -> anyhow::Result<()> {
    init_logging();
    let inputs = Inputs::new(&args.layers.options())?;
    // The HTTP guard before any server starts: a bad --token-file stops here.
    let http = match args.http {
        Some(addr) => Some((addr, Box::new(http_guard(&args, &inputs)?))),
        None => None,
    };
    let passthrough = args.passthrough.clone();
    let options = HostOptions::default().start_grace_from(inputs.env());
    run_session(
        inputs,
        options,
        Front::Serve {
            http,
            passthrough,
            tool_names: args.tool_names.into(),
            manage_tools: args.manage_tools,
        },
    )
    .await
}

/// `serve` on stdio (or `serve --daemon`): a thin bridge between the client on stdio and a
/// session of the per-user daemon (started when none runs).
async fn serve_attached(args: ServeArgs) -> anyhow::Result<()> {
    use mcp_reconcile::daemon::{self, relay};
    init_logging();
    let env = mcp_reconcile::inputs::HostEnv::from_process()?;
    let dir = daemon::socket_dir(&env);
    let exe = std::env::current_exe().context("cannot find the mcp-reconcile binary")?;
    if !args.daemon {
        // The default: a daemon that cannot be reached or started is no reason to fail the
        // client; the session then runs here, as with --no-daemon.
        if let Err(e) = mcp_reconcile::daemon::bridge::connect_or_start(&dir, &exe).await {
            eprintln!(
                "mcp-reconcile serve: the per-user daemon is not available ({}); running the \
                 session in this process",
                display::safe_multiline(&format!("{e:#}"))
            );
            return serve(args).await;
        }
    }
    let (events, printed) = mpsc::unbounded_channel();
    let printer = tokio::spawn(print_serve(printed));
    let result = relay::relay_stdio(relay::Reattach {
        dir,
        exe,
        options: args.layers.options(),
        env,
        tool_names: args.tool_names.into(),
        events,
        manage_tools: args.manage_tools,
    })
    .await;
    // Everything the session said reaches stderr before `serve` exits.
    let _ = printer.await;
    result
}

/// `daemon`: the per-user daemon, until it has been idle for `--idle-exit-ms`.
async fn daemon(args: DaemonArgs) -> anyhow::Result<()> {
    use mcp_reconcile::daemon::{self, DaemonOptions};
    init_logging();
    let env = mcp_reconcile::inputs::HostEnv::from_process()?;
    if args.status {
        return cli::commands::daemon_status(&daemon::socket_dir(&env), args.json).await;
    }
    // The daemon's environment is that of the session that started it: its SSL_CERT_FILE /
    // SSL_CERT_DIR must not be trusted for every other session's connections.
    mcp_reconcile::tls::distrust_process_environment();
    let options = DaemonOptions {
        drain: std::time::Duration::from_millis(args.drain_ms),
        idle_exit: std::time::Duration::from_millis(args.idle_exit_ms),
    };
    if !daemon::run(&daemon::socket_dir(&env), options).await? {
        eprintln!("mcp-reconcile daemon: another daemon is already running");
    }
    Ok(())
}

/// `serve`'s printer: everything for people goes to stderr, as stdout may be
/// the MCP channel.
async fn print_serve(mut events: mpsc::UnboundedReceiver<HostEvent>) {
    let mut failures = Failures::default();
    while let Some(event) = events.recv().await {
        match event {
            HostEvent::PlanApplied(report) => eprint!("{}", report_text(&report, &mut failures)),
            HostEvent::ReloadFailed(message) => {
                eprintln!("! {}", display::safe_multiline(&message));
            }
            HostEvent::ClientUpdate(s) => {
                if let Some(line) = failure_line(&s, &mut failures) {
                    eprintln!("{line}");
                }
            }
            HostEvent::ApprovalNeeded(requests) => {
                for request in requests {
                    eprint!("{}", approval_hint(&request));
                }
            }
            HostEvent::LspPlanApplied(actions) => eprint!("{}", lsp_plan_text(&actions)),
            HostEvent::LspUpdate(s) => {
                if let Some(line) = lsp_failure_line(&s) {
                    eprintln!("{line}");
                }
            }
            HostEvent::CatalogChanged(_) | HostEvent::Idle { .. } => {}
        }
    }
}

/// Until Ctrl-C or SIGTERM; SIGHUP meanwhile reloads the files (as
/// `mcp-reconcile reload` does).
async fn until_stopped_reloading_on_hup(session: &HostHandle) {
    use tokio::signal::unix::{signal, SignalKind};
    let (Ok(mut hup), Ok(mut term)) = (
        signal(SignalKind::hangup()),
        signal(SignalKind::terminate()),
    ) else {
        // No signal handlers (never seen in practice): Ctrl-C alone.
        let _ = tokio::signal::ctrl_c().await;
        return;
    };
    loop {
        tokio::select! {
            _ = tokio::signal::ctrl_c() => break,
            _ = term.recv() => break,
            _ = hup.recv() => {
                // Queued without waiting: the signals are heard meanwhile.
                let session = session.clone();
                tokio::spawn(async move { session.reload().await });
            }
        }
    }
}

/// Logs to stderr (stdout may be the MCP channel), filtered by
/// `MCP_RECONCILE_LOG` (default `warn`).
///
/// rmcp's OAuth module logs the authorization code at `debug`: it is held at `info`
/// whatever the variable says, so no credential reaches a log.
fn init_logging() {
    let filter = tracing_subscriber::EnvFilter::try_from_env("MCP_RECONCILE_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let filter = match "rmcp::transport::auth=info".parse() {
        Ok(directive) => filter.add_directive(directive),
        Err(_) => filter,
    };
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(io::stderr)
        .with_ansi(io::stderr().is_terminal())
        .try_init();
}

/// Until the client closes stdin (or SIGTERM / Ctrl-C).
async fn serve_stdio(gateway: gateway::Gateway) -> anyhow::Result<()> {
    use rmcp::ServiceExt;
    let service = tokio::select! {
        service = gateway.serve(rmcp::transport::io::stdio_pipes()) => {
            service.context("the MCP client did not complete the handshake on stdin/stdout")?
        }
        () = mcp_reconcile::signal::stop_signal() => return Ok(()),
    };
    let cancel = service.cancellation_token();
    tokio::select! {
        _ = service.waiting() => {}
        () = mcp_reconcile::signal::stop_signal() => cancel.cancel(),
    }
    Ok(())
}

/// What `serve --http` requires of every request: the bearer token (from
/// `--token-file`, or generated into a 0600 file in the state dir, removed
/// when the returned guard is dropped), the allowed origins, the session caps.
struct HttpGuard {
    options: mcp_reconcile::http_guard::GuardOptions,
    /// `None` with `--no-auth`.
    token_path: Option<std::path::PathBuf>,
    _written: Option<mcp_reconcile::http_guard::TokenFile>,
}

fn http_guard(args: &ServeArgs, inputs: &Inputs) -> anyhow::Result<HttpGuard> {
    use mcp_reconcile::http_guard::{GuardOptions, Token, TokenFile};
    let (token, token_path, written) = match &args.token_file {
        _ if args.no_auth => (None, None, None),
        Some(path) => (Some(Token::from_file(path)?), Some(path.clone()), None),
        None => {
            let token = Token::generate()?;
            let file = TokenFile::write(inputs.state_dir(), &inputs.session_id(), &token)?;
            (Some(token), Some(file.path().to_owned()), Some(file))
        }
    };
    Ok(HttpGuard {
        options: GuardOptions {
            token,
            allowed_origins: args.allow_origin.clone(),
            max_sessions: usize::try_from(args.max_sessions).unwrap_or(usize::MAX),
            session_idle: std::time::Duration::from_secs(args.session_idle_secs),
            connections: mcp_reconcile::http_guard::ConnectionLimits {
                max_connections: usize::try_from(args.max_connections).unwrap_or(usize::MAX),
                header_timeout: std::time::Duration::from_secs(args.header_timeout_secs),
            },
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
    outln!("http://{bound}/mcp");
    match &token_path {
        Some(path) => {
            outln!("{}", path.display());
            let _ = io::stdout().flush();
            eprintln!(
                "mcp-reconcile serve: listening on http://{bound}/mcp; every request must send \
                 `Authorization: Bearer <token>` with the token in {}",
                path.display()
            );
        }
        None => {
            let _ = io::stdout().flush();
            eprintln!(
                "mcp-reconcile serve: listening on http://{bound}/mcp WITHOUT authentication \
                 (--no-auth): any process of any user on this machine can call every admitted \
                 server's tools. Use it only for clients that cannot send a token, and stop it \
                 when done."
            );
        }
    }
    mcp_reconcile::signal::stop_signal().await;
    stop.cancel();
    let _ = tokio::time::timeout(std::time::Duration::from_secs(3), server).await;
    drop(written);
    Ok(())
}
