// The kernel in a module worker: no DOM, no Node.
import { kernel } from "mcp-reconcile/kernel";
import scenario from "../scenario.cjs";

postMessage(scenario(kernel));
