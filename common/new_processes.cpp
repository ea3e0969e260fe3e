#include "common/new_processes.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <string_view>
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
std::string_view read_proc_text(const char* path, std::string& text) {
  static std::mutex mu;
  struct Open {
    int fd = -1;
    size_t size = 4096;  // a buffer the last text fitted in
  };
  static std::map<std::string, Open, std::less<>> open_files;
  Open* file = nullptr;
  Open at;
  {
    std::lock_guard<std::mutex> lock(mu);
    auto it = open_files.find(std::string_view(path));  // no key made to look (a mark looks three times)
    if (it == open_files.end()) it = open_files.emplace(path, Open{::open(path, O_RDONLY | O_CLOEXEC), 4096}).first;
    file = &it->second;  // std::map: stays where it is
    at = *file;
  }
  if (at.fd < 0) return {};
  constexpr size_t kMaxBytes = 16u << 20;
  text.resize(std::max(at.size, text.size()));  // the caller's buffer, kept between reads: not zeroed again
  for (;;) {
    const ssize_t n = ::pread(at.fd, text.data(), text.size(), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return {};
    if (size_t(n) < text.size() || text.size() >= kMaxBytes) return std::string_view(text.data(), size_t(n));
    text.resize(text.size() * 2);
    std::lock_guard<std::mutex> lock(mu);
    file->size = std::max(file->size, text.size());
  }
}

std::string read_proc_text(const char* path) {
  std::string text;
  return std::string(read_proc_text(path, text));
}

namespace {

// The number a text holds at `at` (after any blanks), or -1; `at` moves past it.
long long next_number(std::string_view text, size_t& at) {
  while (at < text.size() && (text[at] == ' ' || text[at] == '\t')) ++at;
  long long v = -1;
  const auto [end, ec] = std::from_chars(text.data() + at, text.data() + text.size(), v);
  if (ec != std::errc()) return -1;
  at = size_t(end - text.data());
  return v;
}

}  // namespace

ProcessMark mark_processes() {
  ProcessMark m;
  // Buffers kept between marks: one is taken every poll a job ends in (a 4 KiB string made and zeroed each read was
  // a fifth of a mark's cost).
  thread_local std::string load_text, stat_text, pid_max_text;
  // loadavg: "0.28 0.80 2.96 1/82 11941": running/threads alive, then the last pid handed out.
  const std::string_view load = read_proc_text("/proc/loadavg", load_text);
  size_t at = 0;
  for (int field = 0; field < 3; ++field) {  // the three load averages
    at = load.find(' ', at);
    if (at == std::string_view::npos) return m;
    ++at;
  }
  const long long running = next_number(load, at);
  if (running < 0 || at >= load.size() || load[at++] != '/') return m;
  const long long threads = next_number(load, at), last = next_number(load, at);
  if (threads < 0 || last < 0) return m;
  const std::string_view stat = read_proc_text("/proc/stat", stat_text);
  size_t forks_at = stat.find("\nprocesses ");
  if (forks_at == std::string_view::npos) return m;
  forks_at += 11;
  const long long forks = next_number(stat, forks_at);
  size_t pid_max_at = 0;
  const long long pid_max = next_number(read_proc_text("/proc/sys/kernel/pid_max", pid_max_text), pid_max_at);
  if (forks < 0 || pid_max < 0) return m;
  m.forks = uint64_t(forks);
  m.last_pid = pid_t(last);
  m.threads = threads;
  m.pid_max = long(pid_max);
  m.known = true;
  return m;
}

void for_each_process_since(const ProcessMark& since, const std::function<void(pid_t)>& f) {
  for_each_process_between(since, mark_processes(), f);
}

bool ring_held_between(const ProcessMark& since, const ProcessMark& now) {
  // The ring came round past the mark only if it handed out at least the pids it had free; forks counts more than
  // our namespace hands out (threads and other namespaces too), so this errs towards looking at every process.
  // The pids the ring skipped were held by threads alive at `since` or made after it (counted in forks): the larger
  // of the two marks' counts, since threads that end meanwhile give their pids back.
  const int64_t held = std::max(since.threads, now.threads);
  return since.known && now.known && now.pid_max > kReservedPids && now.forks >= since.forks &&
         now.forks - since.forks + uint64_t(held) < uint64_t(now.pid_max - kReservedPids);
}

void for_each_process_between(const ProcessMark& since, const ProcessMark& now, const std::function<void(pid_t)>& f) {
  const long pid_max = now.pid_max;
  const bool window = ring_held_between(since, now);
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
