/**
 * Language servers (`.lsp.json`, SPEC §14) kept equal to the configured set
 * while a session runs: the kernel's `lspPlan` says what to do, this class
 * does it on real processes ({@link LspConnection}).
 *
 * Drive loop (one {@link LspExecutor.reconcile} call):
 * 1. The caller reads the user file and the project's `.lsp.json` with
 *    `kernel.parseLspJson` (scope `"user"` / `"project"` stamped; a project
 *    entry overrides a user entry of the same name) and the LSP approvals
 *    file (records bound to `kernel.lspApprovalHash`), and passes both.
 * 2. The kernel plans from (desired, online, approvals, project root, trusted
 *    folder, now). A failed server that its entry forbids to restart
 *    (`restartOnCrash: false`, or `maxRestarts` failures in a row) is online
 *    as `crashLoop`, so the plan skips it.
 * 3. Teardown first: a `disconnect` stops its server; a `restart` stops the
 *    old process (keeping the list of documents it had open).
 * 4. A `reconfigure` pushes the full new `settings` to the same process
 *    (`workspace/didChangeConfiguration`) and answers later pulls from them;
 *    routing and policy fields take effect at once.
 * 5. `restart`, `retry` and `connect` start their servers with the desired
 *    entry; a restarted or retried server opens the documents its
 *    predecessor had open.
 * 6. Every start's outcome and every crash steps the kernel's `supervise`
 *    (backoff, crash loop, healthy reset); the next reconcile at or after
 *    {@link LspExecutor.nextRetryAt} retries a failed server.
 *
 * Calls are queued: one reconcile runs at a time, each on the latest state.
 */
import { extname, resolve } from "node:path";

import type { Diagnostic } from "vscode-languageserver-protocol";

import { kernel } from "./kernel.js";
import type {
  Approvals,
  LspEntry,
  LspPlan,
  LspPlanAction,
  LspServers,
  Online,
  Reason,
  ServerConfig,
  Status,
  Supervised,
  SupervisionEvent,
  SupervisionState,
} from "./kernel.js";
import { LspConnection, LspStartError } from "./lsp-connection.js";

/** The default `maxRestarts` (SPEC §14.1). */
const DEFAULT_MAX_RESTARTS = 8;
/** How long {@link LspExecutor.diagnostics} waits for a publish by default. */
const DEFAULT_DIAGNOSTICS_TIMEOUT_MS = 20_000;

export interface LspExecutorOptions {
  /** The project root as the approvals file keys it (a real path); workspace folders lie inside it. */
  projectRoot: string;
  /** An untrusted folder starts nothing and stops nothing. Default true. */
  trustedFolder?: boolean;
  /** The host's clock in ms. Default `Date.now`. */
  now?: () => number;
  /** Backoff seed per server, an unsigned integer ≤ 2^53. Default random. */
  seed?: (name: string) => number;
  /** The environment servers are spawned in (an entry's `env` is set over it). Default `process.env`. */
  env?: Record<string, string | undefined>;
  /** How this client introduces itself in `initialize`. */
  clientInfo?: { name: string; version: string };
  /** Called for every {@link LspExecutorEvent}. */
  onEvent?: (event: LspExecutorEvent) => void;
}

/** What the executor did, in order (for logs and tests). */
export type LspExecutorEvent =
  | { type: "connected"; server: string; pid: number }
  | { type: "reconfigured"; server: string; settingsPushes: number }
  | { type: "failed"; server: string; error: string }
  | { type: "closed"; server: string; requested: boolean; error?: string };

/** What happened to one action of a plan. */
export interface LspOutcome {
  action: LspPlanAction;
  /** False when the server failed to start or to take its new settings. */
  ok: boolean;
  /** Why it failed. */
  error?: string;
  /** How long its effects took. */
  ms: number;
}

/** A finished reconcile: the kernel's plan and the outcome of every action. */
export interface LspReconcileReport {
  plan: LspPlan;
  outcomes: LspOutcome[];
}

/** One configured language server as a user sees it (SPEC §14.4 `status`). */
export interface LspServerStatus {
  name: string;
  /** `skipped` when the last plan did not start it (approval, untrusted folder). */
  state: Status | "skipped";
  reason: Reason | null;
  /** The running process (the leader of its group). */
  pid: number | null;
  /** How many times this executor started its process. */
  spawns: number;
  /** Consecutive failures. */
  attempts: number;
  /** The last error, redacted. */
  lastError: string | null;
  /** Milliseconds until a failed server is retried. */
  retryInMs: number | null;
  /** The file extensions routed to it (`extensionToLanguage`). */
  extensions: string[];
  /** `workspace/didChangeConfiguration` pushes the running process received (1 after start). */
  settingsPushes: number;
}

interface Live {
  /** The entry it runs with: started with, then reconfigured to. */
  config: LspEntry;
  /** The kernel's supervision state (SPEC §9): the policy is the kernel's. */
  supervision: SupervisionState;
  /** Identifies one start, so a stale close of an older one is ignored. */
  generation: number;
  connection?: LspConnection;
  /** Documents an earlier process had open, to open on the next one. */
  reopen: Array<{ path: string; languageId: string }>;
}

export class LspExecutor {
  readonly #projectRoot: string;
  readonly #now: () => number;
  readonly #seed: (name: string) => number;
  readonly #env: Record<string, string | undefined> | undefined;
  readonly #clientInfo: { name: string; version: string } | undefined;
  readonly #onEvent: (event: LspExecutorEvent) => void;
  #trustedFolder: boolean;
  #live = new Map<string, Live>();
  #seeds = new Map<string, number>();
  #spawns = new Map<string, number>();
  #generation = 0;
  #queue: Promise<unknown> = Promise.resolve();
  #desired: LspServers = {};
  #planned = new Map<string, LspPlanAction>();

  constructor(options: LspExecutorOptions) {
    this.#projectRoot = options.projectRoot;
    this.#trustedFolder = options.trustedFolder ?? true;
    this.#now = options.now ?? Date.now;
    this.#seed = options.seed ?? (() => Math.floor(Math.random() * 2 ** 53));
    this.#env = options.env;
    this.#clientInfo = options.clientInfo;
    this.#onEvent = options.onEvent ?? (() => {});
  }

  /** Sets whether the folder is trusted, for the next reconcile. */
  setTrustedFolder(trusted: boolean): void {
    this.#trustedFolder = trusted;
  }

  /**
   * Makes the running language servers match `desired` (every entry stamped
   * with `scope`) under `approvals`: plans with the kernel, runs the plan, and
   * reports every action's outcome. Queued behind any reconcile still running.
   */
  reconcile(desired: LspServers, approvals: Approvals = {}): Promise<LspReconcileReport> {
    const run = this.#queue.then(() => this.#run(desired, approvals));
    this.#queue = run.catch(() => undefined);
    return run;
  }

  /** The kernel's view of what runs, in start order. */
  online(): Online {
    const online: Online = {};
    for (const [name, live] of this.#live) {
      const s = live.supervision;
      online[name] = {
        // The plan reads any entry as written; `LspEntry` and `ServerConfig` differ only in `scope`'s values.
        config: structuredClone(live.config) as ServerConfig,
        status: s.status,
        ...(s.attempts ? { attempts: s.attempts } : {}),
        ...(s.retryAt != null ? { retryAt: s.retryAt } : {}),
        ...(s.crashLoop ? { crashLoop: true } : s.status === "failed" ? { crashLoop: false } : {}),
      };
    }
    return online;
  }

  /** The earliest `retryAt` of a failed server that will be retried, if any. */
  nextRetryAt(): number | undefined {
    let next: number | undefined;
    for (const { supervision: s } of this.#live.values()) {
      if (s.status !== "failed" || s.crashLoop || s.retryAt == null) continue;
      next = next === undefined ? s.retryAt : Math.min(next, s.retryAt);
    }
    return next;
  }

  /** Every configured language server, in map order, as of the last reconcile. */
  status(): LspServerStatus[] {
    return Object.entries(this.#desired).map(([name, entry]) => this.#statusOf(name, entry));
  }

  /**
   * The diagnostics of the file at `path` (relative to the project root, or
   * absolute inside it) from the running server whose `extensionToLanguage`
   * routes its extension: opens the file as it is on disk (or sends its new
   * text) and waits, at most `timeoutMs`, for the server to publish for it.
   *
   * @throws no running server handles the extension (saying why: none
   * configured, waiting for approval, failed with its last error), or as
   * {@link LspConnection.diagnostics}.
   */
  async diagnostics(path: string, timeoutMs = DEFAULT_DIAGNOSTICS_TIMEOUT_MS): Promise<Diagnostic[]> {
    const extension = extname(path);
    let why: string | undefined;
    for (const [name, entry] of Object.entries(this.#desired)) {
      const languageId = languageOf(entry, extension);
      if (languageId === undefined) continue;
      const live = this.#live.get(name);
      if (live?.connection) {
        // An edit waiting for approval leaves the approved config running: route as it does.
        const running = languageOf(live.config, extension) ?? languageId;
        return live.connection.diagnostics(resolve(this.#projectRoot, path), running, timeoutMs);
      }
      const { state, reason, lastError } = this.#statusOf(name, entry);
      why ??= `language server "${name}" (for ${extension} files) is ${state}${reason ? ` (${reason})` : ""}${lastError ? `: ${lastError}` : ""}`;
    }
    throw new Error(
      why ??
        `no language server handles ${extension} files; add one to .lsp.json with "extensionToLanguage": {"${extension}": "<language id>"}`,
    );
  }

  /** Stops every language server (at shutdown). */
  close(): Promise<void> {
    const run = this.#queue.then(async () => {
      const names = [...this.#live.keys()];
      await Promise.allSettled(names.map((name) => this.#stop(name)));
      this.#live.clear();
    });
    this.#queue = run.catch(() => undefined);
    return run;
  }

  async #run(desired: LspServers, approvals: Approvals): Promise<LspReconcileReport> {
    const plan = kernel.lspPlan({
      desired,
      online: this.online(),
      approvals,
      projectRoot: this.#projectRoot,
      trustedFolder: this.#trustedFolder,
      now: this.#now(),
    });
    this.#desired = desired;
    this.#planned = new Map(plan.actions.flatMap((a) => ("name" in a ? [[a.name, a]] : [])));
    const outcomes = new Map<LspPlanAction, LspOutcome>();
    const timed = async (action: LspPlanAction, work: () => Promise<void>) => {
      const started = this.#now();
      try {
        await work();
        outcomes.set(action, { action, ok: true, ms: this.#now() - started });
      } catch (e) {
        const error = e instanceof Error ? e.message : String(e);
        outcomes.set(action, { action, ok: false, error, ms: this.#now() - started });
      }
    };

    // Teardown first: an old process is gone before its successor starts.
    await Promise.all(
      plan.actions.map(async (action) => {
        if (action.action === "disconnect") {
          await timed(action, async () => {
            await this.#stop(action.name);
            this.#live.delete(action.name);
          });
        } else if (action.action === "restart") {
          await this.#stop(action.name);
        }
      }),
    );
    await Promise.all(
      plan.actions.map(async (action) => {
        switch (action.action) {
          case "reconfigure":
            return timed(action, () => this.#reconfigure(action.name, action.changed));
          case "restart":
          case "retry":
          case "connect":
            return timed(action, () => this.#start(action.name, action.action === "retry"));
          default:
            return undefined;
        }
      }),
    );
    return {
      plan,
      outcomes: plan.actions.map((action) => outcomes.get(action) ?? { action, ok: true, ms: 0 }),
    };
  }

  /**
   * Starts `name` from its desired entry. A retry keeps counting failures; a
   * new server or a new seed starts from zero.
   */
  async #start(name: string, retry: boolean): Promise<void> {
    const config = this.#desired[name] ?? {};
    const earlier = this.#live.get(name);
    const generation = ++this.#generation;
    const live: Live = {
      config,
      generation,
      supervision: this.#supervise(name, retry ? earlier?.supervision : undefined, "start").supervision,
      reopen: earlier?.reopen ?? [],
    };
    this.#live.set(name, live);
    this.#spawns.set(name, (this.#spawns.get(name) ?? 0) + 1);
    let connection: LspConnection;
    try {
      connection = await LspConnection.start({
        name,
        entry: config,
        projectRoot: this.#projectRoot,
        onClosed: (error) => this.#closed(name, generation, error),
        ...(this.#env ? { env: this.#env } : {}),
        ...(this.#clientInfo ? { clientInfo: this.#clientInfo } : {}),
      });
    } catch (e) {
      const error = e instanceof Error ? e.message : String(e);
      if (this.#live.get(name) === live) {
        const unsupported = e instanceof LspStartError && e.unsupported;
        this.#fail(name, live, "failed", error, unsupported);
      }
      this.#onEvent({ type: "failed", server: name, error });
      throw e;
    }
    live.connection = connection;
    live.supervision = this.#supervise(name, live.supervision, "connected").supervision;
    this.#onEvent({ type: "connected", server: name, pid: connection.pid });
    const reopen = live.reopen;
    live.reopen = [];
    for (const { path, languageId } of reopen) {
      // A file that went away since is simply not reopened.
      await connection.openDocument(path, languageId).catch(() => {});
    }
  }

  /** Applies `name`'s new live fields; a server that is not running is started with them. */
  async #reconfigure(name: string, changed: string[]): Promise<void> {
    const live = this.#live.get(name);
    const config = this.#desired[name] ?? {};
    if (!live?.connection) return this.#start(name, false);
    live.config = config;
    if (changed.includes("settings")) {
      const settings = config.settings ?? {};
      await live.connection.reconfigure(settings);
      this.#onEvent({ type: "reconfigured", server: name, settingsPushes: live.connection.settingsPushes });
    }
  }

  /** Stops `name`'s running process, if any, keeping its record. */
  async #stop(name: string): Promise<void> {
    const live = this.#live.get(name);
    const connection = live?.connection;
    if (!live || !connection) return;
    live.reopen = [...connection.openDocuments(), ...live.reopen];
    delete live.connection;
    await connection.stop();
    this.#onEvent({ type: "closed", server: name, requested: true });
  }

  /** An end nobody asked for of the process started as `generation`. */
  #closed(name: string, generation: number, error: Error): void {
    const live = this.#live.get(name);
    if (live?.generation !== generation) return;
    if (live.connection) live.reopen = [...live.connection.openDocuments(), ...live.reopen];
    delete live.connection;
    this.#fail(name, live, "closed", error.message, false);
    this.#onEvent({ type: "closed", server: name, requested: false, error: error.message });
  }

  /**
   * One failure, stepped by the kernel; then the entry's own policy
   * (`restartOnCrash`, `maxRestarts`), which SPEC §14.2 leaves to the host:
   * a server that may not start again is parked, so it plans as `crash_loop`.
   */
  #fail(name: string, live: Live, event: "failed" | "closed", error: string, unsupported: boolean): void {
    live.supervision = this.#supervise(name, live.supervision, event, { error, unsupported }).supervision;
    const max = live.config.maxRestarts;
    const limit = typeof max === "number" && Number.isFinite(max) && max >= 0 ? max : DEFAULT_MAX_RESTARTS;
    const exhausted = live.config.restartOnCrash === false || (live.supervision.attempts ?? 0) >= Math.max(1, limit);
    if (exhausted) live.supervision = this.#supervise(name, live.supervision, "park").supervision;
  }

  /** One step of the kernel's supervision policy for `name`. */
  #supervise(
    name: string,
    supervision: SupervisionState | undefined,
    event: SupervisionEvent,
    failure: { error?: string; unsupported?: boolean } = {},
  ): Supervised {
    return kernel.supervise({
      ...(supervision === undefined ? {} : { supervision }),
      event,
      now: this.#now(),
      seed: this.#seedOf(name),
      ...(failure.error === undefined ? {} : { error: failure.error }),
      ...(failure.unsupported ? { unsupported: true } : {}),
    });
  }

  #seedOf(name: string): number {
    let seed = this.#seeds.get(name);
    if (seed === undefined) {
      seed = this.#seed(name);
      this.#seeds.set(name, seed);
    }
    return seed;
  }

  #statusOf(name: string, entry: LspEntry): LspServerStatus {
    const live = this.#live.get(name);
    const planned = this.#planned.get(name);
    const plannedReason = planned && "reason" in planned ? (planned.reason ?? null) : null;
    const status: LspServerStatus = {
      name,
      state: "disconnected",
      reason: null,
      pid: null,
      spawns: this.#spawns.get(name) ?? 0,
      attempts: 0,
      lastError: null,
      retryInMs: null,
      extensions: Object.keys(entry.extensionToLanguage ?? {}),
      settingsPushes: 0,
    };
    if (!this.#trustedFolder) return { ...status, state: "skipped", reason: "untrusted_folder" };
    if (!live) {
      // Not started (skip) or stopped (disconnect) for a reason such as its approval.
      return plannedReason ? { ...status, state: "skipped", reason: plannedReason } : status;
    }
    const { view } = this.#supervise(name, live.supervision, "view");
    return {
      ...status,
      state: view.state,
      // A running server whose edit waits for approval says so; otherwise the supervision's reason.
      reason: plannedReason === "pending_approval" ? plannedReason : view.reason,
      pid: live.connection?.pid ?? null,
      attempts: view.attempts,
      lastError: view.lastError,
      retryInMs: view.retryInMs,
      settingsPushes: live.connection?.settingsPushes ?? 0,
    };
  }
}

/** The language id `entry` routes files with `extension` to, if any. */
function languageOf(entry: LspEntry, extension: string): string | undefined {
  const routes = entry.extensionToLanguage;
  const id = routes && Object.hasOwn(routes, extension) ? routes[extension] : undefined;
  return typeof id === "string" ? id : undefined;
}
