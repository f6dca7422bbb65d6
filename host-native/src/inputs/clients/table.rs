//! The table of clients: one [`ClientSpec`] per `--layout` (this host's own files and each
//! client's), holding everything that differs per client. Each client's entry lives in its own
//! file beside its parser (`claude`, `codex`, `gemini`, `qwen`, `cursor`, `vscode`,
//! `copilot`); [`CLIENTS`] lists them, and the command line (`--layout`, `install`,
//! `uninstall`), their `--help` and the install code all read this list, so a new client is its
//! file and one line here.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use super::ClientFile;
use crate::auth::TokenFormat;
use crate::inputs::lsp_formats::LspFormat;
use crate::inputs::paths::{xdg, HostEnv};
use crate::install::Install;

/// Every layout, in `--help` order: this host's own files first, then each client's.
pub static CLIENTS: &[&ClientSpec] = &[
    &DEFAULT,
    &super::qwen::SPEC,
    &super::gemini::SPEC,
    &super::claude::SPEC,
    &super::cursor::SPEC,
    &super::vscode::SPEC,
    &super::codex::SPEC,
    &super::copilot::SPEC,
    &super::kiro::SPEC,
];

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

/// This host's own files under XDG directories.
static DEFAULT: ClientSpec = ClientSpec {
    name: "default",
    title: "mcp-reconcile",
    about: "mcp-reconcile's own files under XDG directories",
    help: "\
$XDG_CONFIG_HOME/mcp-reconcile/settings.json (user), <project>/.mcp-reconcile/settings.json
(workspace), /etc/mcp-reconcile/settings.json and system-defaults.json, <project>/.mcp.json;
approvals.json, lsp.json (user language servers), lsp-approvals.json and oauth-tokens.json in
$XDG_CONFIG_HOME/mcp-reconcile/; <project>/.lsp.json",
    reads_client_files: false,
    reads_mcp_json: true,
    lsp: LspFormat::Own,
    project_servers: ".mcp.json",
    project_lsp: ".lsp.json",
    user_lsp: UserLsp::Own,
    settings: OWN_SETTINGS,
    keeps: None,
    files: no_files,
    editor: None,
    install: None,
};

/// The client files of a layout that reads only settings files: none.
pub(in crate::inputs) fn no_files(
    _: &Path,
    _: &HostEnv,
    _: Option<PathBuf>,
) -> anyhow::Result<Vec<ClientFile>> {
    Ok(Vec::new())
}

/// A layout: one entry of [`CLIENTS`], small and `Copy`, compared and serialized by its name.
#[derive(Clone, Copy)]
pub struct Layout(&'static ClientSpec);

impl Layout {
    /// mcp-reconcile's own files (the default).
    pub const DEFAULT: Layout = Layout(&DEFAULT);
    /// qwen-code's files.
    pub const QWEN: Layout = Layout(&super::qwen::SPEC);
    /// Gemini CLI's files (its settings semantics differ in places: `inputs::build`).
    pub const GEMINI: Layout = Layout(&super::gemini::SPEC);
    /// Claude Code's files.
    pub const CLAUDE: Layout = Layout(&super::claude::SPEC);
    /// Codex's files.
    pub const CODEX: Layout = Layout(&super::codex::SPEC);

    /// The layout of that name, if the table has one.
    pub fn named(name: &str) -> Option<Layout> {
        CLIENTS.iter().find(|c| c.name == name).map(|c| Layout(c))
    }

    /// Every layout, in `--help` order.
    pub fn all() -> impl Iterator<Item = Layout> {
        CLIENTS.iter().map(|c| Layout(c))
    }

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

impl Default for Layout {
    fn default() -> Self {
        Layout::DEFAULT
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

impl<'de> Deserialize<'de> for Layout {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let name = String::deserialize(d)?;
        Layout::named(&name)
            .ok_or_else(|| serde::de::Error::custom(format!("unknown layout {name:?}")))
    }
}

/// `--layout`'s long help: what the flag does and every layout's files, from [`CLIENTS`].
pub fn layout_help() -> String {
    let mut help = String::from(
        "Which default files to read; an explicit flag overrides its own one \
         (--user-settings, --approvals, ...).\n",
    );
    for client in CLIENTS {
        help.push_str(&format!("\n--layout {} ({}):\n", client.name, client.about));
        for line in client.help.lines() {
            help.push_str("  ");
            help.push_str(line);
            help.push('\n');
        }
    }
    help.push_str(
        "\nThe client layouts (all but default, qwen and gemini) read that client's own files \
         live (nothing is copied), with this host's approvals, language-server and token files \
         as in --layout default. $XDG_CONFIG_HOME defaults to ~/.config. Settings files are \
         JSON with comments; a missing file counts as {}.",
    );
    help
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The table is the one list of clients: names are unique, each parses back to its own
    /// entry (as `--layout` and serialized options name it), and the help names every one.
    #[test]
    fn every_client_is_one_unique_table_entry_the_help_lists() {
        let mut names: Vec<&str> = CLIENTS.iter().map(|c| c.name).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), CLIENTS.len(), "a name is used twice");
        let help = layout_help();
        for layout in Layout::all() {
            assert_eq!(Layout::named(layout.as_str()), Some(layout));
            let json = serde_json::to_string(&layout).expect("serialize");
            assert_eq!(json, format!("\"{}\"", layout.as_str()));
            let back: Layout = serde_json::from_str(&json).expect("deserialize");
            assert_eq!(back, layout);
            assert!(
                help.contains(&format!("--layout {} (", layout.as_str())),
                "{} missing from the help",
                layout.as_str()
            );
        }
        assert!(serde_json::from_str::<Layout>("\"nope\"").is_err());
        assert_eq!(Layout::default().as_str(), "default");
    }

    /// The clients whose row `docs/CLIENTS.md` does not have yet (each must really be missing,
    /// so the list cannot go stale).
    const UNDOCUMENTED: &[&str] = &[];

    /// `docs/CLIENTS.md`'s table has one row per client of the table (by its title) and no
    /// other, and its `install` column says yes exactly for the clients install knows.
    #[test]
    fn the_clients_doc_table_lists_exactly_the_tables_clients() {
        let doc = std::fs::read_to_string(
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/CLIENTS.md"),
        )
        .expect("docs/CLIENTS.md");
        let rows: Vec<Vec<&str>> = doc
            .lines()
            .skip_while(|l| !l.starts_with("| client |"))
            .skip(2)
            .take_while(|l| l.starts_with('|'))
            .map(|l| l.trim_matches('|').split(" | ").map(str::trim).collect())
            .collect();
        assert!(!rows.is_empty(), "no client table in docs/CLIENTS.md");
        for row in &rows {
            let client = CLIENTS.iter().find(|c| c.title == row[0]);
            let client = client.unwrap_or_else(|| panic!("{} is not in CLIENTS", row[0]));
            assert_eq!(
                row[4].starts_with("yes"),
                client.install.is_some(),
                "the install column of {}",
                row[0]
            );
        }
        for client in CLIENTS.iter().filter(|c| c.name != "default") {
            let documented = rows.iter().any(|row| row[0] == client.title);
            assert_eq!(
                documented,
                !UNDOCUMENTED.contains(&client.name),
                "{}'s row in docs/CLIENTS.md",
                client.title
            );
        }
    }
}
