// One CommonJS file for Node (esbuild --bundle --platform=node --format=cjs), run from another
// directory: nothing is looked up beside the bundle.
"use strict";
const { McpSdkExecutor, Reconciler, kernel } = require("mcp-reconcile");
const scenario = require("../scenario.cjs");

new Reconciler({ executor: new McpSdkExecutor() });
console.log(scenario(kernel));
