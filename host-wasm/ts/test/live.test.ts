/**
 * The Reconciler and the SDK executor against real MCP servers
 * (`@modelcontextprotocol/server-everything`, over stdio and streamable HTTP
 * on 127.0.0.1): an args edit reconnects only that server, a removal drops its
 * tools, a pending gated server is never spawned, a crash is retried after the
 * kernel's backoff. Every child is killed afterwards, also on failure.
 */
import { spawn } from "node:child_process";
import type { ChildProcess } from "node:child_process";
import { existsSync, mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import assert from "node:assert/strict";

import { McpSdkExecutor, Reconciler, kernel } from "../index.js";
import type { Approvals, ExecutorEvent, Gating, ReconcileReport, Servers } from "../index.js";
import { hostWasm } from "./paths.js";

const everything = join(hostWasm, "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js");
const node = process.execPath;
const projectRoot = "/work/project";

const work = mkdtempSync(join(tmpdir(), "mcp-reconcile-live-"));
const marker = join(work, "gated-server-spawned");
const pids = new Set<number>();
let http: ChildProcess | undefined;
let port = 0;
let clock = 1_000_000;
const events: ExecutorEvent[] = [];
const executor = new McpSdkExecutor({
  onEvent: (event) => {
    events.push(event);
    if (event.type === "connected" && event.pid) pids.add(event.pid);
  },
});
const reconciler = new Reconciler({ executor, now: () => clock, seed: () => 7 });

function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once("error", reject);
    server.listen(0, "127.0.0.1", () => {
      const address = server.address();
      server.close(() => (typeof address === "object" && address ? resolve(address.port) : reject(new Error("no port"))));
    });
  });
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

async function until(what: string, check: () => boolean, ms = 10_000): Promise<void> {
  const deadline = Date.now() + ms;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

function stdio(...args: string[]) {
  return { command: node, args: [...args, everything, "stdio"] };
}

const gated = {
  command: "sh",
  args: ["-c", `touch '${marker}'; exec '${node}' '${everything}' stdio`],
  scope: "project",
} as const;

function gatingFor(servers: Servers, approvals: Approvals = {}): Gating {
  return kernel.gating({ servers, settings: {}, approvals, projectRoot });
}

function actions(report: ReconcileReport): string[] {
  return report.plan.actions.map((a) => ("name" in a ? `${a.action} ${a.name}` : a.action)).sort();
}

function toolsOf(server: string): string[] {
  return [...executor.tools.values()].filter((t) => t.server === server).map((t) => t.qualifiedName);
}

function assertAllOk(report: ReconcileReport): void {
  const failed = report.outcomes.filter((o) => !o.ok);
  assert.deepEqual(failed, [], "every action succeeded");
}

before(async () => {
  assert.ok(existsSync(everything), `no server-everything at ${everything}: run npm ci`);
  port = await freePort();
  // Its own process group, so the whole group can be killed afterwards.
  http = spawn(node, [everything, "streamableHttp"], {
    env: { ...process.env, PORT: String(port) },
    detached: true,
    stdio: ["ignore", "ignore", "pipe"],
  });
  let stderr = "";
  http.stderr?.on("data", (chunk: Buffer) => (stderr += chunk.toString()));
  await until("the HTTP server listens", () => stderr.includes("listening"));
});

after(async () => {
  await reconciler.close().catch(() => {});
  await executor.close().catch(() => {});
  if (http?.pid) {
    try {
      process.kill(-http.pid, "SIGKILL");
    } catch {}
  }
  for (const pid of pids) {
    try {
      process.kill(pid, "SIGKILL");
    } catch {}
  }
  rmSync(work, { recursive: true, force: true });
});

let desired: Servers = {};

test("connects stdio and HTTP servers; a pending gated server is not spawned", async () => {
  desired = { a: stdio(), b: stdio(), h: { httpUrl: `http://127.0.0.1:${port}/mcp` }, p: gated };
  const report = await reconciler.reconcile(desired, gatingFor(desired));
  assert.deepEqual(actions(report), ["connect a", "connect b", "connect h", "skip p"]);
  assert.deepEqual(
    report.plan.actions.find((a) => "name" in a && a.name === "p"),
    { action: "skip", name: "p", reason: "pending_approval" },
  );
  assertAllOk(report);
  for (const server of ["a", "b", "h"]) assert.ok(toolsOf(server).includes(`mcp__${server}__echo`), `${server} has echo`);
  assert.deepEqual(toolsOf("p"), []);
  assert.equal(executor.connection("p"), undefined);
  assert.equal(existsSync(marker), false, "the gated server was never spawned");
  const echoed = await executor.callTool("mcp__h__echo", { message: "over http" });
  assert.match(JSON.stringify(echoed.content), /over http/);
  assert.equal(reconciler.online().a?.status, "connected");
});

test("an args edit reconnects only that server; the others keep client and pid", async () => {
  const before = {
    a: executor.connection("a")!,
    b: executor.connection("b")!,
    h: executor.connection("h")!,
  };
  const mark = events.length;
  desired = { ...desired, a: stdio("--no-warnings") };
  const report = await reconciler.reconcile(desired, gatingFor(desired));
  assert.deepEqual(actions(report), ["keep b", "keep h", "reconnect a", "skip p"]);
  const reconnect = report.plan.actions.find((a) => a.action === "reconnect");
  assert.deepEqual(reconnect && "changed" in reconnect ? reconnect.changed : [], ["args"]);
  assertAllOk(report);

  const a = executor.connection("a")!;
  assert.notEqual(a.client, before.a.client);
  assert.notEqual(a.pid, before.a.pid);
  await until("the old process of a exits", () => !alive(before.a.pid!));
  assert.equal(executor.connection("b")!.client, before.b.client);
  assert.equal(executor.connection("b")!.pid, before.b.pid);
  assert.ok(alive(before.b.pid!));
  assert.equal(executor.connection("h")!.client, before.h.client);

  // The old tools of a were purged before anything registered again.
  const pass = events.slice(mark);
  const purged = pass.findIndex((e) => e.type === "purged" && e.server === "a" && e.tools.length > 0);
  const registered = pass.findIndex((e) => e.type === "registered");
  assert.ok(purged >= 0 && purged < registered, JSON.stringify(pass));
  // (a may register twice: the server can announce tools/list_changed right after it starts.)
  assert.deepEqual(
    [...new Set(pass.filter((e) => e.type === "registered").map((e) => e.server))],
    ["a"],
    "only a registered tools again",
  );
  const echoed = await executor.callTool("mcp__a__echo", { message: "after edit" });
  assert.match(JSON.stringify(echoed.content), /after edit/);
});

test("removing a server drops its tools and stops its process", async () => {
  const b = executor.connection("b")!;
  const { b: _removed, ...rest } = desired;
  desired = rest;
  const report = await reconciler.reconcile(desired, gatingFor(desired));
  assert.deepEqual(actions(report), ["disconnect b", "keep a", "keep h", "skip p"]);
  assertAllOk(report);
  assert.deepEqual(toolsOf("b"), []);
  assert.equal(executor.connection("b"), undefined);
  await until("b's process exits", () => !alive(b.pid!));
  assert.match(reconciler.toolNotFound("mcp__b__echo") ?? "", /removed/i);
  await assert.rejects(executor.callTool("mcp__b__echo", { message: "x" }));
  assert.equal(existsSync(marker), false, "the gated server is still not spawned");
});

test("a crashed server is failed, backs off, and is retried", async () => {
  const a = executor.connection("a")!;
  process.kill(a.pid!, "SIGKILL");
  await until("the reconciler sees a fail", () => reconciler.online().a?.status === "failed");
  const entry = reconciler.online().a!;
  assert.equal(entry.attempts, 1);
  assert.deepEqual(toolsOf("a"), [], "a crashed server's tools are purged");
  const { delayMs } = kernel.backoff({ attempts: 1, seed: 7 });
  assert.equal(entry.retryAt, clock + delayMs);
  assert.equal(reconciler.nextRetryAt(), clock + delayMs);

  let report = await reconciler.reconcile(desired, gatingFor(desired));
  assert.ok(actions(report).includes("skip a"), "still backing off");
  clock += delayMs;
  report = await reconciler.reconcile(desired, gatingFor(desired));
  assert.deepEqual(
    report.plan.actions.find((x) => "name" in x && x.name === "a"),
    { action: "retry", name: "a", attempt: 2 },
  );
  assertAllOk(report);
  assert.equal(reconciler.online().a?.status, "connected");
  assert.ok(toolsOf("a").includes("mcp__a__echo"));
});

test("approving the gated server's exact config spawns it", async () => {
  const approvals: Approvals = {
    [projectRoot]: { p: { hash: kernel.approvalHash({ config: gated }), status: "approved" } },
  };
  const report = await reconciler.reconcile(desired, gatingFor(desired, approvals));
  assert.ok(actions(report).includes("connect p"));
  assertAllOk(report);
  assert.equal(existsSync(marker), true, "the marker proves the spawn check can see a spawn");
  assert.ok(toolsOf("p").includes("mcp__p__echo"));
});
