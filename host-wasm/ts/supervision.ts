/**
 * What the {@link Reconciler} and the {@link LspExecutor} both read from the
 * kernel's supervision state (SPEC §9): the policy itself is the kernel's
 * `supervise`; these only present its state to the planner and the caller.
 */
import { kernel } from "./kernel.js";
import type { OnlineEntry, ServerConfig, Supervised, SupervisionEvent, SupervisionState } from "./kernel.js";

/** What a plan sees of a held server started with `config`. */
export function onlineEntry(config: ServerConfig, s: SupervisionState): OnlineEntry {
  return {
    config,
    status: s.status,
    ...(s.attempts ? { attempts: s.attempts } : {}),
    ...(s.retryAt != null ? { retryAt: s.retryAt } : {}),
    ...(s.crashLoop ? { crashLoop: true } : s.status === "failed" ? { crashLoop: false } : {}),
    ...(s.needsAuth ? { needsAuth: true } : {}),
  };
}

/** The earliest `retryAt` of a failed server that will be retried (not crash-looping), if any. */
export function earliestRetry(states: Iterable<SupervisionState>): number | undefined {
  let next: number | undefined;
  for (const s of states) {
    if (s.status !== "failed" || s.crashLoop || s.retryAt == null) continue;
    next = next === undefined ? s.retryAt : Math.min(next, s.retryAt);
  }
  return next;
}

/** Why a start failed or a connection ended, for one supervision step. */
export interface Failure {
  error?: string;
  /** The transport is one this executor does not speak: no retry helps. */
  unsupported?: boolean;
  /** The entry whose `restartOnCrash` / `maxRestarts` the kernel holds the server to. */
  restartPolicy?: Record<string, unknown>;
}

/**
 * Steps the kernel's `supervise` for named servers on the host's clock, each
 * name with one jitter seed for its whole life (drawn once, on first use).
 */
export class SupervisionSteps {
  readonly #now: () => number;
  readonly #seed: (name: string) => number;
  readonly #seeds = new Map<string, number>();

  constructor(now: () => number, seed: (name: string) => number) {
    this.#now = now;
    this.#seed = seed;
  }

  /** One step for `name` from `supervision` (absent: a fresh connection). */
  step(
    name: string,
    supervision: SupervisionState | undefined,
    event: SupervisionEvent,
    failure: Failure = {},
  ): Supervised {
    return kernel.supervise({
      ...(supervision === undefined ? {} : { supervision }),
      event,
      now: this.#now(),
      seed: this.#seedOf(name),
      ...(failure.error === undefined ? {} : { error: failure.error }),
      ...(failure.unsupported ? { unsupported: true } : {}),
      ...(failure.restartPolicy === undefined ? {} : { restartPolicy: failure.restartPolicy }),
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
}
