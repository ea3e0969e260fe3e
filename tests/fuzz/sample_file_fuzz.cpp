// Asserts: decode_samples throws nothing but UserError, stays inside the buffer (ASan), and counts the
// samples it hands out.
#include <functional>
#include <string_view>

#include "common/error.h"
#include "results/sample_file.h"
#include "tests/fuzz/fuzz_check.h"

static volatile size_t g_sink;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  uint64_t seen = 0;
  auto on_sample = [&](const fanout::Sample& s) {  // reads every view, so ASan checks where they point
    std::hash<std::string_view> h;
    g_sink = h(s.role) ^ h(s.metric) ^ h(s.unit);
    ++seen;
  };
  try {
    auto info = fanout::decode_samples(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz", on_sample);
    FUZZ_CHECK(info.samples == seen);
  } catch (const fanout::UserError&) {
  }
  return 0;
}
