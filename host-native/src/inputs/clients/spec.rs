//! What the table of clients holds per client ([`ClientSpec`]) and its small `Copy` id
//! ([`Layout`]): below the table (`table.rs`, which lists every client's entry) and the client
//! files that each define one, so neither imports the other in a circle.

use std::path::{Path, PathBuf};

use serde::{Serialize, Serializer};

use super::strategy::Install;
use super::ClientFile;
use crate::auth::TokenFormat;
use crate::inputs::host_env::{xdg, HostEnv};
use crate::inputs::lsp_formats::LspFormat;

/// The client files a layout reads: from the project directory, the environment and
/// `--system-settings` (which moves an administrator's files).
pub(in crate::inputs) type FilesFn =
    fn(&Path, &HostEnv, Option<PathBuf>) -> anyhow::Result<Vec<ClientFile>>;

/// An editor's user file (see `editor_user_file`), whose servers `install` moves to the
/// sidecar.
pub(crate) struct Editor {
    /// The file.
    pub(crate) file: fn(&HostEnv) -> anyhow::Result<PathBuf>,
    /// The key its servers are under.
    pub(crate) key: &'static str,
}

impl Editor {
    /// The user file `file` names, its servers under `key`.
    pub(crate) const fn new(
        file: fn(&HostEnv) -> anyhow::Result<PathBuf>,
        key: &'static str,
    ) -> Editor {
        Editor { file, key }
    }
}

/// One client: its names, help, files and formats, and how `install` puts the gateway in
/// front of it.
pub struct ClientSpec {
    /// Its name on the command line: `--layout NAME`, `install NAME`.
    pub name: &'static str,
    /// The client's own name, as `docs/CLIENTS.md`'s table names it.
    pub title: &'static str,
    /// One line for the list of values in `--help`.
    pub about: &'static str,
    /// Its paragraph in `--layout`'s long help: the files it reads, where.
    pub help: &'static str,
    /// The layout reads the client's own file formats (`inputs::clients`): no settings file
    /// or `.mcp.json` of this host's format is read.
    pub(crate) reads_client_files: bool,
    /// The layout reads the project's `.mcp.json` in this host's format.
    pub(crate) reads_mcp_json: bool,
    /// The format of its language-server files.
    pub(in crate::inputs) lsp: LspFormat,
    /// The project's server file, relative to the project: `.mcp.json`, or the client's own
    /// (what `LayerPaths::mcp_json` names).
    pub(crate) project_servers: &'static str,
    /// The project's language-server file, relative to the project.
    pub(crate) project_lsp: &'static str,
    /// The user's language-server file.
    pub(crate) user_lsp: UserLsp,
    /// Where its settings files are (this host's own for the client layouts, which read
    /// ours only for `mcp.share` and `mcp.lazy`).
    pub(crate) settings: SettingsFiles,
    /// The approvals, language-server approvals and token files the client keeps itself
    /// (`None`: this host's own).
    pub(crate) keeps: Option<Keeps>,
    /// Its client files (none for the layouts that only read settings files).
    pub(in crate::inputs) files: FilesFn,
    /// An editor's user file, whose servers `install` moves to the sidecar.
    pub(crate) editor: Option<Editor>,
    /// How `install NAME` puts the gateway in front of the client (`None`: not installable).
    pub install: Option<Install>,
}

impl ClientSpec {
    /// What a client that reads its own files starts from (`..ClientSpec::CLIENT`), so its
    /// entry names only what differs: this host's settings files and language-server format,
    /// no files it keeps for this host, not an editor, no install. The names, help and files
    /// are its own to fill in.
    pub(crate) const CLIENT: ClientSpec = ClientSpec {
        name: "",
        title: "",
        about: "",
        help: "",
        reads_client_files: true,
        reads_mcp_json: false,
        lsp: LspFormat::Own,
        project_servers: "",
        project_lsp: ".lsp.json",
        user_lsp: UserLsp::Own,
        settings: OWN_SETTINGS,
        keeps: None,
        files: no_files,
        editor: None,
        install: None,
    };

    /// What a client whose servers `install` moves beside its user file starts from
    /// (`..ClientSpec::EDITOR`): [`ClientSpec::CLIENT`] with [`Install::EDITOR`]; its entry
    /// names its `editor` file.
    pub(crate) const EDITOR: ClientSpec = ClientSpec {
        install: Some(Install::EDITOR),
        ..ClientSpec::CLIENT
    };
}

/// Where a layout's user language-server file is.
pub(crate) enum UserLsp {
    /// This host's: `$XDG_CONFIG_HOME/mcp-reconcile/lsp.json`.
    Own,
    /// None (the client has no user-level file).
    None,
    /// The client's own file.
    At(fn(&HostEnv) -> anyhow::Result<PathBuf>),
}

/// Where a layout's settings files are.
pub(crate) struct SettingsFiles {
    /// The user settings file.
    pub(crate) user: fn(&HostEnv) -> anyhow::Result<PathBuf>,
    /// The workspace settings file's directory, relative to the project.
    pub(crate) workspace_dir: &'static str,
    /// The administrator's directory (`settings.json`, `system-defaults.json`).
    pub(crate) system_dir: fn() -> PathBuf,
    /// The variable that moves the system settings file, if any.
    pub(crate) system_var: Option<&'static str>,
    /// The variable that moves the system defaults file, if any.
    pub(crate) defaults_var: Option<&'static str>,
    /// Whose reading of them: this host's own, or Gemini CLI's.
    pub(crate) dialect: Dialect,
}

/// Whose reading of a settings file of this host's schema a layout follows. Gemini CLI's
/// differs in three places: its transport spellings (`"type": "http"`, a bare `url`), its
/// `mcp.allowed` / `mcp.excluded` lists (intersected across scopes, not overridden) and its
/// folder trust (an untrusted project starts no server at all).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Dialect {
    /// This host's (and qwen-code's).
    Own,
    /// Gemini CLI's.
    Gemini,
}

/// This host's own settings files: under `$XDG_CONFIG_HOME/mcp-reconcile`,
/// `<project>/.mcp-reconcile`, `/etc/mcp-reconcile`.
pub(crate) const OWN_SETTINGS: SettingsFiles = SettingsFiles {
    user: |env| {
        Ok(xdg(env, "XDG_CONFIG_HOME", &[".config"], "user settings")?
            .join("mcp-reconcile/settings.json"))
    },
    workspace_dir: ".mcp-reconcile",
    system_dir: || PathBuf::from("/etc/mcp-reconcile"),
    system_var: None,
    defaults_var: None,
    dialect: Dialect::Own,
};

/// The files a client keeps itself that this host otherwise keeps (qwen-code's: both then
/// share one approval and one login).
pub(crate) struct Keeps {
    /// Its approvals file.
    pub(crate) approvals: fn(&HostEnv) -> anyhow::Result<PathBuf>,
    /// Its language-server approvals file.
    pub(crate) lsp_approvals: fn(&HostEnv) -> anyhow::Result<PathBuf>,
    /// Its OAuth token file, and that file's format.
    pub(crate) tokens: fn(&HostEnv) -> anyhow::Result<PathBuf>,
    /// The token file's format.
    pub(crate) token_format: TokenFormat,
}

/// The client files of a layout that reads only settings files: none.
pub(in crate::inputs) fn no_files(
    _: &Path,
    _: &HostEnv,
    _: Option<PathBuf>,
) -> anyhow::Result<Vec<ClientFile>> {
    Ok(Vec::new())
}

/// A layout: one entry of the table of clients (`table::CLIENTS`), small and `Copy`, compared and serialized by its name.
#[derive(Clone, Copy)]
pub struct Layout(pub(super) &'static ClientSpec);

impl Layout {
    /// Its table entry.
    pub fn spec(self) -> &'static ClientSpec {
        self.0
    }

    /// The flag spelling.
    pub fn as_str(self) -> &'static str {
        self.0.name
    }

    /// Whether the layout reads another client's own file formats (not settings files).
    pub fn reads_client_files(self) -> bool {
        self.0.reads_client_files
    }
}

impl PartialEq for Layout {
    fn eq(&self, other: &Self) -> bool {
        self.0.name == other.0.name
    }
}

impl Eq for Layout {}

impl std::hash::Hash for Layout {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.0.name.hash(state);
    }
}

impl std::fmt::Debug for Layout {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.0.name)
    }
}

impl Serialize for Layout {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(self.0.name)
    }
}
