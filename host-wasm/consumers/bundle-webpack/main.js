// The whole package, MCP SDK included, through webpack (target node, CommonJS output) with no
// rule for wasm or assets, run from another directory.
"use strict";
const { McpSdkExecutor, Reconciler, kernel } = require("mcp-reconcile");
const scenario = require("../scenario.cjs");

new Reconciler({ executor: new McpSdkExecutor() });
console.log(scenario(kernel));
