#!/usr/bin/env bash
# Installs what the test suite needs. Idempotent: skips what is present.
#   - rustfmt and clippy (rustup components)
#   - cargo-fuzz (crates.io)
#   - server-everything and friends, and the TypeScript compiler that
#     host-wasm/tests/typescript.rs checks the generated types with (npm ci at
#     the repository root)
#   - the openssl CLI (host-native/tests/remote_tls.rs makes its test CA with it)
#   - the wasm toolchain: Debian's rustc-web + std sources, wasm-bindgen-cli
set -euo pipefail
cd "$(dirname "$0")/.."

if ! cargo fmt --version >/dev/null 2>&1 || ! cargo clippy --version >/dev/null 2>&1; then
  rustup component add rustfmt clippy
fi

if ! cargo fuzz --version >/dev/null 2>&1; then
  cargo install cargo-fuzz --locked
fi

# Third-party MCP servers for the integration tests and TypeScript for the
# generated-types check, at pinned versions.
if [ ! -d node_modules/@modelcontextprotocol/server-everything ] \
  || [ package-lock.json -nt node_modules/.package-lock.json ]; then
  npm ci --no-audit --no-fund
fi

if ! command -v openssl >/dev/null 2>&1; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update
  apt-get install -y --no-install-recommends openssl
fi

bash scripts/wasm-setup.sh
