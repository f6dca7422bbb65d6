/**
 * The LspExecutor against real language servers (SPEC §14), the scenarios of
 * host-native/tests/lsp_watch.rs and lsp_connection.rs:
 * vscode-json-language-server and yaml-language-server from the repository's
 * `node_modules`, pylsp from `.venv-test`, and the native tests' scripted
 * server (`host-native/tests/fixtures/lsp_edge_server.py`) for the protocol
 * edges and a server that will not die — all installed by
 * `bash scripts/setup.sh`. The clock is virtual: backoff is stepped by moving
 * it, never by sleeping. After every test no process of any group it started
 * is left.
 */
import { existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, realpathSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { pathToFileURL } from "node:url";
import { test } from "node:test";
import assert from "node:assert/strict";

import { LspExecutor, kernel } from "../index.js";
import type { Approvals, LspEntry, LspExecutorEvent, LspReconcileReport, LspServerStatus, LspServers } from "../index.js";
import { repoRoot } from "./paths.js";

/** Bound on any wait for a server (generous: CI is noisy; servers debounce 0.5 s). */
const WAIT = 30_000;
const TEST = { timeout: 240_000 };

function installed(relative: string): string {
  const path = join(repoRoot, relative);
  assert.ok(existsSync(path), `${path} is missing: run \`bash scripts/setup.sh\` (it installs the language servers)`);
  return path;
}

const jsonServer = () => installed("node_modules/.bin/vscode-json-language-server");
const yamlServer = () => installed("node_modules/.bin/yaml-language-server");
const pylsp = () => installed(".venv-test/bin/pylsp");

/** The scripted edge server in `mode` (`normal` or `stubborn`), run with the venv's Python. */
function edgeServer(mode: string): LspEntry {
  return {
    command: installed(".venv-test/bin/python"),
    args: [installed("host-native/tests/fixtures/lsp_edge_server.py"), mode],
  };
}

/** A user entry: Node and Python start slowly on a loaded machine (the default is 10 s). */
function user(entry: LspEntry): LspEntry {
  return { startupTimeout: 60_000, ...entry, scope: "user" };
}

function jsonEntry(validate: boolean): LspEntry {
  return {
    command: jsonServer(),
    args: ["--stdio"],
    extensionToLanguage: { ".json": "json" },
    settings: { json: { validate: { enable: validate } } },
  };
}

interface Project {
  root: string;
  executor: LspExecutor;
  events: LspExecutorEvent[];
  /** The virtual clock the executor reads. */
  clock: { now: number };
  write(relative: string, text: string): string;
  reconcile(desired: LspServers, approvals?: Approvals): Promise<LspReconcileReport>;
  status(name: string): LspServerStatus;
  /** The pid of the latest `connected` event of `server`. */
  pid(server: string): number;
}

/**
 * Runs `body` with a fresh project and executor; then closes the executor and
 * checks that no process of any group it started is left.
 */
async function withProject(body: (p: Project) => Promise<void>): Promise<void> {
  const root = realpathSync(mkdtempSync(join(tmpdir(), "mcp-reconcile-lsp-")));
  const events: LspExecutorEvent[] = [];
  const clock = { now: 1_000_000 };
  const executor = new LspExecutor({
    projectRoot: root,
    now: () => clock.now,
    seed: () => 7,
    onEvent: (event) => events.push(event),
  });
  const pids = () => events.flatMap((e) => (e.type === "connected" ? [e.pid] : []));
  const p: Project = {
    root,
    executor,
    events,
    clock,
    write(relative, text) {
      const path = join(root, relative);
      mkdirSync(dirname(path), { recursive: true });
      writeFileSync(path, text);
      return path;
    },
    reconcile: (desired, approvals = {}) => executor.reconcile(desired, approvals),
    status(name) {
      const found = executor.status().find((s) => s.name === name);
      assert.ok(found, `${name} is configured: ${JSON.stringify(executor.status())}`);
      return found;
    },
    pid(server) {
      const connected = events.filter((e) => e.type === "connected" && e.server === server);
      const last = connected.at(-1);
      assert.ok(last?.type === "connected", `${server} connected: ${JSON.stringify(events)}`);
      return last.pid;
    },
  };
  let failure: unknown;
  try {
    await body(p);
  } catch (e) {
    failure = e;
  }
  await executor.close();
  const left = [];
  for (const pid of pids()) {
    if (await gone(pid)) continue;
    left.push(pid);
    // Reported below; killed here so a failing test does not leave it running.
    process.kill(-pid, "SIGKILL");
  }
  rmSync(root, { recursive: true, force: true });
  if (failure !== undefined) throw failure;
  assert.deepEqual(left, [], "every process group the executor started is gone");
}

/** The processes of group `pgid` that are not zombies, from `/proc/<pid>/stat`. */
function liveMembers(pgid: number): number[] {
  const members: number[] = [];
  for (const name of readdirSync("/proc")) {
    if (!/^\d+$/.test(name)) continue;
    let stat: string;
    try {
      stat = readFileSync(`/proc/${name}/stat`, "utf8");
    } catch {
      continue; // it exited meanwhile
    }
    // `pid (comm) state ppid pgrp ...`; comm may contain spaces and parentheses.
    const fields = stat.slice(stat.lastIndexOf(")") + 2).split(" ");
    if (fields[0] !== "Z" && fields[2] === String(pgid)) members.push(Number(name));
  }
  return members;
}

/** Whether group `pgid` has no live process left (waits, bounded, for a kill to land). */
async function gone(pgid: number): Promise<boolean> {
  const deadline = Date.now() + 5_000;
  while (liveMembers(pgid).length > 0) {
    if (Date.now() > deadline) return false;
    await new Promise((r) => setTimeout(r, 50));
  }
  return true;
}

async function until(what: string, check: () => boolean): Promise<void> {
  const deadline = Date.now() + WAIT;
  while (!check()) {
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

/** The plan as `action name` lines. */
function planned(report: LspReconcileReport): string[] {
  return report.plan.actions.map((a) => ("name" in a ? `${a.action} ${a.name}` : a.action));
}

function assertAllOk(report: LspReconcileReport): void {
  assert.deepEqual(
    report.outcomes.filter((o) => !o.ok),
    [],
    "every action succeeded",
  );
}

/** An approvals file deciding `name`'s entry, bound to its `lspApprovalHash`. */
function decided(root: string, name: string, entry: LspEntry, status: "approved" | "rejected"): Approvals {
  return { [root]: { [name]: { hash: kernel.lspApprovalHash({ config: entry }), status } } };
}

test("a settings edit is pushed to the same process and a seed edit restarts it", TEST, () =>
  withProject(async (p) => {
    // Characters servers may encode differently in the URI they publish.
    const file = p.write("sub dir/broken @file+é.json", '{"a": 1,, "b": }\n');
    let report = await p.reconcile({ json: user(jsonEntry(true)) });
    assert.deepEqual(planned(report), ["connect json"]);
    assertAllOk(report);
    const first = p.pid("json");
    const status = p.status("json");
    assert.equal(status.state, "connected");
    assert.equal(status.settingsPushes, 1, "pushed once after start");
    assert.deepEqual(status.extensions, [".json"]);
    assert.ok((await p.executor.diagnostics(file, WAIT)).length > 0, "a syntax error is reported");

    // Live field: the same process gets the full new settings.
    report = await p.reconcile({ json: user(jsonEntry(false)) });
    assert.deepEqual(report.plan.actions, [{ action: "reconfigure", name: "json", changed: ["settings"] }]);
    assertAllOk(report);
    assert.equal(p.pid("json"), first, "no restart for a settings edit");
    assert.equal(p.status("json").settingsPushes, 2);
    assert.deepEqual(await p.executor.diagnostics("sub dir/broken @file+é.json", WAIT), [], "validation is off");

    // Seed field: a new process; the old group is gone.
    const withEnv = { ...jsonEntry(false), env: { MCP_RECONCILE_TEST: "1" } };
    report = await p.reconcile({ json: user(withEnv) });
    assert.deepEqual(planned(report), ["restart json"]);
    assert.deepEqual((report.plan.actions[0] as { changed: string[] }).changed, ["env"]);
    assertAllOk(report);
    const second = p.pid("json");
    assert.notEqual(second, first);
    assert.ok(await gone(first), `group ${first} is gone`);
    assert.equal(p.status("json").settingsPushes, 1, "a new process");
    assert.deepEqual(await p.executor.diagnostics(file, WAIT), [], "the new process got the settings");

    // The same program under another path is another `command`: a restart too.
    report = await p.reconcile({ json: user({ ...withEnv, command: realpathSync(jsonServer()) }) });
    assert.deepEqual((report.plan.actions[0] as { changed: string[] }).changed, ["command"]);
    assertAllOk(report);
    const third = p.pid("json");
    assert.notEqual(third, second);
    assert.ok(await gone(second), `group ${second} is gone`);

    // Removed: stopped (shutdown, exit), nothing left.
    report = await p.reconcile({});
    assert.deepEqual(report.plan.actions, [{ action: "disconnect", name: "json", reason: "removed" }]);
    assertAllOk(report);
    assert.ok(await gone(third), `group ${third} is gone`);
    assert.deepEqual(p.executor.status(), []);
  }),
);

test("a project language server runs only as approved and an edit waits for approval", TEST, () =>
  withProject(async (p) => {
    const file = p.write("broken.json", '{"a": 1,, "b": }\n');
    const entry = { ...jsonEntry(true), startupTimeout: 60_000, scope: "project" as const };
    let report = await p.reconcile({ proj: entry });
    assert.deepEqual(report.plan.actions, [{ action: "skip", name: "proj", reason: "pending_approval" }]);
    assert.equal(p.status("proj").state, "skipped");
    assert.equal(p.status("proj").reason, "pending_approval");
    assert.equal(p.status("proj").spawns, 0, "never spawned before approval");
    await assert.rejects(p.executor.diagnostics(file, WAIT), /"proj".*pending_approval/);

    let approvals = decided(p.root, "proj", entry, "approved");
    report = await p.reconcile({ proj: entry }, approvals);
    assert.deepEqual(planned(report), ["connect proj"]);
    assertAllOk(report);
    const first = p.pid("proj");
    assert.ok((await p.executor.diagnostics(file, WAIT)).length > 0);

    // An edit of its settings is not applied before it is approved: the approved
    // config keeps running untouched.
    const edited = { ...entry, settings: { json: { validate: { enable: false } } } };
    report = await p.reconcile({ proj: edited }, approvals);
    assert.deepEqual(report.plan.actions, [{ action: "keep", name: "proj", reason: "pending_approval" }]);
    const waiting = p.status("proj");
    assert.equal(waiting.state, "connected");
    assert.equal(waiting.reason, "pending_approval");
    assert.equal(waiting.settingsPushes, 1, "nothing pushed before approval");
    assert.equal(waiting.pid, first);
    assert.ok((await p.executor.diagnostics(file, WAIT)).length > 0, "still validating");

    approvals = decided(p.root, "proj", edited, "approved");
    report = await p.reconcile({ proj: edited }, approvals);
    assert.deepEqual(report.plan.actions, [{ action: "reconfigure", name: "proj", changed: ["settings"] }]);
    assertAllOk(report);
    assert.equal(p.status("proj").settingsPushes, 2);
    assert.equal(p.pid("proj"), first, "applied live, no restart");
    assert.deepEqual(await p.executor.diagnostics(file, WAIT), []);

    // Rejected: stopped, and it stays stopped.
    approvals = decided(p.root, "proj", edited, "rejected");
    report = await p.reconcile({ proj: edited }, approvals);
    assert.deepEqual(report.plan.actions, [{ action: "disconnect", name: "proj", reason: "rejected" }]);
    assert.ok(await gone(first), `group ${first} is gone`);
    report = await p.reconcile({ proj: edited }, approvals);
    assert.deepEqual(report.plan.actions, [{ action: "skip", name: "proj", reason: "rejected" }]);
    assert.equal(p.status("proj").state, "skipped");
    assert.equal(p.status("proj").spawns, 1);
  }),
);

test("a language server that cannot start is retried with the kernel's backoff", TEST, () =>
  withProject(async (p) => {
    const failing = (extra: LspEntry): LspEntry =>
      user({ command: "/bin/sh", args: ["-c", "echo no such server >&2; exit 3"], ...extra });
    const desired: LspServers = {
      broken: failing({ maxRestarts: 2 }),
      once: failing({ restartOnCrash: false }),
      remote: user({ transport: "tcp", socket: { host: "127.0.0.1", port: 1 } }),
    };
    let report = await p.reconcile(desired);
    assert.deepEqual(planned(report), ["connect broken", "connect once", "connect remote"]);
    const outcome = report.outcomes.find((o) => "name" in o.action && o.action.name === "broken");
    assert.equal(outcome?.ok, false);
    assert.match(outcome?.error ?? "", /exited \(exit status: 3\).*no such server/s, "the stderr tail says why");

    const broken = p.status("broken");
    assert.equal(broken.state, "failed");
    assert.equal(broken.reason, "backing_off");
    assert.equal(broken.attempts, 1);
    assert.match(broken.lastError ?? "", /no such server/);
    const delay = kernel.backoff({ attempts: 1, seed: 7 }).delayMs;
    assert.equal(broken.retryInMs, delay, "the kernel's backoff for attempt 1");
    const once = p.status("once");
    assert.equal(once.reason, "crash_loop", "restartOnCrash: false is never retried");
    assert.equal(once.retryInMs, null);
    const remote = p.status("remote");
    assert.equal(remote.reason, "unsupported_transport");
    assert.equal(remote.spawns, 1);
    assert.equal(p.executor.nextRetryAt(), p.clock.now + delay);

    // Not due yet: nothing starts.
    report = await p.reconcile(desired);
    assert.deepEqual(planned(report), ["skip broken", "skip once", "skip remote"]);
    assert.equal(p.status("broken").spawns, 1);

    // Due: the retry is attempt 2, and maxRestarts: 2 makes it the last.
    p.clock.now = p.executor.nextRetryAt() ?? assert.fail("a retry is due");
    report = await p.reconcile(desired);
    assert.deepEqual(report.plan.actions[0], { action: "retry", name: "broken", attempt: 2 });
    assert.equal(p.status("broken").spawns, 2);
    assert.equal(p.status("broken").reason, "crash_loop", "maxRestarts reached");
    assert.equal(p.executor.nextRetryAt(), undefined);
    p.clock.now += 3_600_000;
    report = await p.reconcile(desired);
    assert.deepEqual(report.plan.actions, [
      { action: "skip", name: "broken", reason: "crash_loop" },
      { action: "skip", name: "once", reason: "crash_loop" },
      { action: "skip", name: "remote", reason: "crash_loop" },
    ]);

    // A seed edit is a new server: it starts again from zero.
    report = await p.reconcile({ ...desired, once: { ...desired.once, args: ["-c", "exit 4"] } });
    assert.deepEqual(planned(report).filter((a) => a.endsWith("once")), ["restart once"]);
    assert.equal(p.status("once").attempts, 1);
    assert.equal(p.status("once").spawns, 2);
    assert.deepEqual(
      p.events.filter((e) => e.type === "connected"),
      [],
      "nothing ever came up",
    );
  }),
);

test("a missing program and a silent one fail to start, redacted, and leave nothing", TEST, () =>
  withProject(async (p) => {
    // A length no other process uses, to find this one in /proc afterwards.
    const nap = String(1_000_000 + process.pid);
    const report = await p.reconcile({
      ghost: user({ command: "/nonexistent/language-server" }),
      // `sleep` reads nothing and never answers `initialize`.
      mute: user({ command: "sleep", args: [nap], startupTimeout: 300, env: { TOKEN: "hunter2-secret" } }),
    });
    const [ghost, mute] = report.outcomes.map((o) => o.error ?? "");
    assert.match(ghost ?? "", /language server `ghost` could not start `\/nonexistent\/language-server`/);
    assert.match(mute ?? "", /language server `mute` did not answer `initialize` within 300 ms/);
    assert.doesNotMatch(JSON.stringify(p.executor.status()), /hunter2-secret/);
    const sleeping = readdirSync("/proc").filter((pid) => {
      try {
        return readFileSync(`/proc/${pid}/cmdline`, "utf8") === `sleep\0${nap}\0`;
      } catch {
        return false;
      }
    });
    assert.deepEqual(sleeping, [], "the silent server was stopped");
  }),
);

test("a server that crashes is reported, then restarted after the backoff with its documents", TEST, () =>
  withProject(async (p) => {
    const file = p.write("broken.json", '{"a": }\n');
    const desired = { json: user(jsonEntry(true)) };
    assertAllOk(await p.reconcile(desired));
    const first = p.pid("json");
    assert.ok((await p.executor.diagnostics(file, WAIT)).length > 0);

    process.kill(-first, "SIGKILL");
    await until("the crash is reported", () => p.events.some((e) => e.type === "closed" && !e.requested));
    const closed = p.events.find((e) => e.type === "closed" && !e.requested);
    assert.match((closed as { error: string }).error, /^language server `json` exited \(signal: SIGKILL\)/);
    const crashed = p.status("json");
    assert.equal(crashed.state, "failed");
    assert.equal(crashed.reason, "backing_off");
    assert.equal(crashed.pid, null);
    await assert.rejects(p.executor.diagnostics(file, WAIT), /"json".*failed.*SIGKILL/s);

    p.clock.now = p.executor.nextRetryAt() ?? assert.fail("a retry is due");
    const report = await p.reconcile(desired);
    assert.deepEqual(report.plan.actions, [{ action: "retry", name: "json", attempt: 2 }]);
    assertAllOk(report);
    const second = p.pid("json");
    assert.notEqual(second, first);
    assert.equal(p.status("json").state, "connected");
    // Reopened on the new process: the diagnostics of the text it has.
    assert.ok((await p.executor.diagnostics(file, WAIT)).length > 0);
  }),
);

test("the YAML server pulls its settings with workspace/configuration", TEST, () =>
  withProject(async (p) => {
    const file = p.write("broken.yaml", "key: [unclosed\nother: : :\n");
    const entry = (settings: Record<string, unknown>): LspEntry =>
      user({
        command: yamlServer(),
        args: ["--stdio"],
        extensionToLanguage: { ".yaml": "yaml" },
        settings: { yaml: { schemaStore: { enable: false }, ...settings } },
      });
    assertAllOk(await p.reconcile({ yaml: entry({}) }));
    assert.ok((await p.executor.diagnostics(file, WAIT)).length > 0, "a syntax error is reported");

    const report = await p.reconcile({ yaml: entry({ validate: false }) });
    assert.deepEqual(planned(report), ["reconfigure yaml"]);
    assertAllOk(report);
    assert.deepEqual(await p.executor.diagnostics(file, WAIT), [], "validation is off");
    assert.equal(p.status("yaml").settingsPushes, 2);
  }),
);

test("pylsp drops pyflakes when the plugin is disabled", TEST, () =>
  withProject(async (p) => {
    const file = p.write("unused.py", "import os\n");
    const entry = (enabled: boolean): LspEntry =>
      user({
        command: pylsp(),
        extensionToLanguage: { ".py": "python" },
        settings: { pylsp: { plugins: { pyflakes: { enabled } } } },
      });
    const pyflakes = async () =>
      (await p.executor.diagnostics(file, WAIT)).filter((d) => d.source === "pyflakes").length;
    assertAllOk(await p.reconcile({ python: entry(true) }));
    assert.equal(await pyflakes(), 1, "`import os` is unused");

    const report = await p.reconcile({ python: entry(false) });
    assert.deepEqual(planned(report), ["reconfigure python"]);
    assert.equal(await pyflakes(), 0, "pyflakes is off");
  }),
);

test("server requests are answered from the current settings and a restart reopens documents", TEST, () =>
  withProject(async (p) => {
    const file = p.write("doc.txt", "text");
    const opened = join(p.root, "opened.log");
    const entry = (settings: Record<string, unknown>, env: Record<string, string> = {}): LspEntry =>
      user({
        ...edgeServer("normal"),
        env: { OPENED_LOG: opened, ...env },
        extensionToLanguage: { ".txt": "plaintext" },
        initializationOptions: { provideFormatter: true, n: 1 },
        settings,
      });
    /** The answers the edge server got for its latest round of questions, as it reports them. */
    const report = async () => {
      const found = await p.executor.diagnostics(file, WAIT);
      assert.equal(found.length, 1, JSON.stringify(found));
      return JSON.parse(String(found[0]?.message)) as {
        pushes: number;
        settings: unknown;
        answers: Array<{ result?: unknown; error?: { code: number } }>;
        initialize: { processId: number; rootUri: string; initializationOptions: unknown };
      };
    };
    const whole = { a: { b: [1, 2] }, other: true };
    assertAllOk(await p.reconcile({ edge: entry(whole) }));
    const first = await report();
    assert.equal(first.pushes, 1);
    assert.deepEqual(first.settings, whole);
    assert.deepEqual(first.answers[0]?.result, [[1, 2], whole, whole, null, null], "dotted sections; empty or absent = everything; missing = null");
    for (const accepted of [1, 2, 3]) assert.deepEqual(first.answers[accepted], { result: null });
    const folder = pathToFileURL(p.root).href;
    assert.deepEqual((first.answers[4]?.result as Array<{ uri: string }>)[0]?.uri, folder);
    assert.equal(first.answers[5]?.error?.code, -32601, "MethodNotFound");
    assert.equal(first.initialize.processId, process.pid);
    assert.equal(first.initialize.rootUri, folder);
    assert.deepEqual(first.initialize.initializationOptions, { provideFormatter: true, n: 1 });

    // A push: the next pull sees the new settings whole, and the document is re-sent.
    const newer = { a: { b: "new" } };
    assertAllOk(await p.reconcile({ edge: entry(newer) }));
    const second = await report();
    assert.equal(second.pushes, 2);
    assert.deepEqual(second.answers[0]?.result, ["new", newer, newer, null, null]);

    // A seed edit restarts it; the new process opens the document the old one had open.
    const old = p.pid("edge");
    const restart = await p.reconcile({ edge: entry(newer, { OTHER: "1" }) });
    assert.deepEqual(planned(restart), ["restart edge"]);
    assertAllOk(restart);
    const fresh = p.pid("edge");
    const uri = pathToFileURL(file).href;
    const openedBy = () =>
      readFileSync(opened, "utf8")
        .split("\n")
        .filter((line) => line.endsWith(` ${uri}`))
        .map((line) => Number(line.split(" ")[0]));
    await until("the new process opened the document", () => openedBy().includes(fresh));
    assert.deepEqual(openedBy(), [old, fresh]);
  }),
);

test("a server that ignores shutdown, exit and SIGTERM is killed with its group", TEST, () =>
  withProject(async (p) => {
    assertAllOk(await p.reconcile({ stubborn: user({ ...edgeServer("stubborn"), shutdownTimeout: 300 }) }));
    const pid = p.pid("stubborn");
    // The `sleep` grandchild shares the group.
    await until("the grandchild runs", () => liveMembers(pid).length >= 2);

    const report = await p.reconcile({});
    assert.deepEqual(report.plan.actions, [{ action: "disconnect", name: "stubborn", reason: "removed" }]);
    assertAllOk(report);
    assert.ok(await gone(pid), `group ${pid} is gone: ${JSON.stringify(liveMembers(pid))}`);
    assert.deepEqual(
      p.events.filter((e) => e.type === "closed"),
      [{ type: "closed", server: "stubborn", requested: true }],
      "a requested stop is not a crash",
    );
  }),
);

/**
 * A Node script as a language server: answers `initialize`, then, once a
 * document is opened, announces a message of 99 999 999 999 bytes and streams
 * filler. `vscode-jsonrpc` alone would buffer all of it.
 */
const HUGE_SERVER = `
let buffered = Buffer.alloc(0);
const send = (message) => {
  const body = Buffer.from(JSON.stringify({ jsonrpc: "2.0", ...message }));
  process.stdout.write("Content-Length: " + body.length + "\\r\\n\\r\\n");
  process.stdout.write(body);
};
process.stdin.on("data", (chunk) => {
  buffered = Buffer.concat([buffered, chunk]);
  for (;;) {
    const end = buffered.indexOf("\\r\\n\\r\\n");
    if (end < 0) return;
    const length = Number(/content-length: *(\\d+)/i.exec(buffered.subarray(0, end).toString())[1]);
    if (buffered.length < end + 4 + length) return;
    const message = JSON.parse(buffered.subarray(end + 4, end + 4 + length).toString());
    buffered = buffered.subarray(end + 4 + length);
    if (message.method === "initialize") send({ id: message.id, result: { capabilities: { textDocumentSync: 1 } } });
    if (message.method === "textDocument/didOpen") {
      process.stdout.write("Content-Length: 99999999999\\r\\n\\r\\n");
      const filler = Buffer.alloc(1 << 20, 32);
      setInterval(() => process.stdout.write(filler), 10);
    }
  }
});
`;

test("a server that announces a message over 64 MiB fails only its own connection", TEST, () =>
  withProject(async (p) => {
    const script = p.write("huge-server.cjs", HUGE_SERVER);
    const desired = {
      huge: user({ command: process.execPath, args: [script], extensionToLanguage: { ".txt": "plaintext" } }),
      json: user(jsonEntry(true)),
    };
    assertAllOk(await p.reconcile(desired));
    const file = p.write("notes.txt", "text\n");
    void p.executor.diagnostics(file, WAIT).catch(() => {});
    await until("the huge server's end is reported", () =>
      p.events.some((e) => e.type === "closed" && e.server === "huge" && !e.requested),
    );
    const closed = p.events.find((e) => e.type === "closed" && e.server === "huge" && !e.requested);
    assert.match(
      (closed as { error: string }).error,
      /language server `huge` announced a message of 99999999999 bytes, over the limit of 64 MiB/,
    );
    assert.equal(p.status("huge").state, "failed");
    // The other server answers as before.
    const broken = p.write("broken.json", '{"a": }\n');
    assert.ok((await p.executor.diagnostics(broken, WAIT)).length > 0);
    assert.equal(p.status("json").state, "connected");
  }),
);
