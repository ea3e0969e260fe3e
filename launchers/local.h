// The local scheduler: runs each job's ranks as processes on this host (one process group per job), serves
// their rendezvous, enforces the wall time, and reports per-rank exit codes and signals.
#pragma once
#include <map>
#include <memory>

#include "launchers/kv_service.h"
#include "launchers/scheduler.h"

namespace fanout {

class LocalScheduler : public Scheduler {
 public:
  explicit LocalScheduler(double kill_grace_s = 5.0);
  ~LocalScheduler() override;
  std::string name() const override { return "local"; }
  std::string render_script(const JobSpec& job) const override;
  std::string submit(const JobSpec& job) override;
  std::vector<JobStatus> poll(const std::vector<std::string>& job_ids) override;
  void cancel(const std::vector<std::string>& job_ids) override;
  double max_poll_interval_s() const override { return 0.2; }

 private:
  struct LocalJob;
  void reap();
  void advance(LocalJob& job, int64_t now);
  void signal_job(LocalJob& job, int sig);
  double kill_grace_s_;
  KvService kv_;
  std::string host_;
  int next_id_ = 1;
  std::map<std::string, std::unique_ptr<LocalJob>> jobs_;
  std::map<pid_t, LocalJob*> by_pid_;
};

}  // namespace fanout
