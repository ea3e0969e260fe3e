// PBS qstat output (schedulers/pbs.h), any bytes, as the text form (qstat -f) and as JSON (qstat -F json).
// Asserts: the text parser never throws; the JSON parser throws only UserError; every job either parser returns
// maps to a job state without throwing (pbs_status on a run folder that holds no exit markers).
#include <string>

#include "common/error.h"
#include "schedulers/pbs.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  static const fanout::JobSpec job = [] {
    fanout::JobSpec j;
    j.name = "fuzz";
    j.run_dir = "/nonexistent/fanout-qstat-fuzz";
    return j;
  }();
  fanout::QstatJobs jobs = fanout::parse_qstat_text(text);
  try {
    auto more = fanout::parse_qstat_json(text);
    jobs.insert(more.begin(), more.end());
  } catch (const fanout::UserError&) {
  }
  for (const auto& [id, attrs] : jobs) {
    const fanout::JobStatus s = fanout::pbs_status(id, attrs, job);
    FUZZ_CHECK(s.job_id == id);
    if (s.state == fanout::JobState::Completed) FUZZ_CHECK(s.reason.empty());
  }
  return 0;
}
