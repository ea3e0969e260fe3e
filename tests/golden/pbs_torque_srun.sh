#!/bin/bash
#PBS -N infer-sess-N2-abc123
#PBS -l nodes=4:ppn=4
#PBS -l walltime=01:30:00
#PBS -q workq
#PBS -A proj42
#PBS -j oe
#PBS -o /scratch/results/exp/run-1/infer-sess-N2-abc123/pbs.out
# fanout job infer-sess-N2-abc123
set -u
cd '/scratch/results/exp/run-1/infer-sess-N2-abc123' || exit 1
rm -f job.exit steps.exit kv.addr
export FANOUT_JOB_RANKS=10
# rendezvous service for the 10 ranks of all steps
'/opt/fanout/bin/fanout-rank' --kv-server --ranks 10 --address-file kv.addr >kv.log 2>&1 &
kv_pid=$!
for _ in $(seq 300); do [ -s kv.addr ] && break; kill -0 $kv_pid 2>/dev/null || break; sleep 0.1; done
if [ ! -s kv.addr ]; then echo 'fanout: the rendezvous service did not start; see kv.log' >&2; echo 1 > job.exit; exit 1; fi
read -r FANOUT_KV FANOUT_KV_TOKEN < kv.addr
export FANOUT_KV FANOUT_KV_TOKEN
declare -A role
'srun' '--mpi=pmix' '--nodes=2' '--ntasks=2' '--ntasks-per-node=1' '--cpus-per-task=1' '--relative=0' '--overlap' '--kill-on-bad-exit=1' '--job-name=db' '/opt/fanout/bin/fanout-rank' '--plugin' '/opt/fanout/lib/fanout/plugins/fanout_calibration.so' '--role' 'db' '--run-dir' '/scratch/results/exp/run-1/infer-sess-N2-abc123' >>'db.out' 2>>'db.err' &
role[$!]='db'
'srun' '--mpi=pmix' '--nodes=2' '--ntasks=8' '--ntasks-per-node=4' '--cpus-per-task=1' '--relative=2' '--overlap' '--kill-on-bad-exit=1' '--job-name=client' '/opt/fanout/bin/fanout-rank' '--plugin' '/opt/fanout/lib/fanout/plugins/fanout_calibration.so' '--role' 'client' '--run-dir' '/scratch/results/exp/run-1/infer-sess-N2-abc123' >>'client.out' 2>>'client.err' &
role[$!]='client'
rc=0
# which step ended: the background jobs no longer running (bash 4.2+; wait -n -p needs 5.1), reaped by pid
while [ ${#role[@]} -gt 0 ]; do
  jobs -rp > .running
  done_pid=
  for p in "${!role[@]}"; do grep -qx "$p" .running || { done_pid=$p; break; }; done
  if [ -z "$done_pid" ]; then sleep 0.2; continue; fi
  wait "$done_pid"; st=$?
  echo "${role[$done_pid]} $st" >> steps.exit
  unset "role[$done_pid]"
  # the first failing step ends the job: its peers would only wait for it
  if [ $st -ne 0 ] && [ $rc -eq 0 ]; then rc=$st; [ ${#role[@]} -gt 0 ] && kill "${!role[@]}" 2>/dev/null; fi
done
kill $kv_pid 2>/dev/null
echo $rc > job.exit
exit $rc
