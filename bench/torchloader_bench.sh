#!/usr/bin/env bash
# torchloader modes on one workload, in one invocation: 1 (even split: the workload's workers), 2 (WAA on
# arrivals), 3 (WAA on arrivals and completions). Profiles the TPM first, then runs the three modes on the same
# nodes, and prints aggregate throughput and makespan per mode with the ratio to mode 1 (the paper: +23.5 %
# throughput, +10 % makespan for WAA over the even split, on 2 GPU nodes with 48 cores each).
#   bench/torchloader_bench.sh [build dir] [extra fanout flags...]
# Defaults: the seed's 3 applications (2 nodes each), capped to 60 iterations of batch 64, loader cost 64, on the
# local launcher with 1 node agent (this machine is one node: 2 agents would share its cores); pass e.g. --launcher=slurm or --workload=FILE to change them.
set -euo pipefail
build=${1:-build}
shift || true
[ -x "$build/fanout" ] || { echo "torchloader_bench: $build/fanout not found (build first)" >&2; exit 2; }
out=$(mktemp -d /tmp/torchloader-bench-XXXXXX)
# Defaults, each replaced by the same flag given on the command line. Loader cost 64: one worker then feeds about
# what one process computes, so the worker allocation matters (at cost 4 the loader is 20x faster than compute).
common=(--results_dir="$out" --tpm="$out/tpm.json")
for default in --nodes=1 --max_iterations=60 --max_batch=64 --cost=64; do
  case " $* " in *" ${default%%=*}="*) ;; *) common+=("$default") ;; esac
done
common+=("$@")
# Profiling takes no --nodes (it runs each application alone).
profile=()
for a in "${common[@]}"; do case "$a" in --nodes=*) ;; *) profile+=("$a") ;; esac; done
"$build/fanout" torchloader_profile --exp_name=profile "${profile[@]}" >/dev/null
"$build/fanout" torchloader --exp_name=modes --mode=[1,2,3] "${common[@]}" | grep -E 'COMPLETED|FAILED' || true
echo
sqlite3 -header -column "$out/modes/fanout.sqlite" "
  WITH m AS (SELECT p.value AS mode,
                    max(CASE WHEN s.metric='aggregate_throughput' THEN s.value END) AS thr,
                    max(CASE WHEN s.metric='makespan' THEN s.value END) AS makespan,
                    max(CASE WHEN s.metric='pauses' THEN s.value END) AS pauses
               FROM samples s JOIN parameters p ON p.run_id = s.run_id AND p.name = 'mode' GROUP BY p.value)
  SELECT m.mode, printf('%.1f', m.thr) AS 'samples/s', printf('%.2fx', m.thr / b.thr) AS 'vs mode 1',
         printf('%.1f', m.makespan) AS 'makespan s', printf('%.2fx', b.makespan / m.makespan) AS 'speedup vs mode 1',
         CAST(m.pauses AS INT) AS pauses
    FROM m, (SELECT thr, makespan FROM m WHERE mode = '1') b ORDER BY m.mode;"
echo "(results in $out)"
