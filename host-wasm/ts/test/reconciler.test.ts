/**
 * The Reconciler's own rules with an in-memory executor and a virtual clock:
 * teardown before start, one run at a time, failures and backoff, and the
 * plan relations of SPEC §6 (applying a plan then replanning changes nothing).
 * The real executor is exercised in live.test.ts.
 */
import { test } from "node:test";
import assert from "node:assert/strict";

import { Reconciler, kernel } from "../index.js";
import type { Executor, Gating, ServerConfig, Servers } from "../index.js";
import { Rng } from "./random.js";

/** Records calls; a start fails while its name is in `failing`. */
class MemoryExecutor implements Executor {
  calls: string[] = [];
  live = new Map<string, { config: ServerConfig; onClosed: (e: Error) => void }>();
  failing = new Set<string>();

  async connect(name: string, config: ServerConfig, onClosed: (e: Error) => void): Promise<void> {
    this.calls.push(`connect ${name}`);
    await new Promise((r) => setTimeout(r, 1));
    if (this.failing.has(name)) throw new Error(`${name} exited with status 1`);
    this.live.set(name, { config, onClosed });
    this.calls.push(`ready ${name}`);
  }

  async disconnect(name: string): Promise<void> {
    this.calls.push(`disconnect ${name}`);
    await new Promise((r) => setTimeout(r, 5));
    this.live.delete(name);
    this.calls.push(`gone ${name}`);
  }

  crash(name: string): void {
    const held = this.live.get(name);
    this.live.delete(name);
    held?.onClosed(new Error(`${name} crashed`));
  }
}

function setup() {
  const executor = new MemoryExecutor();
  const clock = { now: 0 };
  const reconciler = new Reconciler({ executor, now: () => clock.now, seed: () => 1 });
  return { executor, clock, reconciler };
}

const cfg = (command: string): ServerConfig => ({ command });

test("every teardown finishes before the first start", async () => {
  const { executor, reconciler } = setup();
  await reconciler.reconcile({ a: cfg("a"), b: cfg("b"), c: cfg("c") }, {});
  executor.calls = [];
  await reconciler.reconcile({ a: cfg("a2"), c: cfg("c"), d: cfg("d") }, {});
  const lastGone = Math.max(executor.calls.lastIndexOf("gone a"), executor.calls.lastIndexOf("gone b"));
  const firstConnect = executor.calls.findIndex((c) => c.startsWith("connect"));
  assert.ok(lastGone >= 0 && lastGone < firstConnect, executor.calls.join(", "));
  assert.deepEqual([...executor.live.keys()].sort(), ["a", "c", "d"]);
  assert.deepEqual(executor.live.get("a")?.config, cfg("a2"));
});

test("calls queue: each run plans from the state the previous one left", async () => {
  const { executor, reconciler } = setup();
  const first = reconciler.reconcile({ a: cfg("a") }, {});
  const second = reconciler.reconcile({ a: cfg("a") }, {});
  assert.deepEqual((await first).plan.actions, [
    { action: "connect", name: "a", to: kernel.connectionId({ name: "a", config: cfg("a") }) },
  ]);
  assert.deepEqual((await second).plan.actions, [{ action: "keep", name: "a" }]);
  assert.equal(executor.calls.filter((c) => c === "connect a").length, 1);
});

test("a failed start backs off by the kernel's schedule and ends in a crash loop", async () => {
  const { executor, clock, reconciler } = setup();
  executor.failing.add("a");
  const desired = { a: cfg("a") };
  let report = await reconciler.reconcile(desired, {});
  assert.equal(report.outcomes[0]?.ok, false);
  assert.match(report.outcomes[0]?.error ?? "", /exited with status 1/);
  for (let attempts = 1; attempts < 8; attempts++) {
    const entry = reconciler.online().a!;
    assert.equal(entry.status, "failed");
    assert.equal(entry.attempts, attempts);
    const { delayMs } = kernel.backoff({ attempts, seed: 1 });
    assert.equal(entry.retryAt, clock.now + delayMs);
    report = await reconciler.reconcile(desired, {});
    assert.deepEqual(report.plan.actions, [{ action: "skip", name: "a", reason: "backing_off" }]);
    clock.now += delayMs;
    report = await reconciler.reconcile(desired, {});
    assert.deepEqual(report.plan.actions, [{ action: "retry", name: "a", attempt: attempts + 1 }]);
  }
  assert.equal(reconciler.online().a?.crashLoop, true);
  clock.now += 10 * 60_000;
  report = await reconciler.reconcile(desired, {});
  assert.deepEqual(report.plan.actions, [{ action: "skip", name: "a", reason: "crash_loop" }]);
  assert.equal(reconciler.nextRetryAt(), undefined);

  // A config change leaves the crash loop and starts counting afresh.
  executor.failing.clear();
  report = await reconciler.reconcile({ a: cfg("a-fixed") }, {});
  assert.equal(report.plan.actions[0]?.action, "reconnect");
  assert.equal(reconciler.online().a?.status, "connected");
  assert.equal(reconciler.online().a?.attempts, undefined);
});

test("a crash after a healthy start counts as a failure; five healthy minutes forgive the past", async () => {
  const { executor, clock, reconciler } = setup();
  await reconciler.reconcile({ a: cfg("a") }, {});
  executor.crash("a");
  assert.equal(reconciler.online().a?.attempts, 1);
  clock.now = reconciler.nextRetryAt()!;
  await reconciler.reconcile({ a: cfg("a") }, {});
  assert.equal(reconciler.online().a?.status, "connected");
  clock.now += 5 * 60_000;
  executor.crash("a");
  assert.equal(reconciler.online().a?.attempts, 1, "attempts reset after 5 healthy minutes");
});

test("an untrusted folder touches nothing", async () => {
  const { executor, reconciler } = setup();
  await reconciler.reconcile({ a: cfg("a") }, {});
  reconciler.setTrustedFolder(false);
  executor.calls = [];
  const report = await reconciler.reconcile({ b: cfg("b") }, {});
  assert.deepEqual(report.plan.actions, [{ action: "noop", reason: "untrusted_folder" }]);
  assert.deepEqual(executor.calls, []);
});

test("random edits: the live set is the admitted subset, and replanning is all keep/skip", async () => {
  const rng = new Rng(20240601);
  const { executor, reconciler } = setup();
  const names = ["a", "b", "c", "d", "10"];
  for (let round = 0; round < 60; round++) {
    const desired: Servers = {};
    for (const name of names) {
      if (!rng.chance(0.6)) continue;
      desired[name] = rng.chance(0.2)
        ? { command: name, args: [String(rng.int(3))], scope: "project" }
        : { command: name, args: [String(rng.int(3))], trust: rng.chance(0.5) };
    }
    const gating: Gating = kernel.gating({
      servers: desired,
      settings: rng.chance(0.3) ? { excluded: [rng.pick(names)] } : {},
      approvals: {},
      projectRoot: "/r",
    });
    await reconciler.reconcile(desired, gating);
    const admitted = Object.keys(desired).filter(
      (name) => !gating.pending?.includes(name) && !gating.excluded?.includes(name),
    );
    assert.deepEqual([...executor.live.keys()].sort(), admitted.sort(), `round ${round}`);
    for (const name of admitted) assert.deepEqual(executor.live.get(name)?.config, desired[name]);
    const again = await reconciler.reconcile(desired, gating);
    for (const action of again.plan.actions) {
      assert.ok(action.action === "keep" || action.action === "skip", JSON.stringify(action));
    }
  }
});
