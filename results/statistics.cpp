#include "results/statistics.h"

#include <algorithm>
#include <cmath>

namespace fanout {

double percentile_sorted(const std::vector<double>& v, double q) {
  if (v.empty()) return NAN;
  if (v.size() == 1) return v[0];
  double pos = std::clamp(q, 0.0, 100.0) / 100.0 * double(v.size() - 1);
  size_t lo = size_t(std::floor(pos));
  size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - double(lo));
}

Summary summarize(std::vector<double>& values) {
  Summary s;
  s.count = values.size();
  if (values.empty()) return s;
  std::sort(values.begin(), values.end());
  s.min = values.front();
  s.max = values.back();
  // Welford's update: stable for long runs of nearly equal values.
  double mean = 0, m2 = 0;
  size_t n = 0;
  for (double x : values) {
    ++n;
    double d = x - mean;
    mean += d / double(n);
    m2 += d * (x - mean);
  }
  s.mean = mean;
  s.stddev = n > 1 ? std::sqrt(m2 / double(n - 1)) : 0.0;
  s.median = percentile_sorted(values, 50);
  s.p90 = percentile_sorted(values, 90);
  s.p95 = percentile_sorted(values, 95);
  s.p99 = percentile_sorted(values, 99);
  return s;
}

const std::vector<std::string>& summary_columns() {
  static const std::vector<std::string> cols = {"count", "min", "mean", "median", "p90", "p95", "p99", "max", "std"};
  return cols;
}

std::vector<double> summary_values(const Summary& s) {
  return {double(s.count), s.min, s.mean, s.median, s.p90, s.p95, s.p99, s.max, s.stddev};
}

}  // namespace fanout
