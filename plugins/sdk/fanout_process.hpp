// Programs a plugin ships and starts: where they are, starting them without a shell, waiting for them (SDK,
// header-only).
#pragma once
#include <dlfcn.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <functional>
#include <stdexcept>
#include <string>
#include <thread>
#include <utility>
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

// A program a role starts: argv only, never through a shell. With capture_stdout, `out` reads its standard output;
// with feed_stdin, `in` writes its standard input (the caller closes both); otherwise it shares the rank's.
// `extra_env` ("NAME=value") is added to the rank's environment: the way to hand a child a secret, which its
// command line would show to every user of the node.
// capture_stderr gives `err` the same way; cwd starts it in that folder; own_process_group makes it lead a process
// group of its own, so that ::kill(-pid, sig) reaches whatever it started in turn (a shell's children).
struct Child {
  pid_t pid = -1;
  int out = -1;
  int in = -1;
  int err = -1;
};
struct SpawnOptions {
  bool capture_stdout = false;
  bool feed_stdin = false;
  std::vector<std::string> extra_env;
  bool capture_stderr = false;
  std::string cwd;
  bool own_process_group = false;
};
inline Child spawn_program(const std::vector<std::string>& args, const SpawnOptions& o) {
  int out[2] = {-1, -1}, in[2] = {-1, -1}, err[2] = {-1, -1};
  auto close_all = [&] {
    for (int fd : {out[0], out[1], in[0], in[1], err[0], err[1]})
      if (fd >= 0) ::close(fd);
  };
  if ((o.capture_stdout && ::pipe2(out, O_CLOEXEC) != 0) || (o.feed_stdin && ::pipe2(in, O_CLOEXEC) != 0) ||
      (o.capture_stderr && ::pipe2(err, O_CLOEXEC) != 0)) {
    close_all();
    throw std::runtime_error("cannot start " + args.at(0) + ": no pipe");
  }
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  if (o.capture_stdout) posix_spawn_file_actions_adddup2(&fa, out[1], 1);
  if (o.feed_stdin) posix_spawn_file_actions_adddup2(&fa, in[0], 0);
  if (o.capture_stderr) posix_spawn_file_actions_adddup2(&fa, err[1], 2);
  if (!o.cwd.empty()) posix_spawn_file_actions_addchdir_np(&fa, o.cwd.c_str());
  std::vector<std::string> copy = args;
  std::vector<char*> argv;
  for (auto& a : copy) argv.push_back(a.data());
  argv.push_back(nullptr);
  std::vector<std::string> env_text = o.extra_env;
  std::vector<char*> envp;
  for (auto& e : env_text) envp.push_back(e.data());
  for (char** e = environ; *e; ++e) envp.push_back(*e);  // the first of a name wins in getenv: ours
  envp.push_back(nullptr);
  // The rank ignores SIGPIPE (it reports a lost peer itself); a program it starts gets the default back, so that
  // one writing to a rank that has gone away ends instead of running on.
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t defaults;
  sigemptyset(&defaults);
  sigaddset(&defaults, SIGPIPE);
  posix_spawnattr_setsigdefault(&attr, &defaults);
  posix_spawnattr_setflags(&attr, short(POSIX_SPAWN_SETSIGDEF | (o.own_process_group ? POSIX_SPAWN_SETPGROUP : 0)));
  if (o.own_process_group) posix_spawnattr_setpgroup(&attr, 0);
  Child c;
  const int rc = posix_spawnp(&c.pid, argv[0], &fa, &attr, argv.data(), envp.data());
  posix_spawn_file_actions_destroy(&fa);
  posix_spawnattr_destroy(&attr);
  if (rc != 0) {
    close_all();
    throw std::runtime_error("cannot start " + args[0] + ": " + std::strerror(rc));
  }
  if (o.capture_stdout) ::close(out[1]), c.out = out[0];
  if (o.feed_stdin) ::close(in[0]), c.in = in[1];
  if (o.capture_stderr) ::close(err[1]), c.err = err[0];
  return c;
}
inline Child spawn_program(const std::vector<std::string>& args, bool capture_stdout) {
  SpawnOptions o;
  o.capture_stdout = capture_stdout;
  return spawn_program(args, o);
}
// Waits for a started program: its exit status, or 128 + the signal that killed it.
inline int wait_exit(pid_t pid) {
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

// A pidfd of the process (Linux 5.3+): readable once it has ended, so an exit can wake a poll. -1 where the kernel
// has none.
inline int pidfd_of(pid_t pid) {
#ifdef SYS_pidfd_open
  return int(::syscall(SYS_pidfd_open, pid, 0));
#else
  (void)pid;
  return -1;
#endif
}

// Waits up to timeout_ms for a started program, then kills it (SIGKILL) and reaps it. Woken by the program's pidfd
// as it ends; where the kernel has none, polls with growing pauses (100 us up to 20 ms). Never SIGCHLD: the host
// process owns its signal handlers.
struct Exit {
  int status = 0;       // the exit status, or 128 + the signal that ended it; -1 when reaped elsewhere (unknown)
  bool killed = false;  // true when the deadline passed and this call killed it
};
inline Exit wait_exit_within(pid_t pid, int64_t timeout_ms) {
  Exit e;
  int status = 0;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  int fd = pidfd_of(pid);
  bool told = false;  // the pidfd said it ended
  for (int pause_us = 100;; pause_us = std::min(pause_us * 2, 20000)) {
    const pid_t got = ::waitpid(pid, &status, WNOHANG);
    if (got == pid) break;
    if (got == 0 && std::exchange(told, false) && fd >= 0) ::close(std::exchange(fd, -1));  // told, yet not waitable: the pauses
    if (got < 0 && errno == ECHILD) {  // reaped elsewhere: no status to give, and its pid may be another's now
      if (fd >= 0) ::close(fd);
      e.status = -1;
      return e;
    }
    const auto now = std::chrono::steady_clock::now();
    if (now > deadline) {
      ::kill(pid, SIGKILL);
      e.killed = true;
      while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
      }
      break;
    }
    if (fd >= 0) {
      pollfd p{fd, POLLIN, 0};
      const auto left_ms = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count() + 1;
      const int ready = ::poll(&p, 1, int(std::min<int64_t>(left_ms, 1 << 30)));
      if (ready == 0 || (ready < 0 && errno == EINTR)) continue;  // the deadline, or a signal: looked at again
      if (ready > 0) {  // it ended: reaped above
        told = true;
        continue;
      }
      ::close(std::exchange(fd, -1));                              // poll itself failed: the pauses, not a spin
    }
    std::this_thread::sleep_for(std::chrono::microseconds(pause_us));
  }
  if (fd >= 0) ::close(fd);
  e.status = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  return e;
}

// Calls fn, on a thread of its own, once the process that started this one has ended: a helper or a rank that must
// not outlive its starter (a killed redis-server, an mpirun SIGKILLed by Grid Engine). A pidfd follows the process,
// not the thread that forked. False, and nothing is ever called, where it cannot be watched (a kernel before 5.3).
inline bool when_parent_ends(std::function<void()> fn) {
  const int fd = pidfd_of(::getppid());
  if (fd < 0) return false;
  std::thread([fd, fn = std::move(fn)] {
    pollfd p{fd, POLLIN, 0};
    while (::poll(&p, 1, -1) < 0 && errno == EINTR) {
    }
    fn();
  }).detach();
  return true;
}

}  // namespace fanout_sdk
