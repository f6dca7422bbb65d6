#!/usr/bin/env bash
# Type-checks the native host for the targets this machine cannot build for: macOS (aarch64 and
# x86_64) and aarch64 Linux (musl), so none of them silently stops compiling. There is no macOS
# SDK or aarch64 toolchain here: Debian's rustc (scripts/wasm-setup.sh installs it) builds std
# for each target with `-Zbuild-std`, and `cargo check` never links, so the C build scripts in the
# tree (ring's, aws-lc's) get a compiler that writes empty objects. One cargo run checks all
# three, so the host's build scripts and proc macros are built once for them (issue 38: the
# suite's time).
#
#   bash scripts/cross-check.sh            # all three; target-cross/ holds the build
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

targets=(aarch64-apple-darwin x86_64-apple-darwin aarch64-unknown-linux-musl)
echo "==> cargo check ${targets[*]/#/--target } (Debian rustc $(/usr/bin/rustc --version | cut -d' ' -f2), build-std)"
compilers=()
for target in "${targets[@]}"; do
  env_target=$(echo "$target" | tr - _)
  compilers+=("CC_$env_target=$stub/cc" "AR_$env_target=$stub/ar")
done
env RUSTC_BOOTSTRAP=1 RUSTC=/usr/bin/rustc "${compilers[@]}" \
  /usr/bin/cargo check --locked "${targets[@]/#/--target=}" -Zbuild-std=std,panic_abort \
  -p mcp-reconcile --bins --lib --target-dir target-cross
