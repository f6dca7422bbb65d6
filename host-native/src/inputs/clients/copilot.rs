//! Copilot CLI: its `mcp-config.json` and project files (parsed in `editors`), its folder
//! trust, its language-server files, and `install copilot` moving its servers to the sidecar.

use std::path::{Path, PathBuf};

use mcp_reconcile_kernel::LayerSource;

use super::spec::{ClientSpec, Editor, UserLsp};
use super::strategy::Install;
use super::{sidecar, ClientFile, Format};
use crate::inputs::host_env::{copilot_home, HostEnv};
use crate::inputs::lsp_formats::LspFormat;

/// Copilot CLI's entry in the table of clients.
pub(super) static SPEC: ClientSpec = ClientSpec {
    name: "copilot",
    title: "Copilot CLI",
    about: "Copilot CLI's mcp-config.json",
    help: "\
~/.copilot/mcp-config.json ($COPILOT_HOME; and mcp-reconcile.json beside it); in a folder its
config.json trusts: <repository root>/.github/mcp.json and every .mcp.json from the root down;
language servers in ~/.copilot/lsp-config.json and <project>/.github/lsp.json (lspServers)",
    lsp: LspFormat::Copilot,
    project_servers: ".mcp.json",
    project_lsp: ".github/lsp.json",
    user_lsp: UserLsp::At(|env| Ok(copilot_home(env)?.join("lsp-config.json"))),
    files,
    editor: Some(Editor::new(user_file, "mcpServers")),
    install: Some(Install {
        stdio_type: true,
        ..Install::EDITOR
    }),
    ..ClientSpec::CLIENT
};

/// `$COPILOT_HOME/mcp-config.json` (servers under `mcpServers`).
fn user_file(env: &HostEnv) -> anyhow::Result<PathBuf> {
    Ok(copilot_home(env)?.join("mcp-config.json"))
}

/// The sidecar, the user's file and `config.json`; then the project's files, read only while
/// Copilot CLI trusts the folder: `.github/mcp.json` at the repository's root, then every
/// `.mcp.json` from the root down to the project (the nearest wins).
fn files(project: &Path, env: &HostEnv, _: Option<PathBuf>) -> anyhow::Result<Vec<ClientFile>> {
    let file = ClientFile::new;
    let user = user_file(env)?;
    let mut files = vec![
        file(Format::Copilot, LayerSource::User, sidecar(&user)),
        file(Format::Copilot, LayerSource::User, user),
        file(
            Format::CopilotConfig,
            LayerSource::User,
            copilot_home(env)?.join("config.json"),
        ),
    ];
    let dirs = super::expand::down_from_git_root(project);
    let project_file = |path: PathBuf| {
        let mut f = file(Format::Copilot, LayerSource::Project, path);
        f.kind.needs_trust = true;
        f
    };
    let root = dirs.first().copied().unwrap_or(project);
    files.push(project_file(root.join(".github/mcp.json")));
    files.extend(dirs.into_iter().map(|dir| {
        let mut f = project_file(dir.join(".mcp.json"));
        f.kind.shared_parent = dir != project;
        f
    }));
    Ok(files)
}
