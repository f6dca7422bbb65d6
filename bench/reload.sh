#!/usr/bin/env bash
# End-to-end reload benchmark (docs/BENCHMARKS.md): builds the host and the fixture server
# (release), installs server-everything, the pinned peers (mcp-hub; magg where Python ≥ 3.12
# exists) and the MCP client that times the daemon path, then runs bench/reload.mjs in a
# loopback-only network namespace and renders docs/BENCHMARKS.md's tables and chart.
#
#   bash bench/reload.sh                                  # N = 5, 50, 200; 10 edits of each save
#   bash bench/reload.sh --sizes 5 --reps 3 --many ""     # quick look
#
# Options are passed to bench/reload.mjs (--sizes, --reps, --systems, --saves, --many,
# --inflight-reps, --quiet-ms, --debounce-ms, --poll-ms, --floor-reps, --out). Needs root for
# `unshare -n` (or run it inside a namespace yourself).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"

echo "==> cargo build --release (host, fixture server) into $CARGO_TARGET_DIR" >&2
cargo build --locked --release -q -p mcp-reconcile -p mcp-reconcile-fixture
[ -d node_modules/@modelcontextprotocol/server-everything ] || npm ci --no-audit --no-fund
[ -d bench/peers/node_modules/@modelcontextprotocol/sdk ] || (cd bench/peers && npm ci --no-audit --no-fund)
# magg (PyPI) needs Python 3.12 or newer; pinned with every dependency in magg-constraints.txt.
if [ ! -x bench/peers/.venv-magg/bin/magg ]; then
  py=
  for candidate in python3.13 python3.12 python3 $(pyenv root 2>/dev/null)/versions/3.1[2-9]*/bin/python3; do
    if "$candidate" -c 'import sys; sys.exit(sys.version_info < (3, 12))' 2>/dev/null; then
      py=$candidate
      break
    fi
  done
  if [ -n "$py" ]; then
    "$py" -m venv bench/peers/.venv-magg
    bench/peers/.venv-magg/bin/pip install -q -c bench/peers/magg-constraints.txt magg==1.3.0
  else
    echo "==> no python3.12 or newer: magg is skipped" >&2
  fi
fi

echo "==> load: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores (numbers are noisy above ~0.5 per core)" >&2
# Only `lo` exists in the new namespace: nothing here can reach anything but 127.0.0.1.
unshare --net bash -c 'ip link set lo up && exec node --expose-gc bench/reload.mjs "$@"' reload "$@"

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
