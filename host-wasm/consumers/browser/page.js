// A browser page (esbuild --bundle --platform=browser --format=esm) and a module worker it
// starts: the kernel alone, from `mcp-reconcile/kernel`. Each posts its result to the test's
// loopback server.
import { kernel } from "mcp-reconcile/kernel";
import scenario from "../scenario.cjs";

export function report(name, text) {
  return fetch(`/result/${name}`, { method: "POST", body: text });
}

addEventListener("error", (e) => report("error", `page: ${e.message}`));
report("page", scenario(kernel));
const worker = new Worker("worker.bundle.js", { type: "module" });
worker.onmessage = (e) => report("worker", e.data);
worker.onerror = (e) => report("error", `worker: ${e.message}`);
