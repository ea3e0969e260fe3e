// Grid Engine (Son of Grid Engine 8.1.9 as Debian packages it, and its Sun/Oracle/Univa heirs): jobs are
// rendered as scripts with #$ directives (-N, -S, -wd, -o/-j, -l h_rt, -pe for slots, -q, -P, -h) and submitted
// with qsub -terse; arrays are one qsub -t 1-N with -tc as the throttle; all jobs are polled with ONE
// `qstat -xml` per cycle; a job that has left qstat is resolved from its run's exit markers, else from `qacct -j`
// (its exit status and failed code: an h_rt kill is TIMEOUT, a lost execd NODE_FAIL); qdel cancels. Steps start
// with mpirun (by default) on host files cut from $PE_HOSTFILE. Not PBS: the dialects share command names only.
#pragma once
#include <map>
#include <set>

#include "schedulers/scheduler.h"

namespace fanout {

// The job script. `pe` is the parallel environment for jobs of more than one slot (a node of a run is its busiest
// node's CPUs in slots); empty: --batch_args pe=NAME, else a placeholder (a dry run contacts no cell).
std::string sge_job_script(const JobSpec& job, const std::string& pe = "");

// One `qstat -xml` listing: "<job>" or "<job>.<task>" (each task of an array, pending ranges expanded) -> state
// letters as qstat prints them (qw, hqw, r, t, Rr, s, dr, Eqw, ...). Throws UserError when it is not qstat's XML.
std::map<std::string, std::string> parse_qstat_xml(const std::string& xml);

// One record of `qacct -j`: an array gives one per task (task 0 for a job that is not an array).
struct QacctRecord {
  std::string job;
  int task = 0;
  int failed = 0;           // the shepherd's SSTATE_* code (0: the job ran; 37: qmaster enforced a limit)
  std::string failed_text;  // qacct's words after the code
  int exit_status = 0;      // 128+N for a signal
  int64_t wallclock_s = 0;
  std::string hostname;
  std::vector<UsageFigure> usage;  // what qacct measured of the job (JobStatus::usage), in B and s
};
std::vector<QacctRecord> parse_qacct(const std::string& text);

// A finished job's status from its accounting record (exit markers first, where the job script left them).
JobStatus sge_status(const std::string& id, const QacctRecord& acct, const JobSpec& job);

// Whether the qstat on PATH is Grid Engine's: its `qstat --version` prints its usage under a version line ("SGE
// 8.1.9", "GE 2011.11", "OGS/GE ...", "UGE ..."); PBS's and Slurm's qstat answer otherwise. The banner test alone
// serves a caller that already ran `qstat --version`.
bool grid_engine_banner(const std::string& qstat_version_output, std::string* version = nullptr);
bool qstat_is_grid_engine(std::string* version = nullptr);
bool sge_available();  // SGE_ROOT is set (a cell's settings.sh) and qstat is Grid Engine's

class SgeScheduler : public Scheduler {
 public:
  SgeScheduler();  // refuses when qstat is not Grid Engine's
  std::string name() const override { return "sge"; }
  std::string render_script(const JobSpec& job) const override { return sge_job_script(job, pe_); }
  // Refuses unsafe directive values and batch_args other than pe; finds the parallel environment for jobs of
  // several slots (--batch_args pe=NAME, or the cell's only one) with one `qconf -spl`.
  void check(const std::vector<JobSpec>& jobs) override;
  std::string submit(const JobSpec& job) override;
  // One array job per resource shape (-t 1-N, -tc max_parallel); task k execs the run's job.sh. Ids "<job>.<k>".
  std::vector<Submitted> submit_array(const std::vector<JobSpec>& jobs, int max_parallel = 0) override;
  std::vector<JobStatus> poll(const std::vector<std::string>& job_ids) override;
  void cancel(const std::vector<std::string>& job_ids) override;
  void forget(const std::vector<std::string>& job_ids) override {
    for (auto& id : job_ids) tracked_.erase(id);
  }
  bool adopts_jobs() const override { return true; }
  bool adopt(const std::string& job_id, const JobSpec& job) override;
  double max_poll_interval_s() const override { return 5.0; }
  int default_max_parallel() const override { return 1 << 30; }
  uint64_t queries() const override { return queries_; }

 private:
  struct Tracked {
    JobSpec job;
    int64_t gone_since_ns = 0;  // when it was first missing from qstat without an accounting record
    bool cancelled = false;
    int64_t completed_ns = 0;   // when it was first seen completed while its accounting record was not yet written
  };
  std::string qsub(const std::vector<std::string>& args, const std::filesystem::path& cwd, const std::string& what);
  JobStatus finished(const std::string& id, Tracked& t, std::map<std::string, std::vector<QacctRecord>>& acct);
  std::string pe_;  // the parallel environment jobs of several slots use (check() finds it)
  bool accounting_late_ = false;  // a completed job's record did not come in time: the rest are not waited for
  std::map<std::string, Tracked> tracked_;
  int array_count_ = 0;
  uint64_t queries_ = 0;
};

}  // namespace fanout
