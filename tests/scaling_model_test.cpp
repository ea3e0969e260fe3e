// Issue 51: scaling models on data whose answer is known exactly (a figure computed from its parameter, noise from a
// fixed seed): the term's exponents exact, the coefficients within 1 %; too few values say why; a constant stays
// constant; two parameters combined as Extra-P combines them.
#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "results/scaling_model.h"

using namespace fanout;

namespace {

// c0 + c1 * p^(num/den) * log2(p)^log at p = 2^3 .. 2^10, times a lognormal noise of sigma `noise` (fixed seed).
std::vector<std::pair<double, double>> generated(double c0, double c1, ModelTerm t, double noise, uint64_t seed = 7) {
  std::mt19937_64 rng(seed);
  std::lognormal_distribution<double> e(0, noise);
  std::vector<std::pair<double, double>> out;
  for (int k = 3; k <= 10; ++k) {
    const double p = std::ldexp(1.0, k);
    out.emplace_back(p, (c0 + c1 * t.evaluate(p)) * (noise > 0 ? e(rng) : 1.0));
  }
  return out;
}

}  // namespace

TEST(ScalingModel, EachTermClassIsFoundWithItsCoefficients) {
  const ModelTerm classes[] = {{1, 1, 0}, {1, 1, 1}, {2, 1, 0}, {3, 1, 0}, {1, 2, 0}, {0, 1, 1}, {0, 1, 2}, {3, 2, 0}, {1, 3, 0}, {5, 2, 1}};
  for (const ModelTerm& t : classes) {
    // The term is most of the figure at the largest p, the constant most of it at the smallest.
    const double c1 = 1000.0 / t.evaluate(1024), c0 = 50;
    const auto m = fit_single_parameter("p", generated(c0, c1, t, 0.0005));
    ASSERT_TRUE(m.fitted) << m.why;
    EXPECT_EQ(m.term.num * t.den, t.num * m.term.den) << t.text("p") << " fitted as " << m.formula();
    EXPECT_EQ(m.term.log, t.log) << t.text("p") << " fitted as " << m.formula();
    EXPECT_NEAR(m.c1 / c1, 1.0, 0.01) << m.formula();
    EXPECT_NEAR(m.c0 / c0, 1.0, 0.01) << m.formula();
    EXPECT_GT(m.adj_r2, 0.999) << m.formula();
    EXPECT_EQ(m.points, 8u);
    EXPECT_DOUBLE_EQ(m.lo, 8);
    EXPECT_DOUBLE_EQ(m.hi, 1024);
  }
}

TEST(ScalingModel, TheFormulaNamesTheTerm) {
  const auto m = fit_single_parameter("size", generated(0.31, 2.1e-9, {3, 1, 0}, 0));
  ASSERT_TRUE(m.fitted);
  EXPECT_EQ(m.formula(), "0.31 + 2.1e-09 * size^(3)");
  EXPECT_NEAR(m.evaluate(4096), 0.31 + 2.1e-9 * 4096.0 * 4096 * 4096, 1e-6);
  const auto plog = fit_single_parameter("p", generated(7, 0.003, {2, 1, 1}, 0));
  EXPECT_EQ(plog.formula(), "7 + 0.003 * p^(2) * log2(p)^(1)");
}

TEST(ScalingModel, AConstantIsAConstant) {
  const auto exact = fit_single_parameter("p", generated(42, 0, {1, 1, 0}, 0));
  ASSERT_TRUE(exact.fitted);
  EXPECT_TRUE(exact.term.constant());
  EXPECT_DOUBLE_EQ(exact.c0, 42);
  EXPECT_EQ(exact.formula(), "42");
  // Noise of 0.01 % around a constant: no term explains it better in cross-validation than the mean.
  const auto noisy = fit_single_parameter("p", generated(42, 0, {1, 1, 0}, 0.0001));
  EXPECT_TRUE(noisy.term.constant()) << noisy.formula();
  EXPECT_NEAR(noisy.c0, 42, 0.01);
}

TEST(ScalingModel, FourValuesAreNoModelAndSayWhy) {
  auto pts = generated(1, 1, {1, 1, 0}, 0);
  pts.resize(4);
  const auto m = fit_single_parameter("nodes", pts);
  EXPECT_FALSE(m.fitted);
  EXPECT_EQ(m.why, "4 distinct value(s) of nodes; a model needs 5");
}

TEST(ScalingModel, TwoParametersOfAKnownProduct) {
  // f = 10 + 0.5 * x * y^(1/2) on a 5 x 5 grid: each parameter's term from the means over the other, combined
  // multiplicatively.
  std::vector<std::array<double, 3>> pts;
  for (double x : {2.0, 4.0, 8.0, 16.0, 32.0})
    for (double y : {1.0, 4.0, 9.0, 16.0, 25.0}) pts.push_back({x, y, 10 + 0.5 * x * std::sqrt(y)});
  const auto m = fit_two_parameters("x", "y", pts);
  ASSERT_TRUE(m.fitted) << m.why;
  EXPECT_EQ(m.form, "multiplicative");
  EXPECT_EQ(m.tx, (ModelTerm{1, 1, 0}));
  EXPECT_EQ(m.ty, (ModelTerm{1, 2, 0}));
  EXPECT_NEAR(m.c, 0.5, 0.005);
  EXPECT_NEAR(m.c0, 10, 0.1);
  EXPECT_NEAR(m.evaluate(64, 100), 10 + 0.5 * 64 * 10, 0.5);
  // A sum: f = 3 + 2 * x^2 + 50 * log2(y).
  std::vector<std::array<double, 3>> sum;
  for (double x : {2.0, 4.0, 8.0, 16.0, 32.0})
    for (double y : {2.0, 4.0, 8.0, 16.0, 32.0}) sum.push_back({x, y, 3 + 2 * x * x + 50 * std::log2(y)});
  const auto s = fit_two_parameters("x", "y", sum);
  ASSERT_TRUE(s.fitted) << s.why;
  EXPECT_EQ(s.form, "additive");
  EXPECT_EQ(s.tx, (ModelTerm{2, 1, 0}));
  EXPECT_EQ(s.ty, (ModelTerm{0, 1, 1}));
  EXPECT_NEAR(s.a, 2, 0.02);
  EXPECT_NEAR(s.b, 50, 0.5);
}

// The branches no growth term can serve: a parameter with a value of 0 gets only the constant model (no power or
// log of 0), and a figure that is not finite gets none, each saying why.
TEST(ScalingModel, NonPositiveOrNonFiniteValuesSayWhy) {
  const auto zero = fit_single_parameter("offset", {{0, 1}, {1, 2}, {2, 3}, {3, 4}, {4, 5}});
  ASSERT_TRUE(zero.fitted);
  EXPECT_TRUE(zero.term.constant());
  EXPECT_DOUBLE_EQ(zero.c0, 3);
  EXPECT_EQ(zero.why, "offset has values <= 0: only the constant model");
  const auto nan = fit_single_parameter("p", {{1, 1}, {2, 2}, {4, NAN}, {8, 4}, {16, 5}});
  EXPECT_FALSE(nan.fitted);
  EXPECT_EQ(nan.why, "a value of p or of the figure is not a finite number");
  std::vector<std::array<double, 3>> grid;
  for (double x : {1.0, 2.0, 4.0})
    for (double y : {1.0, 2.0, 4.0, 8.0, 16.0}) grid.push_back({x, y, x * y});
  const auto two = fit_two_parameters("x", "y", grid);
  EXPECT_FALSE(two.fitted);
  EXPECT_EQ(two.why, "3 distinct value(s) of x; a model needs 5");
}
