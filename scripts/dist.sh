#!/usr/bin/env bash
# Linux binaries that run anywhere: a static musl build of `mcp-reconcile` (no glibc floor),
# with the `dist` profile (no debug info, stripped). There is no musl target for rustup here:
# Debian's rustc (scripts/wasm-setup.sh) builds std for it with `-Zbuild-std`, and musl-gcc
# (Debian's musl-tools) compiles ring's C and links against musl's static libc, with LLVM's
# libunwind (scripts/musl-link.sh).
#
#   bash scripts/dist.sh                      # x86_64: built, then run once (--version)
#   (aarch64-unknown-linux-musl is type-checked by scripts/cross-check.sh)
#
# The binary lands in target-dist/x86_64-unknown-linux-musl/$DIST_PROFILE/mcp-reconcile, with
# DIST_PROFILE `dist` unless set (the suite sets `dist-check`: no optimisation, no LTO).
set -euo pipefail
cd "$(dirname "$0")/.."
[ -x /usr/bin/rustc ] && [ -d /usr/lib/rustlib/src/rust/library ] || bash scripts/wasm-setup.sh
if ! command -v musl-gcc >/dev/null 2>&1 || ! ls /usr/lib/llvm-*/lib/libunwind.a >/dev/null 2>&1; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update
  apt-get install -y --no-install-recommends musl-tools libunwind-14-dev
fi

target=x86_64-unknown-linux-musl
profile=${DIST_PROFILE:-dist}
echo "==> cargo build --profile $profile --target $target (Debian rustc $(/usr/bin/rustc --version | cut -d' ' -f2), build-std)"
env RUSTC_BOOTSTRAP=1 RUSTC=/usr/bin/rustc \
  CC_x86_64_unknown_linux_musl=musl-gcc \
  CARGO_TARGET_X86_64_UNKNOWN_LINUX_MUSL_LINKER="$PWD/scripts/musl-link.sh" \
  CARGO_TARGET_X86_64_UNKNOWN_LINUX_MUSL_RUSTFLAGS="-C target-feature=+crt-static -C link-self-contained=no" \
  /usr/bin/cargo build --locked --profile "$profile" --target "$target" -Zbuild-std=std,panic_abort \
  -p mcp-reconcile --bin mcp-reconcile --target-dir target-dist
bin=target-dist/$target/$profile/mcp-reconcile
"$bin" --version
if file "$bin" | grep -q "dynamically linked"; then
  echo "dist: $bin is dynamically linked" >&2
  exit 1
fi
echo "==> $bin: $(du -h "$bin" | cut -f1), $(file -b "$bin" | cut -d, -f1-2)"
