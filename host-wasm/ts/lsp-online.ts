/**
 * The language servers an {@link LspExecutor} holds, as the kernel sees them:
 * per name the entry it runs with, its connection, and the kernel's
 * supervision state (SPEC §9). Every step of supervision is the kernel's
 * `supervise`, the entry's `restartOnCrash` / `maxRestarts` included (its
 * `restartPolicy`: the rule the native host steps too).
 */
import { kernel } from "./kernel.js";
import type {
  LspEntry,
  Online,
  ServerConfig,
  SupervisionEvent,
  SupervisionState,
  SupervisionView,
} from "./kernel.js";
import type { LspConnection } from "./lsp-connection.js";
import { SupervisionSteps, earliestRetry, onlineEntry } from "./supervision.js";
import type { Failure } from "./supervision.js";

/** A document to open again on the process that replaces the one that had it open. */
export interface Reopen {
  path: string;
  languageId: string;
}

/** One held server. */
export interface LiveServer {
  /** The entry it runs with: started with, then reconfigured to. */
  config: LspEntry;
  /** The kernel's supervision state. */
  supervision: SupervisionState;
  /** Identifies one start, so a stale close of an older one is ignored. */
  generation: number;
  connection?: LspConnection;
  /** Documents an earlier process had open, to open on the next one. */
  reopen: Reopen[];
}

export class LspOnline {
  readonly #now: () => number;
  readonly #steps: SupervisionSteps;
  readonly #live = new Map<string, LiveServer>();
  readonly #spawns = new Map<string, number>();
  #generation = 0;

  constructor(now: () => number, seed: (name: string) => number) {
    this.#now = now;
    this.#steps = new SupervisionSteps(now, seed);
  }

  get(name: string): LiveServer | undefined {
    return this.#live.get(name);
  }

  names(): string[] {
    return [...this.#live.keys()];
  }

  /** Forgets `name` (its server is stopped). */
  delete(name: string): void {
    this.#live.delete(name);
  }

  /** How many times a process of `name` was started. */
  spawns(name: string): number {
    return this.#spawns.get(name) ?? 0;
  }

  /** The plan's `online` input, in start order. */
  online(): Online {
    const online: Online = {};
    for (const [name, live] of this.#live) {
      // The plan reads any entry as written; `LspEntry` and `ServerConfig` differ only in `scope`'s values.
      online[name] = onlineEntry(structuredClone(live.config) as ServerConfig, live.supervision);
    }
    return online;
  }

  /** The earliest `retryAt` of a failed server that will be retried, if any. */
  nextRetryAt(): number | undefined {
    return earliestRetry([...this.#live.values()].map((live) => live.supervision));
  }

  /**
   * A start of `name` with `config` begins. A retry keeps counting failures;
   * a new server or a new seed starts from zero. Documents an earlier process
   * had open are carried over.
   */
  begin(name: string, config: LspEntry, retry: boolean): LiveServer {
    const earlier = this.#live.get(name);
    const live: LiveServer = {
      config,
      generation: ++this.#generation,
      supervision: this.#step(name, retry ? earlier?.supervision : undefined, "start"),
      reopen: earlier?.reopen ?? [],
    };
    this.#live.set(name, live);
    this.#spawns.set(name, this.spawns(name) + 1);
    return live;
  }

  /** Whether `live` is still the current record of `name`. */
  current(name: string, live: LiveServer): boolean {
    return this.#live.get(name) === live;
  }

  /** The start of `live` succeeded. */
  connected(name: string, live: LiveServer, connection: LspConnection): void {
    live.connection = connection;
    live.supervision = this.#step(name, live.supervision, "connected");
  }

  /**
   * Takes `name`'s connection out of its record (to stop it, or because it
   * ended), remembering the documents it had open.
   */
  detach(name: string): LspConnection | undefined {
    const live = this.#live.get(name);
    const connection = live?.connection;
    if (!live || !connection) return undefined;
    live.reopen = [...connection.openDocuments(), ...live.reopen];
    delete live.connection;
    return connection;
  }

  /**
   * A start failed (`failed`) or a running process ended by itself
   * (`closed`): one step of the kernel's policy with the entry's restart
   * limit — a server that may not start again is parked, so it plans as
   * `crash_loop`.
   */
  fail(name: string, live: LiveServer, event: "failed" | "closed", error: string, unsupported = false): void {
    const restartPolicy = { ...live.config };
    live.supervision = this.#step(name, live.supervision, event, { error, unsupported, restartPolicy });
  }

  /** How `name`'s supervision shows now. */
  view(name: string): SupervisionView | undefined {
    const live = this.#live.get(name);
    if (!live) return undefined;
    return kernel.supervise({ supervision: live.supervision, event: "view", now: this.#now() }).view;
  }

  /** One step of the kernel's supervision policy for `name`. */
  #step(
    name: string,
    supervision: SupervisionState | undefined,
    event: SupervisionEvent,
    failure: Failure = {},
  ): SupervisionState {
    return this.#steps.step(name, supervision, event, failure).supervision;
  }
}
