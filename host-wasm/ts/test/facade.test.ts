/**
 * The wasm facade's contract (SPEC §12): `evaluate` never throws, typed
 * exports throw an `Error` carrying `kind`, results are plain JS objects, and
 * no input makes the module trap.
 */
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { test } from "node:test";
import assert from "node:assert/strict";

import { evaluate, isKernelFailure, kernel } from "../index.js";
import { hostWasm } from "./paths.js";

function assertPlain(value: unknown, path = "result"): void {
  if (value === null || typeof value !== "object") return;
  const proto = Object.getPrototypeOf(value);
  assert.ok(
    proto === Object.prototype || proto === Array.prototype,
    `${path} is a ${value.constructor?.name}, not a plain object or array`,
  );
  for (const [k, v] of Object.entries(value)) assertPlain(v, `${path}.${k}`);
}

test("evaluate answers hostile input with an error response instead of throwing", () => {
  const cyclic: Record<string, unknown> = { op: "connectionId" };
  cyclic.self = cyclic;
  let deep: unknown = "x";
  for (let i = 0; i < 100_000; i++) deep = [deep];
  const hostile: unknown[] = [
    undefined,
    () => 1,
    Symbol("s"),
    10n,
    { op: "connectionId", name: 1n },
    cyclic,
    { toJSON() { throw new Error("toJSON failed"); } },
    { get op() { throw new TypeError("getter failed"); } },
    new Proxy({}, { ownKeys() { throw new Error("proxy trap"); } }),
    deep,
    null,
    "{\"op\":\"connectionId\"}",
    42,
    [],
    { op: "nope" },
    { op: "sessionKey", name: "a", config: { command: "x", includeTools: 5 } },
    { op: "plan", desired: { a: { command: "x" } }, online: { a: { config: {}, status: "weird" } } },
  ];
  for (const input of hostile) {
    const response = evaluate(input) as { ok?: unknown; error?: { kind: string; message: string } };
    assert.ok(response.error, `expected an error response, got ${JSON.stringify(response)}`);
    assert.match(response.error.kind, /^(invalid-json|invalid-request|unknown-op|invalid-config)$/);
    assert.equal(typeof response.error.message, "string");
    assertPlain(response);
  }
  // The module still works after all of that: nothing trapped.
  assert.deepEqual(evaluate({ op: "matchPattern", pattern: "a*", name: "ab" }), { ok: true });
});

test("typed exports return the ok value and throw an Error carrying kind", () => {
  assert.equal(kernel.connectionId({ name: "a", config: { command: "x" } }), "a::d139e187f8f3c21d");
  assert.equal(kernel.transportOf({ config: { httpUrl: "http://127.0.0.1:1/mcp" } }), "http");
  const cases: [() => unknown, string][] = [
    [() => kernel.connectionId({ name: 5 } as never), "invalid-request"],
    [() => kernel.connectionId("a" as never), "invalid-request"],
    [() => kernel.connectionId(undefined as never), "invalid-json"],
    [() => kernel.sessionKey({ name: "a", config: { command: "x", includeTools: 5 } } as never), "invalid-config"],
  ];
  for (const [call, kind] of cases) {
    assert.throws(call, (e: unknown) => {
      assert.ok(e instanceof Error, "a real Error");
      assert.ok(isKernelFailure(e));
      assert.equal(e.kind, kind, e.message);
      return true;
    });
  }
});

test("a typed export ignores an `op` among the fields", () => {
  const request = { op: "sessionKey", name: "a", config: { command: "x" } } as never;
  assert.equal(kernel.connectionId(request), "a::d139e187f8f3c21d");
});

test("results are plain objects in ECMAScript property order, __proto__ an own key", () => {
  const config = JSON.parse('{"command":"x","__proto__":{"a":1},"10":1,"2":2}');
  const servers = { b: config, "7": { command: "y" }, a: { command: "z" } };
  const response = evaluate({ op: "serversEqual", a: servers, b: servers });
  assert.deepEqual(response, { ok: true });
  // `__proto__` arrives as an ordinary own key, not as a prototype.
  const plain = JSON.parse('{"command":"x","10":1,"2":2}');
  assert.equal(kernel.serversEqual({ a: { b: config }, b: { b: plain } }), false);
  const pending = kernel.pendingGated({
    servers: { z: { command: "p", scope: "project" }, 10: { command: "p", scope: "project" }, 2: { command: "p", scope: "workspace" } },
    approvals: {},
    projectRoot: "/r",
  });
  assert.deepEqual(pending, ["2", "10", "z"]);
  assertPlain(kernel.gating({ servers: {}, settings: { allowed: ["a"] }, approvals: {}, projectRoot: "/r" }));
});

test("a scalar result made in place is the one JSON text gives", () => {
  // Typed exports make string, boolean and null results with serde-wasm-bindgen;
  // `evaluate` still goes through JSON text. Inputs JSON text and JS values might
  // disagree on must still give the same answer.
  const env = JSON.parse('{"Z":"z","__proto__":"own","10":"ten","2":"two","Ω":"ω"}');
  const config = {
    command: "nöde 日本 🚀",
    args: ["a\u0000b", "\u2028", "\u{1f600}", "quote\"back\\slash"],
    env,
    timeout: 1e21,
    extra: { neg0: -0, tenth: 0.1, tiny: 5e-324, undef: undefined },
  };
  const requests = [
    { op: "connectionId", name: "é::__proto__", config },
    { op: "sessionKey", name: "2", config },
    { op: "approvalHash", config },
    { op: "transportOf", config },
    { op: "serversEqual", a: { x: config }, b: { x: { ...config, extra: { neg0: 0, tenth: 0.1, tiny: 5e-324 } } } },
    { op: "matchPattern", pattern: "ü*", name: "über" },
    { op: "unavailableReason", name: "x", merged: { x: config }, gating: { excluded: ["x"] }, removed: [] },
    { op: "toolNotFound", tool: "mcp__x__t", merged: {}, gating: {}, removed: [] },
    { op: "connectionId", name: "a", config: { command: "\ud800" } },
  ] as const;
  for (const request of requests) {
    const run = kernel[request.op] as (fields: unknown) => unknown;
    let got: string;
    try {
      got = JSON.stringify({ ok: run(request) });
    } catch (e) {
      assert.ok(isKernelFailure(e));
      got = JSON.stringify({ error: { kind: e.kind, message: e.message } });
    }
    assert.equal(got, JSON.stringify(evaluate(request)), request.op);
  }
});

test("cost of a call through JSON text (reported, not asserted)", (t) => {
  const servers: Record<string, unknown> = {};
  for (let i = 0; i < 50; i++) servers[`s${i}`] = { command: "node", args: [`srv${i}.js`], env: { A: "1" } };
  const requests = [
    { op: "connectionId", name: "a", config: { command: "node", args: ["a.js"] } },
    { op: "pendingGated", servers, approvals: {}, projectRoot: "/r" },
  ];
  for (const request of requests) {
    const n = 2000;
    const start = process.hrtime.bigint();
    for (let i = 0; i < n; i++) evaluate(request);
    const us = Number(process.hrtime.bigint() - start) / 1000 / n;
    t.diagnostic(`${request.op}: ${us.toFixed(1)} µs per evaluate (${JSON.stringify(request).length} bytes in)`);
  }
});

test("the README's example is ts/example/cli.ts, verbatim", () => {
  const example = readFileSync(join(hostWasm, "ts", "example", "cli.ts"), "utf8");
  const readme = readFileSync(join(hostWasm, "README.md"), "utf8");
  assert.ok(readme.includes("```ts\n" + example + "```"), "copy ts/example/cli.ts into README.md");
});
