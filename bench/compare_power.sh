#!/usr/bin/env bash
# How often `fanout results compare` cries wolf, and how often it catches a real slowdown, on this machine's own
# noise (issue 40). PAIRS pairs of calibration sweeps, each side --repeat=5 runs, sleep (2000 us per iteration)
# and copy (1 MiB per iteration), compared with the default threshold (5 %) and alpha (0.05):
#   identical: both sides the same command        -> "false regressions" (goal: 0 of PAIRS, at most 1)
#   planted 5 % and 10 %: B sleeps 2100 / 2200 us, copies 1.05 / 1.10 MiB -> "detected" (goal >= 19/20 at 10 %)
# Each pair's two sweeps run back to back, so what drifts on the machine between them is part of the noise.
#   bench/compare_power.sh [build dir]     PAIRS=20 (QUICK=1: 3)
set -euo pipefail
build=$(readlink -f "${1:-build}")
[ -x "$build/fanout" ] || { echo "compare_power: $build/fanout not found (build first)" >&2; exit 2; }
. "$(dirname "$0")/figures.sh"
pairs=${PAIRS:-$([ "${QUICK:-0}" = 1 ] && echo 3 || echo 20)}
work=$(mktemp -d /tmp/fanout-compare-power-XXXXXX)
trap 'rm -rf "$work"' EXIT
cd "$work"

sweep() {  # name sleep_us copy_bytes
  "$build/fanout" calibration_sleep --exp_name="$1_sleep" --sleep_us="$2" --iterations=20 --warmup=2 --repeat=5 --status_interval=0 >/dev/null 2>&1
  "$build/fanout" calibration_copy --exp_name="$1_copy" --copy_bytes="$3" --iterations=20 --warmup=2 --repeat=5 --status_interval=0 >/dev/null 2>&1
}
# The verdict on one pair: 1 when compare names a regression of the metric, else 0 (exit 3, undecided, is a
# failure of the bench: five runs a side always decide).
regressed() {  # a b metric ignored-parameter
  local rc=0
  "$build/fanout" results compare "results/$1" "results/$2" --metric="$3" --ignore="$4" >"$work/last.txt" 2>&1 || rc=$?
  case $rc in
    0) echo 0 ;;
    1) echo 1 ;;
    *) echo "compare_power: compare exited $rc:" >&2; cat "$work/last.txt" >&2; exit 1 ;;
  esac
}

declare -A count=()
for i in $(seq "$pairs"); do
  echo "compare_power: pair $i/$pairs" >&2
  sweep "a$i" 2000 1048576
  sweep "b$i" 2000 1048576
  sweep "c$i" 2100 1101005   # +5 %
  sweep "d$i" 2200 1153434   # +10 %
  for m in sleep copy; do
    param=$([ $m = sleep ] && echo sleep_us || echo copy_bytes)
    count[false_$m]=$(( ${count[false_$m]:-0} + $(regressed "a${i}_$m" "b${i}_$m" $m $param) ))
    count[p5_$m]=$(( ${count[p5_$m]:-0} + $(regressed "a${i}_$m" "c${i}_$m" $m $param) ))
    count[p10_$m]=$(( ${count[p10_$m]:-0} + $(regressed "a${i}_$m" "d${i}_$m" $m $param) ))
  done
done

printf '%-44s %8s %8s\n' "compare, $pairs pairs, --repeat=5 a side" sleep copy
printf '%-44s %8s %8s\n' "identical sweeps: false regressions" "${count[false_sleep]}/$pairs" "${count[false_copy]}/$pairs"
printf '%-44s %8s %8s\n' "planted 5 % slowdown: detected" "${count[p5_sleep]}/$pairs" "${count[p5_copy]}/$pairs"
printf '%-44s %8s %8s\n' "planted 10 % slowdown: detected" "${count[p10_sleep]}/$pairs" "${count[p10_copy]}/$pairs"
for m in sleep copy; do
  figure "false_regressions_$m" "$(awk -v c="${count[false_$m]}" -v n="$pairs" 'BEGIN { print c / n }')" fraction
  figure "detected_5pct_$m" "$(awk -v c="${count[p5_$m]}" -v n="$pairs" 'BEGIN { print c / n }')" fraction
  figure "detected_10pct_$m" "$(awk -v c="${count[p10_$m]}" -v n="$pairs" 'BEGIN { print c / n }')" fraction
done
