// fanout-redisai-exec: runs the RedisAI module's models and scripts in a process of its own (executor.h). Reads
// requests on stdin, answers each on stdout (executor_wire.h), until stdin closes.
//   fanout-redisai-exec <device> <memory cap bytes> <intra-op threads> <inter-op threads>
#include <sys/resource.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <new>
#include <memory>
#include <string>

#include "executor_wire.h"
#include "module_helper.h"
#include "torch_backend.h"

namespace redisai {
namespace {

bool read_exact(char* p, size_t n) {
  while (n > 0) {
    const ssize_t r = ::read(0, p, n);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= size_t(r);
  }
  return true;
}

// VmData: the process's private writable memory, what RLIMIT_DATA counts.
uint64_t data_bytes() {
  uint64_t kb = 0;
  if (FILE* f = std::fopen("/proc/self/status", "r")) {
    char line[256];
    while (std::fgets(line, sizeof line, f))
      if (std::sscanf(line, "VmData: %lu kB", &kb) == 1) break;
    std::fclose(f);
  }
  return kb << 10;
}

std::string reply(char status, const std::string& body) {
  wire::Writer w;
  w.u8(status);
  w.num<uint64_t>(body.size());
  return w.out + body;
}

// One request: its length, then its bytes (executor_wire.h's Writer output). False once stdin is closed.
bool read_request(std::string& request) {
  uint64_t n = 0;
  if (!read_exact(reinterpret_cast<char*>(&n), sizeof n)) return false;
  if (n > wire::kMaxBlob + (1 << 20)) throw std::runtime_error("a request of " + std::to_string(n) + " bytes");
  request.assign(size_t(n), '\0');
  return read_exact(request.data(), request.size());
}

int serve(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: fanout-redisai-exec <device> <memory cap bytes> <intra-op> <inter-op>\n");
    return 2;
  }
  const uint64_t cap = std::strtoull(argv[2], nullptr, 10);
  const std::string out_of_memory = "ERR the run needs more memory than MEMORY_CAP leaves it (" + std::to_string(cap >> 20) +
                                    " MiB, and 256 MiB besides torch's tensors)";
  install_memory_cap(cap);
  set_torch_threads(std::atoi(argv[3]), std::atoi(argv[4]));
  // Torch's allocator caps tensors; this caps the rest (the interpreter's lists, strings): MEMORY_CAP and 256 MiB
  // of room over the process's data at start. Past it an allocation fails and so does the run, not the machine.
  if (cap > 0) {
    const uint64_t limit = data_bytes() + cap + (uint64_t(256) << 20);
    const rlimit r{limit, limit};
    ::setrlimit(RLIMIT_DATA, &r);
  }
  std::map<uint64_t, std::shared_ptr<TorchModel>> models;
  std::map<uint64_t, std::shared_ptr<TorchScript>> scripts;
  std::string request;
  for (;;) {
    if (!read_request(request)) return 0;  // the server closed its end
    wire::Reader in{request};
    std::string out;
    try {
      const char op = in.u8();
      const uint64_t id = in.num<uint64_t>();
      wire::Writer w;
      if (op == wire::kLoadModel) {
        const std::string device = in.str(), blob = in.str();
        models[id] = TorchModel::load(blob, device);
      } else if (op == wire::kLoadScript) {
        const std::string device = in.str(), source = in.str();
        const auto entry_points = in.strings();
        scripts[id] = TorchScript::compile(source, device, entry_points);
      } else if (op == wire::kDrop) {
        models.erase(id);
        scripts.erase(id);
      } else if (op == wire::kRunModel) {
        const uint32_t n = in.count();
        std::vector<std::vector<TensorValue>> requests(n);
        for (auto& r : requests) r = in.tensors();
        auto it = models.find(id);
        if (it == models.end()) throw BackendError("ERR the executor does not hold model " + std::to_string(id));
        std::vector<const std::vector<TensorValue>*> pointers;
        for (auto& r : requests) pointers.push_back(&r);
        const auto results = it->second->run(pointers);
        w.num<uint32_t>(uint32_t(results.size()));
        for (const auto& r : results) w.tensors(r);
      } else if (op == wire::kRunScript) {
        const std::string function = in.str();
        const auto inputs = in.tensors();
        const auto keys = in.strings(), args = in.strings();
        auto it = scripts.find(id);
        if (it == scripts.end()) throw BackendError("ERR the executor does not hold script " + std::to_string(id));
        w.tensors(it->second->run(function, inputs, keys, args));
      } else {
        throw std::runtime_error("unknown executor request " + std::to_string(int(op)));
      }
      out = reply(0, w.out);
    } catch (const BackendError& e) {  // torch's interpreter reports a failed allocation as its own error
      const std::string what = e.what();
      out = reply(1, what.find("bad_alloc") == std::string::npos ? what : out_of_memory);
    } catch (const std::bad_alloc&) {
      out = reply(1, out_of_memory);
    } catch (const std::exception& e) {  // a malformed request: nothing was run
      out = reply(1, std::string("ERR ") + e.what());
    }
    if (!send_all(1, out.data(), out.size())) return 0;  // stdout is the socket pair: the server has gone
  }
}

}  // namespace
}  // namespace redisai

int main(int argc, char** argv) {
  redisai::end_with_parent();
  return redisai::serve(argc, argv);
}
