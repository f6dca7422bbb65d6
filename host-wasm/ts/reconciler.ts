/**
 * The host side of a reconcile: hold the online state, ask the kernel for a
 * plan, run it through an {@link Executor}, and record what happened.
 *
 * Drive loop (one {@link Reconciler.reconcile} call):
 * 1. The caller passes the desired servers and the gating it computed with the
 *    kernel (`assemble`, `gating` or `hotReload`).
 * 2. The kernel plans from (desired, online, gating, trusted folder, now).
 * 3. Every `disconnect` and `reconnect` — and `retry`, to clear a failed
 *    connection's leftovers — is torn down first: its tools, prompts and
 *    resources are purged, and all of that finishes before anything new
 *    starts.
 * 4. `connect`, `reconnect` and `retry` then start, a few at a time.
 * 5. Each start's outcome updates the online state: `connected`, or `failed`
 *    with the kernel's supervision policy (`supervise`: `attempts`, `retryAt`,
 *    `crashLoop`, the healthy reset).
 * 6. A later close that nobody asked for (the process exited, the transport
 *    dropped) marks the server `failed` the same way; the next reconcile at
 *    or after {@link Reconciler.nextRetryAt} retries it.
 *
 * Calls are queued: one reconcile runs at a time, each on the latest state.
 */
import { kernel } from "./kernel.js";
import { SupervisionSteps, earliestRetry, onlineEntry } from "./supervision.js";
import type {
  Gating,
  Mode,
  Online,
  OnlineEntry,
  Plan,
  PlanAction,
  ServerConfig,
  Servers,
  Supervised,
  SupervisionEvent,
  SupervisionState,
} from "./kernel.js";

/** Runs the effects of a plan. */
export interface Executor {
  /**
   * Starts `name` with `config` and registers its tools; resolves once the
   * server is ready, rejects if it cannot start. Later, if the connection
   * ends without {@link Executor.disconnect} having been called, the executor
   * calls `onClosed` once with the reason.
   */
  connect(name: string, config: ServerConfig, onClosed: (error: Error) => void): Promise<void>;
  /**
   * Purges `name`'s tools, prompts and resources, then stops its connection.
   * Resolves when it is gone; does nothing for a name it does not hold.
   */
  disconnect(name: string): Promise<void>;
}

export interface ReconcilerOptions {
  executor: Executor;
  /** Identity of a connection: `session` (default) or `pool`. */
  mode?: Mode;
  /** An untrusted folder connects nothing and tears nothing down. Default true. */
  trustedFolder?: boolean;
  /** The host's clock in ms. Default `Date.now`. */
  now?: () => number;
  /** Backoff seed per server, an unsigned integer ≤ 2^53. Default random. */
  seed?: (name: string) => number;
  /** How many servers start at once. Default 4. */
  parallelism?: number;
}

/** What happened to one action of a plan. */
export interface Outcome {
  action: PlanAction;
  /** False when the server failed to start. */
  ok: boolean;
  /** Why it failed. */
  error?: string;
  /** How long its effects took. */
  ms: number;
}

/** A finished reconcile: the plan and the outcome of every action. */
export interface ReconcileReport {
  plan: Plan;
  outcomes: Outcome[];
}

interface Live {
  config: ServerConfig;
  /** The kernel's supervision state (SPEC §9): the policy is the kernel's. */
  supervision: SupervisionState;
  /** Identifies one start, so a stale close of an older one is ignored. */
  generation: number;
}

/** What the plan sees of a live connection. */
function entryOf({ config, supervision }: Live): OnlineEntry {
  return onlineEntry(config, supervision);
}

export class Reconciler {
  readonly #executor: Executor;
  readonly #mode: Mode;
  readonly #now: () => number;
  readonly #steps: SupervisionSteps;
  readonly #parallelism: number;
  #trustedFolder: boolean;
  #live = new Map<string, Live>();
  #generation = 0;
  #queue: Promise<unknown> = Promise.resolve();
  #desired: Servers = {};
  #gating: Gating = {};
  #removed: string[] = [];

  constructor(options: ReconcilerOptions) {
    this.#executor = options.executor;
    this.#mode = options.mode ?? "session";
    this.#trustedFolder = options.trustedFolder ?? true;
    this.#now = options.now ?? Date.now;
    this.#steps = new SupervisionSteps(this.#now, options.seed ?? (() => Math.floor(Math.random() * 2 ** 53)));
    this.#parallelism = Math.max(1, options.parallelism ?? 4);
  }

  /** The online state: every connection the host holds, in start order. */
  online(): Online {
    const online: Online = {};
    for (const [name, live] of this.#live) online[name] = structuredClone(entryOf(live));
    return online;
  }

  /** Names removed from the config during this session (for tool-not-found messages). */
  removed(): string[] {
    return [...this.#removed];
  }

  /** The earliest `retryAt` of a failed, not crash-looping server, if any. */
  nextRetryAt(): number | undefined {
    return earliestRetry([...this.#live.values()].map((live) => live.supervision));
  }

  /** Sets whether the folder is trusted, for the next reconcile. */
  setTrustedFolder(trusted: boolean): void {
    this.#trustedFolder = trusted;
  }

  /**
   * Makes the live connections match `desired` under `gating`: plans with the
   * kernel, runs the plan, and reports every action's outcome. Queued behind
   * any reconcile still running.
   */
  reconcile(desired: Servers, gating: Gating): Promise<ReconcileReport> {
    const run = this.#queue.then(() => this.#run(desired, gating));
    this.#queue = run.catch(() => undefined);
    return run;
  }

  /**
   * The message for a call to a tool that is not registered: which server owns
   * the name and why it is not there (SPEC §4), or `null` for a name that is
   * not `mcp__<server>__<tool>`.
   */
  toolNotFound(tool: string): string | null {
    return kernel.toolNotFound({
      tool,
      merged: this.#desired,
      gating: this.#gating,
      removed: this.#removed,
    });
  }

  /** Disconnects everything (at shutdown). */
  close(): Promise<void> {
    const run = this.#queue.then(async () => {
      const names = [...this.#live.keys()];
      this.#live.clear();
      await Promise.allSettled(names.map((name) => this.#executor.disconnect(name)));
    });
    this.#queue = run.catch(() => undefined);
    return run;
  }

  async #run(desired: Servers, gating: Gating): Promise<ReconcileReport> {
    const plan = kernel.plan({
      desired,
      online: this.online(),
      gating,
      trustedFolder: this.#trustedFolder,
      mode: this.#mode,
      now: this.#now(),
    });
    // Names that left the config (SPEC §7 `removed`), for tool-not-found messages.
    for (const name of Object.keys(this.#desired)) {
      if (!Object.hasOwn(desired, name) && !this.#removed.includes(name)) this.#removed.push(name);
    }
    this.#removed = this.#removed.filter((name) => !Object.hasOwn(desired, name));
    this.#desired = desired;
    this.#gating = gating;
    const outcomes = new Map<PlanAction, Outcome>();
    const started = new Map<PlanAction, number>();

    // Teardown first: nothing new registers while an old tool is still there.
    const teardown = plan.actions.filter(
      (a) => a.action === "disconnect" || a.action === "reconnect" || a.action === "retry",
    );
    await Promise.all(
      teardown.map(async (action) => {
        const name = (action as { name: string }).name;
        started.set(action, this.#now());
        if (action.action === "disconnect") this.#live.delete(name);
        try {
          await this.#executor.disconnect(name);
          if (action.action === "disconnect") outcomes.set(action, this.#outcome(action, started));
        } catch (e) {
          // A failed stop still leaves the server out of the online state.
          if (action.action === "disconnect") {
            outcomes.set(action, this.#outcome(action, started, e));
          }
        }
      }),
    );

    const starts = plan.actions.filter(
      (a): a is Extract<PlanAction, { name: string }> =>
        a.action === "connect" || a.action === "reconnect" || a.action === "retry",
    );
    await this.#bounded(starts, async (action) => {
      if (!started.has(action)) started.set(action, this.#now());
      const config = desired[action.name] ?? {};
      const error = await this.#start(action.name, config, action.action === "retry");
      outcomes.set(action, this.#outcome(action, started, error));
    });

    return {
      plan,
      outcomes: plan.actions.map(
        (action) => outcomes.get(action) ?? { action, ok: true, ms: 0 },
      ),
    };
  }

  /**
   * Starts one server; the error if it failed. A retry keeps counting the
   * failures; a new or changed config starts from zero.
   */
  async #start(name: string, config: ServerConfig, retry: boolean): Promise<unknown> {
    const earlier = retry ? this.#live.get(name)?.supervision : undefined;
    const generation = ++this.#generation;
    const live: Live = {
      generation,
      config,
      supervision: this.#supervise(name, earlier, "start").supervision,
    };
    this.#live.set(name, live);
    try {
      await this.#executor.connect(name, config, (error) => this.#closed(name, generation, error));
    } catch (e) {
      if (this.#live.get(name)?.generation === generation) this.#fail(name, live, e, "failed");
      return e;
    }
    if (this.#live.get(name)?.generation === generation && live.supervision.status === "connecting") {
      live.supervision = this.#supervise(name, live.supervision, "connected").supervision;
    }
    return undefined;
  }

  /** An unrequested close of the connection started as `generation`. */
  #closed(name: string, generation: number, error: Error): void {
    const live = this.#live.get(name);
    if (live?.generation !== generation) return;
    this.#fail(name, live, error, "closed");
  }

  #fail(name: string, live: Live, error: unknown, event: "failed" | "closed"): void {
    const message = error instanceof Error ? error.message : String(error);
    live.supervision = this.#supervise(name, live.supervision, event, message).supervision;
  }

  /** One step of the kernel's supervision policy for `name`. */
  #supervise(
    name: string,
    supervision: SupervisionState | undefined,
    event: SupervisionEvent,
    error?: string,
  ): Supervised {
    return this.#steps.step(name, supervision, event, error === undefined ? {} : { error });
  }

  #outcome(action: PlanAction, started: Map<PlanAction, number>, error?: unknown): Outcome {
    const ms = this.#now() - (started.get(action) ?? this.#now());
    if (error === undefined) return { action, ok: true, ms };
    return { action, ok: false, error: error instanceof Error ? error.message : String(error), ms };
  }

  async #bounded<T>(items: T[], work: (item: T) => Promise<void>): Promise<void> {
    let next = 0;
    const worker = async () => {
      while (next < items.length) {
        const item = items[next++] as T;
        await work(item);
      }
    };
    await Promise.all(Array.from({ length: Math.min(this.#parallelism, items.length) }, worker));
  }
}
