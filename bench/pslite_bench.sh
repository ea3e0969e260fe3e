#!/usr/bin/env bash
# ps-lite benchmark table: 1 server + 1 worker on loopback, push / pull / pushpull at 4 KiB .. 16 MiB over TCP
# and shared memory, and the synchronous 4 KiB round trip. Each figure's anchor is iperf3 as its users run it for
# this traffic, measured right before it: `iperf3 -l <min(len, 1M)>` (the same write size), and `--bidir` summed
# for pushpull. No figure from another machine enters a goal. Runs fanout-pslite under ps-lite's DMLC_* environment.
# Beside iperf3, the plain-socket anchor (build/tcp_anchor): fanout-pslite's own message shape (a 40-byte header
# and the value per sendmsg, read into place) on one TCP connection with no protocol, from and into as many distinct
# values as the run's keys (as a worker and a server hold them; since 2026-12-06, one value before), also measured
# right before each run: tcp/plain is ps-lite's cost, plain/iperf3 the message shape's and the working set's
# (iperf3 moves one buffer of at most 1 MiB, which a core's cache holds). The synchronous round trip's anchor is
# `tcp_anchor rtt 4096` (a 4 KiB value out, a header back: the push's shape, TCP_NODELAY), measured right after
# each transport's run and for as long as its round trips took. The shared-memory figures' ceiling (build/copy_anchor):
# one core copying the run's values from distinct sources into distinct destinations and doing nothing else, measured
# right before each shared-memory run. The ring copies each value twice, once on each side's core, at once: the pair
# moves at most about what one core copies alone, so shm/copy is how near the ring comes to that, and copy/tcp
# estimates the highest shm/tcp any two-copy transport can reach that moment (push and pull; pushpull copies both ways
# on both). An estimate, not a strict bound: each side's copy has one end in the cache (the ring), which can cost
# less a byte than the anchor's copy from memory to memory.
#   bench/pslite_bench.sh [build dir]     (needs iperf3: scripts/install-deps.sh test)
set -euo pipefail
build=${1:-build}
exe=$build/fanout-pslite plain=$build/tcp_anchor copy=$build/copy_anchor
[ -x "$exe" ] || { echo "pslite_bench: $exe not found (build first)" >&2; exit 2; }
for anchor in "$plain" "$copy"; do
  [ -x "$anchor" ] || { echo "pslite_bench: $anchor not found (build the bench targets)" >&2; exit 2; }
done
command -v iperf3 >/dev/null || { echo "pslite_bench: iperf3 is missing (scripts/install-deps.sh test)" >&2; exit 2; }
# Ports below the kernel's ephemeral range (an outgoing connection of any process may hold one there: "Address
# already in use"), each checked free before a run takes it.
low=$(cut -f1 /proc/sys/net/ipv4/ip_local_port_range 2>/dev/null || echo 32768)
port=$((10000 + RANDOM % (low - 12000)))
next_port() {  # the next port nothing listens on
  port=$((port + 1))
  while (exec 3<>/dev/tcp/127.0.0.1/$port) 2>/dev/null; do port=$((port + 1)); done
}
export DMLC_NUM_SERVER=1 DMLC_NUM_WORKER=1 DMLC_PS_ROOT_URI=127.0.0.1 DMLC_INTERFACE=lo NUM_KEY_PER_SERVER=40

# One measurement: scheduler + server in the background, the worker prints the figure.
run() {  # transport len iterations mode(0 sync,1 pushpull,2 push,3 pull)
  next_port
  DMLC_PS_ROOT_PORT=$port DMLC_ENABLE_RDMA=$1 DMLC_ROLE=scheduler "$exe" &
  DMLC_PS_ROOT_PORT=$port DMLC_ENABLE_RDMA=$1 DMLC_ROLE=server "$exe" &
  DMLC_PS_ROOT_PORT=$port DMLC_ENABLE_RDMA=$1 DMLC_ROLE=worker "$exe" "$2" "$3" "$4"
  wait
}
gbps() { run "$@" | awk '/Application goodput/ {print $3}'; }
. "$(dirname "$0")/figures.sh"  # figure(): bench/run-all's figures
# QUICK=1 (run-all --quick): 1/20 of the bytes per measurement, a 1 s iperf3.
quick=${QUICK:-0}
# Enough iterations for about 400 MB per run, at least 20.
iters() { local n=$((400000000 / ($1 * 40) / (quick ? 20 : 1))); echo $((n < 20 ? 20 : n)); }

# The anchor, as iperf3's users run it: the same write size as the value (-l, up to 1 MiB: fanout-pslite's
# writes are one value per sendmsg), --bidir summed for pushpull (it moves every value there and back), measured
# right before each fanout run so that the two see the same machine. iperf3 has no readiness signal: the client
# is retried while the server is not listening yet (refused at once).
iperf_gbps() {  # len bidir(0|1): Gbit/s received, both directions summed with --bidir
  local l=$(($1 < 1048576 ? $1 : 1048576)) p=$((port + 500)) g=
  port=$((port + 1))
  iperf3 -s -1 -p "$p" >/dev/null 2>&1 &
  for _ in $(seq 50); do
    g=$(iperf3 -c 127.0.0.1 -p "$p" -t $((quick ? 1 : 3)) -l "$l" $([ "$2" = 1 ] && echo --bidir) -f g 2>/dev/null |
      awk '/receiver/ {s += $(NF-2); n++} END {if (n) print s}') && [ -n "$g" ] && break
    sleep 0.1
  done
  wait
  echo "$g"
}
# The plain-socket anchor: as many values as the fanout run moves (iterations x keys), one direction (push, pull)
# or both (pushpull), from and into one value per key in turn.
plain_gbps() {  # len bidir(0|1)
  "$plain" "$([ "$2" = 1 ] && echo bidir || echo stream)" "$1" "$(($(iters "$1") * NUM_KEY_PER_SERVER))" "$NUM_KEY_PER_SERVER" |
    awk '/Application goodput/ {print $3}'
}
# The copy anchor: the same number of values as the fanout run moves, from and into one value per key in turn.
copy_gbps() {  # len
  "$copy" "$1" "$(($(iters "$1") * NUM_KEY_PER_SERVER))" "$NUM_KEY_PER_SERVER" | awk '/Copy rate/ {print $3}'
}
echo "anchors: iperf3 -l min(len, 1M) over loopback, and tcp_anchor (the same header+value messages, no protocol), each measured before each fanout run; pushpull against iperf3 --bidir and tcp_anchor bidir (both directions summed); copy_anchor (one core copying the same values, push and pull) before each shared-memory run"
echo
# Gb/s count both directions for pushpull (each value there and back), as the --bidir anchor does.
printf '%-9s %-9s %9s %9s %8s %11s %10s %10s %11s %10s %9s\n' mode len "tcp Gb/s" "shm Gb/s" "shm/tcp" "iperf3 Gb/s" "tcp/iperf3" "plain Gb/s" "tcp/plain" "copy Gb/s" "copy/tcp"
goals=()
for mode in push pull pushpull; do
  m=$([ $mode = pushpull ] && echo 1 || ([ $mode = push ] && echo 2 || echo 3))
  for len in 4096 65536 1048576 4194304 16777216; do
    anchor=$(iperf_gbps $len $([ $mode = pushpull ] && echo 1 || echo 0))
    [ -n "$anchor" ] || { echo "pslite_bench: iperf3 gave no figure at $len" >&2; exit 1; }
    plain_raw=$(plain_gbps $len $([ $mode = pushpull ] && echo 1 || echo 0))
    [ -n "$plain_raw" ] || { echo "pslite_bench: tcp_anchor gave no figure at $len" >&2; exit 1; }
    tcp_raw=$(gbps 0 $len "$(iters $len)" $m); tcp=${tcp_raw:-0}
    copy_raw=
    if [ $mode != pushpull ]; then
      copy_raw=$(copy_gbps $len)
      [ -n "$copy_raw" ] || { echo "pslite_bench: copy_anchor gave no figure at $len" >&2; exit 1; }
    fi
    shm_raw=$(gbps shm $len "$(iters $len)" $m); shm=${shm_raw:-0}
    line=$(awk -v mode=$mode -v len=$len -v tcp="$tcp" -v shm="$shm" -v a="$anchor" -v p="$plain_raw" -v c="$copy_raw" 'BEGIN{
      ratio = (tcp > 0) ? shm / tcp : 0
      printf "%-9s %-9s %9.2f %9.2f %8.2f %11.2f %10.2f %10.2f %11.2f", mode, len, tcp, shm, ratio, a, tcp / a, p, tcp / p
      if (c != "") printf " %10.2f %9.2f", c, (tcp > 0) ? c / tcp : 0
      if (mode != "pushpull" && (len == 65536 || len == 1048576 || len == 4194304))
        printf "|%s %s tcp / iperf3 -l %s: %.2f (goal 0.9): %s", mode, len, (len < 1048576 ? len : 1048576), tcp / a, ((tcp / a >= 0.9) ? "met" : "NOT met")
      if (len == 1048576) printf "|%s %s shm/tcp %.2f (goal 3x): %s", mode, len, ratio, ((ratio >= 3) ? "met" : "NOT met")
    }')
    echo "${line%%|*}"
    figure "iperf3_gbit_per_s.$mode.$len" "$anchor" Gbit/s
    figure "tcp_gbit_per_s.$mode.$len" "$tcp_raw" Gbit/s
    figure "shm_gbit_per_s.$mode.$len" "$shm_raw" Gbit/s
    figure "tcp_vs_iperf3.$mode.$len" "$(awk -v t="$tcp" -v c="$anchor" 'BEGIN{printf "%.6g", t / c}')" x
    figure "plain_gbit_per_s.$mode.$len" "$plain_raw" Gbit/s
    figure "tcp_vs_plain.$mode.$len" "$(awk -v t="$tcp" -v c="$plain_raw" 'BEGIN{printf "%.6g", t / c}')" x
    figure "plain_vs_iperf3.$mode.$len" "$(awk -v p="$plain_raw" -v c="$anchor" 'BEGIN{printf "%.6g", p / c}')" x
    figure "shm_vs_tcp.$mode.$len" "$(awk -v s="$shm" -v t="$tcp" 'BEGIN{printf "%.6g", (t > 0) ? s / t : 0}')" x
    if [ -n "$copy_raw" ]; then
      figure "copy_gbit_per_s.$mode.$len" "$copy_raw" Gbit/s
      figure "shm_vs_copy.$mode.$len" "$(awk -v s="$shm" -v c="$copy_raw" 'BEGIN{printf "%.6g", s / c}')" x
      figure "copy_vs_tcp.$mode.$len" "$(awk -v c="$copy_raw" -v t="$tcp" 'BEGIN{printf "%.6g", (t > 0) ? c / t : 0}')" x
    fi
    IFS='|' read -r -a g <<<"${line#*|}"
    [ "$line" = "${line%%|*}" ] || goals+=("${g[@]}")
  done
done
echo
echo "synchronous round trip, 1 key of 4096 bytes (goal p50 < 100 us), against tcp_anchor rtt 4096 measured right after, for as long:"
for t in 0 shm; do
  tag=$([ $t = 0 ] && echo tcp || echo shm)
  out=$(run $t 4096 5000 0)
  echo "$tag: $(tr '\n' ';' <<<"$out")"
  p50=$(awk '/push_rtt/ {print $6}' <<<"$out")
  p99=$(awk '/push_rtt/ {print $9}' <<<"$out")
  span=$(awk '/push_rtt/ {for (i = 1; i < NF; i++) if ($(i + 1) == "s" && $(i + 2) == "in") print $i}' <<<"$out")
  [ -n "$p50" ] && [ -n "$p99" ] && [ -n "$span" ] || { echo "pslite_bench: fanout-pslite sync printed no round trips" >&2; exit 1; }
  # The anchor runs at least as long as the push and pull round trips did (a p99 over 10 ms of 5 us round trips is
  # one scheduler event; before 2026-12-06 it ran 5,000 round trips whatever their length).
  ping=$("$plain" rtt 4096 5000 1 "$span")
  echo "  plain socket after it: $ping"
  ping_p50=$(awk '{for (i = 1; i < NF; i++) if ($i == "p50") print $(i + 1)}' <<<"$ping")
  ping_p99=$(awk '{for (i = 1; i < NF; i++) if ($i == "p99") print $(i + 1)}' <<<"$ping")
  figure "plain_rtt_p50_us.$tag" "$ping_p50" us
  figure "plain_rtt_p99_us.$tag" "$ping_p99" us
  figure "sync_push_rtt_p50_us.$tag" "$p50" us
  figure "sync_push_rtt_p99_us.$tag" "$p99" us
  figure "sync_push_rtt_p50_vs_plain.$tag" "$(awk -v a="$p50" -v b="$ping_p50" 'BEGIN{printf "%.6g", a / b}')" x
  figure "sync_push_rtt_p99_vs_plain.$tag" "$(awk -v a="$p99" -v b="$ping_p99" 'BEGIN{printf "%.6g", a / b}')" x
  goals+=("sync 4 KiB push round trip over $tag p50 ${p50} us (goal < 100): $(awk -v p="$p50" 'BEGIN{print ((p < 100) ? "met" : "NOT met")}')")
done
echo
echo "goals:"
printf '  %s\n' "${goals[@]}"
