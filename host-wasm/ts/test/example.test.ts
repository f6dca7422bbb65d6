/**
 * The README's CLI example, run for real: it connects what the settings file
 * names, and a later edit connects only the added server.
 */
import { spawn } from "node:child_process";
import type { ChildProcess } from "node:child_process";
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, test } from "node:test";
import assert from "node:assert/strict";

import { hostWasm } from "./paths.js";

const everything = join(hostWasm, "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js");
const home = mkdtempSync(join(tmpdir(), "mcp-reconcile-example-"));
const settingsFile = join(home, ".qwen", "settings.json");
const server = { command: process.execPath, args: [everything, "stdio"] };

let log = "";
let cli: ChildProcess | undefined;

function start(): void {
  // Its own process group: killing the group also ends the servers it started.
  cli = spawn(process.execPath, [join(hostWasm, "dist", "example", "cli.js")], {
    cwd: home,
    env: { ...process.env, HOME: home },
    detached: true,
    stdio: ["ignore", "ignore", "pipe"],
  });
  cli.stderr?.on("data", (chunk: Buffer) => (log += chunk.toString()));
}

after(() => {
  try {
    if (cli?.pid) process.kill(-cli.pid, "SIGKILL");
  } catch {}
  rmSync(home, { recursive: true, force: true });
});

async function until(what: string, check: () => boolean, ms = 15_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}; log:\n${log}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

test("the example CLI connects the configured server and applies an edit live", async () => {
  mkdirSync(join(home, ".qwen"));
  writeFileSync(settingsFile, JSON.stringify({ mcpServers: { a: server } }));
  start();
  await until("a registers its tools", () => log.includes("[mcp] registered a"));
  const before = log.length;
  writeFileSync(settingsFile, JSON.stringify({ mcpServers: { a: server, b: server } }, null, 2));
  await until("b registers its tools", () => log.includes("[mcp] registered b"));
  // `a` keeps its connection: no close, no new connect. (Its catalog may be
  // re-listed meanwhile: server-everything sends its own list_changed right
  // after connecting, which shows up as purged/registered, not as a reconnect.)
  const after = log.slice(before);
  assert.ok(
    !after.includes("[mcp] closed a\n") && !after.includes("[mcp] connected a\n"),
    `a was reconnected:\n${after}`,
  );
});
