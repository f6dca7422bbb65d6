// Times the kernel benchmark's requests through the wasm package under Node, marshalling
// included: each call is the package's typed export (`plan(request)`, ...), which does
// JSON.stringify → wasm parse → kernel → wasm serialize → JSON.parse, as a TypeScript host calls it.
//
//   node bench/kernel-wasm.mjs --inputs DIR [--out bench/results/kernel-wasm.json] [--sizes 10,100]
//
// DIR holds the requests `cargo bench -p mcp-reconcile-kernel --bench kernel_inputs -- --out DIR`
// writes (the same inputs the criterion bench times natively). `bash bench/kernel.sh` runs it all.
import fs from "node:fs";
import path from "node:path";
import { performance } from "node:perf_hooks";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, "..");
const argv = process.argv.slice(2);
const opt = (name, fallback) => {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 ? argv[i + 1] : fallback;
};
const inputs = opt("inputs");
if (!inputs) throw new Error("usage: node bench/kernel-wasm.mjs --inputs DIR [--out FILE] [--sizes LIST]");
const out = path.resolve(opt("out", path.join(root, "bench/results/kernel-wasm.json")));
const sizes = opt("sizes", "10,100,1000,10000,100000").split(",").map(Number);
// The package's kernel entry point (`mcp-reconcile/kernel`), as built by scripts/wasm-test.sh.
const entry = path.join(root, "host-wasm/dist/kernel.js");
if (!fs.existsSync(entry)) throw new Error(`${entry} is missing: run bash scripts/wasm-test.sh`);
const { kernel: wasm } = await import(entry);

const OPS = ["plan", "connectionId", "approvalHash", "settingsDiff", "hotReload"];
const PER_SERVER = new Set(["connectionId", "approvalHash"]);

function fields(request) {
  const { op: _op, ...rest } = request;
  return rest;
}

/** Median ms per call of `f`, from batches of at least ~5 ms, over at least `budgetMs`. */
function time(f, budgetMs) {
  const t0 = performance.now();
  f(); // warm-up (and JIT) run
  const once = performance.now() - t0;
  const batch = Math.max(1, Math.ceil(5 / Math.max(once, 1e-3)));
  const samples = [];
  const start = performance.now();
  while (samples.length < 5 || (performance.now() - start < budgetMs && samples.length < 200)) {
    const s = performance.now();
    for (let i = 0; i < batch; i++) f();
    samples.push((performance.now() - s) / batch);
  }
  samples.sort((a, b) => a - b);
  const q = (p) => samples[Math.min(samples.length - 1, Math.floor(p * (samples.length - 1)))];
  return { medianMs: q(0.5), p10Ms: q(0.1), p90Ms: q(0.9), samples: samples.length, batch };
}

const results = { node: process.version, when: new Date().toISOString(), ops: {} };
for (const op of OPS) {
  results.ops[op] = {};
  for (const n of sizes) {
    const file = path.join(inputs, `${op}-${n}.json`);
    const parsed = JSON.parse(fs.readFileSync(file, "utf8"));
    const budget = n >= 10_000 ? 4000 : 1500;
    let call;
    let stringify;
    if (PER_SERVER.has(op)) {
      const requests = parsed.map(fields);
      call = () => {
        for (const r of requests) wasm[op](r);
      };
      stringify = () => {
        for (const r of requests) JSON.stringify(r);
      };
    } else {
      const request = fields(parsed);
      call = () => wasm[op](request);
      stringify = () => JSON.stringify(request);
    }
    const r = time(call, budget);
    r.stringifyMs = time(stringify, Math.min(budget, 1000)).medianMs;
    results.ops[op][n] = r;
    process.stderr.write(`wasm ${op} N=${n}: ${(r.medianMs * 1e6 / n).toFixed(0)} ns/server (${r.medianMs.toFixed(3)} ms, JSON.stringify ${r.stringifyMs.toFixed(3)} ms)\n`);
  }
}
fs.mkdirSync(path.dirname(out), { recursive: true });
fs.writeFileSync(out, JSON.stringify(results, null, 1));
process.stderr.write(`wrote ${out}\n`);
