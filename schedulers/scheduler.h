// How to get an allocation and run a job in it (local processes, Slurm, PBS). Separate from how the ranks
// of a step are started inside it (launcher argv: local, srun, mpirun): they meet only in JobSpec.
#pragma once
#include <cstdint>
#include <exception>
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
  // The state of the given jobs, from ONE query of the scheduler per call. A job whose state is as the last poll
  // found it (a task still queued in its job array's one record) may be left out: the driver's work per poll is
  // then what changed, not every job a 100,000-task array still queues.
  virtual std::vector<JobStatus> poll(const std::vector<std::string>& job_ids) = 0;
  virtual void cancel(const std::vector<std::string>& job_ids) = 0;
  // The driver has these jobs' final states and will not ask again: what was kept to answer for them goes (a
  // 100,000-run sweep held every ended job's status, or its whole JobSpec on a batch scheduler, to its end).
  virtual void forget(const std::vector<std::string>& job_ids) = 0;
  // Follows a job that an earlier driver submitted (fanout resume after the driver died) as if submitted
  // here, so that it is polled, not submitted again. False where jobs do not outlive their driver (local).
  virtual bool adopt(const std::string& job_id, const JobSpec& job) { return false; }
  // Whether adopt() can follow a job: only then does a run's folder keep its job id from its submission ([job]).
  virtual bool adopts_jobs() const { return false; }
  // Refuses, before anything is submitted, jobs that cannot run here (more nodes than the partition or
  // allocation has, a partition or node feature that does not exist). Throws UserError naming the run.
  virtual void check(const std::vector<JobSpec>& jobs) {}
  // Several jobs, each its own (the runs that may start now, in order): per job its id, or what its submit() threw,
  // or neither (not tried: a job before it was refused). By default one submit() after another, stopping at the first
  // refusal; a scheduler whose submissions wait on its controller overlaps them (Slurm).
  // `later`: not submitted now because the scheduler takes no more jobs at the moment (Slurm's controller holds its
  // MaxJobCount), `error` saying so: the driver offers it again as earlier jobs end, instead of failing the run.
  // `own_limit`: refused by a limit on the user's queued jobs (Slurm's MaxSubmitJobs and the like), `error` saying so:
  // the driver narrows how many it keeps submitted while some of its jobs are queued (they free the limit as they
  // end); with none of them queued the refusal is final.
  struct Submitted {
    std::string id;
    std::exception_ptr error;
    bool later = false;
    bool own_limit = false;
  };
  virtual std::vector<Submitted> submit_each(const std::vector<JobSpec>& jobs) {
    std::vector<Submitted> out(jobs.size());
    for (size_t i = 0; i < jobs.size(); ++i) {
      try {
        out[i].id = submit(jobs[i]);
      } catch (...) {
        out[i].error = std::current_exception();
        break;
      }
    }
    return out;
  }
  // Several jobs in as few requests as the scheduler can make (job arrays, one per resource shape), per job as
  // submit_each says. An array refused takes only its own jobs with it: the arrays submitted before it keep their ids
  // (a throw there once left them queued with no driver to follow them). max_parallel > 0 asks the scheduler to run
  // at most that many of each shape at once (Slurm's --array=0-N%M) where it can. By default, submit_each.
  virtual std::vector<Submitted> submit_array(const std::vector<JobSpec>& jobs, int max_parallel = 0) { return submit_each(jobs); }
  // How many of a sweep's jobs the scheduler takes submitted at once (the rest wait in the driver until earlier ones
  // end): Slurm, half its controller's MaxJobCount, which counts every array task and every user's jobs.
  virtual size_t max_submitted() const { return SIZE_MAX; }
  // How many jobs the driver keeps submitted at once unless told otherwise (a queueing scheduler: all).
  virtual int default_max_parallel() const { return 1; }
  // Scheduler queries made so far (poll cycles cost one each): for tests and benchmarks.
  virtual uint64_t queries() const { return 0; }
  // Seconds the driver may wait between polls when nothing changes (the poll rate decays toward this).
  virtual double max_poll_interval_s() const { return 1.0; }
  // Whether poll() attaches the scheduler's accounting of each ended job (JobStatus::usage): off with
  // --resources=off, where reading it (Slurm: one sacct per poll that saw jobs end) is work nobody asked for.
  void record_usage(bool on) { record_usage_ = on; }

 protected:
  bool record_usage_ = true;
};

// The registry of schedulers by short name: local, slurm, pbs, sge, auto (Slurm when fanout runs inside an
// allocation or a Slurm controller answers, else PBS when PBS_JOBID is set or a qstat that is not Grid Engine's is
// on PATH, else Grid Engine inside its job or when SGE_ROOT is set and its qstat answers, else local).
// An unknown name is a UserError listing the known ones.
std::unique_ptr<Scheduler> make_scheduler(const std::string& name);
// The allocation options (SchedulerOptions) a launcher turns into something real, by its name (so that a dry run,
// which contacts no scheduler, refuses the same); the driver refuses the others when they are given, rather than
// measure without them. Names as the flags: partition, account, constraint, exclusive, batch_args; and what steps
// ask: gpus_per_task, memory_mb, binding (other than none), exclusive_step.
std::vector<std::string> honoured_options(const std::string& scheduler);
// What the driver must know of a scheduler before it contacts one (a dry run contacts none), answered here per
// backend so that the driver names none.
struct SchedulerTraits {
  std::vector<std::string> honoured;   // honoured_options()
  bool hands_out_gpus = false;         // each task gets GPUs of its own (else each rank takes its share by local rank)
  bool one_host = false;               // every rank of a run starts on this host (its nodes are all this host)
  std::string default_step_launcher;   // how steps start inside its jobs unless --step_launcher says: "" = itself
  // The step launcher its jobs use given --step_launcher ("" = its default), and how a message says so.
  std::string step_launcher(const std::string& asked) const { return asked.empty() ? default_step_launcher : asked; }
  std::string starts_steps(const std::string& asked) const {
    return step_launcher(asked).empty() ? "itself" : "with " + step_launcher(asked);
  }
};
SchedulerTraits scheduler_traits(const std::string& scheduler);  // `auto` resolved as make_scheduler would
SchedulerTraits scheduler_traits_of(const std::string& name);   // a scheduler's own name (not `auto`): names.cpp
// The versions of every scheduler's and step launcher's client tools found on this host ("slurm" -> "slurm-wlm
// 22.05.8"), for a run's provenance.
std::vector<std::pair<std::string, std::string>> scheduler_tool_versions();
std::vector<std::string> scheduler_names();
// The scheduler runs go to unless --launcher says otherwise (processes on this host).
std::string default_scheduler_name();
// Whether the name is chosen on this host at run time (`auto`) rather than naming one scheduler.
bool scheduler_is_detected(const std::string& name);
// What a name means here: itself, or for `auto` the scheduler detected on this host (without contacting it).
std::string resolve_scheduler_name(const std::string& name);
// The job script a launcher would run, without contacting any scheduler (for --dry-run); `auto` resolves as
// make_scheduler resolves it.
std::string render_job_script(const std::string& scheduler, const JobSpec& job);
// The batch allocation this process runs inside, if any: the scheduler that made it and the job's id (from the
// environment that scheduler gives its jobs). Empty name outside one.
struct EnclosingAllocation {
  std::string scheduler, job_id;
};
EnclosingAllocation enclosing_allocation();

}  // namespace fanout
