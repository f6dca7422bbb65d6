// Renders bench/results/reload.json (from bench/reload.mjs) as the tables docs/BENCHMARKS.md shows
// (bench/results/reload.md) and the chart docs/benchmarks-reload.svg: reload latency and
// restarted processes by N for each system. Plain SVG, no plotting dependency.
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
const debounce = data.options.debounce;
const floorInit = data.floor.initializeMs.median;
const floorTools = data.floor.toolsListMs.median;

const LABEL = { ours: "mcp-reconcile", "ours-full": "mcp-reconcile --full-restart", "mcp-hub": `mcp-hub ${data.machine.mcpHub}` };
const COLOR = { ours: "#1b7f3b", "ours-full": "#c2410c", "mcp-hub": "#2563eb" };
const runs = data.runs.filter((r) => !r.failed);
const sizes = [...new Set(data.runs.map((r) => r.n))];
const systems = [...new Set(data.runs.map((r) => r.system))];
const get = (system, n) => runs.find((r) => r.system === system && r.n === n);

// ---------------------------------------------------------------- tables
const f = (x, d = 0) => (x === null || x === undefined || Number.isNaN(x) ? "—" : !Number.isFinite(x) ? "∞" : x.toFixed(d));
const spread = (s, d = 0) => `${f(s.median, d)} (${f(s.p10, d)}–${f(s.p90, d)})`;
let md = `Debounce ${debounce} ms for mcp-reconcile (mcp-hub settles writes for 200 ms); ${data.options.reps} edits per system and size; status polled every ${data.options.pollMs} ms. `;
md += `Floor: bare spawn→initialize of the changed server ${f(floorInit, 1)} ms median (p10–p90 ${f(data.floor.initializeMs.p10, 1)}–${f(data.floor.initializeMs.p90, 1)}), spawn→tools/list ${f(floorTools, 1)} ms.\n\n`;
md += "| N | system | write→applied ms, median (p10–p90) | write→changed server's tools ms | restarted processes (unchanged ones) | unchanged servers' longest tool gap ms, median / max | changed server's tool gap ms | host RSS MiB | host CPU idle % | host CPU ms per reload | polls: median interval ms |\n";
md += "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
for (const n of sizes) {
  for (const system of systems) {
    const r = data.runs.find((x) => x.system === system && x.n === n);
    if (!r) continue;
    if (r.failed) {
      md += `| ${n} | ${LABEL[system]} | failed: ${r.failed} ||||||||\n`;
      continue;
    }
    const s = r.summary;
    md += `| ${n} | ${LABEL[system]} | ${spread(s.appliedMs)} | ${spread(s.toolsMs)} | ${f(s.restarted.median)} (${f(s.restartedUnchanged.median)}; max ${f(s.restartedUnchanged.max)}) | ${f(s.unchangedGapMs.median)} / ${f(s.unchangedGapMs.max)} | ${f(s.changedGapMs.median)} | ${f(r.rssKb / 1024, 1)} | ${f(r.idleCpuPct, 2)} | ${f(r.cpuMsPerRep, 0)} | ${f(s.pollIntervalMs.median, 1)} |\n`;
  }
}
md += "\nOverhead above the floor (median write→applied − debounce − median bare spawn→initialize), and mcp-reconcile against mcp-hub:\n\n";
md += "| N | mcp-reconcile overhead ms | … to the changed server's tools ms | mcp-reconcile / mcp-hub, write→applied | mcp-reconcile / mcp-hub, write→tools | full-restart / mcp-reconcile, write→applied |\n|---:|---:|---:|---:|---:|---:|\n";
for (const n of sizes) {
  const ours = get("ours", n);
  const hub = get("mcp-hub", n);
  const full = get("ours-full", n);
  const ratio = (a, b) => (a && b ? `${(a / b).toFixed(2)}×` : "—");
  md += `| ${n} | ${ours ? f(ours.summary.appliedMs.median - debounce - floorInit, 1) : "—"} | ${ours ? f(ours.summary.toolsMs.median - debounce - floorInit, 1) : "—"} | ${ratio(ours?.summary.appliedMs.median, hub?.summary.appliedMs.median)} | ${ratio(ours?.summary.toolsMs.median, hub?.summary.toolsMs.median)} | ${ratio(full?.summary.appliedMs.median, ours?.summary.appliedMs.median)} |\n`;
}
fs.writeFileSync(mdOut, md);
process.stdout.write(md);

// ---------------------------------------------------------------- chart
const W = 960;
const H = 440;
const panel = { top: 90, bottom: 360, width: 400 };
const panels = [
  { x: 70, title: "write → applied (median, whiskers p10–p90), ms", value: (r) => r.summary.appliedMs, log: false },
  { x: 540, title: "processes restarted per edit (median)", value: (r) => ({ median: r.summary.restarted.median }), log: false },
];
const esc = (s) => String(s).replace(/&/g, "&amp;").replace(/</g, "&lt;");
let svg = `<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 ${W} ${H}" width="${W}" height="${H}" font-family="system-ui, sans-serif" font-size="12">\n`;
svg += `<rect width="${W}" height="${H}" fill="#fff"/>\n`;
svg += `<text x="${W / 2}" y="24" text-anchor="middle" font-size="15" font-weight="600">Editing one server's args with N fixture servers + server-everything running</text>\n`;
svg += `<text x="${W / 2}" y="44" text-anchor="middle" fill="#555">${esc(`${data.machine.cores} cores, ${data.machine.cpuModel}; mcp-reconcile debounce ${debounce} ms; ${data.options.reps} edits each; ${data.started.slice(0, 10)}`)}</text>\n`;
for (const p of panels) {
  const vals = runs.map((r) => {
    const v = p.value(r);
    return Math.max(v.median ?? 0, v.p90 ?? 0);
  });
  let max = Math.max(1, ...vals);
  const step = niceStep(max);
  max = Math.ceil(max / step) * step;
  const y = (v) => panel.bottom - ((panel.bottom - panel.top) * v) / max;
  svg += `<text x="${p.x + panel.width / 2}" y="${panel.top - 10}" text-anchor="middle" font-weight="600">${esc(p.title)}</text>\n`;
  for (let v = 0; v <= max + 1e-9; v += step) {
    svg += `<line x1="${p.x}" x2="${p.x + panel.width}" y1="${y(v)}" y2="${y(v)}" stroke="#e5e5e5"/>`;
    svg += `<text x="${p.x - 6}" y="${y(v) + 4}" text-anchor="end" fill="#555">${v}</text>\n`;
  }
  if (p === panels[0]) {
    const fl = debounce + floorInit;
    svg += `<line x1="${p.x}" x2="${p.x + panel.width}" y1="${y(fl)}" y2="${y(fl)}" stroke="#111" stroke-dasharray="5 4"/>`;
  }
  const groupW = panel.width / sizes.length;
  const barW = (groupW * 0.75) / systems.length;
  sizes.forEach((n, gi) => {
    const gx = p.x + gi * groupW + groupW * 0.125;
    svg += `<text x="${p.x + gi * groupW + groupW / 2}" y="${panel.bottom + 18}" text-anchor="middle">N = ${n}</text>\n`;
    systems.forEach((system, si) => {
      const r = get(system, n);
      const bx = gx + si * barW;
      if (!r) {
        svg += `<text x="${bx + barW / 2}" y="${panel.bottom - 4}" text-anchor="middle" fill="#999">n/a</text>`;
        return;
      }
      const v = p.value(r);
      const top = y(v.median);
      svg += `<rect x="${bx + 2}" y="${top}" width="${barW - 4}" height="${panel.bottom - top}" fill="${COLOR[system]}"><title>${esc(`${LABEL[system]}, N = ${n}: ${f(v.median, 1)}`)}</title></rect>`;
      if (v.p10 !== undefined) {
        const cx = bx + barW / 2;
        svg += `<line x1="${cx}" x2="${cx}" y1="${y(v.p10)}" y2="${y(v.p90)}" stroke="#111"/><line x1="${cx - 4}" x2="${cx + 4}" y1="${y(v.p90)}" y2="${y(v.p90)}" stroke="#111"/><line x1="${cx - 4}" x2="${cx + 4}" y1="${y(v.p10)}" y2="${y(v.p10)}" stroke="#111"/>`;
      }
      svg += `<text x="${bx + barW / 2}" y="${top - 4}" text-anchor="middle" font-size="10">${f(v.median, 0)}</text>\n`;
    });
  });
  svg += `<line x1="${p.x}" x2="${p.x + panel.width}" y1="${panel.bottom}" y2="${panel.bottom}" stroke="#111"/>\n`;
}
systems.forEach((system, i) => {
  const lx = 40 + i * 195;
  svg += `<rect x="${lx}" y="${H - 32}" width="14" height="14" fill="${COLOR[system]}"/><text x="${lx + 20}" y="${H - 20}">${esc(LABEL[system])}</text>\n`;
});
{
  const lx = 40 + systems.length * 195;
  svg += `<line x1="${lx}" x2="${lx + 24}" y1="${H - 25}" y2="${H - 25}" stroke="#111" stroke-dasharray="5 4"/><text x="${lx + 30}" y="${H - 20}">floor = debounce + bare spawn→initialize: ${(debounce + floorInit).toFixed(0)} ms</text>\n`;
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
