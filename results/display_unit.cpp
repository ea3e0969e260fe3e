#include "results/display_unit.h"

#include <cmath>
#include <utility>
#include <vector>

namespace fanout {

namespace {

using Scale = std::vector<std::pair<const char*, double>>;  // label, size of one in the base unit; ascending

DisplayUnit pick(const Scale& scale, double base_value) {
  const double v = std::fabs(base_value);
  auto chosen = scale.front();
  for (auto& s : scale)
    if (v >= s.second) chosen = s;
  return {chosen.first, 1.0 / chosen.second};
}

const Scale kTime = {{"ns", 1e-9}, {"us", 1e-6}, {"ms", 1e-3}, {"s", 1.0}};
const Scale kRate = {{"B/s", 1.0}, {"KB/s", 1e3}, {"MB/s", 1e6}, {"GB/s", 1e9}, {"TB/s", 1e12}};
const Scale kSize = {{"B", 1.0}, {"KiB", 1024.0}, {"MiB", 1048576.0}, {"GiB", 1073741824.0}};

}  // namespace

double seconds_per(const std::string& unit) {
  if (unit == "s" || unit == "sec" || unit == "seconds") return 1.0;
  if (unit == "ms") return 1e-3;
  if (unit == "us" || unit == "\u00b5s" || unit == "\u03bcs") return 1e-6;  // "us", micro sign, Greek mu
  if (unit == "min" || unit == "minutes") return 60.0;
  if (unit == "h" || unit == "hours") return 3600.0;
  if (unit == "ns") return 1e-9;
  return 0.0;
}

bool is_time_unit(const std::string& unit) { return seconds_per(unit) > 0; }

std::string unit_better(const std::string& unit) {
  if (is_time_unit(unit)) return "lower";
  const auto slash = unit.find('/');
  if (slash == std::string::npos || slash == 0 || unit.find('/', slash + 1) != std::string::npos) return "";
  const std::string num = unit.substr(0, slash), den = unit.substr(slash + 1);
  if (is_time_unit(num)) return "lower";                      // a time per step, sample, op
  if (den == "s" && !num.empty()) return "higher";            // so much per second
  return "";
}

DisplayUnit display_unit(const std::string& unit, double typical) {
  if (!std::isfinite(typical) || typical == 0) return {unit, 1.0};
  if (const double per = seconds_per(unit); per > 0) {
    DisplayUnit d = pick(kTime, typical * per);
    d.factor *= per;
    return d;
  }
  if (unit == "bytes/s" || unit == "B/s") return pick(kRate, typical);
  if (unit == "bytes" || unit == "B") return pick(kSize, typical);
  // Any other unit (requests/s, items, ...): a decimal prefix from 10^4 on, so that 118700 reads "118.7 k requests/s",
  // not 1.187e+05. A per-cent, and a unit that is already scaled or a time per something (MB/s, KiB, ms/step), stay
  // as they are.
  const std::string head = unit.substr(0, unit.find('/'));
  const bool prefixed = head.size() >= 2 && std::string("kKMGTP").find(head[0]) != std::string::npos &&
                        (head[1] == 'B' || head[1] == 'b' || head[1] == 'i' || head.compare(1, std::string::npos, "Hz") == 0);
  if (unit == "%" || unit.empty() || prefixed || seconds_per(head) > 0) return {unit, 1.0};
  const double a = std::fabs(typical);
  for (auto [prefix, scale] : {std::pair{"G", 1e9}, std::pair{"M", 1e6}, std::pair{"k", 1e3}})
    if (a >= 10 * scale) return {std::string(prefix) + " " + unit, 1.0 / scale};
  return {unit, 1.0};
}

}  // namespace fanout
