// Node, CommonJS, no build step: `require` of both entry points, one kernel.
"use strict";
const { LspExecutor, McpSdkExecutor, Reconciler, kernel } = require("mcp-reconcile");
const { kernel: kernelOnly } = require("mcp-reconcile/kernel");
const scenario = require("../scenario.cjs");

if (kernelOnly !== kernel) throw new Error("mcp-reconcile and mcp-reconcile/kernel hold different kernels");
new Reconciler({ executor: new McpSdkExecutor() });
if (typeof LspExecutor !== "function") throw new Error("no LspExecutor export");
console.log(scenario(kernel));
