// The processes made since a moment: what a job may have left running on this host is among them. Linux hands out
// pids in a ring (each after the last one given, wrapping at pid_max), so the processes made since a mark hold the
// pids after the mark's last pid up to the current last one; looking at those alone, not every process of the host,
// keeps the cost of a job's end from growing with how busy the host is (a login node runs thousands).
#pragma once
#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace fanout {

struct ProcessMark {
  pid_t last_pid = 0;  // the pid handed out last (/proc/loadavg), in our pid namespace
  uint64_t forks = 0;  // processes and threads made since boot, in every namespace (/proc/stat "processes")
  int64_t threads = 0;  // threads alive (/proc/loadavg), each holding a pid the ring skips
  long pid_max = 0;     // the ring's size (/proc/sys/kernel/pid_max)
  bool known = false;   // false when /proc did not tell: then every process counts as new
};

ProcessMark mark_processes();

// A /proc file's whole text in one read (or empty): a one-record seq_file such as /proc/stat makes its text anew at
// every read, so the text is never put together from two reads. The file stays open for the next call.
std::string read_proc_text(const char* path);
// The same into `buffer` (kept by the caller between reads: nothing allocated once it has grown), a view of it.
std::string_view read_proc_text(const char* path, std::string& buffer);

// Calls `f` with each pid (other than this process's and init's) that may be a process made since `since`: those in
// the ring after since.last_pid up to the current last pid, or every process when the ring may have come round
// past the mark (as many pids handed out since as the ring has free) or /proc does not tell. A pid given may be
// gone already, or a thread's (its process's files answer for it).
void for_each_process_since(const ProcessMark& since, const std::function<void(pid_t)>& f);
// Whether the ring handed out fewer pids between the marks than it holds free: then each pid after since.last_pid up
// to now.last_pid was handed out once in between, and a pid given to a process made after `since` that is gone
// now was given to no other process since.
bool ring_held_between(const ProcessMark& since, const ProcessMark& now);
// The same up to `now`, a mark taken after `since` (one mark can serve every job that ends in a poll).
void for_each_process_between(const ProcessMark& since, const ProcessMark& now, const std::function<void(pid_t)>& f);

}  // namespace fanout
