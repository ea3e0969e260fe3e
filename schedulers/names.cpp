// What the driver may know of each scheduler by name alone, before any is contacted: the names, the default, the
// allocation a process runs inside, what each honours and its traits. Kept apart from the registry (which makes
// schedulers and so links every backend) so that code that only plans (the driver's settings, the fuzz targets)
// needs none. The registry's table has one row per name here (Schedulers.EveryNameHasABackend).
#include <cstdlib>

#include "schedulers/scheduler.h"

namespace fanout {

namespace {
const char* const kNames[] = {"slurm", "pbs", "local"};  // auto's order of preference
}

std::string default_scheduler_name() { return "local"; }
bool scheduler_is_detected(const std::string& name) { return name == "auto"; }

std::vector<std::string> scheduler_names() {
  std::vector<std::string> names(std::begin(kNames), std::end(kNames));
  names.push_back("auto");
  return names;
}

EnclosingAllocation enclosing_allocation() {
  if (const char* id = std::getenv("SLURM_JOB_ID"); id && *id) return {"slurm", id};
  if (const char* id = std::getenv("PBS_JOBID"); id && *id) return {"pbs", id};
  return {};
}

std::vector<std::string> honoured_options(const std::string& launcher) {
  // Step resources: srun asks each; PBS asks the job's per-node sum (the rank takes its share of the GPUs), but
  // mpirun's steps share the job's CPUs; local processes get their share of this host's GPUs and nothing else.
  if (launcher == "slurm")
    return {"partition", "account", "constraint", "exclusive", "batch_args", "gpus_per_task", "memory_mb", "binding", "exclusive_step", "mpi_program"};
  // -q, -A, place=excl; memory only where a job is submitted (inside an allocation mpirun enforces none)
  const bool inside = !enclosing_allocation().scheduler.empty();
  if (launcher == "pbs" && inside) return {"partition", "account", "exclusive", "gpus_per_task", "binding", "mpi_program"};
  if (launcher == "pbs") return {"partition", "account", "exclusive", "gpus_per_task", "memory_mb", "binding", "mpi_program"};
  return {"gpus_per_task"};
}

SchedulerTraits scheduler_traits_of(const std::string& name) {
  SchedulerTraits t;
  t.honoured = honoured_options(name);
  t.hands_out_gpus = name == "slurm";  // srun gives each task GPUs of its own
  t.one_host = name == "local";
  t.default_step_launcher = name == "slurm" ? "srun" : name == "pbs" ? "mpirun" : "";
  return t;
}

}  // namespace fanout
