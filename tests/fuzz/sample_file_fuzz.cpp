// Asserts: decode_samples throws nothing but UserError, stays inside the buffer (ASan), and counts the
// samples it hands out; every decoded sample packed into a stored block (sample_block.h) reads back equal,
// bit for bit (NaN as NaN); the same bytes read as a stored block throw nothing but UserError.
#include <cmath>
#include <cstring>
#include <functional>
#include <string_view>
#include <vector>

#include "common/error.h"
#include "results/sample_block.h"
#include "results/sample_file.h"
#include "tests/fuzz/fuzz_check.h"

static volatile size_t g_sink;

static bool same(double a, double b) { return (std::isnan(a) && std::isnan(b)) || std::memcmp(&a, &b, sizeof a) == 0; }

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  uint64_t seen = 0;
  fanout::SampleBlockWriter block;
  std::vector<fanout::Sample> kept;
  auto on_sample = [&](const fanout::Sample& s) {  // reads every view, so ASan checks where they point
    std::hash<std::string_view> h;
    g_sink = h(s.role) ^ h(s.metric) ^ h(s.unit);
    ++seen;
    block.add(s.iteration, s.t_start_s, s.value, s.warmup);
    kept.push_back(s);
  };
  try {
    auto info = fanout::decode_samples(bytes, "fuzz", on_sample);
    FUZZ_CHECK(info.samples == seen);
  } catch (const fanout::UserError&) {
  }
  fanout::SampleBlockReader back(block.text(), "fuzz");
  fanout::SampleRowText row;
  size_t i = 0;
  for (; back.next(row); ++i) {
    FUZZ_CHECK(i < kept.size());
    FUZZ_CHECK(fanout::stored_integer(row.iteration) == kept[i].iteration);
    FUZZ_CHECK(same(fanout::stored_real(row.t_start), kept[i].t_start_s));
    FUZZ_CHECK(same(fanout::stored_real(row.value), kept[i].value));
    FUZZ_CHECK(row.warmup == kept[i].warmup);
  }
  FUZZ_CHECK(i == kept.size());
  try {
    fanout::SampleBlockReader any(bytes, "fuzz");
    while (any.next(row)) {  // the value's bits, not a conversion: a double beyond size_t's range is UB to convert
      const double v = fanout::stored_real(row.value);
      size_t bits = 0;
      std::memcpy(&bits, &v, sizeof bits);
      g_sink = bits;
    }
  } catch (const fanout::UserError&) {
  }
  return 0;
}
