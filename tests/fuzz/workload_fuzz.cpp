// torchloader's workload CSV (plugins/torchloader/workload.h), any text. Asserts: parse_workload either throws
// std::runtime_error (or one of its kinds) naming the source, or returns applications whose fields are in range
// and whose iteration count is computed without overflow (UBSan makes an overflow fatal).
#include <stdexcept>
#include <string>

#include "plugins/torchloader/workload.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  std::vector<torchloader::AppSpec> apps;
  try {
    apps = torchloader::parse_workload(text, "fuzz.csv");
  } catch (const std::runtime_error& e) {
    FUZZ_CHECK(std::string(e.what()).find("fuzz.csv") != std::string::npos);
    return 0;
  } catch (const std::invalid_argument& e) {
    FUZZ_CHECK(std::string(e.what()).find("fuzz.csv") != std::string::npos);
    return 0;
  }
  for (const auto& a : apps) {
    FUZZ_CHECK(a.batch > 0 && a.workers >= 0 && a.node_size >= 1 && a.line >= 2);
    FUZZ_CHECK(a.arch == "resnet" || a.arch == "vgg" || a.arch == "googlenet");
    FUZZ_CHECK(torchloader::total_iterations(a) >= 0);
  }
  return 0;
}
