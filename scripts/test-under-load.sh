#!/usr/bin/env bash
# The suite on a saturated machine: runs the built test suite (scripts/test.sh builds it and brings up Slurm)
# N times in a row (default 3) while stress-ng keeps every core busy, and prints one line per round (passed,
# failed, seconds) and the failed tests' names. Exits non-zero when any round had a failure. Not part of CI
# (it takes N times the suite's time, longer under the load); run it after changing a timing-sensitive test.
# Usage: scripts/test-under-load.sh [rounds]     Env: FANOUT_BUILD_DIR (build)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
build=${FANOUT_BUILD_DIR:-build}
command -v stress-ng >/dev/null || { echo "test-under-load: stress-ng not found (scripts/install-deps.sh test installs it)" >&2; exit 1; }
[ -e "$build/CTestTestfile.cmake" ] || { echo "test-under-load: no built suite in $build (run scripts/test.sh first)" >&2; exit 1; }
stress-ng --cpu "$(nproc)" --timeout 0 --quiet &
load=$!
trap 'kill $load 2>/dev/null; wait $load 2>/dev/null || true' EXIT
failed_rounds=0
for i in $(seq "$rounds"); do
  start=$(date +%s)
  log=$(mktemp)
  (cd "$build" && ctest -j "$(nproc)" --output-on-failure --timeout 900) >"$log" 2>&1 && rc=0 || rc=$?
  summary=$(grep -E '^[0-9]+% tests passed' "$log" || echo "no summary")
  echo "round $i of $rounds: $summary ($(( $(date +%s) - start )) s under stress-ng --cpu $(nproc))"
  if [ "$rc" -ne 0 ]; then
    failed_rounds=$((failed_rounds + 1))
    sed -n '/The following tests FAILED/,$p' "$log"
    cp "$log" "$build/under-load-round-$i.log"
    echo "  log: $build/under-load-round-$i.log"
  fi
  rm -f "$log"
done
[ "$failed_rounds" -eq 0 ]
