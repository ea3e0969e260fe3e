#include "launchers/step_launcher.h"

#include "rendezvous/pmix.h"

namespace fanout {

namespace {

std::vector<std::string> srun_prefix(const JobSpec& job, size_t s) {
  const StepSpec& step = job.steps[s];
  return {"srun",
          std::string("--mpi=") + (pmix_compiled_in() ? "pmix" : "none"),
          "--nodes=" + std::to_string(step.nodes),
          "--ntasks=" + std::to_string(step.ranks()),
          "--ntasks-per-node=" + std::to_string(step.tasks_per_node),
          "--cpus-per-task=" + std::to_string(step.cpus_per_task),
          "--relative=" + std::to_string(job.step_nodes(s).front()),
          "--overlap",
          "--kill-on-bad-exit=1",
          "--job-name=" + step.role};
}

std::vector<std::string> mpirun_prefix(const JobSpec& job, size_t s) {
  const StepSpec& step = job.steps[s];
  return {"mpirun", "--allow-run-as-root", "-np", std::to_string(step.ranks()), "--map-by",
          "ppr:" + std::to_string(step.tasks_per_node) + ":node", "--hostfile", mpirun_hostfile(step.role)};
}

const StepLauncher kLaunchers[] = {{"srun", srun_prefix}, {"mpirun", mpirun_prefix}};

}  // namespace

const StepLauncher& srun_launcher() { return kLaunchers[0]; }
const StepLauncher& mpirun_launcher() { return kLaunchers[1]; }

const StepLauncher* find_step_launcher(const std::string& name) {
  for (auto& l : kLaunchers)
    if (name == l.name) return &l;
  return nullptr;
}

std::vector<std::string> step_launcher_names() {
  std::vector<std::string> names;
  for (auto& l : kLaunchers) names.push_back(l.name);
  return names;
}

std::string mpirun_hostfile(const std::string& role) { return "hosts." + role; }

}  // namespace fanout
