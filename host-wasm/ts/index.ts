/**
 * mcp-reconcile for TypeScript: the kernel (compiled to wasm) with typed
 * wrappers, a {@link Reconciler} that keeps live MCP connections equal to the
 * configured set, and an executor on the official MCP SDK.
 */
export * from "./kernel.js";
export { Reconciler } from "./reconciler.js";
export type { Executor, Outcome, ReconcileReport, ReconcilerOptions } from "./reconciler.js";
export { McpSdkExecutor, qualify } from "./sdk-executor.js";
export type {
  Connection,
  ExecutorEvent,
  McpSdkExecutorOptions,
  RegisteredTool,
} from "./sdk-executor.js";
