#!/usr/bin/env bash
# A real single-host Grid Engine cell for the tests (Son of Grid Engine 8.1.9 from Debian: sge_qmaster +
# sge_execd, started directly, no systemd), beside the Slurm test cluster. Idempotent: `up` on a running cell only
# checks it. Usage: scripts/sge-cluster.sh up|down|status
# What one machine allows: one sge_execd per host (it is known by its host name and binds port 6445), so the cell
# has ONE execution host with FANOUT_SGE_SLOTS slots (default 16) in queue all.q, and parallel environment
# `fanout` (allocation_rule $fill_up, control_slaves for Open MPI's tight integration). A run's node is its busiest
# node's CPUs in slots; here every node of a run is this host (steps of one node each run side by side; a step
# of several nodes cannot be placed one node per host). Scheduling every second (the default is 15 s).
# Grid Engine's client owns /usr/bin/qsub, qstat and qdel: Slurm's PBS wrappers live apart (slurm-cluster.sh).
set -euo pipefail
cmd=${1:-up}
export DEBIAN_FRONTEND=noninteractive SGE_ROOT=/var/lib/gridengine SGE_CELL=default
SLOTS=${FANOUT_SGE_SLOTS:-16}
W=${FANOUT_SGE_DIR:-/var/tmp/fanout-sge}
HOST=$(hostname -s)
QPID=/var/spool/gridengine/qmaster/qmaster.pid

# The pid in a pidfile if that process is still daemon $2 (a stale number after a restart can be anything).
daemon_pid() { local p; [ -s "$1" ] && p=$(cat "$1") && [ "$(cat "/proc/$p/comm" 2>/dev/null)" = "$2" ] && echo "$p"; }
execd_pidfile() { ls /var/spool/gridengine/execd/*/execd.pid 2>/dev/null | head -1 || true; }
wait_until() {  # wait_until <seconds> <command...>: a readiness check, not a fixed sleep
  local end=$((SECONDS + $1)); shift
  until "$@" >/dev/null 2>&1; do [ $SECONDS -lt $end ] || return 1; sleep 0.2; done
}
host_ready() { qstat -f 2>/dev/null | grep -q "all.q@$HOST .* lx-amd64 *$"; }

install() {
  local p missing=()
  for p in gridengine-master gridengine-exec gridengine-client; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p")
  done
  [ ${#missing[@]} -gt 0 ] || return 0
  [ -x /usr/sbin/policy-rc.d ] || { printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d; chmod +x /usr/sbin/policy-rc.d; }
  # The packages ask for the cell and its master host: answered, so that they configure without a prompt.
  for p in gridengine-common gridengine-master gridengine-client gridengine-exec; do
    printf '%s shared/gridengineconfig boolean true\n%s shared/gridenginecell string default\n%s shared/gridenginemaster string %s\n' \
      "$p" "$p" "$p" "$HOST"
  done | debconf-set-selections
  apt-get -o DPkg::Lock::Timeout=900 update -qq
  apt-get -o DPkg::Lock::Timeout=900 install -y -qq --no-install-recommends gridengine-master gridengine-exec gridengine-client >/dev/null
}

configure() {
  mkdir -p "$W"
  # 127.0.0.1 resolves back to "localhost" while the host calls itself $HOST: commlib refuses ("access denied")
  # unless host_aliases makes them one host.
  echo "$HOST localhost $(getent hosts 127.0.0.1 | awk '{$1=""; print}')" > $SGE_ROOT/$SGE_CELL/common/host_aliases
  if ! daemon_pid $QPID sge_qmaster >/dev/null; then
    /usr/sbin/sge_qmaster
    wait_until 30 qconf -sh || { echo "sge-cluster: sge_qmaster did not answer; see /var/spool/gridengine/qmaster/messages" >&2; exit 1; }
  fi
  qconf -sh | grep -qx "$HOST" || qconf -ah "$HOST" >/dev/null
  qconf -ss 2>/dev/null | grep -qx "$HOST" || qconf -as "$HOST" >/dev/null
  if ! qconf -sel 2>/dev/null | grep -qx "$HOST"; then
    printf 'hostname %s\nload_scaling NONE\ncomplex_values NONE\nuser_lists NONE\nxuser_lists NONE\nprojects NONE\nxprojects NONE\nusage_scaling NONE\nreport_variables NONE\n' "$HOST" > "$W/exechost.txt"
    qconf -Ae "$W/exechost.txt" >/dev/null
  fi
  if ! qconf -shgrpl 2>/dev/null | grep -qx '@allhosts'; then
    printf 'group_name @allhosts\nhostlist %s\n' "$HOST" > "$W/hgrp.txt"
    qconf -Ahgrp "$W/hgrp.txt" >/dev/null
  fi
  if ! qconf -spl 2>/dev/null | grep -qx fanout; then
    printf 'pe_name fanout\nslots 9999\nuser_lists NONE\nxuser_lists NONE\nstart_proc_args NONE\nstop_proc_args NONE\nallocation_rule $fill_up\ncontrol_slaves TRUE\njob_is_first_task FALSE\nurgency_slots min\naccounting_summary FALSE\nqsort_args NONE\n' > "$W/pe.txt"
    qconf -Ap "$W/pe.txt" >/dev/null
  fi
  # qconf -aq/-mconf/-msconf open $EDITOR on a template: a sed script is the editor.
  cat > "$W/ed.sh" <<EOF
#!/bin/sh
sed -i -e 's/^hostlist .*/hostlist @allhosts/' -e 's/^slots .*/slots $SLOTS/' \\
  -e 's/^shell .*/shell \/bin\/bash/' -e 's/^pe_list .*/pe_list fanout/' \\
  -e 's/^load_thresholds .*/load_thresholds NONE/' \\
  -e 's/^min_uid .*/min_uid 0/' -e 's/^min_gid .*/min_gid 0/' \\
  -e 's/^schedule_interval .*/schedule_interval 0:0:1/' \\
  -e 's/^flush_submit_sec .*/flush_submit_sec 1/' -e 's/^flush_finish_sec .*/flush_finish_sec 1/' \\
  -e 's/flush_time=[0-9:]*/flush_time=00:00:01/' "\$1"
EOF
  chmod +x "$W/ed.sh"
  if ! qconf -sql 2>/dev/null | grep -qx all.q; then EDITOR="$W/ed.sh" qconf -aq all.q >/dev/null; fi
  qconf -sq all.q | grep -q "^slots *$SLOTS\$" || qconf -mattr queue slots "$SLOTS" all.q >/dev/null
  qconf -sq all.q | grep -q "^pe_list *fanout\$" || qconf -mattr queue pe_list fanout all.q >/dev/null
  # root's jobs (tests run as root); the accounting file written a second after a job ends (qacct's record of a
  # completed job is what fanout waits for to store its usage; sites keep 15 s)
  { qconf -sconf global | grep -q '^min_uid *0$' && qconf -sconf global | grep -q 'flush_time=00:00:01'; } ||
    EDITOR="$W/ed.sh" qconf -mconf global >/dev/null
  qconf -ssconf | grep -q '^schedule_interval *0:0:1$' || EDITOR="$W/ed.sh" qconf -msconf >/dev/null
  mkdir -p /var/spool/gridengine/execd
  chown sgeadmin:sgeadmin /var/spool/gridengine/execd
  local ep; ep=$(execd_pidfile)
  if [ -z "$ep" ] || ! daemon_pid "$ep" sge_execd >/dev/null; then /usr/sbin/sge_execd; fi
  wait_until 60 host_ready || { echo "sge-cluster: the execution host did not come up" >&2; qstat -f >&2; exit 1; }
  echo "sge-cluster: up, host $HOST with $SLOTS slots, parallel environment fanout ($(qstat -help | head -1))"
}

down() {
  command -v qdel >/dev/null && daemon_pid $QPID sge_qmaster >/dev/null && qdel -u "$(id -un)" >/dev/null 2>&1 || true
  local ep p; ep=$(execd_pidfile)
  for pair in "$ep sge_execd" "$QPID sge_qmaster"; do
    set -- $pair
    [ -n "${1:-}" ] || continue
    if p=$(daemon_pid "$1" "$2"); then
      kill "$p"
      for _ in $(seq 100); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
      kill -9 "$p" 2>/dev/null || true
    fi
  done
  echo "sge-cluster: down"
}

case "$cmd" in
  up) install; configure ;;
  down) down ;;
  status) qstat -f ;;
  *) echo "usage: $0 up|down|status" >&2; exit 2 ;;
esac
