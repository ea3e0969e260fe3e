// What the emulated parts of a node share, in the fluid approximation: a small file of counters that every process
// of the node maps (how many are using a resource now), and work that progresses at 1 / slowdown of its speed
// alone, the slowdown read again every slice. The shared emulated devices (shared_device.h) and the loader cores
// (loader_contention.h) are both this.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

namespace torchloader {

class NodeCounters {
 public:
  // Maps `path` (created zeroed when missing) with `count` int32 counters. Throws std::runtime_error naming the
  // file and `what` it is for.
  NodeCounters(const std::string& path, int count, const std::string& what);
  ~NodeCounters();
  NodeCounters(const NodeCounters&) = delete;
  NodeCounters& operator=(const NodeCounters&) = delete;

  int32_t add(int i, int32_t delta);  // atomically; returns the new value
  int32_t get(int i) const;

 private:
  int32_t* counters_ = nullptr;
  size_t bytes_ = 0;
};

// Returns when `seconds` of work (its time alone) started at `started_ns` (steady_clock) is done, progressing over
// each slice at 1 / slowdown() as read at the slice's start (>= 1; a finer slice follows arrivals and departures
// more closely, for more timer wake-ups).
void progress_until_done(double seconds, int64_t started_ns, const std::function<double()>& slowdown, double slice_s = 0.002);

int64_t steady_now_ns();

}  // namespace torchloader
