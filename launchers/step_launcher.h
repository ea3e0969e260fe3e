// How the ranks of one step are started inside an allocation (ReFrame's "launcher"), independent of how the
// allocation was obtained (the Scheduler). Each returns the argv prefix that precedes fanout-rank's argv.
#pragma once
#include <string>
#include <vector>

#include "launchers/job_spec.h"

namespace fanout {

// srun: disjoint steps on their own nodes (--relative), colocated steps on the first step's nodes; steps
// overlap so they may share CPUs; a failing task ends the step (--kill-on-bad-exit).
std::vector<std::string> srun_prefix(const JobSpec& job, size_t step, bool pmix);
// mpirun (Open MPI): -np ranks, ranks per node, on the step's hosts from a host file.
std::vector<std::string> mpirun_prefix(const JobSpec& job, size_t step, const std::string& hostfile);

}  // namespace fanout
