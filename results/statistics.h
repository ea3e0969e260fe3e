// Statistics of a set of samples, computed in one place as pure functions; writers (CSV, console) only format.
#pragma once
#include <cstddef>
#include <string>
#include <vector>

namespace fanout {

struct Summary {
  size_t count = 0;
  double min = 0, max = 0, mean = 0, median = 0, p90 = 0, p95 = 0, p99 = 0, stddev = 0;
};

// Percentile q in [0,100] of sorted values, linear interpolation between closest ranks (numpy's default).
double percentile_sorted(const std::vector<double>& sorted, double q);
// Sorts `values` in place and summarises them. stddev is the sample standard deviation (n-1).
Summary summarize(std::vector<double>& values);

// Column names and values of a Summary, in one order for every writer.
const std::vector<std::string>& summary_columns();
std::vector<double> summary_values(const Summary& s);

}  // namespace fanout
