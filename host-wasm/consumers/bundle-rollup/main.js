// The kernel alone through rollup (node-resolve + commonjs plugins, ES module output), run from
// another directory.
import { kernel } from "mcp-reconcile/kernel";
import scenario from "../scenario.cjs";

console.log(scenario(kernel));
