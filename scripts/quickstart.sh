#!/usr/bin/env bash
# README command 1: install what is needed, build, and run the default experiment end to end on this
# machine (local launcher, results in SQLite + CSV). Safe to re-run.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh run
FANOUT_BUILD_TESTS=OFF scripts/build.sh
echo
echo "== fanout quickstart: 6 runs of the calibration plugin (1 and 2 ranks x 500/1000/2000 us per iteration)"
build/fanout quickstart --results_dir=results
echo
echo "Per-run statistics (median of the measured 'sleep' metric should match sleep_us):"
sqlite3 -header -column results/quickstart/fanout.sqlite \
  "SELECT r.session, r.status, count(*) AS samples, round(avg(s.value),1) AS mean_us
     FROM samples s JOIN runs r ON r.id = s.run_id
    WHERE s.metric = 'sleep' AND s.warmup = 0 GROUP BY r.id ORDER BY r.id;"
