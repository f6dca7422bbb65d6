//! The TypeScript shape of the kernel's JSON API (SPEC §10), as Rust types.
//!
//! These types exist to *describe*: `tsify` derives a TypeScript declaration
//! from each one into the generated `pkg/mcp_reconcile_wasm.d.ts`, which is
//! the only place the TypeScript types come from. Values never pass through
//! them — the facade hands JSON text to the kernel as it is, so nothing here
//! can change a result. They are kept honest by `tests/api_types.rs`, which
//! deserializes every conformance vector's request and every result the
//! kernel gives for it into these types.
//!
//! JSON `null` and an absent field are the same to the kernel wherever SPEC
//! says "absent or null"; those fields are typed `T | null` and optional.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tsify::Tsify;

/// Any JSON value.
type Json = Value;

/// Transport kind of a server entry (SPEC §1).
#[derive(Tsify, Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Transport {
    /// `command`: a child process over stdio.
    Stdio,
    /// `httpUrl`: streamable HTTP.
    Http,
    /// `url`: legacy SSE.
    Sse,
    /// `tcp`: websocket.
    Websocket,
    /// `type: "sdk"`: an in-process server.
    Sdk,
    /// No transport field.
    Unknown,
}

/// Provenance stamp of a gated or system entry (SPEC §3.1).
#[derive(Tsify, Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Scope {
    /// From `.mcp.json` (gated: needs approval).
    Project,
    /// From workspace settings (gated: needs approval).
    Workspace,
    /// From system settings.
    System,
}

/// The known fields of a server entry (SPEC §1).
///
/// Field types are what the entry *should* hold, stated in each field's
/// docs; they are typed `unknown` because the kernel passes entries through
/// as written (a file may say `"command": 5`), so a host checks a field's
/// type before it uses it.
#[derive(Tsify, Serialize, Deserialize, Debug, Clone, Default)]
#[serde(rename_all = "camelCase")]
pub struct ServerFields {
    /// Executable of a stdio server (a string).
    #[tsify(optional, type = "unknown")]
    #[serde(default)]
    pub command: Option<Json>,
    /// Its arguments, in order (strings).
    #[tsify(optional, type = "unknown")]
    #[serde(default)]
    pub args: Option<Json>,
    /// Its environment additions (string values).
    #[tsify(optional, type = "unknown")]
    #[serde(default)]
    pub env: Option<Json>,
    /// Its working directory (a string).
    #[tsify(optional, type = "unknown")]
    #[serde(default)]
    pub cwd: Option<Json>,
    /// Legacy SSE endpoint (a string).
    #[tsify(optional, type = "unknown")]
    #[serde(default)]
    pub url: Option<Json>,
    /// Streamable HTTP endpoint (a string).
    #[tsify(optional, type = "unknown")]
    #[serde(default)]
    pub http_url: Option<Json>,
    /// HTTP / SSE headers (string values).
    #[tsify(optional, type = "unknown")]
    #[serde(default)]
    pub headers: Option<Json>,
    /// Websocket address (a string).
    #[tsify(optional, type = "unknown")]
    #[serde(default)]
    pub tcp: Option<Json>,
    /// Tool-call timeout in ms (a number).
    #[tsify(optional, type = "unknown")]
    #[serde(default)]
    pub timeout: Option<Json>,
    /// Skip tool-call confirmation (a boolean; session view only).
    #[tsify(optional, type = "unknown")]
    #[serde(default)]
    pub trust: Option<Json>,
    /// Only these tools (strings; an entry `name(...)` names the tool `name`).
    #[tsify(optional, type = "unknown")]
    #[serde(default)]
    pub include_tools: Option<Json>,
    /// Never these tools (strings); beats `includeTools`.
    #[tsify(optional, type = "unknown")]
    #[serde(default)]
    pub exclude_tools: Option<Json>,
    /// Cosmetic (a string).
    #[tsify(optional, type = "unknown")]
    #[serde(default)]
    pub description: Option<Json>,
    /// The extension that contributed the entry (a string).
    #[tsify(optional, type = "unknown")]
    #[serde(default)]
    pub extension_name: Option<Json>,
    /// OAuth settings: `{enabled, clientId, clientSecret, authorizationUrl, tokenUrl,
    /// scopes, audiences, redirectUri, tokenParamName, registrationUrl}`; counts only with
    /// `enabled: true`.
    #[tsify(optional, type = "unknown")]
    #[serde(default)]
    pub oauth: Option<Json>,
    /// Auth provider (a string).
    #[tsify(optional, type = "unknown")]
    #[serde(default)]
    pub auth_provider_type: Option<Json>,
    /// Auth audience (a string).
    #[tsify(optional, type = "unknown")]
    #[serde(default)]
    pub target_audience: Option<Json>,
    /// Auth service account (a string).
    #[tsify(optional, type = "unknown")]
    #[serde(default)]
    pub target_service_account: Option<Json>,
    /// `"sdk"` = an in-process server; Claude-style kinds are normalized away.
    #[tsify(optional, type = "unknown")]
    #[serde(default, rename = "type")]
    pub kind: Option<Json>,
    /// Handshake cap in ms (a number; clamped to [100, 300000]).
    #[tsify(optional, type = "unknown")]
    #[serde(default)]
    pub discovery_timeout_ms: Option<Json>,
    /// Provenance stamp set by `assemble` and `parseMcpJson`.
    #[tsify(optional)]
    #[serde(default)]
    pub scope: Option<Scope>,
}

/// One server entry under its name: the known fields plus any other keys,
/// which are preserved and feed the approval hash. `scope` is stamped by
/// assembly, never trusted from a file.
#[derive(Tsify, Serialize, Deserialize, Debug, Clone, Default)]
pub struct ServerConfig {
    #[serde(flatten)]
    pub known: ServerFields,
    /// Unknown keys, preserved.
    #[serde(flatten)]
    #[tsify(type = "Record<string, unknown>")]
    pub other: BTreeMap<String, Json>,
}

/// Server entries by name, in map order.
#[derive(Tsify, Serialize, Deserialize, Debug, Clone, Default)]
#[serde(transparent)]
pub struct Servers(pub BTreeMap<String, ServerConfig>);

/// Server names.
#[derive(Tsify, Serialize, Deserialize, Debug, Clone, Default)]
#[serde(transparent)]
pub struct Names(pub Vec<String>);

/// Admission inputs (SPEC §4). A field that is absent or `null` is not set;
/// `allowed: []` and `cap: []` deny all.
#[derive(Tsify, Serialize, Deserialize, Debug, Clone, Default)]
#[serde(deny_unknown_fields)]
pub struct Gating {
    /// Name patterns that are never admitted.
    #[tsify(optional, type = "string[] | null")]
    #[serde(default)]
    pub excluded: Option<Vec<String>>,
    /// Name patterns the settings allow (not set = all).
    #[tsify(optional, type = "string[] | null")]
    #[serde(default)]
    pub allowed: Option<Vec<String>>,
    /// The launch flag's upper bound (not set = none).
    #[tsify(optional, type = "string[] | null")]
    #[serde(default)]
    pub cap: Option<Vec<String>>,
    /// The workspace settings' own `mcp.allowed`: it only narrows (not set = no narrowing).
    #[tsify(optional, type = "string[] | null")]
    #[serde(default, rename = "workspaceAllowed")]
    pub workspace_allowed: Option<Vec<String>>,
    /// Gated servers not approved yet (exact names).
    #[tsify(optional, type = "string[] | null")]
    #[serde(default)]
    pub pending: Option<Vec<String>>,
}

/// The merged `mcp.allowed` / `mcp.excluded` lists of the settings files.
#[derive(Tsify, Serialize, Deserialize, Debug, Clone, Default)]
#[serde(deny_unknown_fields)]
pub struct McpLists {
    #[tsify(optional, type = "string[] | null")]
    #[serde(default)]
    pub allowed: Option<Vec<String>>,
    #[tsify(optional, type = "string[] | null")]
    #[serde(default)]
    pub excluded: Option<Vec<String>>,
    /// The workspace settings' own `mcp.allowed` (only narrows, SPEC §3.3).
    #[tsify(optional, type = "string[] | null")]
    #[serde(default, rename = "workspaceAllowed")]
    pub workspace_allowed: Option<Vec<String>>,
}

/// A user's decision about one gated server's config (SPEC §5).
#[derive(Tsify, Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Decision {
    Approved,
    Rejected,
}

/// One stored approval record.
#[derive(Tsify, Serialize, Deserialize, Debug, Clone)]
pub struct ApprovalRecord {
    /// `approvalHash` of the config the decision was about.
    pub hash: String,
    pub status: Decision,
}

/// The approvals file: project root → server name → record. A malformed
/// record counts as no record.
#[derive(Tsify, Serialize, Deserialize, Debug, Clone, Default)]
#[serde(transparent)]
pub struct Approvals(
    #[tsify(type = "Record<string, Record<string, ApprovalRecord>>")] pub BTreeMap<String, Json>,
);

/// Approval state of a gated server.
#[derive(Tsify, Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum ApprovalState {
    Approved,
    Rejected,
    Pending,
}

/// Why a server is not connected, or why a plan skips or drops it.
#[derive(Tsify, Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
pub enum Reason {
    Removed,
    NotAllowed,
    Excluded,
    PendingApproval,
    Rejected,
    NoTransport,
    BackingOff,
    CrashLoop,
    UntrustedFolder,
    UnsupportedTransport,
}

/// A configuration layer kind, lowest precedence first (SPEC §3.1).
#[derive(Tsify, Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub enum Source {
    Extension,
    SystemDefaults,
    User,
    Project,
    Workspace,
    System,
    Session,
    CliConfig,
    Runtime,
    ServerCommand,
}

/// One configuration layer.
#[derive(Tsify, Serialize, Deserialize, Debug, Clone)]
#[serde(deny_unknown_fields)]
pub struct Layer {
    pub source: Source,
    pub servers: Servers,
    /// The contributing extension (`source: "extension"` only).
    #[tsify(optional)]
    #[serde(default)]
    pub extension: Option<String>,
    /// `"workspace"` on the `serverCommand` layer when `mcp.serverCommand`
    /// came from the workspace settings (its server is then gated).
    #[tsify(optional, type = "\"workspace\" | null")]
    #[serde(default)]
    pub scope: Option<String>,
}

/// State of a live connection as the host reports it.
#[derive(Tsify, Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub enum Status {
    Connecting,
    Connected,
    Failed,
    Disconnected,
}

/// One live connection: the config it was started with and how it is doing.
#[derive(Tsify, Serialize, Deserialize, Debug, Clone)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OnlineEntry {
    pub config: ServerConfig,
    pub status: Status,
    /// Consecutive failures.
    #[tsify(optional)]
    #[serde(default)]
    pub attempts: Option<f64>,
    /// When a failed server may be retried (ms, the host's clock).
    #[tsify(optional)]
    #[serde(default)]
    pub retry_at: Option<f64>,
    #[tsify(optional)]
    #[serde(default)]
    pub crash_loop: Option<bool>,
}

/// Live connections by server name.
#[derive(Tsify, Serialize, Deserialize, Debug, Clone, Default)]
#[serde(transparent)]
pub struct Online(pub BTreeMap<String, OnlineEntry>);

/// What identifies a connection: its session key or its connection id.
#[derive(Tsify, Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub enum Mode {
    Session,
    Pool,
}

/// One step of a plan (SPEC §6).
#[derive(Tsify, Serialize, Deserialize, Debug, Clone, PartialEq)]
#[serde(tag = "action", rename_all = "camelCase", deny_unknown_fields)]
pub enum PlanAction {
    /// Start a server that is not online.
    Connect { name: String, to: String },
    /// Stop and start again with the new config; purge its tools first.
    Reconnect {
        name: String,
        from: String,
        to: String,
        changed: Vec<String>,
    },
    /// Try a failed or disconnected server again.
    Retry { name: String, attempt: f64 },
    /// Stop a server; purge its tools first.
    Disconnect { name: String, reason: Reason },
    /// Leave a healthy server alone.
    Keep { name: String },
    /// Do not start (or restart) a server.
    Skip { name: String, reason: Reason },
    /// Nothing at all happens (untrusted folder).
    Noop { reason: Reason },
}

/// A plan: one action per server name in desired ∪ online.
#[derive(Tsify, Serialize, Deserialize, Debug, Clone)]
#[serde(deny_unknown_fields)]
pub struct Plan {
    pub actions: Vec<PlanAction>,
}

/// The servers, gating and removed names a host last adopted.
#[derive(Tsify, Serialize, Deserialize, Debug, Clone)]
#[serde(deny_unknown_fields)]
pub struct ReloadState {
    #[tsify(type = "Servers | null")]
    pub servers: Option<Servers>,
    pub gating: Gating,
    #[tsify(optional)]
    #[serde(default)]
    pub removed: Option<Vec<String>>,
}

/// Error classes of a failed request.
#[derive(Tsify, Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum ErrorKind {
    InvalidJson,
    InvalidRequest,
    UnknownOp,
    InvalidConfig,
}

/// A failed request: what kind of failure, and a sentence naming the culprit.
#[derive(Tsify, Serialize, Deserialize, Debug, Clone)]
#[serde(deny_unknown_fields)]
pub struct KernelError {
    pub kind: ErrorKind,
    pub message: String,
}

// Requests: each op's fields besides `op` (SPEC §10).

#[derive(Tsify, Serialize, Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct ConfigRequest {
    pub config: ServerConfig,
}

#[derive(Tsify, Serialize, Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct NamedConfigRequest {
    pub name: String,
    pub config: ServerConfig,
}

#[derive(Tsify, Serialize, Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct ServersEqualRequest {
    #[tsify(type = "Servers | null")]
    pub a: Option<Servers>,
    #[tsify(type = "Servers | null")]
    pub b: Option<Servers>,
}

#[derive(Tsify, Serialize, Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct GatingEqualRequest {
    pub a: Gating,
    pub b: Gating,
}

#[derive(Tsify, Serialize, Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct MatchPatternRequest {
    pub pattern: String,
    pub name: String,
}

#[derive(Tsify, Serialize, Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct ParseMcpJsonRequest {
    pub text: String,
    /// Variables for `$VAR` / `${VAR}` expansion (`process.env` fits); the
    /// kernel never reads the real environment.
    #[tsify(optional, type = "Record<string, string | undefined>")]
    #[serde(default)]
    pub env: Option<BTreeMap<String, String>>,
    /// Expand variables (default true; false in yolo mode).
    #[tsify(optional)]
    #[serde(default)]
    pub expand: Option<bool>,
}

#[derive(Tsify, Serialize, Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct ParseSettingsRequest {
    pub text: String,
    /// Variables for `$VAR` / `${VAR}` expansion in every string value.
    #[tsify(optional, type = "Record<string, string | undefined>")]
    #[serde(default)]
    pub env: Option<BTreeMap<String, String>>,
}

#[derive(Tsify, Serialize, Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct AssembleRequest {
    pub layers: Vec<Layer>,
}

#[derive(Tsify, Serialize, Deserialize, Debug)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GatingRequest {
    pub servers: Servers,
    pub settings: McpLists,
    /// Occurrences of the `--allowed-mcp-server-names` launch flag.
    #[tsify(optional, type = "string[] | null")]
    #[serde(default)]
    pub cli_allowed: Option<Vec<String>>,
    /// No decisions when absent or `null`.
    #[tsify(optional, type = "Approvals | null")]
    #[serde(default)]
    pub approvals: Option<Approvals>,
    pub project_root: String,
    /// Approval gate off: no `pending`.
    #[tsify(optional)]
    #[serde(default)]
    pub yolo: Option<bool>,
}

#[derive(Tsify, Serialize, Deserialize, Debug)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ApprovalStateRequest {
    /// No decisions when absent or `null`.
    #[tsify(optional, type = "Approvals | null")]
    #[serde(default)]
    pub approvals: Option<Approvals>,
    pub project_root: String,
    pub name: String,
    pub config: ServerConfig,
}

#[derive(Tsify, Serialize, Deserialize, Debug)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GatedServersRequest {
    pub servers: Servers,
    pub approvals: Approvals,
    pub project_root: String,
}

#[derive(Tsify, Serialize, Deserialize, Debug)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct UnavailableReasonRequest {
    pub name: String,
    pub merged: Servers,
    pub gating: Gating,
    /// Names removed during this session.
    pub removed: Vec<String>,
    #[tsify(optional)]
    #[serde(default)]
    pub approvals: Option<Approvals>,
    #[tsify(optional)]
    #[serde(default)]
    pub project_root: Option<String>,
}

#[derive(Tsify, Serialize, Deserialize, Debug)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ToolNotFoundRequest {
    /// `mcp__<server>__<tool>`.
    pub tool: String,
    /// Absent or `null` reads as `{}`, as do `gating` and `removed`.
    #[tsify(optional, type = "Servers | null")]
    #[serde(default)]
    pub merged: Option<Servers>,
    #[tsify(optional, type = "Gating | null")]
    #[serde(default)]
    pub gating: Option<Gating>,
    #[tsify(optional, type = "string[] | null")]
    #[serde(default)]
    pub removed: Option<Vec<String>>,
    #[tsify(optional)]
    #[serde(default)]
    pub approvals: Option<Approvals>,
    #[tsify(optional)]
    #[serde(default)]
    pub project_root: Option<String>,
}

#[derive(Tsify, Serialize, Deserialize, Debug)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PlanRequest {
    pub desired: Servers,
    pub online: Online,
    pub gating: Gating,
    pub trusted_folder: bool,
    pub mode: Mode,
    /// Milliseconds on the host's clock.
    pub now: f64,
}

#[derive(Tsify, Serialize, Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct SettingsDiffRequest {
    /// A parsed settings object (`null` ≡ `{}`).
    #[tsify(type = "Record<string, unknown> | null")]
    pub old: Json,
    #[tsify(type = "Record<string, unknown> | null")]
    pub new: Json,
}

#[derive(Tsify, Serialize, Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct RestartRequiredRequest {
    /// Dotted settings paths, as `settingsDiff` returns them.
    pub paths: Vec<String>,
    /// Dotted key → requires restart; replaces the default schema.
    #[tsify(optional)]
    #[serde(default)]
    pub schema: Option<BTreeMap<String, bool>>,
}

#[derive(Tsify, Serialize, Deserialize, Debug)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HotReloadRequest {
    pub previous: ReloadState,
    pub layers: Vec<Layer>,
    pub settings: McpLists,
    #[tsify(optional)]
    #[serde(default)]
    pub cli_allowed: Option<Vec<String>>,
    pub approvals: Approvals,
    /// Needed unless `yolo` (approvals are read only with the gate on).
    #[tsify(optional)]
    #[serde(default)]
    pub project_root: Option<String>,
    #[tsify(optional)]
    #[serde(default)]
    pub yolo: Option<bool>,
}

#[derive(Tsify, Serialize, Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct BackoffRequest {
    /// Consecutive failures.
    pub attempts: f64,
    /// Per-server seed, an unsigned integer ≤ 2^53.
    pub seed: f64,
}

// Language servers (SPEC §14).

/// A `.lsp.json` entry (SPEC §14.1). Known fields are typed for editors;
/// unknown fields are kept (they count in the approval hash).
#[derive(Tsify, Serialize, Deserialize, Debug, Clone)]
#[serde(rename_all = "camelCase")]
pub struct LspEntry {
    #[tsify(optional)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<Json>,
    #[tsify(optional, type = "string[]")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args: Option<Json>,
    #[tsify(optional, type = "Record<string, string>")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub env: Option<Json>,
    /// `"stdio"` (default), `"tcp"` or `"socket"`.
    #[tsify(optional, type = "\"stdio\" | \"tcp\" | \"socket\"")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub transport: Option<Json>,
    /// A path, or `{host, port}`.
    #[tsify(optional, type = "string | { host: string; port: number }")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub socket: Option<Json>,
    #[tsify(optional, type = "string")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace_folder: Option<Json>,
    #[tsify(optional, type = "unknown")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initialization_options: Option<Json>,
    /// Pushed live with `workspace/didChangeConfiguration`.
    #[tsify(optional, type = "Record<string, unknown>")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub settings: Option<Json>,
    /// `".ext"` → language id; routes files (live).
    #[tsify(optional, type = "Record<string, string>")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub extension_to_language: Option<Json>,
    /// `"user"` or `"project"` (stamped by the host; a file's own is dropped).
    #[tsify(optional, type = "\"user\" | \"project\"")]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<Json>,
    /// Everything else: `startupTimeout`, `shutdownTimeout`, `restartOnCrash`,
    /// `maxRestarts`, `trustRequired`, unknown keys.
    #[serde(flatten)]
    #[tsify(type = "Record<string, unknown>")]
    pub other: BTreeMap<String, Json>,
}

/// Language-server entries by name, in map order.
#[derive(Tsify, Serialize, Deserialize, Debug, Clone, Default)]
#[serde(transparent)]
pub struct LspServers(pub BTreeMap<String, LspEntry>);

/// One live language server: the entry it was started with and how it is doing.
#[derive(Tsify, Serialize, Deserialize, Debug, Clone)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LspOnlineEntry {
    pub config: LspEntry,
    pub status: Status,
    #[tsify(optional)]
    #[serde(default)]
    pub attempts: Option<f64>,
    #[tsify(optional)]
    #[serde(default)]
    pub retry_at: Option<f64>,
    #[tsify(optional)]
    #[serde(default)]
    pub crash_loop: Option<bool>,
}

#[derive(Tsify, Serialize, Deserialize, Debug)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ParseLspJsonRequest {
    pub text: String,
    /// Variables for `$VAR` / `${VAR}` expansion.
    #[tsify(optional, type = "Record<string, string | undefined>")]
    #[serde(default)]
    pub env: Option<BTreeMap<String, String>>,
    /// Expand variables (default true).
    #[tsify(optional)]
    #[serde(default)]
    pub expand: Option<bool>,
    /// Stamp every entry with this scope (default: none).
    #[tsify(optional, type = "\"user\" | \"project\"")]
    #[serde(default)]
    pub scope: Option<String>,
    /// Checks an absolute `workspaceFolder` against it.
    #[tsify(optional)]
    #[serde(default)]
    pub project_root: Option<String>,
}

#[derive(Tsify, Serialize, Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct LspSeedIdRequest {
    pub name: String,
    pub config: LspEntry,
}

#[derive(Tsify, Serialize, Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct LspApprovalHashRequest {
    pub config: LspEntry,
}

#[derive(Tsify, Serialize, Deserialize, Debug)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct LspPlanRequest {
    /// Every entry carries `scope`: `"user"` or `"project"`.
    pub desired: LspServers,
    pub online: BTreeMap<String, LspOnlineEntry>,
    #[tsify(optional, type = "Approvals | null")]
    #[serde(default)]
    pub approvals: Option<Approvals>,
    pub project_root: String,
    pub trusted_folder: bool,
    /// Milliseconds on the host's clock.
    pub now: f64,
}

/// One connection's supervision state (SPEC §9), as `supervise` keeps it.
#[derive(Tsify, Serialize, Deserialize, Debug, Clone)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SupervisionState {
    pub status: Status,
    /// Consecutive failures.
    #[tsify(optional)]
    #[serde(default)]
    pub attempts: Option<f64>,
    /// When a failed connection may be retried (ms, the host's clock).
    #[tsify(optional, type = "number | null")]
    #[serde(default)]
    pub retry_at: Option<f64>,
    #[tsify(optional)]
    #[serde(default)]
    pub crash_loop: Option<bool>,
    /// The transport can never work here.
    #[tsify(optional)]
    #[serde(default)]
    pub unsupported: Option<bool>,
    /// Since when it has been up (for the 5-minute healthy reset).
    #[tsify(optional, type = "number | null")]
    #[serde(default)]
    pub healthy_since: Option<f64>,
    #[tsify(optional, type = "string | null")]
    #[serde(default)]
    pub last_error: Option<String>,
}

/// What happened to a supervised connection.
#[derive(Tsify, Serialize, Deserialize, Debug, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "camelCase")]
pub enum SupervisionEvent {
    /// A start begins (a retry carries the failure count).
    Start,
    Connected,
    /// A start failed (`error`, `unsupported`?).
    Failed,
    /// A live connection ended on its own (`error`).
    Closed,
    /// Manual reconnect or reload: failures forgotten.
    Forgive,
    /// Nobody may run it: no retry timer.
    Park,
    /// Nothing happened: only the view at `now`.
    View,
}

#[derive(Tsify, Serialize, Deserialize, Debug)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SuperviseRequest {
    /// The state so far (absent: a fresh connection).
    #[tsify(optional)]
    #[serde(default)]
    pub supervision: Option<SupervisionState>,
    pub event: SupervisionEvent,
    /// Milliseconds on the host's clock.
    pub now: f64,
    /// Per-connection jitter seed, an unsigned integer ≤ 2^53.
    #[tsify(optional)]
    #[serde(default)]
    pub seed: Option<f64>,
    #[tsify(optional)]
    #[serde(default)]
    pub error: Option<String>,
    #[tsify(optional)]
    #[serde(default)]
    pub unsupported: Option<bool>,
}

// Results: each op's `ok` value (SPEC §10).

/// `"<name>::<16 hex>"`.
#[derive(Tsify, Serialize, Deserialize, Debug)]
#[serde(transparent)]
pub struct ConnectionId(pub String);

/// Connection id + `|` + the session view.
#[derive(Tsify, Serialize, Deserialize, Debug)]
#[serde(transparent)]
pub struct SessionKey(pub String);

/// 64 lowercase hex digits.
#[derive(Tsify, Serialize, Deserialize, Debug)]
#[serde(transparent)]
pub struct ApprovalHash(pub String);

/// Whether the two values are equal under the op's rules.
#[derive(Tsify, Serialize, Deserialize, Debug)]
#[serde(transparent)]
pub struct Equal(pub bool);

/// Whether the name matches the pattern.
#[derive(Tsify, Serialize, Deserialize, Debug)]
#[serde(transparent)]
pub struct Matches(pub bool);

#[derive(Tsify, Serialize, Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct ParsedMcpJson {
    pub servers: Servers,
    /// One human-readable sentence per problem.
    pub errors: Vec<String>,
}

/// A parsed settings file.
#[derive(Tsify, Serialize, Deserialize, Debug)]
#[serde(transparent)]
pub struct Settings(#[tsify(type = "Record<string, unknown>")] pub BTreeMap<String, Json>);

#[derive(Tsify, Serialize, Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct Assembled {
    pub servers: Servers,
    /// The layer each winning entry came from.
    pub sources: BTreeMap<String, Source>,
}

/// `null` when nothing keeps the server from being connected.
#[derive(Tsify, Serialize, Deserialize, Debug)]
#[serde(transparent)]
pub struct UnavailableReason(#[tsify(type = "Reason | null")] pub Option<Reason>);

/// A sentence saying why the tool is missing and what to do, or `null`
/// for a name that is not `mcp__<server>__<tool>`.
#[derive(Tsify, Serialize, Deserialize, Debug)]
#[serde(transparent)]
pub struct ToolNotFoundMessage(#[tsify(type = "string | null")] pub Option<String>);

/// Changed settings paths, dotted, sorted.
#[derive(Tsify, Serialize, Deserialize, Debug)]
#[serde(transparent)]
pub struct SettingsPaths(pub Vec<String>);

#[derive(Tsify, Serialize, Deserialize, Debug)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct RestartRequirement {
    /// Every path requires a restart (true for no paths).
    pub suppressed: bool,
    pub per_path: BTreeMap<String, bool>,
}

#[derive(Tsify, Serialize, Deserialize, Debug)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HotReloadOutcome {
    /// Whether the host should reconcile (and adopt `next`).
    pub reconcile: bool,
    pub next: ReloadState,
    /// Newly askable gated servers that pass the allow lists.
    pub promptable: Vec<String>,
    /// Whether to ask the user about `promptable`.
    pub approval_event: bool,
}

#[derive(Tsify, Serialize, Deserialize, Debug)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct BackoffDelay {
    pub delay_ms: f64,
    pub crash_loop: bool,
}

/// What `parseLspJson` read.
#[derive(Tsify, Serialize, Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct ParsedLspJson {
    pub servers: LspServers,
    /// One sentence per invalid entry (name, field, what to do).
    pub errors: Vec<String>,
}

/// `"<name>::<16 hex>"`: the launch seed's id (SPEC §14.2).
#[derive(Tsify, Serialize, Deserialize, Debug)]
#[serde(transparent)]
pub struct LspSeedId(pub String);

/// One step of a language-server plan (SPEC §14.2).
#[derive(Tsify, Serialize, Deserialize, Debug, Clone, PartialEq)]
#[serde(tag = "action", rename_all = "camelCase", deny_unknown_fields)]
pub enum LspPlanAction {
    /// Start a server that is not online.
    Connect { name: String, to: String },
    /// A seed field changed: stop the process and start a new one.
    Restart {
        name: String,
        from: String,
        to: String,
        changed: Vec<String>,
    },
    /// Only live fields changed: push the settings, keep the process.
    Reconfigure { name: String, changed: Vec<String> },
    /// Try a failed or disconnected server again.
    Retry { name: String, attempt: f64 },
    /// Stop a server.
    Disconnect { name: String, reason: Reason },
    /// Leave it running (`pending_approval`: the last approved entry keeps
    /// running while an edit waits for approval).
    Keep {
        name: String,
        #[tsify(optional)]
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<Reason>,
    },
    /// Do not start (or restart) a server.
    Skip { name: String, reason: Reason },
    /// Nothing at all happens (untrusted folder).
    Noop { reason: Reason },
}

/// A language-server plan: one action per name in desired ∪ online.
#[derive(Tsify, Serialize, Deserialize, Debug, Clone)]
#[serde(deny_unknown_fields)]
pub struct LspPlan {
    pub actions: Vec<LspPlanAction>,
}

/// How a supervised connection is shown (`status --json` fields).
#[derive(Tsify, Serialize, Deserialize, Debug, Clone)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SupervisionView {
    pub state: Status,
    /// `backing_off`, `crash_loop` or `unsupported_transport` when failed.
    pub reason: Option<Reason>,
    pub attempts: f64,
    /// Milliseconds until the next retry, or `null`.
    pub retry_in_ms: Option<f64>,
    pub last_error: Option<String>,
}

/// The next supervision state and how to show it.
#[derive(Tsify, Serialize, Deserialize, Debug)]
#[serde(deny_unknown_fields)]
pub struct Supervised {
    pub view: SupervisionView,
    pub supervision: SupervisionState,
}
