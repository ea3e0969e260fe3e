// Asserts: the messages between the RedisAI module and its executor process (plugins/smartsim/executor_wire.h)
// are read without reading past the message, allocating what a length field announces beyond the bounds, or
// accepting a malformed tensor: any bytes give values or a std::runtime_error. A message a Writer wrote from
// what was read reads back the same.
#include <string>

#include "plugins/smartsim/executor_wire.h"
#include "tests/fuzz/fuzz_check.h"

using namespace redisai;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  wire::Reader r{bytes};
  try {
    // As the executor reads a run request: op, id, then the request's tensors, strings and counts.
    r.u8();
    r.num<uint64_t>();
    const uint32_t n = r.count();
    std::vector<std::vector<TensorValue>> requests;
    for (uint32_t i = 0; i < n && i < 64; ++i) requests.push_back(r.tensors());
    const auto names = r.strings();
    FUZZ_CHECK(r.at <= bytes.size());
    wire::Writer w;
    for (const auto& req : requests) w.tensors(req);
    w.strings(names);
    wire::Reader back{w.out};
    for (const auto& req : requests) {
      const auto again = back.tensors();
      FUZZ_CHECK(again.size() == req.size());
      for (size_t k = 0; k < req.size(); ++k) {
        FUZZ_CHECK(again[k].dtype == req[k].dtype && again[k].dims == req[k].dims && again[k].bytes == req[k].bytes);
        FUZZ_CHECK(std::string_view(again[k].data, again[k].bytes) == std::string_view(req[k].data, req[k].bytes));
      }
    }
    FUZZ_CHECK(back.strings() == names);
  } catch (const std::runtime_error&) {
  }
  return 0;
}
