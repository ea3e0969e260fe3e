// Asserts: list flags (parse_list_value, parse_exclude_flag, parse_walltime) throw nothing but UserError, and
// parse_list_value(format_list_value(v)) == v for every list the parser accepts.
#include <string>

#include "common/error.h"
#include "orchestrator/experiment.h"
#include "orchestrator/list_value.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  try {
    auto v = fanout::parse_list_value(text, "--x");
    FUZZ_CHECK(!v.empty());
    FUZZ_CHECK(fanout::parse_list_value(fanout::format_list_value(v), "--x") == v);
  } catch (const fanout::UserError&) {
  }
  try {
    auto e = fanout::parse_exclude_flag(text, "--exclude");
    FUZZ_CHECK(!e.conditions.empty());
  } catch (const fanout::UserError&) {
  }
  try {
    FUZZ_CHECK(fanout::parse_walltime(text, "--walltime") > 0);
  } catch (const fanout::UserError&) {
  }
  return 0;
}
