// The path most users run: `serve` (stdio) as a session of the per-user daemon, driven by a real
// MCP client (the TypeScript SDK's), timed from the client's side. Used by bench/reload.mjs:
//
//   runDaemon(ctx, n)   — one session with N fixture servers + server-everything; per edit:
//                         write → the session's own pass line (serve's stderr), write →
//                         `notifications/tools/list_changed` at the client, write → the client's
//                         next `tools/list` answer that shows the changed server's new tool; the
//                         daemon's server processes before and after; then edits with calls in
//                         flight on the changed server across its make-before-break switch.
//   runMany(ctx, opts)  — one daemon holding S sessions × M servers, half of each session's
//                         servers shared by every session: the same timings for an edit of one
//                         session's own server, list_changed seen by the other sessions, restarts
//                         of anything else, and the daemon's memory per idle connection.
//
// `ctx` carries bench/reload.mjs's helpers (binaries, tag, /proc readers, summaries).
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

// Pinned in bench/peers/package.json (bench/reload.sh installs it).
const sdk = path.join(path.dirname(fileURLToPath(import.meta.url)), "peers/node_modules/@modelcontextprotocol/sdk");
const { Client } = await import(path.join(sdk, "dist/esm/client/index.js"));
const { StdioClientTransport } = await import(path.join(sdk, "dist/esm/client/stdio.js"));
const { ToolListChangedNotificationSchema } = await import(path.join(sdk, "dist/esm/types.js"));
const { StreamableHTTPClientTransport } = await import(path.join(sdk, "dist/esm/client/streamableHttp.js"));

/** A connected MCP client of the streamable HTTP endpoint at `url` (a peer's status poll). */
export async function httpClient(url) {
  const client = new Client({ name: "mcp-reconcile-bench", version: "1" });
  await client.connect(new StreamableHTTPClientTransport(new URL(url)));
  return client;
}

export const SDK_VERSION = JSON.parse(fs.readFileSync(path.join(sdk, "package.json"), "utf8")).version;

// The changed server's tools: `sleep` answers after `ms`, so calls are in flight across a switch.
const BASE_TOOLS = "echo,add,sleep";
const toolsFor = (variant) => (variant ? `${BASE_TOOLS},pid` : BASE_TOOLS);

function fixture(ctx, dir, name, tools) {
  return {
    command: ctx.bin.fixture,
    args: ["--tools", tools, "--name", name, "--marker", path.join(dir, `${name}.marker`)],
    env: { ...ctx.tagEnv, FIXTURE_STDERR_LINES: "0" },
  };
}

function settingsText(servers) {
  return JSON.stringify({ mcpServers: servers }, null, 2) + "\n";
}

/** Saves `text` to `file` the way `save` says; the instant the new content became visible. */
function save(ctx, file, text, how) {
  if (how === "rename") {
    const tmp = `${file}.bench~`;
    fs.writeFileSync(tmp, text);
    const t = ctx.now();
    fs.renameSync(tmp, file);
    return t;
  }
  const t = ctx.now();
  fs.writeFileSync(file, text); // open(O_TRUNC), write, close
  return t;
}

/** A `serve` session on the daemon whose socket lives in `runtime`, with a connected client. */
async function openSession(ctx, { dir, file, runtime, project }) {
  const env = {
    ...process.env,
    ...ctx.tagEnv,
    HOME: dir,
    XDG_RUNTIME_DIR: runtime,
    XDG_STATE_HOME: path.join(dir, "xdg/state"),
    XDG_DATA_HOME: path.join(dir, "xdg/data"),
    XDG_CONFIG_HOME: path.join(dir, "xdg/config"),
  };
  const args = ["serve", "--user-settings", file, "--project", project, "--state-dir", path.join(dir, "state")];
  if (ctx.options.quiet !== null) args.push("--quiet-ms", String(ctx.options.quiet));
  if (ctx.options.debounce !== null) args.push("--debounce-ms", String(ctx.options.debounce));
  const transport = new StdioClientTransport({ command: ctx.bin.host, args, env, cwd: project, stderr: "pipe" });
  const lines = new ctx.LineWaiter(transport.stderr);
  const client = new Client({ name: "mcp-reconcile-bench", version: "1" });
  const changes = [];
  const waiters = [];
  client.setNotificationHandler(ToolListChangedNotificationSchema, () => {
    const t = ctx.now();
    changes.push(t);
    for (const w of waiters.splice(0)) w(t);
  });
  await client.connect(transport);
  ctx.started.add(transport.pid);
  return {
    client,
    transport,
    lines,
    changes,
    /** The arrival time of the next `tools/list_changed`, or null after `timeoutMs`. */
    nextChange(timeoutMs) {
      return new Promise((resolve) => {
        const timer = setTimeout(() => resolve(null), timeoutMs);
        waiters.push((t) => {
          clearTimeout(timer);
          resolve(t);
        });
      });
    },
    async close() {
      await client.close().catch(() => {});
      ctx.started.delete(transport.pid);
    },
  };
}

/** The daemon process serving sockets in `runtime`. */
function daemonPid(runtime) {
  for (const pid of fs.readdirSync("/proc").filter((d) => /^\d+$/.test(d))) {
    try {
      const cmd = fs.readFileSync(`/proc/${pid}/cmdline`, "latin1").split("\0");
      if (cmd[1] !== "daemon") continue;
      const env = fs.readFileSync(`/proc/${pid}/environ`, "latin1").split("\0");
      if (env.includes(`XDG_RUNTIME_DIR=${runtime}`)) return Number(pid);
    } catch {}
  }
  return null;
}

/** Lists tools until `pred(names)` holds; the instant the answer that satisfied it arrived. */
async function listUntil(ctx, session, pred, timeoutMs) {
  const deadline = ctx.now() + timeoutMs;
  let lists = 0;
  while (ctx.now() < deadline) {
    const { tools } = await session.client.listTools();
    const t = ctx.now();
    lists++;
    if (pred(new Set(tools.map((x) => x.name)))) return { t, lists };
    await ctx.sleep(2);
  }
  return { t: null, lists };
}

/** Calls `tool` every `everyMs` from `fromMs` before until `toMs` after the write `saveNow()`
 * makes; every call sleeps `sleepMs` on the server. How many were made and how many failed. */
async function callsAcross(ctx, session, tool, saveNow, { everyMs = 4, fromMs = 40, toMs = 200, sleepMs = 25 } = {}) {
  const calls = [];
  const errors = [];
  const call = () =>
    session.client
      .callTool({ name: tool, arguments: { ms: sleepMs } })
      .then((r) => {
        if (r.isError) errors.push(JSON.stringify(r.content).slice(0, 200));
      })
      .catch((e) => errors.push(String(e.message ?? e).slice(0, 200)));
  const t0 = ctx.now();
  let tWrite = null;
  while (ctx.now() - t0 < fromMs + toMs) {
    if (tWrite === null && ctx.now() - t0 >= fromMs) tWrite = saveNow();
    calls.push(call());
    await ctx.sleep(everyMs);
  }
  await Promise.all(calls);
  return { calls: calls.length, errors };
}

/** The daemon's CPU over 3 s with nothing happening (after 1 s to settle), and its RSS then. */
async function idleUsage(ctx, pid) {
  await ctx.sleep(1000);
  const before = ctx.hostUsage(pid);
  await ctx.sleep(3000);
  const after = ctx.hostUsage(pid);
  return { idleCpuPct: ((after.cpuMs - before.cpuMs) / 3000) * 100, idleRssKb: after.rssKb };
}

function servedBy(ctx, pid) {
  return pid ? ctx.serverPids(pid) : {};
}

// ---------------------------------------------------------------- one session of N servers
export async function runDaemon(ctx, n) {
  const system = "ours-daemon";
  const dir = path.join(ctx.runDir, `${system}-${n}`);
  const runtime = path.join(dir, "rt");
  fs.mkdirSync(runtime, { recursive: true, mode: 0o700 });
  const file = path.join(dir, "settings.json");
  const names = [...Array(n).keys()].map((i) => `fx${i}`);
  const changed = names[Math.floor(n / 2)];
  const servers = (variant) => {
    const out = {};
    for (const name of names) out[name] = fixture(ctx, dir, name, name === changed ? toolsFor(variant) : BASE_TOOLS);
    out.everything = { command: process.execPath, args: [ctx.bin.everything, "stdio"], env: { ...ctx.tagEnv } };
    return out;
  };
  let variant = 0;
  fs.writeFileSync(file, settingsText(servers(variant)));
  const result = { system, n, reps: [], inflight: [], errors: [] };
  const t0 = ctx.now();
  const session = await openSession(ctx, { dir, file, runtime, project: dir });
  try {
    const everyone = (set) => names.every((x) => set.has(`mcp__${x}__echo`)) && [...set].some((x) => x.startsWith("mcp__everything__"));
    const ready = await listUntil(ctx, session, everyone, 60_000);
    if (ready.t === null) throw new Error(`not every server listed tools within 60 s\n${session.lines.lines.slice(-20).map((l) => l.line).join("\n")}`);
    result.startupMs = ready.t - t0;
    const daemon = daemonPid(runtime);
    if (!daemon) throw new Error("no daemon process found");
    result.connections = Object.keys(servedBy(ctx, daemon)).length;
    Object.assign(result, await idleUsage(ctx, daemon));
    // What a `tools/list` costs the client when nothing changes: client → serve → daemon → back.
    const rtts = [];
    for (let i = 0; i < 20; i++) {
      const t = ctx.now();
      await session.client.listTools();
      rtts.push(ctx.now() - t);
    }
    result.idleListMs = ctx.summary(rtts);
    const usage0 = { daemon: ctx.hostUsage(daemon), serve: ctx.hostUsage(session.transport.pid) };
    const plan = ctx.options.saves.flatMap((how) => [...Array(ctx.options.reps).keys()].map((rep) => ({ how, rep })));
    for (const { how, rep } of plan) {
      // The snapshot before the pause, a collection right before the write (see reload.mjs).
      const pidsBefore = servedBy(ctx, daemon);
      await ctx.sleep(400 + ((rep * 37) % 200));
      ctx.quiesce();
      variant ^= 1;
      const want = `mcp__${changed}__pid`;
      const shows = (set) => set.has(want) === Boolean(variant) && set.has(`mcp__${changed}__echo`);
      const appliedP = session.lines.next(/^reconcile #(\d+) \((?!start)/, 15_000);
      const changeP = session.nextChange(15_000);
      const tWrite = save(ctx, file, settingsText(servers(variant)), how);
      const tChange = await changeP;
      const listed = tChange === null ? { t: null, lists: 0 } : await listUntil(ctx, session, shows, 15_000);
      const applied = await appliedP;
      await ctx.sleep(600); // late restarts
      const pidsAfter = servedBy(ctx, daemon);
      const all = [...names, "everything"];
      const restarted = all.filter((x) => pidsBefore[x] !== pidsAfter[x]);
      const rec = {
        save: how,
        appliedMs: applied ? applied.t - tWrite : null,
        listChangedMs: tChange === null ? null : tChange - tWrite,
        toolsMs: listed.t === null ? null : listed.t - tWrite,
        toolsLists: listed.lists,
        restarted: restarted.length,
        restartedUnchanged: restarted.filter((x) => x !== changed).length,
      };
      if (rec.listChangedMs === null || rec.toolsMs === null) result.errors.push({ rep, rec, stderr: session.lines.lines.slice(-10).map((l) => l.line) });
      result.reps.push(rec);
      process.stderr.write(`  ${system} N=${n} ${how} save ${rep + 1}/${ctx.options.reps}: applied ${ctx.fmt(rec.appliedMs)} ms, list_changed ${ctx.fmt(rec.listChangedMs)} ms, tools/list ${ctx.fmt(rec.toolsMs)} ms (${rec.toolsLists} lists), restarted ${rec.restarted} (unchanged ${rec.restartedUnchanged})\n`);
    }
    const usage1 = { daemon: ctx.hostUsage(daemon), serve: ctx.hostUsage(session.transport.pid) };
    result.cpuMsPerRep = (usage1.daemon.cpuMs - usage0.daemon.cpuMs + usage1.serve.cpuMs - usage0.serve.cpuMs) / plan.length;
    result.rssKb = usage1.daemon.rssKb;
    result.serveRssKb = usage1.serve.rssKb;
    // Calls in flight on the changed server across its switch (make before break, drained).
    for (let rep = 0; rep < ctx.options.inflightReps; rep++) {
      await ctx.sleep(400);
      variant ^= 1;
      const text = settingsText(servers(variant));
      const pidBefore = servedBy(ctx, daemon)[changed];
      const r = await callsAcross(ctx, session, `mcp__${changed}__sleep`, () => save(ctx, file, text, "rename"));
      await ctx.sleep(300);
      const switched = servedBy(ctx, daemon)[changed] !== pidBefore;
      result.inflight.push({ ...r, switched });
      process.stderr.write(`  ${system} N=${n} calls across a switch ${rep + 1}/${ctx.options.inflightReps}: ${r.calls} calls, ${r.errors.length} errors, switched ${switched}\n`);
    }
  } finally {
    await session.close();
    await ctx.cleanup();
  }
  const col = (k, reps) => reps.map((r) => r[k] ?? NaN);
  const summarize = (reps) => Object.fromEntries(["appliedMs", "listChangedMs", "toolsMs", "toolsLists", "restarted", "restartedUnchanged"].map((k) => [k, ctx.summary(col(k, reps))]));
  result.summary = summarize(result.reps);
  result.bySave = Object.fromEntries(ctx.options.saves.map((how) => [how, summarize(result.reps.filter((r) => r.save === how))]));
  return result;
}

// ---------------------------------------------------------------- many sessions on one daemon
export async function runMany(ctx, { sessions = 10, servers = 50, shared = 25 } = {}) {
  const system = "ours-daemon-many";
  const dir = path.join(ctx.runDir, system);
  const runtime = path.join(dir, "rt");
  const project = path.join(dir, "project");
  fs.mkdirSync(runtime, { recursive: true, mode: 0o700 });
  fs.mkdirSync(project, { recursive: true });
  const own = servers - shared;
  const sharedNames = [...Array(shared).keys()].map((i) => `sh${i}`);
  const ownNames = (k) => [...Array(own).keys()].map((i) => `s${k}x${i}`);
  const changedOf = (k) => ownNames(k)[Math.floor(own / 2)];
  const config = (k, variant) => {
    const out = {};
    for (const name of sharedNames) out[name] = fixture(ctx, dir, name, BASE_TOOLS);
    for (const name of ownNames(k)) out[name] = fixture(ctx, dir, name, name === changedOf(k) ? toolsFor(variant) : BASE_TOOLS);
    return out;
  };
  const result = { system, sessions, servers, shared, reps: [], inflight: [], growth: [], errors: [] };
  const open = [];
  try {
    let daemon = null;
    for (let k = 0; k < sessions; k++) {
      const sdir = path.join(dir, `s${k}`);
      fs.mkdirSync(sdir, { recursive: true });
      const file = path.join(sdir, "settings.json");
      fs.writeFileSync(file, settingsText(config(k, 0)));
      const session = await openSession(ctx, { dir: sdir, file, runtime, project });
      open.push({ session, file });
      const names = [...sharedNames, ...ownNames(k)];
      const ready = await listUntil(ctx, session, (set) => names.every((x) => set.has(`mcp__${x}__echo`)), 60_000);
      if (ready.t === null) throw new Error(`session ${k}: not every server listed tools within 60 s`);
      daemon ??= daemonPid(runtime);
      await ctx.sleep(300);
      result.growth.push({ sessions: k + 1, connections: Object.keys(servedBy(ctx, daemon)).length, rssKb: ctx.hostUsage(daemon).rssKb });
    }
    result.connections = Object.keys(servedBy(ctx, daemon)).length;
    Object.assign(result, await idleUsage(ctx, daemon));
    // The edited session is the first; the others must not hear of it.
    const [{ session, file }, ...others] = open;
    const changed = changedOf(0);
    let variant = 0;
    const usage0 = ctx.hostUsage(daemon);
    const plan = ctx.options.saves.flatMap((how) => [...Array(ctx.options.reps).keys()].map((rep) => ({ how, rep })));
    for (const { how, rep } of plan) {
      const pidsBefore = servedBy(ctx, daemon);
      await ctx.sleep(400 + ((rep * 37) % 200));
      ctx.quiesce();
      const othersBefore = others.map((o) => o.session.changes.length);
      variant ^= 1;
      const want = `mcp__${changed}__pid`;
      const shows = (set) => set.has(want) === Boolean(variant) && set.has(`mcp__${changed}__echo`);
      const changeP = session.nextChange(15_000);
      const tWrite = save(ctx, file, settingsText(config(0, variant)), how);
      const tChange = await changeP;
      const listed = tChange === null ? { t: null, lists: 0 } : await listUntil(ctx, session, shows, 15_000);
      await ctx.sleep(600);
      const pidsAfter = servedBy(ctx, daemon);
      const restarted = Object.keys(pidsBefore).filter((x) => pidsBefore[x] !== pidsAfter[x]);
      const rec = {
        save: how,
        listChangedMs: tChange === null ? null : tChange - tWrite,
        toolsMs: listed.t === null ? null : listed.t - tWrite,
        restarted: restarted.length,
        restartedUnchanged: restarted.filter((x) => x !== changed).length,
        othersListChanged: others.reduce((acc, o, i) => acc + o.session.changes.length - othersBefore[i], 0),
      };
      if (rec.listChangedMs === null || rec.toolsMs === null) result.errors.push({ rep, rec });
      result.reps.push(rec);
      process.stderr.write(`  ${system} ${sessions}×${servers} ${how} save ${rep + 1}/${ctx.options.reps}: list_changed ${ctx.fmt(rec.listChangedMs)} ms, tools/list ${ctx.fmt(rec.toolsMs)} ms, restarted ${rec.restarted} (unchanged ${rec.restartedUnchanged}), other sessions' list_changed ${rec.othersListChanged}\n`);
    }
    const usage1 = ctx.hostUsage(daemon);
    result.cpuMsPerRep = (usage1.cpuMs - usage0.cpuMs) / plan.length;
    result.rssKb = usage1.rssKb;
    for (let rep = 0; rep < ctx.options.inflightReps; rep++) {
      await ctx.sleep(400);
      variant ^= 1;
      const text = settingsText(config(0, variant));
      const r = await callsAcross(ctx, session, `mcp__${changed}__sleep`, () => save(ctx, file, text, "rename"));
      result.inflight.push(r);
      process.stderr.write(`  ${system} calls across a switch ${rep + 1}/${ctx.options.inflightReps}: ${r.calls} calls, ${r.errors.length} errors\n`);
    }
  } finally {
    for (const { session } of open) await session.close();
    await ctx.cleanup();
  }
  const col = (k, reps) => reps.map((r) => r[k] ?? NaN);
  const summarize = (reps) => Object.fromEntries(["listChangedMs", "toolsMs", "restarted", "restartedUnchanged", "othersListChanged"].map((k) => [k, ctx.summary(col(k, reps))]));
  result.summary = summarize(result.reps);
  result.bySave = Object.fromEntries(ctx.options.saves.map((how) => [how, summarize(result.reps.filter((r) => r.save === how))]));
  const first = result.growth[0];
  const last = result.growth.at(-1);
  result.rssKbPerConnection = last && first && last.connections > first.connections ? (last.rssKb - first.rssKb) / (last.connections - first.connections) : null;
  return result;
}
