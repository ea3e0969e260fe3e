#include "sandbox_check.h"

#include "module_helper.h"

#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <string>
#include <vector>


namespace redisai {
namespace {

using Clock = std::chrono::steady_clock;

// The checkers running now, bounded: a slot is taken before a child starts and given back when it has ended.
struct Slots {
  std::mutex mu;
  std::condition_variable freed;
  int limit = 2, running = 0, peak = 0;
};
Slots& slots() {
  static Slots s;
  return s;
}
struct SlotHeld {
  SlotHeld() {
    Slots& s = slots();
    std::unique_lock<std::mutex> lock(s.mu);
    s.freed.wait(lock, [&] { return s.running < s.limit; });
    s.peak = std::max(s.peak, ++s.running);
  }
  ~SlotHeld() {
    Slots& s = slots();
    {
      std::lock_guard<std::mutex> lock(s.mu);
      --s.running;
    }
    s.freed.notify_one();
  }
};

}  // namespace

void set_sandbox_limit(int processes) {
  std::lock_guard<std::mutex> lock(slots().mu);
  slots().limit = std::max(1, processes);
}
int sandbox_limit() {
  std::lock_guard<std::mutex> lock(slots().mu);
  return slots().limit;
}
int sandbox_peak() {
  std::lock_guard<std::mutex> lock(slots().mu);
  return slots().peak;
}

std::string check_in_sandbox(PayloadKind kind, std::string_view payload, const std::string& device, size_t memory_cap,
                             const std::vector<std::string>& entry_points, int timeout_s) {
  const char* what = kind == PayloadKind::Model ? "model" : "script";
  const SlotHeld slot;
  std::vector<std::string> args = {module_helper_path("fanout-redisai-check", "FANOUT_REDISAI_CHECK"), std::string(1, char(kind)), device,
                                   std::to_string(memory_cap)};
  args.insert(args.end(), entry_points.begin(), entry_points.end());  // a script's, which must be its functions
  int sv[2] = {-1, -1};
  std::string spawn_error;
  const pid_t pid = spawn_module_helper(args, sv[0], spawn_error);
  if (pid < 0) return "ERR the " + std::string(what) + " checker: " + spawn_error;
  // The request: the payload's size, then its bytes. The child reads it whole before loading.
  const std::string header = std::to_string(payload.size()) + "\n";
  const bool sent = send_all(sv[0], header.data(), header.size()) && send_all(sv[0], payload.data(), payload.size());
  ::shutdown(sv[0], SHUT_WR);
  std::string answer;
  const auto deadline = Clock::now() + std::chrono::seconds(timeout_s);
  bool timed_out = false;
  for (;;) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
    if (left <= 0) {
      timed_out = true;
      break;
    }
    pollfd p{sv[0], POLLIN, 0};
    if (::poll(&p, 1, int(std::min<long long>(left, 1000))) <= 0) continue;
    char buf[4096];
    ssize_t n = ::read(sv[0], buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    if (answer.size() < 4096) answer.append(buf, size_t(n));
  }
  ::close(sv[0]);
  if (timed_out) ::kill(pid, SIGKILL);
  int st = 0;
  while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
  }
  while (!answer.empty() && (answer.back() == '\n' || answer.back() == '\r')) answer.pop_back();
  if (timed_out) return std::string("ERR the ") + what + " loader took more than " + std::to_string(timeout_s) + " s: the " + what + " is rejected";
  if (WIFSIGNALED(st))
    return std::string("ERR the ") + what + " loader died of " + signal_text(WTERMSIG(st)) + ": the " + what + " is rejected";
  if (WIFEXITED(st) && WEXITSTATUS(st) == 0 && answer == "OK") return "";
  if (!sent && answer.empty()) return std::string("ERR the ") + what + " loader stopped reading its input";
  if (answer.rfind("ERR", 0) == 0) return answer;
  return std::string("ERR the ") + what + " loader failed (exit status " + std::to_string(WIFEXITED(st) ? WEXITSTATUS(st) : -1) + ")";
}

}  // namespace redisai
