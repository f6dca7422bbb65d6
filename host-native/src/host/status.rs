//! What `status` shows of a session: every configured server's state.

use mcp_reconcile_kernel::approvals::ApprovalState;
use mcp_reconcile_kernel::gating::tool_prefix;
use mcp_reconcile_kernel::plan::{Online, Status};
use mcp_reconcile_kernel::{Gating, Reason, ServerConfig, Transport};
use serde::{Deserialize, Serialize};

use super::catalog::prefix_taken;
use super::{Backend, Host, PrefixOwners};
use crate::inputs::InputError;
use crate::transport::Caller;
use crate::view::tool_enabled;

/// How a server (or language server) shows in `status`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum State {
    /// Being started.
    Connecting,
    /// Up and serving.
    Connected,
    /// Down; see the reason, attempts and when it is retried.
    Failed,
    /// Not running and not wanted to run now.
    Disconnected,
    /// Not started by policy (see the reason).
    Skipped,
    /// A lazy server not running: its last listing is offered, and a request starts it.
    Dormant,
}

impl State {
    /// The `status --json` spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            State::Connecting => "connecting",
            State::Connected => "connected",
            State::Failed => "failed",
            State::Disconnected => "disconnected",
            State::Skipped => "skipped",
            State::Dormant => "dormant",
        }
    }
}

impl From<Status> for State {
    fn from(status: Status) -> State {
        match status {
            Status::Connecting => State::Connecting,
            Status::Connected => State::Connected,
            Status::Failed => State::Failed,
            Status::Disconnected => State::Disconnected,
        }
    }
}

impl std::fmt::Display for State {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl PartialEq<&str> for State {
    fn eq(&self, other: &&str) -> bool {
        self.as_str() == *other
    }
}

/// One server as `status` shows it. Field names are the `status --json`
/// contract (camelCase there).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ServerStatus {
    /// Server name.
    pub name: String,
    /// How it shows.
    pub state: State,
    /// A §10 reason (policy skip or backoff), or `None`.
    pub reason: Option<Reason>,
    /// Approval state for gated servers, `None` otherwise.
    pub approval: Option<ApprovalState>,
    /// Transport kind.
    pub transport: Transport,
    /// Tools offered to clients: the server's own after its `includeTools` / `excludeTools`.
    pub tools: usize,
    /// Prompts registered.
    pub prompts: usize,
    /// Resources registered.
    pub resources: usize,
    /// Process id of a live stdio server.
    pub pid: Option<u32>,
    /// The MCP revision the connection speaks (SPEC §16): `2026-07-28` for a server that
    /// answered `server/discover`, else the version `initialize` agreed on.
    #[serde(default)]
    pub protocol: Option<String>,
    /// How many times this session started the server's process.
    pub spawns: u64,
    /// The scope its process is shared in (`session`, `project`, `user`): a daemon session's
    /// stdio server only.
    #[serde(default)]
    pub share: Option<String>,
    /// How many sessions hold its process (the pool's count): a daemon session's server only.
    #[serde(default)]
    pub sessions: Option<usize>,
    /// Started only when a request needs it, stopped when idle (`lazy`, `mcp.lazy`).
    #[serde(default)]
    pub lazy: bool,
    /// Consecutive failures.
    pub attempts: u32,
    /// The last error, redacted.
    pub last_error: Option<String>,
    /// For a failed server that will be retried: milliseconds until the
    /// retry (0 = due now).
    pub retry_in_ms: Option<u64>,
    /// Its tools and prompts (its own names) withheld because they changed since they were
    /// approved, or are new since (issue 40): they wait for `mcp-reconcile review-tools`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub withheld: Vec<String>,
}

/// One language server as `status` shows it (SPEC §14.4).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LspServerStatus {
    /// Server name.
    pub name: String,
    /// How it shows.
    pub state: State,
    /// A §10 reason, or `None`.
    pub reason: Option<Reason>,
    /// Approval state of a project entry, `None` for the user's own.
    pub approval: Option<ApprovalState>,
    /// Process id of the running server.
    pub pid: Option<u32>,
    /// How many times this session started its process.
    pub spawns: u64,
    /// Consecutive failures.
    pub attempts: u32,
    /// The last error, redacted.
    pub last_error: Option<String>,
    /// Milliseconds until a failed server is retried.
    pub retry_in_ms: Option<u64>,
    /// The file extensions routed to it (`extensionToLanguage`).
    pub extensions: Vec<String>,
    /// `workspace/didChangeConfiguration` pushes the current process received (1 after start).
    pub settings_pushes: u64,
}

/// The answer to [`Control::Status`](crate::host::Control::Status).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct StatusReport {
    /// Every configured server, in map order.
    pub servers: Vec<ServerStatus>,
    /// Every configured language server, in map order (SPEC §14.4).
    pub language_servers: Vec<LspServerStatus>,
    /// What is broken in the inputs right now.
    pub errors: Vec<String>,
    /// The project directory the session reads (approvals are keyed by it); empty before the
    /// first pass has read the files.
    #[serde(default)]
    pub project_root: String,
}

impl ServerStatus {
    /// `name` as policy alone decides it: `skipped` with the reason when the folder is not
    /// trusted or `gating` denies the server (a rejected approval says `rejected`), else
    /// `disconnected` with nothing live — the caller fills in its connection.
    pub(crate) fn by_policy(
        name: &str,
        config: &ServerConfig,
        trusted: bool,
        gating: &Gating,
        approval: Option<ApprovalState>,
    ) -> ServerStatus {
        let mut status = ServerStatus {
            name: name.to_owned(),
            state: State::Disconnected,
            reason: None,
            approval,
            transport: config.transport(),
            tools: 0,
            prompts: 0,
            resources: 0,
            pid: None,
            protocol: None,
            spawns: 0,
            share: None,
            sessions: None,
            lazy: false,
            attempts: 0,
            last_error: None,
            retry_in_ms: None,
            withheld: Vec::new(),
        };
        if !trusted {
            status.state = State::Skipped;
            status.reason = Some(Reason::UntrustedFolder);
        } else if let Some(reason) = gating.denial(name, config) {
            status.state = State::Skipped;
            status.reason = Some(match (reason, approval) {
                (Reason::PendingApproval, Some(ApprovalState::Rejected)) => Reason::Rejected,
                (reason, _) => reason,
            });
        }
        status
    }
}

impl<B: Backend> Host<B> {
    /// The kernel's view of what is online.
    pub(super) fn online(&self) -> Online {
        self.backend.online()
    }

    /// The tools a connected `name` offers (its own names, after its `includeTools` /
    /// `excludeTools`), in the server's order; `None` when it is not connected.
    pub(super) fn server_tool_names(&self, name: &str) -> Option<Vec<String>> {
        let live = self.backend.held(name)?;
        (live.health.status == Status::Connected).then(|| {
            live.catalog
                .tools
                .iter()
                .filter(|t| tool_enabled(live.config, &t.name))
                .map(|t| t.name.to_string())
                .collect()
        })
    }

    /// Status of every configured server (and of live ones no longer
    /// configured, while they shut down).
    pub fn status(&self) -> StatusReport {
        // The prefix owners once for the report, not once per server (quadratic in the number
        // of servers: ~1 ms per status at 50 servers).
        let owners = PrefixOwners::admitted(&self.desired, &self.gating);
        let servers = self
            .desired
            .keys()
            .filter_map(|name| self.status_with(name, &owners))
            .collect();
        let mut errors: Vec<String> = self
            .snapshot
            .as_ref()
            .map(|s| s.errors.iter().map(InputError::to_string).collect())
            .unwrap_or_default();
        errors.extend(self.dev_problems());
        StatusReport {
            servers,
            language_servers: self.lsp.status(),
            errors,
            project_root: self
                .snapshot
                .as_ref()
                .map(|s| s.project_root.clone())
                .unwrap_or_default(),
        }
    }

    /// What the host knows of why qualified tool `tool` is not served when its owner (the
    /// configured server with the longest prefix of it, as SPEC §4 picks it) is admitted but
    /// not connected: failing (retried when, or in a crash loop) or still connecting, with its
    /// last error (the stderr tail of a crash). `None` when the owner is not admitted, is
    /// connected (the tool was renamed), or nothing is known.
    pub(super) fn not_serving(&self, tool: &str) -> Option<String> {
        let owner = self
            .desired
            .keys()
            .filter(|name| !name.is_empty())
            .map(|name| (name, tool_prefix(name).len()))
            .filter(|(name, _)| tool.starts_with(tool_prefix(name).as_str()))
            .fold(None::<(&String, usize)>, |best, (name, len)| match best {
                Some((_, best_len)) if best_len >= len => best,
                _ => Some((name, len)),
            })
            .map(|(name, _)| name)?;
        let status = self.status_of(owner)?;
        let server = format!("server \"{owner}\"");
        let state = match (status.state, status.reason, status.retry_in_ms) {
            (State::Failed, Some(Reason::CrashLoop), _) => format!(
                "{server} keeps crashing and is not restarted until its config changes, \
                 `mcp-reconcile reconnect {owner}` or `mcp-reconcile reload`"
            ),
            (State::Failed, _, Some(ms)) => format!(
                "{server} is backing off, retry in {} s",
                ms.div_ceil(1000).max(1)
            ),
            (State::Failed, _, None) => format!("{server} failed"),
            (State::Connecting, _, _) => format!("{server} is still connecting"),
            _ => return None,
        };
        Some(match status.last_error {
            Some(error) => format!("Tool \"{tool}\" is unavailable: {state}: {error}"),
            None => format!("Tool \"{tool}\" is unavailable: {state}."),
        })
    }

    pub(super) fn status_of(&self, name: &str) -> Option<ServerStatus> {
        self.status_with(name, &PrefixOwners::admitted(&self.desired, &self.gating))
    }

    /// [`Host::status_of`] with the prefix owners of the current servers already computed.
    fn status_with(&self, name: &str, owners: &PrefixOwners) -> Option<ServerStatus> {
        let config = self.desired.get(name)?;
        let snapshot = self.snapshot.as_ref();
        let approval = config.is_gated().then(|| {
            snapshot.map_or(ApprovalState::Pending, |s| {
                s.approvals.state(&s.project_root, name, config)
            })
        });
        let trusted = snapshot.is_none_or(|s| s.trusted);
        let mut status = ServerStatus::by_policy(name, config, trusted, &self.gating, approval);
        status.lazy = self.lazy.is_lazy(name);
        status.withheld = self.withheld_names(name);
        let Some(live) = self.backend.held(name) else {
            if let Some(listing) = self.lazy.listing(name) {
                if status.state == State::Disconnected {
                    // What a client is offered from the kept listing.
                    status.state = State::Dormant;
                    status.tools = listing
                        .tools
                        .iter()
                        .filter(|t| tool_enabled(config, &t.name))
                        .count();
                    status.prompts = listing.prompts.len();
                    status.resources = listing.resources.len();
                }
            }
            return Some(status);
        };
        status.spawns = live.spawns;
        status.share = live.share.map(|share| share.as_str().to_owned());
        status.sessions = live.sessions;
        if status.state == State::Skipped {
            return Some(status);
        }
        let view = live.health.view(self.now());
        status.attempts = view.attempts;
        status.last_error = view.last_error;
        if let Some(owner) = owners.taken_by(name) {
            status.last_error = Some(prefix_taken(name, owner));
        }
        status.state = view.state.into();
        status.reason = view.reason;
        status.retry_in_ms = view.retry_in_ms;
        // Connected, or replaced while the old connection still serves (make before break).
        if live.caller.is_some() {
            // What a client of this session is offered: after `includeTools` / `excludeTools`,
            // without what pinning withholds.
            let offered = self.pinned_listing(name, live.catalog);
            status.tools = offered
                .tools
                .iter()
                .filter(|t| tool_enabled(live.config, &t.name))
                .count();
            status.prompts = offered.prompts.len();
            status.resources = live.catalog.resources.len();
            status.pid = live.pid;
            status.protocol = live.caller.as_ref().and_then(Caller::protocol_version);
        }
        Some(status)
    }
}
