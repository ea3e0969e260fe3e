// Starting a program as posix_spawn does (execve of a path, no shell; the caller waits for it), for the local
// launcher, which starts one a run: on a stack kept for the next start. glibc's posix_spawn maps a stack for the
// child and unmaps it after every start, and checks each file action's descriptor against the limit (getrlimit):
// 4 % of a 100,000-run local sweep's driver CPU, the unmap's TLB flush reaching the driver's other threads' CPUs.
#pragma once
#include <sys/types.h>

namespace fanout {

struct SpawnRequest {
  const char* path = nullptr;           // the program, run as it is (no PATH lookup)
  char* const* argv = nullptr;          // ends with nullptr
  char* const* envp = nullptr;          // ends with nullptr
  const char* cwd = nullptr;            // where it starts; nullptr: here
  const char* in = "/dev/null";         // its standard input, opened read-only
  const char* out = nullptr;            // its standard output and error, appended to (made 0644 when absent);
  const char* err = nullptr;            //   nullptr: ours
  pid_t process_group = -1;             // the group it joins (0: one of its own, led by it); -1: ours
};

// The child's pid, or -1 with `error` set to why it could not start (a file that did not open, the exec), as
// posix_spawn returns it; such a child is reaped already. The child starts with every signal's default action and
// none blocked, as POSIX_SPAWN_SETSIGDEF and POSIX_SPAWN_SETSIGMASK with full and empty sets give it.
pid_t spawn_program(const SpawnRequest& request, int& error);

}  // namespace fanout
