#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>

#include "results/statistics.h"

using namespace fanout;

// Values computed by hand (and checked with numpy.percentile's default linear method).
TEST(Statistics, SmallTableComputedByHand) {
  std::vector<double> v{4, 1, 3, 2};
  Summary s = summarize(v);
  EXPECT_EQ(s.count, 4u);
  EXPECT_DOUBLE_EQ(s.min, 1);
  EXPECT_DOUBLE_EQ(s.max, 4);
  EXPECT_DOUBLE_EQ(s.mean, 2.5);
  EXPECT_DOUBLE_EQ(s.median, 2.5);
  EXPECT_NEAR(s.p90, 3.7, 1e-12);    // pos = 0.9*3 = 2.7 -> 3 + 0.7*(4-3)
  EXPECT_NEAR(s.p95, 3.85, 1e-12);
  EXPECT_NEAR(s.p99, 3.97, 1e-12);
  EXPECT_NEAR(s.stddev, std::sqrt(5.0 / 3.0), 1e-12);  // sum of squares 5, n-1 = 3
}

// Issue 53: values near +-DBL_MAX gave a median of inf and a mean of -nan (their difference overflowed). The answers
// are known exactly: the mean and median of {M, -M} are 0, of {M, -M, M} M/3 and M.
TEST(Statistics, ValuesNearTheLargestDoubleStayFinite) {
  const double M = 1.7e308;
  std::vector<double> two{M, -M};
  Summary s = summarize(two);
  EXPECT_DOUBLE_EQ(s.mean, 0);
  EXPECT_DOUBLE_EQ(s.median, 0);
  EXPECT_TRUE(std::isfinite(s.p90)) << s.p90;
  EXPECT_DOUBLE_EQ(s.p90, M * 0.8);  // pos 0.9: -M * 0.1 + M * 0.9
  std::vector<double> three{M, -M, M};
  s = summarize(three);
  EXPECT_NEAR(s.mean, M / 3, M * 1e-15);
  EXPECT_DOUBLE_EQ(s.median, M);
  EXPECT_TRUE(std::isfinite(s.median_ci_low) && std::isfinite(s.median_ci_high));
  std::vector<double> big{1e305, 2e305, 3e305, 4e305};  // scaled, still exact enough
  s = summarize(big);
  EXPECT_NEAR(s.mean, 2.5e305, 1e290);
  EXPECT_NEAR(s.stddev, std::sqrt(5.0 / 3.0) * 1e305, 1e291);
}

TEST(Statistics, OddCountMedianIsTheMiddleValue) {
  std::vector<double> v{10, 30, 20, 50, 40};
  EXPECT_DOUBLE_EQ(summarize(v).median, 30);
}

TEST(Statistics, SingleAndEmpty) {
  std::vector<double> one{7};
  Summary s = summarize(one);
  EXPECT_DOUBLE_EQ(s.p99, 7);
  EXPECT_DOUBLE_EQ(s.stddev, 0);
  std::vector<double> none;
  EXPECT_EQ(summarize(none).count, 0u);
  EXPECT_TRUE(std::isnan(percentile_sorted(none, 50)));
}

TEST(Statistics, ColumnsMatchValues) { EXPECT_EQ(summary_columns().size(), summary_values(Summary{}).size()); }

TEST(Statistics, MadOutliersByHand) {
  std::vector<double> v{1, 2, 3, 4, 100};
  Summary s = summarize(v);
  // median 3; |x - 3| = 2 1 0 1 97 -> MAD 1; limit 3 * 1.4826 * 1 = 4.45: only 100 is an outlier
  EXPECT_DOUBLE_EQ(s.mad, 1);
  EXPECT_EQ(s.outliers, 1u);
  std::vector<double> flat{5, 5, 5, 5};
  EXPECT_EQ(summarize(flat).outliers, 0u) << "MAD 0: nothing is called an outlier";
}

TEST(Statistics, BootstrapCiOfTheMedianIsDeterministicAndBracketsIt) {
  std::vector<double> v;
  for (int i = 0; i < 501; ++i) v.push_back(double((i * 37) % 501));  // 0..500 shuffled
  Summary a = summarize(v);
  std::vector<double> w = v;
  Summary b = summarize(w);
  EXPECT_DOUBLE_EQ(a.median, 250);
  EXPECT_EQ(a.median_ci_low, b.median_ci_low) << "fixed seed: same data, same interval";
  EXPECT_LE(a.median_ci_low, 250);
  EXPECT_GE(a.median_ci_high, 250);
  // For uniform 0..500 the median's standard error is about 1.2533 * 144.6 / sqrt(501) = 8.1: the 95 % interval
  // spans roughly +-16; accept 8..30 on each side.
  EXPECT_GT(250 - a.median_ci_low, 8);
  EXPECT_LT(250 - a.median_ci_low, 30);
  EXPECT_GT(a.median_ci_high - 250, 8);
  EXPECT_LT(a.median_ci_high - 250, 30);
}

TEST(Statistics, LargeSamplesUseTheOrderStatisticInterval) {
  std::vector<double> v;
  for (int i = 0; i <= 20000; ++i) v.push_back(i);
  auto [lo, hi] = median_ci95(v);
  // n = 20001: ranks floor(10000.5 - 1.96 * sqrt(20001) / 2) = 9861 and ceil(10000.5 + 138.59) = 10140
  EXPECT_DOUBLE_EQ(lo, 9861);
  EXPECT_DOUBLE_EQ(hi, 10140);
}

TEST(Statistics, KernelDensityIntegratesToAboutOne) {
  std::vector<double> v;
  for (int i = 0; i < 1000; ++i) v.push_back(i % 100 + (i * 7) % 100);  // triangular: thin tails at min and max
  std::sort(v.begin(), v.end());
  auto kd = kernel_density(v, 200);
  double area = 0;
  for (size_t i = 1; i < kd.size(); ++i) area += (kd[i].first - kd[i - 1].first) * (kd[i].second + kd[i - 1].second) / 2;
  EXPECT_GT(area, 0.9);  // the little mass beyond min/max is cut off
  EXPECT_LT(area, 1.01);
}

TEST(Statistics, LargeVectorsAreSortedLikeStdSort) {
  // Above the radix sort's threshold, with what a rank can record: negatives, zeros of both signs, infinities,
  // subnormals, repeats, and values that share their high bits (latencies of one magnitude).
  std::mt19937_64 rng(7);
  std::lognormal_distribution<double> latency(-7.0, 0.3);
  std::uniform_real_distribution<double> wide(-1e6, 1e6);
  std::vector<double> v;
  for (int i = 0; i < 20000; ++i) v.push_back(latency(rng));
  for (int i = 0; i < 5000; ++i) v.push_back(wide(rng));
  const double inf = std::numeric_limits<double>::infinity();
  for (double x : {0.0, -0.0, 1.0, 1.0, -1.0, inf, -inf, 4.9e-324, -4.9e-324, 1e300, -1e300}) v.push_back(x);
  std::shuffle(v.begin(), v.end(), rng);
  std::vector<double> expected = v;
  std::sort(expected.begin(), expected.end());
  sort_values(v);
  ASSERT_EQ(v.size(), expected.size());
  for (size_t i = 0; i < v.size(); ++i) ASSERT_EQ(v[i], expected[i]) << "at " << i;  // -0 == 0 compares equal
  EXPECT_TRUE(std::is_sorted(v.begin(), v.end()));
  EXPECT_TRUE(std::signbit(v[size_t(std::find(v.begin(), v.end(), 0.0) - v.begin())]));  // the radix order puts -0 before +0
}

// Issue 40: run-level statistics. Exact order-statistic intervals and exact Mann-Whitney p-values by hand.
TEST(RunLevelStatistics, MedianOfRunMediansWithItsOrderStatisticInterval) {
  auto five = summarize_runs({5, 1, 4, 2, 3});
  EXPECT_EQ(five.runs, 5u);
  EXPECT_DOUBLE_EQ(five.median, 3);
  EXPECT_DOUBLE_EQ(five.low, 1);  // fewer than 6 runs: [min, max], covering 1 - 2^-4
  EXPECT_DOUBLE_EQ(five.high, 5);
  EXPECT_DOUBLE_EQ(five.coverage, 1 - 2.0 / 32);
  std::vector<double> nine;
  for (int i = 1; i <= 9; ++i) nine.push_back(i);
  auto n9 = summarize_runs(nine);
  // n = 9: [x2, x8] covers 1 - 2 * (1 + 9) / 512 = 0.961; [x3, x7] would cover 0.820.
  EXPECT_DOUBLE_EQ(n9.low, 2);
  EXPECT_DOUBLE_EQ(n9.high, 8);
  EXPECT_NEAR(n9.coverage, 1 - 2 * 10.0 / 512, 1e-12);
}

TEST(RunLevelStatistics, MannWhitneyExactAndApproximate) {
  // Five against five, fully apart: the most extreme of C(10,5) = 252 arrangements, two-sided 2/252.
  EXPECT_NEAR(mann_whitney_p({1, 2, 3, 4, 5}, {6, 7, 8, 9, 10}), 2.0 / 252, 1e-12);
  EXPECT_NEAR(mann_whitney_p({6, 7, 8, 9, 10}, {1, 2, 3, 4, 5}), 2.0 / 252, 1e-12);
  // Three against three cannot go below 2/20 = 0.1.
  EXPECT_NEAR(mann_whitney_p({1, 2, 3}, {4, 5, 6}), 0.1, 1e-12);
  // Interleaved: no evidence.
  EXPECT_GT(mann_whitney_p({1, 3, 5, 7, 9}, {2, 4, 6, 8, 10}), 0.5);
  // U = 1 of 5 x 5 (one pair out of order): P(U <= 1) = 2/252, two-sided 4/252.
  EXPECT_NEAR(mann_whitney_p({1, 2, 3, 4, 6}, {5, 7, 8, 9, 10}), 4.0 / 252, 1e-12);
  // Ties within a side do not weaken a full separation: still 2/252 (the exact count uses mid-ranks).
  EXPECT_NEAR(mann_whitney_p({1, 1, 2, 2, 3}, {8, 8, 9, 9, 10}), 2.0 / 252, 1e-12);
  // A tie across the sides (the two 5s have mid-rank 5.5): 2 of the 252 splits are as low as a's rank sum
  // (either 5 in a), 2 as high: 4/252.
  EXPECT_NEAR(mann_whitney_p({1, 2, 3, 4, 5}, {5, 6, 7, 8, 9}), 4.0 / 252, 1e-12);
  // Beyond 100 values: the normal approximation, which agrees in size.
  std::vector<double> lo, hi;
  for (int i = 0; i < 60; ++i) lo.push_back(i), hi.push_back(i + 30);
  EXPECT_LT(mann_whitney_p(lo, hi), 1e-4);
  EXPECT_DOUBLE_EQ(mann_whitney_p({}, {1}), 1);
}

// Issue 50: the normal approximation (above 100 values in all) with ties and the continuity correction, against
// SciPy 1.10.1's scipy.stats.mannwhitneyu(a, b, alternative="two-sided", method="asymptotic", use_continuity=True),
// computed offline on exactly these values (Debian 12's python3-scipy).
TEST(RunLevelStatistics, MannWhitneyNormalApproximationMatchesScipy) {
  std::vector<double> a, b, a2, b2;
  for (int i = 0; i < 101; ++i) a.push_back(i % 7), b.push_back(i % 9 + 1);  // 202 values, heavy ties
  EXPECT_NEAR(mann_whitney_p(a, b) / 1.5705500572718175e-07, 1.0, 1e-6);
  for (int i = 0; i < 120; ++i) a2.push_back(double((i * 37) % 50) / 10);
  for (int i = 0; i < 110; ++i) b2.push_back(double((i * 53) % 50) / 10 + 0.4);  // 230 values, 64 distinct
  EXPECT_NEAR(mann_whitney_p(a2, b2), 0.12243307443339722, 1e-9);
}

// Benjamini-Hochberg on the example of their 1995 paper (15 p-values); the adjusted values are R's
// p.adjust(p, "BH") (the step-up minimum of p * m / rank), Holm's the step-down maximum of (m - rank + 1) p.
TEST(RunLevelStatistics, BenjaminiHochbergAndHolmOnThePapersExample) {
  const std::vector<double> p{0.0001, 0.0004, 0.0019, 0.0095, 0.0201, 0.0278, 0.0298, 0.0344,
                              0.0459, 0.3240, 0.4262, 0.5719, 0.6528, 0.7590, 1.000};
  const std::vector<double> bh{0.0015, 0.003, 0.0095, 0.035625, 0.0603, 0.0638571428571, 0.0638571428571, 0.0645,
                               0.0765, 0.486, 0.581181818182, 0.714875, 0.753230769231, 0.813214285714, 1};
  const auto got = adjust_p_values(p, Correction::BenjaminiHochberg);
  for (size_t i = 0; i < p.size(); ++i) EXPECT_NEAR(got[i], bh[i], 1e-9) << i;
  // Out of order in, the same adjusted values out, each at its own place.
  std::vector<double> shuffled{p[3], p[0], p[14], p[7]};
  const auto s = adjust_p_values(shuffled, Correction::BenjaminiHochberg);
  EXPECT_NEAR(s[1], 0.0004, 1e-12);   // 0.0001 * 4 / 1
  EXPECT_NEAR(s[0], 0.019, 1e-12);    // 0.0095 * 4 / 2
  EXPECT_NEAR(s[3], 0.0344 * 4 / 3, 1e-12);
  EXPECT_NEAR(s[2], 1.0, 1e-12);
  const std::vector<double> holm{0.0015, 0.0056, 0.0247, 0.114, 0.2211, 0.278, 0.278, 0.278, 0.3213, 1, 1, 1, 1, 1, 1};
  const auto h = adjust_p_values(p, Correction::Holm);
  for (size_t i = 0; i < p.size(); ++i) EXPECT_NEAR(h[i], holm[i], 1e-9) << i;
  EXPECT_EQ(adjust_p_values(p, Correction::None), p);
}

// The Hodges-Lehmann shift and its interval, by hand: 1..5 against 6..10 gives the 25 differences 1 (once), 2 (twice),
// ... 5 (five times) ... 9 (once); their median is 5. With 5 a side P(U <= 2) = 4/252 <= 0.025 < P(U <= 3) = 7/252,
// so k = 3 and the interval is [D_(3), D_(23)] = [2, 8] with coverage 1 - 8/252.
TEST(RunLevelStatistics, HodgesLehmannShiftAndItsExactInterval) {
  const Shift s = hodges_lehmann({1, 2, 3, 4, 5}, {6, 7, 8, 9, 10}, 0.05);
  EXPECT_DOUBLE_EQ(s.estimate, 5);
  EXPECT_TRUE(s.bounded);
  EXPECT_DOUBLE_EQ(s.low, 2);
  EXPECT_DOUBLE_EQ(s.high, 8);
  EXPECT_NEAR(s.confidence, 1 - 8.0 / 252, 1e-12);
  // Three a side: P(U <= 0) = 1/20 > 0.025, no interval at 95 %: the whole range, said so.
  const Shift three = hodges_lehmann({1, 2, 3}, {11, 12, 13}, 0.05);
  EXPECT_FALSE(three.bounded);
  EXPECT_DOUBLE_EQ(three.estimate, 10);
  EXPECT_DOUBLE_EQ(three.low, 8);
  EXPECT_DOUBLE_EQ(three.high, 12);
  // A fixed figure per side: the shift is exact and the interval a point.
  const Shift fixed = hodges_lehmann({100, 100, 100, 100, 100}, {102, 102, 102, 102, 102});
  EXPECT_DOUBLE_EQ(fixed.estimate, 2);
  EXPECT_DOUBLE_EQ(fixed.low, 2);
  EXPECT_DOUBLE_EQ(fixed.high, 2);
  // Large sides: the normal approximation's k (Hollander & Wolfe 4.3): 150 a side, shift 20 on a ramp of 0..149.
  std::vector<double> a, b;
  for (int i = 0; i < 150; ++i) a.push_back(i), b.push_back(i + 20);
  const Shift big = hodges_lehmann(a, b, 0.05);
  EXPECT_DOUBLE_EQ(big.estimate, 20);
  EXPECT_TRUE(big.bounded);
  EXPECT_LT(big.low, 20);
  EXPECT_GT(big.high, 20);
  EXPECT_NEAR(normal_quantile(0.975), 1.959963984540054, 1e-9);
}
