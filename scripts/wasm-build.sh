#!/usr/bin/env bash
# Builds the wasm facade into host-wasm/pkg/ (wasm-bindgen --target web: an ES
# module whose `initSync` takes the module's bytes; no default `.wasm` path,
# so no bundler goes looking for a file the package does not ship), writes
# the module's bytes as an ES module beside it (host-wasm/scripts/inline-wasm.mjs)
# and checks purity: the kernel alone imports nothing from its host, and the
# facade imports only wasm-bindgen's own glue.
#
# Run scripts/wasm-setup.sh first. Uses Debian's compiler with -Zbuild-std
# (rustup has no wasm32 std here), its own target directory (it must never
# share build artifacts with rustup's compiler) and rustup's rust-lld as the
# linker. MCP_WASM_AB=1 adds the hidden `crossAb` export bench/wasm-ab.mjs
# needs (never in the package).
set -euo pipefail
cd "$(dirname "$0")/.."

target_dir=target-wasm
out=$target_dir/wasm32-unknown-unknown/release
lld="$(rustc --print sysroot)/lib/rustlib/x86_64-unknown-linux-gnu/bin/rust-lld"

echo "==> cargo build (wasm32-unknown-unknown, Debian rustc $(/usr/bin/rustc --version | cut -d' ' -f2))"
# One codegen unit with LTO: ~5 % off every call through the package, for a slower build.
RUSTC_BOOTSTRAP=1 RUSTC=/usr/bin/rustc CARGO_TARGET_WASM32_UNKNOWN_UNKNOWN_LINKER="$lld" \
  CARGO_PROFILE_RELEASE_LTO=fat CARGO_PROFILE_RELEASE_CODEGEN_UNITS=1 \
  /usr/bin/cargo build --locked --target wasm32-unknown-unknown -Zbuild-std=std,panic_abort \
  --release -p mcp-reconcile-wasm -p mcp-reconcile-purity-probe --target-dir "$target_dir" \
  ${MCP_WASM_AB:+--features mcp-reconcile-wasm/ab}

echo "==> wasm-bindgen --target web"
rm -rf host-wasm/pkg
wasm-bindgen --target web --omit-default-module-path --out-dir host-wasm/pkg "$out/mcp_reconcile_wasm.wasm"
node host-wasm/scripts/inline-wasm.mjs

echo "==> purity"
purity() { cargo run --locked -q -p mcp-reconcile-wasm-purity -- "$@"; }
purity "$out/mcp_reconcile_purity_probe.wasm"
purity "$out/mcp_reconcile_wasm.wasm" --allow '__wbindgen_*'
purity host-wasm/pkg/mcp_reconcile_wasm_bg.wasm --allow ./mcp_reconcile_wasm_bg.js
