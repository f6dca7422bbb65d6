#!/usr/bin/env bash
# Builds every fuzz target and runs each for a while (default 20 s) over its
# committed seed corpus, as many at once as there are cores (each run is one
# single-threaded process, so the suite's wall time is the targets' total over
# the cores). A crash fails the run; turn it into a named regression test
# beside the code it broke (kernel targets: a unit test in that kernel module)
# or in host-native/tests/fuzz_regressions.rs (the host's client-file targets).
set -euo pipefail
cd "$(dirname "$0")/../fuzz"
seconds=${1:-20}
export RUSTC_BOOTSTRAP=1
# No AddressSanitizer: the workspace denies unsafe code, and its two allowed unsafe calls
# (a pre_exec hook and malloc_trim) are in process handling no target reaches, so ASan could
# only watch std's and the dependencies' own unsafe code — for 27 % of the fuzz build's CPU.
# Panics, hangs (-timeout), overflow checks and debug assertions still fail a run.
sanitizer=(--sanitizer none)
cargo fuzz build "${sanitizer[@]}" 2>&1 | tail -n 3

# Runs one target; its summary (or, on failure, its log's tail) goes to $work.out.
fuzz_one() {
  local target=$1 work=$2 corpus="corpus/$1" status
  mkdir -p "$corpus"
  # Copy the seeds so new inputs found here stay out of the repository.
  cp -r "$corpus"/. "$work"/ 2>/dev/null || true
  # A target that writes files (claude_plugin) writes them here, removed below.
  # An input that runs 10 s is a hang: a failure, not a stalled run.
  mkdir "$work.tmp"
  if TMPDIR="$work.tmp" cargo fuzz run "${sanitizer[@]}" "$target" "$work" -- -timeout=10 -max_total_time="$seconds" \
    -print_final_stats=1 >"$work.log" 2>&1; then
    status=0
  else
    status=$?
  fi
  {
    echo "fuzz $target for ${seconds}s"
    grep -E "^(stat::number_of_executed_units|SUMMARY|==[0-9]+==|thread ')" "$work.log" || true
    [ "$status" -eq 0 ] || tail -n 40 "$work.log"
  } >"$work.out"
  return "$status"
}

jobs=$(nproc)
declare -A running=()
failed=()
# Waits for one run to end, prints what it found, and records a failure.
reap() {
  local pid status=0
  wait -n -p pid "${!running[@]}" || status=$?
  local target=${running[$pid]%% *} work=${running[$pid]#* }
  unset "running[$pid]"
  cat "$work.out"
  if [ "$status" -ne 0 ]; then
    echo "fuzz target $target failed (see fuzz/artifacts/$target)" >&2
    failed+=("$target")
  fi
  rm -rf "$work" "$work.log" "$work.out" "$work.tmp"
}
for target in $(cargo fuzz list); do
  [ "${#running[@]}" -lt "$jobs" ] || reap
  work=$(mktemp -d)
  fuzz_one "$target" "$work" &
  running[$!]="$target $work"
done
while [ "${#running[@]}" -gt 0 ]; do reap; done
if [ "${#failed[@]}" -gt 0 ]; then
  echo "fuzz targets failed: ${failed[*]}" >&2
  exit 1
fi
