#!/usr/bin/env bash
# How often `fanout results compare` cries wolf, and how often it catches a real slowdown, on this machine's own
# noise (issues 40, 50). PAIRS pairs of calibration sweeps, each side --repeat=5 runs and again --repeat=auto (5,
# then more runs where the across-runs interval is wider than +-2 %, at most 30), sleep (2000 us per iteration) and
# copy (128 MiB per iteration), compared with the default threshold (5 %), alpha (0.05) and correction:
#   identical: both sides the same command        -> "false regressions" (goal: at most 1 of PAIRS)
#   planted 5 % and 10 %: B sleeps 2100 / 2200 us, copies 134.4 / 140.8 MiB -> "detected" (goal >= 19/20 at 10 %)
# The copy is 128 MiB, beyond every cache (source and destination 256 MiB), where 10 % more bytes take 10 % longer
# (measured: +9.5 %). At 1 MiB, source and destination together fill this machine's 2 MiB L2 exactly: each process's
# runs land in two or three cache states (15.9, 17.4, 19.3 us), and 1.1 MiB took anywhere from 2 % to 20 % longer,
# so a "planted 10 %" there was no 10 % slowdown at all.
# and how many runs a side --repeat=auto took. Each pair's sweeps run back to back, so what drifts on the machine
# between them is part of the noise.
# MODES may add "until": --repeat=5, then compare --until-decided --max_repeat=30 (both sides run again, in turn).
#   bench/compare_power.sh [build dir]     PAIRS=20 (QUICK=1: 3), MODES="5 auto until"
set -euo pipefail
build=$(readlink -f "${1:-build}")
[ -x "$build/fanout" ] || { echo "compare_power: $build/fanout not found (build first)" >&2; exit 2; }
. "$(dirname "$0")/figures.sh"
pairs=${PAIRS:-$([ "${QUICK:-0}" = 1 ] && echo 3 || echo 20)}
work=$(mktemp -d /tmp/fanout-compare-power-XXXXXX)
[ -n "${KEEP:-}" ] && echo "compare_power: keeping $work" >&2 || trap 'rm -rf "$work"' EXIT
cd "$work"

modes=${MODES:-5 auto until}
sweep() {  # name sleep_us copy_bytes repeat
  "$build/fanout" calibration_sleep --exp_name="$1_sleep" --sleep_us="$2" --iterations=20 --warmup=2 --repeat="$4" --status_interval=0 >/dev/null 2>&1
  "$build/fanout" calibration_copy --exp_name="$1_copy" --copy_bytes="$3" --iterations=20 --warmup=2 --repeat="$4" --status_interval=0 >/dev/null 2>&1
}
runs_of() { sqlite3 "results/$1/fanout.sqlite" "SELECT count(*) FROM runs WHERE status='COMPLETED'"; }
# The verdict on one pair: 1 when compare names a regression of the metric, else 0 (exit 3, undecided, is a
# failure of the bench: five runs a side always decide).
# In mode "until", compare itself adds runs to both sides in turn (--until-decided): exit 3 there is a figure it could
# not decide within 30 runs a side, counted as not found (and not as a false regression).
regressed() {  # a b metric ignored-parameter
  local rc=0 extra=()
  [ "$mode" = until ] && extra=(--until-decided --max_repeat=30)
  "$build/fanout" results compare "results/$1" "results/$2" --metric="$3" --ignore="$4" "${extra[@]}" >"$work/last.txt" 2>&1 || rc=$?
  case $rc in
    0) echo 0 ;;
    1) echo 1 ;;
    3) if [ "$mode" = until ]; then echo 0; else echo "compare_power: compare exited 3:" >&2; cat "$work/last.txt" >&2; exit 1; fi ;;
    *) echo "compare_power: compare exited $rc:" >&2; cat "$work/last.txt" >&2; exit 1 ;;
  esac
}

declare -A count=() runs=()
for i in $(seq "$pairs"); do
  for mode in $modes; do
    echo "compare_power: pair $i/$pairs, --repeat=$mode" >&2
    t=r$mode
    reps=$([ "$mode" = until ] && echo 5 || echo "$mode")
    sweep "${t}a$i" 2000 134217728 "$reps"
    sweep "${t}b$i" 2000 134217728 "$reps"
    sweep "${t}c$i" 2100 140928614 "$reps"  # +5 %
    sweep "${t}d$i" 2200 147639500 "$reps"  # +10 %
    for m in sleep copy; do
      param=$([ $m = sleep ] && echo sleep_us || echo copy_bytes)
      count[false_${m}_$mode]=$(( ${count[false_${m}_$mode]:-0} + $(regressed "${t}a${i}_$m" "${t}b${i}_$m" $m $param) ))
      count[p5_${m}_$mode]=$(( ${count[p5_${m}_$mode]:-0} + $(regressed "${t}a${i}_$m" "${t}c${i}_$m" $m $param) ))
      count[p10_${m}_$mode]=$(( ${count[p10_${m}_$mode]:-0} + $(regressed "${t}a${i}_$m" "${t}d${i}_$m" $m $param) ))
      for side in a b c d; do runs[${m}_$mode]=$(( ${runs[${m}_$mode]:-0} + $(runs_of "${t}${side}${i}_$m") )); done
    done
  done
done

for mode in $modes; do
  printf '%-48s %8s %8s\n' "compare, $pairs pairs, --repeat=$mode a side" sleep copy
  printf '%-48s %8s %8s\n' "identical sweeps: false regressions" "${count[false_sleep_$mode]}/$pairs" "${count[false_copy_$mode]}/$pairs"
  printf '%-48s %8s %8s\n' "planted 5 % slowdown: detected" "${count[p5_sleep_$mode]}/$pairs" "${count[p5_copy_$mode]}/$pairs"
  printf '%-48s %8s %8s\n' "planted 10 % slowdown: detected" "${count[p10_sleep_$mode]}/$pairs" "${count[p10_copy_$mode]}/$pairs"
  printf '%-48s %8s %8s\n' "runs a side (mean)" "$(awk -v r="${runs[sleep_$mode]}" -v n="$pairs" 'BEGIN { printf "%.1f", r / (4 * n) }')" \
    "$(awk -v r="${runs[copy_$mode]}" -v n="$pairs" 'BEGIN { printf "%.1f", r / (4 * n) }')"
  # Figures keep their names for --repeat=5 (history); --repeat=auto's carry _auto.
  suffix=$([ "$mode" = 5 ] && echo "" || echo "_$mode")
  for m in sleep copy; do
    figure "false_regressions_$m$suffix" "$(awk -v c="${count[false_${m}_$mode]}" -v n="$pairs" 'BEGIN { print c / n }')" fraction
    figure "detected_5pct_$m$suffix" "$(awk -v c="${count[p5_${m}_$mode]}" -v n="$pairs" 'BEGIN { print c / n }')" fraction
    figure "detected_10pct_$m$suffix" "$(awk -v c="${count[p10_${m}_$mode]}" -v n="$pairs" 'BEGIN { print c / n }')" fraction
    figure "runs_per_side_$m$suffix" "$(awk -v r="${runs[${m}_$mode]}" -v n="$pairs" 'BEGIN { print r / (4 * n) }')" runs
  done
done
