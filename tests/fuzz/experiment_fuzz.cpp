// Asserts: parse_experiment_text throws nothing but UserError on any text, and what it accepts names a plugin.
#include <algorithm>
#include <string_view>

#include "common/error.h"
#include "orchestrator/experiment.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Non-ASCII input included: parse_experiment_text refuses it wherever Debian 12's toml++ 3.3.0 would reach
  // __builtin_unreachable (upstream tomlplusplus issues 190 and 295); a gap in that check crashes here.
  try {
    auto req = fanout::parse_experiment_text(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.toml");
    FUZZ_CHECK(!req.plugin.empty() && !req.settings.exp_name.empty());
  } catch (const fanout::UserError&) {
  }
  return 0;
}
