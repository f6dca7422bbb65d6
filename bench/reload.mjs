// End-to-end reload benchmark: one server's args are edited in a settings file while N fixture
// servers plus server-everything run; measured from outside, the same way for every system.
//
// Run through `bash bench/reload.sh` (it builds, installs the peers and enters a loopback-only
// network namespace); this file expects to be inside that namespace already.
//
// Systems: `ours` (mcp-reconcile watch), `ours-daemon` (`serve` on the per-user daemon, driven by
// a real MCP client: bench/daemon.mjs), `ours-full` (watch --full-restart), `mcp-hub` (npm) and
// `magg` (PyPI), both pinned in bench/peers; a many-sessions daemon run (bench/daemon.mjs).
// Saves: `rename` (write a temporary file beside it, rename it over the settings file: what most
// editors do) and `in-place` (truncate and write the file itself: two events, the first showing
// an empty file); each system gets `--reps` edits of each kind.
// Per rep: save the file, then
//   applied   — the host's own "done" line on stdout (ours: `reconcile #k`, mcp-hub: `Updated
//               server`), timestamped on arrival here;
//   tools     — first status poll showing the changed server with its new tool count;
//   restarted — servers whose process id changed (process tree scan) and new `server <pid>` lines
//               in the fixture marker files;
//   gap       — per server, the longest run of polls showing it with no tools (upper bound: from
//               the last poll with tools to the next one with tools);
// and per system the host process's RSS and CPU from /proc.
import { spawn, spawnSync } from "node:child_process";
import fs from "node:fs";
import http from "node:http";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { performance } from "node:perf_hooks";
import { fileURLToPath } from "node:url";
import { runDaemon, runMany, SDK_VERSION, httpClient } from "./daemon.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, "..");

// ---------------------------------------------------------------- options
const argv = process.argv.slice(2);
function opt(name, fallback) {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 ? argv[i + 1] : (process.env[`BENCH_${name.toUpperCase().replace(/-/g, "_")}`] ?? fallback);
}
const options = {
  sizes: opt("sizes", "5,50,200").split(",").map(Number),
  reps: Number(opt("reps", "10")),
  systems: opt("systems", "ours,ours-daemon,mcp-hub,magg").split(","),
  // Edits with calls in flight on the changed server (daemon path), after the timed edits.
  inflightReps: Number(opt("inflight-reps", "3")),
  // One daemon with S sessions × M servers, half shared ("" to skip): "10x50".
  many: opt("many", "10x50"),
  saves: opt("saves", "rename,in-place").split(","),
  // Unset: the host's defaults (settle detection: --quiet-ms 25, --debounce-ms 300).
  debounce: opt("debounce-ms", null) === null ? null : Number(opt("debounce-ms")),
  quiet: opt("quiet-ms", null) === null ? null : Number(opt("quiet-ms")),
  pollMs: Number(opt("poll-ms", "5")),
  floorReps: Number(opt("floor-reps", "30")),
  out: path.resolve(opt("out", path.join(root, "bench", "results"))),
  targetDir: opt("target-dir", process.env.CARGO_TARGET_DIR ?? "/work/target-bench"),
};
const bin = {
  host: path.join(options.targetDir, "release", "mcp-reconcile"),
  fixture: path.join(options.targetDir, "release", "mcp-fixture-server"),
  everything: path.join(root, "node_modules/@modelcontextprotocol/server-everything/dist/index.js"),
  hub: path.join(root, "bench/peers/node_modules/mcp-hub/dist/cli.js"),
};
for (const [k, p] of Object.entries(bin)) {
  if (!fs.existsSync(p)) throw new Error(`${k} not found at ${p}: run bash bench/reload.sh (it builds and installs everything)`);
}
// magg (PyPI, Python ≥ 3.12) is installed by bench/reload.sh where such a Python exists.
const maggBin = path.join(root, "bench/peers/.venv-magg/bin/magg");
if (!fs.existsSync(maggBin) && options.systems.includes("magg")) {
  process.stderr.write(`magg not installed (${maggBin}): skipped; bench/reload.sh installs it where python3.12 or newer exists\n`);
  options.systems = options.systems.filter((s) => s !== "magg");
}

// A unique tag in every process's environment, so cleanup finds every process this run started.
const runDir = fs.mkdtempSync(path.join(os.tmpdir(), "mcp-reload-bench-"));
const TAG = `MCP_RELOAD_BENCH=${runDir}`;
const tagEnv = { MCP_RELOAD_BENCH: runDir };
const CLK_TCK = 100;
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
/** A full collection now (bench/reload.sh runs node with --expose-gc), so that none falls into
 * the next timed edit. */
const quiesce = () => globalThis.gc?.();
const now = () => performance.now();

// ---------------------------------------------------------------- processes and /proc
const started = new Set(); // pids of hosts we spawned (each leads its own process group)

function killTagged(signal) {
  let n = 0;
  for (const pid of fs.readdirSync("/proc").filter((d) => /^\d+$/.test(d))) {
    if (Number(pid) === process.pid) continue;
    try {
      const env = fs.readFileSync(`/proc/${pid}/environ`, "latin1");
      if (env.split("\0").includes(TAG)) {
        process.kill(Number(pid), signal);
        n++;
      }
    } catch {
      // gone, or not ours to read
    }
  }
  return n;
}

async function cleanup() {
  for (const pid of started) {
    try {
      process.kill(-pid, "SIGTERM");
    } catch {}
  }
  await sleep(300);
  for (const pid of started) {
    try {
      process.kill(-pid, "SIGKILL");
    } catch {}
  }
  started.clear();
  if (killTagged("SIGKILL") > 0) await sleep(100);
}
let cleaning = false;
for (const sig of ["SIGINT", "SIGTERM", "SIGHUP"]) {
  process.on(sig, async () => {
    if (cleaning) return;
    cleaning = true;
    await cleanup();
    fs.rmSync(runDir, { recursive: true, force: true });
    process.exit(130);
  });
}

function procTable() {
  const table = new Map();
  for (const d of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const stat = fs.readFileSync(`/proc/${d}/stat`, "latin1");
      const ppid = Number(stat.slice(stat.lastIndexOf(")") + 2).split(" ")[1]);
      const cmdline = fs.readFileSync(`/proc/${d}/cmdline`, "latin1").split("\0");
      table.set(Number(d), { ppid, cmdline });
    } catch {}
  }
  return table;
}

/** name → pid of every MCP server process below `hostPid`. */
function serverPids(hostPid) {
  const table = procTable();
  const below = new Set([hostPid]);
  let grew = true;
  while (grew) {
    grew = false;
    for (const [pid, p] of table) {
      if (!below.has(pid) && below.has(p.ppid)) {
        below.add(pid);
        grew = true;
      }
    }
  }
  const out = {};
  for (const pid of below) {
    const cmd = table.get(pid)?.cmdline ?? [];
    const i = cmd.indexOf("--name");
    if (i >= 0 && cmd.some((a) => a.endsWith("mcp-fixture-server"))) out[cmd[i + 1]] = pid;
    else if (cmd.some((a) => a.includes("server-everything"))) out.everything = pid;
  }
  return out;
}

function hostUsage(pid) {
  const stat = fs.readFileSync(`/proc/${pid}/stat`, "latin1");
  const f = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
  const status = fs.readFileSync(`/proc/${pid}/status`, "latin1");
  const kb = (k) => Number(new RegExp(`${k}:\\s+(\\d+)`).exec(status)?.[1] ?? 0);
  return { cpuMs: ((Number(f[11]) + Number(f[12])) * 1000) / CLK_TCK, rssKb: kb("VmRSS"), hwmKb: kb("VmHWM") };
}

function markerCount(file) {
  try {
    return fs.readFileSync(file, "utf8").split("\n").filter((l) => l.startsWith("server ")).length;
  } catch {
    return 0;
  }
}

// ---------------------------------------------------------------- the project
function fixtureName(i) {
  return `fx${i}`;
}
function toolsFor(variant) {
  return variant ? "echo,add,pid" : "echo,add";
}
function settings(n, dir, changed, variant) {
  const servers = {};
  for (let i = 0; i < n; i++) {
    const name = fixtureName(i);
    servers[name] = {
      command: bin.fixture,
      args: ["--tools", name === changed ? toolsFor(variant) : toolsFor(0), "--name", name, "--marker", path.join(dir, `${name}.marker`)],
      env: { ...tagEnv, FIXTURE_STDERR_LINES: "0" },
    };
  }
  servers.everything = { command: process.execPath, args: [bin.everything, "stdio"], env: { ...tagEnv } };
  return JSON.stringify({ mcpServers: servers }, null, 2) + "\n";
}

/** The same servers in magg's format (`servers`, each with a `source` and a tool `prefix`). */
function maggSettings(n, dir, changed, variant) {
  const servers = JSON.parse(settings(n, dir, changed, variant)).mcpServers;
  const out = {};
  for (const [name, entry] of Object.entries(servers)) out[name] = { source: `local:${name}`, prefix: name, ...entry };
  return JSON.stringify({ servers: out }, null, 2) + "\n";
}

// ---------------------------------------------------------------- status pollers
function requestUnix(sock, line) {
  return new Promise((resolve, reject) => {
    const c = net.createConnection(sock);
    let data = "";
    c.setEncoding("utf8");
    c.on("connect", () => c.end(line + "\n"));
    c.on("data", (d) => (data += d));
    c.on("end", () => {
      try {
        resolve(JSON.parse(data));
      } catch (e) {
        reject(e);
      }
    });
    c.on("error", reject);
  });
}

const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
function getJson(port, p) {
  return new Promise((resolve, reject) => {
    const req = http.get({ host: "127.0.0.1", port, path: p, agent }, (res) => {
      let data = "";
      res.setEncoding("utf8");
      res.on("data", (d) => (data += d));
      res.on("end", () => {
        try {
          resolve(JSON.parse(data));
        } catch (e) {
          reject(e);
        }
      });
    });
    req.on("error", reject);
    req.setTimeout(5000, () => req.destroy(new Error("timeout")));
  });
}

/** name → {tools, state, pid?} */
async function ourStatus(sock) {
  const r = await requestUnix(sock, '{"cmd":"status"}');
  const out = {};
  // `tools` is what the session offers: non-zero while connected, or while a replaced server's
  // old process still serves beside its starting replacement (state `connecting`).
  for (const s of r.ok?.servers ?? []) out[s.name] = { tools: s.tools ?? 0, state: s.state, pid: s.pid };
  return out;
}
async function hubStatus(port) {
  const r = await getJson(port, "/api/servers");
  const out = {};
  for (const s of r.servers ?? []) {
    out[s.name] = { tools: s.status === "connected" ? (s.capabilities?.tools?.length ?? 0) : 0, state: s.status, started: s.lastStarted };
  }
  return out;
}

class Poller {
  constructor(fetch, intervalMs) {
    this.fetch = fetch;
    this.intervalMs = intervalMs;
    this.samples = [];
    this.running = false;
    this.errors = 0;
  }
  start() {
    this.running = true;
    this.loop = (async () => {
      while (this.running) {
        const t0 = now();
        try {
          const state = await this.fetch();
          const t1 = now();
          this.samples.push({ t: (t0 + t1) / 2, state });
        } catch {
          this.errors++;
        }
        const wait = this.intervalMs - (now() - t0);
        if (wait > 0) await sleep(wait);
      }
    })();
  }
  async stop() {
    this.running = false;
    await this.loop;
  }
  take() {
    const s = this.samples;
    this.samples = [];
    return s;
  }
}

// ---------------------------------------------------------------- systems
class LineWaiter {
  constructor(stream) {
    this.lines = [];
    this.waiters = [];
    let buf = "";
    stream.setEncoding("utf8");
    stream.on("data", (d) => {
      const t = now();
      buf += d;
      let i;
      while ((i = buf.indexOf("\n")) >= 0) {
        const line = buf.slice(0, i);
        buf = buf.slice(i + 1);
        this.lines.push({ t, line });
        this.waiters = this.waiters.filter((w) => !w(t, line));
      }
    });
  }
  /** Resolves with the arrival time of the first line (after now) matching `re`. */
  next(re, timeoutMs) {
    return new Promise((resolve) => {
      const timer = setTimeout(() => resolve(null), timeoutMs);
      this.waiters.push((t, line) => {
        const m = re.exec(line);
        if (!m) return false;
        clearTimeout(timer);
        resolve({ t, m });
        return true;
      });
    });
  }
}

async function startSystem(kind, n, dir, file) {
  const env = { ...process.env, ...tagEnv, HOME: dir, XDG_STATE_HOME: path.join(dir, "xdg/state"), XDG_DATA_HOME: path.join(dir, "xdg/data"), XDG_CONFIG_HOME: path.join(dir, "xdg/config") };
  let child, status, applied;
  if (kind === "ours" || kind === "ours-full") {
    const state = path.join(dir, "state");
    const args = ["watch", "--no-daemon", "--user-settings", file, "--project", dir, "--state-dir", state, "--no-prompt"];
    if (options.debounce !== null) args.push("--debounce-ms", String(options.debounce));
    if (options.quiet !== null) args.push("--quiet-ms", String(options.quiet));
    if (kind === "ours-full") args.push("--full-restart");
    child = spawn(bin.host, args, { cwd: dir, env, detached: true, stdio: ["ignore", "pipe", "pipe"] });
    const lines = new LineWaiter(child.stdout);
    let sock;
    status = async () => {
      sock ??= fs.readdirSync(state).filter((f) => f.endsWith(".sock")).map((f) => path.join(state, f))[0];
      if (!sock) throw new Error("no socket yet");
      return ourStatus(sock);
    };
    applied = (timeoutMs) => lines.next(/^reconcile #(\d+) \((?!start)/, timeoutMs);
  } else if (kind === "mcp-hub") {
    // Seed its marketplace cache so start-up fetches nothing (it has no network here anyway).
    const cache = path.join(dir, "xdg/data/mcp-hub/cache");
    fs.mkdirSync(cache, { recursive: true });
    const t = Date.now();
    const seed = { registry: { version: "bench-seed", generatedAt: t, totalServers: 1, servers: [{ id: "bench-placeholder", name: "placeholder", description: "seeded by bench/reload.mjs" }] }, lastFetchedAt: t, serverDocumentation: {} };
    fs.writeFileSync(path.join(cache, "registry.json"), JSON.stringify(seed));
    const port = 37000 + n;
    child = spawn(process.execPath, [bin.hub, "--port", String(port), "--config", file, "--watch"], { cwd: dir, env, detached: true, stdio: ["ignore", "pipe", "pipe"] });
    const lines = new LineWaiter(child.stdout);
    status = () => hubStatus(port);
    applied = (timeoutMs) => lines.next(/"message":"Updated server '([^']+)'"/, timeoutMs);
  } else if (kind === "magg") {
    // magg starts each server at the first request that needs it (the status poll's
    // tools/list), notices a config edit by its file watcher and restarts only the changed
    // server; its "applied" line is logged at DEBUG. Nothing here may reach the network.
    const port = 38000 + n;
    const maggEnv = { ...env, MAGG_LOG_LEVEL: "DEBUG", MAGG_AUTO_RELOAD: "true", FASTMCP_CHECK_FOR_UPDATES: "off", FASTMCP_SHOW_SERVER_BANNER: "false" };
    child = spawn(maggBin, ["--config", file, "serve", "--http", "--host", "127.0.0.1", "--port", String(port), "--no-banner"], { cwd: dir, env: maggEnv, detached: true, stdio: ["ignore", "pipe", "pipe"] });
    const lines = new LineWaiter(child.stderr);
    let client = null;
    status = async () => {
      client ??= await httpClient(`http://127.0.0.1:${port}/mcp`);
      const { tools } = await client.listTools();
      const out = {};
      for (const t of tools) {
        const name = t.name.slice(0, Math.max(0, t.name.indexOf("_")));
        if (name && !name.startsWith("magg")) out[name] = { tools: (out[name]?.tools ?? 0) + 1 };
      }
      return out;
    };
    applied = (timeoutMs) => lines.next(/Configuration reload complete/, timeoutMs);
    const sys = { kind, child, status, applied, exited: new Promise((r) => child.on("exit", r)), stderr: () => lines.lines.slice(-20).map((l) => l.line).join("\n") };
    started.add(child.pid);
    return sys;
  } else {
    throw new Error(`unknown system ${kind}`);
  }
  started.add(child.pid);
  let stderr = "";
  child.stderr.setEncoding("utf8");
  child.stderr.on("data", (d) => (stderr = (stderr + d).slice(-4000)));
  const exited = new Promise((r) => child.on("exit", r));
  return { kind, child, status, applied, exited, stderr: () => stderr };
}

async function stopSystem(sys) {
  try {
    process.kill(sys.child.pid, "SIGINT");
  } catch {}
  const done = await Promise.race([sys.exited.then(() => true), sleep(3000).then(() => false)]);
  try {
    process.kill(-sys.child.pid, "SIGKILL");
  } catch {}
  started.delete(sys.child.pid);
  killTagged("SIGKILL"); // any server the host left behind
  await sleep(200);
  return done;
}

async function waitReady(sys, n, timeoutMs) {
  const deadline = now() + timeoutMs;
  while (now() < deadline) {
    try {
      const s = await sys.status();
      const names = Object.keys(s);
      if (names.length === n + 1 && names.every((k) => s[k].tools > 0)) return s;
    } catch {}
    await sleep(50);
  }
  throw new Error(`${sys.kind}: not all ${n + 1} servers listed tools within ${timeoutMs} ms\n${sys.stderr()}`);
}

// ---------------------------------------------------------------- metrics
function gaps(samples, names, tWrite) {
  const out = {};
  for (const name of names) {
    let lastWith = null;
    let inGap = false;
    let longest = 0;
    for (const { t, state } of samples) {
      const has = (state[name]?.tools ?? 0) > 0;
      if (has) {
        if (inGap) longest = Math.max(longest, t - (lastWith ?? tWrite));
        inGap = false;
        lastWith = t;
      } else inGap = true;
    }
    if (inGap) longest = Infinity;
    out[name] = longest;
  }
  return out;
}

function median(xs) {
  const v = xs.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  if (!v.length) return NaN;
  const m = v.length >> 1;
  return v.length % 2 ? v[m] : (v[m - 1] + v[m]) / 2;
}
function quantile(xs, q) {
  const v = xs.filter((x) => Number.isFinite(x)).sort((a, b) => a - b);
  if (!v.length) return NaN;
  const pos = (v.length - 1) * q;
  const lo = Math.floor(pos);
  return v[lo] + (v[Math.min(lo + 1, v.length - 1)] - v[lo]) * (pos - lo);
}
function summary(xs) {
  return { median: median(xs), p10: quantile(xs, 0.1), p90: quantile(xs, 0.9), min: quantile(xs, 0), max: quantile(xs, 1), n: xs.length };
}

// ---------------------------------------------------------------- one system at one size
async function runSystem(kind, n) {
  const dir = path.join(runDir, `${kind}-${n}`);
  fs.mkdirSync(dir, { recursive: true });
  const file = path.join(dir, "settings.json");
  const changed = fixtureName(Math.floor(n / 2));
  const markerOf = (name) => path.join(dir, `${name}.marker`);
  let variant = 0;
  const format = kind === "magg" ? maggSettings : settings;
  fs.writeFileSync(file, format(n, dir, changed, variant));
  const t0 = now();
  const sys = await startSystem(kind, n, dir, file);
  const result = { system: kind, n, reps: [], errors: [] };
  try {
    await waitReady(sys, n, 30_000);
    result.startupMs = now() - t0;
    await sleep(1000);
    // Idle: no polling, nothing changes.
    const idle0 = hostUsage(sys.child.pid);
    await sleep(3000);
    const idle1 = hostUsage(sys.child.pid);
    result.idleCpuPct = ((idle1.cpuMs - idle0.cpuMs) / 3000) * 100;
    result.idleRssKb = idle1.rssKb;
    const names = [...Array(n).keys()].map(fixtureName).concat(["everything"]);
    const poller = new Poller(sys.status, options.pollMs);
    poller.start();
    const usage0 = hostUsage(sys.child.pid);
    const tReps0 = now();
    const plan = options.saves.flatMap((save) => [...Array(options.reps).keys()].map((rep) => ({ save, rep })));
    for (const { save, rep } of plan) {
      // The snapshot first, then the pause: reading /proc makes garbage, and a collection in
      // this process while an edit is timed would be counted against the host.
      const pidsBefore = serverPids(sys.child.pid);
      const markersBefore = Object.fromEntries(names.filter((x) => x !== "everything").map((x) => [x, markerCount(markerOf(x))]));
      await sleep(400 + ((rep * 37) % 200)); // settle, de-phased from any timer
      quiesce();
      poller.take();
      variant ^= 1;
      const expectTools = variant ? 3 : 2;
      const appliedP = sys.applied(15_000);
      const text = format(n, dir, changed, variant);
      let tWrite;
      if (save === "rename") {
        const tmp = `${file}.bench~`;
        fs.writeFileSync(tmp, text);
        tWrite = now();
        fs.renameSync(tmp, file);
      } else {
        tWrite = now();
        fs.writeFileSync(file, text); // open(O_TRUNC), write, close
      }
      const applied = await appliedP;
      // Changed server listed again with its new tool count.
      let tTools = null;
      // 5 s: every host but magg shows it within a second; magg sometimes never does (an
      // in-place save read half-written), and the wait would only stretch the run.
      const deadline = now() + 5_000;
      while (tTools === null && now() < deadline) {
        const hit = poller.samples.find((s) => s.t > tWrite && s.state[changed]?.tools === expectTools);
        if (hit) tTools = hit.t;
        else await sleep(options.pollMs);
      }
      await sleep(600); // catch late restarts and gaps
      const samples = poller.take();
      const pidsAfter = serverPids(sys.child.pid);
      const restarted = names.filter((x) => pidsBefore[x] !== pidsAfter[x]);
      const spawned = names.filter((x) => x !== "everything").reduce((acc, x) => acc + (markerCount(markerOf(x)) - markersBefore[x]), 0);
      const g = gaps(samples, names, tWrite);
      const unchanged = names.filter((x) => x !== changed);
      const rec = {
        save,
        appliedMs: applied ? applied.t - tWrite : null,
        toolsMs: tTools === null ? null : tTools - tWrite,
        restarted: restarted.length,
        restartedUnchanged: restarted.filter((x) => x !== changed).length,
        fixtureSpawns: spawned,
        unchangedGapMs: Math.max(0, ...unchanged.map((x) => g[x])),
        changedGapMs: g[changed],
        polls: samples.length,
        pollIntervalMs: samples.length > 1 ? (samples.at(-1).t - samples[0].t) / (samples.length - 1) : null,
      };
      if (rec.appliedMs === null || rec.toolsMs === null) result.errors.push({ rep, rec, stderr: sys.stderr().slice(-500) });
      result.reps.push(rec);
      process.stderr.write(
        `  ${kind} N=${n} ${save} save ${rep + 1}/${options.reps}: applied ${fmt(rec.appliedMs)} ms, tools ${fmt(rec.toolsMs)} ms, restarted ${rec.restarted}, unchanged gap ${fmt(rec.unchangedGapMs)} ms, changed gap ${fmt(rec.changedGapMs)} ms\n`,
      );
    }
    const usage1 = hostUsage(sys.child.pid);
    await poller.stop();
    result.pollErrors = poller.errors;
    result.cpuMsPerRep = (usage1.cpuMs - usage0.cpuMs) / plan.length;
    result.repsWallMs = now() - tReps0;
    result.cpuPctDuringReps = ((usage1.cpuMs - usage0.cpuMs) / result.repsWallMs) * 100;
    result.rssKb = usage1.rssKb;
    result.hwmKb = usage1.hwmKb;
  } finally {
    result.cleanExit = await stopSystem(sys);
  }
  const summarize = (reps) => {
    const col = (k) => reps.map((r) => r[k] ?? NaN);
    return {
      appliedMs: summary(col("appliedMs")),
      toolsMs: summary(col("toolsMs")),
      restarted: summary(col("restarted")),
      restartedUnchanged: summary(col("restartedUnchanged")),
      fixtureSpawns: summary(col("fixtureSpawns")),
      unchangedGapMs: summary(col("unchangedGapMs")),
      changedGapMs: summary(col("changedGapMs")),
      pollIntervalMs: summary(col("pollIntervalMs")),
    };
  };
  result.summary = summarize(result.reps);
  result.bySave = Object.fromEntries(options.saves.map((save) => [save, summarize(result.reps.filter((r) => r.save === save))]));
  return result;
}
function fmt(x) {
  return x === null || x === undefined ? "—" : Number.isFinite(x) ? x.toFixed(1) : String(x);
}

// ---------------------------------------------------------------- the floor
// Bare spawn-to-initialize of the changed fixture server: spawn, `initialize`, then
// `notifications/initialized` + `tools/list`, over stdio from this process.
async function floorOnce(dir) {
  const t0 = now();
  const child = spawn(bin.fixture, ["--tools", toolsFor(1), "--name", "floor", "--marker", path.join(dir, "floor.marker")], { env: { ...process.env, ...tagEnv }, stdio: ["pipe", "pipe", "ignore"] });
  const lines = new LineWaiter(child.stdout);
  const init = lines.next(/"id":1\b/, 5000);
  child.stdin.write(JSON.stringify({ jsonrpc: "2.0", id: 1, method: "initialize", params: { protocolVersion: "2025-06-18", capabilities: {}, clientInfo: { name: "bench-floor", version: "0" } } }) + "\n");
  const a = await init;
  const list = lines.next(/"id":2\b/, 5000);
  child.stdin.write(JSON.stringify({ jsonrpc: "2.0", method: "notifications/initialized" }) + "\n");
  child.stdin.write(JSON.stringify({ jsonrpc: "2.0", id: 2, method: "tools/list" }) + "\n");
  const b = await list;
  child.stdin.end();
  const exited = new Promise((r) => child.on("exit", r));
  await Promise.race([exited, sleep(2000)]);
  child.kill("SIGKILL");
  return { initializeMs: a ? a.t - t0 : NaN, toolsListMs: b ? b.t - t0 : NaN };
}

async function floor() {
  const dir = path.join(runDir, "floor");
  fs.mkdirSync(dir, { recursive: true });
  const reps = [];
  for (let i = 0; i < options.floorReps + 3; i++) {
    const r = await floorOnce(dir);
    if (i >= 3) reps.push(r); // first spawns warm the page cache
    await sleep(50);
  }
  return { initializeMs: summary(reps.map((r) => r.initializeMs)), toolsListMs: summary(reps.map((r) => r.toolsListMs)), reps };
}

// ---------------------------------------------------------------- machine
function machine() {
  const cpuinfo = fs.readFileSync("/proc/cpuinfo", "utf8");
  const model = /model name\s*:\s*(.*)/.exec(cpuinfo)?.[1] ?? "unknown";
  const hubVersion = JSON.parse(fs.readFileSync(path.join(path.dirname(bin.hub), "..", "package.json"), "utf8")).version;
  const everythingVersion = JSON.parse(fs.readFileSync(path.join(path.dirname(bin.everything), "..", "package.json"), "utf8")).version;
  return {
    cpuModel: model,
    cores: os.cpus().length,
    kernel: fs.readFileSync("/proc/sys/kernel/osrelease", "utf8").trim(),
    memGiB: +(os.totalmem() / 2 ** 30).toFixed(1),
    node: process.version,
    hostVersion: spawnSync(bin.host, ["--version"], { encoding: "utf8" }).stdout.trim(),
    mcpHub: hubVersion,
    serverEverything: everythingVersion,
    mcpSdkClient: SDK_VERSION,
    magg: fs.existsSync(maggBin) ? spawnSync(path.join(path.dirname(maggBin), "python"), ["-c", "import importlib.metadata as m; print(m.version('magg'))"], { encoding: "utf8" }).stdout.trim() : null,
    loadBefore: os.loadavg(),
  };
}

// ---------------------------------------------------------------- main
async function main() {
  const out = { started: new Date().toISOString(), options, machine: machine(), floor: null, runs: [] };
  process.stderr.write(`machine: ${out.machine.cpuModel}, ${out.machine.cores} cores, load ${out.machine.loadBefore.map((x) => x.toFixed(2)).join(" ")}\n`);
  out.floor = await floor();
  process.stderr.write(`floor: spawn→initialize median ${fmt(out.floor.initializeMs.median)} ms, →tools/list ${fmt(out.floor.toolsListMs.median)} ms\n`);
  const ctx = { bin, runDir, tagEnv, options, started, now, sleep, quiesce, fmt, summary, serverPids, hostUsage, LineWaiter, cleanup };
  for (const n of options.sizes) {
    for (const kind of options.systems) {
      process.stderr.write(`${kind}, N = ${n} fixture servers + server-everything\n`);
      try {
        out.runs.push(kind === "ours-daemon" ? await runDaemon(ctx, n) : await runSystem(kind, n));
      } catch (e) {
        process.stderr.write(`  ${kind} N=${n} failed: ${e.stack ?? e}\n`);
        out.runs.push({ system: kind, n, failed: String(e.message ?? e) });
        await cleanup();
      }
    }
  }
  if (options.many) {
    const [sessions, servers] = options.many.split("x").map(Number);
    process.stderr.write(`ours-daemon-many: ${sessions} sessions × ${servers} servers, half shared, on one daemon\n`);
    try {
      out.many = await runMany(ctx, { sessions, servers, shared: Math.floor(servers / 2) });
    } catch (e) {
      process.stderr.write(`  many sessions failed: ${e.stack ?? e}\n`);
      out.many = { failed: String(e.message ?? e) };
      await cleanup();
    }
  }
  out.machine.loadAfter = os.loadavg();
  out.finished = new Date().toISOString();
  fs.mkdirSync(options.out, { recursive: true });
  const file = path.join(options.out, "reload.json");
  fs.writeFileSync(file, JSON.stringify(out, null, 1));
  process.stderr.write(`wrote ${file}\n`);
}

try {
  await main();
} finally {
  await cleanup();
  fs.rmSync(runDir, { recursive: true, force: true });
}
