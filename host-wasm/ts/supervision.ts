/**
 * What the {@link Reconciler} and the {@link LspExecutor} both read from the
 * kernel's supervision state (SPEC §9): the policy itself is the kernel's
 * `supervise`; these only present its state to the planner and the caller.
 */
import type { OnlineEntry, ServerConfig, SupervisionState } from "./kernel.js";

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
