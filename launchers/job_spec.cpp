#include "launchers/job_spec.h"

#include <algorithm>
#include <map>

#include "common/error.h"
#include "common/text.h"

namespace fanout {

int JobSpec::total_nodes() const {
  int n = 0;
  for (auto& s : steps)
    if (s.placement != "colocated") n += s.nodes;
  return n;
}

int JobSpec::total_ranks() const {
  int n = 0;
  for (auto& s : steps) n += s.ranks();
  return n;
}

std::vector<int> JobSpec::step_nodes(size_t s) const {
  int offset = 0;
  for (size_t i = 0; i < s; ++i)
    if (steps[i].placement != "colocated") offset += steps[i].nodes;
  if (steps[s].placement == "colocated") offset = 0;
  std::vector<int> nodes;
  for (int k = 0; k < steps[s].nodes; ++k) nodes.push_back(offset + k);
  return nodes;
}

JobSpec::NodeLoad JobSpec::busiest_node() const {
  std::map<int, NodeLoad> load;
  for (size_t s = 0; s < steps.size(); ++s)
    for (int n : step_nodes(s)) {
      NodeLoad& l = load.try_emplace(n, NodeLoad{0, 0, 0, 0}).first->second;
      l.tasks += steps[s].tasks_per_node;
      l.cpus += steps[s].tasks_per_node * steps[s].cpus_per_task;
      l.gpus += steps[s].tasks_per_node * steps[s].gpus_per_task;
      l.memory_mb += steps[s].memory_mb;
    }
  NodeLoad most;
  for (auto& [n, l] : load)
    most.tasks = std::max(most.tasks, l.tasks), most.cpus = std::max(most.cpus, l.cpus), most.gpus = std::max(most.gpus, l.gpus), most.memory_mb = std::max(most.memory_mb, l.memory_mb);
  return most;
}

void JobSpec::validate() const {
  if (steps.empty()) throw UserError("job " + name + " has no steps");
  for (auto& s : steps) {
    if (s.nodes < 1 || s.tasks_per_node < 1)
      throw UserError("job " + name + ": step '" + s.role + "' needs at least one node and one task per node");
    if (s.cpus_per_task < 1 || s.gpus_per_task < 0 || s.memory_mb < 0)
      throw UserError("job " + name + ": step '" + s.role + "' asks a negative amount or no CPU");
    if (s.placement == "colocated" && s.nodes > steps[0].nodes)
      throw UserError("job " + name + ": colocated step '" + s.role + "' needs " + std::to_string(s.nodes) +
                      " nodes but the first step has " + std::to_string(steps[0].nodes));
  }
  if (walltime_s <= 0) throw UserError("job " + name + ": wall time must be positive");
}

void SchedulerOptions::refuse_unhonoured(const std::string& scheduler, const std::vector<std::string>& honoured,
                                         const std::map<std::string, std::string>& origins) const {
  const std::pair<const char*, bool> given[] = {{"partition", !partition.empty()}, {"account", !account.empty()},
                                                {"constraint", !constraint.empty()}, {"exclusive", exclusive},
                                                {"batch_args", !batch_args.empty()}};
  for (auto& [name, is_given] : given) {
    if (!is_given || std::find(honoured.begin(), honoured.end(), name) != honoured.end()) continue;
    const auto from = origins.find(name);
    const std::string flag = std::string("--") + name;
    const std::string where = from == origins.end() || from->second == flag ? flag + ": the " : from->second + ": --" + name + " is given, but the ";
    std::vector<std::string> flags;  // of the options above: step keys (gpus_per_task, ...) are not flags
    for (auto& [option, unused] : given)
      if (std::find(honoured.begin(), honoured.end(), option) != honoured.end()) flags.push_back(option);
    throw UserError(where + scheduler + " launcher cannot honour it, and a run without it would not be what was asked" +
                    (flags.empty() ? " (it honours none of --partition, --account, --constraint, --exclusive, --batch_args)"
                                   : " (of these it honours: --" + join(flags, ", --") + ")"));
  }
}

bool JobSpec::needs_rendezvous_service() const {
  return steps.size() > 1 || std::any_of(steps.begin(), steps.end(), [](const StepSpec& s) { return s.mpi_program; });
}

void refuse_unhonoured_step(const StepSpec& step, const std::string& run, const std::string& scheduler,
                            const std::vector<std::string>& honoured) {
  const std::pair<const char*, std::string> asked[] = {
      {"gpus_per_task", step.gpus_per_task ? std::to_string(step.gpus_per_task) + " GPU(s) per task" : ""},
      {"memory_mb", step.memory_mb ? std::to_string(step.memory_mb) + " MB per node" : ""},
      {"binding", step.binding.empty() || step.binding == "none" ? "" : "binding " + step.binding},
      {"exclusive_step", step.exclusive ? "CPUs of its own (exclusive)" : ""},
      {"mpi_program", step.mpi_program ? "to run an MPI program whose ranks are the step's (mpi_program)" : ""}};
  for (auto& [name, what] : asked)
    if (!what.empty() && std::find(honoured.begin(), honoured.end(), name) == honoured.end())
      throw UserError(run + ": step '" + step.role + "' asks " + what + ", which the " + scheduler +
                      " launcher cannot give it; a run without it would not be what was asked");
}

SchedulerOptions SchedulerOptions::with_job_args(const std::vector<std::pair<std::string, std::string>>& args) const {
  SchedulerOptions o = *this;
  for (auto& arg : args) {
    const std::string &k = arg.first, &v = arg.second;  // named, not bound: a lambda below captures k (clang 14)
    if (k == "constraint") o.constraint = v;
    else if (k == "partition") o.partition = v;
    else if (k == "account") o.account = v;
    else if (k == "exclusive") o.exclusive = v == "true" || v == "1";
    else {
      std::erase_if(o.batch_args, [&](const auto& kv) { return kv.first == k; });
      o.batch_args.emplace_back(k, v);
    }
  }
  return o;
}

void SchedulerOptions::validate() const {
  require_single_line("--partition", partition);
  require_single_line("--account", account);
  require_single_line("--constraint", constraint);
  for (auto& [k, v] : batch_args) require_single_line("--batch_args " + k, k + "=" + v);
}

std::vector<std::string> rank_argv(const JobSpec& job, size_t step) {
  return {job.rank_exe.string(), "--plugin", job.plugin_path.string(), "--role", job.steps[step].role,
          "--run-dir", job.run_dir.string()};
}

std::vector<RankLaunch> plan_local_ranks(const JobSpec& job, const std::string& node_name, const EnvList& job_env) {
  std::vector<RankLaunch> out;
  const std::string job_ranks = std::to_string(job.total_ranks());
  for (size_t s = 0; s < job.steps.size(); ++s) {
    const auto& step = job.steps[s];
    auto nodes = job.step_nodes(s);
    for (int r = 0; r < step.ranks(); ++r) {
      RankLaunch l;
      l.step = s;
      l.rank = r;
      l.node_index = nodes[r / step.tasks_per_node];
      l.local_rank = r % step.tasks_per_node;
      l.argv = rank_argv(job, s);
      l.env = job.env;
      l.env.insert(l.env.end(), job_env.begin(), job_env.end());
      l.env.insert(l.env.end(), {{"FANOUT_RANK", std::to_string(r)},
                                 {"FANOUT_SIZE", std::to_string(step.ranks())},
                                 {"FANOUT_LOCAL_RANK", std::to_string(l.local_rank)},
                                 {"FANOUT_LOCAL_SIZE", std::to_string(step.tasks_per_node)},
                                 {"FANOUT_NODE_INDEX", std::to_string(l.node_index)},
                                 {"FANOUT_NODE", node_name},
                                 {"FANOUT_JOB_RANKS", job_ranks}});
      out.push_back(std::move(l));
    }
  }
  return out;
}

const char* job_state_name(JobState s) {
  switch (s) {
    case JobState::Pending: return "PENDING";
    case JobState::Running: return "RUNNING";
    case JobState::Completed: return "COMPLETED";
    case JobState::Failed: return "FAILED";
    case JobState::Timeout: return "TIMEOUT";
    case JobState::Cancelled: return "CANCELLED";
    case JobState::NodeFail: return "NODE_FAIL";
    case JobState::Preempted: return "PREEMPTED";
    case JobState::Requeued: return "REQUEUED";
    case JobState::OutOfMemory: return "OUT_OF_MEMORY";
    case JobState::Unknown: return "UNKNOWN";
  }
  return "UNKNOWN";
}

bool job_state_final(JobState s) {
  return s != JobState::Pending && s != JobState::Running && s != JobState::Requeued && s != JobState::Unknown;
}

}  // namespace fanout
