// What the driver may know of each scheduler by name alone, before any is contacted: the names, the default, the
// allocation a process runs inside, what each honours and its traits. Kept apart from the registry (which makes
// schedulers and so links every backend) so that code that only plans (the driver's settings, the fuzz targets)
// needs none. The registry's table has one row per name here (Schedulers.EveryNameHasABackend).
#include <cstdlib>

#include "schedulers/scheduler.h"

namespace fanout {

namespace {

// One row per scheduler, in auto's order of preference: what it honours (options and step requests, by the
// flags' names) outside and inside an enclosing allocation, and its traits. A scheduler's every difference the
// driver must know before contacting it is a column here, never a branch on its name elsewhere.
struct SchedulerRow {
  const char* name;
  std::vector<std::string> honoured;         // where fanout submits jobs itself
  std::vector<std::string> honoured_inside;  // inside an allocation, where steps start in the enclosing job
  bool hands_out_gpus, one_host;
  const char* default_step_launcher;
};

const std::vector<SchedulerRow>& rows() {
  // Step resources: srun asks each; PBS asks the job's per-node sum (the rank takes its share of the GPUs), but
  // mpirun's steps share the job's CPUs, and memory only where a job is submitted (inside an allocation mpirun
  // enforces none); local processes get their share of this host's GPUs and nothing else.
  static const std::vector<SchedulerRow> r = {
      {"slurm",
       {"partition", "account", "constraint", "exclusive", "batch_args", "gpus_per_task", "memory_mb", "binding", "exclusive_step", "mpi_program"},
       {"partition", "account", "constraint", "exclusive", "batch_args", "gpus_per_task", "memory_mb", "binding", "exclusive_step", "mpi_program"},
       true, false, "srun"},
      {"pbs",
       {"partition", "account", "exclusive", "gpus_per_task", "memory_mb", "binding", "mpi_program"},
       {"partition", "account", "exclusive", "gpus_per_task", "binding", "mpi_program"},
       false, false, "mpirun"},
      // Grid Engine: the queue (-q), project (-P), the parallel environment (batch_args pe=NAME); mpirun binds.
      // No GPUs, memory or exclusive nodes: each is a site-defined complex (-l gpu=, h_vmem=, exclusive=) with no
      // common name, so they are refused rather than guessed.
      {"sge", {"partition", "account", "batch_args", "binding", "mpi_program"}, {"partition", "account", "binding", "mpi_program"}, false, false, "mpirun"},
      {"local", {"gpus_per_task"}, {"gpus_per_task"}, false, true, ""},
  };
  return r;
}

// The row of a name; a name of no row (a misspelling the registry refuses later) honours nothing a step asks
// but its share of GPUs, and has no traits.
const SchedulerRow& row_of(const std::string& name) {
  static const SchedulerRow unknown{"", {"gpus_per_task"}, {"gpus_per_task"}, false, false, ""};
  for (const auto& r : rows())
    if (name == r.name) return r;
  return unknown;
}

}  // namespace

std::string default_scheduler_name() { return "local"; }
bool scheduler_is_detected(const std::string& name) { return name == "auto"; }

std::vector<std::string> scheduler_names() {
  std::vector<std::string> names;
  for (const auto& r : rows()) names.push_back(r.name);
  names.push_back("auto");
  return names;
}

EnclosingAllocation enclosing_allocation() {
  if (const char* id = std::getenv("SLURM_JOB_ID"); id && *id) return {"slurm", id};
  if (const char* id = std::getenv("PBS_JOBID"); id && *id) return {"pbs", id};
  // Grid Engine gives every job JOB_ID (a common name) and SGE_TASK_ID ("undefined" outside an array): both.
  if (const char* id = std::getenv("JOB_ID"); id && *id && std::getenv("SGE_TASK_ID")) return {"sge", id};
  return {};
}

std::vector<std::string> honoured_options(const std::string& scheduler) {
  const SchedulerRow& r = row_of(scheduler);
  return enclosing_allocation().scheduler.empty() ? r.honoured : r.honoured_inside;
}

SchedulerTraits scheduler_traits_of(const std::string& name) {
  const SchedulerRow& r = row_of(name);
  SchedulerTraits t;
  t.honoured = honoured_options(name);
  t.hands_out_gpus = r.hands_out_gpus;  // srun gives each task GPUs of its own
  t.one_host = r.one_host;
  t.default_step_launcher = r.default_step_launcher;
  return t;
}

}  // namespace fanout
