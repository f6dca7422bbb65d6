#!/usr/bin/env bash
# Session starts and the daemon's memory per session (issue 41, docs/BENCHMARKS.md): builds the
# host and the fixture server (release), then runs bench/start.mjs in a loopback-only network
# namespace: cold start of 30 slow-starting servers (serve --no-daemon, serve starting the
# daemon, against the slowest server alone), warm start of a second session on a daemon already
# running them, and the daemon's RSS at K = 1, 5, 15 sessions × 10 servers. Results in
# bench/results/start/start.{json,md}.
#
#   bash bench/start.sh
#   bash bench/start.sh --rounds 30 --cold-rounds 3 --ks 1,5,15
#
# Options are passed to bench/start.mjs (--servers, --rounds, --cold-rounds, --ks,
# --rss-servers, --delay-base, --delay-step, --idle-ms, --out). Needs root for `unshare -n` (or
# run it inside a namespace yourself).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"

echo "==> cargo build --release (host, fixture server) into $CARGO_TARGET_DIR" >&2
cargo build --locked --release -q -p mcp-reconcile -p mcp-reconcile-fixture
echo "==> load: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores (numbers are noisy above ~0.5 per core)" >&2
# Only `lo` exists in the new namespace: nothing here can reach anything but 127.0.0.1.
unshare --net bash -c 'ip link set lo up && exec node bench/start.mjs --bin "$CARGO_TARGET_DIR/release" "$@"' start "$@"
