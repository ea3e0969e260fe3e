// Asserts: the reference file reader (results/reference.h) takes any bytes as a TOML file and either returns
// references with a metric, a unit said (it may be "", a count without one: results/reference.cpp) and finite values,
// or throws UserError naming the file; nothing else.
// Input: the file's bytes.
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <string>

#include "common/error.h"
#include "results/reference.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string file = fuzz_input_file("reference", ".toml", data, size);
  if (file.empty()) return 0;
  try {
    for (auto& r : fanout::read_references(file)) {
      FUZZ_CHECK(!r.metric.empty());
      FUZZ_CHECK(std::isfinite(r.value) && std::isfinite(r.lower) && std::isfinite(r.upper));
    }
  } catch (const fanout::UserError& e) {
    FUZZ_CHECK(std::string(e.what()).find(file) != std::string::npos);
  }
  return 0;
}
