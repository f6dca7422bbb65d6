#!/usr/bin/env bash
# Builds every fuzz target and runs each for a while (default 20 s) over its
# committed seed corpus. A crash fails the run; turn it into a named
# regression test in kernel/tests/fuzz_regressions.rs (kernel targets) or
# host-native/tests/fuzz_regressions.rs (the host's client-file targets).
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
seconds=${1:-20}
export RUSTC_BOOTSTRAP=1
cargo fuzz build 2>&1 | tail -n 3
for target in $(cargo fuzz list); do
  corpus="corpus/$target"
  mkdir -p "$corpus"
  work=$(mktemp -d)
  # Copy the seeds so new inputs found here stay out of the repository.
  cp -r "$corpus"/. "$work"/ 2>/dev/null || true
  echo "fuzz $target for ${seconds}s"
  log="$work.log"
  # A target that writes files (claude_plugin) writes them here, removed below.
  # An input that runs 10 s is a hang: a failure, not a stalled run.
  mkdir "$work.tmp"
  if TMPDIR="$work.tmp" cargo fuzz run "$target" "$work" -- -timeout=10 -max_total_time="$seconds" -print_final_stats=1 >"$log" 2>&1; then
    status=0
  else
    status=$?
  fi
  grep -E "^(stat::number_of_executed_units|SUMMARY|==[0-9]+==|thread ')" "$log" || true
  [ "$status" -eq 0 ] || tail -n 40 "$log" >&2
  rm -rf "$work" "$log" "$work.tmp"
  if [ "$status" -ne 0 ]; then
    echo "fuzz target $target failed (see fuzz/artifacts/$target)" >&2
    exit "$status"
  fi
done
