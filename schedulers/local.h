// The local scheduler: runs each job's ranks as processes on this host (one process group per job), serves
// their rendezvous, enforces the wall time, and reports per-rank exit codes and signals.
#pragma once
#include <map>
#include <memory>
#include <optional>

#include "common/new_processes.h"
#include "rendezvous/kv_service.h"
#include "schedulers/scheduler.h"

namespace fanout {

// The script equivalent of what the local launcher starts for a job (for --dry-run and the run folder).
std::string local_job_script(const JobSpec& job, const std::string& node_name);

class LocalScheduler : public Scheduler {
 public:
  explicit LocalScheduler(double kill_grace_s = 5.0);
  ~LocalScheduler() override;
  std::string name() const override { return "local"; }
  std::string render_script(const JobSpec& job) const override;
  std::string submit(const JobSpec& job) override;
  std::vector<JobStatus> poll(const std::vector<std::string>& job_ids) override;
  void cancel(const std::vector<std::string>& job_ids) override;
  void forget(const std::vector<std::string>& job_ids) override {
    for (auto& id : job_ids) ended_.erase(id);
  }
  double max_poll_interval_s() const override { return 0.2; }
  // Refuses steps asking more GPUs per node than this host shows (each rank takes its share: rank/main.cpp).
  void check(const std::vector<JobSpec>& jobs) override;

 protected:
  // One process the job consists of: a rank (local launcher), or a job script (inside an allocation).
  struct Process {
    size_t step = 0;
    int rank = 0;
    std::vector<std::string> argv;
    EnvList env;
    std::filesystem::path out, err;
  };
  // The processes to start for a job; kv_env holds FANOUT_KV / FANOUT_KV_TOKEN for the job.
  virtual std::vector<Process> processes(const JobSpec& job, const EnvList& kv_env) const;
  // Lets a variant restate the final status (e.g. per-step exits from the job script's markers).
  virtual void finish_status(const JobSpec& job, JobStatus& status) const {}
  std::string host_;

 private:
  std::string id_prefix_;  // "local-<driver pid>-": a job id is this and a count
  struct LocalJob;
  void reap();
  void advance(LocalJob& job, int64_t now);
  void signal_job(LocalJob& job, int sig);
  // The processes' mark of this poll cycle, taken when first asked and dropped when the next poll begins: each job
  // started before the next poll holds it as its start (an earlier mark only widens what its end looks at), and each
  // job that ends in it as the moment its ranks were all reaped. Reading /proc/stat, which grows with the host's
  // CPUs and interrupts, once a cycle instead of at every job's start and end.
  const ProcessMark& cycle_mark();
  std::optional<ProcessMark> cycle_mark_;
  double kill_grace_s_;
  KvService kv_;
  int next_id_ = 1;
  std::map<std::string, std::unique_ptr<LocalJob>> jobs_;
  std::map<std::string, JobStatus> ended_;  // jobs that ended and were reported, by id
  std::map<pid_t, LocalJob*> by_pid_;
  // Ranks reaped lately: pid -> the forks count of their job's start mark. A job's end need not read the environ of
  // a pid that was a rank started within its window, gone now (ring_held_between: no other process had that pid
  // since); in a sweep two of the three pids a job's window holds are such ranks, each a failed open (2.4 % of the
  // driver's CPU a run). Kept while a running job's window may hold them, at most kMaxReaped.
  std::map<pid_t, uint64_t> reaped_;
  void forget_reaped_before_running_jobs();
};

}  // namespace fanout
