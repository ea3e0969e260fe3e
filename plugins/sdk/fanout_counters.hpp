// Performance counters of a rank's work (issue 54): the kernel's perf_event_open, the interface perf stat and
// PAPI's perf_event component read (SDK, header-only; fanout-rank and the exec plugin share it). A counter is a
// perf name (instructions, cycles, task-clock, page-faults, ...) or one of PAPI's preset names for the same event
// (PAPI_TOT_INS, PAPI_TOT_CYC, PAPI_BR_INS, PAPI_BR_MSP, PAPI_REF_CYC). User space only (exclude_kernel):
// perf_event_paranoid 2, the default, allows that for one's own processes; so page faults are those taken in user
// space (not inside a system call), and context switches and migrations, which the kernel counts in kernel mode,
// are not offered (resource.voluntary_switches and involuntary_switches count them).
#pragma once
#include <linux/perf_event.h>
#include <sys/ioctl.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <string>
#include <vector>

#include "fanout_plugin.h"

namespace fanout_sdk {

struct CounterSpec {
  const char* name;  // as the user gives it
  uint32_t type;     // PERF_TYPE_HARDWARE or PERF_TYPE_SOFTWARE
  uint64_t config;
  const char* unit;  // "count", or "s" for task-clock (read in ns)
};

inline const std::vector<CounterSpec>& known_counters() {
  static const std::vector<CounterSpec> k = {
      {"instructions", PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS, "count"},
      {"cycles", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES, "count"},
      {"ref-cycles", PERF_TYPE_HARDWARE, PERF_COUNT_HW_REF_CPU_CYCLES, "count"},
      {"branch-instructions", PERF_TYPE_HARDWARE, PERF_COUNT_HW_BRANCH_INSTRUCTIONS, "count"},
      {"branch-misses", PERF_TYPE_HARDWARE, PERF_COUNT_HW_BRANCH_MISSES, "count"},
      {"cache-references", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CACHE_REFERENCES, "count"},
      {"cache-misses", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CACHE_MISSES, "count"},
      {"PAPI_TOT_INS", PERF_TYPE_HARDWARE, PERF_COUNT_HW_INSTRUCTIONS, "count"},
      {"PAPI_TOT_CYC", PERF_TYPE_HARDWARE, PERF_COUNT_HW_CPU_CYCLES, "count"},
      {"PAPI_REF_CYC", PERF_TYPE_HARDWARE, PERF_COUNT_HW_REF_CPU_CYCLES, "count"},
      {"PAPI_BR_INS", PERF_TYPE_HARDWARE, PERF_COUNT_HW_BRANCH_INSTRUCTIONS, "count"},
      {"PAPI_BR_MSP", PERF_TYPE_HARDWARE, PERF_COUNT_HW_BRANCH_MISSES, "count"},
      {"task-clock", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_TASK_CLOCK, "s"},
      {"page-faults", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS, "count"},
      {"minor-faults", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS_MIN, "count"},
      {"major-faults", PERF_TYPE_SOFTWARE, PERF_COUNT_SW_PAGE_FAULTS_MAJ, "count"},
  };
  return k;
}

inline const CounterSpec* counter_named(const std::string& name) {
  for (auto& c : known_counters())
    if (name == c.name) return &c;
  return nullptr;
}

// "a,b,c" -> the names, in order (blanks around each dropped).
inline std::vector<std::string> counter_names(const std::string& list) {
  std::vector<std::string> out;
  std::string word;
  auto take = [&] {
    while (!word.empty() && (word.back() == ' ' || word.back() == '\t')) word.pop_back();
    size_t b = word.find_first_not_of(" \t");
    if (b != std::string::npos) out.push_back(word.substr(b));
    word.clear();
  };
  for (char c : list) {
    if (c == ',') take();
    else word += c;
  }
  take();
  return out;
}

// Opens a counter on this process: with `for_exec`, disabled until a child this process starts execs (inherited by
// the child, enabled at its exec: what perf stat does), else disabled until enable_counter. Inherited by threads
// and children started after. Returns the fd, or -errno.
inline int open_counter(const CounterSpec& c, bool for_exec) {
  perf_event_attr a;
  std::memset(&a, 0, sizeof a);
  a.size = sizeof a;
  a.type = c.type;
  a.config = c.config;
  a.disabled = 1;
  a.inherit = 1;
  a.enable_on_exec = for_exec ? 1 : 0;
  a.exclude_kernel = 1;
  a.exclude_hv = 1;
  a.read_format = PERF_FORMAT_TOTAL_TIME_ENABLED | PERF_FORMAT_TOTAL_TIME_RUNNING;
  const long fd = ::syscall(SYS_perf_event_open, &a, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
  return fd < 0 ? -errno : int(fd);
}

inline void enable_counter(int fd) { ::ioctl(fd, PERF_EVENT_IOC_ENABLE, 0); }
// Stops every counter this process has opened so far (fanout-rank's around the role): a plugin that counts each
// program it starts (exec) calls it first, so its programs do not carry the rank's counters beside their own (two
// sets would share the PMU and be multiplexed). The rank's figures are then not recorded.
inline void stop_counters_opened_so_far() { ::prctl(PR_TASK_PERF_EVENTS_DISABLE, 0, 0, 0, 0); }
inline void disable_counter(int fd) { ::ioctl(fd, PERF_EVENT_IOC_DISABLE, 0); }

// The metric a counter is recorded as: resource.counter.<name> (what a run cost: the report's Resources section).
inline std::string counter_metric(const CounterSpec& c) { return std::string(FANOUT_RESOURCE_METRIC_PREFIX) + "counter." + c.name; }

// Why this node cannot count `c`, with what to change; "" when it can (tried: opened and closed again).
inline std::string counter_unavailable(const CounterSpec& c) {
  const int fd = open_counter(c, false);
  if (fd >= 0) {
    ::close(fd);
    return "";
  }
  const int err = -fd;
  std::string why = std::string(c.name) + ": perf_event_open: " + std::strerror(err);
  if (c.type == PERF_TYPE_HARDWARE && (err == ENOENT || err == EOPNOTSUPP || err == ENODEV))
    why += " (this node has no hardware counters: /sys/bus/event_source/devices/cpu is missing, as in a virtual machine "
           "without a virtual PMU; run on a node that has them, or count software events such as task-clock)";
  else if (err == EACCES || err == EPERM)
    why += " (/proc/sys/kernel/perf_event_paranoid forbids it, or a seccomp profile blocks perf_event_open: at most 2 is "
           "needed for user-space counts of one's own processes)";
  else if (err == ENOSYS)
    why += " (the kernel has no perf events)";
  return why;
}

// The count, scaled up when the kernel multiplexed it (time enabled / time running), and task-clock in seconds.
// nullopt when it never ran.
inline std::optional<double> read_counter(int fd, const CounterSpec& c) {
  uint64_t v[3] = {0, 0, 0};
  if (::read(fd, v, sizeof v) != ssize_t(sizeof v) || v[2] == 0) return std::nullopt;
  double value = double(v[0]) * (v[1] > v[2] ? double(v[1]) / double(v[2]) : 1.0);
  if (std::strcmp(c.unit, "s") == 0) value /= 1e9;
  return value;
}

// The counters this run asks for (the driver's --counters; fanout-rank sets the variable for its role).
inline std::vector<std::string> counters_asked() {
  const char* v = std::getenv(FANOUT_COUNTERS_ENV);
  return v ? counter_names(v) : std::vector<std::string>{};
}

}  // namespace fanout_sdk
