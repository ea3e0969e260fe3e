#include "launchers/step_launcher.h"

namespace fanout {

std::vector<std::string> srun_prefix(const JobSpec& job, size_t s, bool pmix) {
  const StepSpec& step = job.steps[s];
  return {"srun",
          std::string("--mpi=") + (pmix ? "pmix" : "none"),
          "--nodes=" + std::to_string(step.nodes),
          "--ntasks=" + std::to_string(step.ranks()),
          "--ntasks-per-node=" + std::to_string(step.tasks_per_node),
          "--cpus-per-task=" + std::to_string(step.cpus_per_task),
          "--relative=" + std::to_string(job.step_nodes(s).front()),
          "--overlap",
          "--kill-on-bad-exit=1",
          "--job-name=" + step.role};
}

std::vector<std::string> mpirun_prefix(const JobSpec& job, size_t s, const std::string& hostfile) {
  const StepSpec& step = job.steps[s];
  return {"mpirun", "--allow-run-as-root", "-np", std::to_string(step.ranks()), "--map-by",
          "ppr:" + std::to_string(step.tasks_per_node) + ":node", "--hostfile", hostfile};
}

}  // namespace fanout
