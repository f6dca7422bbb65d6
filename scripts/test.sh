#!/usr/bin/env bash
# The whole test suite: formatting, lints, unit / property / conformance-vector
# / end-to-end tests against real MCP servers, a short run of every fuzz
# target, and the wasm package under Node (vectors, native/wasm parity, live
# servers). Installs what it needs first (idempotently), so it runs on a
# fresh machine.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n==> %s\n' "$*"; }

step "setup"
bash scripts/setup.sh

step "format"
cargo fmt --all --check

step "lints"
cargo clippy --workspace --all-targets --locked -- -D warnings

step "tests (kernel, host, fixture, wasm types)"
cargo test --workspace --locked --no-fail-fast

# Tests that act as another user (files, sockets and processes owned by `nobody`) need root;
# they are ignored otherwise.
if [ "$(id -u)" = 0 ]; then
    step "tests that need root"
    cargo test -p mcp-reconcile --locked --no-fail-fast \
        --test daemon_security --test ipc_security --test private_files -- --ignored
fi

step "fuzz smoke (${FUZZ_SECONDS:=20}s per target)"
bash scripts/fuzz.sh "$FUZZ_SECONDS"

step "wasm package under Node"
bash scripts/wasm-test.sh
