// Any TorchScript source, run as AI.SCRIPTEXECUTE runs it: loaded and called in the module's executor process
// (plugins/smartsim/executor.h; the main build's fanout-redisai-exec, FANOUT_REDISAI_EXEC), never in this
// process, which stands for redis-server. Asserts: every outcome is a result or an "ERR ..." (a script that
// crashes its executor is named with its signal, an endless one is stopped after 5 s), this process lives on,
// and after every input the executor serves a known script correctly (a crash costs that one run only).
// Input: the first line names the function to call, the rest is the source. The script runs in another process,
// so coverage does not guide the mutations here: it is a crash harness, as model_blob.
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "plugins/smartsim/executor.h"
#include "tests/fuzz/fuzz_check.h"

using namespace redisai;

namespace {

Executor& executor() {
  static Executor e(ExecutorOptions{"CPU", size_t(256) << 20, 1, 1, 5});
  return e;
}

TensorValue floats(std::vector<float> v) {
  auto bytes = std::make_shared<std::string>(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
  TensorValue t;
  t.dtype = 0;  // FLOAT
  t.dims = {(long long)v.size()};
  t.data = bytes->data();
  t.bytes = bytes->size();
  t.keep = bytes;
  return t;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  const size_t nl = text.find('\n');
  const std::string function = nl == std::string::npos ? "f" : text.substr(0, nl), source = nl == std::string::npos ? text : text.substr(nl + 1);
  static uint64_t next_id = uint64_t(1) << 40;  // ids of its own, as the server's are unique
  static const std::vector<std::string> no_entry_points;
  const TensorValue input = floats({1, 2});
  {
    auto alive = std::make_shared<int>(0);  // gone after this input: the executor drops the script before the next
    const Executable script{++next_id, false, "CPU", &source, &no_entry_points, alive};
    try {
      executor().run_script(script, function, {input}, {"k"}, {"arg"});
    } catch (const BackendError& e) {
      FUZZ_CHECK(std::strncmp(e.what(), "ERR ", 4) == 0);
    }
  }
  static const std::string ok_source = "def ok(a):\n    return a + 1\n";
  static const auto ok_alive = std::make_shared<int>(0);
  const Executable ok{1, false, "CPU", &ok_source, &no_entry_points, ok_alive};
  // A script that wrote past a buffer without a fault (an unsafe sparse tensor's to_dense at an index in the
  // executor's heap, corpus oob_heap) returned, and the heap it broke aborted the executor on its next run. Such
  // ops are refused at compile now (torch_backend.cpp unchecked_op); for one not yet known, that next run must be
  // an ERR naming the signal, the executor replaced, and the run after it served.
  std::vector<TensorValue> out;
  try {
    out = executor().run_script(ok, "ok", {input}, {}, {});
  } catch (const BackendError& e) {
    FUZZ_CHECK(std::strstr(e.what(), "ERR the script died of SIG") == e.what());
    out = executor().run_script(ok, "ok", {input}, {}, {});
  }
  FUZZ_CHECK(out.size() == 1 && out[0].dtype == 0 && out[0].bytes == 2 * sizeof(float));
  float got[2];
  std::memcpy(got, out[0].data, sizeof got);
  FUZZ_CHECK(got[0] == 2 && got[1] == 3);
  return 0;
}
