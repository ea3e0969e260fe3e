#include "results/statistics.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <tuple>
#include <utility>

namespace fanout {

namespace {

// Doubles in ascending order by an LSD radix sort of their bits, mapped so that unsigned order is numeric order
// (negatives: every bit flipped; others: the sign bit set). NaN is never here (callers drop it before). For the
// 10^5-10^6 values of a long run this is about 4x std::sort, the largest part of computing statistics. A digit
// every value shares (the exponent's high bits, mostly) costs one counting pass and no move.
void radix_sort(std::vector<double>& values) {
  constexpr int kBits = 11, kDigits = (64 + kBits - 1) / kBits;
  constexpr size_t kBuckets = size_t(1) << kBits;
  const size_t n = values.size();
  std::vector<uint64_t> keys(n), spare(n);
  for (size_t i = 0; i < n; ++i) {
    uint64_t b;
    std::memcpy(&b, &values[i], sizeof b);
    keys[i] = b >> 63 ? ~b : b | (uint64_t(1) << 63);
  }
  std::vector<size_t> count(kBuckets);
  for (int d = 0; d < kDigits; ++d) {
    const int shift = d * kBits;
    std::fill(count.begin(), count.end(), 0);
    for (uint64_t k : keys) ++count[(k >> shift) & (kBuckets - 1)];
    if (count[(keys[0] >> shift) & (kBuckets - 1)] == n) continue;  // one bucket: already in order by this digit
    size_t at = 0;
    for (size_t& c : count) at += std::exchange(c, at);
    for (uint64_t k : keys) spare[count[(k >> shift) & (kBuckets - 1)]++] = k;
    keys.swap(spare);
  }
  for (size_t i = 0; i < n; ++i) {
    const uint64_t b = keys[i] >> 63 ? keys[i] & ~(uint64_t(1) << 63) : ~keys[i];
    std::memcpy(&values[i], &b, sizeof b);
  }
}

}  // namespace

void sort_values(std::vector<double>& values) {
  if (values.size() < 4096) std::sort(values.begin(), values.end());
  else radix_sort(values);
}

double percentile_sorted(const std::vector<double>& v, double q) {
  if (v.empty()) return NAN;
  if (v.size() == 1) return v[0];
  double pos = std::clamp(q, 0.0, 100.0) / 100.0 * double(v.size() - 1);
  size_t lo = size_t(std::floor(pos));
  size_t hi = std::min(lo + 1, v.size() - 1);
  // Weighted, not v[lo] + (v[hi] - v[lo]) * f: the difference of two values near +-DBL_MAX overflows.
  const double f = pos - double(lo);
  return f == 0 ? v[lo] : v[lo] * (1 - f) + v[hi] * f;
}

std::pair<double, double> median_ci95(const std::vector<double>& v, uint64_t seed) {
  const size_t n = v.size();
  if (n == 0) return {NAN, NAN};
  if (n == 1) return {v[0], v[0]};
  if (n > kBootstrapMaxN) {
    double half = 1.96 * std::sqrt(double(n)) / 2.0;
    size_t lo = size_t(std::max(0.0, std::floor(double(n) / 2.0 - half)));
    size_t hi = size_t(std::min(double(n - 1), std::ceil(double(n) / 2.0 + half)));
    return {v[lo], v[hi]};
  }
  // Resampling indices into the sorted data: the median of a resample is found by counting, not sorting.
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<size_t> pick(0, n - 1);
  const int resamples = 1000;
  std::vector<double> medians(resamples);
  std::vector<uint32_t> counts(n);
  for (int b = 0; b < resamples; ++b) {
    std::fill(counts.begin(), counts.end(), 0);
    for (size_t i = 0; i < n; ++i) ++counts[pick(rng)];
    // the k-th smallest of the resample, for the lower and upper middle
    auto kth = [&](size_t k) {
      size_t seen = 0;
      for (size_t i = 0; i < n; ++i) {
        seen += counts[i];
        if (seen > k) return v[i];
      }
      return v[n - 1];
    };
    medians[size_t(b)] = n % 2 ? kth(n / 2) : kth(n / 2 - 1) / 2.0 + kth(n / 2) / 2.0;  // halves: no overflow
  }
  std::sort(medians.begin(), medians.end());
  return {percentile_sorted(medians, 2.5), percentile_sorted(medians, 97.5)};
}

std::pair<double, size_t> mad_outliers(const std::vector<double>& v, double median) {
  if (v.empty()) return {NAN, 0};
  std::vector<double> dev(v.size());
  for (size_t i = 0; i < v.size(); ++i) dev[i] = std::fabs(v[i] - median);
  // The median of the deviations by selection (linear), not a second sort.
  const size_t mid = dev.size() / 2;
  std::nth_element(dev.begin(), dev.begin() + long(mid), dev.end());
  double mad = dev[mid];
  if (dev.size() % 2 == 0) mad = mad / 2.0 + *std::max_element(dev.begin(), dev.begin() + long(mid)) / 2.0;
  double limit = 3.0 * 1.4826 * mad;
  size_t out = 0;
  for (double d : dev) out += d > limit && mad > 0 ? 1 : 0;
  return {mad, out};
}

Summary summarize(std::vector<double>& values) {
  Summary s;
  s.count = values.size();
  if (values.empty()) return s;
  sort_values(values);
  s.min = values.front();
  s.max = values.back();
  // Welford's update: stable for long runs of nearly equal values. Values near +-DBL_MAX are scaled by a power of
  // two first (exact), or x - mean overflows and the mean of 1.7e308 and -1.7e308 comes out NaN.
  const double largest = std::max(std::fabs(s.min), std::fabs(s.max));
  double scale = 1;
  if (std::isfinite(largest) && largest > 1e300) scale = std::ldexp(1.0, -std::ilogb(largest) - 1);
  double mean = 0, m2 = 0;
  size_t n = 0;
  for (double x : values) {
    ++n;
    double d = x * scale - mean;
    mean += d / double(n);
    m2 += d * (x * scale - mean);
  }
  s.mean = mean / scale;
  s.stddev = n > 1 ? std::sqrt(m2 / double(n - 1)) / scale : 0.0;  // a spread beyond DBL_MAX is inf, as it is
  s.median = percentile_sorted(values, 50);
  s.p90 = percentile_sorted(values, 90);
  s.p95 = percentile_sorted(values, 95);
  s.p99 = percentile_sorted(values, 99);
  std::tie(s.median_ci_low, s.median_ci_high) = median_ci95(values);
  std::tie(s.mad, s.outliers) = mad_outliers(values, s.median);
  return s;
}

RunLevel summarize_runs(std::vector<double> v) {
  RunLevel r;
  r.runs = v.size();
  if (v.empty()) return r;
  std::sort(v.begin(), v.end());
  r.median = percentile_sorted(v, 50);
  const size_t n = v.size();
  // P(Binomial(n, 1/2) < k) for each k; the interval [x_k, x_{n-k+1}] (1-based) covers the median with
  // probability 1 - 2 P(B < k). The largest k that keeps that >= 95 %; k = 1 is [min, max].
  std::vector<double> pmf(n + 1);
  double logc = 0;
  for (size_t i = 0; i <= n; ++i) {
    if (i > 0) logc += std::log(double(n - i + 1)) - std::log(double(i));
    pmf[i] = std::exp(logc - double(n) * std::log(2.0));
  }
  size_t k = 1;
  double tail = pmf[0], coverage = 1 - 2 * tail;  // tail = P(B < c) as c grows
  for (size_t c = 2; c <= (n + 1) / 2; ++c) {
    tail += pmf[c - 1];
    if (1 - 2 * tail < 0.95) break;
    k = c, coverage = 1 - 2 * tail;
  }
  r.low = v[k - 1], r.high = v[n - k];
  r.coverage = coverage;
  return r;
}

double mann_whitney_p(const std::vector<double>& a, const std::vector<double>& b) {
  const size_t n1 = a.size(), n2 = b.size();
  if (!n1 || !n2) return 1;
  // Mid-ranks of the pooled values, doubled so that they are integers (a tie of t values at ranks i+1..i+t has
  // rank i + (t+1)/2 each). U of a = R_a - n1 (n1 + 1) / 2: the test is on R_a.
  std::vector<std::pair<double, int>> all;
  for (double x : a) all.emplace_back(x, 0);
  for (double x : b) all.emplace_back(x, 1);
  std::sort(all.begin(), all.end(), [](auto& x, auto& y) { return x.first < y.first; });
  const size_t n = all.size();
  std::vector<int64_t> rank2(n);
  int64_t observed2 = 0;
  double tie_term = 0;
  for (size_t i = 0; i < n;) {
    size_t j = i;
    while (j < n && all[j].first == all[i].first) ++j;
    const double t = double(j - i);
    tie_term += t * t * t - t;
    for (size_t k = i; k < j; ++k) {
      rank2[k] = int64_t(i + 1 + j);  // 2 x the mean of ranks i+1 .. j
      if (all[k].second == 0) observed2 += rank2[k];
    }
    i = j;
  }
  const double expected2 = double(n1) * double(n + 1);  // 2 x E[R_a]
  if (n <= 100) {
    // Exact, ties included: how many of the C(n, n1) ways to choose a's ranks give a rank sum at least as far
    // from its mean as the observed one. count[k][s]: subsets of k of the ranks seen so far with doubled sum s.
    const int64_t max_sum = int64_t(n) * int64_t(n + 1);
    std::vector<std::vector<double>> count(n1 + 1, std::vector<double>(size_t(max_sum) + 1, 0));
    count[0][0] = 1;
    for (size_t i = 0; i < n; ++i)
      for (size_t k = std::min(n1, i + 1); k >= 1; --k)
        for (int64_t v = max_sum; v >= rank2[i]; --v) count[k][size_t(v)] += count[k - 1][size_t(v - rank2[i])];
    double total = 0, extreme = 0;
    const double observed_distance = std::fabs(double(observed2) - expected2);
    for (int64_t v = 0; v <= max_sum; ++v) {
      const double c = count[n1][size_t(v)];
      total += c;
      if (std::fabs(double(v) - expected2) >= observed_distance - 1e-9) extreme += c;
    }
    return std::min(1.0, extreme / total);
  }
  // Large samples: the normal approximation with tie and continuity corrections.
  const double u = double(observed2) / 2 - double(n1) * double(n1 + 1) / 2, mu = double(n1) * double(n2) / 2;
  const double var = double(n1) * double(n2) / 12 * ((double(n) + 1) - tie_term / (double(n) * (double(n) - 1)));
  if (var <= 0) return 1;
  const double z = (std::fabs(u - mu) - 0.5) / std::sqrt(var);
  return std::min(1.0, std::erfc(std::max(0.0, z) / std::sqrt(2.0)));
}

double normal_quantile(double q) {
  // Bisection on erfc (monotone): 200 halvings of [-40, 40] are far below double precision; only used per figure.
  double lo = -40, hi = 40;
  for (int i = 0; i < 200; ++i) {
    const double mid = (lo + hi) / 2;
    (0.5 * std::erfc(-mid / std::sqrt(2.0)) < q ? lo : hi) = mid;
  }
  return (lo + hi) / 2;
}

namespace {

// Under the null, P(U <= u) for u = 0 .. n1 n2 with no ties (U = rank sum of a - n1 (n1 + 1) / 2): subsets of n1
// of the ranks 1..n counted by their sum.
std::vector<double> u_cdf(size_t n1, size_t n2) {
  const size_t n = n1 + n2, max_sum = n * (n + 1) / 2;
  std::vector<std::vector<double>> count(n1 + 1, std::vector<double>(max_sum + 1, 0));
  count[0][0] = 1;
  for (size_t r = 1; r <= n; ++r)
    for (size_t k = std::min(n1, r); k >= 1; --k)
      for (size_t v = max_sum; v >= r; --v) count[k][v] += count[k - 1][v - r];
  const size_t base = n1 * (n1 + 1) / 2;
  double total = 0;
  for (size_t v = base; v <= max_sum; ++v) total += count[n1][v];
  std::vector<double> cdf(n1 * n2 + 1, 0);
  double run = 0;
  for (size_t u = 0; u <= n1 * n2; ++u) run += count[n1][base + u], cdf[u] = run / total;
  return cdf;
}

}  // namespace

Shift hodges_lehmann(const std::vector<double>& a, const std::vector<double>& b, double alpha) {
  Shift out;
  if (a.empty() || b.empty()) return out;
  std::vector<double> d;
  d.reserve(a.size() * b.size());
  for (double x : a)
    for (double y : b) d.push_back(y - x);
  std::sort(d.begin(), d.end());
  const size_t nm = d.size();
  out.estimate = percentile_sorted(d, 50);
  // k: the largest with P(U <= k - 1) <= alpha / 2; the interval [D_(k), D_(nm+1-k)] then covers with 1 - 2 P(U <= k-1).
  size_t k = 0;
  double tail = 0;
  if (a.size() + b.size() <= 200) {
    const auto cdf = u_cdf(a.size(), b.size());
    while (k < nm / 2 && cdf[k] <= alpha / 2 + 1e-12) tail = cdf[k], ++k;
  } else {
    const double n1 = double(a.size()), n2 = double(b.size());
    const double c = n1 * n2 / 2 - normal_quantile(1 - alpha / 2) * std::sqrt(n1 * n2 * (n1 + n2 + 1) / 12);
    k = c < 1 ? 0 : std::min(size_t(c), nm / 2);
    tail = alpha / 2;
  }
  out.bounded = k >= 1;
  out.low = out.bounded ? d[k - 1] : d.front();
  out.high = out.bounded ? d[nm - k] : d.back();
  out.confidence = out.bounded ? 1 - 2 * tail : 0;
  return out;
}

std::vector<double> adjust_p_values(const std::vector<double>& p, Correction method) {
  const size_t m = p.size();
  std::vector<double> out = p;
  if (method == Correction::None || m < 2) return out;
  std::vector<size_t> order(m);
  for (size_t i = 0; i < m; ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t x, size_t y) { return p[x] < p[y]; });
  if (method == Correction::Holm) {
    double running = 0;  // step-down: never below an earlier (smaller) p's adjusted value
    for (size_t i = 0; i < m; ++i) {
      running = std::max(running, std::min(1.0, double(m - i) * p[order[i]]));
      out[order[i]] = running;
    }
    return out;
  }
  double running = 1;  // step-up: the smallest p * m / rank among this rank and all larger ones
  for (size_t i = m; i-- > 0;) {
    running = std::min(running, std::min(1.0, p[order[i]] * double(m) / double(i + 1)));
    out[order[i]] = running;
  }
  return out;
}

const std::vector<std::string>& summary_columns() {
  static const std::vector<std::string> cols = {"count", "min", "mean", "median", "median_ci_low", "median_ci_high",
                                                "p90", "p95", "p99", "max", "std", "mad", "outliers"};
  return cols;
}

std::vector<double> summary_values(const Summary& s) {
  return {double(s.count), s.min, s.mean, s.median, s.median_ci_low, s.median_ci_high, s.p90, s.p95, s.p99, s.max,
          s.stddev, s.mad, double(s.outliers)};
}

std::vector<std::pair<double, double>> kernel_density(const std::vector<double>& v, size_t points) {
  std::vector<std::pair<double, double>> out;
  if (v.empty() || points < 2) return out;
  const double n = double(v.size());
  double sd = 0, mean = 0;
  for (double x : v) mean += x / n;
  for (double x : v) sd += (x - mean) * (x - mean) / std::max(1.0, n - 1);
  sd = std::sqrt(sd);
  double iqr = percentile_sorted(v, 75) - percentile_sorted(v, 25);
  double spread = std::min(sd, iqr > 0 ? iqr / 1.34 : sd);
  double h = 0.9 * (spread > 0 ? spread : (v.back() - v.front() > 0 ? v.back() - v.front() : 1.0)) * std::pow(n, -0.2);
  // Evaluate on at most 2000 points of the data (evenly strided) so that large runs stay cheap.
  size_t stride = std::max<size_t>(1, v.size() / 2000);
  double lo = v.front(), hi = v.back();
  for (size_t p = 0; p < points; ++p) {
    double x = lo + (hi - lo) * double(p) / double(points - 1);
    double d = 0, used = 0;
    for (size_t i = 0; i < v.size(); i += stride, ++used) {
      double z = (x - v[i]) / h;
      d += std::exp(-0.5 * z * z);
    }
    out.emplace_back(x, d / (used * h * std::sqrt(2 * M_PI)));
  }
  return out;
}

}  // namespace fanout
