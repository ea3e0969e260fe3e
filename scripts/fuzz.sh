#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz (clang, -DFANOUT_FUZZ=ON, in build-fuzz/) and runs each for a
# bounded time on a scratch copy of its corpus tests/fuzz/corpus/<target>. Prints one row per target
# (executions, exec/s, corpus size, crashes) and a last line "N passed, M failed"; exits non-zero when any
# target crashed (crash, leak, UB, timeout or out-of-memory: libFuzzer's artifacts are kept in
# <build>/fuzz-artifacts/<target>/; once fixed, add the reproducer to the target's corpus).
# Usage: scripts/fuzz.sh [--long]   --long: the nightly-style run, 600 s per target (CI runs 15 s each)
# Env: FANOUT_FUZZ_SECONDS  seconds per target (20; 600 with --long)
#      FANOUT_FUZZ_MERGE=1  merge the inputs that add coverage back into the repo corpus
#      FANOUT_FUZZ_TARGETS  a subset, space-separated (all of them)
#      FANOUT_FUZZ_BUILD_DIR (build-fuzz), FANOUT_FUZZ_JOBS build jobs (nproc)
# Needs clang and libFuzzer (scripts/install-deps.sh test installs clang-14 and libclang-rt-14-dev).
set -euo pipefail
cd "$(dirname "$0")/.."
build=${FANOUT_FUZZ_BUILD_DIR:-build-fuzz}
seconds=${FANOUT_FUZZ_SECONDS:-20}
if [ "${1:-}" = --long ]; then seconds=${FANOUT_FUZZ_SECONDS:-600}; fi
read -r -a targets <<< "${FANOUT_FUZZ_TARGETS:-list_value experiment sample_file redisai pslite_wire job_script model_blob control_channels kv_service tensor_wire multicast pslite_scheduler qstat smartsim_import workload agent_message figures exec_parsers executor_wire script_exec sge_output reference elf_symbols shell_values}"
# model_blob hands each input to the checker of the main build (a process per input: slow, and meant to be)
export FANOUT_REDISAI_CHECK=${FANOUT_REDISAI_CHECK:-$PWD/${FANOUT_BUILD_DIR:-build}/plugins/fanout-redisai-check}
# script_exec runs each input in the main build's executor (one process for all, replaced after a crash)
export FANOUT_REDISAI_EXEC=${FANOUT_REDISAI_EXEC:-$PWD/${FANOUT_BUILD_DIR:-build}/plugins/fanout-redisai-exec}

# Debian's clang-14 package has only the versioned names; the clang package adds the plain ones.
cc=$(command -v clang || command -v clang-14 || true)
cxx=$(command -v clang++ || command -v clang++-14 || true)
if [ -z "$cc" ] || [ -z "$cxx" ]; then
  echo "fuzz: clang not found (scripts/install-deps.sh test installs it)" >&2
  exit 1
fi
# Symbolized stack traces in crash reports (llvm-14's symbolizer has only a versioned name in PATH).
sym=$(command -v llvm-symbolizer || command -v llvm-symbolizer-14 || true)
if [ -n "$sym" ]; then export ASAN_SYMBOLIZER_PATH=$sym; fi
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}
log=$(mktemp)
scratch=$(mktemp -d)
trap 'rm -rf "$scratch" "$log"' EXIT
if ! { CC=$cc CXX=$cxx cmake -S . -B "$build" -DFANOUT_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo &&
       cmake --build "$build" -j "${FANOUT_FUZZ_JOBS:-$(nproc)}"; } >"$log" 2>&1; then
  cat "$log" >&2
  echo "fuzz: build failed" >&2
  exit 1
fi

rows=() passed=0 failed=0
for t in "${targets[@]}"; do
  bin=$build/tests/fuzz/${t}_fuzz
  work=$scratch/$t
  mkdir -p "$work/corpus" "$work/artifacts"
  cp -R "tests/fuzz/corpus/$t/." "$work/corpus/"
  set +e
  "$bin" "$work/corpus" -max_total_time="$seconds" -timeout=30 -rss_limit_mb=2048 -print_final_stats=1 \
    -artifact_prefix="$work/artifacts/" >"$work/log" 2>&1
  rc=$?
  set -e
  execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$work/log" | tail -n 1)
  speed=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$work/log" | tail -n 1)
  size=$(find "$work/corpus" -type f | wc -l)
  crashes=$(find "$work/artifacts" -type f \( -name 'crash-*' -o -name 'leak-*' -o -name 'timeout-*' -o -name 'oom-*' \) | wc -l)
  if [ "$rc" -ne 0 ] && [ "$crashes" -eq 0 ]; then crashes=1; fi  # died without leaving an input
  if [ "$crashes" -eq 0 ]; then
    passed=$((passed + 1))
    if [ "${FANOUT_FUZZ_MERGE:-0}" = 1 ]; then
      "$bin" -merge=1 "tests/fuzz/corpus/$t" "$work/corpus" >"$work/merge.log" 2>&1 ||
        { cat "$work/merge.log" >&2; echo "fuzz: merging $t's corpus failed" >&2; exit 1; }
    fi
  else
    failed=$((failed + 1))
    mkdir -p "$build/fuzz-artifacts/$t"
    cp "$work/artifacts/"* "$build/fuzz-artifacts/$t/" 2>/dev/null || true
    cp "$work/log" "$build/fuzz-artifacts/$t/fuzz.log"
    echo "=== $t failed (exit $rc); last lines of its log, the full log and inputs in $build/fuzz-artifacts/$t/:" >&2
    grep -v '^#\|^INFO\|^stat::' "$work/log" | tail -n 40 >&2
  fi
  rows+=("$(printf '%-12s %12s %9s %8s %8s' "$t" "${execs:-?}" "${speed:-?}" "$size" "$crashes")")
done

printf '%-12s %12s %9s %8s %8s\n' target executions exec/s corpus crashes
printf '%s\n' "${rows[@]}"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
