//! How `install` puts the gateway in front of a client ([`Install`]): a field of the client's
//! entry in the table of clients, so it lives below both the table and the install code that
//! carries it out (`crate::install`).

use std::path::PathBuf;

use crate::inputs::host_env::HostEnv;

/// How `install` puts the gateway in front of a client: part of the client's entry in the
/// table of clients (`inputs::CLIENTS`).
pub struct Install {
    /// Which files it edits, and how.
    pub(crate) how: How,
    /// The gateway's entry says `"type": "stdio"`, as the client's own `add` writes it.
    pub(crate) stdio_type: bool,
    /// The client lists the gateway's tools once per session and never again on
    /// `list_changed`: its first listing waits longer for slow servers
    /// (`install::LISTS_ONCE_GRACE_MS`).
    pub(crate) lists_tools_once: bool,
    /// Variables of the installing process that go into the gateway's entry (a client that
    /// passes its servers only a short list of variables needs them there).
    pub(crate) pass_env: &'static [&'static str],
    /// What changes for the client's user, said once after install.
    pub afterwards: &'static str,
}

impl Install {
    /// An editor's: its servers move to the sidecar and it starts only the gateway.
    pub(crate) const EDITOR: Install = Install {
        how: How::Editor,
        stdio_type: false,
        lists_tools_once: false,
        pass_env: &[],
        afterwards: EDITOR_AFTERWARDS,
    };
}

/// Which files install edits, and how.
pub(crate) enum How {
    /// Claude Code: the gateway in `~/.claude.json`, `allowedMcpServers` in its settings.
    Claude,
    /// A settings file of this host's schema (Gemini CLI, qwen-code): the gateway and
    /// `mcp.allowed`; the file is where the function says.
    Settings(fn(&HostEnv) -> anyhow::Result<PathBuf>),
    /// Codex's `config.toml`: the gateway, and every other server `enabled = false` (marked).
    Codex,
    /// An editor (the table entry's `editor` file): its servers move to the sidecar.
    Editor,
    /// OpenCode: an editor whose gateway entry is written in OpenCode's own form (`type:
    /// local`, `command` one argv array, `environment`).
    OpenCode,
}

/// What changes for a user of a client with this host's settings schema, after install.
pub(crate) const SETTINGS_AFTERWARDS: &str =
    "The client now starts only `reconcile` (mcp.allowed), which reaches every server in your \
     settings files and applies edits to them live. Tools appear as SERVER__TOOL. Workspace \
     servers are approved with `mcp-reconcile approve NAME`.";

/// What changes, after install, for the user of a client whose servers move beside (the
/// editors, the `mcpServers` family, Zed, Crush, Goose).
pub(crate) const EDITOR_AFTERWARDS: &str =
    "The client now starts only `reconcile`. Your servers moved, as written, to \
     mcp-reconcile.json beside its file: edit them there and the gateway applies each edit \
     live. A server you add in the client's own file is started by the client itself until you \
     run install again, which hands it over. Tools appear as SERVER__TOOL under the \
     `reconcile` server.";
