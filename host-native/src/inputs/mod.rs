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
//! Parts: `paths` (layouts, default locations, [`Options`], [`HostEnv`],
//! [`LayerPaths`]), `files` (the per-file reloaders with their last good
//! content, and [`read_text`]) and `shell_words` (`mcp.serverCommand`).

mod clients;
mod files;
mod lsp;
mod own_gateway;
mod paths;
mod session_id;
mod shell_words;
mod snapshot;

use std::path::{Path, PathBuf};

use anyhow::{bail, Context};
use mcp_reconcile_kernel::json::{Object, Value};
use mcp_reconcile_kernel::lsp::LspScope;
use mcp_reconcile_kernel::reload::FileSource;
use mcp_reconcile_kernel::settings::{mcp_lists, merged_server_command};
use mcp_reconcile_kernel::{
    Approvals, Decision, Layer, LayerSource, Millis, ServerConfig, Servers, DEFAULT_DEBOUNCE,
    DEFAULT_QUIET,
};

use crate::approvals_store::ApprovalsStore;
use clients::ClientFile;
pub use files::{read_opened, read_text, MAX_INPUT_BYTES, MISSING_GRACE};
use files::{JsonFile, JsonKind, Missing, SettingsFile};
use lsp::LspFile;
use mcp_reconcile_kernel::policy::PolicyRule;
pub(crate) use paths::clean;
pub use paths::{HostEnv, LayerPaths, Layout, Options, LAYOUT_HELP};
use shell_words::server_command_config;
pub use shell_words::shell_words;
pub use snapshot::Snapshot;

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
    yolo: bool,
    debounce: Millis,
    quiet: Millis,
    cli_allowed: Option<Vec<String>>,
    settings: Vec<SettingsFile>,
    /// This host's `.mcp.json` (none in layouts whose client does not read one).
    mcp_json: Option<JsonFile>,
    /// Another client's own files (SPEC §15).
    clients: Vec<ClientFile>,
    /// The project directory as given, before symlinks were resolved.
    project_given: PathBuf,
    cli_configs: Vec<JsonFile>,
    store: ApprovalsStore,
    approvals: Option<(Approvals, Vec<String>)>,
    server_command: Option<FrozenCommand>,
    lsp_user: Option<LspFile>,
    lsp_project: LspFile,
    lsp_store: ApprovalsStore,
    lsp_approvals: Option<(Approvals, Vec<String>)>,
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
        let mcp_json = matches!(layout, Layout::Default | Layout::Qwen)
            .then(|| JsonFile::new(JsonKind::McpJson(paths.mcp_json.clone())));

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
            lsp_user: paths
                .user_lsp
                .clone()
                .map(|path| LspFile::new(path, LspScope::User)),
            lsp_project: LspFile::new(paths.lsp_json.clone(), LspScope::Project),
            lsp_store: ApprovalsStore::new(paths.lsp_approvals.clone()),
            lsp_approvals: None,
            layout,
            mcp_json,
            clients,
            project_given: env.absolute(given),
            store: ApprovalsStore::new(paths.approvals.clone()),
            paths,
            project_dir,
            project_root,
            expansion_env: env.expansion_env(),
            env,
            trusted,
            yolo: flags.yolo,
            debounce: flags.debounce_ms.map_or(DEFAULT_DEBOUNCE, Millis),
            quiet: flags.quiet_ms.map_or(DEFAULT_QUIET, Millis),
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
        if self.mcp_json.is_some() {
            out.push((self.paths.mcp_json.clone(), FileSource::McpJson));
        }
        out.extend(self.clients.iter().map(|f| (f.path.clone(), f.source())));
        out.push((self.paths.approvals.clone(), FileSource::Approvals));
        for file in self.lsp_user.iter().chain([&self.lsp_project]) {
            out.push((file.path.clone(), file.source()));
        }
        out.push((self.paths.lsp_approvals.clone(), FileSource::LspApprovals));
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
        if let Some(mcp_json) = &mut self.mcp_json {
            if wanted(mcp_json.loaded, &FileSource::McpJson) {
                mcp_json.reload(&self.expansion_env, !self.yolo);
            }
        }
        let ctx = clients::Context {
            vars: &self.env.vars,
            home: self.env.home.as_deref(),
            project: &self.project_dir,
            project_given: &self.project_given,
        };
        for file in &mut self.clients {
            if wanted(file.loaded, &file.source()) {
                file.reload(&ctx);
            }
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
        for file in self.lsp_user.iter_mut().chain([&mut self.lsp_project]) {
            if wanted(file.loaded, &file.source()) {
                file.reload(&self.expansion_env, !self.yolo, &self.project_root);
            }
        }
        if self.lsp_approvals.is_none()
            || changed.is_none_or(|c| c.contains(&FileSource::LspApprovals))
        {
            self.lsp_approvals = Some(self.lsp_store.load());
        }
        self.snapshot()
    }

    /// Whether a settings file or `.mcp.json` that had content is missing and still in use
    /// (for [`MISSING_GRACE`], until [`Inputs::expire_missing`]).
    pub fn missing(&self) -> bool {
        self.settings
            .iter()
            .map(|f| f.missing)
            .chain(self.mcp_json.iter().map(|f| f.missing))
            .chain(self.clients.iter().map(|f| f.missing))
            .any(|m| m == Missing::Held)
    }

    /// Gives up on the missing files still held: they read as empty from now on (until they
    /// come back). Their sources, to reload, and the servers they held.
    pub fn expire_missing(&mut self) -> (Vec<FileSource>, Vec<String>) {
        let mut sources = Vec::new();
        let mut servers = Vec::new();
        for file in &mut self.settings {
            if let Some(held) = file.expire_missing() {
                sources.push(file.source());
                servers.extend(held);
            }
        }
        if let Some(held) = self.mcp_json.as_mut().and_then(JsonFile::expire_missing) {
            sources.push(FileSource::McpJson);
            servers.extend(held);
        }
        for file in &mut self.clients {
            if let Some(held) = file.expire_missing() {
                sources.push(file.source());
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
    /// as JSON (an editor's rename-save, or the last write of an in-place one). Bounded and
    /// never waiting, like every read of an input.
    pub fn complete(&self, source: &FileSource) -> bool {
        if let Some(file) = self.clients.iter().find(|f| &f.source() == source) {
            return file.complete();
        }
        let path = match source {
            FileSource::Settings(_) => self
                .settings
                .iter()
                .find(|f| &f.source() == source)
                .map(|f| f.path.clone()),
            FileSource::McpJson => Some(self.paths.mcp_json.clone()),
            FileSource::Approvals => Some(self.paths.approvals.clone()),
            FileSource::McpConfig(path) => Some(PathBuf::from(path)),
            FileSource::LspFile(_) => self
                .lsp_user
                .iter()
                .chain([&self.lsp_project])
                .find(|f| &f.source() == source)
                .map(|f| f.path.clone()),
            FileSource::LspApprovals => Some(self.paths.lsp_approvals.clone()),
            FileSource::DevWatch(_) => None, // a server's source (dev mode), not an input
        };
        path.is_some_and(|path| {
            matches!(read_text(&path), Ok(Some(text))
                if !text.trim().is_empty() && mcp_reconcile_kernel::json::parse_jsonc(&text).is_ok())
        })
    }

    fn snapshot(&mut self) -> Snapshot {
        let mut errors = Vec::new();
        // Each layer as used, as its file wrote it (what a review shows: `$VAR`s of the
        // project-controlled ones not expanded), and the file it came from.
        let mut layers = Vec::new();
        let mut written_layers = Vec::new();
        let mut files: Vec<PathBuf> = Vec::new();
        let mut push = |source: LayerSource, servers: Servers, written: Servers, file: PathBuf| {
            let layer = |servers| Layer {
                source,
                servers,
                extension: None,
                from_workspace: false,
            };
            layers.push(layer(servers));
            written_layers.push(layer(written));
            files.push(file);
        };
        for file in &self.settings {
            errors.extend(file.errors());
            let servers = file.content().servers;
            let written = if file.kind == LayerSource::Workspace {
                file.written()
            } else {
                servers.clone()
            };
            push(file.kind, servers, written, file.path.clone());
        }
        if let Some(mcp_json) = &self.mcp_json {
            errors.extend(mcp_json.errors());
            push(
                LayerSource::Project,
                mcp_json.servers(),
                mcp_json.written(),
                mcp_json.kind.label(),
            );
        }
        let client = clients::Admission::of(&self.clients, &mut errors);
        for (file, content) in &client.read {
            for (source, servers, written) in &content.layers {
                push(*source, servers.clone(), written.clone(), file.clone());
            }
        }
        for config in &self.cli_configs {
            errors.extend(config.errors());
            push(
                LayerSource::CliConfig,
                config.servers(),
                config.servers(),
                config.kind.label(),
            );
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
        files.push(frozen.current.file.clone().unwrap_or_default());
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
        let gateways = own_gateway::drop_own_entries(
            &mut layers,
            &mut written_layers,
            &files,
            self.env.vars.get("PATH").map(String::as_str),
            &self.env.cwd,
            &mut errors,
        );
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

        // An allow rule naming the installed gateway is there so that the client starts only
        // the gateway; it does not narrow what the gateway reaches.
        let mut lists = lists;
        let mut client_policy = client.policy;
        if !gateways.is_empty() {
            lists.allowed = without_gateways(lists.allowed.take(), |p| gateways.contains(p));
            if let Some(policy) = &mut client_policy {
                policy.allowed = without_gateways(
                    policy.allowed.take(),
                    |rule| matches!(rule, PolicyRule::Name(n) if gateways.contains(n)),
                );
            }
        }
        let (mut approvals, problems) = self
            .approvals
            .clone()
            .unwrap_or_else(|| (Approvals::empty(), Vec::new()));
        // The client's own rejections of project entries hold here too (SPEC §15): in memory
        // only, as a rejection of the entry as it is now — the approvals file is not written.
        let assembled = mcp_reconcile_kernel::assemble(&layers).servers;
        for name in &client.rejected {
            if let Some(config) = assembled.get(name).filter(|c| c.is_gated()) {
                approvals.record(&self.project_root, name, config, Decision::Rejected);
            }
        }
        errors.extend(problems.into_iter().map(|problem| InputError {
            file: self.store.path().to_path_buf(),
            message: format!(
                "{problem} — every server from .mcp.json or workspace settings stays pending \
                 until it is fixed; repair or delete the file (the next approval keeps a copy \
                 as .bak)"
            ),
        }));

        let (lsp, lsp_written, lsp_approvals) = lsp::lsp_part(
            self.lsp_user.as_ref(),
            &self.lsp_project,
            self.lsp_approvals.as_ref(),
            self.lsp_store.path(),
            &mut errors,
        );
        Snapshot {
            lsp_json: self.paths.lsp_json.clone(),
            lsp,
            lsp_written,
            lsp_approvals,
            layers,
            written_layers,
            mcp_json: self.paths.mcp_json.clone(),
            workspace_settings: self.paths.workspace.clone(),
            client_policy,
            client_disabled: client.disabled,
            client_approved: if client.approve_all {
                vec!["*".to_owned()]
            } else {
                client.approved_by_name
            },
            lists,
            cli_allowed: self.cli_allowed.clone(),
            approvals,
            project_root: self.project_root.clone(),
            trusted: self.trusted,
            yolo: self.yolo,
            errors,
            oauth_tokens: self.paths.oauth_tokens.clone(),
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

/// `list` without the items `gateway` says name the installed gateway; a list that named only
/// the gateway is no list at all.
fn without_gateways<T>(list: Option<Vec<T>>, gateway: impl Fn(&T) -> bool) -> Option<Vec<T>> {
    let list = list?;
    if list.is_empty() {
        return Some(list);
    }
    let kept: Vec<T> = list.into_iter().filter(|item| !gateway(item)).collect();
    (!kept.is_empty()).then_some(kept)
}

/// Whether two paths name the same file (lexically, or by real path when
/// both exist).
fn same_file(a: &Path, b: &Path) -> bool {
    a == b || matches!((a.canonicalize(), b.canonicalize()), (Ok(x), Ok(y)) if x == y)
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
