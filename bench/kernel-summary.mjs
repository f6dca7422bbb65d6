// Summarises the kernel benchmarks: criterion's medians (native typed call and native JSON API)
// and bench/kernel-wasm.mjs's (wasm package under Node), as ns per server, the growth exponent
// k between consecutive sizes (time ∝ N^k; 1 is linear), and wasm/native ratios.
//
//   node bench/kernel-summary.mjs [--criterion DIR] [--wasm FILE] [--out DIR]
//
// Writes bench/results/kernel.json and bench/results/kernel.md (the table docs/BENCHMARKS.md shows).
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const argv = process.argv.slice(2);
const opt = (name, fallback) => {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 ? argv[i + 1] : fallback;
};
const targetDir = process.env.CARGO_TARGET_DIR ?? path.join(root, "target");
const criterion = opt("criterion", path.join(targetDir, "criterion"));
const wasmFile = opt("wasm", path.join(root, "bench/results/kernel-wasm.json"));
const outDir = opt("out", path.join(root, "bench/results"));
const OPS = ["plan", "connectionId", "approvalHash", "settingsDiff", "hotReload"];
const SIZES = [10, 100, 1000, 10000, 100000];

function criterionMs(op, fn, n) {
  try {
    const e = JSON.parse(fs.readFileSync(path.join(criterion, op, fn, String(n), "new", "estimates.json"), "utf8"));
    return { median: e.median.point_estimate / 1e6, lo: e.median.confidence_interval.lower_bound / 1e6, hi: e.median.confidence_interval.upper_bound / 1e6 };
  } catch {
    return null;
  }
}
const wasm = fs.existsSync(wasmFile) ? JSON.parse(fs.readFileSync(wasmFile, "utf8")) : { ops: {} };

const rows = [];
for (const op of OPS) {
  let prev = null;
  for (const n of SIZES) {
    const native = criterionMs(op, "native", n);
    const api = criterionMs(op, "api", n);
    const w = wasm.ops[op]?.[n] ?? null;
    if (!native && !w) continue;
    const row = {
      op,
      n,
      nativeMs: native?.median ?? null,
      nativeCi: native ? [native.lo, native.hi] : null,
      apiMs: api?.median ?? null,
      wasmMs: w?.medianMs ?? null,
      wasmP10P90: w ? [w.p10Ms, w.p90Ms] : null,
    };
    row.nativeNsPerServer = row.nativeMs === null ? null : (row.nativeMs * 1e6) / n;
    row.apiNsPerServer = row.apiMs === null ? null : (row.apiMs * 1e6) / n;
    row.wasmNsPerServer = row.wasmMs === null ? null : (row.wasmMs * 1e6) / n;
    const k = (a, b) => (a && b ? Math.log(b / a) / Math.log(n / prev.n) : null);
    row.growthNative = prev ? k(prev.nativeMs, row.nativeMs) : null;
    row.growthWasm = prev ? k(prev.wasmMs, row.wasmMs) : null;
    row.wasmOverNative = row.wasmMs && row.nativeMs ? row.wasmMs / row.nativeMs : null;
    row.wasmOverApi = row.wasmMs && row.apiMs ? row.wasmMs / row.apiMs : null;
    rows.push(row);
    prev = row;
  }
}

const f = (x, d = 0) => (x === null || x === undefined ? "—" : x.toFixed(d));
const x = (v, d) => (v === null || v === undefined ? "—" : `${v.toFixed(d)}×`);
const ms = (x) => (x === null ? "—" : x >= 100 ? x.toFixed(0) : x >= 1 ? x.toFixed(2) : x.toFixed(3));
let md = "| op | N | native median ms | native ns/server | k (native) | native JSON API ns/server | wasm ns/server | k (wasm) | wasm / native | wasm / native JSON API |\n";
md += "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
for (const r of rows) {
  md += `| \`${r.op}\` | ${r.n.toLocaleString("en-US")} | ${ms(r.nativeMs)} | ${f(r.nativeNsPerServer)} | ${f(r.growthNative, 2)} | ${f(r.apiNsPerServer)} | ${f(r.wasmNsPerServer)} | ${f(r.growthWasm, 2)} | ${x(r.wasmOverNative, 1)} | ${x(r.wasmOverApi, 2)} |\n`;
}
fs.mkdirSync(outDir, { recursive: true });
fs.writeFileSync(path.join(outDir, "kernel.json"), JSON.stringify({ wasmNode: wasm.node ?? null, rows }, null, 1));
fs.writeFileSync(path.join(outDir, "kernel.md"), md);
process.stdout.write(md);
