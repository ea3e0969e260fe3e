// Asserts: a run folder path (any bytes) either is refused for its control characters, or gives a job script body
// with exactly the lines of one with a plain path: no path ends a line or starts a command in job.sh.
#include <algorithm>
#include <string>

#include "common/error.h"
#include "common/text.h"
#include "schedulers/batch_script.h"
#include "tests/fuzz/fuzz_check.h"

namespace {
fanout::JobSpec job_at(const std::string& dir) {
  fanout::JobSpec j;
  j.name = "fuzz";
  j.run_dir = dir;
  j.rank_exe = "/opt/fanout/bin/fanout-rank";
  j.plugin_path = "/opt/fanout/lib/fanout_calibration.so";
  j.steps = {fanout::StepSpec{"db", 1, 1, 1, "disjoint", 0, 0, "", false}, fanout::StepSpec{"client", 2, 1, 1, "disjoint", 0, 0, "", false}};
  j.walltime_s = 60;
  return j;
}
size_t lines(const std::string& s) { return size_t(std::count(s.begin(), s.end(), '\n')); }
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string path = "/scratch/" + std::string(reinterpret_cast<const char*>(data), size);
  try {
    fanout::require_single_line("--results_dir", path);
  } catch (const fanout::UserError&) {
    return 0;  // refused: it never reaches a script
  }
  static const size_t plain = lines(fanout::batch_script_body(job_at("/scratch/plain"), {{"srun"}, {"srun"}}));
  FUZZ_CHECK(lines(fanout::batch_script_body(job_at(path), {{"srun"}, {"srun"}})) == plain);
  return 0;
}
