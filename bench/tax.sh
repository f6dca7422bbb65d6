#!/usr/bin/env bash
# The gateway tax (issue 41, docs/BENCHMARKS.md): what a tools/call costs through `serve
# --no-daemon`, `serve` on the daemon and `serve --http`, against the fixture server called
# directly and against the peer mcp-proxy (crates.io, pinned), same server, same client, in one
# run (mcp-hub, pinned in bench/peers/package.json, speaks only legacy SSE, which the driver does
# not yet: bench/tax.mjs). Builds the host, the fixture
# server and the timing driver `mcp-tax-bench` (release), installs the peers, then runs
# bench/tax.mjs in a loopback-only network namespace; results in bench/results/tax.{json,md}.
#
#   bash bench/tax.sh                                   # 3 rounds, every system
#   bash bench/tax.sh --rounds 1 --systems direct,serve-no-daemon --calls 500
#
# Options are passed to bench/tax.mjs (--rounds, --calls, --warmup, --pipelined, --inflight,
# --systems, --out, --baseline DIR: also the mcp-reconcile in DIR, before/after in one run).
# Needs root for `unshare -n` (or run it inside a namespace yourself).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"
MCP_PROXY_VERSION=0.6.0

echo "==> cargo build --release (host, fixture server, mcp-tax-bench) into $CARGO_TARGET_DIR" >&2
cargo build --locked --release -q -p mcp-reconcile -p mcp-reconcile-fixture
[ -d bench/peers/node_modules/mcp-hub ] || (cd bench/peers && npm ci --no-audit --no-fund)
# mcp-proxy's HTTP front only (no OpenTelemetry, OAuth, OpenAPI, ...): the same request path,
# a shorter build.
if ! bench/peers/.cargo/bin/mcp-proxy --version 2>/dev/null | grep -q "$MCP_PROXY_VERSION"; then
  cargo install mcp-proxy --version "$MCP_PROXY_VERSION" --locked --no-default-features \
    --root bench/peers/.cargo
fi

echo "==> load: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores (numbers are noisy above ~0.5 per core)" >&2
# Only `lo` exists in the new namespace: nothing here can reach anything but 127.0.0.1.
unshare --net bash -c 'ip link set lo up && exec node bench/tax.mjs "$@"' tax "$@"
