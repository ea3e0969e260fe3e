// Asserts: every RedisAI argument parser (input split on '\0' into argv) answers nullptr or an "ERR ..." text,
// and what it accepts is consistent: shape product, byte size within the limit, blob length, value count;
// model/script commands: counted lists inside argv, batch settings ordered, a device of the accepted forms.
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
  auto inside = [&](const std::vector<std::string_view>& names) {
    for (auto n : names)
      if (n.data() < in.data() || n.data() + n.size() > in.data() + in.size()) return false;
    return true;
  };
  auto device_ok = [](const std::string& d) { return d == "CPU" || d == "GPU" || d.rfind("GPU:", 0) == 0 || d.rfind("CPU:", 0) == 0; };
  redisai::ModelStoreArgs store;
  err = redisai::parse_modelstore(argv, store);
  FUZZ_CHECK(ok(err));
  if (!err) {
    FUZZ_CHECK(device_ok(store.device) && redisai::keyword(store.backend, "TORCH"));
    FUZZ_CHECK(store.batchsize >= 0 && store.minbatchsize <= store.batchsize && (store.minbatchsize > 0 || store.minbatchtimeout == 0));
    FUZZ_CHECK(store.blob_first >= 5 && store.blob_first < argv.size() && redisai::keyword(argv[store.blob_first - 1], "BLOB"));
    FUZZ_CHECK(inside(store.inputs) && inside(store.outputs));
  }
  redisai::ExecuteArgs run;
  for (auto parse : {redisai::parse_modelexecute, redisai::parse_scriptexecute, redisai::parse_scriptrun}) {
    err = parse(argv, run);
    FUZZ_CHECK(ok(err));
    if (!err) FUZZ_CHECK(inside(run.inputs) && inside(run.outputs) && inside(run.keys) && inside(run.args) && run.timeout_ms >= 0);
  }
  if (!redisai::parse_modelexecute(argv, run)) FUZZ_CHECK(!run.inputs.empty() && !run.outputs.empty());
  redisai::ScriptStoreArgs script;
  for (auto parse : {redisai::parse_scriptstore, redisai::parse_scriptset}) {
    err = parse(argv, script);
    FUZZ_CHECK(ok(err));
    if (!err) FUZZ_CHECK(device_ok(script.device) && inside(script.entry_points) && inside({script.source}));
  }
  redisai::ValueGetArgs value;
  for (auto parse : {redisai::parse_modelget, redisai::parse_scriptget}) {
    err = parse(argv, value);
    FUZZ_CHECK(ok(err));
    if (!err) FUZZ_CHECK(value.meta || value.payload);
  }
  redisai::InfoArgs info;
  FUZZ_CHECK(ok(redisai::parse_info(argv, info)));
  return 0;
}
