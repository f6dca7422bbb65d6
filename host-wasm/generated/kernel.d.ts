// The kernel's JSON API (SPEC §10), generated from its op table and the Rust
// types its codecs decode into and encode from (mcp_reconcile_kernel::api::typescript).
// Do not edit; refresh with:
//   UPDATE_TYPES=1 cargo test -p mcp-reconcile-wasm --test typescript

/**
 * 64 lowercase hex characters of sha256.
 */
export type ApprovalHash = string;

/**
 * The approval state of one server config under one project root.
 */
export type ApprovalState = "approved" | "rejected" | "pending";

/**
 * `approvalState`: one server entry against the approvals store.
 */
export type ApprovalStateRequest = {
    /**
     * No decisions when absent or `null`.
     */
    approvals?: Approvals | null, projectRoot: string, name: string, config: ServerConfig,
};

/**
 * The approvals file: project root → server name → `{hash, status}`, the `Decision` about
 * the config whose `approvalHash` is `hash`. Any JSON is accepted: a malformed part counts
 * as no decision.
 */
export type Approvals = Record<string, unknown>;

/**
 * `assemble`: the configuration layers, in any order.
 */
export type AssembleRequest = { layers: Array<Layer>, };

/**
 * The result of [`assemble`]: the desired server map and where each entry
 * came from, both in map order.
 */
export type Assembled = {
    /**
     * Name → config of the winning layer, stamped.
     */
    servers: Record<string, ServerConfig>,
    /**
     * Name → kind of the winning layer.
     */
    sources: Record<string, Source>,
};

/**
 * What to do after `attempts` consecutive failures.
 */
export type BackoffDelay = {
    /**
     * Milliseconds to wait before the next retry.
     */
    delayMs: number,
    /**
     * Whether the server failed too often in a row to be retried on a timer.
     */
    crashLoop: boolean,
};

/**
 * `backoff`: a failure count and a per-server jitter seed.
 */
export type BackoffRequest = {
    /**
     * Consecutive failures.
     */
    attempts: number,
    /**
     * Per-server seed, an unsigned integer ≤ 2^53.
     */
    seed: number,
};

/**
 * What `clientPolicy` answers.
 */
export type ClientPolicyOutcome = {
    /**
     * The servers the policy turns off, in map order.
     */
    blocked: Array<string>,
    /**
     * One message per list or rule that was left out (`"allowed: rule 1 must be …"`).
     */
    errors: Array<string>,
};

/**
 * `clientPolicy`: a client's policy lists and the servers they judge.
 */
export type ClientPolicyRequest = { policy: PolicyLists, servers: Record<string, ServerConfig>, };

/**
 * `transportOf` and `approvalHash`: one server entry.
 */
export type ConfigRequest = { config: ServerConfig, };

/**
 * `<name>::<16 hex>`; the name may itself contain `::`.
 */
export type ConnectionId = string;

/**
 * A decision the user can store (there is no stored "pending").
 */
export type Decision = "approved" | "rejected";

/**
 * Variables for `$VAR` / `${VAR}` expansion (`process.env` fits); the kernel never reads
 * the real environment.
 */
export type Environment = Record<string, string | undefined>;

/**
 * What kind of failure a response reports (spelled in kebab-case).
 */
export type ErrorKind = "invalid-json" | "invalid-request" | "unknown-op" | "invalid-config";

/**
 * `pendingGated` and `promptable`: a server map against the approvals store.
 */
export type GatedServersRequest = { servers: Record<string, ServerConfig>,
    /**
     * No decisions when absent or `null`.
     */
    approvals?: Approvals | null, projectRoot: string,
};

/**
 * The admission lists in force (SPEC §4). A list that is not set (`None`; in
 * JSON absent or `null`) differs from an empty one for `allowed` and `cap`.
 */
export type Gating = {
    /**
     * `mcp.excluded` patterns; beat `allowed`.
     */
    excluded?: Array<string> | null,
    /**
     * `mcp.allowed` patterns; not set allows all, empty denies all.
     */
    allowed?: Array<string> | null,
    /**
     * The launch flag `--allowed-mcp-server-names`; immutable per session.
     */
    cap?: Array<string> | null,
    /**
     * `mcp.allowed` of the workspace settings (project-controlled): it can
     * only narrow, so a server must match it too when it is set (SPEC §3.3).
     * JSON `workspaceAllowed`.
     */
    workspaceAllowed?: Array<string> | null,
    /**
     * Exact names of gated servers not approved for their current config.
     */
    pending?: Array<string> | null,
    /**
     * Exact names a client's own configuration turns off (SPEC §15): its allow and deny
     * lists ([`crate::policy`]) and its per-server switches. Checked after `excluded`, with
     * reason `blocked`; not set equals `[]`. JSON `blocked`.
     */
    blocked?: Array<string> | null,
};

/**
 * `gatingEqual`: two gating objects.
 */
export type GatingEqualRequest = { a: Gating, b: Gating, };

/**
 * `gating`: a server map and the admission inputs.
 */
export type GatingRequest = { servers: Record<string, ServerConfig>,
    /**
     * The merged `mcp.*` lists of the settings files (absent: none set).
     */
    settings?: McpLists | null,
    /**
     * Occurrences of the `--allowed-mcp-server-names` launch flag.
     */
    cliAllowed?: Array<string> | null,
    /**
     * No decisions when absent or `null`.
     */
    approvals?: Approvals | null,
    /**
     * Needed unless `yolo` (approvals are read only with the gate on).
     */
    projectRoot?: string | null,
    /**
     * Approval gate off: no `pending`.
     */
    yolo?: boolean | null,
    /**
     * Exact names the client's own configuration turns off (`clientPolicy`'s
     * `blocked`, a client's per-server switches). Those in the server map
     * become the gating's `blocked`, in map order (absent: none).
     */
    blocked?: Array<string> | null,
};

/**
 * What `hotReload` answers.
 */
export type HotReloadOutcome = {
    /**
     * Whether the host should reconcile (and adopt `next`).
     */
    reconcile: boolean,
    /**
     * The servers, gating and removed names to adopt.
     */
    next: ReloadState,
    /**
     * Newly askable gated servers that pass the allow lists.
     */
    promptable: Array<string>,
    /**
     * Whether to ask the user about `promptable`.
     */
    approvalEvent: boolean,
};

/**
 * `hotReload`: what the host adopted last, the freshly read layers and the
 * admission inputs.
 */
export type HotReloadRequest = { previous: ReloadState, layers: Array<Layer>,
    /**
     * The merged `mcp.*` lists of the settings files (absent: none set).
     */
    settings?: McpLists | null,
    /**
     * Occurrences of the `--allowed-mcp-server-names` launch flag.
     */
    cliAllowed?: Array<string> | null,
    /**
     * No decisions when absent or `null`.
     */
    approvals?: Approvals | null,
    /**
     * Needed unless `yolo` (approvals are read only with the gate on).
     */
    projectRoot?: string | null,
    /**
     * Approval gate off: no `pending`.
     */
    yolo?: boolean | null,
    /**
     * Exact names the client's own configuration turns off (`clientPolicy`'s
     * `blocked`, a client's per-server switches). Those in the server map
     * become the gating's `blocked`, in map order (absent: none).
     */
    blocked?: Array<string> | null,
};

/**
 * A failed request.
 */
export type KernelError = {
    /**
     * The failure class.
     */
    kind: ErrorKind,
    /**
     * A lower-case sentence naming the offending field or value.
     */
    message: string,
};

/**
 * One configuration layer: the servers one source contributes.
 */
export type Layer = {
    /**
     * Which kind of layer this is; decides its precedence.
     */
    source: Source,
    /**
     * The layer's entries, as written (or as [`parse_mcp_json`] returned them).
     */
    servers: Record<string, ServerConfig>,
    /**
     * For extension layers: the extension's name, stamped as `extensionName`.
     */
    extension?: string | null,
    /**
     * For the `serverCommand` layer: `mcp.serverCommand` came from the
     * workspace settings file, so its server is project-controlled and
     * stamped `scope:"workspace"` (gated, SPEC §3.1 row 10). JSON:
     * `"scope": "workspace"` on the layer.
     */
    scope?: WorkspaceScope | null,
};

/**
 * `lspApprovalHash`: one language-server entry.
 */
export type LspApprovalHashRequest = { config: LspEntry, };

/**
 * A `.lsp.json` entry (SPEC §14.1): known fields typed for editors; every other key
 * (`startupTimeout`, `shutdownTimeout`, `restartOnCrash`, `maxRestarts`, `trustRequired`,
 * unknown keys) is kept and counts in the approval hash.
 */
export type LspEntry = {
    command?: unknown;
    args?: string[] | null;
    env?: Record<string, string> | null;
    /** `"stdio"` (default), `"tcp"` or `"socket"`. */
    transport?: "stdio" | "tcp" | "socket" | null;
    /** A path, or `{host, port}`. */
    socket?: string | { host: string; port: number } | null;
    workspaceFolder?: string | null;
    initializationOptions?: unknown;
    /** Pushed live with `workspace/didChangeConfiguration`. */
    settings?: Record<string, unknown> | null;
    /** `".ext"` → language id; routes files (live). */
    extensionToLanguage?: Record<string, string> | null;
    /** `"user"` or `"project"` (stamped by the host; a file's own is dropped). */
    scope?: LspScope;
    [key: string]: unknown;
};

/**
 * The ordered actions of one language-server reconcile pass.
 */
export type LspPlan = {
    /**
     * Groups `disconnect`, `restart`, `reconfigure`, `retry`, `connect`,
     * `keep`, `skip`; inside each, desired names in map order, then names
     * only online in online-map order.
     */
    actions: Array<LspPlanAction>,
};

/**
 * One step of a language-server plan (SPEC §14.2). `from` / `to` are seed ids.
 */
export type LspPlanAction = { "action": "connect",
    /**
     * The language server's name: its key in the desired or online map.
     */
    name: string,
    /**
     * The seed id of the process to start: `<name>::<digest>` of its seed
     * fields, the ones only a restart can change.
     */
    to: LspSeedId, } | { "action": "restart",
    /**
     * The language server's name: its key in the desired or online map.
     */
    name: string,
    /**
     * The running server's seed id.
     */
    from: LspSeedId,
    /**
     * The desired seed id.
     */
    to: LspSeedId,
    /**
     * The seed fields that differ, sorted by UTF-16 code units.
     */
    changed: Array<string>, } | { "action": "reconfigure",
    /**
     * The language server's name: its key in the desired or online map.
     */
    name: string,
    /**
     * The live fields that differ, sorted by UTF-16 code units.
     */
    changed: Array<string>, } | { "action": "retry",
    /**
     * The language server's name: its key in the desired or online map.
     */
    name: string,
    /**
     * The attempt number this start is (`attempts + 1`).
     */
    attempt: number, } | { "action": "disconnect",
    /**
     * The language server's name: its key in the desired or online map.
     */
    name: string,
    /**
     * `removed`, `rejected` or `pending_approval`.
     */
    reason: Reason, } | { "action": "keep",
    /**
     * The language server's name: its key in the desired or online map.
     */
    name: string,
    /**
     * `pending_approval` when it keeps running its last approved config
     * while an edit waits for approval; else not set.
     */
    reason?: Reason, } | { "action": "skip",
    /**
     * The language server's name: its key in the desired or online map.
     */
    name: string,
    /**
     * `pending_approval`, `rejected`, `backing_off` or `crash_loop`.
     */
    reason: Reason, } | { "action": "noop",
    /**
     * Why (`untrusted_folder`).
     */
    reason: Reason,
};

/**
 * `lspPlan`: desired and live language servers and the approval inputs.
 */
export type LspPlanRequest = {
    /**
     * Every entry carries `scope`: `"user"` or `"project"`.
     */
    desired: Record<string, LspEntry>, online: Record<string, OnlineEntry>,
    /**
     * No decisions when absent or `null`.
     */
    approvals?: Approvals | null, projectRoot: string, trustedFolder: boolean,
    /**
     * Milliseconds on the host's clock.
     */
    now: Millis,
};

/**
 * Which file a language-server entry came from.
 */
export type LspScope = "user" | "project";

/**
 * A language server's seed id: `<name>::` + 16 hex digits of sha256 over
 * the canonical seed. The name may contain `::` (split at the last one).
 */
export type LspSeedId = string;

/**
 * `lspSeedId`: a language-server entry under its name.
 */
export type LspSeedIdRequest = { name: string, config: LspEntry, };

/** Language-server entries by name, in map order. */
export type LspServers = Record<string, LspEntry>;

/**
 * `matchPattern`: a `*` / `?` pattern and a name.
 */
export type MatchPatternRequest = { pattern: string, name: string, };

/**
 * The admission lists the settings scopes define together (SPEC §3.3).
 * A list that is not set (`None`; in JSON absent or `null`) differs from an
 * empty one (deny all).
 */
export type McpLists = {
    /**
     * `mcp.allowed` of every scope but the workspace.
     */
    allowed?: Array<string> | null,
    /**
     * `mcp.allowed` of the workspace scope: project-controlled, so it only
     * narrows (a server must pass `allowed` when set **and** this when set).
     */
    workspaceAllowed?: Array<string> | null,
    /**
     * `mcp.excluded` of all scopes.
     */
    excluded?: Array<string> | null,
};

/**
 * A point in time or a span of time, in milliseconds of the host's
 * monotonic clock.
 *
 * The kernel never reads a clock: every time-dependent input carries a
 * `now: Millis` chosen by the host. A plain integer (not `Instant`) so it
 * crosses the JavaScript boundary unchanged; serialized as that integer.
 */
export type Millis = number;

/**
 * Whose connections a plan is for.
 */
export type Mode = "session" | "pool";

/**
 * `connectionId` and `sessionKey`: a server entry under its name.
 */
export type NamedConfigRequest = { name: string, config: ServerConfig, };

/** Live connections by server name. */
export type Online = Record<string, OnlineEntry>;

/**
 * One live connection: the config it was started with and how it is doing.
 */
export type OnlineEntry = {
    /**
     * The config the connection was started with (not the desired one).
     */
    config: ServerConfig,
    /**
     * Its current state; with `attempts`, `retry_at`, `crash_loop` and `needs_auth` it
     * decides between keep, retry and skip.
     */
    status: Status,
    /**
     * Consecutive failures (SPEC §9).
     */
    attempts?: number | null,
    /**
     * When a `failed` connection may be retried; not set is "now".
     */
    retryAt?: Millis | null,
    /**
     * Failed too often in a row: not retried until its config changes.
     */
    crashLoop?: boolean | null,
    /**
     * Waits for an authorization the host does not have (`needs_auth`): not
     * retried until its credentials or config change.
     */
    needsAuth?: boolean | null,
};

/**
 * `parseLspJson`: a `.lsp.json` file's text and how to read it.
 */
export type ParseLspJsonRequest = { text: string,
    /**
     * Variables for `$VAR` / `${VAR}` expansion.
     */
    env?: Environment | null,
    /**
     * Expand variables (default true).
     */
    expand?: boolean | null,
    /**
     * Stamp every entry with this scope (default: none).
     */
    scope?: LspScope | null,
    /**
     * Checks an absolute `workspaceFolder` against it.
     */
    projectRoot?: string | null,
};

/**
 * `parseMcpJson`: a `.mcp.json` file's text and how to read it.
 */
export type ParseMcpJsonRequest = { text: string,
    /**
     * Variables for `$VAR` / `${VAR}` expansion (`process.env` fits); the
     * kernel never reads the real environment.
     */
    env?: Environment | null,
    /**
     * Expand variables (default true; false in yolo mode).
     */
    expand?: boolean | null,
};

/**
 * `parseSettings`: a settings file's text.
 */
export type ParseSettingsRequest = { text: string,
    /**
     * Variables for `$VAR` / `${VAR}` expansion in every string value.
     */
    env?: Environment | null,
};

/**
 * What [`parse_lsp_json`] read from a `.lsp.json` (or the user file).
 */
export type ParsedLspJson = {
    /**
     * The valid entries, expanded, a written `scope` removed (and the
     * requested one stamped), in map order.
     */
    servers: Record<string, LspEntry>,
    /**
     * One sentence per problem: the file is unreadable or not an object, or
     * an entry is invalid (naming the entry, the field and what to do).
     */
    errors: Array<string>,
};

/**
 * What [`parse_mcp_json`] read from a `.mcp.json`.
 */
export type ParsedMcpJson = {
    /**
     * The loadable entries, expanded, normalized and stamped `scope:"project"`.
     */
    servers: Record<string, ServerConfig>,
    /**
     * One human-readable sentence per problem (the file is unreadable, has
     * no `mcpServers` object, or an entry is not an object).
     */
    errors: Array<string>,
};

/**
 * The ordered actions of one reconcile pass.
 */
export type Plan = {
    /**
     * Disconnects, reconnects, retries, connects, keeps, skips — in that
     * order; inside each group desired names in map order, then names that
     * are only online in online-map order.
     */
    actions: Array<PlanAction>,
};

/**
 * One step of a plan. `name` is the server name; `from` / `to` are
 * connection ids.
 */
export type PlanAction = { "action": "connect",
    /**
     * The server's name: its key in the desired or online map.
     */
    name: string,
    /**
     * The id of the connection to start: `<name>::<fingerprint>` of the
     * config's identity fields, so an edit that leaves them alone keeps it.
     */
    to: ConnectionId, } | { "action": "reconnect",
    /**
     * The server's name: its key in the desired or online map.
     */
    name: string,
    /**
     * The running connection's id.
     */
    from: ConnectionId,
    /**
     * The desired connection's id (may equal `from` in session mode).
     */
    to: ConnectionId,
    /**
     * The identity fields that differ, sorted by UTF-16 code units.
     */
    changed: Array<string>, } | { "action": "retry",
    /**
     * The server's name: its key in the desired or online map.
     */
    name: string,
    /**
     * The attempt number this start is (`attempts + 1`).
     */
    attempt: number, } | { "action": "disconnect",
    /**
     * The server's name: its key in the desired or online map.
     */
    name: string,
    /**
     * Why it may not stay (`removed` or a denial reason).
     */
    reason: Reason, } | { "action": "keep",
    /**
     * The server's name: its key in the desired or online map.
     */
    name: string, } | { "action": "skip",
    /**
     * The server's name: its key in the desired or online map.
     */
    name: string,
    /**
     * Why (a denial reason, `backing_off` or `crash_loop`).
     */
    reason: Reason, } | { "action": "noop",
    /**
     * Why (`untrusted_folder`).
     */
    reason: Reason,
};

/**
 * `plan`: desired and live servers, the gating in force, and the clock.
 */
export type PlanRequest = { desired: Record<string, ServerConfig>, online: Record<string, OnlineEntry>, gating: Gating, trustedFolder: boolean, mode: Mode,
    /**
     * Milliseconds on the host's clock.
     */
    now: Millis,
};

/**
 * A client's policy lists. A rule is exactly one of `{serverName}`,
 * `{serverCommand}` or `{serverUrl}`; a list entry that is not a rule is
 * left out and reported in the result's `errors`, and a list that is not an
 * array counts as `[]` (an allow list then admits nothing).
 */
export type PolicyLists = {
    /**
     * Allow rules: not set (absent or `null`) allows every server, `[]` none.
     */
    allowed?: Array<PolicyRule> | null,
    /**
     * Deny rules: a server matching one is blocked, whatever `allowed` says.
     */
    denied?: Array<PolicyRule> | null,
};

/**
 * One policy rule.
 */
export type PolicyRule = { "serverName": string } | { "serverCommand": Array<string> } | { "serverUrl": string };

/**
 * Why a server is not connected, or why a plan did what it did.
 *
 * Spelled in snake_case exactly as the TypeScript host spells its
 * unavailable reasons; the spellings are part of the JSON contract.
 */
export type Reason = "removed" | "not_allowed" | "excluded" | "pending_approval" | "rejected" | "no_transport" | "backing_off" | "crash_loop" | "untrusted_folder" | "unsupported_transport" | "blocked" | "needs_auth";

/**
 * What the session adopted at its last reconcile.
 */
export type ReloadState = {
    /**
     * The server map as adopted (compared as the TypeScript host compares
     * it, so any JSON value; `null` equals `{}`).
     */
    servers?: Record<string, ServerConfig> | null,
    /**
     * The gating in force.
     */
    gating: Gating,
    /**
     * Names removed during the session, when the host tracks them.
     */
    removed?: Array<string> | null,
};

/**
 * `restartRequired`: changed paths and an optional schema.
 */
export type RestartRequiredRequest = {
    /**
     * Dotted settings paths, as `settingsDiff` returns them.
     */
    paths: Array<string>,
    /**
     * Dotted key → requires restart; replaces the default schema.
     */
    schema?: Record<string, boolean> | null,
};

/**
 * Which changed paths need a restart (SPEC §7).
 */
export type RestartRequirement = {
    /**
     * Every path needs a restart (also true for no paths): a hot reload has
     * nothing to do and the host should not announce one.
     */
    suppressed: boolean,
    /**
     * Path → whether it needs a restart, in first-seen order.
     */
    perPath: Record<string, boolean>,
};

/**
 * One server entry (SPEC §1), as written: unknown keys are kept and feed the approval
 * hash. Known fields are typed `unknown` because the kernel passes entries through as
 * written (a file may say `"command": 5`); a host checks a field's type before using it.
 * `scope` is stamped by assembly, never trusted from a file.
 */
export type ServerConfig = {
    /** Executable of a stdio server (a string). */
    command?: unknown;
    /** Its arguments, in order (strings). */
    args?: unknown;
    /** Its environment additions (string values). */
    env?: unknown;
    /** Its working directory (a string). */
    cwd?: unknown;
    /** Legacy SSE endpoint (a string). */
    url?: unknown;
    /** Streamable HTTP endpoint (a string). */
    httpUrl?: unknown;
    /** HTTP / SSE headers (string values). */
    headers?: unknown;
    /** Websocket address (a string). */
    tcp?: unknown;
    /** Tool-call timeout in ms (a number). */
    timeout?: unknown;
    /** Skip tool-call confirmation (a boolean; session view only). */
    trust?: unknown;
    /** Only these tools (strings; an entry `name(...)` names the tool `name`). */
    includeTools?: unknown;
    /** Never these tools (strings); beats `includeTools`. */
    excludeTools?: unknown;
    /** `"sdk"`: an in-process server; Claude-style kinds are normalized away. */
    type?: unknown;
    /** Handshake cap in ms (a number; clamped to [100, 300000]). */
    discoveryTimeoutMs?: unknown;
    /** The extension that contributed the entry (a string). */
    extensionName?: unknown;
    /** Provenance stamp set by `assemble` and `parseMcpJson`. */
    scope?: "project" | "workspace" | "system";
    [key: string]: unknown;
};

/** Server entries by name, in map order. */
export type Servers = Record<string, ServerConfig>;

/**
 * `serversEqual`: two server maps (compared as written, so any JSON;
 * `null` equals `{}`).
 */
export type ServersEqualRequest = { a?: Record<string, ServerConfig> | null, b?: Record<string, ServerConfig> | null, };

/**
 * Connection id plus the JSON of the session-view fields.
 */
export type SessionKey = string;

/**
 * A parsed settings file: always a JSON object.
 */
export type Settings = Record<string, unknown>;

/**
 * `settingsDiff`: two parsed settings objects (`null` ≡ `{}`).
 */
export type SettingsDiffRequest = { old?: Record<string, unknown> | null, new?: Record<string, unknown> | null, };

/**
 * The kind of a configuration layer, lowest precedence first (SPEC §3.1).
 *
 * The derived order is the precedence order.
 */
export type Source = "extension" | "systemDefaults" | "user" | "project" | "workspace" | "system" | "session" | "cliConfig" | "runtime" | "serverCommand";

/**
 * The state of a live connection as the host reports it.
 */
export type Status = "connecting" | "connected" | "failed" | "disconnected";

/**
 * `supervise`: one event in a connection's life.
 */
export type SuperviseRequest = {
    /**
     * The state so far (absent: a fresh connection).
     */
    supervision?: SupervisionState | null, event: SupervisionEvent,
    /**
     * Milliseconds on the host's clock.
     */
    now: Millis,
    /**
     * Per-connection jitter seed, an unsigned integer ≤ 2^53.
     */
    seed?: number | null,
    /**
     * What went wrong (`failed`, `closed`).
     */
    error?: string | null,
    /**
     * The transport can never work here (`failed`).
     */
    unsupported?: boolean | null,
    /**
     * The server wants an authorization the host does not have (`failed`):
     * `needs_auth`, no retry timer.
     */
    needsAuth?: boolean | null,
    /**
     * The entry whose `restartOnCrash` and `maxRestarts` hold the connection back after a
     * failure (`failed`, `closed`; a language server's entry, other fields ignored): one
     * that may not start again is parked (`crashLoop`, no retry timer).
     */
    restartPolicy?: Record<string, unknown>,
};

/**
 * What `supervise` answers: how to show the connection, and its next state.
 */
export type Supervised = { view: SupervisionView, supervision: SupervisionState, };

/**
 * What happened to a supervised connection.
 */
export type SupervisionEvent = "start" | "connected" | "failed" | "closed" | "forgive" | "park" | "view";

/**
 * How one connection is doing.
 */
export type SupervisionState = {
    /**
     * Where the connection is in its life: starting, up, failed (see `attempts` and
     * `retry_at`) or closed without a failure.
     */
    status: Status,
    /**
     * Consecutive failures (drives the backoff).
     */
    attempts?: number | null,
    /**
     * When a failed connection may be retried.
     */
    retryAt?: Millis | null,
    /**
     * Failed too often in a row (or can never work): not retried on a
     * timer until its config changes or the user reconnects it.
     */
    crashLoop?: boolean | null,
    /**
     * The transport can never work here (`unsupported_transport`).
     */
    unsupported?: boolean | null,
    /**
     * The server needs an authorization the host does not have
     * (`needs_auth`): not retried on a timer.
     */
    needsAuth?: boolean | null,
    /**
     * Since when it has been up (for the healthy reset).
     */
    healthySince?: Millis | null,
    /**
     * The last error, as the host will show it (already redacted).
     */
    lastError?: string | null,
};

/**
 * What a host shows for a supervised connection (the `state`, `reason`,
 * `attempts`, `retryInMs` and `lastError` of `status --json`).
 */
export type SupervisionView = {
    /**
     * `connecting`, `connected`, `failed` or `disconnected`.
     */
    state: Status,
    /**
     * Why a failed connection is not up: `unsupported_transport`,
     * `needs_auth`, `crash_loop` or `backing_off`; not set otherwise.
     */
    reason: Reason | null,
    /**
     * Consecutive failures since the connection was last healthy for long enough.
     */
    attempts: number,
    /**
     * Milliseconds until a failed connection is retried (not set when it is
     * not failed or will not be retried on a timer).
     */
    retryInMs: number | null,
    /**
     * The last error, as the host recorded it (already redacted); cleared once the
     * connection is up again.
     */
    lastError: string | null,
};

/**
 * `toolNotFound`: why a tool call found no tool.
 */
export type ToolNotFoundRequest = {
    /**
     * `mcp__<server>__<tool>`.
     */
    tool: string,
    /**
     * The merged server map (absent or `null`: `{}`).
     */
    merged?: Record<string, ServerConfig> | null,
    /**
     * The gating in force (absent or `null`: `{}`).
     */
    gating?: Gating | null,
    /**
     * Names removed during this session (absent or `null`: `[]`).
     */
    removed?: Array<string> | null,
    /**
     * Approvals count only when both `approvals` and `projectRoot` are given.
     */
    approvals?: Approvals | null, projectRoot?: string | null,
};

/**
 * How a server is reached, derived from its fields (SPEC §1).
 */
export type Transport = "stdio" | "http" | "sse" | "websocket" | "sdk" | "unknown";

/**
 * `unavailableReason`: why one server is not connected.
 */
export type UnavailableReasonRequest = { name: string,
    /**
     * The merged server map (absent or `null`: `{}`).
     */
    merged?: Record<string, ServerConfig> | null,
    /**
     * The gating in force (absent or `null`: `{}`).
     */
    gating?: Gating | null,
    /**
     * Names removed during this session (absent or `null`: `[]`).
     */
    removed?: Array<string> | null,
    /**
     * Approvals count only when both `approvals` and `projectRoot` are given.
     */
    approvals?: Approvals | null, projectRoot?: string | null,
};

/**
 * The JSON spelling of [`Layer::from_workspace`]: `"scope": "workspace"`.
 */
export type WorkspaceScope = "workspace";

/** Every op of the kernel's JSON API: its request fields and its `ok` result. */
export interface Ops {
    /**
     * Transport kind of a server entry.
     */
    transportOf: { request: ConfigRequest; result: Transport };
    /**
     * Connection id: `"<name>::" + 16 hex` (SPEC §2.1).
     */
    connectionId: { request: NamedConfigRequest; result: ConnectionId };
    /**
     * Session key: connection id + session view (SPEC §2.2).
     */
    sessionKey: { request: NamedConfigRequest; result: SessionKey };
    /**
     * Approval hash: 64 hex (SPEC §2.3).
     */
    approvalHash: { request: ConfigRequest; result: ApprovalHash };
    /**
     * Approval state of one server (SPEC §5).
     */
    approvalState: { request: ApprovalStateRequest; result: ApprovalState };
    /**
     * Gated servers that are not approved, in map order.
     */
    pendingGated: { request: GatedServersRequest; result: Array<string> };
    /**
     * Gated servers to ask the user about, in map order.
     */
    promptable: { request: GatedServersRequest; result: Array<string> };
    /**
     * Computes the admission gating (SPEC §4).
     */
    gating: { request: GatingRequest; result: Gating };
    /**
     * Why a server is not connected, or `null`.
     */
    unavailableReason: { request: UnavailableReasonRequest; result: Reason | null };
    /**
     * The message for a call to a missing `mcp__<server>__<tool>`, or `null` for
     * a name of another shape.
     */
    toolNotFound: { request: ToolNotFoundRequest; result: string | null };
    /**
     * Whether two gating objects are equal (lists as multisets).
     */
    gatingEqual: { request: GatingEqualRequest; result: boolean };
    /**
     * What a debounced reload does (SPEC §7).
     */
    hotReload: { request: HotReloadRequest; result: HotReloadOutcome };
    /**
     * Whether two server maps are equal (key order ignored).
     */
    serversEqual: { request: ServersEqualRequest; result: boolean };
    /**
     * The reconcile plan from desired to online (SPEC §6).
     */
    plan: { request: PlanRequest; result: Plan };
    /**
     * Delay before the next retry of a failed server (SPEC §9).
     */
    backoff: { request: BackoffRequest; result: BackoffDelay };
    /**
     * Whether a name matches a `*` / `?` pattern.
     */
    matchPattern: { request: MatchPatternRequest; result: boolean };
    /**
     * Parses `.mcp.json` text (SPEC §3.2).
     */
    parseMcpJson: { request: ParseMcpJsonRequest; result: ParsedMcpJson };
    /**
     * Parses a settings file's text (SPEC §3.3).
     */
    parseSettings: { request: ParseSettingsRequest; result: Settings };
    /**
     * Merges configuration layers by precedence (SPEC §3.1).
     */
    assemble: { request: AssembleRequest; result: Assembled };
    /**
     * Changed leaf paths between two settings objects (SPEC §7).
     */
    settingsDiff: { request: SettingsDiffRequest; result: Array<string> };
    /**
     * Whether changed paths need a restart (SPEC §7).
     */
    restartRequired: { request: RestartRequiredRequest; result: RestartRequirement };
    /**
     * Parses `.lsp.json` text (SPEC §14.1).
     */
    parseLspJson: { request: ParseLspJsonRequest; result: ParsedLspJson };
    /**
     * A language server's launch-seed id (SPEC §14.2).
     */
    lspSeedId: { request: LspSeedIdRequest; result: LspSeedId };
    /**
     * A language-server entry's approval hash (SPEC §14.2).
     */
    lspApprovalHash: { request: LspApprovalHashRequest; result: ApprovalHash };
    /**
     * The language-server plan: restart, reconfigure or keep (SPEC §14.2).
     */
    lspPlan: { request: LspPlanRequest; result: LspPlan };
    /**
     * One step of a connection's supervision: backoff, crash loop, healthy
     * reset (SPEC §9).
     */
    supervise: { request: SuperviseRequest; result: Supervised };
    /**
     * The servers a client's administrator policy turns off (SPEC §15):
     * what a host passes on as `blocked`.
     */
    clientPolicy: { request: ClientPolicyRequest; result: ClientPolicyOutcome };
}

/** Any request: `op` plus that op's fields. */
export type Request = { [K in keyof Ops]: { op: K } & Ops[K]["request"] }[keyof Ops];

/** A response: the op's result under `ok`, or an error. */
export type Response<K extends keyof Ops = keyof Ops> = { ok: Ops[K]["result"] } | { error: KernelError };
