// PBS (PBS Pro / OpenPBS, and Torque-compatible front ends): jobs are rendered as PBS scripts (#PBS -N,
// -l select=N:ncpus=M:mpiprocs=K, -l walltime, -q, -A, -l place, -j oe, -o) and submitted with qsub; all jobs
// are polled with ONE qstat per cycle naming our job ids (qstat -x -f -F json on PBS Pro, falling back to the
// text form when the server's JSON is invalid; qstat -f text elsewhere), cancelled with one qdel. Steps start
// with the step launcher chosen by --step_launcher (mpirun with per-step host files cut from $PBS_NODEFILE by
// default; srun where the PBS front end sits on Slurm). Jobs qstat no longer lists,
// or lists without an exit status, are resolved from the run folder's exit markers.
#pragma once
#include <map>

#include "schedulers/scheduler.h"

namespace fanout {

enum class PbsFlavor { Pro, Torque };  // Pro: select/place syntax, qstat -F json; Torque: nodes=N:ppn=K, text qstat

std::string pbs_job_script(const JobSpec& job, PbsFlavor flavor);
// UserError naming the flag when a value cannot go on a #PBS line as one word (-q, -A, -o): qsub would read the
// rest as options of its own.
void refuse_unsafe_directives(const JobSpec& job);

// One qstat listing, parsed: job id -> attributes (job_state, Exit_status, exec_host, comment, ...).
using QstatJobs = std::map<std::string, std::map<std::string, std::string>>;
QstatJobs parse_qstat_text(const std::string& text);  // "Job Id: X" blocks of "key = value" lines
QstatJobs parse_qstat_json(const std::string& text);  // PBS Pro's qstat -F json; throws UserError when malformed
// A job's status from its qstat attributes (final states need Exit_status or the run's exit markers). The
// server's own negative codes (JOB_EXEC_*) differ by flavor: walltime is -29 on OpenPBS, -11 on Torque (TIMEOUT);
// memory -26/-27 and -10 (OUT_OF_MEMORY); the rest FAILED (or NODE_FAIL) with the code's name. 256+N: signal N.
JobStatus pbs_status(const std::string& id, const std::map<std::string, std::string>& attrs, const JobSpec& job,
                     PbsFlavor flavor = PbsFlavor::Pro);

class PbsScheduler : public Scheduler {
 public:
  PbsScheduler();  // finds qsub/qstat/qdel on PATH and the flavor from `qstat --version`
  std::string name() const override { return "pbs"; }
  std::string render_script(const JobSpec& job) const override { return pbs_job_script(job, flavor_); }
  void check(const std::vector<JobSpec>& jobs) override;
  std::string submit(const JobSpec& job) override;
  // One array job per resource shape (#PBS -J on PBS Pro, -t on Torque); task i execs run i's job.sh.
  // Each run's id is "<array id>#<i>"; its end comes from its exit markers.
  // max_parallel is not passed on (PBS Pro's -J has no throttle).
  std::vector<Submitted> submit_array(const std::vector<JobSpec>& jobs, int max_parallel = 0) override;
  std::vector<JobStatus> poll(const std::vector<std::string>& job_ids) override;
  void cancel(const std::vector<std::string>& job_ids) override;
  void forget(const std::vector<std::string>& job_ids) override {
    for (auto& id : job_ids) tracked_.erase(id);
  }
  double max_poll_interval_s() const override { return 5.0; }
  int default_max_parallel() const override { return 1 << 30; }
  uint64_t queries() const override { return queries_; }
  PbsFlavor flavor() const { return flavor_; }
  bool adopts_jobs() const override { return true; }
  bool adopt(const std::string& job_id, const JobSpec& job) override {
    const auto hash = job_id.find('#');  // an array task: <array id>#<index>
    tracked_[job_id] = {job, 0, hash == std::string::npos ? "" : job_id.substr(0, hash)};
    return true;
  }

 private:
  struct Tracked {
    JobSpec job;
    int missing_polls = 0;
    std::string array_id;  // the array job this run is a task of, if any
  };
  std::string qsub(const std::vector<std::string>& args, const std::filesystem::path& cwd, const std::string& what);
  bool query(const std::vector<std::string>& job_ids, QstatJobs& listed);
  int array_count_ = 0;
  PbsFlavor flavor_ = PbsFlavor::Torque;
  std::map<std::string, Tracked> tracked_;
  uint64_t queries_ = 0;
};

bool pbs_available();  // qsub and qstat are on PATH, and qstat is not Grid Engine's

}  // namespace fanout
