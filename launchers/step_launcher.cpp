#include "launchers/step_launcher.h"

#include <algorithm>

#include "rendezvous/pmix.h"

namespace fanout {

namespace {

// The CPU list of a "map:<cpu>,..." binding ("" for cores, none or no binding).
std::string mapped_cpus(const std::string& binding) { return binding.rfind("map:", 0) == 0 ? binding.substr(4) : ""; }

// Whether srun may let step s share its resources with the job's other steps (--overlap): not when it asks GPUs
// (overlapping steps may be handed the same ones), nor when any step asks CPUs of its own (Slurm lets an
// overlapping step share even a non-overlapping one's CPUs). The job asks the steps' sum, so they fit side by side.
bool overlaps(const JobSpec& job, size_t s) {
  if (job.steps[s].gpus_per_task > 0) return false;
  return std::none_of(job.steps.begin(), job.steps.end(), [](const StepSpec& st) { return st.exclusive; });
}

std::vector<std::string> srun_prefix(const JobSpec& job, size_t s) {
  const StepSpec& step = job.steps[s];
  std::vector<std::string> argv = {"srun",
                                   // an MPI program needs the PMIx server whether or not fanout-rank was built with PMIx
                                   std::string("--mpi=") + (pmix_compiled_in() || step.mpi_program ? "pmix" : "none"),
                                   "--nodes=" + std::to_string(step.nodes),
                                   "--ntasks=" + std::to_string(step.ranks()),
                                   "--ntasks-per-node=" + std::to_string(step.tasks_per_node),
                                   "--cpus-per-task=" + std::to_string(step.cpus_per_task),
                                   "--relative=" + std::to_string(job.step_nodes(s).front()),
                                   overlaps(job, s) ? "--overlap" : "--exclusive",
                                   "--kill-on-bad-exit=1",
                                   "--job-name=" + step.role};
  if (step.gpus_per_task > 0) argv.push_back("--gpus-per-task=" + std::to_string(step.gpus_per_task));
  // A job asks one GPU count for all its nodes: a step that asks none must not inherit the job's (CUDA_VISIBLE_DEVICES).
  else if (job.busiest_node().gpus > 0) argv.push_back("--gres=none");
  if (step.memory_mb > 0) argv.push_back("--mem=" + std::to_string(step.memory_mb));
  if (!step.binding.empty()) argv.push_back("--cpu-bind=" + (mapped_cpus(step.binding).empty() ? step.binding : "map_cpu:" + mapped_cpus(step.binding)));
  return argv;
}

// mpirun by MPI flavour: Open MPI's, MPICH's Hydra mpiexec, Cray PALS's mpiexec. Each places tasks_per_node ranks
// per host of the step's host file and binds as the step says (left to the MPI's default when it says nothing).
std::vector<std::string> mpirun_prefix(const JobSpec& job, size_t s) {
  const StepSpec& step = job.steps[s];
  const std::string n = std::to_string(step.ranks()), ppn = std::to_string(step.tasks_per_node), hosts = mpirun_hostfile(step.role);
  const std::string& b = step.binding;
  const std::string cpus = mapped_cpus(b);
  std::vector<std::string> argv;
  if (job.options.mpi == "mpich") {
    argv = {"mpiexec", "-n", n, "-ppn", ppn, "-f", hosts};
    if (b == "cores") argv.insert(argv.end(), {"-bind-to", "core:" + std::to_string(step.cpus_per_task)});
    if (b == "none") argv.insert(argv.end(), {"-bind-to", "none"});
    if (!cpus.empty()) argv.insert(argv.end(), {"-bind-to", "user:" + cpus});
  } else if (job.options.mpi == "pals") {
    argv = {"mpiexec", "-n", n, "--ppn", ppn, "--hostfile", hosts};
    if (b == "cores") argv.insert(argv.end(), {"--cpu-bind", "depth", "--depth", std::to_string(step.cpus_per_task)});
    if (b == "none") argv.insert(argv.end(), {"--cpu-bind", "none"});
    if (!cpus.empty()) argv.insert(argv.end(), {"--cpu-bind", "list:" + [&] { std::string l = cpus; for (char& c : l) if (c == ',') c = ':'; return l; }()});
  } else {
    argv = {"mpirun", "--allow-run-as-root", "-np", n, "--map-by", "ppr:" + ppn + ":node" + (step.cpus_per_task > 1 ? ":pe=" + std::to_string(step.cpus_per_task) : ""),
            "--hostfile", hosts};
    if (b == "cores") argv.insert(argv.end(), {"--bind-to", "core"});
    if (b == "none") argv.insert(argv.end(), {"--bind-to", "none"});
    if (!cpus.empty()) argv.insert(argv.end(), {"--cpu-set", cpus, "--bind-to", "cpu-list:ordered"});
  }
  return argv;
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
