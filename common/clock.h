// Clocks: every duration comes from the monotonic clock; wall time is only for labelling.
#pragma once
#include <cstdint>
#include <ctime>
#include <string>

#include "plugins/sdk/fanout_clock.hpp"

namespace fanout {

using fanout_sdk::monotonic_ns;
using fanout_sdk::wall_ns;

// ISO 8601 UTC with milliseconds, e.g. 2026-11-22T01:38:37.123Z.
std::string iso8601_utc(int64_t wall_ns_value);
// Compact local-free stamp for directory names, e.g. 20261122-013837.
std::string compact_utc_stamp(int64_t wall_ns_value);

}  // namespace fanout
