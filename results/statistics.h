// Statistics of a set of samples, computed in one place as pure functions; writers (CSV, plots, HTML,
// console, compare) only format what these return.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace fanout {

struct Summary {
  size_t count = 0;
  double min = 0, max = 0, mean = 0, median = 0, p90 = 0, p95 = 0, p99 = 0, stddev = 0;
  double median_ci_low = 0, median_ci_high = 0;  // 95 % confidence interval of the median
  double mad = 0;                                // median absolute deviation (unscaled)
  size_t outliers = 0;                           // |x - median| > 3 * 1.4826 * MAD
};

// Sorts values (no NaN) in ascending order: a radix sort for large vectors, std::sort for small ones.
void sort_values(std::vector<double>& values);
// Percentile q in [0,100] of sorted values, linear interpolation between closest ranks (numpy's default).
double percentile_sorted(const std::vector<double>& sorted, double q);
// Sorts `values` (no NaN: callers leave it out) in place and summarises them. stddev is the sample standard
// deviation (n-1).
Summary summarize(std::vector<double>& values);

// 95 % CI of the median of sorted values: a percentile bootstrap (1000 resamples, fixed seed, so the same data
// give the same interval) up to kBootstrapMaxN values; above that the distribution-free order-statistic
// interval (ranks n/2 -+ 1.96 sqrt(n)/2), which the bootstrap converges to, so cost stays linear.
constexpr size_t kBootstrapMaxN = 1000;
std::pair<double, double> median_ci95(const std::vector<double>& sorted, uint64_t seed = 42);
// MAD of sorted values and the number of values further than 3 scaled MADs from the median.
std::pair<double, size_t> mad_outliers(const std::vector<double>& sorted, double median);

// Across runs (--repeat): the runs' medians summarised. The interval is the distribution-free one from order
// statistics: the widest pair of ranks [k, n-k+1] whose coverage of the median is at least 95 % (binomial); with
// fewer than 6 runs none reaches 95 %, so it is [min, max] and `coverage` says how much that covers (1 - 2^(1-n)).
struct RunLevel {
  size_t runs = 0;
  double median = 0, low = 0, high = 0, coverage = 0;
};
RunLevel summarize_runs(std::vector<double> run_medians);

// Two-sided p-value of the Mann-Whitney U test that a and b come from one distribution (as google/benchmark's
// compare.py tests repetitions): exact up to 100 values in all (every way to split the pooled mid-ranks counted,
// ties included), else the normal approximation with tie and continuity corrections. 1 when either side is empty.
double mann_whitney_p(const std::vector<double>& a, const std::vector<double>& b);

// The Hodges-Lehmann estimate of the shift from a to b (the median of every difference b_j - a_i) with the
// distribution-free confidence interval of level >= 1 - alpha that inverts the Mann-Whitney test (Hollander & Wolfe,
// "Nonparametric Statistical Methods", 3rd ed., 4.3): [D_(k), D_(nm+1-k)] of the sorted differences, k from the
// exact null distribution of U (n + m <= 200) or its normal approximation. bounded is false when the sides are
// too small for any k >= 1 at that level: low and high are then the smallest and largest difference.
struct Shift {
  double estimate = 0, low = 0, high = 0;
  double confidence = 0;  // the interval's exact coverage (>= 1 - alpha when bounded)
  bool bounded = false;
};
Shift hodges_lehmann(const std::vector<double>& a, const std::vector<double>& b, double alpha = 0.05);

// Many figures tested at once: the p-values adjusted so that comparing each with alpha controls the false discovery
// rate (Benjamini-Hochberg, step-up) or the family-wise error (Holm, step-down); None returns them unchanged.
enum class Correction { None, Holm, BenjaminiHochberg };
std::vector<double> adjust_p_values(const std::vector<double>& p, Correction method);

// The standard normal quantile: z with P(Z <= z) = q, for q in (0, 1).
double normal_quantile(double q);

// Column names and values of a Summary, in one order for every writer.
const std::vector<std::string>& summary_columns();
std::vector<double> summary_values(const Summary& s);

// Kernel density estimate (Gaussian, Silverman's bandwidth) of sorted values at `points` evenly spaced
// points over [min, max]: {x, density} pairs, for violin plots.
std::vector<std::pair<double, double>> kernel_density(const std::vector<double>& sorted, size_t points = 64);

}  // namespace fanout
