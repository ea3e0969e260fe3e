#include <unistd.h>

#include <cstdlib>

#include "common/error.h"
#include "common/subprocess.h"
#include "common/text.h"
#include "schedulers/allocation.h"
#include "schedulers/local.h"
#include "schedulers/pbs.h"
#include "schedulers/scheduler.h"
#include "schedulers/slurm.h"

namespace fanout {

namespace {

bool inside_slurm_allocation() { return enclosing_allocation().scheduler == "slurm"; }

std::string pbs_pro_script(const JobSpec& job) { return pbs_job_script(job, PbsFlavor::Pro); }

std::string local_script(const JobSpec& job) {
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  return local_job_script(job, host);
}

std::unique_ptr<Scheduler> make_slurm() {
  if (inside_slurm_allocation()) return std::make_unique<AllocationScheduler>("slurm", slurm_job_script);
  return std::make_unique<SlurmScheduler>();
}

// Inside any batch allocation (a PBS job, or a Slurm job behind a PBS front end) steps start in it directly.
std::unique_ptr<Scheduler> make_pbs() {
  if (inside_allocation()) return std::make_unique<AllocationScheduler>("pbs", pbs_pro_script);
  return std::make_unique<PbsScheduler>();
}

std::unique_ptr<Scheduler> make_local() { return std::make_unique<LocalScheduler>(); }

// One row per scheduler: how to make it, the job script it would run (for --dry-run, without contacting
// anything), and whether it is the one `auto` means on this host. `auto` takes the first row that detects.
struct SchedulerEntry {
  const char* name;
  std::unique_ptr<Scheduler> (*make)();
  std::string (*render)(const JobSpec&);
  bool (*detect)();
};
const SchedulerEntry kSchedulers[] = {
    {"slurm", make_slurm, slurm_job_script, [] { return inside_slurm_allocation() || slurm_configured(); }},
    {"pbs", make_pbs, pbs_pro_script, [] { return std::getenv("PBS_JOBID") != nullptr || pbs_available(); }},
    {"local", make_local, local_script, [] { return true; }},
};

const SchedulerEntry& entry(const std::string& name) {
  for (auto& e : kSchedulers)
    if (name == e.name) return e;
  throw UserError("--launcher: unknown launcher '" + name + "' (known: " + join(scheduler_names(), ", ") + ")");
}

// The schedulers `auto` may mean here, in order of preference.
std::vector<const SchedulerEntry*> detected() {
  std::vector<const SchedulerEntry*> out;
  for (auto& e : kSchedulers)
    if (e.detect()) out.push_back(&e);
  return out;
}

}  // namespace

SchedulerTraits scheduler_traits(const std::string& launcher) {
  const std::string name = resolve_scheduler_name(launcher);
  SchedulerTraits t;
  t.honoured = honoured_options(name);
  t.hands_out_gpus = name == "slurm";  // srun gives each task GPUs of its own
  t.one_host = name == "local";
  t.default_step_launcher = name == "slurm" ? "srun" : name == "pbs" ? "mpirun" : "";
  return t;
}

std::vector<std::pair<std::string, std::string>> scheduler_tool_versions() {
  std::vector<std::pair<std::string, std::string>> out;
  for (auto& [key, argv] : std::vector<std::pair<std::string, std::vector<std::string>>>{
           {"slurm", {"sinfo", "--version"}}, {"pbs", {"qstat", "--version"}}, {"mpi", {"mpirun", "--version"}}}) {
    auto r = run_process(argv, {}, 5);
    if (r.exit_code == 0 && !trim(r.out).empty()) out.emplace_back(key, printable(trim(r.out.substr(0, r.out.find('\n')))));
  }
  return out;
}

std::vector<std::string> honoured_options(const std::string& launcher) {
  // Step resources: srun asks each; PBS asks the job's per-node sum (the rank takes its share of the GPUs), but
  // mpirun's steps share the job's CPUs; local processes get their share of this host's GPUs and nothing else.
  if (launcher == "slurm")
    return {"partition", "account", "constraint", "exclusive", "batch_args", "gpus_per_task", "memory_mb", "binding", "exclusive_step"};
  // -q, -A, place=excl; memory only where a job is submitted (inside an allocation mpirun enforces none)
  if (launcher == "pbs" && inside_allocation()) return {"partition", "account", "exclusive", "gpus_per_task", "binding"};
  if (launcher == "pbs") return {"partition", "account", "exclusive", "gpus_per_task", "memory_mb", "binding"};
  return {"gpus_per_task"};
}

std::unique_ptr<Scheduler> make_scheduler(const std::string& name) {
  if (name != "auto") return entry(name).make();
  const auto candidates = detected();
  for (size_t i = 0; i + 1 < candidates.size(); ++i) {
    try {
      return candidates[i]->make();
    } catch (const UserError&) {
      // configured but not answering (a Slurm controller that is down): try the next one
    }
  }
  return candidates.back()->make();  // local always detects
}

std::string default_scheduler_name() { return "local"; }
bool scheduler_is_detected(const std::string& name) { return name == "auto"; }

std::vector<std::string> scheduler_names() {
  std::vector<std::string> names;
  for (auto& e : kSchedulers) names.push_back(e.name);
  names.push_back("auto");
  return names;
}

std::string resolve_scheduler_name(const std::string& name) { return name == "auto" ? detected().front()->name : entry(name).name; }

EnclosingAllocation enclosing_allocation() {
  if (const char* id = std::getenv("SLURM_JOB_ID"); id && *id) return {"slurm", id};
  if (const char* id = std::getenv("PBS_JOBID"); id && *id) return {"pbs", id};
  return {};
}


std::string render_job_script(const std::string& launcher, const JobSpec& job) {
  return entry(resolve_scheduler_name(launcher)).render(job);
}

}  // namespace fanout
