// The A/B of issue 27: JSON text against JS values (serde-wasm-bindgen) across the wasm boundary,
// in one Node process, interleaved, for the one-server ops and the whole-session ops at N servers.
//
//   MCP_WASM_AB=1 bash scripts/wasm-build.sh && (cd host-wasm && npm run build)
//   node bench/wasm-ab.mjs [--sizes 10,100,1000] [--rounds 10] [--batch-ms 25] [--out FILE]
//
// Every op goes through the facade's hidden `crossAb(op, request, mode)` (cargo feature `ab`), which
// is the typed export with each side's crossing chosen by `mode`: 0 = JSON text both ways (what the
// typed exports did before issue 27), 1 = the request as a JS value, 2 = the result as a JS value
// (objects too), 3 = both as JS values. The typed export itself is timed too (since issue 27: JSON
// text in, a scalar result made in place, an object or array result through JSON text). Each round times every path of every case once, in
// an order that rotates from round to round; the table gives the median µs per call over the rounds,
// the spread (min–max over the rounds) and the ratio to the JSON path (median of the per-round
// ratios, and their min–max).
//
// Before anything is timed, every request is run through every path and `JSON.stringify` of the
// results (or the thrown error's kind and message) must be identical; so must a set of edge inputs
// (integer-like keys, `__proto__` keys, non-ASCII, lone surrogates, 1e21, -0, 0.1, `undefined`
// members, `toJSON`, nesting past the parser's limit). Differences are printed and written to the
// result file; a path that differs on an op class cannot be adopted for it.
import fs from "node:fs";
import os from "node:os";
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
const sizes = opt("sizes", "10,100,1000").split(",").map(Number);
const rounds = Number(opt("rounds", "10"));
const batchMs = Number(opt("batch-ms", "25"));
const out = path.resolve(opt("out", path.join(root, "bench/results/wasm-ab.json")));
// The package's wasm module with every raw export (`dist/wasm.js`, as `npm run build` in host-wasm
// writes it), from a build with the A/B's export: MCP_WASM_AB=1 bash scripts/wasm-build.sh.
const entry = path.join(root, "host-wasm/dist/wasm.js");
if (!fs.existsSync(entry)) throw new Error(`${entry} is missing: build the package (host-wasm: npm run build)`);
const wasm = await import(entry);
if (typeof wasm.crossAb !== "function") {
  throw new Error("this build has no crossAb export: MCP_WASM_AB=1 bash scripts/wasm-build.sh, then npm run build in host-wasm");
}

// The facade's op numbers are the order of its `ops!` list, which is the kernel's OPS order.
const OPS = [
  "transportOf", "connectionId", "sessionKey", "approvalHash", "serversEqual", "gatingEqual",
  "matchPattern", "parseMcpJson", "parseSettings", "assemble", "gating", "approvalState",
  "pendingGated", "promptable", "unavailableReason", "toolNotFound", "plan", "settingsDiff",
  "restartRequired", "hotReload", "backoff", "parseLspJson", "lspSeedId", "lspApprovalHash",
  "lspPlan", "supervise", "clientPolicy",
];
const PATHS = [
  { name: "json", mode: 0 },
  { name: "value-in", mode: 1 },
  { name: "value-out", mode: 2 },
  { name: "value", mode: 3 },
];
const number = (op) => {
  const i = OPS.indexOf(op);
  if (i < 0) throw new Error(`unknown op ${op}`);
  return i;
};
// ---------------------------------------------------------------------------------------------
// Inputs: N servers before and after one edit (as bench/kernel-wasm.mjs's scenario: 80 % user,
// 20 % project, one in ten remote, ~1 % of the servers' args edited).

const ROOT = "/home/dev/src/acme-app";
const EXCLUDED = ["legacy-*", "experimental-?"];

function serverName(i) {
  return `server-${String(i).padStart(6, "0")}`;
}

function serverConfig(i, edited) {
  if (i % 10 === 9) {
    return {
      httpUrl: `https://mcp-${i}.example.com/mcp`,
      headers: { Authorization: `Bearer token-${i}-abcdefghijklmnop`, "X-Team": "platform" },
      timeout: 30_000,
    };
  }
  return {
    command: "node",
    args: [`/opt/mcp/servers/server-${i}/dist/index.js`, "--port", String(4000 + (i % 1000)), ...(edited ? ["--verbose"] : [])],
    env: { NODE_ENV: "production", API_TOKEN: `tok-${i}-0123456789abcdef`, LOG_LEVEL: "info" },
    cwd: `/opt/mcp/servers/server-${i}`,
    timeout: 60_000,
    trust: false,
  };
}

function call(op, request) {
  return wasm.crossAb(number(op), request, 0);
}

function scenario(n) {
  const changed = new Set();
  const count = Math.max(1, Math.floor(n / 100));
  const stride = Math.max(1, Math.floor(n / count));
  for (let k = 0; k < count; k++) changed.add(k * stride + Math.floor(stride / 2));
  const layers = (edited) => {
    const user = {};
    const project = {};
    for (let i = 0; i < n; i++) {
      const config = serverConfig(i, edited && changed.has(i));
      (i % 5 === 4 ? project : user)[serverName(i)] = config;
    }
    return [
      { source: "user", servers: user },
      { source: "project", servers: project },
    ];
  };
  const oldLayers = layers(false);
  const newLayers = layers(true);
  const oldServers = call("assemble", { layers: oldLayers }).servers;
  const newServers = call("assemble", { layers: newLayers }).servers;
  const records = {};
  for (const [name, config] of Object.entries(newServers)) {
    if (config.scope === "project") records[name] = { hash: call("approvalHash", { config }), status: "approved" };
  }
  const approvals = { [ROOT]: records };
  const settings = { excluded: EXCLUDED };
  const gatingOf = (servers) => call("gating", { servers, settings, approvals, projectRoot: ROOT });
  const newGating = gatingOf(newServers);
  const oldGating = { ...newGating, pending: [] };
  const online = {};
  for (const [name, config] of Object.entries(oldServers)) online[name] = { config, status: "connected" };
  return {
    hotReload: { previous: { servers: oldServers, gating: oldGating, removed: [] }, layers: newLayers, settings, approvals, projectRoot: ROOT },
    plan: { desired: newServers, online, gating: newGating, trustedFolder: true, mode: "session", now: 1000 },
    assemble: { layers: newLayers },
    gating: { servers: newServers, settings, approvals, projectRoot: ROOT },
  };
}

// One-server ops: a batch of 100 different configs, one call each.
const ONE = 100;
function oneServerRequests(op) {
  const requests = [];
  for (let i = 0; i < ONE; i++) {
    const name = serverName(i);
    const config = serverConfig(i, false);
    switch (op) {
      case "connectionId":
      case "sessionKey":
        requests.push({ name, config });
        break;
      case "approvalHash":
      case "transportOf":
        requests.push({ config });
        break;
      case "serversEqual":
        requests.push({ a: { [name]: config }, b: { [name]: serverConfig(i, i % 2 === 0) } });
        break;
      case "matchPattern":
        requests.push({ pattern: i % 2 ? "server-*" : "legacy-??", name });
        break;
      case "gatingEqual": {
        const g = { allowed: [name, "b", "c"], excluded: EXCLUDED, pending: [name] };
        requests.push({ a: g, b: { ...g, allowed: ["c", "b", name] } });
        break;
      }
      case "toolNotFound":
      case "unavailableReason": {
        const merged = { [name]: config, other: serverConfig(i + 1, false) };
        const gating = { excluded: i % 2 ? [name] : [] };
        requests.push(op === "toolNotFound" ? { tool: `mcp__${name}__read`, merged, gating, removed: [] } : { name, merged, gating, removed: [] });
        break;
      }
      case "lspSeedId":
      case "lspApprovalHash":
        requests.push({
          name,
          config: {
            command: "typescript-language-server",
            args: ["--stdio", `--log=${i}`],
            env: { TSS_LOG: "-level verbose" },
            initializationOptions: { preferences: { quotePreference: "single" } },
            settings: { typescript: { format: { indentSize: 2 } } },
            extensionToLanguage: { ".ts": "typescript", ".tsx": "typescriptreact" },
          },
        });
        if (op === "lspApprovalHash") delete requests.at(-1).name;
        break;
      default:
        throw new Error(op);
    }
  }
  return requests;
}

// ---------------------------------------------------------------------------------------------
// Edge inputs: what JSON text and JS values might disagree on.

function edgeConfig() {
  // Own `__proto__` keys and integer-like keys, as JSON.parse makes them.
  const env = JSON.parse('{"Z":"z","__proto__":"own","10":"ten","2":"two","Ω":"omega"}');
  const deep = JSON.parse('{"__proto__":{"__proto__":[1,{"__proto__":null}]}}');
  return {
    command: "nöde 日本 🚀",
    args: ["a\u0000b", "tab\tnew\nline", "quote\"back\\slash", "\u2028\u2029", "\u{1f600}", "\u007f"],
    env,
    cwd: "/tmp/ü",
    timeout: 1e21,
    extra: { neg0: -0, tenth: 0.1, tiny: 5e-324, huge: 1.7976931348623157e308, big: 2 ** 53 + 2, frac: 1.5e-7, exp: 1e-7, minus: -1e21 },
    deep,
  };
}

function edgeRequests() {
  const config = edgeConfig();
  const proto = JSON.parse('{"__proto__":{"command":"p"},"10":{"command":"ten"},"2":{"httpUrl":"http://h/mcp"},"é":{"command":"e"}}');
  const undefinedMember = { command: "node", env: undefined, args: ["x", undefined] };
  const date = { command: "node", started: new Date(0) };
  const lone = { command: "\ud800", args: ["a\udc00b"] };
  let nested = "x";
  for (let i = 0; i < 200; i++) nested = [nested];
  const tooDeep = { command: "node", deep: nested };
  const nonFinite = { command: "node", timeout: NaN, extra: [Infinity, -Infinity] };
  const cases = [];
  for (const [label, c] of [
    ["edge config", config],
    ["undefined members", undefinedMember],
    ["Date (toJSON)", date],
    ["lone surrogates", lone],
    ["nesting 200 deep", tooDeep],
    ["NaN / Infinity", nonFinite],
  ]) {
    cases.push(["connectionId", label, { name: "é::__proto__", config: c }]);
    cases.push(["approvalHash", label, { config: c }]);
    cases.push(["serversEqual", label, { a: { x: c }, b: { x: c } }]);
    cases.push(["transportOf", label, { config: c }]);
    cases.push(["lspSeedId", label, { name: "ls", config: { ...c, settings: c.extra ?? {} } }]);
    cases.push(["assemble", label, { layers: [{ source: "user", servers: { x: c } }] }]);
  }
  const layers = [{ source: "user", servers: proto }, { source: "project", servers: { "3": config } }];
  cases.push(["assemble", "__proto__ / integer-like server names", { layers }]);
  const servers = call("assemble", { layers }).servers;
  cases.push(["gating", "__proto__ / integer-like server names", { servers, settings: {}, approvals: {}, projectRoot: "/r" }]);
  const online = Object.fromEntries(Object.entries(servers).map(([k, v]) => [k, { config: v, status: "connected" }]));
  delete online["2"];
  const gating = call("gating", { servers, settings: {}, approvals: {}, projectRoot: "/r" });
  cases.push(["plan", "__proto__ / integer-like server names", { desired: servers, online, gating, trustedFolder: true, mode: "session", now: 0 }]);
  cases.push(["hotReload", "__proto__ / integer-like server names", {
    previous: { servers: null, gating: {}, removed: [] }, layers, settings: {}, approvals: {}, projectRoot: "/r",
  }]);
  cases.push(["connectionId", "not an object", "a"]);
  cases.push(["connectionId", "missing field", { name: 5 }]);
  return cases;
}

/** `JSON.stringify` of a call's result, or of the error it threw. */
function outcome(f) {
  try {
    return JSON.stringify({ ok: f() });
  } catch (e) {
    return JSON.stringify({ threw: { kind: e?.kind ?? null, message: String(e?.message ?? e) } });
  }
}

/** Every path's answer to `request`, and which paths differ from the typed export's. */
function compare(op, request) {
  const typed = outcome(() => wasm[op](request));
  const differ = [];
  for (const p of PATHS) {
    const got = outcome(() => wasm.crossAb(number(op), request, p.mode));
    if (got !== typed) differ.push({ path: p.name, got: got.slice(0, 300), typed: typed.slice(0, 300) });
  }
  return differ;
}

// ---------------------------------------------------------------------------------------------
// Timing.

/** µs per call of `f`, over a batch of at least `batchMs`. */
function timeBatch(f, calls, perBatch) {
  const start = performance.now();
  for (let i = 0; i < perBatch; i++) f();
  return ((performance.now() - start) * 1000) / (perBatch * calls);
}

function quantile(sorted, p) {
  return sorted[Math.min(sorted.length - 1, Math.floor(p * (sorted.length - 1)))];
}

const median = (xs) => quantile([...xs].sort((a, b) => a - b), 0.5);

const cases = [];
// Every op whose result is a string, a boolean or null, on one server's worth of input.
const ONE_SERVER_OPS = [
  "connectionId", "approvalHash", "serversEqual", "transportOf", "lspSeedId", "sessionKey",
  "lspApprovalHash", "matchPattern", "gatingEqual", "toolNotFound", "unavailableReason",
];
for (const op of ONE_SERVER_OPS) {
  cases.push({ class: "one-server", op, n: 1, requests: oneServerRequests(op) });
}
for (const n of sizes) {
  const s = scenario(n);
  for (const op of ["hotReload", "plan", "assemble", "gating"]) {
    cases.push({ class: "whole-session", op, n, requests: [s[op]] });
  }
}

const differences = [];
for (const c of cases) {
  for (const request of c.requests) {
    for (const d of compare(c.op, request)) differences.push({ op: c.op, n: c.n, input: "timed request", ...d });
  }
}
for (const [op, label, request] of edgeRequests()) {
  for (const d of compare(op, request)) differences.push({ op, input: label, ...d });
}

const load = () => os.loadavg()[0].toFixed(2);
console.error(`node ${process.version}, ${os.cpus()[0]?.model} × ${os.cpus().length}, load ${load()}`);
console.error(`${differences.length} differences from the typed export`);
for (const d of differences) {
  console.error(`  ${d.op}${d.n ? ` N=${d.n}` : ""} (${d.input}) ${d.path}:\n    got   ${d.got}\n    typed ${d.typed}`);
}
const grouped = new Map();
for (const d of differences) {
  const key = `${d.path}: ${d.input}`;
  grouped.set(key, [...(grouped.get(key) ?? []), `${d.op}${d.n ? `@${d.n}` : ""}`]);
}
console.error("differences by path and input:");
for (const [key, ops] of grouped) console.error(`  ${key} -> ${ops.join(", ")}`);
if (differences.length === 0) console.error("  none");

const timedPaths = [{ name: "typed", mode: -1 }, ...PATHS];
const fn = (c, p) => {
  const i = number(c.op);
  const requests = c.requests;
  if (p.mode < 0) {
    const f = wasm[c.op];
    return () => {
      for (const r of requests) f(r);
    };
  }
  return () => {
    for (const r of requests) wasm.crossAb(i, r, p.mode);
  };
};
// Warm-up, and the batch size: calls per sample so that one sample takes about `batchMs`.
for (const c of cases) {
  c.samples = Object.fromEntries(timedPaths.map((p) => [p.name, []]));
  c.batch = 1;
  for (const p of timedPaths) {
    const f = fn(c, p);
    const start = performance.now();
    let runs = 0;
    while (performance.now() - start < 50 || runs < 3) {
      f();
      runs++;
    }
    const each = (performance.now() - start) / runs;
    c.batch = Math.max(c.batch, Math.ceil(batchMs / Math.max(each, 1e-3)));
  }
}
const loads = [load()];
for (let r = 0; r < rounds; r++) {
  for (const c of cases) {
    // Rotate the order of the paths so that none always runs first.
    for (let k = 0; k < timedPaths.length; k++) {
      const p = timedPaths[(k + r) % timedPaths.length];
      c.samples[p.name].push(timeBatch(fn(c, p), c.requests.length, c.batch));
    }
  }
  loads.push(load());
}

const results = {
  node: process.version,
  cpu: `${os.cpus()[0]?.model} × ${os.cpus().length}`,
  os: `${os.type()} ${os.release()}`,
  memoryGiB: Math.round(os.totalmem() / 2 ** 30),
  when: new Date().toISOString(),
  rounds,
  batchMs,
  load: loads,
  differences,
  cases: [],
};
const fmt = (x) => (x >= 100 ? x.toFixed(0) : x >= 10 ? x.toFixed(1) : x.toFixed(2));
const lines = [
  "| class | op | N | JSON text µs (min–max) | JS values µs (min–max) | JS values / JSON | request as value / JSON | result as value / JSON | typed export µs | typed / JSON |",
  "|---|---|---|---|---|---|---|---|---|---|",
];
const r = (x) => `${x.median.toFixed(2)}× (${x.min.toFixed(2)}–${x.max.toFixed(2)})`;
for (const c of cases) {
  const s = c.samples;
  const ratio = (name) => s[name].map((x, i) => x / s.json[i]);
  const row = {
    class: c.class,
    op: c.op,
    n: c.n,
    callsPerSample: c.requests.length * c.batch,
    medianUs: Object.fromEntries(timedPaths.map((p) => [p.name, median(s[p.name])])),
    minUs: Object.fromEntries(timedPaths.map((p) => [p.name, Math.min(...s[p.name])])),
    maxUs: Object.fromEntries(timedPaths.map((p) => [p.name, Math.max(...s[p.name])])),
    ratio: Object.fromEntries([{ name: "typed" }, ...PATHS.slice(1)].map((p) => {
      const rs = ratio(p.name);
      return [p.name, { median: median(rs), min: Math.min(...rs), max: Math.max(...rs) }];
    })),
  };
  results.cases.push(row);
  const m = row.medianUs;
  const span = (name) => `${fmt(m[name])} (${fmt(row.minUs[name])}–${fmt(row.maxUs[name])})`;
  lines.push(
    `| ${c.class} | \`${c.op}\` | ${c.class === "one-server" ? "—" : c.n} | ${span("json")} | ${span("value")} | **${r(row.ratio.value)}** | ${r(row.ratio["value-in"])} | ${r(row.ratio["value-out"])} | ${fmt(m.typed)} | ${r(row.ratio.typed)} |`,
  );
}
console.log(lines.join("\n"));
console.error(`load during the rounds: ${loads.join(" ")}`);
fs.mkdirSync(path.dirname(out), { recursive: true });
fs.writeFileSync(out, JSON.stringify(results, null, 2) + "\n");
console.error(`wrote ${path.relative(process.cwd(), out)}`);
