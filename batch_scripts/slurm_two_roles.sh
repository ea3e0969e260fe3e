#!/bin/bash
#SBATCH --job-name=fanout-two-roles
#SBATCH --nodes=4
#SBATCH --time=00:10:00
#SBATCH --output=fanout-two-roles-%j.out
# Two roles per run inside one allocation: a "server" step on its own nodes and a "client" step on the
# others (standard placement), from an experiment file. Submit with: sbatch batch_scripts/slurm_two_roles.sh
set -euo pipefail
FANOUT=${FANOUT:-fanout}
exp=$(mktemp --suffix=.toml)
cat > "$exp" <<TOML
[experiment]
name = "${EXP_NAME:-two-roles}"
plugin = "calibration"
launcher = "slurm"
results_dir = "${RESULTS_DIR:-results}"
[[steps]]
role = "sleep"
nodes = "{server_nodes}"
tasks_per_node = 1
[[steps]]
role = "copy"
nodes = "{client_nodes}"
tasks_per_node = 2
[parameters]
server_nodes = [1, 2]
client_nodes = [1, 2]
iterations = 20
TOML
"$FANOUT" run "$exp"
