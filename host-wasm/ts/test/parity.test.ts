/**
 * Native and wasm answer alike, byte for byte (SPEC §6 invariant 5, §12):
 * the same requests — every vector request, plus seeded random ones
 * including malformed — go to `mcp-reconcile eval` and to the wasm
 * `evaluate`, and `JSON.stringify` of each wasm response must equal the
 * native response line. The typed exports (`kernel.connectionId(fields)`,
 * …), whose scalar results cross as JS values rather than JSON text, must
 * answer each request with an op alike too: `{ok: result}`, or the thrown
 * error's `{error: {kind, message}}`.
 */
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { test } from "node:test";
import assert from "node:assert/strict";

import { evaluate, isKernelFailure, kernel } from "../index.js";
import type { Op } from "../index.js";
import { loadVectors, nativeCli } from "./paths.js";
import { Rng, randomRequests } from "./random.js";

const RANDOM = Number(process.env.PARITY_COUNT ?? 3000);
const SEED = Number(process.env.PARITY_SEED ?? Date.now() % 2 ** 32);

function native(lines: string[]): string[] {
  assert.ok(existsSync(nativeCli), `no native CLI at ${nativeCli}: run \`cargo build -p mcp-reconcile\``);
  const run = spawnSync(nativeCli, ["eval"], {
    input: lines.join("\n") + "\n",
    encoding: "utf8",
    maxBuffer: 1 << 30,
  });
  assert.equal(run.status, 0, `mcp-reconcile eval failed: ${run.stderr}`);
  const out = run.stdout.split("\n");
  assert.equal(out.pop(), "", "the native output ends with a newline");
  return out;
}

function same(requests: unknown[], label: string): void {
  const lines = requests.map((r) => JSON.stringify(r));
  const expected = native(lines);
  assert.equal(expected.length, lines.length, "one native line per request");
  const mismatches: string[] = [];
  requests.forEach((request, i) => {
    const got = JSON.stringify(evaluate(request));
    if (got !== expected[i]) {
      mismatches.push(`request ${lines[i]}\n  wasm:   ${got}\n  native: ${expected[i]}`);
    }
  });
  assert.equal(mismatches.length, 0, `${label}: ${mismatches.length} of ${requests.length} differ:\n${mismatches.slice(0, 10).join("\n")}`);
  sameTyped(requests, lines, expected, label);
}

/** The typed export's answer to an object request with a known op, as a response line. */
function typed(request: unknown): string | undefined {
  if (request === null || typeof request !== "object" || Array.isArray(request)) return undefined;
  const op = (request as { op?: unknown }).op;
  if (typeof op !== "string" || !Object.hasOwn(kernel, op)) return undefined;
  const run = kernel[op as Op] as (fields: unknown) => unknown;
  try {
    return JSON.stringify({ ok: run(request) });
  } catch (e) {
    assert.ok(isKernelFailure(e), `${op} threw ${String(e)}`);
    return JSON.stringify({ error: { kind: e.kind, message: e.message } });
  }
}

function sameTyped(requests: unknown[], lines: string[], expected: string[], label: string): void {
  const mismatches: string[] = [];
  let checked = 0;
  requests.forEach((request, i) => {
    const got = typed(request);
    if (got === undefined) return;
    checked++;
    if (got !== expected[i]) {
      mismatches.push(`request ${lines[i]}\n  typed:  ${got}\n  native: ${expected[i]}`);
    }
  });
  assert.ok(checked > 0 || requests.length < 10, `${label}: no request went to a typed export`);
  assert.equal(mismatches.length, 0, `${label} (typed exports): ${mismatches.length} of ${checked} differ:\n${mismatches.slice(0, 10).join("\n")}`);
}

test("every vector request answers alike natively and in wasm", () => {
  same(loadVectors().map((v) => v.request), "vector requests");
});

test(`${RANDOM} random requests answer alike (PARITY_SEED=${SEED})`, () => {
  const seeds = loadVectors().map((v) => v.request);
  same(randomRequests(new Rng(SEED), RANDOM, seeds), `seed ${SEED}`);
});

test("deep nesting answers alike on both sides of the depth limit", () => {
  const nest = (depth: number) => {
    let v: unknown = "x";
    for (let i = 0; i < depth; i++) v = [v];
    return { op: "approvalHash", config: { command: "x", deep: v } };
  };
  same([nest(100), nest(124), nest(125), nest(126), nest(127), nest(128), nest(200), nest(1000)], "nesting");
});
