//! `mcp-fixture-server`: the MCP server that the integration tests, the demo, the benchmarks
//! and the TypeScript bridge tests connect to. See `--help` and the README beside this crate.
//!
//! Start-up runs in a fixed order, so tests can rely on it:
//! 1. parse the options (a bad one exits with status 2 before any side effect);
//! 2. append `server <pid>` to the marker file;
//! 3. start the grandchild and append `child <pid>`;
//! 4. write the requested stderr lines;
//! 5. exit if `--exit-immediately`;
//! 6. arm the `--crash-after` timer;
//! 7. wait `--start-delay-ms`, then until the `--wait-for` file exists;
//! 8. serve (stdio or HTTP; normally, hung, or garbage) until stdin closes or a signal arrives.

mod asks;
mod cli;
mod described;
mod faults;
mod http;
mod modern;
mod oauth;
mod reference;
mod server;
mod skills;

use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use rmcp::service::ServerInitializeError;
use rmcp::ServiceExt;
use tokio::signal::unix::{signal, SignalKind};

use crate::cli::Args;
use crate::server::{Catalog, Fixture};

fn main() -> ExitCode {
    let args = Args::parse();
    let code = match run(args) {
        Ok(()) => 0,
        Err(e) => {
            eprintln!("fixture: {e:#}");
            1
        }
    };
    std::process::exit(code)
}

fn run(args: Args) -> anyhow::Result<()> {
    start_up(&args)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("cannot start the tokio runtime")?;
    let result = runtime.block_on(serve_until_stopped(args));
    // Dropping the runtime would wait for the blocking thread stuck in a stdin read, and so
    // never exit on a signal while stdin is open.
    runtime.shutdown_background();
    result
}

/// Steps 2–5 of the start-up order.
fn start_up(args: &Args) -> anyhow::Result<()> {
    if let Some(marker) = &args.marker {
        faults::append_marker(marker, &format!("server {}", std::process::id()))?;
    }
    if args.spawn_child {
        let pid = faults::spawn_grandchild()?;
        if let Some(marker) = &args.marker {
            faults::append_marker(marker, &format!("child {pid}"))?;
        }
    }
    faults::write_stderr_lines(args.stderr_lines);
    if let Some(code) = args.exit_immediately {
        eprintln!("fixture: exiting immediately with status {code} as asked");
        std::process::exit(code);
    }
    Ok(())
}

async fn serve_until_stopped(args: Args) -> anyhow::Result<()> {
    if let Some(ms) = args.crash_after {
        faults::crash_after(Duration::from_millis(ms));
    }
    let mut term = signal(SignalKind::terminate()).context("cannot watch SIGTERM")?;
    let mut int = signal(SignalKind::interrupt()).context("cannot watch SIGINT")?;
    tokio::select! {
        result = async {
            if let Some(ms) = args.start_delay_ms {
                tokio::time::sleep(Duration::from_millis(ms)).await;
            }
            if let Some(gate) = &args.wait_for {
                faults::wait_for(gate).await;
            }
            serve(args).await
        } => result,
        _ = term.recv() => {
            eprintln!("fixture: SIGTERM, exiting");
            Ok(())
        }
        _ = int.recv() => {
            eprintln!("fixture: SIGINT, exiting");
            Ok(())
        }
    }
}

async fn serve(args: Args) -> anyhow::Result<()> {
    let catalog = Arc::new(Catalog::from_args(&args));
    if let Some(addr) = args.http {
        let mode = if args.conformance_reference {
            http::Mode::Reference(args.modern.then(modern::Modern::new))
        } else if args.hang_handshake {
            http::Mode::Hang
        } else if args.garbage {
            http::Mode::Garbage
        } else {
            http::Mode::Mcp
        };
        let tls = match (&args.tls_cert, &args.tls_key) {
            (Some(cert), Some(key)) => Some(http::tls_acceptor(cert, key)?),
            _ => None,
        };
        let oauth = args
            .oauth
            .then(|| std::time::Duration::from_secs(args.oauth_token_ttl));
        return http::serve(addr, catalog, mode, tls, oauth).await;
    }
    if args.hang_handshake {
        return faults::swallow_stdin().await;
    }
    if args.garbage {
        return faults::answer_with_garbage().await;
    }
    if args.conformance_reference {
        let modern = args.modern.then(modern::Modern::new);
        return serve_stdio(reference::Reference::new(modern)).await;
    }
    serve_stdio(Fixture::new(catalog)).await
}

/// Serves `handler` over stdio until the client goes away.
async fn serve_stdio(handler: impl rmcp::ServerHandler) -> anyhow::Result<()> {
    match handler.serve(rmcp::transport::stdio()).await {
        Ok(running) => {
            running.waiting().await.context("the MCP session failed")?;
            Ok(())
        }
        // The client went away before finishing the handshake: as clean as any stdin close.
        Err(ServerInitializeError::ConnectionClosed(_)) => Ok(()),
        Err(e) => Err(e).context("the MCP handshake failed"),
    }
}
