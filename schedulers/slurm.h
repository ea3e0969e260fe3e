// Slurm through libslurm: jobs are rendered as batch scripts (#SBATCH lines for people and for sbatch;
// the same request is passed to slurm_submit_batch_job as a job descriptor), steps start with srun
// (--mpi=pmix when fanout-rank has PMIx), a poll asks only for the sweep's own jobs (one slurm_load_job per job
// array or plain job, up to 8; past that one slurm_load_job_user) and keeps nothing of the answer past the poll,
// and jobs the controller has forgotten (MinJobAge) are resolved from the exit markers in their run folders.
// Inside an allocation (SLURM_JOB_ID set) the registry uses AllocationScheduler (schedulers/allocation.h) with
// this script instead, so the steps are srun's in the current allocation.
#pragma once
#include <map>
#include <memory>
#include <mutex>
#include <optional>

#include "schedulers/scheduler.h"

namespace fanout {

// The #SBATCH lines and the job descriptor fields come from this one request.
struct SlurmRequest {
  std::string name, partition, account, constraint, output, work_dir;
  int nodes = 1, tasks_per_node = 1, cpus_per_task = 1;
  int64_t time_minutes = 1;
  bool exclusive = false;
  int gpus_per_node = 0, memory_mb = 0;  // what the steps on the busiest node ask together (0: none)
  std::vector<std::pair<std::string, std::string>> batch_args;  // validated keys, see slurm_batch_arg_keys()
};
// The --batch_args keys the Slurm launcher maps to job descriptor fields (and #SBATCH lines).
const std::vector<std::string>& slurm_batch_arg_keys();
SlurmRequest slurm_request(const JobSpec& job);
std::string sbatch_preamble(const SlurmRequest& r);
// The script both schedulers run (preamble + batch body with srun steps).
std::string slurm_job_script(const JobSpec& job);

bool slurm_configured();  // a slurm.conf exists (libslurm would abort without one)

// sacct's figures of one job, read from `sacct -j ID... --noheader --parsable2 --noconvert --format=` kSacctFormat.
inline constexpr const char* kSacctFormat = "JobID,JobName,State,NodeList,MaxRSS,AveRSS,TotalCPU,UserCPU,SystemCPU,ConsumedEnergyRaw";
struct SacctJob {
  bool final = false;            // the job's own record has a final state (its steps' records came before it)
  std::vector<StepUsage> steps;  // its srun steps (ID.N), by the name srun gave them; not .batch or .extern
};
// Every job in sacct's answer, by its id as fanout tracks it ("123" or "123_4"), read in one pass (a poll that saw a
// thousand array tasks end reads one answer for all of them); with_energy: the site's acct_gather_energy plugin
// measures, so ConsumedEnergyRaw is a figure (else it is a 0 nobody measured).
std::map<std::string, SacctJob> parse_sacct(const std::string& text, bool with_energy);
// Seconds of one of sacct's durations: [D-]HH:MM:SS, MM:SS.mmm (TotalCPU below an hour), or SS.mmm; nullopt if not one.
std::optional<double> slurm_duration_s(const std::string& text);

class SlurmScheduler : public Scheduler {
 public:
  SlurmScheduler();
  ~SlurmScheduler() override;
  std::string name() const override { return "slurm"; }
  std::string render_script(const JobSpec& job) const override { return slurm_job_script(job); }
  std::string submit(const JobSpec& job) override;
  // Up to kSubmitters submissions in flight at once: each is an RPC that waits on slurmctld (its munge credential,
  // the controller creating the job), which a second connection's request overlaps.
  std::vector<Submitted> submit_each(const std::vector<JobSpec>& jobs) override;
  static constexpr int kSubmitters = 4;
  std::vector<Submitted> submit_array(const std::vector<JobSpec>& jobs, int max_parallel = 0) override;
  size_t max_submitted() const override { return max_submitted_; }
  std::vector<JobStatus> poll(const std::vector<std::string>& job_ids) override;
  void cancel(const std::vector<std::string>& job_ids) override;
  void forget(const std::vector<std::string>& job_ids) override {
    for (auto& id : job_ids) tracked_.erase(id);
  }
  void check(const std::vector<JobSpec>& jobs) override;
  double max_poll_interval_s() const override { return 2.0; }
  int default_max_parallel() const override { return 1 << 30; }
  uint64_t queries() const override { return queries_; }
  bool adopts_jobs() const override { return true; }
  bool adopt(const std::string& job_id, const JobSpec& job) override {
    tracked_[job_id] = {job.run_dir};
    return true;
  }

 private:
  std::string submit_script(const JobSpec& shape, const std::string& script, const std::string& array_spec,
                            const std::string& dependency = "");
  void attach_usage(std::vector<JobStatus>& statuses);
  // How many of an array's tasks are still followed (not yet ended and forgotten).
  size_t followed_tasks(const std::string& array) const;
  // What is kept of a submitted job to explain its end: its folder (its markers and logs), not its whole JobSpec
  // (2.5 KiB a run of a 100,000-run array sweep's peak memory, against the local launcher's 0.67).
  struct Tracked {
    std::filesystem::path run_dir;
    int missing_polls = 0;
    bool seen = false;
    bool usage_done = false, cancelled = false;
    bool in_answer = false;  // in the controller's answer at the last poll (not yet forgotten: MinJobAge)
    int64_t ended_ns = 0;  // monotonic time its final state was first seen while its accounting was not yet
  };
  std::map<std::string, Tracked> tracked_;
  uint64_t queries_ = 0;
  int array_count_ = 0;
  size_t max_array_size_ = 1001;  // the controller's MaxArraySize (its tasks are numbered 0 .. MaxArraySize - 1)
  size_t max_submitted_ = SIZE_MAX;  // half the controller's MaxJobCount (read at start)
  std::map<std::string, std::string> last_array_;  // per resource shape, its last array submitted (the chain's end)
  // What the controller's configuration says of accounting (read once): storage in slurmdbd, energy measured.
  std::string accounting_storage_, energy_plugin_;
  bool accounting_late_ = false;  // a job's record did not reach slurmdbd in time: the rest are not waited for
  // Per account (empty: the user's default), whether a limit on queued jobs holds for it (queued_job_limits_apply),
  // read at its first "Job violates accounting/QOS policy"; the submitting threads share it.
  bool queued_job_limits_apply(const std::string& account);
  std::mutex limits_mu_;
  std::map<std::string, bool> queued_job_limits_;
};


}  // namespace fanout
