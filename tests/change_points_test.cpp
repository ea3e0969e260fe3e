// E-Divisive means (results/change_points.h) on series whose answer is known: a statistic computed by hand, steps
// planted at known points under noise from a fixed seed, a constant and a noise-only series.
#include <gtest/gtest.h>

#include <random>

#include "results/change_points.h"

using namespace fanout;

namespace {

std::vector<size_t> indexes(const std::vector<ChangePoint>& cps) {
  std::vector<size_t> out;
  for (auto& c : cps) out.push_back(c.index);
  return out;
}

// `n` points at `level`, each times (1 + u), u uniform in [-noise, noise] from `rng`.
void extend(std::vector<double>& s, size_t n, double level, double noise, std::mt19937_64& rng) {
  std::uniform_real_distribution<double> u(-noise, noise);
  for (size_t i = 0; i < n; ++i) s.push_back(level * (1 + u(rng)));
}

}  // namespace

// [0, 0, 1, 1]: X = [0, 0], Y = [1, 1] gives 2/(2+2) * 4 = 2, the largest of the six (tau, kappa) pairs (worked
// by hand: 0, 0.667 - 0.667, 1 - 0.5, 4/3, 2, 1 - 0.5).
TEST(ChangePoints, TheStatisticOfASmallSeriesIsTheOneWorkedByHand) {
  const ChangePoint c = best_split({0, 0, 1, 1}, 0, 4);
  EXPECT_EQ(c.index, 2u);
  EXPECT_DOUBLE_EQ(c.qhat, 2.0);
  const ChangePoint tail = best_split({0, 0, 1, 1}, 1, 4);  // [0, 1, 1]: split before the first 1
  EXPECT_EQ(tail.index, 2u);
}

// The series: 40 revisions, +10 % at 17, -5 % at 31, +-1 % noise from a fixed seed: exactly those two.
TEST(ChangePoints, TwoPlantedStepsAreFoundWhereTheyAreAndNowhereElse) {
  std::mt19937_64 rng(2026);
  std::vector<double> s;
  extend(s, 17, 100.0, 0.01, rng);
  extend(s, 14, 110.0, 0.01, rng);
  extend(s, 9, 104.5, 0.01, rng);
  const auto cps = e_divisive(s);
  EXPECT_EQ(indexes(cps), (std::vector<size_t>{17, 31}));
  for (auto& c : cps) EXPECT_LE(c.p_value, 0.001) << c.index;
  // The same series and seed: the same answer, p-values included.
  const auto again = e_divisive(s);
  ASSERT_EQ(again.size(), cps.size());
  for (size_t i = 0; i < cps.size(); ++i) EXPECT_EQ(again[i].p_value, cps[i].p_value);
}

// 8 points at 100 then 8 at 120 (+-0.5 %): the series ../shared/recipes/otava.sh was checked on (index 8 there).
TEST(ChangePoints, OtavasCheckedSeriesGivesItsIndex) {
  std::mt19937_64 rng(7);
  std::vector<double> s;
  extend(s, 8, 100.0, 0.005, rng);
  extend(s, 8, 120.0, 0.005, rng);
  EXPECT_EQ(indexes(e_divisive(s)), (std::vector<size_t>{8}));
}

// Nothing to find: a constant, noise alone, and series too short to split.
TEST(ChangePoints, NoStepNoChangePoint) {
  EXPECT_TRUE(e_divisive(std::vector<double>(30, 5.0)).empty());
  std::mt19937_64 rng(11);
  std::vector<double> noise;
  extend(noise, 40, 100.0, 0.02, rng);
  EXPECT_TRUE(e_divisive(noise).empty());
  EXPECT_TRUE(e_divisive({1.0, 2.0}).empty());
  EXPECT_TRUE(e_divisive({}).empty());
}
