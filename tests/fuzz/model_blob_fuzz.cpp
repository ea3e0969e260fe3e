// Untrusted TorchScript through the RedisAI module's sandbox (plugins/smartsim/sandbox_check.h), as
// AI.MODELSTORE and AI.SCRIPTSTORE/SCRIPTSET hand it over: whatever the bytes, the answer is "" (loaded) or an
// "ERR ..." reply, and this process (standing for redis-server) lives on. An input whose first byte is odd is a
// script (its source follows that byte); otherwise the whole input is a model blob (so a zip's "PK" stays a
// model). The checker (FANOUT_REDISAI_CHECK, from the main build) runs each input in a process of its own, so
// coverage does not guide the mutations here: it is a crash harness.
#include <string>

#include "plugins/smartsim/sandbox_check.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const bool script = size > 0 && (data[0] & 1);
  const std::string payload = script ? std::string(reinterpret_cast<const char*>(data + 1), size - 1)
                                     : std::string(reinterpret_cast<const char*>(data), size);
  const auto kind = script ? redisai::PayloadKind::Script : redisai::PayloadKind::Model;
  const std::string why = redisai::check_in_sandbox(kind, payload, "CPU", size_t(256) << 20, {}, 60);
  FUZZ_CHECK(why.empty() || why.rfind("ERR ", 0) == 0);
  return 0;
}
