#!/bin/sh
# The linker of scripts/dist.sh's static musl build: musl-gcc, given LLVM's libunwind (Debian's
# libunwind-*-dev), the unwinder Rust's std asks for on a static musl target (rustup's musl
# target ships the same one; a std built with -Zbuild-std has none). Debian builds it against
# glibc with fortify on, so its debug logging calls __fprintf_chk, which musl lacks: a
# three-line shim provides it. musl-gcc's specs know `-static` but not the `-static-pie` rustc
# asks for (it would link a PIE with musl's dynamic loader as interpreter), so the binary is
# linked static and not position-independent: it runs on any Linux, musl or glibc, none needed.
set -e
dir=${TMPDIR:-/tmp}/mcp-reconcile-musl-link.$(id -u)
mkdir -p "$dir"
unwind=$(ls /usr/lib/llvm-*/lib/libunwind.a 2>/dev/null | sort -V | tail -n 1)
[ -n "$unwind" ] || { echo "musl-link: no LLVM libunwind.a (apt-get install libunwind-14-dev)" >&2; exit 1; }
ln -sf "$unwind" "$dir/libunwind.a"
if [ ! -s "$dir/glibc-shim.o" ]; then
  cat >"$dir/glibc-shim.c" <<'C'
#include <stdarg.h>
#include <stdio.h>
int __fprintf_chk(FILE *f, int flag, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  int n = vfprintf(f, fmt, ap);
  va_end(ap);
  (void)flag;
  return n;
}
C
  musl-gcc -c -O2 -o "$dir/glibc-shim.o" "$dir/glibc-shim.c"
fi
for arg; do
  shift
  case "$arg" in
    -static-pie) set -- "$@" -static -no-pie ;;
    -pie) ;;
    *) set -- "$@" "$arg" ;;
  esac
done
exec musl-gcc -L"$dir" "$@" "$dir/glibc-shim.o"
