// Asserts: the RedisAI argument parser (input split on '\0' into argv) answers nullptr or an "ERR ..." text,
// and what it accepts is consistent: shape product, byte size within the limit, blob length, value count.
#include <cstring>
#include <string>

#include "plugins/smartsim/redisai_args.h"
#include "tests/fuzz/fuzz_check.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view in(reinterpret_cast<const char*>(data), size);
  redisai::Argv argv;
  for (size_t start = 0;;) {
    size_t end = std::min(in.find('\0', start), in.size());
    argv.push_back(in.substr(start, end - start));
    if (end == in.size()) break;
    start = end + 1;
  }
  auto ok = [](const char* err) { return !err || std::strncmp(err, "ERR ", 4) == 0; };
  redisai::TensorSetArgs set;
  const char* err = redisai::parse_tensorset(argv, set);
  FUZZ_CHECK(ok(err));
  if (!err) {
    long long count = 1;
    for (long long d : set.dims) {
      FUZZ_CHECK(d > 0 && count <= redisai::kMaxTensorBytes / d);
      count *= d;
    }
    FUZZ_CHECK(!set.dims.empty() && count == set.count && set.bytes <= redisai::kMaxTensorBytes);
    FUZZ_CHECK(set.bytes == count * (long long)redisai::kTypes[set.dtype].size);
    if (set.data == redisai::TensorSetArgs::Data::Blob) FUZZ_CHECK((long long)argv[set.data_arg].size() == set.bytes);
    if (set.data == redisai::TensorSetArgs::Data::Values) {
      FUZZ_CHECK(argv.size() - set.data_arg == size_t(count));
      std::string bytes;
      const char* verr = redisai::parse_tensor_values(argv, set, bytes);
      FUZZ_CHECK(ok(verr) && verr != redisai::kWrongArity && (long long)bytes.size() == set.bytes);
    }
  }
  redisai::TensorGetArgs get;
  err = redisai::parse_tensorget(argv, get);
  FUZZ_CHECK(ok(err));
  if (!err) FUZZ_CHECK((get.meta || get.values || get.blob) && !(get.blob && get.values));
  return 0;
}
