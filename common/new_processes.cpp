#include "common/new_processes.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>

namespace fanout {

namespace {

constexpr pid_t kReservedPids = 300;  // the kernel's RESERVED_PIDS: the ring restarts above them

}  // namespace

// A /proc file's text, or empty. Each is opened once and read again from its start (a seq_file makes its text
// anew on every read at offset 0): a job's start and end read three, and opening them was 7 % of the driver's CPU
// a run. Read whole, in one read: /proc/stat's "processes" line follows one line per CPU and the interrupt counts,
// past 8 KiB on a large host, and a second read at an offset would come from another making of the text (the head
// of one and the tail of the next). A read shorter than the buffer is the whole text (a one-record seq_file, as
// /proc/stat and /proc/loadavg are, or a sysctl, hands over all it made up to the count); a buffer the text filled
// is doubled and the text read again, and the size is kept for the file's next read. Not for a seq_file of many
// records (/proc/<pid>/maps), which hands over a record at a time.
std::string read_proc_text(const char* path) {
  static std::mutex mu;
  struct Open {
    int fd = -1;
    size_t size = 4096;  // a buffer the last text fitted in
  };
  static std::map<std::string, Open> open_files;
  Open* file = nullptr;
  Open at;
  {
    std::lock_guard<std::mutex> lock(mu);
    auto [it, fresh] = open_files.try_emplace(path);
    if (fresh) it->second.fd = ::open(path, O_RDONLY | O_CLOEXEC);
    file = &it->second;  // std::map: stays where it is
    at = *file;
  }
  if (at.fd < 0) return {};
  constexpr size_t kMaxBytes = 16u << 20;
  std::string text(at.size, '\0');
  for (;;) {
    const ssize_t n = ::pread(at.fd, text.data(), text.size(), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return {};
    if (size_t(n) < text.size() || text.size() >= kMaxBytes) {
      text.resize(size_t(n));
      return text;
    }
    text.resize(text.size() * 2);
    std::lock_guard<std::mutex> lock(mu);
    file->size = std::max(file->size, text.size());
  }
}

ProcessMark mark_processes() {
  ProcessMark m;
  // loadavg: "0.28 0.80 2.96 1/82 11941": running/threads alive, then the last pid handed out.
  long running = 0, threads = 0, last = 0;
  const std::string load = read_proc_text("/proc/loadavg");
  if (std::sscanf(load.c_str(), "%*f %*f %*f %ld/%ld %ld", &running, &threads, &last) != 3) return m;
  const std::string stat = read_proc_text("/proc/stat");
  const size_t at = stat.find("\nprocesses ");
  if (at == std::string::npos) return m;
  m.forks = std::strtoull(stat.c_str() + at + 11, nullptr, 10);
  m.last_pid = pid_t(last);
  m.threads = threads;
  m.pid_max = std::atol(read_proc_text("/proc/sys/kernel/pid_max").c_str());
  m.known = true;
  return m;
}

void for_each_process_since(const ProcessMark& since, const std::function<void(pid_t)>& f) {
  for_each_process_between(since, mark_processes(), f);
}

void for_each_process_between(const ProcessMark& since, const ProcessMark& now, const std::function<void(pid_t)>& f) {
  const long pid_max = now.pid_max;
  // The ring came round past the mark only if it handed out at least the pids it had free; forks counts more than
  // our namespace hands out (threads and other namespaces too), so this errs towards looking at every process.
  const bool window = since.known && now.known && pid_max > kReservedPids && now.forks >= since.forks &&
                      now.forks - since.forks + uint64_t(now.threads) < uint64_t(pid_max - kReservedPids);
  const pid_t from = since.last_pid, to = now.last_pid;
  const pid_t self = ::getpid();
  auto wanted = [&](pid_t p) { return p > 1 && p != self; };
  // A window shorter than the host's table of threads is visited pid by pid (a pid that is gone, or a thread's,
  // costs one failed open or a look at the same process again); a longer one by listing /proc.
  const long length = from <= to ? long(to - from) : long(pid_max - 1 - from) + long(to - (kReservedPids - 1));
  if (window && length <= now.threads) {
    for (long i = 1; i <= length; ++i) {
      long p = long(from) + i;
      if (p >= pid_max) p = p - pid_max + kReservedPids;
      if (wanted(pid_t(p))) f(pid_t(p));
    }
    return;
  }
  auto in_window = [&](pid_t p) { return from <= to ? (p > from && p <= to) : (p > from || p <= to); };
  DIR* proc = ::opendir("/proc");
  if (!proc) return;
  while (dirent* e = ::readdir(proc)) {
    const pid_t pid = pid_t(std::atol(e->d_name));
    if (wanted(pid) && (!window || in_window(pid))) f(pid);
  }
  ::closedir(proc);
}

}  // namespace fanout
