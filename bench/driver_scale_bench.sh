#!/usr/bin/env bash
# The driver's own cost as a sweep grows: N trivially short permutations (calibration_sleep, 1 iteration)
# submitted as Slurm job arrays to the test cluster, for N = 10, 100, 1000 (and 10000 with --big). Reads the
# "fanout: driver" line each run prints: submission time, poll cycles and scheduler queries, ingestion time,
# peak memory. The cost per permutation must stay flat (nothing quadratic in the number of runs).
#   bench/driver_scale_bench.sh [build dir] [--big]     (needs scripts/slurm-cluster.sh up or scale)
set -euo pipefail
build=${1:-build}
sizes=(10 100 1000)
[ "${QUICK:-0}" = 1 ] && sizes=(10)  # bench/run-all --quick
[ "${2:-}" = --big ] && sizes+=(10000)
. "$(dirname "$0")/figures.sh"  # figure(): bench/run-all's figures
exe=$(readlink -f "$build/fanout")
work=$(mktemp -d /var/tmp/fanout-driver-bench-XXXXXX)
trap 'discard_work "$work"' EXIT  # bench/figures.sh
partition=debug
sinfo -h -p scale -o %P 2>/dev/null | grep -q scale && partition=scale
# poll s is wall time in the scheduler query (mostly waiting for slurmctld, which returns every job it still
# remembers: MinJobAge); cpu/run is the driver's own CPU time (user + system) per run, the figure that must stay flat.
# ingest/run is measured inside the sweep (sharing 2 cores with the running jobs); reingest/run ingests the same
# run folders again afterwards into a new database (`fanout results ingest`), alone.
# cpu@submitted is the driver's CPU until the last run was submitted: planning, writing the run folders, submitting.
printf '%7s %8s %9s %11s %7s %13s %9s %10s %9s %11s %13s %14s %10s %8s\n' runs "wall s" "submit s" "submit/run" polls "queries/poll" "poll s" "poll/run" "ingest s" "ingest/run" "reingest/run" "cpu@submitted s" "cpu/run" "peak MiB"
for n in "${sizes[@]}"; do
  list=$(seq -s, 1 "$n")
  # Throttled to 64 tasks at once: one slurmctld on 2 cores stops answering srun when ~1000 tasks start together.
  # The driver's whole output goes to a log; on failure its tail is printed, with the exit status.
  log="$work/n$n.log"
  rc=0
  (cd "$work" && "$exe" calibration_sleep --launcher=slurm --partition=$partition --array --max_parallel=64 --iterations=1 --warmup=0 --verbose \
     --sleep_us="[$list]" --exp_name="n$n" --walltime=600 >"$log" 2>&1) || rc=$?
  # A run that fails (on this 2-core machine a virtual node is now and then declared NODE_FAIL under load) does
  # not void the driver's figures: fanout exits 1, lists it, and still prints its cost line. The bench counts and
  # shows such runs; anything else (no cost line) is a failure of the bench.
  line=$(grep '^fanout: driver' "$log") || {
    echo "driver_scale_bench: fanout exited $rc for $n runs without its 'fanout: driver' line; its last lines:" >&2
    tail -20 "$log" >&2
    exit 1
  }
  # (grep finds nothing in a clean sweep: `|| true`, or pipefail and set -e would end the bench silently)
  failed=$(grep -o '[0-9]* did not (listed below)' "$log" | awk '{print $1}' || true)
  if [ "$rc" != 0 ]; then
    echo "driver_scale_bench: ${failed:-?} of $n runs did not complete (fanout exit $rc):" >&2
    { grep -A5 'attempt(s) did not complete' "$log" || true; } | head -6 >&2
  fi
  # The summary line "fanout: 1000/1000 run(s) COMPLETED[, K did not (listed below)] in 0:08:51".
  wall=$(grep -E '^fanout: [0-9]+/[0-9]+ run\(s\) COMPLETED' "$log" | tail -1 | awk '{print $NF}' || true)
  rm -f "$work/results/n$n"/fanout.sqlite*
  t0=$(date +%s.%N)
  "$exe" results ingest "$work/results/n$n" >/dev/null
  reingest=$(awk -v a="$t0" -v b="$(date +%s.%N)" -v n="$n" 'BEGIN{printf "%.3f", (b - a) / n * 1000}')
  row=$(awk -v n="$n" -v wall="$wall" -v re="$reingest" '{
      for (i = 1; i <= NF; i++) {
        if ($(i) == "submit") submit = $(i+1);
        if ($(i) == "polls") { polls = $(i-1); poll_s = $(i+1); }
        if ($(i) == "scheduler") queries = substr($(i-1), 2);
        if ($(i) == "ingest") ingest = $(i+1);
        if ($(i) == "memory") peak = $(i+1);
        if ($(i) == "cpu") cpu = $(i+1);
        if ($(i) == "submitted") submitted_cpu = $(i+1);
      }
      printf "%7d %8s %9.3f %9.3f ms %7d %13.2f %9.3f %7.3f ms %9.3f %8.3f ms %10.3f ms %15.3f %7.3f ms %8.1f\n", n, wall, submit, submit / n * 1000, polls,
             queries / polls, poll_s, poll_s / n * 1000, ingest, ingest / n * 1000, re, submitted_cpu, cpu / n * 1000, peak
      printf "FIGURES %s %s %s %s %s\n", submit, cpu, queries / polls, ingest, submitted_cpu
    }' <<<"$line")
  grep -v '^FIGURES' <<<"$row"
  read -r _ submit cpu qpp ingest submitted_cpu < <(grep '^FIGURES' <<<"$row")
  figure "submit_s.$n" "$submit" s
  figure "driver_cpu_s.$n" "$cpu" s
  figure "submitted_cpu_s.$n" "$submitted_cpu" s
  figure "queries_per_poll.$n" "$qpp" count
  figure "ingest_s.$n" "$ingest" s
  figure "failed_runs.$n" "${failed:-0}" count
done
