#include "executor.h"

#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstring>

#include "executor_wire.h"
#include "module_helper.h"

namespace redisai {

namespace {
using Clock = std::chrono::steady_clock;
}  // namespace

uint64_t next_executable_id() {
  static std::atomic<uint64_t> next{1};
  return next++;
}

Executor::Executor(ExecutorOptions options) : options_(std::move(options)) {}

Executor::~Executor() { stop(); }

void Executor::start() {
  std::string error;
  fd_ = -1;
  pid_ = spawn_module_helper({module_helper_path("fanout-redisai-exec", "FANOUT_REDISAI_EXEC"), options_.device,
                              std::to_string(options_.memory_cap), std::to_string(options_.intra_op), std::to_string(options_.inter_op)},
                             fd_, error);
  if (pid_ < 0) throw BackendError("ERR the executor: " + error);
  loaded_.clear();
}

void Executor::stop() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  if (pid_ > 0) {
    ::kill(pid_, SIGKILL);
    while (::waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
    }
  }
  pid_ = -1;
  loaded_.clear();
}

std::string Executor::call(const std::string& request, const Executable& e, Bound bound) {
  if (pid_ < 0) start();
  const char* what = e.is_model ? "model" : "script";
  // The process is gone (its end of the socket closed): reaped with its signal (it is exiting: a second at
  // most), then a fresh process for the next run.
  auto lost = [&](const std::string& why) -> BackendError {
    int st = 0;
    bool reaped = false;
    for (int i = 0; i < 1000 && pid_ > 0 && !reaped; ++i) {
      reaped = ::waitpid(pid_, &st, WNOHANG) == pid_;
      if (!reaped) ::usleep(1000);
    }
    if (reaped) pid_ = -1;
    stop();
    if (reaped && WIFSIGNALED(st))
      return BackendError(std::string("ERR the ") + what + " died of " + signal_text(WTERMSIG(st)) + " while it ran; the server goes on");
    return BackendError(std::string("ERR the ") + what + " " + why);
  };
  const uint64_t length = request.size();
  if (!send_all(fd_, reinterpret_cast<const char*>(&length), sizeof length) || !send_all(fd_, request.data(), request.size()))
    throw lost("could not be handed to its executor");
  // The reply, within its limit: status, then a length-prefixed body.
  const int limit_s = bound == Bound::Run ? options_.timeout_s : std::max(kLoadTimeoutS, options_.timeout_s);
  const auto deadline = Clock::now() + std::chrono::seconds(limit_s);
  std::string in;
  auto read_exact = [&](size_t n) {
    while (in.size() < n) {
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
      if (left <= 0) {
        stop();
        if (bound == Bound::Load)
          throw BackendError(std::string("ERR the ") + what + "'s executor did not load it within " + std::to_string(limit_s) + " s and was stopped");
        throw BackendError(std::string("ERR the ") + what + " ran longer than EXECUTION_TIMEOUT (" + std::to_string(options_.timeout_s) +
                           " s) and was stopped");
      }
      pollfd p{fd_, POLLIN, 0};
      const int r = ::poll(&p, 1, int(std::min<long long>(left, 1000)));
      if (r < 0 && errno != EINTR) throw lost("lost its executor");
      if (r <= 0) continue;
      char buf[1 << 16];
      const ssize_t got = ::read(fd_, buf, std::min(sizeof buf, n - in.size()));
      if (got < 0 && errno == EINTR) continue;
      if (got <= 0) throw lost("lost its executor");
      in.append(buf, size_t(got));
    }
  };
  constexpr size_t kHead = 1 + sizeof(uint64_t);
  read_exact(kHead);
  wire::Reader head{in};
  const char status = head.u8();
  const uint64_t body = head.num<uint64_t>();
  if (body > wire::kMaxBlob) throw lost("sent a malformed reply");
  read_exact(kHead + size_t(body));
  std::string reply = in.substr(kHead);
  if (status != 0) throw BackendError(reply.rfind("ERR", 0) == 0 ? reply : "ERR " + reply);
  return reply;
}

void Executor::ensure_loaded(const Executable& e) {
  if (pid_ >= 0)
    for (auto it = loaded_.begin(); it != loaded_.end();) {  // values whose keys are gone: dropped here too
      if (!it->second.expired()) {
        ++it;
        continue;
      }
      wire::Writer w;
      w.u8(wire::kDrop);
      w.num<uint64_t>(it->first);
      const uint64_t id = it->first;
      it = loaded_.erase(it);
      Executable gone = e;
      gone.id = id;
      call(w.out, gone, Bound::Load);
      if (pid_ < 0) return ensure_loaded(e);  // replaced meanwhile
    }
  if (pid_ >= 0 && loaded_.count(e.id)) return;
  if (pid_ < 0) start();
  wire::Writer w;
  w.u8(e.is_model ? wire::kLoadModel : wire::kLoadScript);
  w.num<uint64_t>(e.id);
  w.str(e.device);
  w.str(*e.payload);
  if (!e.is_model) w.strings(e.entry_points ? *e.entry_points : std::vector<std::string>{});
  call(w.out, e, Bound::Load);
  if (pid_ >= 0) loaded_[e.id] = e.alive;
}

std::vector<std::vector<TensorValue>> Executor::run_model(const Executable& model, const std::vector<const std::vector<TensorValue>*>& requests) {
  ensure_loaded(model);
  wire::Writer w;
  w.u8(wire::kRunModel);
  w.num<uint64_t>(model.id);
  w.num<uint32_t>(uint32_t(requests.size()));
  for (const auto* r : requests) w.tensors(*r);
  const std::string reply = call(w.out, model, Bound::Run);
  wire::Reader r{reply};
  std::vector<std::vector<TensorValue>> out(r.count());
  for (auto& o : out) o = r.tensors();
  if (out.size() != requests.size()) throw BackendError("ERR the executor answered " + std::to_string(out.size()) + " of " + std::to_string(requests.size()) + " requests");
  return out;
}

std::vector<TensorValue> Executor::run_script(const Executable& script, const std::string& function, const std::vector<TensorValue>& inputs,
                                              const std::vector<std::string>& keys, const std::vector<std::string>& args) {
  ensure_loaded(script);
  wire::Writer w;
  w.u8(wire::kRunScript);
  w.num<uint64_t>(script.id);
  w.str(function);
  w.tensors(inputs);
  w.strings(keys);
  w.strings(args);
  const std::string reply = call(w.out, script, Bound::Run);
  wire::Reader r{reply};
  return r.tensors();
}

}  // namespace redisai
