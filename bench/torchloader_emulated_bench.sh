#!/usr/bin/env bash
# torchloader on a simulated cluster of the paper's node shape: every training process owns an emulated
# accelerator (--device=emulated: its iterations take the modelled time on a timer) and every loader worker is
# emulated (--loader=emulated: batches arrive at the rate the TPM profiled for the real loader, on timers), so 48
# loader "cores" per node run here. Only time is modelled: the Submitter, Scheduler, WAA, Application Masters,
# pauses, resumes, checkpoints and gradient exchanges are the real ones.
#   bench/torchloader_emulated_bench.sh [build dir] [launchers (default: local)] [repeats (default: 3)]
#   e.g. bench/torchloader_emulated_bench.sh build "local slurm" 3
# Two workloads: the seed's three 2-node applications (500 iterations; ITERATIONS caps them), and a skewed one
# (bench/torchloader_skewed.csv: the loader-hungry googlenet runs 10x the others' iterations). Modes 1, 2, 3 on
# 2 nodes with the seed's reallocation (pause, checkpoint, restart), and row 3L: mode 3 resizing the loaders in
# place (--resize=live, fanout's; mode 2 live would equal mode 2 here, where every application arrives at once).
# The runs of an experiment go one after another on either launcher (--max_parallel=1), so each mode has the
# machine to itself. Each repeat is a fresh experiment; the table gives per mode the median aggregate throughput
# and makespan over the repeats, their spread (min..max), and the ratio of medians to mode 1. A per-application
# table shows why: demand (TPM), workers allocated, completion time, pauses and live resizes.
# Knobs (environment): TFLOPS (0.15: a V100's sustained ~7 TFLOP/s on ImageNet's 224x224 images is 7 / 49 on our
# 32x32 ones, so compute per loaded sample is the paper's), COST (600: blur passes per sample of the real loader the
# TPM profiles; one worker then delivers about 300 samples/s, an ImageNet-like loading cost), CORES (48),
# ITERATIONS (0: the seed's own 500; a cap makes the loaders' pipeline fill, seconds at 40 workers, dominate).
# LOADER=real: the real loaders (CPU work on this machine's cores; CORES then defaults to the CPUs, which both node
# agents share), emulated devices still; e.g. LOADER=real COST=64 ITERATIONS=100 WORKLOADS=seed. Figures are then
# named <workload>.<launcher>.real.<row>...
# WORKLOADS ("seed skewed"). ROWS ("1 2 3 3L"): the rows to run; mode 1 is always run, the baseline of every ratio.
# ERRORS ("0"): the loaders' model error (--loader_error) to run, e.g. "0 0.1 0.2 0.4": each application's emulated
# loader is off the TPM's a and b by up to that fraction while WAA plans with the model; NOISE (0): each batch's time
# varies by that coefficient of variation (--loader_noise). Figures of an error, noise or contention other than 0 are
# named <workload>.<launcher>[.err<e>[.seed<s>]][.noise<n>][.cont<c>].<row>... (issue 42: WAA's gain against the even split as
# the model errs). ERROR_SEED (1): loader_error's draws (--loader_error_seed). CONTENTION ("0"): the loader
# contention to run (--loader_contention, e.g. "0 0.3"): every emulated worker loads 1 + c times slower when all
# loader cores of its node are busy, linearly less with fewer (bench/loader_contention.sh measures c on this
# machine's real loaders); WAA plans without it.
# QUICK=1 (bench/run-all --quick): the seed alone, 10 iterations, COST 60, locally.
# Devices are shared as the workload's cuda_device column says (two applications per GPU in the seed).
# Under bench/run-all (FANOUT_FIGURES set) every row's medians and ratios to mode 1 are figures:
# <workload>.<launcher>.<row>.{aggregate_samples_per_s,cluster_samples_per_s,makespan_s,aggregate_vs_even,
# cluster_vs_even,makespan_vs_even} (cluster: every sample over the makespan; makespan_vs_even: mode 1's makespan over
# the row's, > 1 is shorter).
set -euo pipefail
build=${1:-build}
launchers=${2:-local}
repeats=${3:-3}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/figures.sh"  # figure(): bench/run-all's figures
WORKLOADS=${WORKLOADS:-seed skewed}
if [ "${QUICK:-0}" = 1 ]; then WORKLOADS=seed ITERATIONS=10 COST=60 launchers=local repeats=1; fi
[ -x "$build/fanout" ] || { echo "torchloader_emulated_bench: $build/fanout not found (build first)" >&2; exit 2; }
command -v sqlite3 >/dev/null || { echo "torchloader_emulated_bench: needs sqlite3" >&2; exit 2; }
LOADER=${LOADER:-emulated} ERRORS=${ERRORS:-0} NOISE=${NOISE:-0} CONTENTION=${CONTENTION:-0} ERROR_SEED=${ERROR_SEED:-1}
if [ "$LOADER" = real ] && { [ "$ERRORS" != 0 ] || [ "$NOISE" != 0 ] || [ "$CONTENTION" != 0 ]; }; then
  echo "torchloader_emulated_bench: ERRORS, NOISE and CONTENTION shape emulated loaders; LOADER=real loaders are what they are" >&2; exit 2
fi
case $LOADER in emulated) ;; real) CORES=${CORES:-$(nproc)} ;; *) echo "torchloader_emulated_bench: LOADER=$LOADER: emulated or real" >&2; exit 2 ;; esac
TFLOPS=${TFLOPS:-0.15} COST=${COST:-600} CORES=${CORES:-48} ITERATIONS=${ITERATIONS:-0}
# The rows as fanout's permutations: --mode over the rows' modes, --resize over restart and live, and an exclusion
# for each (mode, resize) pair that is not a row.
read -ra rows_asked <<<"${ROWS:-1 2 3 3L}"
ROWS=" 1 ${rows_asked[*]} "  # one space between rows, for the patterns below
modes= rows_excluded=()
for m in 1 2 3; do
  case $ROWS in *" $m "*|*" ${m}L "*) modes+=${modes:+,}$m ;; *) continue ;; esac
  case $ROWS in *" $m "*) ;; *) rows_excluded+=(--exclude=mode=$m,resize=restart) ;; esac
  case $ROWS in *" ${m}L "*) ;; *) rows_excluded+=(--exclude=mode=$m,resize=live) ;; esac
done
for r in $ROWS; do
  case $r in 1|2|3|2L|3L) ;; *) echo "torchloader_emulated_bench: ROWS: $r is not 1, 2, 3, 2L or 3L" >&2; exit 2 ;; esac
done
out=$(mktemp -d /tmp/torchloader-emulated-XXXXXX)
device=(--device=emulated --device_tflops="$TFLOPS" --cost="$COST")
tpm="$out/tpm.json"

workload_files=()
for w in $WORKLOADS; do
  case $w in
    seed) workload_files+=(seed) ;;
    skewed) workload_files+=("$here/torchloader_skewed.csv") ;;
    *) echo "torchloader_emulated_bench: WORKLOADS: $w is not seed or skewed" >&2; exit 2 ;;
  esac
done
# One profile per workload (compute on the emulated device, the real loader's throughput), shared by every run.
for w in "${workload_files[@]}"; do
  "$build/fanout" torchloader_profile --exp_name="profile-$(basename "$w" .csv)" --results_dir="$out" --tpm="$tpm" \
    --workload="$w" "${device[@]}" >/dev/null 2>>"$out/profile.log" ||
    { echo "torchloader_emulated_bench: profiling $w failed; see $out/profile.log" >&2; exit 1; }
done

run() {  # run <launcher> <workload> <cap> <rep> <error> <contention>: one experiment of the ROWS
  local name="$1-$(basename "$2" .csv)-e$5-c$6-r$4"
  "$build/fanout" torchloader --exp_name="$name" --results_dir="$out" --tpm="$tpm" --launcher="$1" --workload="$2" \
    --max_iterations="$3" --mode=["$modes"] --resize=[restart,live] "${rows_excluded[@]}" --max_parallel=1 \
    --nodes=2 --cores="$CORES" --loader="$LOADER" --loader_error="$5" --loader_error_seed="$ERROR_SEED" \
    --loader_noise="$NOISE" --loader_contention="$6" "${device[@]}" --status_interval=0 \
    >"$out/$name.log" 2>&1 ||
    { echo "torchloader_emulated_bench: experiment $name failed; see $out/$name" >&2; exit 1; }
  echo "$out/$name/fanout.sqlite"
}

# A run's row: its mode, with L when it resized in place.
row="p.value || CASE r.value WHEN 'live' THEN 'L' ELSE '' END"
runs="samples s JOIN parameters p ON p.run_id = s.run_id AND p.name = 'mode' JOIN parameters r ON r.run_id = s.run_id AND r.name = 'resize'"
metric_sql="SELECT $row, s.metric, s.value FROM $runs WHERE s.metric IN ('aggregate_throughput', 'makespan', 'cluster_throughput')"
for err in $ERRORS; do
for cont in $CONTENTION; do
for launcher in $launchers; do
  for w in "${workload_files[@]}"; do
    cap=$([ "$w" = seed ] && echo "$ITERATIONS" || echo 0)
    rows=$(mktemp)
    dbs=()
    for r in $(seq "$repeats"); do
      db=$(run "$launcher" "$w" "$cap" "$r" "$err" "$cont")
      dbs+=("$db")
      sqlite3 -separator ' ' "$db" "$metric_sql" >> "$rows"
    done
    echo
    echo "== $(basename "$w" .csv) workload$([ "$cap" = 0 ] || echo " ($cap iterations)"), $launcher launcher, 2 nodes x $CORES $LOADER loader cores (cost $COST), emulated devices at $TFLOPS TFLOP/s, $repeats repeats, loader model error $err (draws of seed $ERROR_SEED), noise $NOISE, contention $cont"
    tag=$([ "$err" = 0 ] || echo ".err$err")$([ "$ERROR_SEED" = 1 ] || [ "$err" = 0 ] || echo ".seed$ERROR_SEED")$([ "$NOISE" = 0 ] || echo ".noise$NOISE")$([ "$cont" = 0 ] || echo ".cont$cont")
    figs=$(mktemp)
    awk -v figs="$figs" -v prefix="$(basename "$w" .csv | sed 's/^torchloader_//').$launcher$([ "$LOADER" = emulated ] || echo ".$LOADER")$tag" '
      function med(a, n,   i, j, t) { for (i = 1; i <= n; i++) for (j = i + 1; j <= n; j++) if (a[j] < a[i]) { t = a[i]; a[i] = a[j]; a[j] = t }
                                      return n % 2 ? a[(n + 1) / 2] : (a[n / 2] + a[n / 2 + 1]) / 2 }
      { k = $1 SUBSEP $2; n[k]++; v[k, n[k]] = $3; modes[$1] = 1 }
      END {
        printf "%-5s %14s %18s %10s %14s %10s %11s %16s %10s\n", "mode", "samples/s", "(min..max)", "vs mode 1", "cluster smp/s", "vs mode 1",
               "makespan s", "(min..max)", "vs mode 1"
        split("1 2 2L 3 3L", rows_in_order, " ")
        split("aggregate_throughput makespan cluster_throughput", metric_of, " ")
        for (r = 1; r <= 5; r++) {
          m = rows_in_order[r]
          if (!(m in modes)) continue
          for (q = 0; q < 3; q++) {
            metric = metric_of[q + 1]; k = m SUBSEP metric; lo = hi = v[k, 1]
            for (i = 1; i <= n[k]; i++) { x[i] = v[k, i]; if (x[i] < lo) lo = x[i]; if (x[i] > hi) hi = x[i] }
            M[m, q] = med(x, n[k]); L[m, q] = lo; H[m, q] = hi
          }
          printf "%-5s %14.0f %18s %9.2fx %14.0f %9.2fx %11.1f %16s %9.2fx\n", m, M[m, 0], sprintf("(%.0f..%.0f)", L[m, 0], H[m, 0]), M[m, 0] / M["1", 0],
                 M[m, 2], M[m, 2] / M["1", 2], M[m, 1], sprintf("(%.1f..%.1f)", L[m, 1], H[m, 1]), M["1", 1] / M[m, 1]
          f = prefix "." m
          printf "%s.aggregate_samples_per_s %.6g samples/s\n%s.makespan_s %.6g s\n%s.cluster_samples_per_s %.6g samples/s\n", f, M[m, 0], f, M[m, 1], f, M[m, 2] > figs
          printf "%s.aggregate_vs_even %.6g ratio\n%s.makespan_vs_even %.6g ratio\n%s.cluster_vs_even %.6g ratio\n", f, M[m, 0] / M["1", 0], f, M["1", 1] / M[m, 1], f, M[m, 2] / M["1", 2] > figs
        }
      }' "$rows"
    while read -r name value unit; do figure "$name" "$value" "$unit"; done <"$figs"
    rm -f "$figs"
    echo "-- why (first repeat): per application (app0 resnet10, app1 vgg11, app2 googlenet1), its TPM demand per device, its workers (all processes) at the start -> at the end, its completion time (s); pauses; live resizes"
    sqlite3 -separator ' ' "${dbs[0]}" "
      SELECT $row, s.metric, s.value FROM $runs
      WHERE s.metric LIKE 'demand.app%' OR s.metric LIKE 'workers.app%' OR s.metric LIKE 'completion_s.app%' OR s.metric LIKE 'loader_error_%' OR s.metric IN ('pauses', 'resizes')
      ORDER BY 1, s.metric, s.t_start, s.iteration" |
      awk '{ key = $1 " " $2; if (!(key in first)) { first[key] = $3; order[++n] = key } last[key] = $3 }
           END { for (i = 1; i <= n; i++) { split(order[i], a, " "); m = a[1]; name = a[2]
                   if (name ~ /^workers/) printf "  mode %s %-16s %s -> %s\n", m, name, first[order[i]], last[order[i]]
                   else printf "  mode %s %-16s %.3g\n", m, name, last[order[i]] } }'
    rm -f "$rows"
  done
done
done
done
find "$out" -path '*/checkpoints/*' -type f -delete  # hundreds of MB of trainer checkpoints; the results stay
echo
echo "(results in $out)"
