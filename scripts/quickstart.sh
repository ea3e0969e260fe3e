#!/usr/bin/env bash
# README command 1: install what is needed, build, and run the default experiment end to end on this machine:
# a SmartSim-Scaling-style throughput sweep on the local launcher, against a Redis that fanout starts itself
# (one server, then a 3-shard Redis Cluster), results in SQLite + CSV, then plots and an HTML report.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh run
FANOUT_BUILD_TESTS=OFF scripts/build.sh
echo
echo "== fanout quickstart: throughput_standard, 1 or 3 database shards x 2 tensor sizes, 2 clients"
build/fanout throughput_standard --exp_name=quickstart --results_dir=results \
  --db_nodes=[1,3] --db_cpus=1 --client_nodes=1 --clients_per_node=2 \
  --tensor_bytes=[1024,1048576] --iterations=100 --net_ifname=lo
echo
build/fanout process_scaling_results --scaling_dir=results/quickstart | grep -E 'report.html|csv/runs.csv'
echo
echo "Mean put_tensor / unpack_tensor per run (seconds, warmup excluded; medians and percentiles: results/quickstart/csv/statistics.csv):"
sqlite3 -header -column results/quickstart/fanout.sqlite \
  "SELECT r.session, s.metric, count(*) AS samples, printf('%.6f', avg(s.value)) AS mean_s
     FROM samples s JOIN runs r ON r.id = s.run_id
    WHERE s.metric IN ('put_tensor', 'unpack_tensor') AND s.warmup = 0 GROUP BY r.id, s.metric ORDER BY r.id;"
