#!/usr/bin/env bash
# Kernel micro-benchmarks (docs/BENCHMARKS.md): criterion, natively, then the same inputs through
# the wasm package under Node, then the summary table (ns per server, growth exponents, wasm/native).
#
#   bash bench/kernel.sh                          # all sizes, 10 … 100 000 (a few minutes)
#   MCP_BENCH_SIZES=10,100,1000 bash bench/kernel.sh
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
sizes="${MCP_BENCH_SIZES:-10,100,1000,10000,100000}"
inputs="$(mktemp -d)"
trap 'rm -rf "$inputs"' EXIT

echo "==> load: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores" >&2
echo "==> criterion (native)" >&2
MCP_BENCH_SIZES="$sizes" cargo bench --locked -p mcp-reconcile-kernel --bench kernel
echo "==> the same requests as JSON" >&2
cargo bench --locked -q -p mcp-reconcile-kernel --bench kernel_inputs -- --out "$inputs"
[ -f host-wasm/dist/kernel.js ] || bash scripts/wasm-test.sh
echo "==> wasm under Node" >&2
node bench/kernel-wasm.mjs --inputs "$inputs" --sizes "$sizes"
node bench/kernel-summary.mjs
