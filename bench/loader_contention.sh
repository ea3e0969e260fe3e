#!/usr/bin/env bash
# The loader contention curve of this machine's real loaders (issue 42), for torchloader's emulated loaders
# (--loader_contention, plugins/torchloader/loader_contention.h): one real loader worker's throughput alone, and
# beside n-1 others loading at the same time in their own processes (training processes of other applications on
# the node), n = 1 .. this machine's CPUs. Each is fanout-torchloader-train --profile (the loader alone, best of 3
# windows of at least ITERS batches). The others start first, and the measured one only once each of them has
# used a second of CPU (past its start-up: with an emulated device only the loader computes), and they run four
# times as many batches, so every window of the measured one has them all loading (best-of-3 would otherwise pick
# a window before they began). Rounds alternate the counts; per n the median over ROUNDS. The slowdown at n is the
# median alone over the median at n; at n = CPUs (a full node) the contention c = slowdown - 1, the value
# --loader_contention takes.
#   bench/loader_contention.sh [build dir]     knobs: ROUNDS (5), COST (600, as the emulated bench), BATCH (32),
#                                              ITERS (20), ARCH/DEPTH (resnet 10)
set -euo pipefail
build=${1:-build}
exe=$build/fanout-torchloader-train
[ -x "$exe" ] || { echo "loader_contention: $exe not found (build first)" >&2; exit 2; }
ROUNDS=${ROUNDS:-5} COST=${COST:-600} BATCH=${BATCH:-32} ITERS=${ITERS:-20} ARCH=${ARCH:-resnet} DEPTH=${DEPTH:-10}
[[ $ROUNDS =~ ^[1-9][0-9]*$ ]] || { echo "loader_contention: ROUNDS=$ROUNDS: a positive whole number" >&2; exit 2; }
cpus=$(nproc)
pids=()
trap 'kill "${pids[@]}" 2>/dev/null || true' EXIT
cpu_ticks() { awk '{print $14 + $15}' "/proc/$1/stat" 2>/dev/null || echo 0; }  # utime + stime of one process
# Until every process of "$@" has used a second of CPU (ticks of 1/CLK_TCK s), or has ended.
wait_loading() {
  local hz p; hz=$(getconf CLK_TCK)
  for p in "$@"; do
    while kill -0 "$p" 2>/dev/null && [ "$(cpu_ticks "$p")" -lt "$hz" ]; do sleep 0.05; done
  done
}
args=(--arch "$ARCH" --depth "$DEPTH" --batch "$BATCH" --workers 1 --cost "$COST" --threads 1 --device emulated)
profile() {  # iterations: prints the loader's samples/s
  "$exe" "${args[@]}" --profile "$1" | awk '/^PROFILE/ { for (i = 2; i <= NF; i++) if ($i ~ /^loader_samples_per_s=/) { sub(/.*=/, "", $i); print $i } }'
}
declare -A got
for r in $(seq "$ROUNDS"); do
  counts=$(seq "$cpus"); [ $((r % 2)) = 0 ] && counts=$(seq "$cpus" -1 1)
  for n in $counts; do
    pids=()
    for _ in $(seq $((n - 1))); do "$exe" "${args[@]}" --profile $((4 * ITERS)) >/dev/null & pids+=($!); done
    wait_loading "${pids[@]}"
    v=$(profile "$ITERS")
    for p in "${pids[@]}"; do wait "$p" || { echo "loader_contention: a background profile at n=$n failed" >&2; exit 1; }; done
    pids=()
    [ -n "$v" ] || { echo "loader_contention: no figure from the profile at n=$n" >&2; exit 1; }
    got[$n]="${got[$n]:-} $v"
  done
done
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
alone=$(echo "${got[1]}" | median)
echo "real loader ($ARCH$DEPTH, batch $BATCH, cost $COST, 1 worker per process), n processes loading at once on $cpus CPUs, median of $ROUNDS rounds"
printf '%-3s %16s %20s %10s\n' n "samples/s" "(all rounds)" slowdown
for n in $(seq "$cpus"); do
  m=$(echo "${got[$n]}" | median)
  printf '%-3s %16.1f %20s %10.3f\n' "$n" "$m" "($(echo ${got[$n]} | tr ' ' ','))" "$(awk -v a="$alone" -v m="$m" 'BEGIN {print a / m}')"
done
full=$(echo "${got[$cpus]}" | median)
echo "contention at a full node (n = $cpus): c = $(awk -v a="$alone" -v m="$full" 'BEGIN {printf "%.3f", a / m - 1}') (--loader_contention)"
