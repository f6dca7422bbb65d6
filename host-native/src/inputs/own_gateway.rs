//! `serve` never adopts itself. A client that runs `mcp-reconcile serve` keeps the gateway's own
//! entry in its configuration, and a layout (or `--mcp-config`) may read that very file: started,
//! the entry would be a second `serve` reading the same files, which finds the entry again and
//! starts a third — a chain that holds itself alive. Such an entry is taken out of the layers
//! before the kernel sees them, with a message that says why.
//!
//! The entry `mcp-reconcile install` writes for a client carries [`INSTALLED_MARK`] in its
//! `env`: it is the gateway the client starts, expected in the client's files, and is taken out
//! without a message (it is not one of the servers the gateway reaches).
//!
//! The installed entry is recognized by its mark alone (and `serve` as its subcommand), whatever
//! file its command names: after an upgrade the client's entry names the new binary — a new
//! inode at the same path, or another path — while a daemon of the old version still runs the
//! sessions; adopted, it would start a nested `serve` of every session (issue 37). Dropping an
//! entry never widens anything, so the mark needs no more proof.
//!
//! For any other entry, "runs this gateway" means: the entry's first argument that is not an
//! option is `serve`, and its command resolves — as the spawn resolves it, through the entry's own `PATH` or the
//! session's — to this very executable file (same device and inode, so a link or another path to
//! it counts). A wrapper (`npx`, `sh -c`, a script) is not seen through.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use mcp_reconcile_kernel::json::Value;
use mcp_reconcile_kernel::{Layer, ServerConfig};

use super::InputError;

/// The variable `install` puts in the gateway entry it writes (its value: the client).
pub const INSTALLED_MARK: &str = "MCP_RECONCILE_INSTALLED";

/// Whether `config` is an entry `install` wrote.
fn installed(config: &ServerConfig) -> bool {
    matches!(config.get("env"), Some(Value::Object(env)) if env.contains_key(INSTALLED_MARK))
}

/// This executable's file identity, read once.
fn myself() -> Option<(u64, u64)> {
    static MYSELF: OnceLock<Option<(u64, u64)>> = OnceLock::new();
    *MYSELF.get_or_init(|| {
        let meta = std::fs::metadata(std::env::current_exe().ok()?).ok()?;
        Some((meta.dev(), meta.ino()))
    })
}

/// Whether `config` starts this executable's `serve`. `session_path` is the `PATH` a server of
/// this session starts with unless its entry sets one; `cwd` is the session's directory, where a
/// relative command (or the entry's relative `cwd`) is found.
pub(super) fn runs_own_serve(
    config: &ServerConfig,
    session_path: Option<&str>,
    cwd: &Path,
) -> bool {
    let Some(command) = config.str_field("command").filter(|c| !c.is_empty()) else {
        return false;
    };
    // The cheap test first: most entries never get to a file-system lookup.
    if !subcommand_is_serve(config) {
        return false;
    }
    if installed(config) {
        return true;
    }
    let Some(me) = myself() else {
        return false;
    };
    let program = if command.contains('/') {
        // Relative to where the server runs: its own `cwd` (itself relative to the session's).
        let dir = match config.str_field("cwd").filter(|c| !c.is_empty()) {
            Some(own) => cwd.join(own),
            None => cwd.to_path_buf(),
        };
        Some(dir.join(command))
    } else {
        let path = match config.get("env") {
            Some(Value::Object(env)) => match env.get("PATH") {
                Some(value @ (Value::String(_) | Value::Number(_) | Value::Bool(_))) => {
                    Some(value.to_js_string())
                }
                _ => session_path.map(str::to_owned),
            },
            _ => session_path.map(str::to_owned),
        };
        crate::transport::process::lookup(command, &path.map(Into::into))
    };
    program
        .and_then(|p: PathBuf| std::fs::metadata(p).ok())
        .is_some_and(|meta| (meta.dev(), meta.ino()) == me)
}

/// Whether the entry's first argument that is not an option is `serve`.
fn subcommand_is_serve(config: &ServerConfig) -> bool {
    let Some(Value::Array(args)) = config.get("args") else {
        return false;
    };
    args.iter()
        .map(Value::to_js_string)
        .find(|arg| !arg.starts_with('-'))
        .is_some_and(|arg| arg == "serve")
}

/// Takes every entry that runs this gateway's `serve` out of `layers` and `written` (the same
/// layers as their files wrote them), and says so once per entry, naming the file it came from
/// (`files[i]` for `layers[i]`) — except for the entry `install` wrote. Returns the names of the
/// installed gateway entries taken out.
pub(super) fn drop_own_entries(
    layers: &mut [Layer],
    written: &mut [Layer],
    files: &[PathBuf],
    session_path: Option<&str>,
    cwd: &Path,
    errors: &mut Vec<InputError>,
) -> Vec<String> {
    let mut installed_names = Vec::new();
    for (i, layer) in layers.iter_mut().enumerate() {
        let own: Vec<String> = layer
            .servers
            .iter()
            .filter(|(_, config)| runs_own_serve(config, session_path, cwd))
            .map(|(name, _)| name.clone())
            .collect();
        for name in own {
            let config = layer.servers.remove(&name);
            if let Some(layer) = written.get_mut(i) {
                layer.servers.remove(&name);
            }
            if config.as_ref().is_some_and(installed) {
                installed_names.push(name);
                continue;
            }
            errors.push(InputError {
                file: files.get(i).cloned().unwrap_or_default(),
                message: format!(
                    "server `{}` runs this gateway itself (mcp-reconcile serve) and is skipped: \
                     started, it would read these same files and start itself again. Keep it in \
                     your client's configuration and list only the servers it should reach here",
                    crate::display::safe(&name)
                ),
            });
        }
    }
    installed_names
}
