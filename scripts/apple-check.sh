#!/usr/bin/env bash
# Type-checks the native host for macOS (aarch64 and x86_64) on Linux, so macOS never silently
# stops compiling. There is no macOS SDK here: Debian's rustc (scripts/wasm-setup.sh installs it)
# builds std for the Apple targets with `-Zbuild-std`, and `cargo check` never links, so the C
# build scripts in the tree (ring's) get a compiler that writes empty objects.
#
#   bash scripts/apple-check.sh            # both targets; target-apple/ holds the build
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x /usr/bin/rustc ] && [ -d /usr/lib/rustlib/src/rust/library ] || bash scripts/wasm-setup.sh

stub=$(mktemp -d)
trap 'rm -rf "$stub"' EXIT
# A C compiler that writes an empty object wherever `-o` points, and an archiver that writes an
# empty archive: enough for build scripts whose output a check never links.
cat >"$stub/cc" <<'CC'
#!/bin/sh
out=
while [ $# -gt 0 ]; do
  case "$1" in -o) out=$2; shift ;; -o*) out=${1#-o} ;; --version|-v) echo "stub cc 1.0"; exit 0 ;; esac
  shift
done
[ -n "$out" ] && : >"$out"
exit 0
CC
cat >"$stub/ar" <<'AR'
#!/bin/sh
for arg; do case "$arg" in *.a) printf '!<arch>\n' >"$arg"; exit 0 ;; esac; done
exit 0
AR
chmod +x "$stub/cc" "$stub/ar"

for target in aarch64-apple-darwin x86_64-apple-darwin; do
  echo "==> cargo check --target $target (Debian rustc $(/usr/bin/rustc --version | cut -d' ' -f2), build-std)"
  env_target=$(echo "$target" | tr - _)
  env RUSTC_BOOTSTRAP=1 RUSTC=/usr/bin/rustc "CC_$env_target=$stub/cc" "AR_$env_target=$stub/ar" \
    /usr/bin/cargo check --locked --target "$target" -Zbuild-std=std,panic_abort \
    -p mcp-reconcile --bins --lib --target-dir target-apple
done
