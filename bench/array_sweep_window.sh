#!/usr/bin/env bash
# A 100,000-run sweep as Slurm job arrays on the test cluster, measured for a window and then interrupted: a whole
# sweep takes hours there (about 10 runs a second on 2 cores), but what grows with its size happens in its first
# minutes: planning and laying out every run, submitting the controller's share (--max_submitted: half its
# MaxJobCount), then each run's end while that many tasks are queued. Every 10 s: the driver's CPU per run ended
# in the window, its peak memory; at the end, how long the interrupt took and whether any job is left queued.
#   bench/array_sweep_window.sh [build dir] [runs] [seconds]     (needs scripts/slurm-cluster.sh scale)
set -euo pipefail
build=${1:-build}
n=${2:-100000}
secs=${3:-240}
exe=$(readlink -f "$build/fanout")
[ "$(squeue -h | wc -l)" = 0 ] || { echo "array_sweep_window: the test cluster has jobs queued; it must be idle" >&2; exit 1; }
work=$(mktemp -d /var/tmp/fanout-array-window-XXXXXX)
trap 'rm -rf "$work"' EXIT
cd "$work"
"$exe" calibration_sleep --launcher=slurm --partition=scale --array --max_parallel=64 --iterations=1 --warmup=0 \
  "--sleep_us=[$(seq -s, 1 1000)]" --repeat=$((n / 1000)) --exp_name=w --walltime=600 --verbose >run.log 2>&1 &
pid=$!
tck=$(getconf CLK_TCK)
prev_c=0 prev_n=0 start=$SECONDS sent=
while kill -0 $pid 2>/dev/null; do
  sleep 10
  st=$(cat /proc/$pid/stat 2>/dev/null) || break
  c=$(awk -v t="$tck" '{print ($14 + $15) / t}' <<<"$st")
  hwm=$(awk '/VmHWM/ {print $2}' /proc/$pid/status 2>/dev/null || echo 0)
  ended=$(grep -c " COMPLETED in" run.log || true)
  awk -v c="$c" -v pc="$prev_c" -v n="$ended" -v pn="$prev_n" -v hwm="$hwm" -v t=$((SECONDS - start)) 'BEGIN {
    printf "%4d s  %6d runs ended  driver CPU %7.2f s  peak %6.1f MiB  ", t, n, c, hwm / 1024
    if (n > pn) printf "%.3f ms a run ended in the window\n", (c - pc) / (n - pn) * 1000; else printf "(no run ended)\n" }'
  prev_c=$c prev_n=$ended
  if [ $((SECONDS - start)) -ge "$secs" ] && [ -z "$sent" ]; then kill -INT $pid; sent=$SECONDS; fi
done
rc=0
wait $pid || rc=$?
echo "interrupted after ${secs} s: fanout exited $rc, $((SECONDS - sent)) s after the interrupt; jobs left queued: $(squeue -h | wc -l)"
grep -E "^fanout: (submitted|driver|interrupted)|wait to be submitted" run.log | cut -c1-240
