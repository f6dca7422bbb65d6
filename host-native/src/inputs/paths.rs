//! Which files a session reads: the flags over the layout's defaults (each layout's entry in
//! the table of clients says where its files are, with the home-directory rules of
//! `host_env`).

use crate::auth::TokenFile;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

pub use super::clients::Layout;
use super::clients::UserLsp;
use super::host_env::{xdg, HostEnv};

/// Where a session's files are and how they are treated: what the command
/// line's file flags say (the binary turns its flags into this), so every
/// command given the same flags finds the same files and session. `None` /
/// empty means "from the layout" (see `clients::layout_help`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, rename_all = "camelCase")]
pub struct Options {
    /// User settings file (JSON with comments).
    pub user_settings: Option<PathBuf>,
    /// Workspace settings file; its servers need approval.
    pub workspace_settings: Option<PathBuf>,
    /// System settings file; overrides user and workspace.
    pub system_settings: Option<PathBuf>,
    /// System defaults file; below the user settings.
    pub system_defaults: Option<PathBuf>,
    /// Project directory: its `.mcp.json` is read and it keys approvals
    /// (default: the current directory).
    pub project: Option<PathBuf>,
    /// Extra servers: each a JSON file or inline JSON, with or without
    /// `{"mcpServers": …}`.
    pub mcp_config: Vec<String>,
    /// Upper bound on admitted server names, one entry per occurrence of the
    /// flag (patterns with `*` and `?`, comma-separated). Settings can narrow
    /// it, never widen it; `""` admits nothing; empty means no bound.
    pub allowed_mcp_server_names: Vec<String>,
    /// Approvals file.
    pub approvals: Option<PathBuf>,
    /// The user's language-server file (SPEC §14.1).
    pub user_lsp: Option<PathBuf>,
    /// Language-server approvals file (SPEC §14.3).
    pub lsp_approvals: Option<PathBuf>,
    /// Treat the project folder as untrusted: no workspace settings, nothing
    /// connects.
    pub untrusted: bool,
    /// Turn the approval gate off: project servers connect without asking
    /// (and `$VAR`s in `.mcp.json` are not expanded).
    pub yolo: bool,
    /// Quiet period after a file change before reloading, in ms (default 300): the longest
    /// wait, for a file that does not parse yet.
    pub debounce_ms: Option<u64>,
    /// Settle detection: once every changed file parses, reload after this many ms without a
    /// further change (default 25).
    pub quiet_ms: Option<u64>,
    /// Default file set.
    pub layout: Layout,
    /// Where a running session keeps its socket (default
    /// `$XDG_STATE_HOME/mcp-reconcile` or `~/.local/state/mcp-reconcile`).
    pub state_dir: Option<PathBuf>,
}

/// Every file path a session uses, after flags and layout.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LayerPaths {
    /// User settings.
    pub user: PathBuf,
    /// Workspace settings (unused in an untrusted folder).
    pub workspace: PathBuf,
    /// System settings.
    pub system: PathBuf,
    /// System defaults.
    pub system_defaults: PathBuf,
    /// The project's server file: `.mcp.json` (in Cursor's, VS Code's and Codex's layouts
    /// their project file).
    pub mcp_json: PathBuf,
    /// The approvals file.
    pub approvals: PathBuf,
    /// Where a running session keeps its socket.
    pub state_dir: PathBuf,
    /// The user's language-server file (SPEC §14.1); none in the qwen layout unless given.
    pub user_lsp: Option<PathBuf>,
    /// The project's `.lsp.json`.
    pub lsp_json: PathBuf,
    /// The language-server approvals file (SPEC §14.3).
    pub lsp_approvals: PathBuf,
    /// The OAuth token file (`--layout qwen`: the TypeScript CLI's, so both share a login).
    pub oauth_tokens: TokenFile,
}

impl LayerPaths {
    /// Resolves every path from the options `flags` (relative ones against `env.cwd`),
    /// filling the rest from the layout (see `clients::layout_help`).
    ///
    /// # Errors
    /// When a default needs the home directory and none is known.
    pub fn resolve(flags: &Options, project_dir: &Path, env: &HostEnv) -> anyhow::Result<Self> {
        let explicit = |flag: &Option<PathBuf>| flag.as_deref().map(|p| env.absolute(p));
        let xdg = |var: &str, fallback: &[&str], what: &str| xdg(env, var, fallback, what);
        let layout = flags.layout;
        let spec = layout.spec();
        let settings = &spec.settings;
        let system_dir = (settings.system_dir)();

        let user = match explicit(&flags.user_settings) {
            Some(p) => p,
            None => (settings.user)(env)?,
        };
        let workspace = explicit(&flags.workspace_settings).unwrap_or_else(|| {
            project_dir
                .join(settings.workspace_dir)
                .join("settings.json")
        });
        let layout_system = settings
            .system_var
            .and_then(|var| env.var(var))
            .map(|p| env.absolute(Path::new(p)))
            .unwrap_or_else(|| system_dir.join("settings.json"));
        let system = explicit(&flags.system_settings).unwrap_or_else(|| layout_system.clone());
        let system_defaults = match explicit(&flags.system_defaults) {
            Some(p) => p,
            None => {
                let beside_system = layout_system
                    .parent()
                    .unwrap_or(&system_dir)
                    .join("system-defaults.json");
                settings
                    .defaults_var
                    .and_then(|var| env.var(var))
                    .map(|p| env.absolute(Path::new(p)))
                    .unwrap_or(beside_system)
            }
        };
        let approvals = match (explicit(&flags.approvals), &spec.keeps) {
            (Some(p), _) => p,
            (None, Some(keeps)) => (keeps.approvals)(env)?,
            // Other clients keep no content-bound approvals: this host's own file.
            (None, None) => xdg("XDG_CONFIG_HOME", &[".config"], "approvals file")?
                .join("mcp-reconcile/approvals.json"),
        };
        let state_dir = match explicit(&flags.state_dir) {
            Some(p) => p,
            None => xdg("XDG_STATE_HOME", &[".local", "state"], "state directory")?
                .join("mcp-reconcile"),
        };
        let user_lsp = match explicit(&flags.user_lsp) {
            Some(p) => Some(p),
            None => match layout.spec().user_lsp {
                UserLsp::None => None,
                UserLsp::At(file) => Some(file(env)?),
                UserLsp::Own => Some(
                    xdg("XDG_CONFIG_HOME", &[".config"], "user language-server file")?
                        .join("mcp-reconcile/lsp.json"),
                ),
            },
        };
        let lsp_approvals = match (explicit(&flags.lsp_approvals), &spec.keeps) {
            (Some(p), _) => p,
            (None, Some(keeps)) => (keeps.lsp_approvals)(env)?,
            (None, None) => approvals
                .parent()
                .map_or_else(|| PathBuf::from("."), Path::to_path_buf)
                .join("lsp-approvals.json"),
        };
        let own_tokens = xdg("XDG_CONFIG_HOME", &[".config"], "OAuth token file")?
            .join("mcp-reconcile/oauth-tokens.json");
        let oauth_tokens = match &spec.keeps {
            Some(keeps) => TokenFile {
                path: (keeps.tokens)(env)?,
                format: keeps.token_format,
                challenges: own_tokens,
            },
            None => TokenFile::native(own_tokens),
        };
        let mcp_json = project_dir.join(layout.spec().project_servers);
        Ok(LayerPaths {
            oauth_tokens,
            user_lsp,
            lsp_json: project_dir.join(layout.spec().project_lsp),
            lsp_approvals,
            user,
            workspace,
            system,
            system_defaults,
            mcp_json,
            approvals,
            state_dir,
        })
    }
}
