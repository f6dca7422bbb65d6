//! [`Snapshot`]: what the inputs hold at one moment, ready for the kernel.

use std::path::{Path, PathBuf};

use mcp_reconcile_kernel::gating::{compute_gating, gating_with_pending};
use mcp_reconcile_kernel::lsp::LspServers;
use mcp_reconcile_kernel::{
    assemble, Approvals, Assembled, Gating, Layer, LayerSource, McpLists, ServerConfig, Servers,
};

use super::InputError;

/// A client's approval of a project entry by name (Claude Code's `enabledMcpjsonServers` or
/// `enableAllProjectMcpServers`): what a review says of it, never an approval here. Who wrote
/// it matters: the repository's own `.claude/settings.json` can name its own servers.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct ClientApproval {
    /// The server it names; `"*"` for every project entry.
    pub name: String,
    /// The file that says so.
    pub file: PathBuf,
    /// The key that says so (`enabledMcpjsonServers`, `enableAllProjectMcpServers`).
    pub key: String,
    /// Who could have written that file.
    pub written_by: ApprovalWriter,
}

/// Who could have written a file that approves by name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub enum ApprovalWriter {
    /// The user's own files (`~/.claude.json`, `~/.claude/settings.json`) or the
    /// administrator's.
    User,
    /// The repository: its shared `.claude/settings.json`.
    Repository,
    /// The project's `.claude/settings.local.json`: Claude Code writes it when the user
    /// approves there, but it lies in the project, and a downloaded project can bring one.
    ProjectLocal,
}

/// Where the entry of a server in effect comes from ([`Snapshot::origin`]).
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Origin<'a> {
    /// The kind of layer that holds it.
    pub source: LayerSource,
    /// The file it was read from (`None`: a layer of no file, such as a `mcp.serverCommand`
    /// given otherwise).
    pub file: Option<&'a Path>,
    /// The entry as that file wrote it (`$VAR`s of project-controlled files not expanded).
    pub written: &'a ServerConfig,
}

impl Origin<'_> {
    /// Where it comes from as a person reads it: the file, else the layer (`the serverCommand
    /// layer`).
    pub fn place(&self) -> PathBuf {
        self.file.map_or_else(
            || PathBuf::from(format!("the {} layer", self.source.as_str())),
            Path::to_path_buf,
        )
    }
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
    /// The file each of [`Snapshot::layers`] came from, in the same order (a client layout
    /// reads its project servers from several; empty when a layer has no file). Asked
    /// through [`Snapshot::origin`].
    pub layer_files: Vec<PathBuf>,
    /// A client layout's policies (SPEC §15): a server must pass each (see `clients::Admission`).
    pub client_policies: Vec<mcp_reconcile_kernel::policy::Policy>,
    /// Servers a client layout's files switch off by their own entry.
    pub client_disabled: Vec<String>,
    /// Project entries a client file approves by name only, and which file says so: shown in
    /// a review, never an approval here.
    pub client_approved: Vec<ClientApproval>,
    /// `mcp.allowed` / `mcp.excluded` merged over the settings scopes.
    pub lists: McpLists,
    /// `mcp.share` over the settings scopes: the sharing scope of servers without their own
    /// `share`, and the workspace's cap (issue 41).
    pub share: mcp_reconcile_kernel::share::ShareSettings,
    /// `mcp.pinTools` over the settings scopes: the default pinning policy and the workspace's
    /// floor (issue 40).
    pub pin: mcp_reconcile_kernel::pin::PinSettings,
    /// `mcp.lazy` and `mcp.lazyIdleMs` over the settings scopes: whether servers without their
    /// own `lazy` start only when a call needs them, and how long one may idle (issue 41).
    pub lazy: mcp_reconcile_kernel::lazy::LazySettings,
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
    /// The project's `.lsp.json` (where project language servers come from).
    pub lsp_json: PathBuf,
    /// The desired language servers (SPEC §14.1): the user file's entries under the project's
    /// `.lsp.json` (a project entry replaces a user one of the same name), scope stamped.
    pub lsp: LspServers,
    /// [`Snapshot::lsp`] as the files wrote them (`$VAR`s not expanded): what a review shows.
    pub lsp_written: LspServers,
    /// The language-server approval records (SPEC §14.3; empty when missing or malformed).
    pub lsp_approvals: Approvals,
    /// What is broken right now; empty when every input loaded cleanly.
    pub errors: Vec<InputError>,
    /// The OAuth token file this session uses (what a review says about stored logins).
    pub oauth_tokens: crate::auth::TokenFile,
}

impl Snapshot {
    /// What reloading to this snapshot does after `previous` was adopted (the kernel's
    /// [`hot_reload`](mcp_reconcile_kernel::hot_reload::hot_reload) over its layers, gating,
    /// approvals, project root and yolo).
    ///
    /// # Errors
    /// The kernel cannot compare the server maps.
    pub fn hot_reload(
        &self,
        previous: &mcp_reconcile_kernel::hot_reload::Previous,
    ) -> Result<
        mcp_reconcile_kernel::hot_reload::HotReload,
        mcp_reconcile_kernel::json::DeepEqualError,
    > {
        mcp_reconcile_kernel::hot_reload::hot_reload(
            previous,
            &self.layers,
            |servers, pending| Gating {
                blocked: self.blocked(servers),
                ..gating_with_pending(&self.lists, self.cli_allowed.as_deref(), pending)
            },
            &self.approvals,
            &self.project_root,
            self.yolo,
        )
    }

    /// The admission lists for `servers` (SPEC §4), from this snapshot's
    /// settings lists, launch-flag cap, approvals, project root and yolo.
    pub fn gating_for(&self, servers: &Servers) -> Gating {
        Gating {
            blocked: self.blocked(servers),
            ..compute_gating(
                servers,
                &self.lists,
                self.cli_allowed.as_deref(),
                &self.approvals,
                &self.project_root,
                self.yolo,
            )
        }
    }

    /// The servers of `servers` a client layout's own files turn off (its policies, an
    /// entry's own switch), in map order; `None` when there are none.
    fn blocked(&self, servers: &Servers) -> Option<Vec<String>> {
        let blocked: Vec<String> = servers
            .iter()
            .filter(|(name, config)| {
                self.client_disabled.contains(name)
                    || self.client_policies.iter().any(|p| !p.admits(name, config))
            })
            .map(|(name, _)| name.clone())
            .collect();
        (!blocked.is_empty()).then_some(blocked)
    }

    /// The gated servers of `servers` whose approval is rejected, in map order. The kernel's
    /// plan sees only the gating, where they are pending like the undecided ones (SPEC §6);
    /// what a person reads says `rejected` for these.
    pub fn rejected(&self, servers: &Servers) -> Vec<String> {
        servers
            .iter()
            .filter(|(name, config)| {
                config.is_gated()
                    && self.approvals.state(&self.project_root, name, config)
                        == mcp_reconcile_kernel::approvals::ApprovalState::Rejected
            })
            .map(|(name, _)| name.clone())
            .collect()
    }

    /// Where the entry of server `name` in effect comes from: the layer [`assemble`] takes it
    /// from (layers in precedence order, the last holder wins; an extension only fills a name
    /// no other layer has, first come), that layer's file, and the entry as written there.
    /// The one answer to "which file did this server come from" — what a review names, and
    /// what dev mode says of a server it cannot watch. `None` when no layer holds `name`.
    pub fn origin(&self, name: &str) -> Option<Origin<'_>> {
        let mut order: Vec<usize> = (0..self.layers.len()).collect();
        // Stable: same-kind layers stay in list order, as `assemble` orders them.
        order.sort_by_key(|&i| self.layers[i].source);
        let claimed = |source: LayerSource| {
            source == LayerSource::Extension
                && self
                    .layers
                    .iter()
                    .any(|l| l.source != LayerSource::Extension && l.servers.contains_key(name))
        };
        let mut winner: Option<usize> = None;
        for i in order {
            let layer = &self.layers[i];
            if !layer.servers.contains_key(name) || claimed(layer.source) {
                continue;
            }
            let first_extension = winner.is_none_or(|w| self.layers[w].source != layer.source);
            if layer.source != LayerSource::Extension || first_extension {
                winner = Some(i);
            }
        }
        let i = winner?;
        let layer = &self.layers[i];
        Some(Origin {
            source: layer.source,
            file: self
                .layer_files
                .get(i)
                .map(PathBuf::as_path)
                .filter(|file| !file.as_os_str().is_empty()),
            written: self
                .written_layers
                .get(i)
                .and_then(|written| written.servers.get(name))
                .or_else(|| layer.servers.get(name))?,
        })
    }

    /// The names of the servers in the layers of `source`, in layer and file order (what a
    /// file contributed, before layers are assembled).
    pub fn names_in(&self, source: LayerSource) -> Vec<String> {
        self.layers
            .iter()
            .filter(|l| l.source == source)
            .flat_map(|l| l.servers.keys().cloned())
            .collect()
    }

    /// The desired server map: [`assemble`] over [`Snapshot::layers`].
    pub fn assembled(&self) -> Assembled {
        assemble(&self.layers)
    }

    /// The servers whose entry comes from a project-controlled layer (`.mcp.json`, the
    /// workspace settings): approved to run, but never trusted with another server's
    /// namespace ([`crate::view::pick_resource`]).
    pub fn project_controlled(&self) -> std::collections::HashSet<String> {
        self.assembled()
            .sources
            .iter()
            .filter(|(_, source)| {
                matches!(
                    source,
                    mcp_reconcile_kernel::LayerSource::Project
                        | mcp_reconcile_kernel::LayerSource::Workspace
                )
            })
            .map(|(name, _)| name.clone())
            .collect()
    }
}
