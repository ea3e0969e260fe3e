#!/usr/bin/env bash
# What recording resources costs (issue 54): the same runs with --resources=on and off, alternating which goes first
# each round, in the same invocation.
#   sleep_on_vs_off      calibration_sleep's per-iteration median (1 ms sleeps), on / off: the rank's figures are
#                        taken once, after the role, so an iteration should not see them
#                        (by design: a check that nothing moved into the loop)
#   exec_overhead_ms     exec's cycle per invocation of /bin/true (from one invocation's start to the next: the run,
#                        the wait and the 8 samples recorded after it), on - off (ms)
#   bench/resources_bench.sh [build dir]     (ROUNDS, ITERATIONS, INVOCATIONS override; QUICK=1 smaller)
set -euo pipefail
build=$(readlink -f "${1:-build}")
here=$(cd "$(dirname "$0")" && pwd)
. "$here/figures.sh"
[ -x "$build/fanout" ] || { echo "resources_bench: $build/fanout not found (build first)" >&2; exit 2; }
command -v sqlite3 >/dev/null || { echo "resources_bench: needs sqlite3" >&2; exit 2; }
quick=${QUICK:-0}
rounds=${ROUNDS:-$([ "$quick" = 1 ] && echo 2 || echo 6)}
iterations=${ITERATIONS:-$([ "$quick" = 1 ] && echo 50 || echo 300)}
invocations=${INVOCATIONS:-$([ "$quick" = 1 ] && echo 50 || echo 300)}
work=$(mktemp -d /var/tmp/fanout-resources-bench-XXXXXX)
trap 'rm -rf "$work"' EXIT
cd "$work"

# The median of a metric's measured samples in one experiment.
median() {
  sqlite3 "results/$1/fanout.sqlite" "SELECT value FROM samples WHERE metric='$2' AND warmup=0 ORDER BY value" |
    awk '{v[NR] = $1} END { if (NR == 0) exit 1; print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'
}
# An exec step's time per invocation, start to start: what one invocation costs with everything around it.
cycle() {
  sqlite3 "results/$1/fanout.sqlite" "SELECT (max(t_start) - min(t_start)) / (count(*) - 1) FROM samples WHERE metric='wall_time' AND warmup=0"
}
run() {  # name, resources, then the sweep's arguments
  local name=$1 res=$2
  shift 2
  "$build/fanout" "$@" --exp_name="$name" --resources="$res" >"$name.log" 2>&1 || { echo "resources_bench: $name failed:" >&2; tail -20 "$name.log" >&2; exit 1; }
}

sleep_ratios=() exec_diffs=()
for r in $(seq 1 "$rounds"); do
  order=(on off)
  [ $((r % 2)) = 0 ] && order=(off on)
  declare -A sleep_ms exec_ms
  for res in "${order[@]}"; do
    run "sleep_${res}_$r" "$res" calibration_sleep --sleep_us=1000 --iterations="$iterations" --warmup=3
    run "exec_${res}_$r" "$res" exec --command=/bin/true --repeat_command="$invocations" --warmup=5
    sleep_ms[$res]=$(median "sleep_${res}_$r" sleep)
    exec_ms[$res]=$(cycle "exec_${res}_$r")
  done
  sleep_ratios+=("$(awk -v a="${sleep_ms[on]}" -v b="${sleep_ms[off]}" 'BEGIN { printf "%.6f", a / b }')")
  exec_diffs+=("$(awk -v a="${exec_ms[on]}" -v b="${exec_ms[off]}" 'BEGIN { printf "%.6f", (a - b) * 1000 }')")
  echo "round $r/$rounds: sleep per iteration on ${sleep_ms[on]} us, off ${sleep_ms[off]} us; /bin/true per invocation on ${exec_ms[on]} s, off ${exec_ms[off]} s" >&2
done
mid() { printf '%s\n' "$@" | sort -g | awk '{v[NR] = $1} END { print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'; }
sleep_ratio=$(mid "${sleep_ratios[@]}") exec_diff=$(mid "${exec_diffs[@]}")
echo "sleep_on_vs_off $sleep_ratio (per-iteration median, on / off, median of $rounds alternating rounds)"
echo "exec_overhead_ms $exec_diff (per-invocation cycle of /bin/true, on - off, median of $rounds rounds)"
figure sleep_on_vs_off "$sleep_ratio" ratio
figure exec_overhead_ms "$exec_diff" ms
