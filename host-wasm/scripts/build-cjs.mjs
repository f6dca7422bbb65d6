// The package's CommonJS side, made from the ES modules `tsc` wrote to dist/:
//
// * dist/kernel.cjs: the kernel alone (glue and wasm bytes inside), one file.
// * dist/index.cjs: everything else, one file that `require`s ./kernel.cjs, so a process that
//   loads both entry points holds one kernel. npm dependencies stay `require`s.
// * a `.d.cts` beside every `.d.ts` (dist/ and pkg/), its relative imports pointing at `.cjs`:
//   TypeScript types a `require` of the package as CommonJS only through declarations that say
//   so.
import { build } from "esbuild";
import { readdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const dist = join(root, "dist");
const pkg = join(root, "pkg");
const { dependencies = {} } = JSON.parse(readFileSync(join(root, "package.json"), "utf8"));

const common = {
  bundle: true,
  format: "cjs",
  platform: "neutral",
  target: "es2022",
  logLevel: "warning",
  // Dependencies are the consumer's to install and load; `node:` built-ins are Node's.
  external: [...Object.keys(dependencies).flatMap((d) => [d, `${d}/*`]), "node:*"],
};

await build({ ...common, entryPoints: [join(dist, "kernel.js")], outfile: join(dist, "kernel.cjs") });

/** Resolves the kernel module to the CommonJS kernel beside the bundle instead of inlining it. */
const kernelOutside = {
  name: "kernel-outside",
  setup(b) {
    b.onResolve({ filter: /^\.\/kernel\.js$/ }, () => ({ path: "./kernel.cjs", external: true }));
  },
};
await build({
  ...common,
  platform: "node",
  entryPoints: [join(dist, "index.js")],
  outfile: join(dist, "index.cjs"),
  plugins: [kernelOutside],
});

/** `./x.js` → `./x.cjs` in import and export specifiers of a declaration file. */
function toCjs(text) {
  return text.replace(/(from\s+|import\()(["'])(\.{1,2}\/[^"']*)\.js\2/g, "$1$2$3.cjs$2");
}
for (const dir of [dist, pkg]) {
  for (const name of readdirSync(dir)) {
    if (!name.endsWith(".d.ts") || name.endsWith(".wasm.d.ts")) continue;
    const text = readFileSync(join(dir, name), "utf8");
    writeFileSync(join(dir, name.replace(/\.d\.ts$/, ".d.cts")), toCjs(text));
  }
}
