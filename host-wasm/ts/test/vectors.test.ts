/**
 * Every conformance vector through the wasm build, with the comparison rules
 * of SPEC §10 "Vector files" (as `kernel/tests/vectors.rs` applies them).
 */
import { test } from "node:test";

import { evaluate, kernel } from "../index.js";
import type { Gating } from "../index.js";
import { loadVectors } from "./paths.js";
import type { Vector } from "./paths.js";

type Rules = NonNullable<Vector["compare"]>;

function join(path: string, key: string): string {
  return path === "" ? key : `${path}.${key}`;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function gatingEqual(a: unknown, b: unknown): boolean {
  try {
    return kernel.gatingEqual({ a: a as Gating, b: b as Gating });
  } catch {
    return false;
  }
}

/** The first difference between `got` and `want` at `path`, if any. */
function compare(path: string, got: unknown, want: unknown, rules: Rules): string | undefined {
  if (rules.ignore?.includes(path)) return undefined;
  if (rules.gatingEqual?.includes(path)) {
    return gatingEqual(got, want)
      ? undefined
      : `at \`${path}\`: gating ${JSON.stringify(got)} is not gatingEqual to ${JSON.stringify(want)}`;
  }
  if (rules.errors === "length" && path === "errors") {
    const ok = Array.isArray(got) && Array.isArray(want) && got.length === want.length;
    return ok ? undefined : `at \`errors\`: got ${JSON.stringify(got)}, expected ${JSON.stringify(want)} by count`;
  }
  if (isObject(got) && isObject(want)) {
    for (const [key, w] of Object.entries(want)) {
      const p = join(path, key);
      if (Object.hasOwn(got, key)) {
        const d = compare(p, got[key], w, rules);
        if (d) return d;
      } else if (!rules.ignore?.includes(p)) {
        return `at \`${p}\`: missing, expected ${JSON.stringify(w)}`;
      }
    }
    const extra = Object.keys(got).find(
      (k) => !Object.hasOwn(want, k) && !rules.ignore?.includes(join(path, k)),
    );
    return extra === undefined ? undefined : `at \`${join(path, extra)}\`: unexpected member`;
  }
  if (Array.isArray(got) && Array.isArray(want)) {
    if (got.length !== want.length) {
      return `at \`${path}\`: got ${JSON.stringify(got)}, expected ${JSON.stringify(want)}`;
    }
    for (let i = 0; i < got.length; i++) {
      const d = compare(join(path, String(i)), got[i], want[i], rules);
      if (d) return d;
    }
    return undefined;
  }
  const same = isObject(got) || Array.isArray(got) || isObject(want) || Array.isArray(want)
    ? false
    : got === want;
  return same ? undefined : `at \`${path}\`: got ${JSON.stringify(got)}, expected ${JSON.stringify(want)}`;
}

/** Why the vector fails through wasm, or undefined when it passes. */
export function check(vector: Vector): string | undefined {
  const response = evaluate(vector.request) as Record<string, unknown>;
  const want = vector.expect;
  const wantsError =
    isObject(want) && Object.keys(want).length === 1 && want.error === true;
  if (wantsError) {
    return "error" in response ? undefined : `expected an error, got ${JSON.stringify(response)}`;
  }
  if (!("ok" in response)) return `expected ok, got ${JSON.stringify(response)}`;
  const got = response.ok;
  const rules = vector.compare ?? {};
  if (rules.mustContainCI?.length || rules.mustNotContainCI?.length) {
    if (typeof got !== "string") return `expected a message, got ${JSON.stringify(got)}`;
    const lower = got.toLowerCase();
    const missing = rules.mustContainCI?.find((t) => !lower.includes(t.toLowerCase()));
    if (missing !== undefined) return `message lacks ${JSON.stringify(missing)}: ${got}`;
    const extra = rules.mustNotContainCI?.find((t) => lower.includes(t.toLowerCase()));
    if (extra !== undefined) return `message must not contain ${JSON.stringify(extra)}: ${got}`;
    return undefined;
  }
  return compare("", got, want, rules);
}

for (const vector of loadVectors()) {
  test(`${vector.id} (${vector.at})`, () => {
    const why = check(vector);
    if (why !== undefined) throw new Error(`${vector.at} [${vector.id}] ${why}`);
  });
}
