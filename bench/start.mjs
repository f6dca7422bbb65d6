// Session starts and the daemon's memory per session (issue 41), release builds, one run.
// bench/start.sh builds; this runs. The client is a scripted MCP client in this file (raw
// JSON-RPC over the child's stdin/stdout, as a client that spawns `serve` speaks it), not a
// real client: what is timed is the gateway, not Claude Code's own start.
//
//   cold   M = 30 fixture servers, each with its own start delay (`--start-delay-ms`, the
//          slowest DELAY_MAX): spawn `serve` → `initialize` answered, and spawn → a complete
//          `tools/list` (every server's tool; re-listed on `list_changed`), for `serve
//          --no-daemon` and for `serve` with no daemon yet (it starts one). Against, in the same
//          run: the slowest fixture spawned alone and timed the same way (the target: ≤ its
//          start + 10 ms), and all 30 spawned directly at once by this client.
//   warm   a daemon already running the 30 servers (`"share": "project"`, a first session still
//          attached): a second `serve`, spawn → `initialize`, spawn → complete `tools/list`,
//          ROUNDS times; beside it `mcp-reconcile --version` spawn → exit (the process start)
//          and a fixture spawn → `initialize` (a small Rust binary's start + one round trip).
//   rss    K = 1, 5, 15 concurrent sessions × M = 10 fixture servers shared (`project`), on one
//          daemon grown session by session: the daemon's VmRSS once the sessions are up and
//          idle, each `serve`'s, and the servers' processes (must stay M).
//
// Options: --servers M (30) --rounds R (15) --cold-rounds C (5) --ks 1,5,15 --rss-servers M (10)
// --delay-base MS (200) --delay-step MS (5) --idle-ms MS (1500) --bin DIR (target/release)
// --out DIR (bench/results/start) --phases warm,cold,rss (all); --baseline DIR also times warm starts of DIR/mcp-reconcile
// (a build from before a change, on a daemon of its own): before and after in one run.
import { spawn, spawnSync } from "node:child_process";
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { performance } from "node:perf_hooks";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const argv = process.argv.slice(2);
const opt = (name, fallback) => {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 ? argv[i + 1] : fallback;
};
const o = {
  servers: Number(opt("servers", "30")),
  rounds: Number(opt("rounds", "15")),
  coldRounds: Number(opt("cold-rounds", "5")),
  ks: opt("ks", "1,5,15").split(",").map(Number),
  rssServers: Number(opt("rss-servers", "10")),
  delayBase: Number(opt("delay-base", "200")),
  delayStep: Number(opt("delay-step", "5")),
  idleMs: Number(opt("idle-ms", "1500")),
  bin: path.resolve(opt("bin", path.join(root, "target/release"))),
  out: path.resolve(opt("out", path.join(root, "bench/results/start"))),
  baseline: opt("baseline", null) && path.resolve(opt("baseline", null)),
  phases: opt("phases", "warm,cold,rss").split(","),
};
const bin = { host: path.join(o.bin, "mcp-reconcile"), fixture: path.join(o.bin, "mcp-fixture-server") };
const delayOf = (i) => o.delayBase + o.delayStep * (i - 1);
/** The slowest server (a negative --delay-step makes it the first one started). */
const SLOWEST = delayOf(1) > delayOf(o.servers) ? 1 : o.servers;
const DELAY_MAX = delayOf(SLOWEST);

// Every process this run starts carries MCP_RECONCILE_START_BENCH=PID:PHASE, so a detached
// daemon and its servers are found and stopped with the phase, and nothing else is touched.
const TAG = `MCP_RECONCILE_START_BENCH=${process.pid}:`;
const runDir = fs.mkdtempSync(path.join(os.tmpdir(), "mcp-start-"));
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function tagged(phase) {
  const needle = TAG + (phase ?? "");
  const pids = [];
  for (const pid of fs.readdirSync("/proc").filter((d) => /^\d+$/.test(d))) {
    if (Number(pid) === process.pid) continue;
    try {
      const env = fs.readFileSync(`/proc/${pid}/environ`, "latin1").split("\0");
      if (env.some((v) => (phase ? v === needle : v.startsWith(needle)))) pids.push(Number(pid));
    } catch {}
  }
  return pids;
}
async function stopTagged(phase) {
  for (const sig of ["SIGTERM", "SIGKILL"]) {
    for (const pid of tagged(phase)) {
      try {
        process.kill(pid, sig);
      } catch {}
    }
    await sleep(300);
  }
}
for (const sig of ["SIGINT", "SIGTERM", "SIGHUP"]) {
  process.on(sig, async () => {
    await stopTagged();
    fs.rmSync(runDir, { recursive: true, force: true });
    process.exit(130);
  });
}

/** A phase's environment: its tag, a private home, its own runtime dir (so its own daemon). */
function envOf(phase) {
  const home = path.join(runDir, "home");
  const runtime = path.join(runDir, `run-${phase}`);
  fs.mkdirSync(runtime, { recursive: true, mode: 0o700 });
  return {
    ...process.env,
    MCP_RECONCILE_START_BENCH: `${process.pid}:${phase}`,
    HOME: home,
    XDG_RUNTIME_DIR: runtime,
    XDG_STATE_HOME: path.join(home, "xdg/state"),
    XDG_DATA_HOME: path.join(home, "xdg/data"),
    XDG_CONFIG_HOME: path.join(home, "xdg/config"),
    RUST_LOG: "warn",
  };
}

/** Fixture `i`'s arguments: its own tool name `tI_echo`, and its start delay. */
const fixtureArgs = (i, delay) => ["--name", `s${i}`, "--tools", "echo", "--tool-prefix", `t${i}_`, "--start-delay-ms", String(delay)];

/** A settings file with `m` fixture servers (shared per project), and `serve`'s arguments. */
function serveArgs(name, m, delays) {
  const settings = path.join(runDir, `settings-${name}.json`);
  const servers = {};
  for (let i = 1; i <= m; i++) {
    servers[`s${i}`] = { command: bin.fixture, args: fixtureArgs(i, delays(i)), share: "project" };
  }
  fs.writeFileSync(settings, JSON.stringify({ mcpServers: servers }));
  const project = path.join(runDir, "project");
  fs.mkdirSync(project, { recursive: true });
  return ["serve", "--user-settings", settings, "--project", project, "--state-dir", path.join(runDir, "state")];
}

/**
 * Spawns `cmd` and speaks MCP to it over stdio: `initialize` written at once, then
 * `notifications/initialized` and `tools/list`, re-listed on every `list_changed`, until the
 * tools `t1_echo` … `tM_echo` are all there. Times are ms from just before the spawn.
 */
function session(cmd, args, env, m, label) {
  const log = fs.openSync(path.join(runDir, `${label}.stderr`), "a");
  const t0 = performance.now();
  const child = spawn(cmd, args, { env, cwd: runDir, stdio: ["pipe", "pipe", log], detached: true });
  fs.closeSync(log);
  const s = { child, pid: child.pid, t0, init: null, complete: null, lists: 0, listChanged: 0, tools: 0 };
  let nextId = 1;
  let listing = false;
  let dirty = false;
  let resolveInit, resolveComplete, rejectInit, rejectComplete;
  s.initialized = new Promise((res, rej) => ((resolveInit = res), (rejectInit = rej)));
  s.completed = new Promise((res, rej) => ((resolveComplete = res), (rejectComplete = rej)));
  s.initialized.catch(() => {});
  s.completed.catch(() => {});
  const rejectAll = (e) => (rejectInit(e), rejectComplete(e));
  const send = (msg) => child.stdin.write(JSON.stringify({ jsonrpc: "2.0", ...msg }) + "\n");
  const list = () => {
    listing = true;
    dirty = false;
    s.lists++;
    send({ id: nextId++, method: "tools/list", params: {} });
  };
  const pending = new Map();
  pending.set(nextId, "initialize");
  send({
    id: nextId++, method: "initialize",
    params: { protocolVersion: "2025-06-18", capabilities: { roots: { listChanged: true } }, clientInfo: { name: "mcp-start-bench", version: "1" } },
  });
  let buf = "";
  child.stdout.on("data", (chunk) => {
    buf += chunk;
    let nl;
    while ((nl = buf.indexOf("\n")) >= 0) {
      const line = buf.slice(0, nl);
      buf = buf.slice(nl + 1);
      if (!line.trim()) continue;
      let msg;
      try {
        msg = JSON.parse(line);
      } catch {
        continue;
      }
      const now = performance.now() - t0;
      if (msg.method === "notifications/tools/list_changed") {
        s.listChanged++;
        if (listing) dirty = true;
        else if (s.complete === null && s.init !== null) list();
      } else if (msg.method && msg.id !== undefined) {
        // A request of the server's (roots/list, ping): answered empty.
        send({ id: msg.id, result: msg.method === "roots/list" ? { roots: [] } : {} });
      } else if (msg.id !== undefined && pending.get(msg.id) === "initialize") {
        pending.delete(msg.id);
        if (msg.error) return rejectAll(new Error(`${label}: initialize: ${JSON.stringify(msg.error)}`));
        s.init = now;
        resolveInit(now);
        send({ method: "notifications/initialized" });
        list();
      } else if (msg.id !== undefined) {
        listing = false;
        const names = new Set();
        for (const t of msg.result?.tools ?? []) {
          const hit = /(?:^|[^0-9A-Za-z])t(\d+)_echo$/.exec(t.name) ?? /^t(\d+)_echo$/.exec(t.name);
          if (hit) names.add(hit[1]);
        }
        s.tools = names.size;
        if (names.size >= m && s.complete === null) {
          s.complete = now;
          resolveComplete(now);
        } else if (dirty) list();
      }
    }
  });
  child.on("exit", (code) => rejectAll(new Error(`${label} exited with ${code}: ${fs.readFileSync(path.join(runDir, `${label}.stderr`), "utf8").slice(-2000)}`)));
  s.close = async () => {
    child.stdin.end();
    for (let i = 0; i < 100 && child.exitCode === null && child.signalCode === null; i++) await sleep(50);
    try {
      process.kill(-child.pid, "SIGKILL");
    } catch {}
  };
  return s;
}

/** Waits for `promise`, failing after `ms` (a generous deadline, never a measurement). */
function within(promise, ms, what) {
  let timer;
  return Promise.race([promise, new Promise((_, rej) => (timer = setTimeout(() => rej(new Error(`${what}: no answer in ${ms} ms`)), ms)))]).finally(() => clearTimeout(timer));
}

/** Spawns `cmd args` and times spawn → exit (ms). */
function timeExit(cmd, args, env) {
  return new Promise((resolve, reject) => {
    const t0 = performance.now();
    const child = spawn(cmd, args, { env, stdio: "ignore" });
    child.on("exit", (code) => (code === 0 ? resolve(performance.now() - t0) : reject(new Error(`${cmd} ${args.join(" ")}: ${code}`))));
  });
}

const vmRss = (pid) => {
  try {
    return Number(/VmRSS:\s+(\d+)/.exec(fs.readFileSync(`/proc/${pid}/status`, "utf8"))[1]);
  } catch {
    return NaN;
  }
};
const comm = (pid) => {
  try {
    return fs.readFileSync(`/proc/${pid}/comm`, "utf8").trim();
  } catch {
    return "";
  }
};
function daemonStatus(env) {
  const r = spawnSync(bin.host, ["daemon", "--status", "--json"], { env, encoding: "utf8", timeout: 20_000 });
  if (r.status !== 0) throw new Error(`daemon --status: ${r.stderr}`);
  return JSON.parse(r.stdout.trim().split("\n").pop());
}

const quantile = (xs, q) => {
  const s = [...xs].sort((a, b) => a - b);
  if (!s.length) return NaN;
  const i = (s.length - 1) * q;
  const lo = Math.floor(i);
  return s[lo] + (s[Math.min(lo + 1, s.length - 1)] - s[lo]) * (i - lo);
};
const stats = (xs) => ({ p50: quantile(xs, 0.5), p90: quantile(xs, 0.9), min: Math.min(...xs), max: Math.max(...xs), n: xs.length, all: xs });

// ---- cold -------------------------------------------------------------------------------------

const DEADLINE = 60_000;

/** One cold start of `system`: a fresh runtime dir (no daemon yet), 30 slow servers. */
async function coldOnce(system, round) {
  const phase = `cold-${system.replace("@", "-")}-${round}`;
  const env = envOf(phase);
  let s;
  if (system === "slowest-alone") {
    s = session(bin.fixture, fixtureArgs(SLOWEST, DELAY_MAX), env, 1, phase);
  } else {
    const args = serveArgs(`cold${o.servers}`, o.servers, delayOf);
    const host = system.endsWith("@base") ? path.join(o.baseline, "mcp-reconcile") : bin.host;
    s = session(host, system.startsWith("serve-no-daemon") ? [...args, "--no-daemon"] : args, env, o.servers, phase);
  }
  try {
    await within(s.completed, DEADLINE, phase);
    return { init: s.init, complete: s.complete, lists: s.lists, listChanged: s.listChanged };
  } finally {
    await s.close();
    await stopTagged(phase);
  }
}

/** All M fixtures spawned at once by this client itself, each timed to its full `tools/list`. */
async function coldDirectAll(round) {
  const phase = `cold-direct-all-${round}`;
  const env = envOf(phase);
  const t0 = performance.now();
  const all = [];
  for (let i = 1; i <= o.servers; i++) all.push(session(bin.fixture, fixtureArgs(i, delayOf(i)), env, 1, `${phase}-${i}`));
  try {
    await within(Promise.all(all.map((s) => s.completed)), DEADLINE, phase);
    return { init: null, complete: Math.max(...all.map((s) => s.t0 - t0 + s.complete)) };
  } finally {
    await Promise.all(all.map((s) => s.close()));
    await stopTagged(phase);
  }
}

async function cold() {
  const systems = ["slowest-alone", "direct-all", "serve-no-daemon", "serve-daemon", ...(o.baseline ? ["serve-no-daemon@base", "serve-daemon@base"] : [])];
  const runs = Object.fromEntries(systems.map((s) => [s, []]));
  for (let round = 0; round < o.coldRounds; round++) {
    const order = systems.map((_, i) => systems[(i + round) % systems.length]);
    for (const system of order) {
      const r = system === "direct-all" ? await coldDirectAll(round) : await coldOnce(system, round);
      runs[system].push(r);
      console.error(`cold round ${round + 1} ${system}: initialize ${r.init?.toFixed(1) ?? "—"} ms, complete tools/list ${r.complete.toFixed(1)} ms`);
    }
  }
  const out = {};
  for (const [system, rs] of Object.entries(runs)) {
    out[system] = { init: stats(rs.map((r) => r.init).filter((x) => x !== null)), complete: stats(rs.map((r) => r.complete)), runs: rs };
  }
  return out;
}

// ---- warm -------------------------------------------------------------------------------------

/** The warm systems: this build's `serve`, and with `--baseline DIR` DIR's (its own daemon). */
const warmSystems = () => [{ name: "serve", host: bin.host }, ...(o.baseline ? [{ name: "serve@base", host: path.join(o.baseline, "mcp-reconcile") }] : [])];

async function warm() {
  const systems = warmSystems().map((w) => ({ ...w, phase: `warm-${w.name.replace("@", "-")}`, serve: [] }));
  const result = { version: [], fixture: [] };
  const firsts = [];
  try {
    for (const w of systems) {
      w.env = envOf(w.phase);
      w.args = serveArgs(`warm${o.servers}`, o.servers, delayOf);
      const first = session(w.host, w.args, w.env, o.servers, `${w.phase}-first`);
      firsts.push(first);
      await within(first.completed, DEADLINE, `the first ${w.name} session`);
      console.error(`warm ${w.name}: the first session is complete at ${first.complete.toFixed(1)} ms (cold, daemon started by it)`);
    }
    const bare = envOf("bare");
    for (let round = 0; round < o.rounds; round++) {
      // Rotated each round: neither system always goes first.
      const order = systems.map((_, i) => systems[(i + round) % systems.length]);
      for (const w of order) {
        await sleep(200);
        const s = session(w.host, w.args, w.env, o.servers, `${w.phase}-${round}`);
        await within(s.completed, DEADLINE, `${w.name} warm session ${round}`);
        w.serve.push({ init: s.init, complete: s.complete, lists: s.lists, listChanged: s.listChanged });
        await s.close();
        console.error(`warm round ${round + 1} ${w.name}: initialize ${s.init.toFixed(1)} ms, complete tools/list ${s.complete.toFixed(1)} ms`);
      }
      result.version.push(await timeExit(bin.host, ["--version"], bare));
      const f = session(bin.fixture, fixtureArgs(1, 0), bare, 1, `warm-fixture-${round}`);
      await within(f.completed, DEADLINE, "fixture");
      result.fixture.push({ init: f.init, complete: f.complete });
      await f.close();
    }
    for (const w of systems) {
      const status = daemonStatus(w.env);
      w.serverProcesses = status.connections.length;
    }
  } finally {
    await Promise.all(firsts.map((f) => f.close()));
    for (const w of systems) await stopTagged(w.phase);
    await stopTagged("bare");
  }
  return {
    systems: Object.fromEntries(systems.map((w) => [w.name, {
      init: stats(w.serve.map((r) => r.init)),
      complete: stats(w.serve.map((r) => r.complete)),
      serverProcesses: w.serverProcesses,
      runs: w.serve,
    }])),
    version: stats(result.version),
    fixtureInit: stats(result.fixture.map((r) => r.init)),
    fixtureComplete: stats(result.fixture.map((r) => r.complete)),
  };
}

// ---- daemon RSS per session -------------------------------------------------------------------

async function rss() {
  const phase = "rss";
  const env = envOf(phase);
  const args = serveArgs(`rss${o.rssServers}`, o.rssServers, () => 0);
  const sessions = [];
  const samples = [];
  try {
    for (const k of o.ks) {
      const added = [];
      while (sessions.length < k) {
        const s = session(bin.host, args, env, o.rssServers, `rss-${sessions.length}`);
        sessions.push(s);
        added.push(s);
        // The first one starts the daemon: the others attach to it.
        if (sessions.length === 1) await within(s.completed, DEADLINE, "the first rss session");
      }
      await within(Promise.all(added.map((s) => s.completed)), DEADLINE, `K = ${k}`);
      await sleep(o.idleMs);
      const status = daemonStatus(env);
      const daemonPid = status.pid;
      const procs = tagged(phase);
      const servePids = new Set(sessions.map((s) => s.pid));
      const fixtures = procs.filter((p) => comm(p).startsWith("mcp-fixture"));
      const others = procs.filter((p) => p !== daemonPid && !servePids.has(p) && !fixtures.includes(p));
      const sample = {
        k,
        daemonPid,
        daemonKiB: vmRss(daemonPid),
        sessionsInDaemon: status.sessions.length,
        serveKiB: sessions.map((s) => vmRss(s.pid)),
        serverProcesses: fixtures.length,
        serverKiB: fixtures.reduce((n, p) => n + vmRss(p), 0),
        otherProcesses: others.map((p) => ({ pid: p, comm: comm(p), kib: vmRss(p) })),
      };
      samples.push(sample);
      console.error(`rss K = ${k}: daemon ${(sample.daemonKiB / 1024).toFixed(1)} MiB, serve p50 ${(quantile(sample.serveKiB, 0.5) / 1024).toFixed(1)} MiB, ${sample.serverProcesses} server processes, ${sample.sessionsInDaemon} sessions in the daemon`);
    }
  } finally {
    await Promise.all(sessions.map((s) => s.close()));
    await stopTagged(phase);
  }
  const first = samples[0];
  const last = samples.at(-1);
  return { samples, perExtraSessionKiB: (last.daemonKiB - first.daemonKiB) / (last.k - first.k) };
}

// ---- run, write, print -----------------------------------------------------------------------

const load0 = fs.readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ");
const results = {};
try {
  if (o.phases.includes("warm")) results.warm = await warm();
  if (o.phases.includes("cold")) results.cold = await cold();
  if (o.phases.includes("rss")) results.rss = await rss();
} finally {
  await stopTagged();
  fs.rmSync(runDir, { recursive: true, force: true });
}
const meta = {
  date: new Date().toISOString(),
  commit: spawnSync("git", ["rev-parse", "--short", "HEAD"], { cwd: root, encoding: "utf8" }).stdout.trim(),
  cpus: os.cpus().length,
  cpu: os.cpus()[0]?.model,
  load: { before: load0, after: fs.readFileSync("/proc/loadavg", "utf8").split(" ").slice(0, 3).join(" ") },
  options: { ...o, bin: undefined, out: undefined },
  client: "scripted MCP client (bench/start.mjs: Node, raw JSON-RPC over stdio), not a real client",
  build: "release (mcp-reconcile, mcp-fixture-server)",
};
fs.mkdirSync(o.out, { recursive: true });
fs.writeFileSync(path.join(o.out, "start.json"), JSON.stringify({ meta, ...results }, null, 2) + "\n");

const f = (x, d = 1) => (x === undefined || x === null || Number.isNaN(x) ? "—" : x.toFixed(d));
const mib = (kib) => f(kib / 1024, 1);
const verdict = (ok) => (ok ? "**met**" : "**missed**");
const lines = [
  `# Session starts and daemon memory per session (issue 41)`,
  ``,
  `${meta.date}, commit ${meta.commit}, ${meta.cpus} cores (${meta.cpu}), load ${meta.load.before} → ${meta.load.after}; ${meta.build}.`,
  `Client: ${meta.client}; times are ms from just before the spawn. p50/p90 over the rounds.`,
];
const w = results.warm;
if (w) {
  lines.push(
    ``,
    `## Warm start: a second \`serve\`, the daemon already running the ${o.servers} servers (shared per project)`,
    ``,
    `| what | p50 ms | p90 ms | min | max |`,
    `|---|---|---|---|---|`,
    ...Object.entries(w.systems).flatMap(([name, row]) => [
      `| \`${name}\` spawn → \`initialize\` answered | ${f(row.init.p50)} | ${f(row.init.p90)} | ${f(row.init.min)} | ${f(row.init.max)} |`,
      `| \`${name}\` spawn → complete \`tools/list\` (${o.servers} servers) | ${f(row.complete.p50)} | ${f(row.complete.p90)} | ${f(row.complete.min)} | ${f(row.complete.max)} |`,
    ]),
    `| \`mcp-reconcile --version\` spawn → exit (process start) | ${f(w.version.p50)} | ${f(w.version.p90)} | ${f(w.version.min)} | ${f(w.version.max)} |`,
    `| fixture spawn → \`initialize\` (a small Rust server's start) | ${f(w.fixtureInit.p50)} | ${f(w.fixtureInit.p90)} | ${f(w.fixtureInit.min)} | ${f(w.fixtureInit.max)} |`,
    ``,
    `${o.rounds} interleaved rounds${o.baseline ? " (serve@base: the build in --baseline, its own daemon)" : ""}; server processes in each daemon afterwards: ${Object.entries(w.systems).map(([n, r]) => `${n} ${r.serverProcesses}`).join(", ")} (M = ${o.servers}). Target ≤ 15 ms (p50, this build): initialize ${verdict(w.systems.serve.init.p50 <= 15)}, complete tools/list ${verdict(w.systems.serve.complete.p50 <= 15)}.`,
  );
}
const c = results.cold;
if (c) {
  const slowest = c["slowest-alone"].complete.p50;
  lines.push(
    ``,
    `## Cold start: ${o.servers} servers, start delays ${delayOf(1)}–${delayOf(o.servers)} ms (server 1 started first), nothing running`,
    ``,
    `| system | initialize p50 ms | complete tools/list p50 ms | p90 | − slowest alone (p50) |`,
    `|---|---|---|---|---|`,
  );
  for (const [system, row] of Object.entries(c)) {
    lines.push(`| ${system} | ${f(row.init.p50)} | ${f(row.complete.p50)} | ${f(row.complete.p90)} | ${system === "slowest-alone" ? "—" : f(row.complete.p50 - slowest)} |`);
  }
  lines.push(
    ``,
    `${o.coldRounds} interleaved rounds. slowest-alone: the ${DELAY_MAX} ms fixture spawned alone by this client, spawn → its \`tools/list\`; direct-all: all ${o.servers} spawned at once by this client, spawn → the last one's \`tools/list\`; serve-daemon: \`serve\` with no daemon yet (it starts the daemon). Target ≤ slowest + 10 ms: serve --no-daemon ${verdict(c["serve-no-daemon"].complete.p50 - slowest <= 10)}, serve-daemon ${verdict(c["serve-daemon"].complete.p50 - slowest <= 10)}.`,
  );
}
const r = results.rss;
if (r) {
  lines.push(
    ``,
    `## Daemon RSS per session: K concurrent sessions × M = ${o.rssServers} fixture servers (shared per project)`,
    ``,
    `| K | daemon VmRSS MiB | serve VmRSS MiB (p50 / max) | server processes | servers' RSS MiB | other gateway processes |`,
    `|---|---|---|---|---|---|`,
  );
  for (const s of r.samples) {
    lines.push(`| ${s.k} | ${mib(s.daemonKiB)} | ${mib(quantile(s.serveKiB, 0.5))} / ${mib(Math.max(...s.serveKiB))} | ${s.serverProcesses} | ${mib(s.serverKiB)} | ${s.otherProcesses.map((p) => `${p.comm} ${mib(p.kib)}`).join(", ") || "—"} |`);
  }
  lines.push(
    ``,
    `One daemon grown session by session (sessions are the scripted client, not real clients), sampled ${o.idleMs} ms after the last session's complete \`tools/list\`. Daemon growth per extra session: (RSS(K=${r.samples.at(-1).k}) − RSS(K=${r.samples[0].k})) / ${r.samples.at(-1).k - r.samples[0].k} = ${f(r.perExtraSessionKiB, 0)} KiB; target ≤ 2 MiB ${verdict(r.perExtraSessionKiB <= 2048)}.`,
  );
}
fs.writeFileSync(path.join(o.out, "start.md"), lines.join("\n") + "\n");
console.log(lines.join("\n"));
