/**
 * mcp-reconcile for TypeScript: the kernel (compiled to wasm) with typed
 * wrappers, a {@link Reconciler} that keeps live MCP connections equal to the
 * configured set, an executor on the official MCP SDK, and an
 * {@link LspExecutor} that does the same for language servers.
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
export { LspExecutor } from "./lsp-executor.js";
export type {
  LspExecutorEvent,
  LspExecutorOptions,
  LspOutcome,
  LspReconcileReport,
  LspServerStatus,
} from "./lsp-executor.js";
export { LspConnection, LspStartError } from "./lsp-connection.js";
export type { LspConnectionOptions } from "./lsp-connection.js";
