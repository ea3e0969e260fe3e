// What a process cost, as the kernel counts it (getrusage, wait4's rusage): the resource.* figures every rank
// records beside its own (SDK, header-only; fanout-rank and the exec plugin share it), each with its direction.
//
// What the kernel counts (Linux, getrusage(2)): a process's own threads, plus the children it has waited for
// (and theirs, transitively): a program's forked workers count once reaped; a daemon that double-forks away from
// its parent does not. Peak RSS is the largest resident set of any one of them (not a sum); a started program's
// begins at the peak of the process that started it (see own_peak_rss_kib), so below that it is not the program's. Storage bytes are
// what reached (or would reach) the block layer: ru_inblock/ru_oublock in 512-byte units, so a read served from
// the page cache is 0 and a written page counts when it is dirtied, fsync or not; tmpfs counts nothing.
#pragma once
#include <sys/resource.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "fanout_plugin.h"

namespace fanout_sdk {

struct ResourceFigure {
  const char* metric;
  const char* unit;
  double value;
  // Memory, CPU time and storage bytes are costs (lower is better: compare calls a rise a regression); context
  // switches and major faults say why a figure moved but are the scheduler's and the page cache's as much as the
  // program's: declared none (compare reports a change, the gate does not fail on it).
  fanout_better better;
};

inline double seconds_of(const timeval& t) { return double(t.tv_sec) + double(t.tv_usec) / 1e6; }

// The figures of `after`, less `before` where it is given (every counter but the peak, which has no "since").
inline std::vector<ResourceFigure> resource_figures(const rusage& after, const rusage* before = nullptr) {
  static const rusage kZero{};
  const rusage& b = before ? *before : kZero;
  return {
      {"resource.peak_rss", "B", double(after.ru_maxrss) * 1024.0, FANOUT_BETTER_LOWER},  // KiB on Linux
      {"resource.user_cpu", "s", seconds_of(after.ru_utime) - seconds_of(b.ru_utime), FANOUT_BETTER_LOWER},
      {"resource.system_cpu", "s", seconds_of(after.ru_stime) - seconds_of(b.ru_stime), FANOUT_BETTER_LOWER},
      {"resource.voluntary_switches", "count", double(after.ru_nvcsw - b.ru_nvcsw), FANOUT_BETTER_NONE},
      {"resource.involuntary_switches", "count", double(after.ru_nivcsw - b.ru_nivcsw), FANOUT_BETTER_NONE},
      {"resource.major_faults", "count", double(after.ru_majflt - b.ru_majflt), FANOUT_BETTER_NONE},
      {"resource.read_bytes", "B", double(after.ru_inblock - b.ru_inblock) * 512.0, FANOUT_BETTER_LOWER},
      {"resource.write_bytes", "B", double(after.ru_oublock - b.ru_oublock) * 512.0, FANOUT_BETTER_LOWER},
  };
}

// The sum of two processes' usage (a rank and its waited-for children): counters add, the peak is the larger.
inline rusage combined(const rusage& a, const rusage& c) {
  rusage r = a;
  auto add = [](timeval& x, const timeval& y) {
    x.tv_sec += y.tv_sec, x.tv_usec += y.tv_usec;
    if (x.tv_usec >= 1000000) x.tv_sec += 1, x.tv_usec -= 1000000;
  };
  add(r.ru_utime, c.ru_utime), add(r.ru_stime, c.ru_stime);
  r.ru_maxrss = a.ru_maxrss > c.ru_maxrss ? a.ru_maxrss : c.ru_maxrss;
  r.ru_nvcsw += c.ru_nvcsw, r.ru_nivcsw += c.ru_nivcsw, r.ru_majflt += c.ru_majflt;
  r.ru_inblock += c.ru_inblock, r.ru_oublock += c.ru_oublock;
  return r;
}

// This process's own peak resident set since its exec, in KiB (/proc/self/status VmHWM), or -1. Not ru_maxrss: at
// exec Linux starts a process's ru_maxrss at its parent's peak (exec_mmap folds the old address space's high-water
// mark in, and posix_spawn's child runs in its parent's), so a rank started by a large driver would report the
// driver's memory as its own.
inline long own_peak_rss_kib() {
  FILE* f = std::fopen("/proc/self/status", "re");
  if (!f) return -1;
  char line[256];
  long kib = -1;
  while (std::fgets(line, sizeof line, f))
    if (std::strncmp(line, "VmHWM:", 6) == 0) {
      kib = std::strtol(line + 6, nullptr, 10);
      break;
    }
  std::fclose(f);
  return kib;
}

// Whether this run records resources (the driver's --resources; fanout-rank sets the variable for its role).
inline bool resources_recorded() {
  const char* v = std::getenv(FANOUT_RESOURCES_ENV);
  return !v || std::strcmp(v, "off") != 0;
}

}  // namespace fanout_sdk
