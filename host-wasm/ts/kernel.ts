/**
 * Typed access to the kernel's JSON API (SPEC §10), compiled to wasm.
 *
 * Every type here is generated from the kernel's own request and result
 * types (`host-wasm/generated/kernel.d.ts`, which wasm-bindgen puts into
 * `pkg/mcp_reconcile_wasm.d.ts`); this file only re-exports them and adds the
 * few generic helpers TypeScript needs.
 *
 * This module and what it imports are the kernel alone: no Node API, so it
 * runs in a browser or a worker too (`import … from "mcp-reconcile/kernel"`).
 */
import * as wasm from "./wasm.js";
import type { ErrorKind, Ops, Response } from "./wasm.js";

export type * from "./wasm.js";

/** The name of one op. */
export type Op = keyof Ops;

/** The fields of `op`'s request besides `op`. */
export type RequestOf<K extends Op> = Ops[K]["request"];

/** The `ok` value of `op`. */
export type ResultOf<K extends Op> = Ops[K]["result"];

/**
 * The typed exports, one per op: each takes the op's fields, returns the
 * `ok` value, and throws an `Error` with `kind` on failure.
 */
export const kernel: { readonly [K in Op]: (request: RequestOf<K>) => ResultOf<K> } = {
  transportOf: wasm.transportOf,
  connectionId: wasm.connectionId,
  sessionKey: wasm.sessionKey,
  approvalHash: wasm.approvalHash,
  serversEqual: wasm.serversEqual,
  gatingEqual: wasm.gatingEqual,
  matchPattern: wasm.matchPattern,
  parseMcpJson: wasm.parseMcpJson,
  parseSettings: wasm.parseSettings,
  assemble: wasm.assemble,
  gating: wasm.gating,
  approvalState: wasm.approvalState,
  pendingGated: wasm.pendingGated,
  promptable: wasm.promptable,
  unavailableReason: wasm.unavailableReason,
  toolNotFound: wasm.toolNotFound,
  plan: wasm.plan,
  settingsDiff: wasm.settingsDiff,
  restartRequired: wasm.restartRequired,
  hotReload: wasm.hotReload,
  backoff: wasm.backoff,
  parseLspJson: wasm.parseLspJson,
  lspSeedId: wasm.lspSeedId,
  lspApprovalHash: wasm.lspApprovalHash,
  lspPlan: wasm.lspPlan,
  supervise: wasm.supervise,
  clientPolicy: wasm.clientPolicy,
};

/**
 * Answers any request with the §10 response object; never throws. Typed by
 * the request's `op` when it is known statically.
 */
export function evaluate<K extends Op>(request: { op: K } & RequestOf<K>): Response<K>;
export function evaluate(request: unknown): Response;
export function evaluate(request: unknown): Response {
  return wasm.evaluate(request as Parameters<typeof wasm.evaluate>[0]);
}

/** An error thrown by a typed export: a JS `Error` with the kernel's `kind`. */
export interface KernelFailure extends Error {
  kind: ErrorKind;
}

/** Whether `e` was thrown by the kernel (rather than by the host). */
export function isKernelFailure(e: unknown): e is KernelFailure {
  return e instanceof Error && typeof (e as { kind?: unknown }).kind === "string";
}
