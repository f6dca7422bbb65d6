#!/usr/bin/env bash
# Installs what the wasm build needs. Idempotent: skips what is present.
#
# * Debian's rustc-web / cargo-web / rust-web-src: a compiler with the
#   WebAssembly backend plus the standard library's source, so
#   `-Zbuild-std` can build std for wasm32-unknown-unknown (rustup cannot
#   download that target here).
# * wasm-bindgen-cli at exactly the version of the `wasm-bindgen` crate pinned
#   in Cargo.toml: the CLI refuses modules made by any other version.
# * Debian's chromium: host-wasm/consumers/run.mjs loads the packed package in
#   a headless browser page and worker.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ ! -x /usr/bin/rustc ] || [ ! -x /usr/bin/cargo ] || [ ! -d /usr/lib/rustlib/src/rust/library ] \
  || ! command -v chromium >/dev/null 2>&1; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update
  apt-get install -y --no-install-recommends rustc-web cargo-web rust-web-src chromium
fi

version=$(sed -n 's/^wasm-bindgen = "=\([0-9.]*\)".*/\1/p' Cargo.toml)
if [ -z "$version" ]; then
  echo "wasm-setup: no exact \`wasm-bindgen = \"=X.Y.Z\"\` pin in Cargo.toml" >&2
  exit 1
fi
if [ "$(wasm-bindgen --version 2>/dev/null || true)" != "wasm-bindgen $version" ]; then
  # The CLI must match the crate exactly; its own lockfile is not used
  # (`--locked` pulls dependencies that no longer build on current Rust).
  # The dev profile (`--debug`): it runs once per build on a small module, and an optimised
  # build of its dependencies is minutes of a fresh machine's suite (issue 38).
  cargo install --debug --version "$version" wasm-bindgen-cli
fi
