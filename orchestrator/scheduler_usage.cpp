#include "orchestrator/scheduler_usage.h"

#include <map>
#include <memory>
#include <set>

#include "common/clock.h"
#include "common/error.h"
#include "results/layout.h"
#include "results/sample_file.h"

namespace fanout {

namespace fs = std::filesystem;

size_t write_scheduler_usage(const fs::path& run_dir, const JobStatus& status) {
  // One file per role: a role's steps (several srun steps of one name) are its samples, iteration by iteration.
  std::map<std::string, std::unique_ptr<SampleWriter>> writers;
  std::map<std::string, int64_t> iteration;
  std::set<std::pair<std::string, std::string>> declared;
  const int64_t mono = monotonic_ns(), wall = wall_ns();
  size_t written = 0;
  for (const StepUsage& step : status.usage) {
    if (step.figures.empty()) continue;
    // The name srun gave the step (fanout's role); one it could not have given is not made a file name.
    const bool usable = !step.step.empty() && step.step.find('/') == std::string::npos && step.step[0] != '.';
    const std::string role = usable ? step.step : kSchedulerUsageRole;
    auto& w = writers[role];
    if (!w) {
      fs::create_directories(run_dir / layout::kSamplesDir);
      w = std::make_unique<SampleWriter>(run_dir / layout::kSamplesDir / (role + ".scheduler.samples"), -1, role,
                                         step.nodes.empty() ? status.node_list : step.nodes, mono, wall);
      if (!w->error().empty()) throw UserError(w->error());
    }
    for (const UsageFigure& f : step.figures) {
      const std::string metric = "resource.scheduler." + f.name;
      if (declared.insert({role, metric}).second) w->declare(metric, 1 /* lower is better */, 0);
      if (!w->record(metric, f.unit, iteration[role], mono, f.value, false)) throw UserError(w->error());
      ++written;
    }
    ++iteration[role];
  }
  for (auto& [role, w] : writers)
    if (!w->flush()) throw UserError(w->error());
  return written;
}

}  // namespace fanout
