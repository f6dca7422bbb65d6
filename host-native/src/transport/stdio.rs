//! A stdio server's MCP connection: its process ([`ChildProcess`], own process group, stopped
//! group-wide) and rmcp's transport over its pipes, the handshake bounded.

use mcp_reconcile_kernel::ServerConfig;
use rmcp::transport::async_rw::AsyncRwTransport;
use std::sync::Arc;

use tokio::sync::Notify;
use tokio::time::Instant;

pub use super::process::ChildProcess;
use super::session::{handshake, start, Ending, Handler, Opening};
use super::{with_stderr, ConnectError, ConnectErrorKind, ConnectOptions, Connection, Ctx, SETTLE};

/// Starts a stdio server and runs the handshake (see [`super::connect`]).
pub(super) async fn connect_stdio(
    mut ctx: Ctx,
    config: &ServerConfig,
    opts: ConnectOptions,
) -> Result<Connection, ConnectError> {
    // What the process inherits is as secret as what its entry configures: every text made
    // of its stderr or its failures is masked of both.
    let inherited = super::process::env_secrets(config, opts.launch.as_deref());
    ctx.secrets = crate::redact::merged(std::mem::take(&mut ctx.secrets), inherited);
    let deadline = Instant::now() + opts.handshake_timeout;
    let program = config.str_field("command").unwrap_or_default().to_owned();
    let (mut process, pipes) = ChildProcess::spawn(
        config,
        opts.base_dir.as_deref(),
        opts.launch.as_deref(),
        ctx.secrets.clone(),
        &ctx.name,
    )
    .map_err(|e| {
        ctx.error(
            ConnectErrorKind::Spawn,
            &format!("could not start `{program}`: {e}; check `command`, `cwd` and PATH"),
        )
    })?;
    tracing::debug!(server = %ctx.name, pid = process.pid(), "spawned");
    let transport = AsyncRwTransport::new_client(pipes.stdout, pipes.stdin);
    let relist = Arc::new(Notify::new());
    let outcome = tokio::time::timeout_at(
        deadline,
        handshake(
            Handler::new(relist.clone(), opts.elicitation.clone(), &ctx),
            transport,
            None,
            Opening::Initialize,
        ),
    )
    .await;
    match outcome {
        Ok(Ok((service, catalog))) => {
            let pid = process.pid();
            Ok(start(
                ctx,
                opts,
                service,
                catalog,
                relist,
                Ending::Process(process),
                Some(pid),
            ))
        }
        Ok(Err(failure)) => {
            // The process usually exited: its status and last words explain the failure.
            let status = process.wait_exit(SETTLE).await;
            process.stderr_settled(SETTLE).await;
            process.stop().await;
            let stderr = with_stderr(&process.stderr_tail());
            let what = match status {
                Some(s) if failure.in_initialize => {
                    format!("exited during the MCP handshake ({s}){stderr}")
                }
                Some(s) => format!("{}; the process exited ({s}){stderr}", failure.what),
                None => format!("{}{stderr}", failure.what),
            };
            Err(ctx.error(failure.kind, &what))
        }
        Err(_) => {
            process.stop().await;
            process.stderr_settled(SETTLE).await;
            Err(ctx.error(
                ConnectErrorKind::Timeout,
                &format!(
                    "did not finish the MCP handshake within {} ms (`discoveryTimeoutMs`); \
                     stopped it{}",
                    opts.handshake_timeout.as_millis(),
                    with_stderr(&process.stderr_tail())
                ),
            ))
        }
    }
}
