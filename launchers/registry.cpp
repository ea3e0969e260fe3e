#include <unistd.h>

#include <cstdlib>

#include "common/error.h"
#include "common/text.h"
#include "launchers/local.h"
#include "launchers/pbs.h"
#include "launchers/scheduler.h"
#include "launchers/slurm.h"

namespace fanout {

namespace {

bool inside_slurm_allocation() { return std::getenv("SLURM_JOB_ID") != nullptr; }

std::unique_ptr<Scheduler> make_slurm() {
  if (inside_slurm_allocation()) return std::make_unique<SlurmAllocationScheduler>();
  return std::make_unique<SlurmScheduler>();
}

}  // namespace

std::unique_ptr<Scheduler> make_scheduler(const std::string& name) {
  if (name == "local") return std::make_unique<LocalScheduler>();
  if (name == "slurm") return make_slurm();
  if (name == "pbs") return std::make_unique<PbsScheduler>();
  if (name == "auto") {
    if (inside_slurm_allocation()) return make_slurm();
    if (slurm_configured()) {
      try {
        return std::make_unique<SlurmScheduler>();
      } catch (const UserError&) {
        // configured but not answering: try the others
      }
    }
    if (std::getenv("PBS_JOBID") || pbs_available()) return std::make_unique<PbsScheduler>();
    return std::make_unique<LocalScheduler>();
  }
  throw UserError("--launcher: unknown launcher '" + name + "' (known: " + join(scheduler_names(), ", ") + ")");
}

std::vector<std::string> scheduler_names() { return {"local", "slurm", "pbs", "auto"}; }

std::string render_job_script(const std::string& launcher, const JobSpec& job) {
  if (launcher == "slurm" || (launcher == "auto" && (inside_slurm_allocation() || slurm_configured())))
    return slurm_job_script(job);
  if (launcher == "pbs") return pbs_job_script(job, PbsFlavor::Pro);
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  return local_job_script(job, host);
}

}  // namespace fanout
