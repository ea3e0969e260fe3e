#include "module_helper.h"

#include <dlfcn.h>
#include <spawn.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>

#include "fanout_process.hpp"

extern char** environ;

namespace redisai {

std::string module_helper_path(const std::string& name, const char* override_env) {
  if (const char* set = std::getenv(override_env); set && *set) return set;
  Dl_info info{};
  if (dladdr(reinterpret_cast<void*>(&module_helper_path), &info) == 0 || !info.dli_fname) return name;
  std::string self = info.dli_fname;
  return self.substr(0, self.rfind('/') + 1) + name;
}

pid_t spawn_module_helper(const std::vector<std::string>& args, int& fd, std::string& error) {
  int sv[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) != 0) {
    error = std::string("cannot make a socket pair: ") + std::strerror(errno);
    return -1;
  }
  std::vector<std::string> copy = args;
  std::vector<char*> argv;
  for (auto& a : copy) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, sv[1], 0);
  posix_spawn_file_actions_adddup2(&fa, sv[1], 1);
  posix_spawn_file_actions_addclosefrom_np(&fa, 3);  // none of the server's sockets or files
  pid_t pid = -1;
  const int rc = posix_spawn(&pid, copy[0].c_str(), &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  ::close(sv[1]);
  if (rc != 0) {
    ::close(sv[0]);
    error = "cannot start " + copy[0] + ": " + std::strerror(rc);
    return -1;
  }
  fd = sv[0];
  return pid;
}

void end_with_parent() {
  // Without a pidfd (a kernel before 5.3) the helper still ends when its stdin closes.
  fanout_sdk::when_parent_ends([] { ::_exit(1); });
}

std::string signal_text(int sig) {
  const char* abbrev = sigabbrev_np(sig);
  return abbrev ? std::string("SIG") + abbrev : "signal " + std::to_string(sig);
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

}  // namespace redisai
