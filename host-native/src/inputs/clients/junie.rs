//! Junie (JetBrains' coding agent, in the IDEs and the `junie` CLI): `~/.junie/mcp/mcp.json`
//! (the user's) and the project's `.junie/mcp/mcp.json` (gated by this host's approvals),
//! `{"mcpServers": {…}}` in the Claude Desktop shape, read by the `mcpServers` family's parser
//! (`family`). Junie has no `type`: an entry with `command` is stdio (the only transport
//! Junie's documentation lists), one with `url` is read as streamable HTTP. It documents no
//! per-server switch and no variable syntax: values are passed as written. `install junie`
//! moves the user's servers to the sidecar.

use std::path::{Path, PathBuf};

use super::family::{Family, Url};
use super::spec::{ClientSpec, Editor};
use super::{ClientFile, Format, JsonFormat};
use crate::inputs::host_env::HostEnv;

/// Junie's entry in the table of clients.
pub(super) static SPEC: ClientSpec = ClientSpec {
    name: "junie",
    title: "Junie",
    about: "Junie's mcp.json files",
    help: "~/.junie/mcp/mcp.json (and mcp-reconcile.json beside it), \
           <project>/.junie/mcp/mcp.json",
    project_servers: ".junie/mcp/mcp.json",
    files,
    editor: Some(Editor::new(user_file, "mcpServers")),
    ..ClientSpec::EDITOR
};

/// How Junie spells its entries.
const JUNIE: Family = Family {
    client: "Junie",
    key: "mcpServers",
    off: None,
    disabled_tools: None,
    url_aliases: &[],
    bare_url: Url::Http,
    type_aliases: &[],
    types: None,
    nested: None,
    expand: None,
    own_keys: &[],
};

/// Junie's `mcp.json`.
const FORMAT: Format = Format::Json(JsonFormat {
    name: "junie",
    parse: |top, _, scope, ctx| super::family::parse(&JUNIE, top, scope, ctx),
});

/// `~/.junie/mcp/mcp.json`.
fn user_file(env: &HostEnv) -> anyhow::Result<PathBuf> {
    Ok(env.home("Junie's mcp.json")?.join(".junie/mcp/mcp.json"))
}

/// The sidecar, the user's file, then the project's.
fn files(project: &Path, env: &HostEnv, _: Option<PathBuf>) -> anyhow::Result<Vec<ClientFile>> {
    Ok(ClientFile::handed_over(
        FORMAT,
        user_file(env)?,
        Some(project.join(".junie/mcp/mcp.json")),
    ))
}
