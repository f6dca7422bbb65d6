#!/usr/bin/env bash
# End-to-end reload benchmark (docs/BENCHMARKS.md): builds the host and the fixture server
# (release), installs server-everything and the pinned peers, then runs bench/reload.mjs in a
# loopback-only network namespace and renders docs/BENCHMARKS.md's tables and chart inputs.
#
#   bash bench/reload.sh                       # N = 5, 20, 50; 15 edits per system and size
#   bash bench/reload.sh --sizes 5 --reps 3    # quick look
#
# Options are passed to bench/reload.mjs (--sizes, --reps, --systems, --debounce-ms, --poll-ms,
# --floor-reps, --out). Needs root for `unshare -n` (or run it inside a namespace yourself).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"

echo "==> cargo build --release (host, fixture server) into $CARGO_TARGET_DIR" >&2
cargo build --locked --release -q -p mcp-reconcile -p mcp-reconcile-fixture
[ -d node_modules/@modelcontextprotocol/server-everything ] || npm ci --no-audit --no-fund
[ -d bench/peers/node_modules/mcp-hub ] || (cd bench/peers && npm ci --no-audit --no-fund)

echo "==> load: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores (numbers are noisy above ~0.5 per core)" >&2
# Only `lo` exists in the new namespace: nothing here can reach anything but 127.0.0.1.
unshare --net bash -c 'ip link set lo up && exec node bench/reload.mjs "$@"' reload "$@"

# The tables and the chart: docs/benchmarks-reload.svg for the default output folder, beside the
# results otherwise.
out=bench/results
while [ $# -gt 0 ]; do
  if [ "$1" = --out ] && [ $# -gt 1 ]; then out="$2"; fi
  shift
done
if [ "$out" = bench/results ]; then
  node bench/report.mjs --in "$out/reload.json"
else
  node bench/report.mjs --in "$out/reload.json" --svg "$out/reload.svg"
fi
