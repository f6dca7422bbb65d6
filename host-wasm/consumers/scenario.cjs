// What every consumer project does with the packed package, in plain CommonJS so that ES
// modules, CommonJS, bundles and a browser page all run this one file: compute a server's
// connection id, hot-reload an edited settings file, and plan the reconcile it calls for.
// `consumers/run.mjs` runs it against the native CLI too; every output must be byte-identical.
"use strict";

module.exports = function scenario(kernel) {
  const files = { command: "node", args: ["files-server.js"], env: { ROOT: "/srv/data" } };
  const edited = { ...files, args: ["files-server.js", "--read-only"] };
  const docs = { command: "docs-server" };
  const web = { httpUrl: "http://127.0.0.1:8931/mcp", headers: { Accept: "application/json" } };

  const id = kernel.connectionId({ name: "files", config: files });
  // The user file changed `files`, dropped `docs` and added `web`.
  const reload = kernel.hotReload({
    previous: { servers: { files, docs }, gating: {} },
    layers: [{ source: "user", servers: { files: edited, web } }],
    settings: {},
    approvals: {},
    projectRoot: "/work/project",
  });
  const plan = kernel.plan({
    desired: reload.next.servers,
    online: {
      files: { config: files, status: "connected" },
      docs: { config: docs, status: "connected" },
    },
    gating: reload.next.gating,
    trustedFolder: true,
    mode: "session",
    now: 0,
  });
  return JSON.stringify({ id, reload, plan });
};
