#!/usr/bin/env bash
# scripts/slurm-cluster.sh with a stale pidfile: after a restart of the machine, slurmd-g2.pid can hold the number
# of another program. `up` must start g2's slurmd anyway (it once waited 120 s for a node it never started) and
# must leave that program alone. Runs alone (RUN_SERIAL): g2 has no slurmd for a moment.
#   tests/slurm_cluster_test.sh SOURCE_DIR
set -euo pipefail
src=$1
D=${FANOUT_SLURM_DIR:-/var/tmp/fanout-slurm}
pidfile=$D/run/slurmd-g2.pid
fail() { echo "FAIL: $*" >&2; exit 1; }
nodes=$(sinfo -h -p scale -o %D) || fail "no test cluster (scripts/slurm-cluster.sh scale N)"
slurmd=$(cat "$pidfile")
[ "$(cat "/proc/$slurmd/comm")" = slurmd ] || fail "$pidfile does not name a running slurmd"

registered() { scontrol show node g2 | grep -o 'SlurmdStartTime=[^ ]*'; }
before=$(registered)
sleep 600 &
other=$!
trap 'kill "$other" 2>/dev/null || true' EXIT
kill "$slurmd"
for _ in $(seq 100); do kill -0 "$slurmd" 2>/dev/null || break; sleep 0.1; done
kill -0 "$slurmd" 2>/dev/null && fail "g2's slurmd $slurmd did not stop"
echo "$other" > "$pidfile"

"$src/scripts/slurm-cluster.sh" scale "$nodes" >/dev/null || fail "up failed with a stale pidfile for g2"
kill -0 "$other" 2>/dev/null || fail "up stopped the program ($other) the stale pidfile named"
started=$(cat "$pidfile")
[ "$started" != "$other" ] && [ "$(cat "/proc/$started/comm")" = slurmd ] || fail "no slurmd for g2 in $pidfile ($started)"
# Ready when the controller has the new slurmd's registration (its start time) and g2 idle: the tests after this
# one may send jobs there.
for _ in $(seq 600); do
  [ "$(registered)" != "$before" ] && scontrol show node g2 | grep -q 'State=IDLE ' && break
  sleep 0.1
done
[ "$(registered)" != "$before" ] || fail "g2's new slurmd never registered ($before)"
scontrol show node g2 | grep -q 'State=IDLE ' || fail "g2 is not idle: $(scontrol show node g2 | grep State)"
echo "ok: g2's slurmd restarted ($started), the stale pidfile's program ($other) untouched"
