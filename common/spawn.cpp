#include "common/spawn.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <csignal>
#include <mutex>

namespace fanout {

namespace {

struct Child {
  const SpawnRequest* request;
  volatile int error = 0;  // written by the child, which shares our memory until its exec
};

// `fd` on `file`, opened with `flags`; false with errno set when it cannot be. `fd` is closed first (the child's own
// table: no CLONE_FILES), as glibc does, so that a driver at its limit of open files still starts ranks.
bool put_on(int fd, const char* file, int flags) {
  ::close(fd);
  const int opened = ::open(file, flags, 0644);
  if (opened < 0) return false;
  if (opened == fd) return true;
  const bool moved = ::dup2(opened, fd) == fd;
  ::close(opened);
  return moved;
}

// The child, on the kept stack, sharing our memory (CLONE_VM) while we wait (CLONE_VFORK): system calls only, as
// glibc's own spawn child makes them. Our signal handlers must not run here: every signal is blocked until each
// one's action is the default.
int child_main(void* arg) {
  Child& child = *static_cast<Child*>(arg);
  const SpawnRequest& r = *child.request;
  struct sigaction action = {};
  action.sa_handler = SIG_DFL;
  for (int sig = 1; sig < NSIG; ++sig)
    if (sig != SIGKILL && sig != SIGSTOP) ::sigaction(sig, &action, nullptr);  // the C library's own refuse: left
  const bool ready = (r.process_group < 0 || ::setpgid(0, r.process_group) == 0) && (!r.cwd || ::chdir(r.cwd) == 0) &&
                     (!r.in || put_on(0, r.in, O_RDONLY)) && (!r.out || put_on(1, r.out, O_WRONLY | O_CREAT | O_APPEND)) &&
                     (!r.err || put_on(2, r.err, O_WRONLY | O_CREAT | O_APPEND));
  if (ready) {
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::execve(r.path, r.argv, r.envp);
  }
  child.error = errno ? errno : ECHILD;
  ::_exit(127);
}

}  // namespace

pid_t spawn_program(const SpawnRequest& request, int& error) {
  // Frames of the few calls above, one start at a time (CLONE_VFORK holds the starting thread until the exec).
  constexpr size_t kStackBytes = 64 << 10;
  alignas(64) static char stack[kStackBytes];
  static std::mutex one_at_a_time;
  std::lock_guard<std::mutex> lock(one_at_a_time);
  Child child{&request};
  sigset_t all, before;
  sigfillset(&all);
  ::pthread_sigmask(SIG_BLOCK, &all, &before);
  const pid_t pid = ::clone(child_main, stack + kStackBytes, CLONE_VM | CLONE_VFORK | SIGCHLD, &child);
  error = pid < 0 ? errno : child.error;
  ::pthread_sigmask(SIG_SETMASK, &before, nullptr);
  if (pid < 0) return -1;
  if (error) {
    ::waitpid(pid, nullptr, 0);
    return -1;
  }
  return pid;
}

}  // namespace fanout
