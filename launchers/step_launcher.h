// How the ranks of one step are started inside an allocation (ReFrame's "launcher"), independent of how the
// allocation was obtained (the Scheduler): one row per launcher, found by name. Each gives the argv prefix that
// precedes fanout-rank's argv in the job script.
#pragma once
#include <string>
#include <vector>

#include "launchers/job_spec.h"

namespace fanout {

struct StepLauncher {
  const char* name;
  std::vector<std::string> (*prefix)(const JobSpec& job, size_t step);
};

// srun: disjoint steps on their own nodes (--relative), colocated steps on the first step's nodes; steps
// overlap so they may share CPUs, except a step that asks GPUs (its own GPUs) and, when a step asks CPUs of its own
// (exclusive), every step (an overlapping step shares everything); a failing task ends the step
// (--kill-on-bad-exit); --mpi=pmix when fanout-rank has PMIx. mpirun: -np ranks, ranks per node, on the hosts of
// mpirun_hostfile(role), which the scheduler writes before the steps start, in the words of the job's --mpi
// (Open MPI's mpirun, MPICH's Hydra mpiexec, Cray PALS's mpiexec).
const StepLauncher& srun_launcher();
const StepLauncher& mpirun_launcher();
// By name ("srun", "mpirun"); nullptr when there is none of that name.
const StepLauncher* find_step_launcher(const std::string& name);
std::vector<std::string> step_launcher_names();
// The host file a scheduler writes for mpirun's step `role`.
std::string mpirun_hostfile(const std::string& role);

}  // namespace fanout
