// What a scheduler is asked to run: one job = one run = one or more steps (groups of ranks of one role).
// JobSpec is the only thing schedulers (local, slurm, pbs) and launchers (local, srun, mpirun) share.
#pragma once
#include <cstdint>
#include <filesystem>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace fanout {

using EnvList = std::vector<std::pair<std::string, std::string>>;

struct StepSpec {
  std::string role;
  int nodes = 1;
  int tasks_per_node = 1;
  int cpus_per_task = 1;
  std::string placement = "disjoint";  // "disjoint": nodes of its own; "colocated": the first step's nodes
  int gpus_per_task = 0;               // 0: none asked
  int memory_mb = 0;                   // per node; 0: the scheduler's default
  std::string binding;                 // "cores", "none", "map:<cpu>,..." or "" (the scheduler's default)
  bool exclusive = false;              // CPUs no other step of the job uses
  // role names the step (its logs, samples, exits); entry is the plugin's role it runs when another one (an
  // experiment file's step named "db" running role "run"), else empty.
  std::string entry;
  std::string settings;  // the step's settings from an experiment file (a JSON object), or empty
  bool mpi_program = false;  // the program joins the launcher's PMIx, not fanout-rank (StepTemplate::mpi_program)
  const std::string& plugin_role() const { return entry.empty() ? role : entry; }
  int ranks() const { return nodes * tasks_per_node; }
  bool operator==(const StepSpec&) const = default;
};

struct SchedulerOptions {  // allocation requests; the local scheduler ignores what it cannot honour
  std::string partition, account, constraint;
  bool exclusive = false;
  bool hold = false;  // submit held (benchmarks of submission alone)
  std::string step_launcher;  // how steps start inside a batch job: srun, mpirun; empty = the scheduler's default
  std::string mpi = "openmpi";  // the MPI whose mpirun starts steps: openmpi, mpich (Hydra), pals (Cray PALS mpiexec)
  // Further batch options as key=value (SmartSim-Scaling's batch_args): qos, reservation, mem (MB per node),
  // gres, nodelist, exclude_nodes, comment. Checked by the scheduler that uses them.
  std::vector<std::pair<std::string, std::string>> batch_args;
  // UserError naming the flag of a value that cannot go into a batch script (plan_experiment calls it).
  void validate() const;
  // These options with key=value ones on top: constraint, partition, account and exclusive replace this one's,
  // other keys replace or join batch_args.
  SchedulerOptions with_job_args(const std::vector<std::pair<std::string, std::string>>& args) const;
  // UserError naming the first given option that is not in `honoured` (a launcher would drop it silently), and
  // where its value came from (origins: option name -> "--partition" or "site.toml:5: settings.partition").
  void refuse_unhonoured(const std::string& scheduler, const std::vector<std::string>& honoured,
                         const std::map<std::string, std::string>& origins = {}) const;
};

// The same for what a step asks (honoured names: gpus_per_task, memory_mb, binding, exclusive_step); `run` names it.
void refuse_unhonoured_step(const StepSpec& step, const std::string& run, const std::string& scheduler,
                            const std::vector<std::string>& honoured);

struct JobSpec {
  std::string name;                   // the run's session name
  std::filesystem::path run_dir;      // absolute
  std::filesystem::path rank_exe;     // fanout-rank, absolute
  std::filesystem::path plugin_path;  // absolute path of the plugin's .so
  std::vector<StepSpec> steps;
  int64_t walltime_s = 3600;
  SchedulerOptions options;
  EnvList env;  // extra environment for every rank
  // A site profile's shell lines (orchestrator/site.h): run before the steps start, and per role before its step.
  std::string site_lines;
  std::map<std::string, std::string> role_lines;

  // Nodes the allocation needs: the disjoint steps' nodes side by side (colocated steps add none).
  int total_nodes() const;
  int total_ranks() const;
  // Node indices (0-based, within the allocation) that step s runs on.
  std::vector<int> step_nodes(size_t s) const;
  // The most that any node of the allocation carries, summed over the steps on it (colocated steps add up):
  // tasks, CPUs (tasks x cpus_per_task), GPUs (tasks x gpus_per_task), memory_mb.
  struct NodeLoad {
    int tasks = 1, cpus = 1, gpus = 0, memory_mb = 0;
  };
  NodeLoad busiest_node() const;
  // Whether the ranks meet through fanout's rendezvous service rather than the launcher's PMIx: PMIx spans one
  // step only, and a step whose program is an MPI program leaves PMIx to that program.
  bool needs_rendezvous_service() const;
  // Throws UserError if the steps are inconsistent (a colocated step needing more nodes than the first).
  void validate() const;
};

// One rank as a launcher starts it: which node, and the argv/env of fanout-rank.
struct RankLaunch {
  size_t step = 0;
  int rank = 0;  // within the step
  int node_index = 0;
  int local_rank = 0;
  std::vector<std::string> argv;
  EnvList env;
};

// argv of fanout-rank for one step (identical on every rank; the rank learns its place from the environment).
std::vector<std::string> rank_argv(const JobSpec& job, size_t step);
// The per-rank environment the local launcher sets (FANOUT_RANK, FANOUT_SIZE, ...), for every rank of the job.
std::vector<RankLaunch> plan_local_ranks(const JobSpec& job, const std::string& node_name, const EnvList& job_env);

// Job states in Slurm's words; the strings are stored in the results database.
enum class JobState { Pending, Running, Completed, Failed, Timeout, Cancelled, NodeFail, Preempted, Requeued, OutOfMemory, Unknown };
const char* job_state_name(JobState s);
bool job_state_final(JobState s);

struct RankExit {
  size_t step = 0;
  int rank = 0;
  int exit_code = 0;  // valid when signal == 0
  int signal = 0;
};

// What a scheduler's own accounting measured of a job after it ended (Slurm's sacct per step, Grid Engine's qacct
// and PBS's resources_used per job), in base units (B, s, J); a figure the scheduler does not report is absent.
// Names: max_rss, ave_rss, max_vmem, cpu, user_cpu, system_cpu, energy, io (Grid Engine's io, in bytes), io_wait.
struct UsageFigure {
  std::string name, unit;
  double value = 0;
};
struct StepUsage {
  std::string step;  // the step's role (srun --job-name); "" when the scheduler accounts the whole job
  std::string nodes;
  std::vector<UsageFigure> figures;
};

struct JobStatus {
  std::string job_id;
  JobState state = JobState::Pending;
  int exit_code = 0;
  int signal = 0;
  std::string reason;     // for failures: which rank, how, where the logs are
  std::string node_list;  // e.g. "n[1-4]" or the local host name
  int64_t start_wall_ns = 0, end_wall_ns = 0;
  std::vector<RankExit> ranks;  // per-rank exits where the scheduler knows them
  // Final states only: what the scheduler's accounting measured, and why nothing, when it could not say (once per
  // sweep is enough: the driver prints each distinct note once).
  std::vector<StepUsage> usage;
  std::string usage_note;
};

}  // namespace fanout
