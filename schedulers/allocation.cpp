#include "schedulers/allocation.h"

#include <cstdlib>
#include <fstream>
#include <set>

#include "common/error.h"
#include "common/text.h"
#include "schedulers/batch_script.h"
#include "schedulers/scheduler.h"
#include "results/layout.h"

namespace fanout {

namespace {

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}

// Hosts of the allocation in order: the unique lines of $PBS_NODEFILE, or the hosts of Grid Engine's $PE_HOSTFILE
// ("host slots queue processors" lines).
std::vector<std::string> batch_hosts() {
  std::vector<std::string> hosts;
  std::set<std::string> seen;
  for (const char* var : {"PBS_NODEFILE", "PE_HOSTFILE"})
    if (const char* f = env(var)) {
      std::ifstream in(f);
      for (std::string line; std::getline(in, line);) {
        const std::string h = trim(line.substr(0, line.find_first_of(" \t")));
        if (!h.empty() && seen.insert(h).second) hosts.push_back(h);
      }
    }
  return hosts;
}

std::optional<int64_t> allocation_nodes() {
  for (const char* name : {"SLURM_JOB_NUM_NODES", "SLURM_NNODES", "PBS_NUM_NODES"})
    if (const char* v = env(name))
      if (auto n = parse_int(v)) return n;
  auto hosts = batch_hosts();
  if (!hosts.empty()) return int64_t(hosts.size());
  return std::nullopt;
}

}  // namespace

bool inside_allocation() { return !enclosing_allocation().scheduler.empty(); }

void AllocationScheduler::check(const std::vector<JobSpec>& jobs) {
  auto nodes = allocation_nodes();
  if (!nodes) return;
  const std::string id = enclosing_allocation().job_id;
  for (auto& j : jobs)
    if (j.total_nodes() > *nodes)
      throw UserError("run " + j.name + " needs " + std::to_string(j.total_nodes()) + " nodes but this allocation (job " +
                      (id.empty() ? "?" : id) + ") has " + std::to_string(*nodes) + "; nothing was started");
}

std::vector<LocalScheduler::Process> AllocationScheduler::processes(const JobSpec& job, const EnvList&) const {
  return {{0, 0, {"/bin/bash", (job.run_dir / layout::kJobScript).string()}, job.env, job.run_dir / "job.out", job.run_dir / "job.err"}};
}

void AllocationScheduler::finish_status(const JobSpec& job, JobStatus& status) const {
  status.ranks.clear();  // the one process was the job script, not a rank
  if (const char* nodes = env("SLURM_JOB_NODELIST")) status.node_list = nodes;
  else if (auto hosts = batch_hosts(); !hosts.empty()) status.node_list = join(hosts, ",");
  if (status.state == JobState::Failed) {
    std::string step = describe_step_failure(job.run_dir);
    if (!step.empty()) status.reason = step;
  }
}

}  // namespace fanout
