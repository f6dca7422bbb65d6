// Consumes the packed package the way users do, never the source tree: `npm pack`, install the
// tarball into a scratch project, and run one consumer per way of loading it. Each runs
// scenario.cjs (connectionId, hotReload, plan) and must print exactly what the native CLI
// answers for the same steps.
//
//   node consumers/run.mjs            (from host-wasm/, after `npm run build`)
//
// Consumers: Node ESM, Node CJS, TypeScript NodeNext strict (ESM and .cts), esbuild ESM and CJS
// bundles, a rollup ES module bundle of the kernel and a webpack CommonJS bundle of everything,
// each bundle run from a directory with nothing beside it, and a
// browser page, a module worker and a bundler-free page in headless Chromium (Debian's
// `chromium`), served on 127.0.0.1. And the README's first-reconcile block, as printed there,
// against a real MCP server; its language-server block is type-checked. Fails when the tarball outgrows its budget.
import { spawn, spawnSync } from "node:child_process";
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { createServer } from "node:http";
import { createRequire } from "node:module";
import { tmpdir } from "node:os";
import { basename, extname, join, normalize, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const here = fileURLToPath(new URL(".", import.meta.url));
const hostWasm = resolve(here, "..");
const repoRoot = resolve(hostWasm, "..");
const nativeCli = process.env.MCP_RECONCILE_BIN ?? join(repoRoot, "target", "debug", "mcp-reconcile");
const bin = (name) => join(hostWasm, "node_modules", ".bin", name);

/**
 * What `npm pack` may weigh: the wasm module is carried twice (base64, in the ES module and in
 * the single-file CommonJS kernel), about 270 KB of the packed size each.
 */
const BUDGET = { packed: 640 * 1024, unpacked: 1900 * 1024 };

const scratch = mkdtempSync(join(tmpdir(), "mcp-reconcile-consumers-"));
const elsewhere = mkdtempSync(join(tmpdir(), "mcp-reconcile-elsewhere-"));
const failures = [];
let chromium;

function run(command, args, options = {}) {
  const r = spawnSync(command, args, { encoding: "utf8", maxBuffer: 1 << 26, timeout: 300_000, ...options });
  if (r.status !== 0) {
    throw new Error(`${[command, ...args].join(" ")} failed (${r.status ?? r.signal}):\n${r.stdout}${r.stderr}`);
  }
  return r.stdout;
}

/** The kernel as the native CLI answers it: one `mcp-reconcile eval` per call. */
const nativeKernel = new Proxy(
  {},
  {
    get: (_, op) => (request) => {
      const line = run(nativeCli, ["eval"], { input: `${JSON.stringify({ op, ...request })}\n` });
      const response = JSON.parse(line);
      if (!("ok" in response)) throw new Error(`native ${String(op)}: ${line}`);
      return response.ok;
    },
  },
);

function check(name, got, expected) {
  const ok = got === expected;
  console.log(`${ok ? "ok  " : "FAIL"} ${name}`);
  if (!ok) failures.push(`${name}:\n  got:      ${got}\n  expected: ${expected}`);
}

function pack() {
  const [info] = JSON.parse(run("npm", ["pack", "--json", "--pack-destination", scratch], { cwd: hostWasm }));
  console.log(`tarball ${info.filename}: ${(info.size / 1024).toFixed(0)} KB packed, ${(info.unpackedSize / 1024).toFixed(0)} KB unpacked, ${info.files.length} files`);
  if (info.size > BUDGET.packed || info.unpackedSize > BUDGET.unpacked) {
    failures.push(`the tarball outgrew its budget (${BUDGET.packed} packed, ${BUDGET.unpacked} unpacked): ${info.size}, ${info.unpackedSize}`);
  }
  const shipped = info.files.map((f) => f.path);
  for (const unwanted of [/^ts\//, /^dist\/test\//, /^dist\/example\//, /\.map$/, /\.wasm$/, /^consumers\//]) {
    const hit = shipped.find((p) => unwanted.test(p));
    if (hit) failures.push(`the tarball ships ${hit}`);
  }
  return join(scratch, info.filename);
}

function install(tarball) {
  const own = JSON.parse(readFileSync(join(hostWasm, "package.json"), "utf8"));
  writeFileSync(
    join(scratch, "package.json"),
    JSON.stringify({
      private: true,
      dependencies: { "mcp-reconcile": `file:${tarball}`, "@types/node": own.devDependencies["@types/node"] },
    }),
  );
  run("npm", ["install", "--no-audit", "--no-fund", "--prefer-offline", "--loglevel=error"], { cwd: scratch });
  cpSync(here, scratch, { recursive: true, filter: (p) => !p.endsWith("run.mjs") });
}

/** The bundlers' own APIs, from host-wasm's pinned devDependencies. */
const tools = createRequire(join(hostWasm, "package.json"));

async function rollup(entry, out) {
  const { rollup: bundler } = tools("rollup");
  const { nodeResolve } = tools("@rollup/plugin-node-resolve");
  const commonjs = tools("@rollup/plugin-commonjs");
  const build = await bundler({
    input: join(scratch, entry),
    plugins: [nodeResolve(), commonjs()],
    onwarn: (w) => failures.push(`rollup: ${w.message}`),
  });
  await build.write({ file: out, format: "es" });
  await build.close();
}

async function webpack(entry, out) {
  const compiler = tools("webpack")({
    mode: "production",
    target: "node",
    context: scratch,
    entry: `./${entry}`,
    output: { path: resolve(out, ".."), filename: basename(out), library: { type: "commonjs2" } },
    optimization: { minimize: false },
  });
  const stats = await new Promise((ok, fail) => compiler.run((e, s) => (e ? fail(e) : ok(s))));
  await new Promise((r) => compiler.close(r));
  if (stats.hasErrors()) throw new Error(`webpack: ${stats.toString("errors-only")}`);
}

function bundle(entry, out, ...flags) {
  run(bin("esbuild"), [entry, "--bundle", `--outfile=${out}`, "--log-level=error", ...flags], { cwd: scratch });
}

/** Serves the scratch project on 127.0.0.1 and opens it in headless Chromium; resolves with what the page posts. */
async function browser(expectedNames) {
  const results = new Map();
  let done;
  const finished = new Promise((r) => (done = r));
  const server = createServer((req, res) => {
    if (req.method === "POST" && req.url.startsWith("/result/")) {
      let body = "";
      req.on("data", (c) => (body += c));
      req.on("end", () => {
        results.set(req.url.slice("/result/".length), body);
        res.end();
        if (results.has("error") || expectedNames.every((n) => results.has(n))) done();
      });
      return;
    }
    const path = normalize(join(scratch, decodeURIComponent(new URL(req.url, "http://x").pathname)));
    if (!path.startsWith(scratch) || !existsSync(path)) {
      res.writeHead(404).end();
      return;
    }
    const type = { ".html": "text/html", ".js": "text/javascript", ".cjs": "text/javascript" }[extname(path)];
    res.writeHead(200, { "content-type": type ?? "application/octet-stream" }).end(readFileSync(path));
  });
  await new Promise((r) => server.listen(0, "127.0.0.1", r));
  const url = `http://127.0.0.1:${server.address().port}/browser/index.html`;
  const profile = join(elsewhere, "chromium-profile");
  // Its own process group, so a stop ends its helpers too. Root needs --no-sandbox.
  chromium = spawn(
    "chromium",
    ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-extensions",
      `--user-data-dir=${profile}`, url],
    { detached: true, stdio: "ignore" },
  );
  const timeout = setTimeout(done, 60_000);
  await finished;
  clearTimeout(timeout);
  stopChromium();
  server.close();
  // Every process of this browser (its profile is on each command line) must be gone.
  for (let i = 0; ; i++) {
    const left = spawnSync("pgrep", ["-f", profile], { encoding: "utf8" }).stdout.trim();
    if (left === "") break;
    if (i === 100) {
      failures.push(`Chromium processes outlived the test: ${left.replaceAll("\n", " ")}`);
      break;
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  return results;
}

/**
 * The README's "install and first reconcile" block, run as it is printed, against the
 * `server-everything` MCP server: it must connect it and list its tools.
 */
async function readmeExample() {
  const readme = readFileSync(join(hostWasm, "README.md"), "utf8");
  const block = readme.split("<!-- first-reconcile")[1]?.match(/```js\n([\s\S]*?)```/)?.[1];
  if (block === undefined) throw new Error("README.md has no first-reconcile js block");
  const lines = block.trimEnd().split("\n").length;
  if (lines >= 20) failures.push(`the README's first reconcile takes ${lines} lines, not under 20`);
  const dir = join(scratch, "readme");
  mkdirSync(dir);
  writeFileSync(join(dir, "main.mjs"), block);
  const everything = join(hostWasm, "node_modules", "@modelcontextprotocol", "server-everything", "dist", "index.js");
  const settings = { mcpServers: { everything: { command: process.execPath, args: [everything, "stdio"] } } };
  writeFileSync(join(dir, "settings.json"), JSON.stringify(settings));
  // Its own process group: a hang is ended with the servers it started.
  const child = spawn("node", ["main.mjs"], { cwd: dir, detached: true, stdio: ["ignore", "pipe", "pipe"] });
  let out = "";
  child.stdout.on("data", (c) => (out += c));
  child.stderr.on("data", (c) => (out += c));
  const timer = setTimeout(() => process.kill(-child.pid, "SIGKILL"), 120_000);
  const code = await new Promise((r) => child.on("exit", (c, signal) => r(c ?? signal)));
  clearTimeout(timer);
  try {
    process.kill(-child.pid, "SIGKILL");
  } catch {}
  const [first, second] = out.trim().split("\n");
  const tools = Number(/^(\d+) tools$/.exec(second ?? "")?.[1] ?? 0);
  const ok = code === 0 && first === "connect everything ok" && tools > 0;
  console.log(`${ok ? "ok  " : "FAIL"} README first reconcile (${lines} lines): ${out.trim().replaceAll("\n", "; ")}`);
  if (!ok) failures.push(`the README example exited ${code}:\n${out}`);
}

/** Kills Chromium's whole group: its helper processes outlive the browser process itself. */
function stopChromium() {
  if (chromium?.pid === undefined) return;
  try {
    process.kill(-chromium.pid, "SIGKILL");
  } catch {}
}

try {
  const expected = createRequire(import.meta.url)("./scenario.cjs")(nativeKernel);
  const id = JSON.parse(expected).id;
  install(pack());

  check("node ESM", run("node", ["node-esm/main.js"], { cwd: scratch }).trim(), expected);
  check("node CJS", run("node", ["node-cjs/main.js"], { cwd: scratch }).trim(), expected);

  // The README's language-server block is compiled with it (strict, as printed), not run.
  const lspBlock = readFileSync(join(hostWasm, "README.md"), "utf8")
    .split("## Language servers")[1]
    ?.match(/```ts\n([\s\S]*?)```/)?.[1];
  if (lspBlock === undefined) throw new Error("README.md has no language-server ts block");
  writeFileSync(join(scratch, "ts-nodenext", "readme-lsp.ts"), `${lspBlock}export {};\n`);
  run(bin("tsc"), ["-p", "ts-nodenext"], { cwd: scratch });
  check("TypeScript NodeNext strict", run("node", ["ts-nodenext/out/main.js"], { cwd: scratch }).trim(), expected);

  // The banner is for the MCP SDK's CommonJS dependencies (cross-spawn requires
  // child_process), as every ES module bundle of CommonJS code for Node needs; the package
  // itself needs nothing (the browser bundles below have no banner).
  const requireBanner = "--banner:js=import { createRequire } from 'node:module'; const require = createRequire(import.meta.url);";
  bundle("bundle-esm/main.js", join(elsewhere, "app.mjs"), "--platform=node", "--format=esm", requireBanner);
  check("esbuild ESM bundle, run elsewhere", run("node", ["app.mjs"], { cwd: elsewhere }).trim(), expected);
  bundle("bundle-cjs/main.js", join(elsewhere, "app.cjs"), "--platform=node", "--format=cjs");
  check("esbuild CJS bundle, run elsewhere", run("node", ["app.cjs"], { cwd: elsewhere }).trim(), expected);
  await rollup("bundle-rollup/main.js", join(elsewhere, "rollup.mjs"));
  check("rollup ESM bundle (kernel), run elsewhere", run("node", ["rollup.mjs"], { cwd: elsewhere }).trim(), expected);
  await webpack("bundle-webpack/main.js", join(elsewhere, "webpack.cjs"));
  check("webpack CJS bundle, run elsewhere", run("node", ["webpack.cjs"], { cwd: elsewhere }).trim(), expected);

  bundle("browser/page.js", "browser/page.bundle.js", "--platform=browser", "--format=esm");
  bundle("browser/worker.js", "browser/worker.bundle.js", "--platform=browser", "--format=esm");
  const seen = await browser(["page", "worker", "native-esm"]);
  if (seen.size === 0) failures.push("Chromium posted no result within 60 s (is Debian's chromium installed?)");
  if (seen.has("error")) failures.push(`the browser reported: ${seen.get("error")}`);
  check("browser page (bundled)", seen.get("page"), expected);
  check("browser module worker (bundled)", seen.get("worker"), expected);
  check("browser page, no bundler", seen.get("native-esm"), id);

  await readmeExample();
} catch (e) {
  failures.push(e instanceof Error ? e.message : String(e));
} finally {
  stopChromium();
  rmSync(scratch, { recursive: true, force: true });
  rmSync(elsewhere, { recursive: true, force: true });
}

if (failures.length > 0) {
  console.error(`\n${failures.length} failure(s):\n${failures.join("\n")}`);
  process.exit(1);
}
