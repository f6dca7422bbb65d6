// Renders bench/results/reload.json (from bench/reload.mjs) as the tables docs/BENCHMARKS.md shows
// (bench/results/reload.md) and the chart docs/benchmarks-reload.svg: reload latency and the
// changed server's tool gap by N, for each system and kind of save. Plain SVG, no plotting
// dependency.
//
//   node bench/report.mjs [--in bench/results/reload.json] [--svg docs/benchmarks-reload.svg]
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "..");
const argv = process.argv.slice(2);
const opt = (name, fallback) => {
  const i = argv.indexOf(`--${name}`);
  return i >= 0 ? argv[i + 1] : fallback;
};
const input = opt("in", path.join(root, "bench/results/reload.json"));
const svgOut = opt("svg", path.join(root, "docs/benchmarks-reload.svg"));
const mdOut = opt("md", path.join(path.dirname(input), "reload.md"));
const data = JSON.parse(fs.readFileSync(input, "utf8"));
const floorInit = data.floor.initializeMs.median;
const floorTools = data.floor.toolsListMs.median;
// Runs from before save kinds were measured hold one in-place series.
const saves = data.options.saves ?? ["in-place"];
const settle =
  data.options.debounce === null || data.options.debounce === undefined
    ? `settle detection with the host's defaults (--quiet-ms ${data.options.quiet ?? 25}, --debounce-ms 300)`
    : `--debounce-ms ${data.options.debounce}${data.options.quiet ? `, --quiet-ms ${data.options.quiet}` : ""}`;

const LABEL = { ours: "mcp-reconcile watch", "ours-daemon": "mcp-reconcile serve (daemon)", "ours-full": "mcp-reconcile --full-restart", "mcp-hub": `mcp-hub ${data.machine.mcpHub}`, magg: `magg ${data.machine.magg ?? ""}`.trim() };
const COLOR = { ours: "#1b7f3b", "ours-daemon": "#65a30d", "ours-full": "#c2410c", "mcp-hub": "#2563eb", magg: "#9333ea" };
const runs = data.runs.filter((r) => !r.failed);
const sizes = [...new Set(data.runs.map((r) => r.n))];
const systems = [...new Set(data.runs.map((r) => r.system))];
const get = (system, n) => runs.find((r) => r.system === system && r.n === n);
const of = (r, save) => r.bySave?.[save] ?? r.summary;
const series = systems.flatMap((system) => saves.map((save) => ({ system, save })));

// ---------------------------------------------------------------- tables
const f = (x, d = 0) => (x === null || x === undefined || Number.isNaN(x) ? "—" : !Number.isFinite(x) ? "∞" : x.toFixed(d));
const spread = (s, d = 0) => `${f(s.median, d)} (${f(s.p10, d)}–${f(s.p90, d)})`;
let md = `mcp-reconcile: ${settle}; mcp-hub settles writes for 200 ms (chokidar \`awaitWriteFinish\`). ${data.options.reps} edits per system, size and kind of save; status polled every ${data.options.pollMs} ms. `;
md += `Floor: bare spawn→initialize of the changed server ${f(floorInit, 1)} ms median (p10–p90 ${f(data.floor.initializeMs.p10, 1)}–${f(data.floor.initializeMs.p90, 1)}), spawn→tools/list ${f(floorTools, 1)} ms. `;
md += `Load average ${data.machine.loadBefore.map((x) => x.toFixed(1)).join(" / ")} before, ${(data.machine.loadAfter ?? []).map((x) => x.toFixed(1)).join(" / ")} after (1 / 5 / 15 min, ${data.machine.cores} cores).\n\n`;
md += "| N | system | save | write→applied ms, median (p10–p90) | write→changed server's tools ms | restarted processes (unchanged ones) | unchanged servers' longest tool gap ms, median / max | changed server's tool gap ms, median / max |\n";
md += "|---:|---|---|---:|---:|---:|---:|---:|\n";
for (const n of sizes) {
  for (const system of systems) {
    const r = data.runs.find((x) => x.system === system && x.n === n);
    if (!r) continue;
    if (r.failed) {
      md += `| ${n} | ${LABEL[system]} | — | failed: ${r.failed} |||||\n`;
      continue;
    }
    for (const save of saves) {
      const s = of(r, save);
      const gap = (g) => (g ? `${f(g.median)} / ${f(g.max)}` : "calls: see below");
      md += `| ${n} | ${LABEL[system]} | ${save} | ${spread(s.appliedMs)} | ${spread(s.toolsMs)} | ${f(s.restarted.median)} (${f(s.restartedUnchanged.median)}; max ${f(s.restartedUnchanged.max)}) | ${gap(s.unchangedGapMs)} | ${gap(s.changedGapMs)} |\n`;
    }
  }
}
md += "\nThe hosts themselves (over all edits of a system and size):\n\n";
md += "| N | system | host RSS MiB | host CPU idle % | host CPU ms per edit window | polls: median interval ms |\n|---:|---|---:|---:|---:|---:|\n";
for (const n of sizes) {
  for (const system of systems) {
    const r = get(system, n);
    if (r && !r.failed) md += `| ${n} | ${LABEL[system]} | ${f(r.rssKb / 1024, 1)} | ${f(r.idleCpuPct, 2)} | ${f(r.cpuMsPerRep, 1)} | ${f(r.summary.pollIntervalMs?.median, 1)} |\n`;
  }
}
md += "\nmcp-reconcile against mcp-hub (median write→applied), and above the floor (median write→applied − median bare spawn→initialize: settle detection, reading and planning, stopping nothing yet, starting the new process):\n\n";
md += `| N | save | mcp-reconcile / mcp-hub, write→applied | mcp-reconcile / mcp-hub, write→tools | mcp-reconcile above the floor ms |\n|---:|---|---:|---:|---:|\n`;
for (const n of sizes) {
  for (const save of saves) {
    const ours = get("ours", n);
    const hub = get("mcp-hub", n);
    const ratio = (a, b) => (a && b ? `${(a / b).toFixed(2)}×` : "—");
    md += `| ${n} | ${save} | ${ratio(ours && of(ours, save).appliedMs.median, hub && of(hub, save).appliedMs.median)} | ${ratio(ours && of(ours, save).toolsMs.median, hub && of(hub, save).toolsMs.median)} | ${ours ? f(of(ours, save).appliedMs.median - floorInit, 1) : "—"} |\n`;
  }
}
// ---------------------------------------------------------------- the daemon path
const daemonRuns = sizes.map((n) => get("ours-daemon", n)).filter(Boolean);
if (daemonRuns.length) {
  md += "\nThrough `serve` on the per-user daemon, timed by a real MCP client (TypeScript SDK " + (data.machine.mcpSdkClient ?? "") + "): write → the session's pass line, → `notifications/tools/list_changed` at the client, → the client's next `tools/list` answer showing the changed server's new tool; and what a `tools/list` costs that client when nothing changed:\n\n";
  md += "| N | save | write→applied ms | write→list_changed ms | write→tools/list ms | idle tools/list ms | restarted (unchanged) | daemon RSS MiB | daemon + serve CPU ms per edit |\n|---:|---|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const r of daemonRuns) {
    for (const save of saves) {
      const s = of(r, save);
      md += `| ${r.n} | ${save} | ${spread(s.appliedMs, 1)} | ${spread(s.listChangedMs, 1)} | ${spread(s.toolsMs, 1)} | ${f(r.idleListMs?.median, 1)} | ${f(s.restarted.median)} (${f(s.restartedUnchanged.max)}) | ${f(r.rssKb / 1024, 1)} | ${f(r.cpuMsPerRep, 1)} |\n`;
    }
  }
}
const inflight = [...daemonRuns.map((r) => [`serve (daemon), N = ${r.n}`, r.inflight]), ...(data.many && !data.many.failed ? [[`${data.many.sessions} sessions × ${data.many.servers} servers`, data.many.inflight]] : [])];
if (inflight.some(([, reps]) => reps?.length)) {
  md += "\nCalls in flight across the changed server's make-before-break switch (`sleep` 25 ms, one every 4 ms from 40 ms before the save to 200 ms after):\n\n| where | edits | calls | errors |\n|---|---:|---:|---:|\n";
  for (const [where, reps] of inflight) {
    if (!reps?.length) continue;
    md += `| ${where} | ${reps.length} | ${reps.reduce((a, r) => a + r.calls, 0)} | ${reps.reduce((a, r) => a + r.errors.length, 0)} |\n`;
  }
}
if (data.many) {
  const m = data.many;
  if (m.failed) md += `\nMany sessions: failed: ${m.failed}\n`;
  else {
    md += `\nOne daemon, ${m.sessions} sessions × ${m.servers} servers (${m.shared} of each shared by all): ${m.connections} server processes. An edit of one server of the first session:\n\n`;
    md += "| save | write→list_changed ms | write→tools/list ms | restarted (unchanged) | other sessions' list_changed |\n|---|---:|---:|---:|---:|\n";
    for (const save of saves) {
      const s = m.bySave[save];
      md += `| ${save} | ${spread(s.listChangedMs, 1)} | ${spread(s.toolsMs, 1)} | ${f(s.restarted.median)} (${f(s.restartedUnchanged.max)}) | ${f(s.othersListChanged.max)} |\n`;
    }
    md += `\nDaemon RSS ${f(m.idleRssKb / 1024, 1)} MiB idle with ${m.connections} connections; growth from ${m.growth[0].connections} to ${m.growth.at(-1).connections} connections: **${f(m.rssKbPerConnection, 1)} KiB per connection** (its session's share included); idle CPU ${f(m.idleCpuPct, 2)} %; CPU per edit ${f(m.cpuMsPerRep, 1)} ms.\n`;
  }
}

// ---------------------------------------------------------------- peer ratios
md += "\nRatios against the peers, median write→applied (the peer's own \"applied\" line) and write→tools (the changed server's new tools seen by a poll), same run:\n\n";
const peers = systems.filter((x) => x === "mcp-hub" || x === "magg");
md += `| N | save | ${peers.map((p) => `${LABEL[p]} / mcp-reconcile watch, applied | … tools`).join(" | ")} | serve (daemon): write→tools/list vs ${peers.map((p) => LABEL[p]).join(", ")} write→tools |\n|---:|---|${peers.map(() => "---:|---:|").join("")}---:|\n`;
for (const n of sizes) {
  for (const save of saves) {
    const ours = get("ours", n);
    const daemon = get("ours-daemon", n);
    const ratio = (a, b) => (a && b ? `${(a / b).toFixed(1)}×` : "—");
    const cells = peers.map((p) => {
      const peer = get(p, n);
      return `${ratio(peer && of(peer, save).appliedMs.median, ours && of(ours, save).appliedMs.median)} | ${ratio(peer && of(peer, save).toolsMs.median, ours && of(ours, save).toolsMs.median)}`;
    });
    const daemonCell = peers.map((p) => ratio(get(p, n) && of(get(p, n), save).toolsMs.median, daemon && of(daemon, save).toolsMs.median)).join(", ");
    md += `| ${n} | ${save} | ${cells.join(" | ")} | ${daemonCell} |\n`;
  }
}

fs.writeFileSync(mdOut, md);
process.stdout.write(md);

// ---------------------------------------------------------------- chart
const W = 1000;
const H = 460;
const panel = { top: 90, bottom: 360, width: 420 };
const panels = [
  { x: 70, title: "write → applied (median, whiskers p10–p90), ms", value: (r, save) => of(r, save).appliedMs },
  // The daemon path has no status poll (its tool stays answering: see the in-flight calls).
  { x: 560, title: "changed server's longest tool gap (median, whisker max), ms", value: (r, save) => ({ median: of(r, save).changedGapMs?.median ?? NaN, p10: of(r, save).changedGapMs?.median ?? NaN, p90: of(r, save).changedGapMs?.max ?? NaN }) },
];
const esc = (s) => String(s).replace(/&/g, "&amp;").replace(/</g, "&lt;");
const shade = (system, save) => (save === saves[0] ? COLOR[system] : `${COLOR[system]}88`);
let svg = `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 ${W} ${H}" width="${W}" height="${H}" font-family="system-ui, sans-serif" font-size="12">\n`;
svg += `<rect width="${W}" height="${H}" fill="#fff"/>\n`;
svg += `<text x="${W / 2}" y="24" text-anchor="middle" font-size="15" font-weight="600">Editing one server's args with N fixture servers + server-everything running</text>\n`;
svg += `<text x="${W / 2}" y="44" text-anchor="middle" fill="#555">${esc(`${data.machine.cores} shared cores, ${data.machine.cpuModel}; mcp-reconcile ${settle.replace(/ with the host's defaults/, "")}; ${data.options.reps} edits each; ${data.started.slice(0, 10)}`)}</text>\n`;
for (const p of panels) {
  const vals = runs.flatMap((r) =>
    saves.map((save) => {
      const v = p.value(r, save);
      return Math.max(Number.isFinite(v.median) ? v.median : 0, Number.isFinite(v.p90) ? v.p90 : 0);
    }),
  );
  let max = Math.max(1, ...vals);
  const step = niceStep(max);
  max = Math.ceil(max / step) * step;
  const y = (v) => panel.bottom - ((panel.bottom - panel.top) * Math.min(v, max)) / max;
  svg += `<text x="${p.x + panel.width / 2}" y="${panel.top - 10}" text-anchor="middle" font-weight="600">${esc(p.title)}</text>\n`;
  for (let v = 0; v <= max + 1e-9; v += step) {
    svg += `<line x1="${p.x}" x2="${p.x + panel.width}" y1="${y(v)}" y2="${y(v)}" stroke="#e5e5e5"/>`;
    svg += `<text x="${p.x - 6}" y="${y(v) + 4}" text-anchor="end" fill="#555">${+v.toFixed(6)}</text>\n`;
  }
  if (p === panels[0]) {
    svg += `<line x1="${p.x}" x2="${p.x + panel.width}" y1="${y(floorInit)}" y2="${y(floorInit)}" stroke="#111" stroke-dasharray="5 4"/>`;
  }
  const groupW = panel.width / sizes.length;
  const barW = (groupW * 0.8) / series.length;
  sizes.forEach((n, gi) => {
    const gx = p.x + gi * groupW + groupW * 0.1;
    svg += `<text x="${p.x + gi * groupW + groupW / 2}" y="${panel.bottom + 18}" text-anchor="middle">N = ${n}</text>\n`;
    series.forEach(({ system, save }, si) => {
      const r = get(system, n);
      const bx = gx + si * barW;
      if (!r) {
        svg += `<text x="${bx + barW / 2}" y="${panel.bottom - 4}" text-anchor="middle" fill="#999">n/a</text>`;
        return;
      }
      const v = p.value(r, save);
      const top = y(Number.isFinite(v.median) ? v.median : 0);
      svg += `<rect x="${bx + 1}" y="${top}" width="${Math.max(1, barW - 2)}" height="${panel.bottom - top}" fill="${shade(system, save)}"><title>${esc(`${LABEL[system]}, ${save} save, N = ${n}: ${f(v.median, 1)}`)}</title></rect>`;
      if (v.p10 !== undefined && Number.isFinite(v.p90)) {
        const cx = bx + barW / 2;
        svg += `<line x1="${cx}" x2="${cx}" y1="${y(v.p10)}" y2="${y(v.p90)}" stroke="#111"/><line x1="${cx - 3}" x2="${cx + 3}" y1="${y(v.p90)}" y2="${y(v.p90)}" stroke="#111"/>`;
      }
      svg += `<text x="${bx + barW / 2}" y="${top - 4}" text-anchor="middle" font-size="9">${f(v.median, 0)}</text>\n`;
    });
  });
  svg += `<line x1="${p.x}" x2="${p.x + panel.width}" y1="${panel.bottom}" y2="${panel.bottom}" stroke="#111"/>\n`;
}
series.forEach(({ system, save }, i) => {
  const lx = 40 + (i % 4) * 235;
  const ly = H - 48 + Math.floor(i / 4) * 18;
  svg += `<rect x="${lx}" y="${ly - 11}" width="14" height="14" fill="${shade(system, save)}"/><text x="${lx + 20}" y="${ly}">${esc(`${LABEL[system]}, ${save} save`)}</text>\n`;
});
{
  const ly = H - 48 + Math.ceil(series.length / 4) * 18;
  svg += `<line x1="40" x2="64" y1="${ly - 5}" y2="${ly - 5}" stroke="#111" stroke-dasharray="5 4"/><text x="70" y="${ly}">floor = bare spawn→initialize of the changed server: ${floorInit.toFixed(1)} ms</text>\n`;
}
svg += "</svg>\n";
fs.mkdirSync(path.dirname(svgOut), { recursive: true });
fs.writeFileSync(svgOut, svg);
process.stderr.write(`wrote ${mdOut} and ${svgOut}\n`);

function niceStep(max) {
  const raw = max / 5;
  const mag = 10 ** Math.floor(Math.log10(raw));
  for (const m of [1, 2, 2.5, 5, 10]) if (raw <= m * mag) return m * mag;
  return 10 * mag;
}
