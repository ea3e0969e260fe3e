// Grid Engine's tool output (schedulers/sge.h), any bytes, as `qstat -xml` and as `qacct -j`. Asserts: the XML
// parser throws only UserError and never expands a task range past its bound; the accounting parser never throws;
// every record maps to a job state without throwing (sge_status on a run folder that holds no exit markers), and a
// completed one carries no reason.
#include <string>

#include "common/error.h"
#include "schedulers/sge.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  static const fanout::JobSpec job = [] {
    fanout::JobSpec j;
    j.name = "fuzz";
    j.run_dir = "/nonexistent/fanout-sge-fuzz";
    j.walltime_s = 60;
    return j;
  }();
  try {
    const auto listed = fanout::parse_qstat_xml(text);
    for (const auto& [id, state] : listed) FUZZ_CHECK(!id.empty());
  } catch (const fanout::UserError&) {
  }
  for (const fanout::QacctRecord& r : fanout::parse_qacct(text)) {
    const fanout::JobStatus s = fanout::sge_status(r.job.empty() ? "1" : r.job, r, job);
    if (s.state == fanout::JobState::Completed) FUZZ_CHECK(s.reason.empty());
  }
  return 0;
}
