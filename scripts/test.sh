#!/usr/bin/env bash
# The whole test suite: formatting, lints, unit/integration/property tests,
# conformance vectors and a short run of every fuzz target.
# Installs what it needs (idempotently) first, so it runs on a fresh machine.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/setup.sh

step() { printf '\n==> %s\n' "$*"; }

step "format"
cargo fmt --all --check

step "lints"
cargo clippy --workspace --all-targets --locked -- -D warnings

step "tests"
cargo test --workspace --locked

if [ -d fuzz ]; then
  step "fuzz smoke (${FUZZ_SECONDS:=20}s per target)"
  bash scripts/fuzz.sh "$FUZZ_SECONDS"
fi
