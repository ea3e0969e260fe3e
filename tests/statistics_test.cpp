#include <gtest/gtest.h>

#include <cmath>

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
