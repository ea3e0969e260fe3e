#!/usr/bin/env bash
# A real single-host Slurm 22.05 cluster for the tests: munged + slurmctld + one slurmd per virtual node
# (n1..nN on 127.0.0.1), with PMIx. Started directly (no systemd). Idempotent: `up` on a running cluster with
# the same node count only checks it. Usage: scripts/slurm-cluster.sh up|scale [N]|down|status
# Partition debug (the default) is always n1-n4; `scale N` (default 160) starts N nodes in all and adds
# partition scale = n1-nN, for sweeps of SmartSim-Scaling's size with one rank per node (one slurmd per node,
# 160 start in a few seconds and take about 250 MB), and partitions preemptible and urgent on n9-n10, where
# an urgent job cancels a preemptible one (PREEMPTED; debug's and scale's jobs are never preempted).
# Partition gpu is g1-g2, nodes as a real site has them: as many CPUs as this host (bound by task/affinity: a
# task's CPU set is what it asked) and 4 GPUs each faked as GRES (placeholder device files, AutoDetect=off: Slurm
# hands them out and sets CUDA_VISIBLE_DEVICES; nothing can compute on them). The n nodes declare more CPUs than
# the host has, so their slurmds run task/none (a second config file): task/affinity would bind each job, batch
# script included, to its allocated cores, every virtual node's core 0 being this host's CPU 0. task/cgroup is not
# used: slurmd runs here without systemd or a delegated cgroup tree, and 160 slurmds share one kernel.
# Accounting is real, as on a site: slurmdbd on a private MariaDB (datadir $D/db, 127.0.0.1:3307, its own socket;
# no systemd) stores every job and step, so sacct answers MaxRSS, AveRSS and TotalCPU (jobacct_gather/linux, a
# sample a second and one as each task ends) and fanout reads them after each job. Association and QOS limits are
# enforced (AccountingStorageEnforce=limits): every job needs an association (root has one from the cluster's
# registration), and a test may give an account of its own a limit (tests/slurm_test.cpp account_with_submit_limit).
# Knobs: FANOUT_SLURM_NODES (default 4), FANOUT_SLURM_CPUS per n node (default 16; more than the machine has
# is fine with config_overrides), FANOUT_SLURM_DIR (default /var/tmp/fanout-slurm).
set -euo pipefail
cmd=${1:-up}
if [ "$cmd" = scale ]; then N=${2:-160}; cmd=up; else N=${FANOUT_SLURM_NODES:-4}; fi
[ "$N" -ge 4 ] || { echo "slurm-cluster: at least 4 nodes (partition debug is n1-n4)" >&2; exit 2; }
CPUS=${FANOUT_SLURM_CPUS:-16}
D=${FANOUT_SLURM_DIR:-/var/tmp/fanout-slurm}
PBS_ON_SLURM=/opt/fanout/pbs-on-slurm   # Slurm's PBS wrappers, unpacked (tests/pbs_test.cpp kPbsOnSlurm)
HOST=$(hostname -s)
HOST_CPUS=$(nproc --all)
# The pid in pidfile $1 if that process is still daemon $2: after a restart of the machine the number can belong
# to anything (a stale slurmd-g1.pid once named another program, so g1's slurmd was never started, and `down` would
# have killed that program). A slurmd's pidfile must also name its node: stale pidfiles of 160 slurmds once named
# other nodes' slurmds after a restart (n80's held n70's number), and those nodes were never started.
daemon_pid() { local p; [ -s "$1" ] && p=$(cat "$1") && [ "$(cat "/proc/$p/comm" 2>/dev/null)" = "$2" ] && echo "$p"; }
alive() { daemon_pid "$1" "$2" >/dev/null; }
slurmd_alive() {  # slurmd_alive <node>
  local p
  p=$(daemon_pid "$D/run/slurmd-$1.pid" slurmd) && tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -q -- "-N $1 *$"
}
wait_until() {  # wait_until <seconds> <command...>: a readiness check, not a fixed sleep (commands bound their own tries)
  local deadline=$((SECONDS + $1)); shift
  while [ $SECONDS -lt $deadline ]; do "$@" >/dev/null 2>&1 && return 0; sleep 0.1; done
  return 1
}
nodes_idle() { [ "$(timeout 5 sinfo -h -N -t idle,mix,alloc -o '%N' 2>/dev/null | sort -u | wc -l)" -ge "$((N + 2))" ]; }

stop_pidfile() {  # stop_pidfile <pidfile> <daemon name>
  local f=$1 p
  if p=$(daemon_pid "$f" "$2"); then
    kill "$p"
    for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -9 "$p" 2>/dev/null || true
  fi
  rm -f "$f"
}

down() {
  if command -v scancel >/dev/null && scontrol ping 2>/dev/null | grep -q UP; then scancel --user="$(id -un)" 2>/dev/null || true; fi
  # All slurmds at once (one by one, 160 of them take minutes), then whatever lingers by force.
  local pids=() f p
  for f in "$D"/run/slurmd-*.pid; do p=$(daemon_pid "$f" slurmd) && pids+=("$p"); done
  if [ ${#pids[@]} -gt 0 ]; then
    kill "${pids[@]}" 2>/dev/null || true
    any_alive() { local p; for p in "$@"; do kill -0 "$p" 2>/dev/null && return 0; done; return 1; }
    for _ in $(seq 100); do any_alive "${pids[@]}" || break; sleep 0.1; done
    kill -9 "${pids[@]}" 2>/dev/null || true
  fi
  rm -f "$D"/run/slurmd-*.pid
  stop_pidfile "$D/run/slurmctld.pid" slurmctld
  stop_pidfile "$D/run/slurmdbd.pid" slurmdbd
  stop_pidfile "$D/run/mariadbd.pid" mariadbd
  # munged was started by `up` too; a chroot cannot be unmounted while it holds /dev open.
  stop_pidfile /run/munge/munged.pid munged
  echo "slurm-cluster: down"
}

# The accounting store: a private MariaDB and slurmdbd, each started once (idempotent), the cluster registered.
accounting_up() {
  local sock=$D/run/mysqld.sock
  mkdir -p "$D/db" "$D/run" "$D/log"
  if ! alive "$D/run/mariadbd.pid" mariadbd; then
    if [ ! -d "$D/db/mysql" ]; then
      chown mysql:mysql "$D/db"
      mariadb-install-db --no-defaults --user=mysql --datadir="$D/db" --skip-test-db \
        --auth-root-authentication-method=socket >"$D/log/mariadb-install.log" 2>&1 ||
        { echo "slurm-cluster: mariadb-install-db failed; see $D/log/mariadb-install.log" >&2; exit 1; }
    fi
    touch "$D/log/mariadbd.err"; chown mysql:mysql "$D/log/mariadbd.err" "$D/run"
    setsid /usr/sbin/mariadbd --no-defaults --user=mysql --datadir="$D/db" --socket="$sock" --port=3307 \
      --bind-address=127.0.0.1 --pid-file="$D/run/mariadbd.pid" --log-error="$D/log/mariadbd.err" --skip-log-bin \
      --innodb-buffer-pool-size=64M --innodb-log-file-size=32M --innodb-lock-wait-timeout=900 </dev/null >/dev/null 2>&1 &
    wait_until 60 mariadb -S "$sock" -e 'select 1' || { echo "slurm-cluster: MariaDB did not start; see $D/log/mariadbd.err" >&2; exit 1; }
  fi
  mariadb -S "$sock" <<'SQL'
CREATE DATABASE IF NOT EXISTS slurm_acct_db;
CREATE USER IF NOT EXISTS 'slurm'@'localhost' IDENTIFIED BY 'slurmdbd';
CREATE USER IF NOT EXISTS 'slurm'@'127.0.0.1' IDENTIFIED BY 'slurmdbd';
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'localhost';
GRANT ALL ON slurm_acct_db.* TO 'slurm'@'127.0.0.1';
SQL
  local dbd_conf
  dbd_conf=$(cat <<CONF
AuthType=auth/munge
DbdHost=localhost
DbdPort=6819
SlurmUser=root
StorageType=accounting_storage/mysql
StorageHost=127.0.0.1
StoragePort=3307
StorageUser=slurm
StoragePass=slurmdbd
StorageLoc=slurm_acct_db
PidFile=$D/run/slurmdbd.pid
LogFile=$D/log/slurmdbd.log
DebugLevel=info
CONF
)
  if [ "$(cat /etc/slurm/slurmdbd.conf 2>/dev/null)" != "$dbd_conf" ]; then
    stop_pidfile "$D/run/slurmdbd.pid" slurmdbd
    printf '%s\n' "$dbd_conf" > /etc/slurm/slurmdbd.conf
  fi
  chown root:root /etc/slurm/slurmdbd.conf; chmod 600 /etc/slurm/slurmdbd.conf
  alive "$D/run/slurmdbd.pid" slurmdbd || /usr/sbin/slurmdbd
  # slurmdbd makes its tables on its first start: ready once sacctmgr gets an answer through it.
  wait_until 120 timeout 10 sacctmgr -n list cluster || { echo "slurm-cluster: slurmdbd did not answer; see $D/log/slurmdbd.log" >&2; exit 1; }
  sacctmgr -n -P list cluster format=cluster | grep -qx fanout || sacctmgr -i add cluster fanout >/dev/null
}

up() {
  export DEBIAN_FRONTEND=noninteractive
  [ -x /usr/sbin/policy-rc.d ] || { printf '#!/bin/sh\nexit 101\n' > /usr/sbin/policy-rc.d; chmod +x /usr/sbin/policy-rc.d; }
  # libpmix must be installed before slurmd starts, or srun --mpi=pmix hangs.
  # slurm-wlm-torque (Slurm's PBS-compatible qsub/qstat/qdel, for the PBS tests) conflicts with Grid Engine's
  # client (both are /usr/bin/qsub): its dependencies come from apt, the Perl wrappers themselves are unpacked into
  # $PBS_ON_SLURM, which the PBS tests put first on PATH (scripts/sge-cluster.sh owns /usr/bin/qsub).
  pkgs=(slurm-wlm slurmctld slurmd slurm-client munge libslurm-dev libpmix-dev libslurm-perl libslurmdb-perl libswitch-perl
        slurmdbd mariadb-server)
  missing=()
  for p in "${pkgs[@]}"; do dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed' || missing+=("$p"); done
  if [ ${#missing[@]} -gt 0 ]; then
    apt-get -o DPkg::Lock::Timeout=900 update -qq
    apt-get -o DPkg::Lock::Timeout=900 install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
  fi
  if [ ! -x "$PBS_ON_SLURM/usr/bin/qsub" ]; then
    local deb_dir; deb_dir=$(mktemp -d)
    (cd "$deb_dir" && apt-get -o DPkg::Lock::Timeout=900 download slurm-wlm-torque >/dev/null 2>&1) ||
      { apt-get -o DPkg::Lock::Timeout=900 update -qq && (cd "$deb_dir" && apt-get download slurm-wlm-torque >/dev/null); }
    rm -rf "$PBS_ON_SLURM.new" && mkdir -p "$PBS_ON_SLURM.new"
    dpkg-deb -x "$deb_dir"/slurm-wlm-torque_*.deb "$PBS_ON_SLURM.new"
    # The wrappers start Slurm's commands from their own folder (FindBin): those are linked beside them.
    for c in salloc sbatch srun squeue scancel scontrol; do ln -sf "/usr/bin/$c" "$PBS_ON_SLURM.new/usr/bin/$c"; done
    rm -rf "$PBS_ON_SLURM" && mv "$PBS_ON_SLURM.new" "$PBS_ON_SLURM" && rm -rf "$deb_dir"
  fi

  # Slurm daemons and srun find each other by this host's name, and the job-step path looks up localhost: make
  # sure both resolve from /etc/hosts (Debian's convention; a debootstrapped root has neither, and each lookup
  # then waits 5 s for a DNS server that is not there: a 64-rank step took two minutes to start and timed out).
  getent hosts localhost >/dev/null || echo "127.0.0.1 localhost" >> /etc/hosts
  getent hosts "$HOST" >/dev/null || echo "127.0.1.1 $HOST" >> /etc/hosts

  mkdir -p "$D"/{state,log,run} /etc/slurm
  for k in $(seq "$N"); do mkdir -p "$D/spool/n$k" "$D/tmp/n$k"; done
  for k in 1 2; do mkdir -p "$D/spool/g$k" "$D/tmp/g$k"; done
  # The fake GPUs' device files (character devices like /dev/null's where mknod is allowed, else plain files).
  mkdir -p "$D/dev"
  for k in 0 1 2 3; do [ -e "$D/dev/gpu$k" ] || mknod "$D/dev/gpu$k" c 1 3 2>/dev/null || touch "$D/dev/gpu$k"; done
  conf=$(cat <<CONF
ClusterName=fanout
SlurmctldHost=$HOST(127.0.0.1)
SlurmUser=root
SlurmctldPort=6817
SlurmdPort=6818
AuthType=auth/munge
CredType=cred/munge
MpiDefault=none
ProctrackType=proctrack/linuxproc
TaskPlugin=task/affinity
DebugFlags=NO_CONF_HASH
GresTypes=gpu
SwitchType=switch/none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core
SchedulerType=sched/backfill
SchedulerParameters=sched_interval=1
# Preemption between partition tiers only (the retry-after-preemption test): partition urgent (tier 2)
# cancels jobs of partition preemptible (tier 1) on nodes n9-n10; jobs of debug and scale are never preempted.
PreemptType=preempt/partition_prio
PreemptMode=CANCEL
SlurmdParameters=config_overrides
ReturnToService=2
StateSaveLocation=$D/state
SlurmdSpoolDir=$D/spool/%n
SlurmctldPidFile=$D/run/slurmctld.pid
SlurmdPidFile=$D/run/slurmd-%n.pid
SlurmctldLogFile=$D/log/slurmctld.log
SlurmdLogFile=$D/log/slurmd-%n.log
SlurmctldDebug=info
SlurmdDebug=info
JobCompType=jobcomp/filetxt
JobCompLoc=$D/log/jobcomp.txt
AccountingStorageType=accounting_storage/slurmdbd
AccountingStorageHost=localhost
AccountingStoragePort=6819
# Association and QOS limits hold as on a site (a per-user MaxSubmitJobs: Slurm.ASweepKeepsToItsAccountsMaxSubmitJobs).
AccountingStorageEnforce=limits
JobAcctGatherType=jobacct_gather/linux
JobAcctGatherFrequency=task=1
TmpFS=$D/tmp/%n
MaxArraySize=10001
MaxJobCount=100000
MinJobAge=300
KillWait=2
# Slurm's default SlurmdTimeout (300 s): a slurmd starved on a loaded machine is never declared dead (a
# shorter one SIGKILLed a 16-node step at 90 s there). The node-failure test sets its dead node DOWN itself.
SlurmdTimeout=300
OverTimeLimit=0
InactiveLimit=0
Waittime=0
NodeName=n[1-$N] NodeHostname=$HOST NodeAddr=127.0.0.1 Port=[17001-$((17000 + N))] CPUs=$CPUS RealMemory=4000 Feature=vnode State=UNKNOWN
NodeName=g[1-2] NodeHostname=$HOST NodeAddr=127.0.0.1 Port=[16901-16902] CPUs=$HOST_CPUS Sockets=1 CoresPerSocket=$HOST_CPUS ThreadsPerCore=1 RealMemory=4000 Feature=vnode,gpu Gres=gpu:4 CpuBind=core State=UNKNOWN
PartitionName=debug Nodes=n[1-4] Default=YES MaxTime=INFINITE State=UP OverSubscribe=NO PreemptMode=OFF
PartitionName=gpu Nodes=g[1-2] MaxTime=INFINITE State=UP OverSubscribe=NO PreemptMode=OFF
CONF
)
  [ "$N" -gt 4 ] && conf+=$'\n'"PartitionName=scale Nodes=n[1-$N] MaxTime=INFINITE State=UP OverSubscribe=NO PreemptMode=OFF"
  [ "$N" -ge 10 ] && conf+=$'\n'"PartitionName=preemptible Nodes=n[9-10] MaxTime=INFINITE State=UP OverSubscribe=NO PriorityTier=1 PreemptMode=CANCEL"$'\n'"PartitionName=urgent Nodes=n[9-10] MaxTime=INFINITE State=UP OverSubscribe=NO PriorityTier=2"
  # A running cluster with another configuration (node count, timeouts) is restarted with this one.
  gres="AutoDetect=off
NodeName=g[1-2] Name=gpu File=$D/dev/gpu[0-3]"
  if [ "$(cat /etc/slurm/slurm.conf 2>/dev/null)" != "$conf" ] || [ "$(cat /etc/slurm/gres.conf 2>/dev/null)" != "$gres" ] ||
     [ ! -s /etc/slurm/slurm-unbound.conf ]; then
    alive "$D/run/slurmctld.pid" slurmctld && down
    printf '%s\n' "$conf" > /etc/slurm/slurm.conf
    # The n nodes' slurmds bind nothing (task/none): their declared cores are not this host's, and task/affinity
    # binds even a batch script to its allocated cores, which would put every virtual node's core 0 on CPU 0.
    # Only the gpu nodes, declared with this host's CPUs, bind (hence NO_CONF_HASH: two files, one cluster).
    printf '%s\n' "${conf/TaskPlugin=task\/affinity/TaskPlugin=task/none}" > /etc/slurm/slurm-unbound.conf
    printf '%s\n' "$gres" > /etc/slurm/gres.conf
  fi

  [ -s /etc/munge/munge.key ] || mungekey --create --force >/dev/null 2>&1
  chown munge:munge /etc/munge/munge.key; chmod 400 /etc/munge/munge.key
  mkdir -p /run/munge /var/log/munge /var/lib/munge
  chown munge:munge /run/munge /var/log/munge /var/lib/munge; chmod 755 /run/munge
  if ! munge -n 2>/dev/null | unmunge >/dev/null 2>&1; then
    runuser -u munge -- /usr/sbin/munged --num-threads=10  # 144-rank jobs authenticate many requests at once
    wait_until 10 timeout 5 sh -c 'munge -n | unmunge' || { echo "slurm-cluster: munged did not start" >&2; exit 1; }
  fi

  accounting_up

  alive "$D/run/slurmctld.pid" slurmctld || /usr/sbin/slurmctld -i
  # The slurmds start at once (they register when the controller answers): a controller left alone pings
  # nodes that do not exist yet and stops answering for as long as that takes (22 s for 160 nodes).
  for k in $(seq "$N"); do slurmd_alive "n$k" || /usr/sbin/slurmd -f /etc/slurm/slurm-unbound.conf -N "n$k"; done
  for k in 1 2; do slurmd_alive "g$k" || /usr/sbin/slurmd -N "g$k"; done
  wait_until 60 timeout 5 sh -c 'scontrol ping | grep -q UP' || { echo "slurm-cluster: slurmctld did not answer; see $D/log/slurmctld.log" >&2; exit 1; }
  wait_until 120 nodes_idle || { echo "slurm-cluster: nodes did not come up; see $D/log" >&2; sinfo -N >&2; exit 1; }
  echo "slurm-cluster: up, $N virtual nodes (sinfo: $(sinfo -h -o '%D %T' | tr '\n' ' '))"
}

case "$cmd" in
  up) up ;;
  down) down ;;
  status) timeout 10 scontrol ping && timeout 10 sinfo -N -o '%N %c %T %f' ;;
  *) echo "usage: $0 up|scale [N]|down|status" >&2; exit 2 ;;
esac
