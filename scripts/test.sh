#!/usr/bin/env bash
# The whole test suite: formatting, lints, unit / property / conformance-vector
# / end-to-end tests against real MCP servers, a short run of every fuzz
# target, the published crates (docs without warnings, their examples run
# against real processes and a real MCP server, a publish dry run), and the
# wasm package under Node (vectors, native/wasm parity, live servers).
# Installs what it needs first (idempotently), so it runs on a fresh machine.
set -euo pipefail
cd "$(dirname "$0")/.."

# Each step's wall time and CPU time (user + system of the processes it ran), printed as it
# ends and as a table at the end (issue 38: where the suite's time goes, step by step).
step_names=() step_secs=() step_cpus=() step_name="" step_start=$SECONDS step_cpu=0 cpu_now=0
times_file=$(mktemp)
# CPU seconds (user + system) of the children line of a `times` output.
times_cpu() {
    awk 'NR == 2 {
        for (i = 1; i <= 2; i++) { split($i, t, "m"); total += t[1] * 60 + t[2] }
        printf "%d", total
    }' "$1"
}
# CPU seconds of this shell's finished children so far, in $cpu_now. `times` must run in this
# shell: in a command substitution it would count the subshell's own children only.
children_cpu() {
    times >"$times_file"
    cpu_now=$(times_cpu "$times_file")
}
end_step() {
    if [ -n "$step_name" ]; then
        children_cpu
        local wall=$((SECONDS - step_start)) cpu=$((cpu_now - step_cpu))
        step_names+=("$step_name") step_secs+=("$wall") step_cpus+=("$cpu")
        printf '<== %s: %ss (CPU %ss)\n' "$step_name" "$wall" "$cpu"
    fi
}
step() {
    end_step
    children_cpu
    step_name=$1 step_start=$SECONDS step_cpu=$cpu_now
    printf '\n==> %s\n' "$*"
}
step_table() {
    local status=$1 i
    end_step
    step_name=""
    printf '\nstep times (%s):\n' "$([ "$status" = 0 ] && echo passed || echo "failed: $status")"
    printf '  %6s  %6s  %s\n' wall CPU step
    for i in "${!step_names[@]}"; do
        printf '  %5ss  %5ss  %s\n' "${step_secs[$i]}" "${step_cpus[$i]}" "${step_names[$i]}"
    done
    children_cpu
    printf '  %5ss  %5ss  total\n' "$SECONDS" "$cpu_now"
    rm -f "$times_file"
}
# One CPU-bound step that needs nothing from the tests runs beside them, in its own process group:
# the tests mostly wait on real processes (servers, clients, timeouts), which leaves a 2-core
# machine half idle while they run. Its output is printed when it is awaited; its time is from
# its start to its own end.
bg_pid="" bg_name="" bg_log="" bg_start=0
background() {
    end_step
    step_name=""
    bg_name=$1 bg_log=$(mktemp) bg_start=$EPOCHSECONDS
    shift
    printf '\n==> %s (in the background)\n' "$bg_name"
    setsid bash -c "($*); status=\$?; date +%s >'$bg_log.end'; times >'$bg_log.cpu'; exit \$status" \
        >"$bg_log" 2>&1 </dev/null &
    bg_pid=$!
}
await_background() {
    local status=0 end cpu
    # The step before ends here: the wait (and the background's CPU, counted once reaped) is
    # the background's row.
    end_step
    step_name=""
    wait "$bg_pid" || status=$?
    bg_pid=""
    end=$(cat "$bg_log.end" 2>/dev/null || echo "$EPOCHSECONDS")
    cpu=$(times_cpu "$bg_log.cpu" 2>/dev/null || echo 0)
    step_names+=("$bg_name (background)") step_secs+=($((end - bg_start))) step_cpus+=("$cpu")
    printf '\n==> %s: its output\n' "$bg_name"
    cat "$bg_log"
    rm -f "$bg_log" "$bg_log.end" "$bg_log.cpu"
    if [ "$status" != 0 ]; then
        echo "$bg_name failed ($status)" >&2
        exit "$status"
    fi
}
stop_background() {
    if [ -n "$bg_pid" ]; then
        kill -- "-$bg_pid" 2>/dev/null || true
        wait "$bg_pid" 2>/dev/null || true
    fi
}
trap 'exit_status=$?; stop_background; step_table "$exit_status"' EXIT

# A CI run starts from nothing and runs once: incremental caches are written and never read,
# and our own crates' full debug info only slows their compiling and linking (line tables
# still give every backtrace its files and lines; dependencies have only those already).
if [ -n "${CI:-}" ]; then
    export CARGO_INCREMENTAL=0 CARGO_PROFILE_DEV_DEBUG=line-tables-only
fi

step "setup"
bash scripts/setup.sh

step "format"
cargo fmt --all --check

step "README"
# The README is the front door: what it is, how to start, where the docs are. Reference
# material goes to docs/ (issue 25, item 7). CI reads the test command from it.
readme_lines=$(wc -l <README.md)
if [ "$readme_lines" -ge 120 ]; then
    echo "README.md has $readme_lines lines; keep it under 120 and move detail into docs/" >&2
    exit 1
fi
for command in \
    'cargo build -q -p mcp-reconcile-fixture && cargo run -q -p mcp-reconcile -- watch --demo' \
    'bash scripts/test.sh'; do
    if ! grep -qxF -- "$command" README.md; then
        echo "README.md lost the line: $command" >&2
        exit 1
    fi
done

step "lints"
cargo clippy --workspace --all-targets --locked -- -D warnings

step "tests: build"
# Every target of the workspace in one build, with one set of features: the tests, the
# examples (the conformance tests' client, the crates' examples run below) and the binaries
# (the fixture server). A `-p` build later would resolve other features and compile shared
# dependencies again.
cargo build --workspace --all-targets --locked

# The static musl build checks the target, std from source, the static link and a run, and the
# npm steps pack and install it; optimising it (the `dist` profile, LTO) was the suite's largest
# compile and checks nothing more, so the suite builds `dist-check`.
export DIST_PROFILE=${DIST_PROFILE:-dist-check}
background "macOS (both Apple targets) and aarch64 Linux type-check (build-std, C stubbed); \
Linux binaries that run anywhere (static musl x86_64, $DIST_PROFILE profile, built and run)" \
    "bash scripts/cross-check.sh && bash scripts/dist.sh"

step "tests (kernel, host, fixture, wasm types)"
# Four at a time on two cores: most tests wait on real processes, not the CPU.
RUST_TEST_THREADS=${RUST_TEST_THREADS:-4} cargo test --workspace --locked --no-fail-fast

# Tests that act as another user (files, sockets and processes owned by `nobody`) need root;
# they are ignored otherwise.
if [ "$(id -u)" = 0 ]; then
    step "tests that need root"
    # `--workspace`, as above: `-p` alone would build the suite again with other features.
    cargo test --workspace --locked --no-fail-fast --test suite -- --ignored \
        daemon_security:: ipc_security:: private_files::
fi

step "crates: docs, examples, publish dry-run"
# Each published crate ships real copies of the root's license texts.
for crate in kernel host-native; do
    cmp LICENSE-MIT "$crate/LICENSE-MIT" && cmp LICENSE-APACHE "$crate/LICENSE-APACHE"
done
RUSTDOCFLAGS="-D warnings" cargo doc --no-deps --locked -p mcp-reconcile-kernel -p mcp-reconcile
# The examples must do their work, not just compile: each line named must be in the output.
expect_lines() {
    local output=$1 pattern
    shift
    for pattern in "$@"; do
        if ! grep -qE -- "$pattern" <<<"$output"; then
            printf '%s\n--- no line matches: %s\n' "$output" "$pattern" >&2
            return 1
        fi
    done
}
# The examples and the fixture server as the tests' build made them.
target_dir=$(cargo metadata --format-version 1 --no-deps | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
output=$("$target_dir/debug/examples/embed_kernel")
expect_lines "$output" \
    '^  connect +notes +spawned' \
    '^  skip +lint +not started \(pending_approval\)' \
    '^  connect +lint +spawned' \
    '^  retry +broken +failed \(attempt 2' \
    '^  reconnect +search +env changed; spawned' \
    '^  disconnect +broken +stopped \(removed\)' \
    '^converged: 4 processes running'
output=$(MCP_RECONCILE_FIXTURE="$target_dir/debug/mcp-fixture-server" \
    "$target_dir/debug/examples/embed_session")
expect_lines "$output" \
    '^  connect +notes +tools echo' \
    '^mcp__notes__echo -> hello$' \
    '^  connect +math +tools add' \
    '^  keep +notes' \
    '^mcp__math__add -> 5$' \
    '^notes kept its process across the edit' \
    '^stopped every server$'
# Without a server to connect to, it says how to run it and succeeds.
output=$(env -u MCP_RECONCILE_FIXTURE "$target_dir/debug/examples/embed_session")
expect_lines "$output" '^usage: embed_session SERVER'
# Cargo builds mcp-reconcile against the kernel it just packaged, unpacked into its registry
# cache under the same version: a copy an earlier run left there would be built instead.
rm -rf "${CARGO_HOME:-$HOME/.cargo}"/registry/src/*/mcp-reconcile-kernel-*
# `--allow-dirty`: the suite checks the work tree as it is, committed or not.
cargo publish --dry-run --locked --allow-dirty -p mcp-reconcile-kernel -p mcp-reconcile

step "fuzz smoke (${FUZZ_SECONDS:=20}s per target)"
bash scripts/fuzz.sh "$FUZZ_SECONDS"

step "wasm package under Node"
bash scripts/wasm-test.sh

await_background

step "npm front door: packed tarballs, install claude through the launcher, the real claude mcp list, uninstall"
bash scripts/npm-pack.sh
bash scripts/npm-flow.sh
