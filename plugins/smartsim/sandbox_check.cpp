#include "sandbox_check.h"

#include <dlfcn.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <cstring>
#include <string>
#include <vector>


extern char** environ;

namespace redisai {
namespace {

using Clock = std::chrono::steady_clock;

// fanout-redisai-check sits next to the module's .so (the build's plugins/ folder, or lib/fanout/plugins).
std::string checker_path() {
  if (const char* set = std::getenv("FANOUT_REDISAI_CHECK"); set && *set) return set;  // for harnesses outside the build's plugins/
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&checker_path), &info) == 0 || !info.dli_fname) return "fanout-redisai-check";
  std::string self = info.dli_fname;
  return self.substr(0, self.rfind('/') + 1) + "fanout-redisai-check";
}

bool send_all(int fd, const char* p, size_t n) {
  while (n > 0) {
    ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= size_t(w);
  }
  return true;
}

std::string signal_text(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
}

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

std::string check_in_sandbox(PayloadKind kind, std::string_view payload, const std::string& device, size_t memory_cap, int timeout_s) {
  const char* what = kind == PayloadKind::Model ? "model" : "script";
  const SlotHeld slot;
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) return std::string("ERR cannot start the ") + what + " checker: " + std::strerror(errno);
  const std::string exe = checker_path(), cap = std::to_string(memory_cap);
  std::vector<std::string> args = {exe, std::string(1, char(kind)), device, cap};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, sv[1], 0);
  posix_spawn_file_actions_adddup2(&fa, sv[1], 1);
  posix_spawn_file_actions_addclosefrom_np(&fa, 3);  // none of the server's sockets or files
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, exe.c_str(), &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  ::close(sv[1]);
  if (rc != 0) {
    ::close(sv[0]);
    return "ERR cannot start " + exe + ": " + std::strerror(rc);
  }
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
