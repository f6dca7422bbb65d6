// The gateway tax (issue 41): what a tools/call costs through each system, against the same
// fixture server called directly, in one run. bench/tax.sh builds and installs; this runs.
//
// The timing client is the Rust driver `mcp-tax-bench` (tests/fixture-server/src/bin): blocking
// std IO and raw JSON-RPC, so the numbers are the systems', not a Node client's. This script
// only starts the HTTP systems, hands the driver each system in turn (rounds interleave the
// systems, so a noisy moment hits all of them) and writes bench/results/tax.{json,md}.
//
//   stdio: direct (the fixture), serve --no-daemon, serve (a session of the per-user daemon)
//   http:  direct-http (the fixture's own streamable HTTP), serve --http, mcp-proxy (crates.io);
//          mcp-hub (npm) only on request (see ALL)
//
// Options: --rounds R (3) --calls N (2000) --warmup N (300) --pipelined N (4000) --inflight K
// (16) --systems a,b,... --out DIR (bench/results) --target-dir DIR; --baseline DIR also runs
// `serve-no-daemon@base`, `serve-daemon@base` and `serve-http@base` with DIR/mcp-reconcile (a
// build from before a change: before and after in one run).
import { spawn, spawnSync } from "node:child_process";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const argv = process.argv.slice(2);
const opt = (name, fallback) => {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 ? argv[i + 1] : fallback;
};
// mcp-hub (4.2.1) serves only the legacy SSE transport (GET /mcp, POST /messages), which the
// driver does not speak yet: `--systems ...,mcp-hub` fails with its 404 until it does.
const ALL = ["direct", "serve-no-daemon", "serve-daemon", "direct-http", "serve-http", "mcp-proxy"];
const o = {
  rounds: Number(opt("rounds", "3")),
  calls: opt("calls", "2000"),
  warmup: opt("warmup", "300"),
  pipelined: opt("pipelined", "4000"),
  inflight: opt("inflight", "16"),
  systems: opt("systems", ALL.join(",")).split(",").filter(Boolean),
  out: path.resolve(opt("out", path.join(root, "bench/results"))),
  target: opt("target-dir", process.env.CARGO_TARGET_DIR ?? path.join(root, "target")),
  baseline: opt("baseline", null),
};
if (o.baseline && !argv.includes("--systems")) {
  o.systems.splice(2, 0, "serve-no-daemon@base", "serve-daemon@base");
  o.systems.splice(o.systems.indexOf("serve-http") + 1, 0, "serve-http@base");
}
const bin = {
  host: path.join(o.target, "release/mcp-reconcile"),
  base: o.baseline && path.resolve(o.baseline, "mcp-reconcile"),
  fixture: path.join(o.target, "release/mcp-fixture-server"),
  driver: path.join(o.target, "release/mcp-tax-bench"),
  proxy: path.join(root, "bench/peers/.cargo/bin/mcp-proxy"),
  hub: path.join(root, "bench/peers/node_modules/mcp-hub/dist/cli.js"),
};
const MCP_PROXY_VERSION = "0.6.0";

// Every process this run starts carries its system's tag (MCP_RECONCILE_TAX_BENCH=PID:SYSTEM):
// a daemon that detached is found and stopped too, and the driver sums the CPU time of the
// processes of the system it measures.
const TAG = `MCP_RECONCILE_TAX_BENCH=${process.pid}:`;
const tagOf = (system) => `${process.pid}:${system}`;
const runDir = fs.mkdtempSync(path.join(os.tmpdir(), "mcp-tax-"));
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function killTagged(signal) {
  for (const pid of fs.readdirSync("/proc").filter((d) => /^\d+$/.test(d))) {
    if (Number(pid) === process.pid) continue;
    try {
      if (fs.readFileSync(`/proc/${pid}/environ`, "latin1").split("\0").some((v) => v.startsWith(TAG))) process.kill(Number(pid), signal);
    } catch {}
  }
}
async function cleanup() {
  killTagged("SIGTERM");
  await sleep(300);
  killTagged("SIGKILL");
}
for (const sig of ["SIGINT", "SIGTERM", "SIGHUP"]) {
  process.on(sig, async () => {
    await cleanup();
    fs.rmSync(runDir, { recursive: true, force: true });
    process.exit(130);
  });
}

const fixtureArgs = ["--name", "fx", "--tools", "echo"];
const home = path.join(runDir, "home");
const project = path.join(runDir, "project");
fs.mkdirSync(project, { recursive: true });
/** The environment of `system`'s processes: its tag, a private home, and (its own daemon per
 * host build) its own runtime dir. */
function envOf(system) {
  const variant = system.endsWith("@base") ? "base" : "new";
  const runtime = path.join(runDir, `run-${variant}`);
  fs.mkdirSync(runtime, { recursive: true, mode: 0o700 });
  return {
    ...process.env,
    MCP_RECONCILE_TAX_BENCH: tagOf(system),
    HOME: home,
    XDG_RUNTIME_DIR: runtime,
    XDG_STATE_HOME: path.join(home, "xdg/state"),
    XDG_DATA_HOME: path.join(home, "xdg/data"),
    XDG_CONFIG_HOME: path.join(home, "xdg/config"),
    // Peers log what their defaults say, but not per request at debug level.
    RUST_LOG: "warn",
  };
}
/** `serve`'s arguments for `system`: a settings file whose server carries the system's tag. */
function serveArgs(system) {
  const settings = path.join(runDir, `settings-${system.replace(/[^a-z@-]/g, "")}.json`);
  const entry = { command: bin.fixture, args: fixtureArgs, env: { MCP_RECONCILE_TAX_BENCH: tagOf(system) } };
  fs.writeFileSync(settings, JSON.stringify({ mcpServers: { fx: entry } }));
  return ["serve", "--user-settings", settings, "--project", project, "--state-dir", path.join(runDir, "state")];
}
const hostOf = (system) => (system.endsWith("@base") ? bin.base : bin.host);

function freePort() {
  return new Promise((resolve) => {
    const s = net.createServer().listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}
async function waitPort(port, child) {
  for (let i = 0; i < 600; i++) {
    if (child.exitCode !== null) throw new Error(`exited with ${child.exitCode}: ${child.errText}`);
    const ok = await new Promise((resolve) => {
      const c = net.connect(port, "127.0.0.1", () => (c.end(), resolve(true)));
      c.on("error", () => resolve(false));
    });
    if (ok) return;
    await sleep(100);
  }
  throw new Error(`nothing listens on ${port}`);
}
/** Starts an HTTP system in its own process group. Its stderr goes to a file, never a pipe:
 * the driver runs synchronously, and a pipe nobody drains meanwhile would stop a system that
 * logs per request. */
function startDetached(system, cmd, args, cwd = runDir) {
  const log = path.join(runDir, `${system.replace(/[^a-z@-]/g, "")}.log`);
  const fd = fs.openSync(log, "a");
  const child = spawn(cmd, args, { cwd, env: envOf(system), detached: true, stdio: ["ignore", "ignore", fd] });
  fs.closeSync(fd);
  Object.defineProperty(child, "errText", { get: () => fs.readFileSync(log, "utf8").slice(-4000) });
  return child;
}
function stopGroup(child) {
  try {
    process.kill(-child.pid, "SIGTERM");
  } catch {}
}

/** Starts an HTTP system: its URL, token and a stop function. */
async function startHttp(system) {
  const port = await freePort();
  let child;
  let url = `http://127.0.0.1:${port}/mcp`;
  let token;
  if (system === "direct-http") {
    child = startDetached(system, bin.fixture, [...fixtureArgs, "--http", `127.0.0.1:${port}`]);
  } else if (system.startsWith("serve-http")) {
    token = "tax-bench-" + process.pid;
    const file = path.join(runDir, "token");
    fs.writeFileSync(file, token + "\n", { mode: 0o600 });
    child = startDetached(system, hostOf(system), [...serveArgs(system), "--no-daemon", "--http", `127.0.0.1:${port}`, "--token-file", file], project);
  } else if (system === "mcp-proxy") {
    const config = path.join(runDir, "proxy.toml");
    fs.writeFileSync(
      config,
      `[proxy]\nname = "tax"\nseparator = "__"\n\n[proxy.listen]\nhost = "127.0.0.1"\nport = ${port}\n\n` +
        `[[backends]]\nname = "fx"\ntransport = "stdio"\ncommand = ${JSON.stringify(bin.fixture)}\n` +
        `args = ${JSON.stringify(fixtureArgs)}\n`,
    );
    child = startDetached(system, bin.proxy, ["--config", config]);
    url = `http://127.0.0.1:${port}/`;
  } else if (system === "mcp-hub") {
    const config = path.join(runDir, "hub.json");
    fs.writeFileSync(config, JSON.stringify({ mcpServers: { fx: { command: bin.fixture, args: fixtureArgs } } }));
    child = startDetached(system, process.execPath, [bin.hub, "--port", String(port), "--config", config]);
  } else {
    throw new Error(`unknown system ${system}`);
  }
  await waitPort(port, child);
  return { url, token, stop: () => stopGroup(child) };
}

function drive(system, args) {
  const common = ["--calls", o.calls, "--warmup", o.warmup, "--pipelined", o.pipelined, "--inflight", o.inflight, "--cpu-tag", `MCP_RECONCILE_TAX_BENCH=${tagOf(system)}`];
  const r = spawnSync(bin.driver, [...args.slice(0, 1), ...common, ...args.slice(1)], { env: envOf(system), cwd: project, encoding: "utf8", timeout: 600_000 });
  if (r.status !== 0) throw new Error(`driver ${args.join(" ")}: ${r.stderr || r.error}`);
  return JSON.parse(r.stdout.trim().split("\n").pop());
}

async function measure(system) {
  if (system === "direct") return drive(system, ["stdio", "--", bin.fixture, ...fixtureArgs]);
  if (system.startsWith("serve-no-daemon")) return drive(system, ["stdio", "--", hostOf(system), ...serveArgs(system), "--no-daemon"]);
  if (system.startsWith("serve-daemon")) return drive(system, ["stdio", "--", hostOf(system), ...serveArgs(system)]);
  const http = await startHttp(system);
  try {
    return drive(system, ["http", "--url", http.url, ...(http.token ? ["--token", http.token] : [])]);
  } finally {
    http.stop();
    await sleep(200);
  }
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
};

const runs = Object.fromEntries(o.systems.map((s) => [s, []]));
const load0 = fs.readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ");
try {
  for (let round = 0; round < o.rounds; round++) {
    // Rotated each round: no system is always first (cold caches) or last.
    const order = o.systems.map((_, i) => o.systems[(i + round) % o.systems.length]);
    for (const system of order) {
      const r = await measure(system);
      runs[system].push(r);
      console.error(`round ${round + 1} ${system}: p50 ${r.sequential.p50.toFixed(1)} µs, p99 ${r.sequential.p99.toFixed(1)} µs, CPU ${r.cpu_us_per_call?.toFixed(1)} µs/call, ${r.throughput_per_s.toFixed(0)} calls/s with ${r.inflight} in flight`);
    }
  }
} finally {
  await cleanup();
  fs.rmSync(runDir, { recursive: true, force: true });
}

const rows = {};
for (const [system, rs] of Object.entries(runs)) {
  if (!rs.length) continue;
  rows[system] = {
    transport: rs[0].transport,
    p50_us: median(rs.map((r) => r.sequential.p50)),
    p99_us: median(rs.map((r) => r.sequential.p99)),
    throughput_per_s: median(rs.map((r) => r.throughput_per_s)),
    cpu_us_per_call: median(rs.map((r) => r.cpu_us_per_call ?? NaN)),
    switches_per_call: median(rs.map((r) => r.switches_per_call ?? NaN)),
    rounds: rs,
  };
}
// Ratios: against the direct server over the same transport, and against mcp-proxy (HTTP).
for (const row of Object.values(rows)) {
  const base = rows[row.transport === "http" ? "direct-http" : "direct"];
  if (base) {
    row.added_p50_us = row.p50_us - base.p50_us;
    row.added_cpu_us = row.cpu_us_per_call - base.cpu_us_per_call;
    row.throughput_vs_direct = row.throughput_per_s / base.throughput_per_s;
  }
  const proxy = rows["mcp-proxy"];
  if (proxy) {
    row.p50_vs_mcp_proxy = row.p50_us / proxy.p50_us;
    row.throughput_vs_mcp_proxy = row.throughput_per_s / proxy.throughput_per_s;
  }
}
const hubVersion = (() => {
  try {
    return JSON.parse(fs.readFileSync(path.join(path.dirname(bin.hub), "..", "package.json"), "utf8")).version;
  } catch {
    return null;
  }
})();
const meta = {
  date: new Date().toISOString(),
  commit: spawnSync("git", ["rev-parse", "--short", "HEAD"], { cwd: root, encoding: "utf8" }).stdout.trim(),
  cpus: os.cpus().length,
  cpu: os.cpus()[0]?.model,
  load: { before: load0, after: fs.readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ") },
  options: { rounds: o.rounds, calls: Number(o.calls), warmup: Number(o.warmup), pipelined: Number(o.pipelined), inflight: Number(o.inflight) },
  peers: { mcpProxy: MCP_PROXY_VERSION, mcpHub: hubVersion },
  client: "mcp-tax-bench (Rust, blocking std IO, raw JSON-RPC; HTTP/1.1 keep-alive, TCP_NODELAY)",
  server: "mcp-fixture-server --tools echo (release), tools/call echo {text: hello}",
};
fs.mkdirSync(o.out, { recursive: true });
fs.writeFileSync(path.join(o.out, "tax.json"), JSON.stringify({ meta, systems: rows }, null, 2) + "\n");

const f = (x, d = 0) => (x === undefined || Number.isNaN(x) ? "—" : x.toFixed(d));
const lines = [
  `# Gateway tax (issue 41)`,
  ``,
  `${meta.date}, commit ${meta.commit}, ${meta.cpus} cores (${meta.cpu}), load ${meta.load.before} → ${meta.load.after}.`,
  `CPU µs/call: the CPU time of every process of the system (gateway, daemon, server) over the sequential calls, per call (/proc/PID/task/*/schedstat, every thread) — steadier than latency on a loaded machine; switches/call: their threads' context switches per call (each a thread put to sleep or woken).`,
  `Median of ${o.rounds} interleaved rounds; each round: ${o.warmup} warm-up calls, ${o.calls} sequential calls (p50/p99 of the round trip), ${o.pipelined} calls with ${o.inflight} in flight (stdio: pipelined on the one pipe; HTTP: ${o.inflight} kept-alive connections of one session).`,
  `Client: ${meta.client}. Server: ${meta.server}. Peers: mcp-proxy ${MCP_PROXY_VERSION} (crates.io), mcp-hub ${hubVersion} (npm).`,
  ``,
  `| system | transport | p50 µs | added p50 µs | p99 µs | CPU µs/call | added CPU µs | switches/call | calls/s (${o.inflight} in flight) | × direct | p50 ÷ mcp-proxy | calls/s ÷ mcp-proxy |`,
  `|---|---|---|---|---|---|---|---|---|---|---|---|`,
];
for (const [system, r] of Object.entries(rows)) {
  lines.push(
    `| ${system} | ${r.transport} | ${f(r.p50_us, 1)} | ${f(r.added_p50_us, 1)} | ${f(r.p99_us, 1)} | ${f(r.cpu_us_per_call, 1)} | ${f(r.added_cpu_us, 1)} | ${f(r.switches_per_call, 1)} | ${f(r.throughput_per_s)} | ${f(r.throughput_vs_direct, 2)} | ${f(r.p50_vs_mcp_proxy, 2)} | ${f(r.throughput_vs_mcp_proxy, 2)} |`,
  );
}
fs.writeFileSync(path.join(o.out, "tax.md"), lines.join("\n") + "\n");
console.log(lines.join("\n"));
