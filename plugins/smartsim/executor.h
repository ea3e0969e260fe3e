// Models and scripts run in a process of the module's own, never in the database: a run that crashes (a script's
// INT64_MIN // -1 is SIGFPE, an unsafe sparse tensor's to_dense writes out of bounds) ends that process and
// fails the runs it held, with the signal named, while redis-server and every other client go on. A run past
// EXECUTION_TIMEOUT is stopped the same way (an endless script no longer wedges its device's queue). Memory
// that torch's capped allocator never sees (a script's huge Python list) is bounded by the process's own limit
// (MEMORY_CAP + 256 MiB over what it held at start): such a run fails, and what it took goes back with it.
//
// Each worker of a device's run queue has its own executor (fanout-redisai-exec, beside the module), started on
// its first run. Models and scripts are sent to it on first use, by id, and dropped when their key's value is
// gone; a new process (after a crash) is sent them again as they are used.
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "torch_backend.h"

namespace redisai {

struct ExecutorOptions {
  std::string device = "CPU";
  size_t memory_cap = 0;
  int intra_op = 0, inter_op = 0;
  int timeout_s = 300;  // EXECUTION_TIMEOUT
};

// What a run needs of a stored model or script: an id unique in the server's life, its source or blob, and the
// value itself (weakly: once the value is gone, the executor drops its copy).
struct Executable {
  uint64_t id = 0;
  bool is_model = true;
  std::string device;
  const std::string* payload = nullptr;                  // the model's blob or the script's source
  const std::vector<std::string>* entry_points = nullptr;  // scripts
  std::weak_ptr<const void> alive;
};

class Executor {
 public:
  explicit Executor(ExecutorOptions options);
  ~Executor();
  Executor(const Executor&) = delete;
  Executor& operator=(const Executor&) = delete;
  // Each throws BackendError with the reply's text ("ERR ...") when the run fails, the process dies or overruns.
  std::vector<std::vector<TensorValue>> run_model(const Executable& model, const std::vector<const std::vector<TensorValue>*>& requests);
  std::vector<TensorValue> run_script(const Executable& script, const std::string& function, const std::vector<TensorValue>& inputs,
                                      const std::vector<std::string>& keys, const std::vector<std::string>& args);
  pid_t pid() const { return pid_; }

 private:
  void start();
  void stop();
  void ensure_loaded(const Executable& e);
  // What bounds a request's wait for its reply. A run: EXECUTION_TIMEOUT. A load or drop: kLoadTimeoutS, for a
  // wedged executor only; its time is a fresh executor's start (libtorch) and a script's compilation, which are no
  // run (a 2 s EXECUTION_TIMEOUT stopped a load on a loaded machine, saying the script "ran" too long).
  enum class Bound { Run, Load };
  static constexpr int kLoadTimeoutS = 300;
  // Sends a request and reads its reply (past the status and the body's length); throws BackendError.
  std::string call(const std::string& request, const Executable& e, Bound bound);
  ExecutorOptions options_;
  pid_t pid_ = -1;
  int fd_ = -1;
  std::map<uint64_t, std::weak_ptr<const void>> loaded_;  // what this process holds
};

uint64_t next_executable_id();

}  // namespace redisai
