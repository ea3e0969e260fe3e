#!/usr/bin/env bash
# The driver's cost at 100,000 runs on the local launcher (1,000 with QUICK=1): calibration_sleep of one
# iteration, no warmup, --sleep_us over 1,000 values and --repeat for the rest. Planned alone (--dry-run: planning
# time and peak memory; and as as many distinct permutations, --iterations over n/1,000 values, where no run shares
# its parameters with another), then run for real with --max_parallel=2 (its "fanout: driver" line: the driver's own CPU
# and peak memory; the runs' CPU is theirs). Memory per run is the peak above a one-run sweep's, over the runs.
# Beside it, in the same invocation, the floor under that CPU (build/run_floor, bench/run_floor.cpp): the same
# number of runs' bare file, process and database work done by a program that does nothing else.
#   bench/sweep_scale_bench.sh [build dir]
set -euo pipefail
build=${1:-build}
. "$(dirname "$0")/figures.sh"  # figure(): bench/run-all's figures
n=100000
[ "${QUICK:-0}" = 1 ] && n=1000
exe=$(readlink -f "$build/fanout")
[ -x "$build/run_floor" ] || { echo "sweep_scale_bench: no $build/run_floor (build the project's bench targets)" >&2; exit 1; }
work=$(mktemp -d /var/tmp/fanout-sweep-scale-XXXXXX)
trap 'discard_work "$work"' EXIT  # bench/figures.sh
list=$(seq -s, 0 999)
args=(calibration_sleep --iterations=1 --warmup=0 "--sleep_us=[$list]" --repeat=$((n / 1000)))
# /usr/bin/time's "wall user+system maxrss-KiB" of a command run in $work, its output to $work/<tag>.log
timed() {
  local tag=$1
  shift
  (cd "$work" && /usr/bin/time -f "TIMED %e %U %S %M" "$@" >"$work/$tag.log" 2>&1) || {
    echo "sweep_scale_bench: '$*' failed; its last lines:" >&2
    tail -20 "$work/$tag.log" >&2
    exit 1
  }
  grep '^TIMED' "$work/$tag.log" | tail -1
}
read -r _ _ _ _ one_kib < <(timed one "$exe" calibration_sleep --iterations=1 --warmup=0 --sleep_us=0 --dry-run)
read -r _ plan_wall plan_user plan_sys plan_kib < <(timed plan "$exe" "${args[@]}" --dry-run)
grep -q "^# dry run: $n run(s)" "$work/plan.log" || { echo "sweep_scale_bench: the dry run did not plan $n runs" >&2; exit 1; }
read -r _ _ _ _ distinct_kib < <(timed distinct "$exe" calibration_sleep --warmup=0 "--iterations=[$(seq -s, 1 $((n / 1000)))]" "--sleep_us=[$list]" --dry-run)
grep -q "^# dry run: $n run(s)" "$work/distinct.log" || { echo "sweep_scale_bench: the distinct dry run did not plan $n runs" >&2; exit 1; }
timed run "$exe" "${args[@]}" --max_parallel=2 --exp_name=s$n --verbose >/dev/null
line=$(grep '^fanout: driver' "$work/run.log") || { echo "sweep_scale_bench: no 'fanout: driver' line" >&2; tail -20 "$work/run.log" >&2; exit 1; }
grep -q "^fanout: $n/$n run(s) COMPLETED" "$work/run.log" || { echo "sweep_scale_bench: not every run completed" >&2; grep '^fanout: [0-9]*/' "$work/run.log" >&2; exit 1; }
"$build/run_floor" "$work/floor" "$n" >"$work/floor.log" || { echo "sweep_scale_bench: run_floor failed" >&2; cat "$work/floor.log" >&2; exit 1; }
floor_cpu=$(awk '/^floor:/ { for (i = 1; i <= NF; i++) if ($i == "cpu" && $(i+1) + 0 > 0) print $(i+1) }' "$work/floor.log")
[ -n "$floor_cpu" ] || { echo "sweep_scale_bench: run_floor printed no CPU figure" >&2; cat "$work/floor.log" >&2; exit 1; }
read -r cpu peak_mib < <(awk '{ for (i = 1; i <= NF; i++) { if ($i == "cpu") c = $(i+1); if ($i == "memory") m = $(i+1) } print c, m }' <<<"$line")
wall=$(grep -E "^fanout: $n/$n run\(s\) COMPLETED" "$work/run.log" | awk '{print $NF}')
awk -v n="$n" -v pw="$plan_wall" -v pu="$plan_user" -v ps="$plan_sys" -v pk="$plan_kib" -v one="$one_kib" -v dk="$distinct_kib" -v cpu="$cpu" -v peak="$peak_mib" -v wall="$wall" -v fc="$floor_cpu" 'BEGIN {
  printf "%d runs\n", n
  printf "  planned (--dry-run): %.2f s wall, %.2f s CPU, peak %.1f MiB (%.2f KiB per run above a one-run sweep'"'"'s %.1f MiB)\n", pw, pu + ps, pk / 1024, (pk - one) / n, one / 1024
  printf "  planned as %d distinct permutations (--dry-run): peak %.1f MiB (%.2f KiB per run)\n", n, dk / 1024, (dk - one) / n
  printf "  run (local, --max_parallel=2): %s; driver CPU %.3f s (%.3f ms per run), peak %.1f MiB (%.2f KiB per run)\n", wall, cpu, cpu / n * 1000, peak, (peak * 1024 - one) / n
  printf "  the floor (run_floor, a run'"'"'s bare file, process and database work): %.3f s CPU (%.3f ms per run); the driver %.2fx it\n", fc, fc / n * 1000, cpu / fc
}'
figure "plan_s.$n" "$plan_wall" s
figure "plan_kib_per_run.$n" "$(awk -v a="$plan_kib" -v b="$one_kib" -v n="$n" 'BEGIN { printf "%.3f", (a - b) / n }')" KiB
figure "plan_kib_per_run.distinct.$n" "$(awk -v a="$distinct_kib" -v b="$one_kib" -v n="$n" 'BEGIN { printf "%.3f", (a - b) / n }')" KiB
figure "driver_cpu_ms_per_run.$n" "$(awk -v c="$cpu" -v n="$n" 'BEGIN { printf "%.4f", c / n * 1000 }')" ms
figure "driver_peak_mib.$n" "$peak_mib" MiB
figure "driver_kib_per_run.$n" "$(awk -v p="$peak_mib" -v b="$one_kib" -v n="$n" 'BEGIN { printf "%.3f", (p * 1024 - b) / n }')" KiB
figure "floor_cpu_ms_per_run.$n" "$(awk -v c="$floor_cpu" -v n="$n" 'BEGIN { printf "%.4f", c / n * 1000 }')" ms
figure "driver_vs_floor.$n" "$(awk -v c="$cpu" -v f="$floor_cpu" 'BEGIN { printf "%.3f", c / f }')" x
