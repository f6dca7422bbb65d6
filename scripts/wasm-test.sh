#!/usr/bin/env bash
# Builds and tests the wasm facade and the TypeScript bridge from a clean
# clone: setup -> wasm build (+ purity checks) -> native CLI (for parity) ->
# npm ci -> build (ESM + CJS) -> node --test (vectors, native/wasm parity,
# facade contract, live MCP servers) -> npm pack, and the tarball in one
# scratch project per kind of consumer (host-wasm/consumers/run.mjs).
#
# Vectors come from ../shared/vectors beside the checkout (or
# $MCP_RECONCILE_VECTORS) and tests/vectors.
set -euo pipefail
cd "$(dirname "$0")/.."

current=""
step_start=$SECONDS
# Prints how long the previous step took, then starts the next one.
step() {
  [ -z "$current" ] || printf '<== %s: %ss\n' "$current" $((SECONDS - step_start))
  current=$*
  step_start=$SECONDS
  [ -z "$current" ] || printf '\n==> %s\n' "$current"
}

step "wasm setup"
bash scripts/wasm-setup.sh

step "wasm build"
bash scripts/wasm-build.sh

step "native CLI (the parity test compares against it)"
cargo build --locked -q -p mcp-reconcile

cd host-wasm
step "npm ci"
npm ci --no-audit --no-fund

step "build (tsc: ES modules and types; esbuild: the CommonJS side)"
npm run --silent build

step "node --test"
node --test dist/test/

step "the packed tarball in every kind of consumer (Node ESM/CJS, TypeScript, bundles, Chromium)"
node consumers/run.mjs
step ""
