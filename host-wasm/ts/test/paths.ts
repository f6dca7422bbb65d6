/** Where the tests find the repository, its vectors and the native CLI. */
import { existsSync, readdirSync, readFileSync } from "node:fs";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

/** `host-wasm/` (this file runs from `host-wasm/dist/test/`). */
export const hostWasm = resolve(fileURLToPath(import.meta.url), "..", "..", "..");
/** The repository root. */
export const repoRoot = resolve(hostWasm, "..");

/** The native CLI, built by `cargo build -p mcp-reconcile`. */
export const nativeCli =
  process.env.MCP_RECONCILE_BIN ?? join(repoRoot, "target", "debug", "mcp-reconcile");

/** One line of a vector file (SPEC §10 "Vector files"). */
export interface Vector {
  id: string;
  source?: string;
  request: unknown;
  expect: unknown;
  note?: string;
  compare?: {
    errors?: "length";
    mustContainCI?: string[];
    mustNotContainCI?: string[];
    gatingEqual?: string[];
    ignore?: string[];
  };
  /** `file:line`, for messages. */
  at: string;
}

/**
 * Every vector: the shared ones (`../shared/vectors` beside the repository,
 * or `$MCP_RECONCILE_VECTORS`, which must exist) and the repository's own
 * `tests/vectors` (optional).
 */
export function loadVectors(): Vector[] {
  const shared = process.env.MCP_RECONCILE_VECTORS ?? join(repoRoot, "..", "shared", "vectors");
  if (!existsSync(shared)) {
    throw new Error(`no vector directory at ${shared}; set MCP_RECONCILE_VECTORS`);
  }
  const own = join(repoRoot, "tests", "vectors");
  const files = [shared, own]
    .filter((dir) => existsSync(dir))
    .flatMap((dir) =>
      readdirSync(dir)
        .filter((f) => f.endsWith(".jsonl"))
        .map((f) => join(dir, f)),
    )
    .sort();
  const vectors: Vector[] = [];
  for (const file of files) {
    readFileSync(file, "utf8")
      .split("\n")
      .forEach((line, i) => {
        if (line.trim() === "") return;
        vectors.push({ ...(JSON.parse(line) as Omit<Vector, "at">), at: `${file}:${i + 1}` });
      });
  }
  if (vectors.length === 0) throw new Error(`no vectors in ${files.join(", ")}`);
  return vectors;
}
