// How to get an allocation and run a job in it (local processes, Slurm, PBS). Separate from how the ranks
// of a step are started inside it (launcher argv: local, srun, mpirun): they meet only in JobSpec.
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "launchers/job_spec.h"

namespace fanout {

class Scheduler {
 public:
  virtual ~Scheduler() = default;
  virtual std::string name() const = 0;
  // The job script this scheduler would run for the job (printed by --dry-run, kept in the run directory).
  virtual std::string render_script(const JobSpec& job) const = 0;
  // Starts (or queues) the job; returns its id. Throws UserError with the reason when it cannot.
  virtual std::string submit(const JobSpec& job) = 0;
  // The state of every given job, from ONE query of the scheduler per call.
  virtual std::vector<JobStatus> poll(const std::vector<std::string>& job_ids) = 0;
  virtual void cancel(const std::vector<std::string>& job_ids) = 0;
  // Seconds the driver may wait between polls when nothing changes (the poll rate decays toward this).
  virtual double max_poll_interval_s() const { return 1.0; }
};

// The registry of schedulers by short name ("local"); an unknown name is a UserError listing the known ones.
std::unique_ptr<Scheduler> make_scheduler(const std::string& name);
std::vector<std::string> scheduler_names();

}  // namespace fanout
