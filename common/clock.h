// Clocks: every duration comes from the monotonic clock; wall time is only for labelling.
#pragma once
#include <cstdint>
#include <ctime>
#include <string>

namespace fanout {

inline int64_t monotonic_ns() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

inline int64_t wall_ns() {
  timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return int64_t(ts.tv_sec) * 1000000000 + ts.tv_nsec;
}

// ISO 8601 UTC with milliseconds, e.g. 2026-11-22T01:38:37.123Z.
std::string iso8601_utc(int64_t wall_ns_value);
// Compact local-free stamp for directory names, e.g. 20261122-013837.
std::string compact_utc_stamp(int64_t wall_ns_value);

}  // namespace fanout
