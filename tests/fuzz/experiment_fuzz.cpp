// Asserts: parse_experiment_text throws nothing but UserError on any text, and what it accepts names a plugin.
#include <algorithm>
#include <string_view>

#include "common/error.h"
#include "orchestrator/experiment.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Non-ASCII input is skipped: Debian 12's toml++ 3.3.0 reaches __builtin_unreachable in
  // is_non_ascii_horizontal_whitespace() on many non-ASCII characters (e.g. "e\xca\x80 = 1"; upstream
  // tomlplusplus issues 190 and 295), a bug of the library that would stop every run in seconds.
  if (std::any_of(data, data + size, [](uint8_t c) { return c >= 0x80; })) return 0;
  try {
    auto req = fanout::parse_experiment_text(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.toml");
    FUZZ_CHECK(!req.plugin.empty() && !req.settings.exp_name.empty());
  } catch (const fanout::UserError&) {
  }
  return 0;
}
