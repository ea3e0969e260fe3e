#include <unistd.h>

#include <cstdlib>

#include "common/error.h"
#include "common/text.h"
#include "launchers/allocation.h"
#include "launchers/local.h"
#include "launchers/pbs.h"
#include "launchers/scheduler.h"
#include "launchers/slurm.h"

namespace fanout {

namespace {

bool inside_slurm_allocation() { return std::getenv("SLURM_JOB_ID") != nullptr; }

std::string pbs_pro_script(const JobSpec& job) { return pbs_job_script(job, PbsFlavor::Pro); }

std::unique_ptr<Scheduler> make_slurm() {
  if (inside_slurm_allocation()) return std::make_unique<AllocationScheduler>("slurm", slurm_job_script);
  return std::make_unique<SlurmScheduler>();
}

// Inside any batch allocation (a PBS job, or a Slurm job behind a PBS front end) steps start in it directly.
std::unique_ptr<Scheduler> make_pbs() {
  if (inside_allocation()) return std::make_unique<AllocationScheduler>("pbs", pbs_pro_script);
  return std::make_unique<PbsScheduler>();
}

}  // namespace

std::unique_ptr<Scheduler> make_scheduler(const std::string& name) {
  if (name == "local") return std::make_unique<LocalScheduler>();
  if (name == "slurm") return make_slurm();
  if (name == "pbs") return make_pbs();
  if (name == "auto") {
    if (inside_slurm_allocation()) return make_slurm();
    if (slurm_configured()) {
      try {
        return std::make_unique<SlurmScheduler>();
      } catch (const UserError&) {
        // configured but not answering: try the others
      }
    }
    if (std::getenv("PBS_JOBID") || pbs_available()) return make_pbs();
    return std::make_unique<LocalScheduler>();
  }
  throw UserError("--launcher: unknown launcher '" + name + "' (known: " + join(scheduler_names(), ", ") + ")");
}

std::vector<std::string> scheduler_names() { return {"local", "slurm", "pbs", "auto"}; }

std::string render_job_script(const std::string& launcher, const JobSpec& job) {
  if (launcher == "slurm" || (launcher == "auto" && (inside_slurm_allocation() || slurm_configured())))
    return slurm_job_script(job);
  if (launcher == "pbs") return pbs_pro_script(job);
  char host[256] = {0};
  gethostname(host, sizeof host - 1);
  return local_job_script(job, host);
}

}  // namespace fanout
