#!/usr/bin/env bash
# ps-lite benchmark table: 1 server + 1 worker on loopback, push / pull / pushpull at 4 KiB .. 16 MiB over TCP
# and shared memory, the synchronous 4 KiB round trip, and iperf3 (single stream) measured in the same
# invocation as the ceiling. ps-lite's own figures (../shared/reference/ps-lite.md, same machine class) are the
# baseline the issue sets goals against. Runs fanout-pslite under ps-lite's DMLC_* environment.
#   bench/pslite_bench.sh [build dir]     (needs iperf3: scripts/install-deps.sh test)
set -euo pipefail
build=${1:-build}
exe=$build/fanout-pslite
[ -x "$exe" ] || { echo "pslite_bench: $exe not found (build first)" >&2; exit 2; }
command -v iperf3 >/dev/null || { echo "pslite_bench: iperf3 is missing (scripts/install-deps.sh test)" >&2; exit 2; }
port=$((20000 + RANDOM % 20000))
export DMLC_NUM_SERVER=1 DMLC_NUM_WORKER=1 DMLC_PS_ROOT_URI=127.0.0.1 DMLC_INTERFACE=lo NUM_KEY_PER_SERVER=40

# One measurement: scheduler + server in the background, the worker prints the figure.
run() {  # transport len iterations mode(0 sync,1 pushpull,2 push,3 pull)
  port=$((port + 1))
  DMLC_PS_ROOT_PORT=$port DMLC_ENABLE_RDMA=$1 DMLC_ROLE=scheduler "$exe" &
  DMLC_PS_ROOT_PORT=$port DMLC_ENABLE_RDMA=$1 DMLC_ROLE=server "$exe" &
  DMLC_PS_ROOT_PORT=$port DMLC_ENABLE_RDMA=$1 DMLC_ROLE=worker "$exe" "$2" "$3" "$4"
  wait
}
gbps() { run "$@" | awk '/Application goodput/ {print $3}'; }
# Enough iterations for about 400 MB per run, at least 20.
iters() { local n=$((400000000 / ($1 * 40))); echo $((n < 20 ? 20 : n)); }

iperf3 -s -1 -p $((port + 500)) >/dev/null 2>&1 &
sleep 0.5  # iperf3 has no readiness signal; a late server makes the client fail loudly, not mismeasure
ceiling=$(iperf3 -c 127.0.0.1 -p $((port + 500)) -t 3 -f g | awk '/receiver/ {print $(NF-2)}')
wait
echo "iperf3 single stream over loopback: ${ceiling} Gbit/s"
echo
# Gb/s count both directions (pushpull moves each value there and back); "vs ps-lite" compares one direction,
# as ps-lite prints it; tcp/iperf3 is our TCP goodput over the single-stream ceiling.
printf '%-9s %-9s %10s %10s %12s %10s %10s\n' mode len "tcp Gb/s" "shm Gb/s" "shm/tcp" "vs ps-lite" "tcp/iperf3"
declare -A pslite=([push4096]=0.059 [push65536]=0.81 [push1048576]=5.3 [push4194304]=6.4 [push16777216]=8.2
  [pull4096]=0.047 [pull65536]=0.80 [pull1048576]=4.5 [pull4194304]=6.4 [pull16777216]=6.4
  [pushpull4096]=0.048 [pushpull65536]=0.60 [pushpull1048576]=3.1 [pushpull4194304]=4.4 [pushpull16777216]=4.6)
for mode in push pull pushpull; do
  m=$([ $mode = pushpull ] && echo 1 || ([ $mode = push ] && echo 2 || echo 3))
  for len in 4096 65536 1048576 4194304 16777216; do
    tcp=$(gbps 0 $len "$(iters $len)" $m)
    shm=$(gbps shm $len "$(iters $len)" $m)
    # ps-lite's pushpull figure counts one direction; ours counts both: compare like with like.
    one_way=$([ $mode = pushpull ] && awk -v g="$tcp" 'BEGIN{print g/2}' || echo "$tcp")
    awk -v mode=$mode -v len=$len -v tcp="$tcp" -v shm="$shm" -v ref="${pslite[$mode$len]}" -v one="$one_way" -v ceil="$ceiling" \
      'BEGIN{printf "%-9s %-9s %10.2f %10.2f %12.2f %10.1f %10.2f\n", mode, len, tcp, shm, shm/tcp, one/ref, tcp/ceil}'
  done
done
echo
echo "synchronous round trip, 1 key of 4096 bytes (tcp, then shm):"
run 0 4096 2000 0
run shm 4096 2000 0
