// Untrusted TorchScript blobs through the RedisAI module's sandbox (plugins/smartsim/sandbox_check.h), as
// AI.MODELSTORE hands them over: whatever the bytes, the answer is "" (loaded) or an "ERR ..." reply, and this
// process (standing for redis-server) lives on. The checker (FANOUT_REDISAI_CHECK, from the main build) runs each
// input in a process of its own, so coverage does not guide the mutations here: it is a crash harness.
#include <string>

#include "plugins/smartsim/sandbox_check.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string blob(reinterpret_cast<const char*>(data), size);
  const std::string why = redisai::check_in_sandbox(redisai::PayloadKind::Model, blob, "CPU", size_t(256) << 20, 60);
  FUZZ_CHECK(why.empty() || why.rfind("ERR ", 0) == 0);
  return 0;
}
