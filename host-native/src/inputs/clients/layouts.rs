//! Which files each client layout reads: its table entry's (`table`), at that client's real
//! default locations and in which layer (SPEC §15: scopes follow the client); and the
//! editors' sidecar file.

use std::path::{Path, PathBuf};

use super::ClientFile;
use crate::inputs::host_env::HostEnv;
use crate::inputs::paths::Layout;

/// The client files of `layout` (none for the layouts that read settings files).
/// `managed_settings` (`--system-settings`) moves an administrator's files (Claude Code's,
/// Codex's).
///
/// # Errors
/// A default location needs the home directory and none is known.
pub(in crate::inputs) fn client_files(
    layout: Layout,
    project: &Path,
    env: &HostEnv,
    managed_settings: Option<PathBuf>,
) -> anyhow::Result<Vec<ClientFile>> {
    (layout.spec().files)(project, env, managed_settings)
}

/// The file `mcp-reconcile install` moves an editor's servers to: `mcp-reconcile.json` beside
/// the editor's user file (same format, read first, so the editor's own file wins a name).
pub(crate) fn sidecar(user_file: &Path) -> PathBuf {
    user_file.with_file_name(SIDECAR)
}

/// The name of [`sidecar`]'s file.
const SIDECAR: &str = "mcp-reconcile.json";

/// An editor's user file and the key its servers are under (Cursor's `~/.cursor/mcp.json`,
/// VS Code's user `mcp.json` under `servers`, Copilot CLI's `mcp-config.json`); `None` for the
/// other layouts.
///
/// # Errors
/// The home directory is needed and unknown.
pub(crate) fn editor_user_file(
    layout: Layout,
    env: &HostEnv,
) -> anyhow::Result<Option<(PathBuf, &'static str)>> {
    let Some(editor) = &layout.spec().editor else {
        return Ok(None);
    };
    Ok(Some(((editor.file)(env)?, editor.key)))
}
