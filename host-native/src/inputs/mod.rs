//! The files a session reads (SPEC §3, §5, §8): which ones, from which
//! flags, and what they hold right now.
//!
//! Every command takes the same file flags, turned into the same
//! [`Options`], so each finds the same files and the same running session
//! ([`Inputs::session_id`]). [`Inputs`] resolves the paths once (the project root is canonicalized once, and that one
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
//!
//! Parts: `paths` (the flags over a layout's default locations, [`Options`], [`HostEnv`],
//! [`LayerPaths`]; the layouts themselves are the table of clients, [`CLIENTS`]); `input_file` (one input file of any kind: its last good content, missing
//! grace, errors, and the one reload and completeness path), whose kinds are
//! `server_files` (settings, `.mcp.json`, `--mcp-config`), `clients` (other clients' own
//! files) and `lsp` (language-server files); `checked` (read once: what the completeness
//! check read, kept for the pass); `files` ([`read_text`], bounds, messages); `build` (the
//! [`Snapshot`] of what the files hold) and `shell_words` (`mcp.serverCommand`).

mod build;
mod checked;
mod clients;
mod files;
mod host_env;
mod input_file;
mod lsp;
mod lsp_formats;
mod own_gateway;
mod paths;
mod server_files;
mod session_id;
mod shell_words;
mod snapshot;

/// The client-file parsers for the fuzz targets (not part of the API).
#[doc(hidden)]
pub use clients::fuzz;

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use mcp_reconcile_kernel::json::Object;
use mcp_reconcile_kernel::lsp::LspScope;
use mcp_reconcile_kernel::reload::FileSource;
use mcp_reconcile_kernel::{Approvals, LayerSource, Millis, DEFAULT_DEBOUNCE, DEFAULT_QUIET};

use crate::approvals_store::ApprovalsStore;
use build::FrozenCommand;
use checked::Checked;
pub(crate) use clients::strategy::How;
pub use clients::strategy::Install;
use clients::ClientFile;
pub use clients::CODEX_MARK;
pub(crate) use clients::{claude_project_key, editor_user_file, sidecar};
pub use clients::{layout_help, ClientSpec, CLIENTS};
use files::Missing;
pub use files::{read_client_text, MAX_CLIENT_STATE_BYTES};
pub use files::{read_opened, read_text, MAX_INPUT_BYTES, MISSING_GRACE};
pub use host_env::HostEnv;
pub(crate) use host_env::{claude_home, clean, codex_home};
use input_file::Input;
use lsp::LspFile;
pub use own_gateway::INSTALLED_MARK;
pub use paths::{LayerPaths, Layout, Options};
use server_files::{JsonFile, SettingsFile};
pub use shell_words::shell_words;
pub use snapshot::{ApprovalWriter, ClientApproval, Origin, Snapshot};

/// A problem with one input, as the user should see it.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}: {message}", file.display())]
pub struct InputError {
    /// The file (or `--mcp-config` argument) concerned.
    pub file: PathBuf,
    /// What is wrong and what to do about it.
    pub message: String,
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
    /// `--untrusted` was given.
    untrusted_flag: bool,
    /// Gemini CLI's trust of the project as decided at start-up (`--layout gemini`).
    gemini_trusted: Option<bool>,
    yolo: bool,
    debounce: Millis,
    quiet: Millis,
    cli_allowed: Option<Vec<String>>,
    /// Every input file but the approvals files.
    files: Files,
    /// The project directory as given, before symlinks were resolved.
    project_given: PathBuf,
    /// The git repository the project is in (Claude Code keys its local scope by it).
    git_root: Option<PathBuf>,
    /// A `.git` file that claims a worktree of another repository without being one, and why
    /// (reported: the project is not taken as part of that repository).
    git_problem: Option<(PathBuf, String)>,
    store: ApprovalsStore,
    approvals: Option<(Approvals, Vec<String>)>,
    server_command: Option<FrozenCommand>,
    lsp_store: ApprovalsStore,
    lsp_approvals: Option<(Approvals, Vec<String>)>,
    /// What the completeness checks read since the last pass, for the pass.
    checked: Checked,
}

/// What a reload needs besides the file: the environment `$VAR`s expand from, whether
/// project entries expand (no `--yolo`), the approvals key, and a client file's context.
struct LoadCtx<'a> {
    env: &'a Object,
    expand: bool,
    project_root: &'a str,
    client: clients::Context<'a>,
}

/// Every input file of a session, by kind (the approvals files are read by their stores).
struct Files {
    settings: Vec<SettingsFile>,
    /// This host's `.mcp.json` (none in layouts whose client does not read one).
    mcp_json: Option<JsonFile>,
    /// Another client's own files (SPEC §15).
    clients: Vec<ClientFile>,
    cli_configs: Vec<JsonFile>,
    lsp_user: Option<LspFile>,
    lsp_project: LspFile,
}

impl Files {
    /// Every file, whatever its kind.
    fn all(&self) -> impl Iterator<Item = &dyn Input> {
        let settings = self.settings.iter().map(|f| f as &dyn Input);
        let mcp_json = self.mcp_json.iter().map(|f| f as &dyn Input);
        let clients = self.clients.iter().map(|f| f as &dyn Input);
        let cli = self.cli_configs.iter().map(|f| f as &dyn Input);
        let lsp = self.lsp_user.iter().chain([&self.lsp_project]);
        settings
            .chain(mcp_json)
            .chain(clients)
            .chain(cli)
            .chain(lsp.map(|f| f as &dyn Input))
    }

    /// [`Files::all`], to change.
    fn all_mut(&mut self) -> impl Iterator<Item = &mut dyn Input> {
        let settings = self.settings.iter_mut().map(|f| f as &mut dyn Input);
        let mcp_json = self.mcp_json.iter_mut().map(|f| f as &mut dyn Input);
        let clients = self.clients.iter_mut().map(|f| f as &mut dyn Input);
        let cli = self.cli_configs.iter_mut().map(|f| f as &mut dyn Input);
        let lsp = self.lsp_user.iter_mut().chain([&mut self.lsp_project]);
        settings
            .chain(mcp_json)
            .chain(clients)
            .chain(cli)
            .chain(lsp.map(|f| f as &mut dyn Input))
    }
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
    /// Resolves every path from the options `flags` and this process's environment; no
    /// file is read yet (see [`Inputs::load`]).
    ///
    /// # Errors
    /// When the project directory does not exist, its path is not UTF-8, or a
    /// default path needs a home directory that is unknown.
    pub fn new(flags: &Options) -> anyhow::Result<Inputs> {
        Inputs::with_env(flags, HostEnv::from_process()?)
    }

    /// [`Inputs::new`] with an explicit environment.
    ///
    /// # Errors
    /// As [`Inputs::new`].
    pub fn with_env(flags: &Options, env: HostEnv) -> anyhow::Result<Inputs> {
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
        let layout = flags.layout;

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
        let clients = clients::client_files(
            layout,
            &project_dir,
            &env,
            flags.system_settings.as_deref().map(|p| env.absolute(p)),
        )?;
        if layout.reads_client_files() {
            // That client's files are the whole configuration: no settings file of ours.
            settings.clear();
        }
        // Gemini CLI and the client layouts read no `.mcp.json` of this host's format.
        let mcp_json = layout
            .spec()
            .reads_mcp_json
            .then(|| JsonFile::mcp_json(paths.mcp_json.clone()));
        let cli_configs = flags
            .mcp_config
            .iter()
            .map(|arg| JsonFile::cli(arg, &env))
            .collect();

        let (git_root, git_problem) = if layout.reads_client_files() {
            clients::git_root(&project_dir)
                .map_or((None, None), |(root, problem)| (Some(root), problem))
        } else {
            (None, None)
        };
        let files = Files {
            settings,
            mcp_json,
            clients,
            cli_configs,
            lsp_user: paths
                .user_lsp
                .clone()
                .map(|path| LspFile::new(path, LspScope::User, layout)),
            lsp_project: LspFile::new(paths.lsp_json.clone(), LspScope::Project, layout),
        };
        Ok(Inputs {
            git_root,
            git_problem,
            files,
            lsp_store: ApprovalsStore::new(paths.lsp_approvals.clone()),
            lsp_approvals: None,
            layout,
            project_given: env.absolute(given),
            store: ApprovalsStore::new(paths.approvals.clone()),
            paths,
            project_dir,
            project_root,
            expansion_env: env.expansion_env(),
            env,
            trusted,
            untrusted_flag: flags.untrusted,
            gemini_trusted: None,
            yolo: flags.yolo,
            debounce: flags.debounce_ms.map_or(DEFAULT_DEBOUNCE, Millis),
            quiet: flags.quiet_ms.map_or(DEFAULT_QUIET, Millis),
            cli_allowed: (!flags.allowed_mcp_server_names.is_empty())
                .then(|| flags.allowed_mcp_server_names.clone()),
            approvals: None,
            server_command: None,
            checked: Checked::default(),
        })
    }

    /// Every input file with the source its change is reported as: the
    /// settings files (no workspace file in an untrusted folder),
    /// `.mcp.json`, the client files, each `--mcp-config` file, the language-server files,
    /// and the two approvals files.
    pub fn watched(&self) -> Vec<(PathBuf, FileSource)> {
        let mut out: Vec<(PathBuf, FileSource)> = self
            .files
            .all()
            .filter_map(|f| Some((f.path().to_path_buf(), f.source()?.clone())))
            .collect();
        out.push((self.paths.approvals.clone(), FileSource::Approvals));
        out.push((self.paths.lsp_approvals.clone(), FileSource::LspApprovals));
        out.push((
            crate::pins::pins_path(&self.paths.approvals),
            FileSource::Pins,
        ));
        out
    }

    /// Reloads the inputs named in `changed` (all of them for `None`, and
    /// every input not loaded yet) and returns what they hold now. A file
    /// that fails to load keeps its last good content and adds an error. A file found
    /// complete since the last pass and unchanged since is not read again
    /// ([`Inputs::complete`]).
    pub fn load(&mut self, changed: Option<&[FileSource]>) -> Snapshot {
        // An input that never changes (an inline `--mcp-config`) is loaded once.
        let wanted = |source: Option<&FileSource>| {
            source.is_some_and(|s| changed.is_none_or(|c| c.contains(s)))
        };
        let ctx = LoadCtx {
            env: &self.expansion_env,
            expand: !self.yolo,
            project_root: &self.project_root,
            client: clients::Context {
                vars: &self.env.vars,
                home: self.env.home.as_deref(),
                project: &self.project_dir,
                project_given: &self.project_given,
                git_root: self.git_root.as_deref(),
            },
        };
        for file in self.files.all_mut() {
            if !file.loaded() || wanted(file.source()) {
                file.reload(&ctx, &mut self.checked);
            }
        }
        if self.approvals.is_none() || wanted(Some(&FileSource::Approvals)) {
            self.approvals = Some(self.store.load());
        }
        if self.lsp_approvals.is_none() || wanted(Some(&FileSource::LspApprovals)) {
            self.lsp_approvals = Some(self.lsp_store.load());
        }
        self.snapshot()
    }

    /// Whether a settings file or `.mcp.json` that had content is missing and still in use
    /// (for [`MISSING_GRACE`], until [`Inputs::expire_missing`]).
    pub fn missing(&self) -> bool {
        self.files.all().any(|f| f.missing() == Missing::Held)
    }

    /// Gives up on the missing files still held: they read as empty from now on (until they
    /// come back). Their sources, to reload, and the servers they held.
    pub fn expire_missing(&mut self) -> (Vec<FileSource>, Vec<String>) {
        let mut sources = Vec::new();
        let mut servers = Vec::new();
        for file in self.files.all_mut() {
            if let Some(held) = file.expire_missing() {
                sources.extend(file.source().cloned());
                servers.extend(held);
            }
        }
        (sources, servers)
    }

    /// The approvals file.
    pub fn approvals_store(&self) -> &ApprovalsStore {
        &self.store
    }

    /// The language-server approvals file (SPEC §14.3).
    pub fn lsp_approvals_store(&self) -> &ApprovalsStore {
        &self.lsp_store
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

    /// The reload debounce (`--debounce-ms`, default 300 ms): the longest wait.
    pub fn debounce(&self) -> Millis {
        self.debounce
    }

    /// The quiet window of settle detection (`--quiet-ms`, default 25 ms).
    pub fn quiet(&self) -> Millis {
        self.quiet
    }

    /// Whether the input behind `source` is complete now: it exists, is not empty and parses
    /// (an editor's rename-save, or the last write of an in-place one). Bounded and never
    /// waiting, like every read of an input. What it read and parsed is kept, per source, for
    /// the next [`Inputs::load`], which takes it while the file is unchanged since (see
    /// `checked`): a save is read and parsed once, not once to check and once to load.
    pub fn complete(&mut self, source: &FileSource) -> bool {
        if let Some(file) = self.files.all().find(|f| f.source() == Some(source)) {
            return file.complete(&mut self.checked);
        }
        let path = match source {
            FileSource::Approvals => &self.paths.approvals,
            FileSource::LspApprovals => &self.paths.lsp_approvals,
            _ => return false, // a server's source (dev mode), or no input of this session
        };
        // Read by its store, with its own salvage of a damaged file: only checked here.
        matches!(read_text(path), Ok(Some(text))
            if !text.trim().is_empty() && mcp_reconcile_kernel::json::parse_jsonc(&text).is_ok())
    }
}

/// Whether two paths name the same file (lexically, or by real path when
/// both exist).
fn same_file(a: &Path, b: &Path) -> bool {
    a == b || matches!((a.canonicalize(), b.canonicalize()), (Ok(x), Ok(y)) if x == y)
}

#[cfg(test)]
mod tests;

/// The JSON object `text` (for tests).
#[cfg(test)]
pub(crate) fn object(text: &str) -> mcp_reconcile_kernel::Object {
    match mcp_reconcile_kernel::json::parse(text).expect("json") {
        mcp_reconcile_kernel::Value::Object(o) => o,
        _ => panic!("object"),
    }
}
