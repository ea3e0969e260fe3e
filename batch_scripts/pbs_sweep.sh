#!/bin/bash
#PBS -N fanout-sweep
#PBS -l select=4:ncpus=2:mpiprocs=2
#PBS -l walltime=00:10:00
#PBS -j oe
# A fanout sweep inside one PBS allocation: fanout sees PBS_JOBID and starts every run's steps in this job
# (mpirun with host files from $PBS_NODEFILE) instead of submitting new jobs. Lists are passed as lists
# (--nodes=[1,2,4]), so every permutation runs.   qsub batch_scripts/pbs_sweep.sh
# Knobs (environment): FANOUT (default: fanout on PATH; an installed copy names the installed driver), RESULTS_DIR (default ./results), EXP_NAME,
# STEP_LAUNCHER (mpirun; srun where the PBS front end runs on Slurm).
set -euo pipefail
cd "${PBS_O_WORKDIR:-.}"
FANOUT=${FANOUT:-fanout}
"$FANOUT" calibration_sleep --launcher=pbs --step_launcher="${STEP_LAUNCHER:-mpirun}" \
  --exp_name="${EXP_NAME:-pbs-sweep}" --results_dir="${RESULTS_DIR:-results}" \
  --nodes=[1,2,4] --ranks_per_node=[1,2] --sleep_us=1000 --iterations=50
