#!/usr/bin/env bash
# Many sessions × many servers with the real clients (docs/BENCHMARKS.md, "Sessions"): builds
# the host and the fixture server (release), installs the pinned npm servers
# (bench/peers/package.json) and the real clients (the repository's package.json), then runs
# bench/sessions.mjs in a loopback-only network namespace.
#
#   bash bench/sessions.sh                                   # Claude Code and Codex, K = 1, 5, 15
#   bash bench/sessions.sh --clients claude --ks 5 --share user --spread worktrees
#
# Options are passed to bench/sessions.mjs (--clients, --ks, --share, --spread, --out). Needs
# root for `unshare -n` (or run it inside a namespace yourself).
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TARGET_DIR="${CARGO_TARGET_DIR:-$PWD/target}"

echo "==> cargo build --release (host, fixture server) into $CARGO_TARGET_DIR" >&2
cargo build --locked --release -q -p mcp-reconcile -p mcp-reconcile-fixture
[ -x node_modules/.bin/claude ] || npm ci --no-audit --no-fund
[ -d bench/peers/node_modules/@modelcontextprotocol/server-memory ] || (cd bench/peers && npm ci --no-audit --no-fund)
echo "==> load: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores" >&2
# Only `lo` exists in the new namespace: nothing here can reach anything but 127.0.0.1.
unshare --net bash -c 'ip link set lo up && exec node bench/sessions.mjs --bin "$CARGO_TARGET_DIR/release" "$@"' sessions "$@"
