// fanout running inside a batch allocation (SLURM_JOB_ID, PBS_JOBID, or Grid Engine's JOB_ID set): each run's job script runs here
// as a local process, so its steps (srun / mpirun) land in the current allocation instead of new jobs
// (SmartSim-Scaling's run_db_as_batch=False). The script is the scheduler's own rendering.
#pragma once
#include <functional>

#include "schedulers/local.h"

namespace fanout {

class AllocationScheduler : public LocalScheduler {
 public:
  using Renderer = std::function<std::string(const JobSpec&)>;
  AllocationScheduler(std::string name, Renderer render) : name_(std::move(name)), render_(std::move(render)) {}
  std::string name() const override { return name_; }
  std::string render_script(const JobSpec& job) const override { return render_(job); }
  // Refuses runs needing more nodes than the allocation has (SLURM_JOB_NUM_NODES, or the hosts of $PBS_NODEFILE or $PE_HOSTFILE).
  void check(const std::vector<JobSpec>& jobs) override;

 protected:
  std::vector<Process> processes(const JobSpec& job, const EnvList& kv_env) const override;
  void finish_status(const JobSpec& job, JobStatus& status) const override;

 private:
  std::string name_;
  Renderer render_;
};

bool inside_allocation();  // enclosing_allocation() names a scheduler

}  // namespace fanout
