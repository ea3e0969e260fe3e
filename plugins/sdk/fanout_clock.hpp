// Clocks (SDK, header-only): every duration comes from the monotonic clock; wall time only labels. The driver's
// common/clock.h uses these same two, so a plugin's timestamps and the host's are read the same way.
#pragma once
#include <time.h>

#include <cstdint>

namespace fanout_sdk {

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

}  // namespace fanout_sdk
