// Node, ES modules, no build step: both entry points, one kernel.
import { LspExecutor, Reconciler, kernel } from "mcp-reconcile";
import { kernel as kernelOnly } from "mcp-reconcile/kernel";
import scenario from "../scenario.cjs";

if (kernelOnly !== kernel) throw new Error("mcp-reconcile and mcp-reconcile/kernel hold different kernels");
if (typeof Reconciler !== "function" || typeof LspExecutor !== "function") throw new Error("no Reconciler or LspExecutor export");
console.log(scenario(kernel));
