// One ES module file for Node, the way a TypeScript CLI ships (esbuild --bundle --platform=node
// --format=esm): the package, the MCP SDK and this file together, run from another directory.
import { McpSdkExecutor, Reconciler, kernel } from "mcp-reconcile";
import scenario from "../scenario.cjs";

new Reconciler({ executor: new McpSdkExecutor() });
console.log(scenario(kernel));
