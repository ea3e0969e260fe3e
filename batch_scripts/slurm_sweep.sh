#!/bin/bash
#SBATCH --job-name=fanout-sweep
#SBATCH --nodes=4
#SBATCH --ntasks-per-node=2
#SBATCH --time=00:10:00
#SBATCH --output=fanout-sweep-%j.out
# A fanout sweep inside one allocation (SmartSim-Scaling's run_db_as_batch=False): fanout sees SLURM_JOB_ID
# and starts every run's steps with srun in this allocation instead of submitting new jobs.
#   sbatch batch_scripts/slurm_sweep.sh            (FANOUT: the fanout executable, default: fanout on PATH)
# Knobs (environment): FANOUT, RESULTS_DIR (default ./results), EXP_NAME (default slurm-sweep).
set -euo pipefail
FANOUT=${FANOUT:-fanout}
"$FANOUT" calibration_sleep --launcher=slurm \
  --exp_name="${EXP_NAME:-slurm-sweep}" --results_dir="${RESULTS_DIR:-results}" \
  --nodes=[1,2,4] --ranks_per_node=[1,2] --sleep_us=1000 --iterations=50
