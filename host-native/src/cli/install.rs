//! `install CLIENT` / `uninstall CLIENT`: the library's edits (`mcp_reconcile::install`), the
//! record kept beside them, and what is said to the person who ran it.

use std::path::PathBuf;

use anyhow::Context as _;
use mcp_reconcile::display;
use mcp_reconcile::inputs::HostEnv;
use mcp_reconcile::install::{self, Change, Record};

use super::args::InstallArgs;

/// The state directory: the flag's, else `$XDG_STATE_HOME/mcp-reconcile` or
/// `~/.local/state/mcp-reconcile` (where sessions keep their sockets too).
fn state_dir(args: &InstallArgs, env: &HostEnv) -> anyhow::Result<PathBuf> {
    if let Some(dir) = &args.state_dir {
        return Ok(env.cwd.join(dir));
    }
    match env.vars.get("XDG_STATE_HOME").map(PathBuf::from) {
        Some(dir) if dir.is_absolute() => Ok(dir.join("mcp-reconcile")),
        _ => Ok(env
            .home
            .clone()
            .context("cannot find your home directory: set HOME or pass --state-dir")?
            .join(".local/state/mcp-reconcile")),
    }
}

fn show(changes: &[Change]) {
    for change in changes.iter().filter(|c| c.changes()) {
        out!("{}", install::diff(change));
    }
}

/// Says which binary the clients start, when it is not the user's own `mcp-reconcile` command.
fn say_where(stable: &install::exe::StableExe, placed: bool) {
    if let install::exe::StableExe::Placed(path) = stable {
        outln!(
            "{} {}: this binary does not run as `mcp-reconcile` from your PATH (an npx cache, \
             node_modules or a build folder goes away), so your clients start this per-user \
             copy",
            if placed {
                "put this binary at"
            } else {
                "would put this binary at"
            },
            display::safe(&path.display().to_string())
        );
    }
}

/// `install CLIENT`.
///
/// # Errors
/// A file cannot be read, parsed or written, or install would override a list of the user's.
pub fn install(args: &InstallArgs) -> anyhow::Result<()> {
    let client = args.client;
    let afterwards = install::how(client)?.afterwards;
    let env = HostEnv::from_process()?;
    let running = std::env::current_exe()
        .and_then(std::fs::canonicalize)
        .context("cannot find this program's own path")?;
    let state = state_dir(args, &env)?;
    let version = mcp_reconcile::daemon::version::ours();
    let stable = install::exe::stable_exe(&env, &running, &version)?;
    let exe = stable.path().to_path_buf();
    if args.permissions && !install::is_claude(client) {
        anyhow::bail!("--permissions is for Claude Code's permission rules (install claude)");
    }
    if args.dry_run {
        say_where(&stable, false);
        let mut changes = install::install(client, &env, &exe)?;
        if args.permissions {
            changes.push(install::claude_permissions::apply(&env, true)?);
        }
        if changes.iter().any(Change::changes) {
            show(&changes);
        } else {
            outln!(
                "nothing to change: mcp-reconcile is installed for {}",
                client.as_str()
            );
        }
        return Ok(());
    }
    install::exe::place(&stable, &running)?;
    say_where(&stable, true);
    // Each file's bytes are backed up before a byte of it changes.
    let (mut changes, record) = install::install_and_record(client, &env, &exe, &state)?;
    if args.permissions {
        let renamed = install::claude_permissions::apply(&env, false)?;
        if renamed.changes() {
            changes.push(renamed);
        }
    }
    if changes.is_empty() {
        outln!(
            "mcp-reconcile is already installed for {}; nothing changed",
            client.as_str()
        );
        return Ok(());
    }
    for change in changes.iter().filter(|c| c.changes()) {
        outln!(
            "changed {}",
            display::safe(&change.path.display().to_string())
        );
    }
    outln!(
        "kept the bytes it replaced in {} — `mcp-reconcile uninstall {}` takes install out \
         again, keeping every change made since",
        display::safe(&record.dir.display().to_string()),
        client.as_str()
    );
    outln!("{afterwards}");
    Ok(())
}

/// `uninstall CLIENT`.
///
/// # Errors
/// The record or a file cannot be read, or a file cannot be written.
pub fn uninstall(args: &InstallArgs) -> anyhow::Result<()> {
    let client = args.client;
    let env = HostEnv::from_process()?;
    let state = state_dir(args, &env)?;
    let Some(record) = Record::load(&state, client)? else {
        outln!(
            "mcp-reconcile is not installed for {} (no record in {}); nothing changed",
            client.as_str(),
            display::safe(&Record::dir_of(&state, client).display().to_string())
        );
        return Ok(());
    };
    if args.dry_run {
        show(&install::uninstall(client, &record)?);
        return Ok(());
    }
    let changes = install::uninstall_and_restore(client, &record)?;
    for file in &record.files {
        let Some(change) = changes.iter().find(|c| c.path == file.path) else {
            continue;
        };
        let path = display::safe(&change.path.display().to_string()).into_owned();
        if file.untouched_since_install(change.before.as_deref()) {
            outln!("restored {path}");
        } else {
            outln!("{path} changed since install: took out only what install added");
        }
    }
    record.remove()?;
    Ok(())
}
