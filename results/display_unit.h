// Human units for plots and tables: a metric is shown in the unit that keeps its typical value between 1 and
// 1000 (s, ms, us, ns; B/s, KB/s, MB/s, GB/s as network rates are quoted, decimal; B, KiB, MiB, GiB). Display
// only: statistics are computed on the stored values in the stored unit.
#pragma once
#include <string>

namespace fanout {

struct DisplayUnit {
  std::string label;    // e.g. "ms"
  double factor = 1.0;  // shown value = stored value * factor
};

// `unit` as recorded ("s", "us", "bytes/s", ...); `typical`: a representative stored value (a median).
// Units it does not know are shown as they are.
DisplayUnit display_unit(const std::string& unit, double typical);

// The unit a time in seconds per byte count gives: "bytes" for a size parameter's values.
bool is_time_unit(const std::string& unit);
// Seconds per one of `unit` (1e-6 for "us"); 0 when unit is not a time.
double seconds_per(const std::string& unit);
// Which way a figure is better from its unit alone, where the unit says: "lower" for a time or a time per something
// ("ms", "us/sample"), "higher" for "<x>/s" ("bytes/s"), else "" (a declared direction comes first: compare.h).
std::string unit_better(const std::string& unit);

}  // namespace fanout
