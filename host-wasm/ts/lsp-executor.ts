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
import type { Approvals, LspEntry, LspPlan, LspPlanAction, LspServers, Online, Reason, Status } from "./kernel.js";
import { LspConnection, LspStartError } from "./lsp-connection.js";
import { LspOnline } from "./lsp-online.js";

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

export class LspExecutor {
  readonly #projectRoot: string;
  readonly #now: () => number;
  readonly #online: LspOnline;
  readonly #env: Record<string, string | undefined> | undefined;
  readonly #clientInfo: { name: string; version: string } | undefined;
  readonly #onEvent: (event: LspExecutorEvent) => void;
  #trustedFolder: boolean;
  #queue: Promise<unknown> = Promise.resolve();
  #desired: LspServers = {};
  #planned = new Map<string, LspPlanAction>();

  constructor(options: LspExecutorOptions) {
    this.#projectRoot = options.projectRoot;
    this.#trustedFolder = options.trustedFolder ?? true;
    this.#now = options.now ?? Date.now;
    this.#online = new LspOnline(this.#now, options.seed ?? (() => Math.floor(Math.random() * 2 ** 53)));
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
    return this.#online.online();
  }

  /** The earliest `retryAt` of a failed server that will be retried, if any. */
  nextRetryAt(): number | undefined {
    return this.#online.nextRetryAt();
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
      const live = this.#online.get(name);
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
      await Promise.allSettled(
        this.#online.names().map(async (name) => {
          try {
            await this.#stop(name);
          } finally {
            this.#online.delete(name);
          }
        }),
      );
    });
    this.#queue = run.catch(() => undefined);
    return run;
  }

  async #run(desired: LspServers, approvals: Approvals): Promise<LspReconcileReport> {
    const plan = kernel.lspPlan({
      desired,
      online: this.#online.online(),
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
            try {
              await this.#stop(action.name);
            } finally {
              // A stop that failed still leaves the server out of the online state.
              this.#online.delete(action.name);
            }
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

  /** Starts `name` from its desired entry; a retry keeps counting failures. */
  async #start(name: string, retry: boolean): Promise<void> {
    const config = this.#desired[name] ?? {};
    const live = this.#online.begin(name, config, retry);
    let connection: LspConnection;
    try {
      connection = await LspConnection.start({
        name,
        entry: config,
        projectRoot: this.#projectRoot,
        onClosed: (error) => this.#closed(name, live.generation, error),
        ...(this.#env ? { env: this.#env } : {}),
        ...(this.#clientInfo ? { clientInfo: this.#clientInfo } : {}),
      });
    } catch (e) {
      const error = e instanceof Error ? e.message : String(e);
      if (this.#online.current(name, live)) {
        this.#online.fail(name, live, "failed", error, e instanceof LspStartError && e.unsupported);
      }
      this.#onEvent({ type: "failed", server: name, error });
      throw e;
    }
    this.#online.connected(name, live, connection);
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
    const live = this.#online.get(name);
    const config = this.#desired[name] ?? {};
    if (!live?.connection) return this.#start(name, false);
    live.config = config;
    if (changed.includes("settings")) {
      await live.connection.reconfigure(config.settings ?? {});
      this.#onEvent({ type: "reconfigured", server: name, settingsPushes: live.connection.settingsPushes });
    }
  }

  /** Stops `name`'s running process, if any, keeping its record. */
  async #stop(name: string): Promise<void> {
    const connection = this.#online.detach(name);
    if (!connection) return;
    await connection.stop();
    this.#onEvent({ type: "closed", server: name, requested: true });
  }

  /** An end nobody asked for of the process started as `generation`. */
  #closed(name: string, generation: number, error: Error): void {
    const live = this.#online.get(name);
    if (live?.generation !== generation) return;
    this.#online.detach(name);
    this.#online.fail(name, live, "closed", error.message);
    this.#onEvent({ type: "closed", server: name, requested: false, error: error.message });
  }

  #statusOf(name: string, entry: LspEntry): LspServerStatus {
    const live = this.#online.get(name);
    const view = this.#online.view(name);
    const planned = this.#planned.get(name);
    const plannedReason = planned && "reason" in planned ? (planned.reason ?? null) : null;
    const status: LspServerStatus = {
      name,
      state: "disconnected",
      reason: null,
      pid: null,
      spawns: this.#online.spawns(name),
      attempts: 0,
      lastError: null,
      retryInMs: null,
      extensions: Object.keys(entry.extensionToLanguage ?? {}),
      settingsPushes: 0,
    };
    if (!this.#trustedFolder) return { ...status, state: "skipped", reason: "untrusted_folder" };
    if (!live || !view) {
      // Not started (skip) or stopped (disconnect) for a reason such as its approval.
      return plannedReason ? { ...status, state: "skipped", reason: plannedReason } : status;
    }
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
