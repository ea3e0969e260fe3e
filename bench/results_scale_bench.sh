#!/usr/bin/env bash
# How the results pipeline's cost grows: results_bench (ingest, statistics, CSV, closing the database) at N and
# at 10 N samples (10 M and 100 M; 200 k and 2 M with QUICK=1), the runs scaled with it (40 and 400: the same
# run size), in one invocation. Its figures: each size's total and peak memory, the 10x size's time over the 1x
# size's (goal: 10x the work costs at most 10.5x), and the same ratio for each phase and for the anchor (write()
# and fsync of the outputs' bytes alone), which says what the machine itself charges for 10x the bytes.
#   bench/results_scale_bench.sh [build dir]
set -euo pipefail
build=${1:-build}
. "$(dirname "$0")/figures.sh"  # figure(): bench/run-all's figures
small=10000000 runs=40 tag=10M big_tag=100M
[ "${QUICK:-0}" = 1 ] && small=200000 runs=4 tag=200k big_tag=2M
work=$(mktemp -d /var/tmp/fanout-results-scale-XXXXXX)
trap 'rm -rf "$work"' EXIT
# One results_bench; its figures (metric 0 value unit t) into $work/<tag>.fig, its table to stdout.
measure() {
  FANOUT_FIGURES="$work/$1.fig" "$build/results_bench" "$2" "$3"
}
value() { awk -v m="$2" '$1 == m { print $3 }' "$work/$1.fig"; }
ratio() { awk -v a="$(value "$big_tag" "$1")" -v b="$(value "$tag" "$1")" 'BEGIN { if (b > 0) printf "%.3f", a / b }'; }
measure "$tag" "$small" "$runs"
measure "$big_tag" "$((small * 10))" "$((runs * 10))"
printf '\n%-34s %10s %10s %8s\n' figure "$tag" "$big_tag" ratio
for m in total_s ingest_s statistics_s csv_s write_all_synced_s peak_mib; do
  printf '%-34s %10.3f %10.3f %8s\n' "$m" "$(value "$tag" "$m")" "$(value "$big_tag" "$m")" "$(ratio "$m")"
done
figure "total_s.$tag" "$(value "$tag" total_s)" s
figure "total_s.$big_tag" "$(value "$big_tag" total_s)" s
figure "peak_mib.$big_tag" "$(value "$big_tag" peak_mib)" MiB
figure "total_10x_vs_1x" "$(ratio total_s)" x
figure "ingest_10x_vs_1x" "$(ratio ingest_s)" x
figure "statistics_10x_vs_1x" "$(ratio statistics_s)" x
figure "csv_10x_vs_1x" "$(ratio csv_s)" x
figure "write_outputs_10x_vs_1x" "$(ratio write_all_synced_s)" x
