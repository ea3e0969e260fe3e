// Programs a plugin ships and starts: where they are, starting them without a shell, waiting for them (SDK,
// header-only).
#pragma once
#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

namespace fanout_sdk {

// The folder holding the plugin that calls this. Hidden, so that every plugin has its own copy and dladdr
// names that plugin's shared object.
__attribute__((visibility("hidden"))) inline std::string plugin_dir() {
  Dl_info info{};
  dladdr(reinterpret_cast<void*>(&plugin_dir), &info);
  const std::string self = info.dli_fname ? info.dli_fname : "";
  const auto slash = self.rfind('/');
  return slash == std::string::npos ? "." : self.substr(0, slash);
}

// A program shipped with the plugins: <build>/<name> (plugins in <build>/plugins), or <prefix>/bin/<name> (plugins
// in <prefix>/lib/fanout/plugins); else the bare name, found on PATH.
inline std::string companion_program(const std::string& name) {
  const std::string plugins = plugin_dir();
  const std::string parent = plugins.substr(0, plugins.rfind('/'));
  for (const std::string& p : {parent + "/" + name, parent + "/../../bin/" + name})
    if (::access(p.c_str(), X_OK) == 0) return p;
  return name;
}

// A program a role starts: argv only, never through a shell. With capture_stdout, `out` reads its standard output
// (the caller closes it); otherwise it writes to the rank's own output.
struct Child {
  pid_t pid = -1;
  int out = -1;
};
inline Child spawn_program(const std::vector<std::string>& args, bool capture_stdout) {
  int fds[2] = {-1, -1};
  if (capture_stdout && ::pipe2(fds, O_CLOEXEC) != 0) throw std::runtime_error("cannot start " + args.at(0) + ": no pipe");
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  if (capture_stdout) posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
  std::vector<std::string> copy = args;
  std::vector<char*> argv;
  for (auto& a : copy) argv.push_back(a.data());
  argv.push_back(nullptr);
  Child c;
  const int rc = posix_spawnp(&c.pid, argv[0], &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (capture_stdout) ::close(fds[1]);
  if (rc != 0) {
    if (capture_stdout) ::close(fds[0]);
    throw std::runtime_error("cannot start " + args[0] + ": " + std::strerror(rc));
  }
  c.out = fds[0];
  return c;
}
// Waits for a started program: its exit status, or 128 + the signal that killed it.
inline int wait_exit(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// Waits up to timeout_ms for a started program, then kills it (SIGKILL) and reaps it. Polls with growing pauses
// (100 us up to 20 ms) rather than catching SIGCHLD: the host process owns its signal handlers.
struct Exit {
  int status = 0;       // the exit status, or 128 + the signal that ended it
  bool killed = false;  // true when the deadline passed and this call killed it
};
inline Exit wait_exit_within(pid_t pid, int64_t timeout_ms) {
  Exit e;
  int status = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  for (int pause_us = 100;; pause_us = std::min(pause_us * 2, 20000)) {
    if (::waitpid(pid, &status, WNOHANG) == pid) break;
    if (std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      e.killed = true;
      while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      break;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(pause_us));
  }
  e.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return e;
}

}  // namespace fanout_sdk
