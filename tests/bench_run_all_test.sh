#!/usr/bin/env bash
# bench/run-all end to end on its cheapest bench (results_bench, quick sizes): the figures reach the database as
# one run whose iterations are the rounds, the report has the bench's table and its goals with verdicts; a bench
# that crashes makes run-all exit non-zero and the report say so.
#   tests/bench_run_all_test.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
src=$1 build=$2
work=$(mktemp -d /tmp/fanout-run-all-test-XXXXXX)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*" >&2; exit 1; }

"$src/bench/run-all" --quick --rounds 2 --only results_bench --build "$build" --out "$work/ok" 2>"$work/ok.err" || fail "run-all exited $? ($(cat "$work/ok.err"))"
doc=$work/ok/benchmarks.md
grep -q '^## results_bench$' "$doc" || fail "no results_bench section in $doc"
grep -Eq '^\| results_bench \| total_s \| [0-9.e+-]+ \| [0-9.e+-]+\.\.[0-9.e+-]+ \| <= 5 .*\| (met|\*\*NOT met\*\*), margin ' "$doc" || fail "no verdict on total_s: $(cat "$doc")"
grep -q '| inference_bench | database_vs_direct | - |' "$doc" || fail "a goal of a bench not run is not listed as not measured"
rounds=$(sqlite3 "$work/ok/fanout.sqlite" "SELECT group_concat(iteration) FROM (SELECT DISTINCT iteration FROM samples WHERE metric = 'total_s' ORDER BY iteration)")
[ "$rounds" = "1,2" ] || fail "total_s stored for rounds '$rounds', not 1,2"
grep -q 'ETA' "$work/ok.err" || fail "no progress line: $(cat "$work/ok.err")"
[ ! -e "$work/ok/trash" ] || fail "run-all left its benches' work folders in $work/ok/trash"
# A bench's work folder under run-all goes into its trash (emptied once every round has run), else is removed.
(
  . "$src/bench/figures.sh"
  mkdir -p "$work/t/trash" "$work/t/a" "$work/t/b"
  FANOUT_BENCH_TRASH=$work/t/trash discard_work "$work/t/a"
  [ -d "$work/t/trash/a" ] && [ ! -e "$work/t/a" ] || fail "discard_work did not move a folder into FANOUT_BENCH_TRASH"
  FANOUT_BENCH_TRASH= discard_work "$work/t/b"
  [ ! -e "$work/t/b" ] || fail "discard_work without FANOUT_BENCH_TRASH did not remove the folder"
)

# A bench that crashes: a results_bench that exits 3 in a build folder of its own.
mkdir -p "$work/broken"
ln -s "$build/fanout" "$work/broken/fanout"
printf '#!/bin/sh\necho started\nexit 3\n' >"$work/broken/results_bench" && chmod +x "$work/broken/results_bench"
rc=0
"$src/bench/run-all" --quick --only results_bench --build "$work/broken" --out "$work/bad" 2>"$work/bad.err" || rc=$?
[ $rc -eq 1 ] || fail "run-all exited $rc with a crashing bench, not 1"
grep -q 'crashed in round 1 (exit 3, no figures): see .*results_bench.r1.log' "$work/bad/benchmarks.md" || fail "the report does not say the bench crashed: $(cat "$work/bad/benchmarks.md")"
grep -q 'results_bench: crashed' "$work/bad.err" || fail "stderr does not name the crash"
# A folder holding an earlier invocation is refused (its database would mix the two).
rc=0
"$src/bench/run-all" --quick --only results_bench --build "$build" --out "$work/ok" 2>"$work/again.err" || rc=$?
[ $rc -eq 2 ] && grep -q 'is not empty' "$work/again.err" || fail "a used --out was not refused (exit $rc): $(cat "$work/again.err")"
# An every-round goal (goals.txt) is judged on the worst round, not the median: inference_bench's ratio with
# rounds 1.01, 1.05, 1.02 has a median within 1.03 and is NOT met. --report measures nothing.
printf 'database_vs_direct 1 1.01 x\ndatabase_vs_direct 2 1.05 x\ndatabase_vs_direct 3 1.02 x\n' >"$work/inference.txt"
"$build/fanout" results record "$work/crafted" --run inference_bench --file "$work/inference.txt" --param bench=inference_bench \
  --param rounds=3 --param quick=1 --provenance commit=test >/dev/null
"$src/bench/run-all" --report "$work/crafted" --only inference_bench --build "$build" 2>"$work/crafted.err" || fail "run-all --report exited $?: $(cat "$work/crafted.err")"
grep -Eq '^\| inference_bench \| database_vs_direct \| 1\.02 \| 1\.01\.\.1\.05 \| <= 1\.03 in every round .*\| \*\*NOT met\*\* \(worst round 1\.05\), margin ' "$work/crafted/benchmarks.md" ||
  fail "an every-round goal was not judged on its worst round: $(grep database_vs_direct "$work/crafted/benchmarks.md")"
echo "PASS"
