// Many sessions × many servers, with the real clients: K concurrent sessions of Claude Code or
// Codex, each configured with the same M stdio servers (fixtures and real npm servers), started
// the way the user starts them — the client runs its servers itself (`direct`), or
// `mcp-reconcile install <client>` put the gateway in front (`installed`: every session is a
// `serve` of one per-user daemon, the servers set to share as `--share` says). Once every session
// has connected its servers and sent its first model request (held by a fake model API on
// 127.0.0.1 until the sample is taken), every process of the run is counted and its RSS summed.
//
//   node bench/sessions.mjs --bin DIR [--clients claude,codex] [--ks 1,5,15]
//        [--share project] [--spread one|worktrees] [--out DIR]
//
// `--spread worktrees` puts the K sessions in K directories: git worktrees of one repository
// and separate projects, alternately (run it with `--share user`).
// Processes are found by walking the parent links from each client down (the daemon is a child
// of the first `serve`), so nothing outside the run is counted; RSS is VmRSS summed over every
// process (shared pages counted in each, as `ps` users do).
import { spawn, execFileSync } from "node:child_process";
import fs from "node:fs";
import http from "node:http";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.dirname(here);

function parseArgs(argv) {
  const opts = { clients: ["claude", "codex"], ks: [1, 5, 15], share: "project", spread: "one",
    out: path.join(here, "results/sessions"), bin: path.join(root, "target/release") };
  for (let i = 0; i < argv.length; i += 2) {
    const [key, value] = [argv[i].replace(/^--/, ""), argv[i + 1]];
    if (key === "clients") opts.clients = value.split(",");
    else if (key === "ks") opts.ks = value.split(",").map(Number);
    else if (key in opts) opts[key] = value;
    else throw new Error(`unknown option --${key}`);
  }
  return opts;
}

const opts = parseArgs(process.argv.slice(2));
opts.bin = path.resolve(opts.bin);
const bin = {
  cli: path.join(opts.bin, "mcp-reconcile"),
  fixture: path.join(opts.bin, "mcp-fixture-server"),
  claude: path.join(root, "node_modules/.bin/claude"),
  // The npm launcher, as users start it (it runs the native binary as its child).
  codex: path.join(root, "node_modules/.bin/codex"),
};
const peers = path.join(here, "peers/node_modules/@modelcontextprotocol");
const everything = path.join(root, "node_modules/@modelcontextprotocol/server-everything/dist/index.js");

/** The M = 10 servers every session is configured with: 6 fixtures, 4 real npm servers. */
function servers(scratch) {
  const list = {};
  for (let i = 1; i <= 6; i++) {
    list[`fixture${i}`] = { command: bin.fixture, args: ["--name", `fixture${i}`, "--tools", "echo,add"],
      env: { FIXTURE_STDERR_LINES: "0" } };
  }
  const node = (file, ...args) => ({ command: process.execPath, args: [file, ...args] });
  list.everything = node(everything, "stdio");
  list.memory = node(path.join(peers, "server-memory/dist/index.js"));
  list.thinking = node(path.join(peers, "server-sequential-thinking/dist/index.js"));
  fs.mkdirSync(path.join(scratch, "shared-files"), { recursive: true });
  list.files = node(path.join(peers, "server-filesystem/dist/index.js"), path.join(scratch, "shared-files"));
  return list;
}

// ---- the fake model: holds each session's first request that offers tools -----------------

function fakeModel() {
  let held = [];
  let released = false;
  const waiters = [];
  const server = http.createServer((req, res) => {
    let body = "";
    req.on("data", (c) => (body += c));
    req.on("end", () => {
      const route = req.url.split("?")[0];
      let parsed = {};
      try { parsed = JSON.parse(body || "{}"); } catch { /* not JSON: answered as done */ }
      const kind = route === "/v1/messages" ? "anthropic" : route === "/v1/responses" ? "openai" : null;
      if (route === "/v1/messages/count_tokens") return reply(res, 200, "application/json", '{"input_tokens":1}');
      if (!kind) return reply(res, 404, "text/plain", "not found");
      const answer = () => done(res, kind, parsed);
      const offersTools = Array.isArray(parsed.tools) && parsed.tools.length > 0;
      if (released || !offersTools) return answer();
      held.push(answer);
      for (const w of waiters.splice(0)) w();
    });
  });
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve({
    url: `http://127.0.0.1:${server.address().port}`,
    held: () => held.length,
    changed: () => new Promise((r) => waiters.push(r)),
    release() { released = true; for (const a of held.splice(0)) a(); },
    reset() { released = false; held = []; },
    close: () => server.close(),
  })));
}

function reply(res, status, type, text) {
  res.writeHead(status, { "content-type": type });
  res.end(text);
}

let turn = 0;
/** "done", as each API streams it. */
function done(res, kind, body) {
  turn += 1;
  const events = kind === "anthropic" ? [
    ["message_start", { type: "message_start", message: { id: `msg_${turn}`, type: "message", role: "assistant",
      model: body.model, content: [], stop_reason: null, stop_sequence: null, usage: { input_tokens: 1, output_tokens: 1 } } }],
    ["content_block_start", { type: "content_block_start", index: 0, content_block: { type: "text", text: "" } }],
    ["content_block_delta", { type: "content_block_delta", index: 0, delta: { type: "text_delta", text: "done" } }],
    ["content_block_stop", { type: "content_block_stop", index: 0 }],
    ["message_delta", { type: "message_delta", delta: { stop_reason: "end_turn", stop_sequence: null }, usage: { output_tokens: 1 } }],
    ["message_stop", { type: "message_stop" }],
  ] : [
    ["response.created", { type: "response.created", response: { id: `resp_${turn}` } }],
    ["response.output_item.done", { type: "response.output_item.done", item: { type: "message", role: "assistant",
      id: `msg_${turn}`, content: [{ type: "output_text", text: "done" }] } }],
    ["response.completed", { type: "response.completed", response: { id: `resp_${turn}`, usage: { input_tokens: 1,
      input_tokens_details: null, output_tokens: 1, output_tokens_details: null, total_tokens: 2 } } }],
  ];
  if (kind === "anthropic" && body.stream !== true) {
    return reply(res, 200, "application/json", JSON.stringify({ id: `msg_${turn}`, type: "message", role: "assistant",
      model: body.model, content: [{ type: "text", text: "done" }], stop_reason: "end_turn", stop_sequence: null,
      usage: { input_tokens: 1, output_tokens: 1 } }));
  }
  reply(res, 200, "text/event-stream", events.map(([e, d]) => `event: ${e}\ndata: ${JSON.stringify(d)}\n\n`).join(""));
}

// ---- the clients' files ---------------------------------------------------------------------

function tomlString(s) { return JSON.stringify(s); }

function writeClientConfig(client, home, list, model) {
  if (client === "claude") {
    const entries = Object.fromEntries(Object.entries(list).map(([n, e]) => [n, { type: "stdio", ...e }]));
    fs.writeFileSync(path.join(home, ".claude.json"), JSON.stringify({ mcpServers: entries }, null, 2));
    return;
  }
  fs.mkdirSync(path.join(home, ".codex"), { recursive: true });
  let text = `model = "gpt-5"\nmodel_provider = "fake"\n\n[model_providers.fake]\nname = "fake"\n` +
    `base_url = ${tomlString(`${model.url}/v1`)}\nwire_api = "responses"\nenv_key = "FAKE_MODEL_KEY"\n`;
  for (const [name, e] of Object.entries(list)) {
    text += `\n[mcp_servers.${name}]\ncommand = ${tomlString(e.command)}\nargs = [${e.args.map(tomlString).join(", ")}]\n`;
    if (e.env) text += `env = { ${Object.entries(e.env).map(([k, v]) => `${k} = ${tomlString(v)}`).join(", ")} }\n`;
  }
  fs.writeFileSync(path.join(home, ".codex/config.toml"), text);
}

/** The sharing default for every server of the installed gateway (mcp-reconcile's own file). */
function writeShare(home, share) {
  const dir = path.join(home, ".config/mcp-reconcile");
  fs.mkdirSync(dir, { recursive: true });
  fs.writeFileSync(path.join(dir, "settings.json"), JSON.stringify({ mcp: { share } }, null, 2));
}

function env(home, model) {
  return {
    PATH: process.env.PATH, HOME: home, XDG_CONFIG_HOME: path.join(home, ".config"),
    DISABLE_AUTOUPDATER: "1", CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC: "1",
    ANTHROPIC_BASE_URL: model.url, ANTHROPIC_API_KEY: "not-a-real-key", FAKE_MODEL_KEY: "not-a-real-key",
  };
}

function startClient(client, home, dir, model) {
  const args = client === "claude"
    ? ["-p", "Say done.", "--output-format", "json"]
    : ["exec", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox", "Say done."];
  return spawn(bin[client], args, { cwd: dir, env: env(home, model), stdio: ["ignore", "ignore", "pipe"], detached: true });
}

// ---- where the sessions run -----------------------------------------------------------------

function git(cwd, ...args) { execFileSync("git", args, { cwd, stdio: "ignore" }); }

/** K session directories: one project, or (`worktrees`) a repository's worktrees and projects. */
function sessionDirs(scratch, k) {
  if (opts.spread === "one") {
    const dir = path.join(scratch, "project");
    fs.mkdirSync(dir, { recursive: true });
    return Array(k).fill(dir);
  }
  const repo = path.join(scratch, "repo");
  fs.mkdirSync(repo, { recursive: true });
  git(repo, "init", "-q");
  git(repo, "-c", "user.email=b@e", "-c", "user.name=b", "commit", "-q", "--allow-empty", "-m", "init");
  const dirs = [];
  for (let i = 0; i < k; i++) {
    let dir;
    if (i === 0) dir = repo;
    else if (i % 2 === 1) { dir = path.join(scratch, `project${i}`); fs.mkdirSync(dir, { recursive: true }); }
    else { dir = path.join(scratch, `wt${i}`); git(repo, "worktree", "add", "-q", dir); }
    dirs.push(dir);
  }
  return dirs;
}

// ---- counting -------------------------------------------------------------------------------

function procTable() {
  const table = new Map();
  for (const name of fs.readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const status = fs.readFileSync(`/proc/${name}/status`, "utf8");
      const ppid = Number(/^PPid:\s+(\d+)/m.exec(status)[1]);
      const rss = Number((/^VmRSS:\s+(\d+)/m.exec(status) || [0, 0])[1]) * 1024;
      const cmd = fs.readFileSync(`/proc/${name}/cmdline`, "utf8").split("\0").filter(Boolean);
      table.set(Number(name), { ppid, rss, cmd });
    } catch { /* gone meanwhile */ }
  }
  return table;
}

/** Every process below `roots`, by kind: the clients, the gateway (serve, daemon), the servers. */
function sample(roots, known) {
  const table = procTable();
  const children = new Map();
  for (const [pid, p] of table) {
    if (!children.has(p.ppid)) children.set(p.ppid, []);
    children.get(p.ppid).push(pid);
  }
  const seen = new Set();
  const stack = [...roots, ...known].filter((pid) => table.has(pid));
  while (stack.length) {
    const pid = stack.pop();
    if (seen.has(pid)) continue;
    seen.add(pid);
    stack.push(...(children.get(pid) || []));
  }
  const kinds = { client: { procs: 0, rss: 0 }, gateway: { procs: 0, rss: 0 }, server: { procs: 0, rss: 0 },
    daemon: { procs: 0, rss: 0 } };
  for (const pid of seen) {
    const p = table.get(pid);
    known.add(pid);
    const text = p.cmd.join(" ");
    const kind = path.basename(p.cmd[0] || "") === "mcp-reconcile" ? "gateway"
      : text.includes(bin.fixture) || text.includes("@modelcontextprotocol/server-") ? "server" : "client";
    kinds[kind].procs += 1;
    kinds[kind].rss += p.rss;
    // The daemon (and its watchdog) apart from the `serve`s, for its growth per session.
    if (kind === "gateway" && p.cmd[1] !== "serve") {
      kinds.daemon.procs += 1;
      kinds.daemon.rss += p.rss;
    }
  }
  return kinds;
}

function stopAll(known) {
  for (const pid of known) {
    try { process.kill(-pid, "SIGKILL"); } catch { /* not a group leader, or gone */ }
    try { process.kill(pid, "SIGKILL"); } catch { /* gone */ }
  }
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function run(client, system, k) {
  const scratch = fs.mkdtempSync(path.join(os.tmpdir(), `sessions-${client}-${system}-`));
  const home = path.join(scratch, "home");
  fs.mkdirSync(home, { recursive: true });
  const model = await fakeModel();
  writeClientConfig(client, home, servers(scratch), model);
  if (system === "installed") {
    writeShare(home, opts.share);
    execFileSync(bin.cli, ["install", client], { env: env(home, model), cwd: home, stdio: "ignore" });
  }
  const dirs = sessionDirs(scratch, k);
  const children = dirs.map((dir) => startClient(client, home, dir, model));
  const known = new Set();
  const deadline = Date.now() + 240_000;
  while (model.held() < k && Date.now() < deadline) await Promise.race([model.changed(), sleep(1000)]);
  const complete = model.held() >= k;
  // Let late spawns (a server's own children) appear, then take the sample twice.
  await sleep(3000);
  sample(children.map((c) => c.pid), known);
  await sleep(1000);
  const kinds = sample(children.map((c) => c.pid), known);
  model.release();
  await Promise.all(children.map((c) => new Promise((r) => (c.exitCode !== null ? r() : c.on("exit", r)))
    .then(() => undefined)).map((p) => Promise.race([p, sleep(60_000)])));
  stopAll(known);
  model.close();
  fs.rmSync(scratch, { recursive: true, force: true });
  const procs = kinds.client.procs + kinds.gateway.procs + kinds.server.procs;
  const rss = kinds.client.rss + kinds.gateway.rss + kinds.server.rss;
  return { client, system, k, complete, procs, rss, kinds };
}

const rows = [];
for (const client of opts.clients) {
  for (const k of opts.ks) {
    for (const system of ["direct", "installed"]) {
      const row = await run(client, system, k);
      rows.push(row);
      const mb = (b) => (b / 2 ** 20).toFixed(0);
      console.log(`${client} ${system} K=${k}${row.complete ? "" : " (incomplete)"}: ${row.procs} procs, ${mb(row.rss)} MiB` +
        ` (servers ${row.kinds.server.procs} / ${mb(row.kinds.server.rss)} MiB, gateway ${row.kinds.gateway.procs} /` +
        ` ${mb(row.kinds.gateway.rss)} MiB of which daemon ${row.kinds.daemon.procs} / ${mb(row.kinds.daemon.rss)} MiB,` +
        ` clients ${row.kinds.client.procs} / ${mb(row.kinds.client.rss)} MiB)`);
    }
  }
}
fs.mkdirSync(opts.out, { recursive: true });
fs.writeFileSync(path.join(opts.out, "sessions.json"), JSON.stringify({ opts: { ...opts, bin: undefined }, rows }, null, 2));
const table = ["| client | K | direct: processes, RSS | installed: processes, RSS | server processes direct → installed |",
  "|---|---|---|---|---|"];
for (const client of opts.clients) {
  for (const k of opts.ks) {
    const d = rows.find((r) => r.client === client && r.k === k && r.system === "direct");
    const i = rows.find((r) => r.client === client && r.k === k && r.system === "installed");
    const mb = (b) => `${(b / 2 ** 20).toFixed(0)} MiB`;
    table.push(`| ${client} | ${k} | ${d.procs}, ${mb(d.rss)} | ${i.procs}, ${mb(i.rss)} (${(100 * (i.rss / d.rss - 1)).toFixed(0)} %) |` +
      ` ${d.kinds.server.procs} → ${i.kinds.server.procs} |`);
  }
}
fs.writeFileSync(path.join(opts.out, "sessions.md"), table.join("\n") + "\n");
console.log(table.join("\n"));
