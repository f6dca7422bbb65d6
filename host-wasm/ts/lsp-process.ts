/**
 * A language server's process: spawned as the leader of its own process
 * group, its stderr kept as a bounded tail for error messages, and stopped
 * group-wide (SPEC §11, §14.4).
 *
 * Stop sequence ({@link GroupProcess.stop}), each wait bounded:
 * 1. the caller closes stdin (after `shutdown` and `exit`);
 * 2. wait {@link GRACE_MS} for the leader to exit;
 * 3. SIGTERM to the group, wait {@link GRACE_MS};
 * 4. SIGKILL to the group, wait {@link KILL_WAIT_MS} for the leader to be reaped;
 * 5. always a last SIGKILL to the group, so grandchildren (wrappers, anything
 *    that outlived its parent) never survive.
 *
 * A group still running when the host's process exits is killed from its
 * `exit` handler. A host killed with SIGKILL cannot do that; servers built on
 * `vscode-languageserver` then exit by themselves once they see that the
 * `processId` they were given in `initialize` is gone.
 */
import { spawn } from "node:child_process";
import type { ChildProcessWithoutNullStreams } from "node:child_process";
import type { Readable, Writable } from "node:stream";

/** How long a stopping server gets after stdin closes, and again after SIGTERM. */
export const GRACE_MS = 1_000;
/** How long to wait for the kernel to deliver SIGKILL and the leader to be reaped. */
export const KILL_WAIT_MS = 5_000;
/** How much of stderr is kept for error messages. */
const STDERR_TAIL = 8 * 1024;

/** What to run. */
export interface ProcessSpec {
  command: string;
  args: string[];
  /** The whole environment of the child. */
  env: Record<string, string>;
  cwd: string;
}

/** Process groups this host started and has not stopped yet. */
const running = new Set<number>();
let exitHook = false;

function track(pgid: number): void {
  running.add(pgid);
  if (!exitHook) {
    exitHook = true;
    // Synchronous by necessity: nothing asynchronous runs in an `exit` handler.
    process.on("exit", () => {
      for (const group of running) {
        try {
          signalGroup(group, "SIGKILL");
        } catch {
          // Nothing more can be done while the host exits.
        }
      }
    });
  }
}

/** Sends `signal` to the group `pgid`; a group with no process left is the goal, not an error. */
function signalGroup(pgid: number, signal: NodeJS.Signals): void {
  try {
    process.kill(-pgid, signal);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code !== "ESRCH") throw e;
  }
}

export class GroupProcess {
  /** The leader's pid, which is also the group id. */
  readonly pid: number;
  readonly #child: ChildProcessWithoutNullStreams;
  readonly #exit: Promise<string>;
  readonly #stderrClosed: Promise<void>;
  #stderr = "";
  #stopped = false;

  private constructor(child: ChildProcessWithoutNullStreams, pid: number) {
    this.#child = child;
    this.pid = pid;
    this.#exit = new Promise((resolve) => {
      child.once("exit", (code, signal) =>
        resolve(signal ? `signal: ${signal}` : `exit status: ${code ?? "unknown"}`),
      );
    });
    this.#stderrClosed = new Promise((resolve) => {
      child.stderr.once("close", resolve);
      child.stderr.once("end", resolve);
    });
    child.stderr.on("data", (chunk: Buffer) => {
      this.#stderr = (this.#stderr + chunk.toString("utf8")).slice(-STDERR_TAIL);
    });
    // Writes to a server that is gone fail; the exit is reported, not the EPIPE.
    child.stdin.on("error", () => {});
    track(pid);
  }

  /**
   * Starts `spec` in a process group of its own (`detached`, so a stop can
   * signal the whole group). Rejects with the system's reason when the
   * program cannot be started.
   */
  static spawn(spec: ProcessSpec): Promise<GroupProcess> {
    const child = spawn(spec.command, spec.args, {
      cwd: spec.cwd,
      env: spec.env,
      detached: true,
      stdio: ["pipe", "pipe", "pipe"],
    });
    return new Promise((resolve, reject) => {
      child.once("error", reject);
      child.once("spawn", () => {
        child.off("error", reject);
        child.on("error", () => {}); // later errors show as the exit
        resolve(new GroupProcess(child, child.pid as number));
      });
    });
  }

  get stdin(): Writable {
    return this.#child.stdin;
  }

  get stdout(): Readable {
    return this.#child.stdout;
  }

  /** Resolves with the leader's exit status (`exit status: 3`, `signal: SIGKILL`). */
  exited(): Promise<string> {
    return this.#exit;
  }

  /** The exit status, if the leader exits within `ms`. */
  waitExit(ms: number): Promise<string | undefined> {
    return within(this.#exit, ms);
  }

  /** Waits (at most `ms`) until stderr ended, so a last message before an exit is in the tail. */
  async stderrSettled(ms: number): Promise<void> {
    await within(this.#stderrClosed, ms);
  }

  /** The last part of stderr, not redacted. */
  stderrTail(): string {
    return this.#stderr;
  }

  /** The stop sequence of the module docs (steps 2-5). Never hangs. */
  async stop(): Promise<void> {
    if ((await this.waitExit(GRACE_MS)) === undefined) {
      signalGroup(this.pid, "SIGTERM");
      if ((await this.waitExit(GRACE_MS)) === undefined) {
        signalGroup(this.pid, "SIGKILL");
        await this.waitExit(KILL_WAIT_MS);
      }
    }
    this.killGroup();
  }

  /** SIGKILL to the whole group (also the grandchildren of a leader that already exited). */
  killGroup(): void {
    signalGroup(this.pid, "SIGKILL");
    if (!this.#stopped) running.delete(this.pid);
    this.#stopped = true;
  }
}

/** The value of `work` if it settles within `ms`, else `undefined`. */
export async function within<T>(work: Promise<T>, ms: number): Promise<T | undefined> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<undefined>((resolve) => {
    timer = setTimeout(() => resolve(undefined), ms);
  });
  try {
    return await Promise.race([work, timeout]);
  } finally {
    clearTimeout(timer);
  }
}
