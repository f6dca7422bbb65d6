//! VS Code: its `mcp.json` files (parsed in `editors`), and `install vscode` moving its servers
//! to the sidecar beside the user `mcp.json`.

use std::path::{Path, PathBuf};

use mcp_reconcile_kernel::LayerSource;

use super::spec::{ClientSpec, Editor};
use super::strategy::Install;
use super::{sidecar, ClientFile, Format};
use crate::inputs::host_env::HostEnv;

/// VS Code's entry in the table of clients.
pub(super) static SPEC: ClientSpec = ClientSpec {
    name: "vscode",
    title: "VS Code",
    about: "VS Code's mcp.json files",
    help: "\
$XDG_CONFIG_HOME/Code/User/mcp.json (macOS: ~/Library/Application Support/Code/User/; and
mcp-reconcile.json beside it), <project>/.vscode/mcp.json",
    project_servers: ".vscode/mcp.json",
    files,
    editor: Some(Editor::new(user_file, "servers")),
    install: Some(Install {
        stdio_type: true,
        ..Install::EDITOR
    }),
    ..ClientSpec::CLIENT
};

/// The user `mcp.json` (servers under `servers`).
fn user_file(env: &HostEnv) -> anyhow::Result<PathBuf> {
    Ok(user_dir(env)?.join("mcp.json"))
}

/// The sidecar, the user's file, the project's.
fn files(project: &Path, env: &HostEnv, _: Option<PathBuf>) -> anyhow::Result<Vec<ClientFile>> {
    let user = user_file(env)?;
    Ok(vec![
        ClientFile::new(Format::Vscode, LayerSource::User, sidecar(&user)),
        ClientFile::new(Format::Vscode, LayerSource::User, user),
        ClientFile::new(
            Format::Vscode,
            LayerSource::Project,
            project.join(".vscode/mcp.json"),
        ),
    ])
}

/// VS Code's user directory: `~/Library/Application Support/Code/User` on macOS (VS Code does
/// not read `XDG_CONFIG_HOME` there), `$XDG_CONFIG_HOME/Code/User` (`~/.config`) elsewhere.
///
/// # Errors
/// The home directory is needed and unknown.
pub(super) fn user_dir(env: &HostEnv) -> anyhow::Result<PathBuf> {
    let what = "VS Code's user mcp.json";
    if cfg!(target_os = "macos") {
        return Ok(env
            .home(what)?
            .join("Library/Application Support/Code/User"));
    }
    let config = match env.var("XDG_CONFIG_HOME").map(PathBuf::from) {
        Some(dir) if dir.is_absolute() => dir,
        _ => env.home(what)?.join(".config"),
    };
    Ok(config.join("Code/User"))
}
