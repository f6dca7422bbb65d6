#!/usr/bin/env node
// The npm front door of mcp-reconcile: runs the native binary that this platform's optional
// package (@mcp-reconcile/cli-<os>-<arch>) carries, with the same arguments, stdio and exit
// status. Clients never start this launcher: `mcp-reconcile install` writes a per-user copy of
// the native binary into their files (never a node_modules or npx cache path), so no Node
// process sits in front of a session.
"use strict";
const { spawn } = require("node:child_process");

const PACKAGES = {
  "linux x64": "@mcp-reconcile/cli-linux-x64",
  "linux arm64": "@mcp-reconcile/cli-linux-arm64",
  "darwin arm64": "@mcp-reconcile/cli-darwin-arm64",
  "darwin x64": "@mcp-reconcile/cli-darwin-x64",
};

function fail(message) {
  process.stderr.write(`mcp-reconcile: ${message}\n`);
  process.exit(1);
}

const name = PACKAGES[`${process.platform} ${process.arch}`];
if (!name) {
  fail(`no prebuilt binary for ${process.platform}/${process.arch}; build one with \`cargo install mcp-reconcile\``);
}
let binary;
try {
  binary = require.resolve(`${name}/bin/mcp-reconcile`);
} catch {
  fail(`${name} is not installed (npm skips optional dependencies with --omit=optional or --no-optional): install again without it`);
}

const child = spawn(binary, process.argv.slice(2), { stdio: "inherit" });
for (const signal of ["SIGINT", "SIGTERM", "SIGHUP"]) {
  process.on(signal, () => child.kill(signal));
}
child.on("error", (e) => fail(`cannot run ${binary}: ${e.message}`));
child.on("exit", (code, signal) => {
  if (signal) {
    process.removeAllListeners(signal);
    process.kill(process.pid, signal);
  } else {
    process.exit(code ?? 1);
  }
});
