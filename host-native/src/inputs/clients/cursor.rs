//! Cursor: its `mcp.json` files (parsed in `editors`), and `install cursor` moving its servers
//! to the sidecar beside `~/.cursor/mcp.json`.

use std::path::{Path, PathBuf};

use mcp_reconcile_kernel::LayerSource;

use super::spec::{ClientSpec, Editor};
use super::{sidecar, ClientFile, Format};
use crate::inputs::host_env::HostEnv;

/// Cursor's entry in the table of clients.
pub(super) static SPEC: ClientSpec = ClientSpec {
    name: "cursor",
    title: "Cursor",
    about: "Cursor's mcp.json files",
    help: "~/.cursor/mcp.json (and mcp-reconcile.json beside it), <project>/.cursor/mcp.json",
    project_servers: ".cursor/mcp.json",
    files,
    editor: Some(Editor::new(user_file, "mcpServers")),
    ..ClientSpec::EDITOR
};

/// `~/.cursor/mcp.json` (servers under `mcpServers`).
fn user_file(env: &HostEnv) -> anyhow::Result<PathBuf> {
    Ok(env.home("Cursor's mcp.json")?.join(".cursor/mcp.json"))
}

/// The sidecar, the user's file, the project's.
fn files(project: &Path, env: &HostEnv, _: Option<PathBuf>) -> anyhow::Result<Vec<ClientFile>> {
    let user = user_file(env)?;
    Ok(vec![
        ClientFile::new(Format::Cursor, LayerSource::User, sidecar(&user)),
        ClientFile::new(Format::Cursor, LayerSource::User, user),
        ClientFile::new(
            Format::Cursor,
            LayerSource::Project,
            project.join(".cursor/mcp.json"),
        ),
    ])
}
