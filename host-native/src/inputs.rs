//! The files a session reads (SPEC §3, §5, §8): which ones, from which
//! flags, and what they hold right now.
//!
//! Every command takes the same [`LayerFlags`], so each finds the same files
//! and the same running session ([`Inputs::session_id`]). [`Inputs`] resolves
//! the paths once (the project root is canonicalized once, and that one
//! string keys approvals for reads and writes alike), then
//! [`Inputs::load`] reads the files that changed and returns a [`Snapshot`]:
//! the kernel layers, the `mcp.allowed` / `mcp.excluded` lists, the
//! approvals, and every problem found.
//!
//! Rules (SPEC §3.3, §8):
//! * a missing settings file is `{}`; an empty or unparsable one is an error
//!   and that file's **last good content** stays in use, so a half-written
//!   file never tears anything down;
//! * a malformed approvals file is reported and reads as empty (fail closed:
//!   every gated server is pending);
//! * an untrusted folder contributes no workspace settings at all.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::{Component, Path, PathBuf};

use anyhow::{bail, Context};
use mcp_reconcile_kernel::gating::compute_gating;
use mcp_reconcile_kernel::json::{self, Object, Value};
use mcp_reconcile_kernel::reload::FileSource;
use mcp_reconcile_kernel::settings::{mcp_lists, merged_server_command, server_command};
use mcp_reconcile_kernel::{
    assemble, parse_mcp_json, parse_settings, Approvals, Assembled, Gating, Layer, LayerSource,
    McpLists, Millis, ServerConfig, Servers, DEFAULT_DEBOUNCE,
};

use crate::approvals_store::ApprovalsStore;

/// The default file set of each `--layout`; an explicit flag overrides its
/// row. Shown by `--help`.
pub const LAYOUT_HELP: &str = "\
Which default files to read; an explicit flag overrides its own row.

  file             --layout default                              --layout qwen (the TypeScript CLI's files)
  user settings    $XDG_CONFIG_HOME/mcp-reconcile/settings.json   $QWEN_HOME/settings.json (~/.qwen/settings.json)
  workspace        <project>/.mcp-reconcile/settings.json         <project>/.qwen/settings.json
  system           /etc/mcp-reconcile/settings.json               $QWEN_CODE_SYSTEM_SETTINGS_PATH or /etc/qwen-code/settings.json
  system defaults  /etc/mcp-reconcile/system-defaults.json        $QWEN_CODE_SYSTEM_DEFAULTS_PATH or /etc/qwen-code/system-defaults.json
  project servers  <project>/.mcp.json                            <project>/.mcp.json
  approvals        $XDG_CONFIG_HOME/mcp-reconcile/approvals.json  $QWEN_CODE_MCP_APPROVALS_PATH or $QWEN_HOME/mcpApprovals.json

$XDG_CONFIG_HOME defaults to ~/.config. On macOS the qwen system files live in
/Library/Application Support/QwenCode/. Settings files are JSON with comments; a
missing file counts as {}.";

/// Which default files to read (see [`LAYOUT_HELP`]).
#[derive(clap::ValueEnum, Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Layout {
    /// mcp-reconcile's own files under XDG directories.
    #[default]
    Default,
    /// The TypeScript (qwen-code) CLI's files, to run beside it.
    Qwen,
}

impl Layout {
    /// The flag spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            Layout::Default => "default",
            Layout::Qwen => "qwen",
        }
    }
}

/// The flags every command accepts to find its files and its session.
#[derive(clap::Args, Clone, Debug, Default)]
#[command(next_help_heading = "Files and session (the same for every command)")]
pub struct LayerFlags {
    /// User settings file (JSON with comments) [default: from --layout]
    #[arg(long, value_name = "PATH")]
    pub user_settings: Option<PathBuf>,
    /// Workspace settings file; its servers need approval [default: from --layout]
    #[arg(long, value_name = "PATH")]
    pub workspace_settings: Option<PathBuf>,
    /// System settings file; overrides user and workspace [default: from --layout]
    #[arg(long, value_name = "PATH")]
    pub system_settings: Option<PathBuf>,
    /// System defaults file; below the user settings [default: from --layout]
    #[arg(long, value_name = "PATH")]
    pub system_defaults: Option<PathBuf>,
    /// Project directory: its `.mcp.json` is read and it keys approvals [default: current directory]
    #[arg(long, value_name = "DIR")]
    pub project: Option<PathBuf>,
    /// Extra servers: a JSON file or inline JSON, with or without {"mcpServers": …}; repeatable
    #[arg(long = "mcp-config", value_name = "FILE|JSON")]
    pub mcp_config: Vec<String>,
    /// Upper bound on admitted server names (patterns with * and ?, comma-separated;
    /// repeatable). Settings can narrow it, never widen it; "" admits nothing
    #[arg(long = "allowed-mcp-server-names", value_name = "LIST")]
    pub allowed_mcp_server_names: Vec<String>,
    /// Approvals file [default: from --layout]
    #[arg(long, value_name = "FILE")]
    pub approvals: Option<PathBuf>,
    /// Treat the project folder as untrusted: no workspace settings, nothing connects
    #[arg(long)]
    pub untrusted: bool,
    /// Turn the approval gate off: project servers connect without asking
    /// (and `$VAR`s in .mcp.json are not expanded)
    #[arg(long)]
    pub yolo: bool,
    /// Quiet period after a file change before reloading, in ms [default: 300]
    #[arg(long, value_name = "N")]
    pub debounce_ms: Option<u64>,
    /// Default file set: `default` or `qwen`
    #[arg(long, value_enum, default_value_t = Layout::Default, value_name = "NAME", long_help = LAYOUT_HELP)]
    pub layout: Layout,
    /// Where a running session keeps its socket [default: $XDG_STATE_HOME/mcp-reconcile or ~/.local/state/mcp-reconcile]
    #[arg(long, value_name = "DIR")]
    pub state_dir: Option<PathBuf>,
}

/// The process environment the paths and `$VAR`s are resolved from.
///
/// Its `Debug` output names the variables but never shows their values.
#[derive(Clone, Default, PartialEq, Eq)]
pub struct HostEnv {
    /// Environment variables (those that are valid UTF-8).
    pub vars: BTreeMap<String, String>,
    /// The directory relative paths are resolved against.
    pub cwd: PathBuf,
    /// The user's home directory, if known.
    pub home: Option<PathBuf>,
}

impl std::fmt::Debug for HostEnv {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("HostEnv")
            .field("vars", &self.vars.keys().collect::<Vec<_>>())
            .field("cwd", &self.cwd)
            .field("home", &self.home)
            .finish()
    }
}

impl HostEnv {
    /// This process's environment, current directory and home directory.
    ///
    /// # Errors
    /// When the current directory cannot be read.
    pub fn from_process() -> anyhow::Result<Self> {
        let vars: BTreeMap<String, String> = std::env::vars_os()
            .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
            .collect();
        let cwd = std::env::current_dir()
            .context("cannot read the current directory; pass --project DIR")?;
        let home = vars
            .get("HOME")
            .filter(|h| !h.is_empty())
            .map(PathBuf::from)
            .or_else(|| {
                nix::unistd::User::from_uid(nix::unistd::getuid())
                    .ok()
                    .flatten()
                    .map(|u| u.dir)
            });
        Ok(HostEnv { vars, cwd, home })
    }

    /// A non-empty variable.
    fn var(&self, name: &str) -> Option<&str> {
        self.vars
            .get(name)
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    }

    fn home(&self, what: &str) -> anyhow::Result<&Path> {
        match &self.home {
            Some(home) => Ok(home),
            None => bail!("cannot find your home directory for the default {what}: set HOME or pass the path explicitly"),
        }
    }

    /// The variables as the kernel's `$VAR` expansion takes them.
    fn expansion_env(&self) -> Object {
        self.vars
            .iter()
            .map(|(k, v)| (k.clone(), Value::from(v.as_str())))
            .collect()
    }

    /// `path` made absolute against the current directory, lexically cleaned.
    fn absolute(&self, path: &Path) -> PathBuf {
        clean(&self.cwd.join(path))
    }
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
    /// The project's `.mcp.json`.
    pub mcp_json: PathBuf,
    /// The approvals file.
    pub approvals: PathBuf,
    /// Where a running session keeps its socket.
    pub state_dir: PathBuf,
}

impl LayerPaths {
    /// Resolves every path from `flags` (relative ones against `env.cwd`),
    /// filling the rest from the layout (see [`LAYOUT_HELP`]).
    ///
    /// # Errors
    /// When a default needs the home directory and none is known.
    pub fn resolve(flags: &LayerFlags, project_dir: &Path, env: &HostEnv) -> anyhow::Result<Self> {
        let explicit = |flag: &Option<PathBuf>| flag.as_deref().map(|p| env.absolute(p));
        let xdg = |var: &str, fallback: &[&str], what: &str| -> anyhow::Result<PathBuf> {
            match env.var(var).map(PathBuf::from) {
                Some(dir) if dir.is_absolute() => Ok(dir),
                _ => Ok(fallback
                    .iter()
                    .fold(env.home(what)?.to_path_buf(), |p, part| p.join(part))),
            }
        };
        let layout = flags.layout;
        let (system_dir, workspace_dir) = match layout {
            Layout::Default => (PathBuf::from("/etc/mcp-reconcile"), ".mcp-reconcile"),
            Layout::Qwen => (qwen_system_dir(), ".qwen"),
        };

        let user = match explicit(&flags.user_settings) {
            Some(p) => p,
            None => match layout {
                Layout::Default => xdg("XDG_CONFIG_HOME", &[".config"], "user settings")?
                    .join("mcp-reconcile/settings.json"),
                Layout::Qwen => qwen_home(env, "user settings")?.join("settings.json"),
            },
        };
        let workspace = explicit(&flags.workspace_settings)
            .unwrap_or_else(|| project_dir.join(workspace_dir).join("settings.json"));
        let layout_system = match layout {
            Layout::Qwen => env
                .var("QWEN_CODE_SYSTEM_SETTINGS_PATH")
                .map(|p| env.absolute(Path::new(p)))
                .unwrap_or_else(|| system_dir.join("settings.json")),
            Layout::Default => system_dir.join("settings.json"),
        };
        let system = explicit(&flags.system_settings).unwrap_or_else(|| layout_system.clone());
        let system_defaults = match explicit(&flags.system_defaults) {
            Some(p) => p,
            None => {
                let beside_system = layout_system
                    .parent()
                    .unwrap_or(&system_dir)
                    .join("system-defaults.json");
                match layout {
                    Layout::Qwen => env
                        .var("QWEN_CODE_SYSTEM_DEFAULTS_PATH")
                        .map(|p| env.absolute(Path::new(p)))
                        .unwrap_or(beside_system),
                    Layout::Default => beside_system,
                }
            }
        };
        let approvals = match explicit(&flags.approvals) {
            Some(p) => p,
            None => match layout {
                Layout::Default => xdg("XDG_CONFIG_HOME", &[".config"], "approvals file")?
                    .join("mcp-reconcile/approvals.json"),
                Layout::Qwen => match env.var("QWEN_CODE_MCP_APPROVALS_PATH") {
                    Some(p) => env.absolute(Path::new(p)),
                    None => qwen_home(env, "approvals file")?.join("mcpApprovals.json"),
                },
            },
        };
        let state_dir = match explicit(&flags.state_dir) {
            Some(p) => p,
            None => xdg("XDG_STATE_HOME", &[".local", "state"], "state directory")?
                .join("mcp-reconcile"),
        };
        Ok(LayerPaths {
            user,
            workspace,
            system,
            system_defaults,
            mcp_json: project_dir.join(".mcp.json"),
            approvals,
            state_dir,
        })
    }
}

/// `$QWEN_HOME` (with `~` and relative paths resolved as the TypeScript CLI
/// does) or `~/.qwen`.
fn qwen_home(env: &HostEnv, what: &str) -> anyhow::Result<PathBuf> {
    if let Some(dir) = env.var("QWEN_HOME") {
        let dir = if dir == "~" {
            env.home(what)?.to_path_buf()
        } else if let Some(rest) = dir.strip_prefix("~/").or_else(|| dir.strip_prefix("~\\")) {
            env.home(what)?.join(rest)
        } else {
            PathBuf::from(dir)
        };
        return Ok(env.absolute(&dir));
    }
    Ok(env.home(what)?.join(".qwen"))
}

fn qwen_system_dir() -> PathBuf {
    if cfg!(target_os = "macos") {
        PathBuf::from("/Library/Application Support/QwenCode")
    } else {
        PathBuf::from("/etc/qwen-code")
    }
}

/// Removes `.` components and folds `..` lexically (no filesystem access).
fn clean(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for component in path.components() {
        match component {
            Component::CurDir => {}
            Component::ParentDir => {
                if out.file_name().is_some() {
                    out.pop();
                } else if !out.has_root() {
                    out.push(component);
                }
            }
            other => out.push(other),
        }
    }
    out
}

/// A problem with one input, as the user should see it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}: {message}", file.display())]
pub struct InputError {
    /// The file (or `--mcp-config` argument) concerned.
    pub file: PathBuf,
    /// What is wrong and what to do about it.
    pub message: String,
}

/// What the inputs hold at one moment, ready for the kernel.
#[derive(Clone, Debug)]
pub struct Snapshot {
    /// One layer per input, in kernel layer kinds: systemDefaults, user,
    /// project (`.mcp.json`), workspace (trusted folders only), system,
    /// cliConfig (one per `--mcp-config`), serverCommand (when
    /// `mcp.serverCommand` is set).
    pub layers: Vec<Layer>,
    /// [`Snapshot::layers`] with the project-controlled ones (`.mcp.json`,
    /// workspace settings, a workspace `mcp.serverCommand`) as their files
    /// wrote them: `$VAR`s not expanded. What a review shows; never what runs.
    pub written_layers: Vec<Layer>,
    /// The project's `.mcp.json` (where project servers come from).
    pub mcp_json: PathBuf,
    /// The workspace settings file (where workspace servers come from).
    pub workspace_settings: PathBuf,
    /// `mcp.allowed` / `mcp.excluded` merged over the settings scopes.
    pub lists: McpLists,
    /// The `--allowed-mcp-server-names` occurrences as given (`None` when
    /// the flag is absent).
    pub cli_allowed: Option<Vec<String>>,
    /// The approval records (empty when the file is missing or malformed).
    pub approvals: Approvals,
    /// The canonical project root that keys approvals.
    pub project_root: String,
    /// The folder is trusted (no `--untrusted`).
    pub trusted: bool,
    /// The approval gate is off (`--yolo`).
    pub yolo: bool,
    /// What is broken right now; empty when every input loaded cleanly.
    pub errors: Vec<InputError>,
}

impl Snapshot {
    /// The admission lists for `servers` (SPEC §4), from this snapshot's
    /// settings lists, launch-flag cap, approvals, project root and yolo.
    pub fn gating_for(&self, servers: &Servers) -> Gating {
        compute_gating(
            servers,
            &self.lists,
            self.cli_allowed.as_deref(),
            &self.approvals,
            &self.project_root,
            self.yolo,
        )
    }

    /// The desired server map: [`assemble`] over [`Snapshot::layers`].
    pub fn assembled(&self) -> Assembled {
        assemble(&self.layers)
    }
}

/// The inputs of one session: resolved paths and the content last loaded
/// from each file.
pub struct Inputs {
    layout: Layout,
    paths: LayerPaths,
    project_dir: PathBuf,
    project_root: String,
    expansion_env: Object,
    env: HostEnv,
    trusted: bool,
    yolo: bool,
    debounce: Millis,
    cli_allowed: Option<Vec<String>>,
    settings: Vec<SettingsFile>,
    mcp_json: JsonFile,
    cli_configs: Vec<JsonFile>,
    store: ApprovalsStore,
    approvals: Option<(Approvals, Vec<String>)>,
    server_command: Option<FrozenCommand>,
}

impl std::fmt::Debug for Inputs {
    // Only paths and switches: the loaded content and the environment can
    // hold secrets.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Inputs")
            .field("layout", &self.layout)
            .field("project_root", &self.project_root)
            .field("paths", &self.paths)
            .field("trusted", &self.trusted)
            .field("yolo", &self.yolo)
            .field("debounce", &self.debounce)
            .finish_non_exhaustive()
    }
}

impl Inputs {
    /// Resolves every path from `flags` and this process's environment; no
    /// file is read yet (see [`Inputs::load`]).
    ///
    /// # Errors
    /// When the project directory does not exist, its path is not UTF-8, or a
    /// default path needs a home directory that is unknown.
    pub fn new(flags: &LayerFlags) -> anyhow::Result<Inputs> {
        Inputs::with_env(flags, HostEnv::from_process()?)
    }

    /// [`Inputs::new`] with an explicit environment.
    ///
    /// # Errors
    /// As [`Inputs::new`].
    pub fn with_env(flags: &LayerFlags, env: HostEnv) -> anyhow::Result<Inputs> {
        let given = flags.project.as_deref().unwrap_or(Path::new("."));
        let project_dir = env.absolute(given).canonicalize().with_context(|| {
            format!(
                "project directory {} not found; pass an existing directory with --project",
                given.display()
            )
        })?;
        if !project_dir.is_dir() {
            bail!(
                "{} is not a directory; pass the project directory with --project",
                project_dir.display()
            );
        }
        let Some(project_root) = project_dir.to_str().map(str::to_owned) else {
            bail!(
                "the project path {} is not valid UTF-8; approvals need a UTF-8 project root",
                project_dir.display()
            );
        };
        let paths = LayerPaths::resolve(flags, &project_dir, &env)?;
        let trusted = !flags.untrusted;

        let mut settings = vec![
            SettingsFile::new(LayerSource::SystemDefaults, paths.system_defaults.clone()),
            SettingsFile::new(LayerSource::User, paths.user.clone()),
        ];
        if trusted && !same_file(&paths.workspace, &paths.user) {
            settings.push(SettingsFile::new(
                LayerSource::Workspace,
                paths.workspace.clone(),
            ));
        }
        settings.push(SettingsFile::new(LayerSource::System, paths.system.clone()));

        let cli_configs = flags
            .mcp_config
            .iter()
            .map(|arg| {
                if arg.trim_start().starts_with('{') {
                    JsonFile::new(JsonKind::CliInline(arg.clone()))
                } else {
                    JsonFile::new(JsonKind::CliFile(env.absolute(Path::new(arg))))
                }
            })
            .collect();

        Ok(Inputs {
            layout: flags.layout,
            mcp_json: JsonFile::new(JsonKind::McpJson(paths.mcp_json.clone())),
            store: ApprovalsStore::new(paths.approvals.clone()),
            paths,
            project_dir,
            project_root,
            expansion_env: env.expansion_env(),
            env,
            trusted,
            yolo: flags.yolo,
            debounce: flags.debounce_ms.map_or(DEFAULT_DEBOUNCE, Millis),
            cli_allowed: (!flags.allowed_mcp_server_names.is_empty())
                .then(|| flags.allowed_mcp_server_names.clone()),
            settings,
            cli_configs,
            approvals: None,
            server_command: None,
        })
    }

    /// Every input file with the source its change is reported as: the
    /// settings files (no workspace file in an untrusted folder),
    /// `.mcp.json`, the approvals file and each `--mcp-config` file.
    pub fn watched(&self) -> Vec<(PathBuf, FileSource)> {
        let mut out: Vec<(PathBuf, FileSource)> = self
            .settings
            .iter()
            .map(|f| (f.path.clone(), f.source()))
            .collect();
        out.push((self.paths.mcp_json.clone(), FileSource::McpJson));
        out.push((self.paths.approvals.clone(), FileSource::Approvals));
        for config in &self.cli_configs {
            if let (Some(path), Some(source)) = (config.kind.path(), config.kind.source()) {
                out.push((path.to_path_buf(), source));
            }
        }
        out
    }

    /// Reloads the inputs named in `changed` (all of them for `None`, and
    /// every input not loaded yet) and returns what they hold now. A file
    /// that fails to load keeps its last good content and adds an error.
    pub fn load(&mut self, changed: Option<&[FileSource]>) -> Snapshot {
        let wanted = |loaded: bool, source: &FileSource| {
            !loaded || changed.is_none_or(|c| c.contains(source))
        };
        for file in &mut self.settings {
            if wanted(file.loaded, &file.source()) {
                file.reload(&self.expansion_env);
            }
        }
        if wanted(self.mcp_json.loaded, &FileSource::McpJson) {
            self.mcp_json.reload(&self.expansion_env, !self.yolo);
        }
        for config in &mut self.cli_configs {
            let due = match config.kind.source() {
                Some(source) => wanted(config.loaded, &source),
                None => !config.loaded,
            };
            if due {
                config.reload(&self.expansion_env, false);
            }
        }
        if self.approvals.is_none() || changed.is_none_or(|c| c.contains(&FileSource::Approvals)) {
            self.approvals = Some(self.store.load());
        }
        self.snapshot()
    }

    /// The approvals file.
    pub fn approvals_store(&self) -> &ApprovalsStore {
        &self.store
    }

    /// The canonical project root (real path): the approvals key.
    pub fn project_root(&self) -> &str {
        &self.project_root
    }

    /// The canonical project directory.
    pub fn project_dir(&self) -> &Path {
        &self.project_dir
    }

    /// Where the running session's socket lives.
    pub fn state_dir(&self) -> &Path {
        &self.paths.state_dir
    }

    /// Every resolved path.
    pub fn paths(&self) -> &LayerPaths {
        &self.paths
    }

    /// The layout the defaults came from.
    pub fn layout(&self) -> Layout {
        self.layout
    }

    /// The environment paths and `$VAR`s were resolved from.
    pub fn env(&self) -> &HostEnv {
        &self.env
    }

    /// The reload debounce (`--debounce-ms`, default 300 ms).
    pub fn debounce(&self) -> Millis {
        self.debounce
    }

    /// A stable id of this session's file set: 16 hex digits of a hash of the
    /// project root, every settings path and the layout. Commands given the
    /// same flags in the same project get the same id.
    pub fn session_id(&self) -> String {
        let mut text = String::new();
        for part in [
            Path::new(self.layout.as_str()),
            Path::new(&self.project_root),
            &self.paths.user,
            &self.paths.workspace,
            &self.paths.system,
            &self.paths.system_defaults,
        ] {
            text.push_str(&part.to_string_lossy());
            text.push('\0');
        }
        format!("{:016x}", fnv1a64(text.as_bytes()))
    }

    fn snapshot(&mut self) -> Snapshot {
        let mut errors = Vec::new();
        let mut layers = Vec::new();
        for file in &self.settings {
            errors.extend(file.errors());
            layers.push(Layer {
                source: file.kind,
                servers: file.content().servers,
                extension: None,
                from_workspace: false,
            });
        }
        errors.extend(self.mcp_json.errors());
        layers.push(Layer {
            source: LayerSource::Project,
            servers: self.mcp_json.servers(),
            extension: None,
            from_workspace: false,
        });
        for config in &self.cli_configs {
            errors.extend(config.errors());
            layers.push(Layer {
                source: LayerSource::CliConfig,
                servers: config.servers(),
                extension: None,
                from_workspace: false,
            });
        }

        let contents: Vec<(LayerSource, Value)> = self
            .settings
            .iter()
            .map(|f| (f.kind, f.content().value))
            .collect();
        let scopes: Vec<(LayerSource, &Value)> = contents.iter().map(|(k, v)| (*k, v)).collect();
        let lists = mcp_lists(&scopes);

        let current = self.current_server_command(&scopes);
        let frozen = self.server_command.get_or_insert_with(|| {
            let parsed = current.text.as_deref().map(|text| {
                server_command_config(text, &self.project_dir, &|name| {
                    self.env.vars.get(name).cloned()
                })
                .map_err(|e| format!("{e}; fix mcp.serverCommand and restart mcp-reconcile"))
            });
            // As written: the workspace file's own text (settings files are
            // expanded when parsed), its `$VAR`s left in place.
            let written_text = self
                .settings
                .iter()
                .find(|f| {
                    f.kind == LayerSource::Workspace && Some(&f.path) == current.file.as_ref()
                })
                .and_then(|f| f.good.as_ref()?.written_command.clone())
                .or_else(|| current.text.clone());
            let written = written_text.as_deref().and_then(|text| {
                server_command_config(text, &self.project_dir, &|name| {
                    Some(format!("${{{name}}}"))
                })
                .ok()
            });
            FrozenCommand {
                current: current.clone(),
                parsed,
                written,
            }
        });
        let mut written_layers = layers.clone();
        written_layers[..self.settings.len()]
            .iter_mut()
            .zip(&self.settings)
            .filter(|(_, file)| file.kind == LayerSource::Workspace)
            .for_each(|(layer, file)| layer.servers = file.written());
        if let Some(layer) = written_layers
            .iter_mut()
            .find(|l| l.source == LayerSource::Project)
        {
            layer.servers = self.mcp_json.written();
        }
        match &frozen.parsed {
            Some(Ok(config)) => {
                let from_workspace = frozen.current.kind == Some(LayerSource::Workspace);
                let layer = |config: &ServerConfig| {
                    let mut servers = Servers::new();
                    servers.insert("mcp".into(), config.clone());
                    Layer {
                        source: LayerSource::ServerCommand,
                        servers,
                        extension: None,
                        from_workspace,
                    }
                };
                layers.push(layer(config));
                written_layers.push(layer(frozen.written.as_ref().unwrap_or(config)));
            }
            Some(Err(message)) => errors.push(InputError {
                file: frozen.current.file.clone().unwrap_or_default(),
                message: message.clone(),
            }),
            None => {}
        }
        if current.text != frozen.current.text {
            errors.push(InputError {
                file: current
                    .file
                    .clone()
                    .or_else(|| frozen.current.file.clone())
                    .unwrap_or_default(),
                message: "mcp.serverCommand changed; it takes effect when mcp-reconcile restarts \
                          (the running session keeps the command it started with)"
                    .into(),
            });
        }

        let (approvals, problems) = self
            .approvals
            .clone()
            .unwrap_or_else(|| (Approvals::empty(), Vec::new()));
        errors.extend(problems.into_iter().map(|problem| InputError {
            file: self.store.path().to_path_buf(),
            message: format!(
                "{problem} — every server from .mcp.json or workspace settings stays pending \
                 until it is fixed; repair or delete the file (the next approval keeps a copy \
                 as .bak)"
            ),
        }));

        Snapshot {
            layers,
            written_layers,
            mcp_json: self.paths.mcp_json.clone(),
            workspace_settings: self.paths.workspace.clone(),
            lists,
            cli_allowed: self.cli_allowed.clone(),
            approvals,
            project_root: self.project_root.clone(),
            trusted: self.trusted,
            yolo: self.yolo,
            errors,
        }
    }

    /// `mcp.serverCommand` over the settings scopes and the file that sets it.
    fn current_server_command(&self, scopes: &[(LayerSource, &Value)]) -> CommandSetting {
        let file = self
            .settings
            .iter()
            .zip(scopes)
            .filter(|(_, (_, value))| {
                value
                    .as_object()
                    .and_then(|o| o.get("mcp"))
                    .and_then(Value::as_object)
                    .is_some_and(|mcp| mcp.contains_key("serverCommand"))
            })
            .max_by_key(|(file, _)| file.kind)
            .map(|(file, _)| (file.path.clone(), file.kind));
        CommandSetting {
            text: merged_server_command(scopes),
            file: file.as_ref().map(|(path, _)| path.clone()),
            kind: file.map(|(_, kind)| kind),
        }
    }
}

/// Whether two paths name the same file (lexically, or by real path when
/// both exist).
fn same_file(a: &Path, b: &Path) -> bool {
    a == b || matches!((a.canonicalize(), b.canonicalize()), (Ok(x), Ok(y)) if x == y)
}

/// FNV-1a, 64 bit: a small hash that is stable across builds and platforms.
fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, b| {
        (hash ^ u64::from(*b)).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct CommandSetting {
    text: Option<String>,
    file: Option<PathBuf>,
    /// The scope of the file that sets it: the workspace one makes the `mcp`
    /// server project-controlled (gated, SPEC §3.1 row 10).
    kind: Option<LayerSource>,
}

/// `mcp.serverCommand` as read at start-up (it is restart-required).
#[derive(Debug)]
struct FrozenCommand {
    current: CommandSetting,
    parsed: Option<Result<ServerConfig, String>>,
    /// The same command with `$VAR`s left as written (for review).
    written: Option<ServerConfig>,
}

/// The `mcp` server of `mcp.serverCommand`: the command string split like a
/// shell would (quotes, backslashes, `$VAR` from the environment), run in the
/// project directory.
fn server_command_config(
    text: &str,
    cwd: &Path,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<ServerConfig, String> {
    let words = shell_words(text, env)
        .map_err(|e| format!("cannot parse mcp.serverCommand {text:?}: {e}"))?;
    let Some((command, args)) = words.split_first() else {
        return Err(format!("mcp.serverCommand {text:?} names no command"));
    };
    let mut entry = Object::new();
    entry.insert("command".into(), command.as_str().into());
    entry.insert(
        "args".into(),
        Value::Array(args.iter().map(|a| Value::from(a.as_str())).collect()),
    );
    entry.insert("cwd".into(), cwd.to_string_lossy().as_ref().into());
    Ok(ServerConfig(entry))
}

/// Splits a command line into words like a POSIX shell: whitespace
/// separates words, `'…'` is literal, `"…"` allows `\"`, `\\`, `\$` and
/// `$VAR`, a backslash outside quotes escapes the next character, and
/// `$NAME` / `${NAME}` expand from `env` (unknown → empty).
///
/// # Errors
/// Unterminated quotes, and what a shell would treat specially but a plain
/// command cannot express: operators (`| & ; < > ( )`, backticks), unquoted
/// wildcards (`*`, `?`) and comments.
pub fn shell_words(
    text: &str,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut in_word = false;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => {
                if in_word {
                    words.push(std::mem::take(&mut word));
                    in_word = false;
                }
            }
            '\'' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('\'') => break,
                        Some(ch) => word.push(ch),
                        None => return Err("unterminated single quote".into()),
                    }
                }
            }
            '"' => {
                in_word = true;
                loop {
                    match chars.next() {
                        Some('"') => break,
                        Some('\\') => match chars.peek().copied() {
                            Some(n @ ('"' | '\\' | '$' | '`')) => {
                                word.push(n);
                                chars.next();
                            }
                            Some('\n') => {
                                chars.next();
                            }
                            _ => word.push('\\'),
                        },
                        Some('$') => expand_var(&mut chars, &mut word, env),
                        Some(ch) => word.push(ch),
                        None => return Err("unterminated double quote".into()),
                    }
                }
            }
            '\\' => {
                in_word = true;
                match chars.next() {
                    Some('\n') => {}
                    Some(ch) => word.push(ch),
                    None => word.push('\\'),
                }
            }
            '$' => {
                let before = word.len();
                expand_var(&mut chars, &mut word, env);
                in_word |= word.len() > before;
            }
            '|' | '&' | ';' | '<' | '>' | '(' | ')' | '`' => {
                return Err(format!("the shell operator `{c}` is not supported"))
            }
            '*' | '?' => {
                return Err(format!(
                    "the unquoted wildcard `{c}` is not supported (quote it)"
                ))
            }
            '#' if !in_word => return Err("comments (`#`) are not supported".into()),
            ch => {
                in_word = true;
                word.push(ch);
            }
        }
    }
    if in_word {
        words.push(word);
    }
    Ok(words)
}

fn expand_var(
    chars: &mut std::iter::Peekable<std::str::Chars<'_>>,
    out: &mut String,
    env: &dyn Fn(&str) -> Option<String>,
) {
    if chars.peek() == Some(&'{') {
        chars.next();
        let mut name = String::new();
        loop {
            match chars.next() {
                Some('}') => break,
                Some(ch) => name.push(ch),
                None => {
                    // Unterminated: literal text.
                    let _ = write!(out, "${{{name}");
                    return;
                }
            }
        }
        if name.is_empty() {
            out.push_str("${}");
        } else {
            out.push_str(&env(&name).unwrap_or_default());
        }
        return;
    }
    let mut name = String::new();
    while let Some(&ch) = chars.peek() {
        if ch.is_ascii_alphanumeric() || ch == '_' {
            name.push(ch);
            chars.next();
        } else {
            break;
        }
    }
    if name.is_empty() {
        out.push('$');
    } else {
        out.push_str(&env(&name).unwrap_or_default());
    }
}

/// The note appended to a load error: what stays in use meanwhile.
fn kept_note(has_last_good: bool) -> &'static str {
    if has_last_good {
        "its last good content stays in use until it loads again"
    } else {
        "nothing from it is used until it loads"
    }
}

/// The largest input file read (settings, `.mcp.json`, `--mcp-config`,
/// approvals): a repository's file is hostile input, and no real
/// configuration comes near this.
pub const MAX_INPUT_BYTES: u64 = 4 * 1024 * 1024;

/// Reads a file as text; `None` when it does not exist.
///
/// Bounded and never waiting: the file is opened non-blocking (a FIFO does
/// not wait for a writer), must be a regular file after symlinks are followed
/// (a FIFO, socket, device such as `/dev/zero`, or directory is refused), and
/// at most [`MAX_INPUT_BYTES`] are read (a larger file is an error).
pub fn read_text(path: &Path) -> Result<Option<String>, String> {
    use std::io::Read as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let opened = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(nix::fcntl::OFlag::O_NONBLOCK.bits())
        .open(path);
    let file = match opened {
        Ok(file) => file,
        Err(e)
            if e.kind() == std::io::ErrorKind::NotFound
                || e.kind() == std::io::ErrorKind::NotADirectory =>
        {
            return Ok(None)
        }
        Err(e) => return Err(format!("cannot read it: {e}")),
    };
    let meta = file
        .metadata()
        .map_err(|e| format!("cannot read it: {e}"))?;
    if !meta.is_file() {
        return Err(format!(
            "it is not a regular file (it is {}); only regular files are read — replace it with a file",
            file_kind(&meta.file_type())
        ));
    }
    let too_large = || {
        format!(
            "it is larger than {} MiB; a configuration file is never that large — check what wrote it",
            MAX_INPUT_BYTES / (1024 * 1024)
        )
    };
    if meta.len() > MAX_INPUT_BYTES {
        return Err(too_large());
    }
    let mut bytes = Vec::with_capacity(usize::try_from(meta.len()).unwrap_or(0));
    file.take(MAX_INPUT_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read it: {e}"))?;
    if bytes.len() as u64 > MAX_INPUT_BYTES {
        return Err(too_large());
    }
    String::from_utf8(bytes)
        .map(Some)
        .map_err(|_| "it is not UTF-8 text".to_owned())
}

fn file_kind(kind: &std::fs::FileType) -> &'static str {
    use std::os::unix::fs::FileTypeExt as _;
    if kind.is_dir() {
        "a directory"
    } else if kind.is_fifo() {
        "a FIFO"
    } else if kind.is_socket() {
        "a socket"
    } else if kind.is_char_device() || kind.is_block_device() {
        "a device"
    } else {
        "not a regular file"
    }
}

/// The object entries of a server map; every other entry becomes an error
/// naming it.
fn object_entries(map: &Object, where_: &str) -> (Servers, Vec<String>) {
    let mut servers = Servers::new();
    let mut errors = Vec::new();
    for (name, entry) in map {
        match entry {
            Value::Object(o) => servers.insert(name.clone(), ServerConfig(o.clone())),
            other => errors.push(format!(
                "server \"{name}\" in {where_} must be an object, found {} — skipped; fix or \
                 remove that entry",
                other.preview(60)
            )),
        }
    }
    (servers, errors)
}

/// One settings file and what was last loaded from it.
#[derive(Debug)]
struct SettingsFile {
    kind: LayerSource,
    path: PathBuf,
    loaded: bool,
    good: Option<SettingsContent>,
    error: Option<String>,
}

#[derive(Clone, Debug, Default)]
struct SettingsContent {
    value: Value,
    servers: Servers,
    entry_errors: Vec<String>,
    /// Workspace settings only: the servers with `$VAR`s as written.
    written: Option<Servers>,
    /// Workspace settings only: `mcp.serverCommand` as written.
    written_command: Option<String>,
}

impl SettingsContent {
    fn empty() -> Self {
        SettingsContent {
            value: Value::Object(Object::new()),
            ..SettingsContent::default()
        }
    }

    fn from_value(value: Value) -> Self {
        let (servers, entry_errors) = match value.as_object().and_then(|o| o.get("mcpServers")) {
            None | Some(Value::Null) => (Servers::new(), Vec::new()),
            Some(Value::Object(map)) => object_entries(map, "mcpServers"),
            Some(other) => (
                Servers::new(),
                vec![format!(
                    "mcpServers must be an object of server entries, found {} — no servers \
                     are loaded from this file",
                    other.preview(60)
                )],
            ),
        };
        SettingsContent {
            value,
            servers,
            entry_errors,
            written: None,
            written_command: None,
        }
    }
}

impl SettingsFile {
    fn new(kind: LayerSource, path: PathBuf) -> Self {
        SettingsFile {
            kind,
            path,
            loaded: false,
            good: None,
            error: None,
        }
    }

    fn source(&self) -> FileSource {
        FileSource::Settings(self.kind.as_str().to_owned())
    }

    fn reload(&mut self, env: &Object) {
        self.loaded = true;
        let text = match read_text(&self.path) {
            Ok(Some(text)) => text,
            Ok(None) => {
                self.good = Some(SettingsContent::empty());
                self.error = None;
                return;
            }
            Err(e) => {
                self.error = Some(format!("{e}; {}", kept_note(self.good.is_some())));
                return;
            }
        };
        match parse_settings(&text, Some(env)) {
            Ok(value) => {
                let mut content = SettingsContent::from_value(value);
                if self.kind == LayerSource::Workspace {
                    if let Ok(raw) = parse_settings(&text, None) {
                        content.written_command = server_command(&raw);
                        content.written = Some(SettingsContent::from_value(raw).servers);
                    }
                }
                self.good = Some(content);
                self.error = None;
            }
            Err(e) => {
                self.error = Some(format!(
                    "{e} — fix the file; {}",
                    kept_note(self.good.is_some())
                ));
            }
        }
    }

    /// The servers in use as the file wrote them (workspace settings; other
    /// scopes are the user's own and are returned as loaded).
    fn written(&self) -> Servers {
        let content = self.good.as_ref();
        content
            .and_then(|c| c.written.clone())
            .or_else(|| content.map(|c| c.servers.clone()))
            .unwrap_or_default()
    }

    /// The content in use: the last good one, or `{}`.
    fn content(&self) -> SettingsContent {
        self.good.clone().unwrap_or_else(SettingsContent::empty)
    }

    fn errors(&self) -> Vec<InputError> {
        let entry_errors = self.good.iter().flat_map(|g| g.entry_errors.iter());
        self.error
            .iter()
            .chain(entry_errors)
            .map(|message| InputError {
                file: self.path.clone(),
                message: message.clone(),
            })
            .collect()
    }
}

/// A JSON server file other than settings: `.mcp.json` or a `--mcp-config`.
#[derive(Debug)]
struct JsonFile {
    kind: JsonKind,
    loaded: bool,
    good: Option<(Servers, Vec<String>)>,
    /// `.mcp.json` only: the servers in use with `$VAR`s as written.
    written: Option<Servers>,
    error: Option<String>,
}

#[derive(Debug)]
enum JsonKind {
    McpJson(PathBuf),
    CliFile(PathBuf),
    CliInline(String),
}

impl JsonKind {
    fn path(&self) -> Option<&Path> {
        match self {
            JsonKind::McpJson(p) | JsonKind::CliFile(p) => Some(p),
            JsonKind::CliInline(_) => None,
        }
    }

    fn source(&self) -> Option<FileSource> {
        match self {
            JsonKind::McpJson(_) => Some(FileSource::McpJson),
            JsonKind::CliFile(p) => Some(FileSource::McpConfig(p.to_string_lossy().into_owned())),
            JsonKind::CliInline(_) => None,
        }
    }

    fn label(&self) -> PathBuf {
        match self {
            JsonKind::McpJson(p) | JsonKind::CliFile(p) => p.clone(),
            JsonKind::CliInline(_) => PathBuf::from("--mcp-config (inline JSON)"),
        }
    }
}

impl JsonFile {
    fn new(kind: JsonKind) -> Self {
        JsonFile {
            kind,
            loaded: false,
            good: None,
            written: None,
            error: None,
        }
    }

    fn reload(&mut self, env: &Object, expand: bool) {
        self.loaded = true;
        let text = match &self.kind {
            JsonKind::CliInline(text) => text.clone(),
            JsonKind::McpJson(path) | JsonKind::CliFile(path) => match read_text(path) {
                Ok(Some(text)) => text,
                Ok(None) => {
                    self.good = Some((Servers::new(), Vec::new()));
                    self.written = None;
                    self.error = match self.kind {
                        JsonKind::CliFile(_) => {
                            Some("file not found — create it or fix the --mcp-config path".into())
                        }
                        _ => None,
                    };
                    return;
                }
                Err(e) => {
                    self.error = Some(format!("{e}; {}", kept_note(self.good.is_some())));
                    return;
                }
            },
        };
        let parsed = match json::parse_jsonc(&text) {
            Ok(value) => value,
            Err(e) => {
                let what = if text.trim().is_empty() {
                    "it is empty".to_owned()
                } else {
                    format!("not valid JSON: {e}")
                };
                self.error = Some(format!(
                    "{what} — fix it; {}",
                    kept_note(self.good.is_some())
                ));
                return;
            }
        };
        match &self.kind {
            JsonKind::McpJson(_) => {
                let has_servers = matches!(
                    parsed.as_object().and_then(|o| o.get("mcpServers")),
                    Some(Value::Object(_))
                );
                let result = parse_mcp_json(&text, Some(env), expand);
                self.written = Some(parse_mcp_json(&text, None, false).servers);
                let errors = if has_servers {
                    result
                        .errors
                        .into_iter()
                        .map(|e| format!("{e}; fix or remove that entry"))
                        .collect()
                } else {
                    vec![
                        "no \"mcpServers\" object — write {\"mcpServers\": {\"name\": {…}}}; no \
                         servers are loaded from it"
                            .to_owned(),
                    ]
                };
                self.good = Some((result.servers, errors));
                self.error = None;
            }
            JsonKind::CliFile(_) | JsonKind::CliInline(_) => {
                let Value::Object(top) = &parsed else {
                    self.error = Some(format!(
                        "must be a JSON object of servers (or {{\"mcpServers\": …}}), found {} \
                         — fix it; {}",
                        &parsed.preview(60),
                        kept_note(self.good.is_some())
                    ));
                    return;
                };
                let (map, where_) = match top.get("mcpServers") {
                    Some(Value::Object(map)) => (map, "mcpServers"),
                    _ => (top, "--mcp-config"),
                };
                self.good = Some(object_entries(map, where_));
                self.error = None;
            }
        }
    }

    fn servers(&self) -> Servers {
        self.good
            .as_ref()
            .map(|(s, _)| s.clone())
            .unwrap_or_default()
    }

    /// [`JsonFile::servers`] with `$VAR`s as written (`.mcp.json`).
    fn written(&self) -> Servers {
        self.written.clone().unwrap_or_else(|| self.servers())
    }

    fn errors(&self) -> Vec<InputError> {
        let entry_errors = self.good.iter().flat_map(|(_, e)| e.iter());
        self.error
            .iter()
            .chain(entry_errors)
            .map(|message| InputError {
                file: self.kind.label(),
                message: message.clone(),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(text: &str) -> Result<Vec<String>, String> {
        shell_words(text, &|name| (name == "HOME").then(|| "/home/u".to_owned()))
    }

    #[test]
    fn shell_words_split_like_a_shell() {
        assert_eq!(
            words(r#"node "my server.js" --flag='a b' x\ y $HOME/bin ${HOME}x "$HOME" $NOPE"#),
            Ok(vec![
                "node".into(),
                "my server.js".into(),
                "--flag=a b".into(),
                "x y".into(),
                "/home/u/bin".into(),
                "/home/ux".into(),
                "/home/u".into(),
            ])
        );
        assert_eq!(
            words(r#"a "" b"#),
            Ok(vec!["a".into(), "".into(), "b".into()])
        );
        assert_eq!(
            words(r#"say "\"hi\" \n""#),
            Ok(vec!["say".into(), r#""hi" \n"#.into()])
        );
        assert_eq!(words("  "), Ok(vec![]));
        assert_eq!(
            words("cost $ 5"),
            Ok(vec!["cost".into(), "$".into(), "5".into()])
        );
    }

    #[test]
    fn shell_words_refuse_what_a_command_cannot_express() {
        for bad in [
            "a | b", "a; b", "a > f", "a 'x", "a \"x", "ls *.js", "a `b`", "a #c", "(a)",
        ] {
            assert!(words(bad).is_err(), "{bad}");
        }
        assert_eq!(words("a#b"), Ok(vec!["a#b".into()]));
    }

    /// A command that takes the layer flags.
    #[derive(clap::Parser, Debug)]
    struct Cli {
        #[command(flatten)]
        flags: LayerFlags,
    }

    #[test]
    fn flags_parse_and_the_help_teaches_the_layouts() {
        use clap::{CommandFactory, Parser};
        Cli::command().debug_assert();
        let cli = Cli::try_parse_from([
            "x",
            "--layout",
            "qwen",
            "--mcp-config",
            r#"{"a":{"command":"b"}}"#,
            "--mcp-config",
            "extra.json",
            "--allowed-mcp-server-names",
            "a,b",
            "--allowed-mcp-server-names",
            "",
            "--untrusted",
            "--debounce-ms",
            "50",
        ])
        .expect("parse");
        assert_eq!(cli.flags.layout, Layout::Qwen);
        assert_eq!(cli.flags.mcp_config.len(), 2);
        assert_eq!(cli.flags.allowed_mcp_server_names, ["a,b", ""]);
        assert!(cli.flags.untrusted && !cli.flags.yolo);
        assert_eq!(cli.flags.debounce_ms, Some(50));
        let defaults = Cli::try_parse_from(["x"]).expect("parse");
        assert_eq!(defaults.flags.layout, Layout::Default);
        assert!(defaults.flags.allowed_mcp_server_names.is_empty());

        let help = Cli::command().render_long_help().to_string();
        for needle in [
            "~/.qwen/settings.json",
            "mcpApprovals.json",
            "--workspace-settings",
        ] {
            assert!(help.contains(needle), "{needle} missing from:\n{help}");
        }
    }

    #[test]
    fn clean_folds_dots() {
        assert_eq!(clean(Path::new("/a/./b/../c")), PathBuf::from("/a/c"));
        assert_eq!(clean(Path::new("/..")), PathBuf::from("/"));
    }

    #[test]
    fn fnv_is_the_reference_hash() {
        assert_eq!(fnv1a64(b""), 0xcbf2_9ce4_8422_2325);
        assert_eq!(fnv1a64(b"a"), 0xaf63_dc4c_8601_ec8c);
    }
}
