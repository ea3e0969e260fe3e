#include <unistd.h>

#include <cstdlib>

#include "common/error.h"
#include "common/subprocess.h"
#include "common/text.h"
#include "schedulers/allocation.h"
#include "schedulers/local.h"
#include "schedulers/pbs.h"
#include "schedulers/scheduler.h"
#include "schedulers/sge.h"
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

std::string sge_script(const JobSpec& job) { return sge_job_script(job); }

std::unique_ptr<Scheduler> make_sge() {
  if (inside_allocation()) return std::make_unique<AllocationScheduler>("sge", sge_script);
  return std::make_unique<SgeScheduler>();
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
    {"sge", make_sge, sge_script, [] { return enclosing_allocation().scheduler == "sge" || sge_available(); }},
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

std::vector<std::pair<std::string, std::string>> scheduler_tool_versions() {
  std::vector<std::pair<std::string, std::string>> out;
  for (auto& [key, argv] : std::vector<std::pair<std::string, std::vector<std::string>>>{
           {"slurm", {"sinfo", "--version"}}, {"pbs", {"qstat", "--version"}}, {"mpi", {"mpirun", "--version"}}}) {
    // Grid Engine's qstat answers --version with its usage (first line "SGE 8.1.9"): named as what it is.
    if (std::string ge; key == "pbs" && qstat_is_grid_engine(&ge)) {
      out.emplace_back("sge", printable(ge));
      continue;
    }
    auto r = run_process(argv, {}, 5);
    if (r.exit_code == 0 && !trim(r.out).empty()) out.emplace_back(key, printable(trim(r.out.substr(0, r.out.find('\n')))));
  }
  return out;
}

SchedulerTraits scheduler_traits(const std::string& scheduler) { return scheduler_traits_of(resolve_scheduler_name(scheduler)); }

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

std::string resolve_scheduler_name(const std::string& name) { return name == "auto" ? detected().front()->name : entry(name).name; }


std::string render_job_script(const std::string& scheduler, const JobSpec& job) {
  return entry(resolve_scheduler_name(scheduler)).render(job);
}

}  // namespace fanout
