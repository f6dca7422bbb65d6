// TypeScript, NodeNext, strict, the package's own declarations checked (no skipLibCheck).
// The same steps as ../scenario.cjs, typed: an error in the package's types fails the build.
import { kernel, isKernelFailure } from "mcp-reconcile";
import type { Gating, HotReloadOutcome, Plan, ServerConfig } from "mcp-reconcile";
import { kernel as kernelOnly } from "mcp-reconcile/kernel";
import type { LspPlan } from "mcp-reconcile/kernel";

import required = require("./required.cjs");

const files: ServerConfig = { command: "node", args: ["files-server.js"], env: { ROOT: "/srv/data" } };
const edited: ServerConfig = { ...files, args: ["files-server.js", "--read-only"] };
const docs: ServerConfig = { command: "docs-server" };
const web: ServerConfig = { httpUrl: "http://127.0.0.1:8931/mcp", headers: { Accept: "application/json" } };

const id: string = kernel.connectionId({ name: "files", config: files });
const reload: HotReloadOutcome = kernel.hotReload({
  previous: { servers: { files, docs }, gating: {} },
  layers: [{ source: "user", servers: { files: edited, web } }],
  settings: {},
  approvals: {},
  projectRoot: "/work/project",
});
const gating: Gating = reload.next.gating;
const plan: Plan = kernelOnly.plan({
  desired: reload.next.servers ?? {},
  online: {
    files: { config: files, status: "connected" },
    docs: { config: docs, status: "connected" },
  },
  gating,
  trustedFolder: true,
  mode: "session",
  now: 0,
});
const none: LspPlan = kernel.lspPlan({ desired: {}, online: {}, projectRoot: "/work/project", trustedFolder: true, now: 0 });
if (none.actions.length !== 0) throw new Error("an empty language-server plan has actions");
try {
  kernel.connectionId({ name: "", config: files });
} catch (e) {
  if (!isKernelFailure(e)) throw e;
}
if (required.connectionId !== id) throw new Error("require() and import give different kernels");
console.log(JSON.stringify({ id, reload, plan }));
