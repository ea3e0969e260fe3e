// How long Extra-P-style model fitting takes (results/scaling_model.h): N (metric, parameter) pairs of 8 points each,
// figures from every term class with a fixed-seed noise, each fitted with every hypothesis and leave-one-out
// cross-validation. Goal (bench/goals.txt): 1,000 pairs in under 1 s. Also checks that what it fitted is right.
//   model_bench [pairs]    default 1000
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <random>

#include "bench/figures.h"
#include "results/scaling_model.h"

using namespace fanout;

int main(int argc, char** argv) {
  const int pairs = argc > 1 ? std::atoi(argv[1]) : 1000;
  if (pairs < 1) {
    std::fprintf(stderr, "usage: model_bench [pairs >= 1]\n");
    return 2;
  }
  std::mt19937_64 rng(11);
  std::lognormal_distribution<double> noise(0, 0.001);
  const auto& terms = model_terms();
  std::vector<std::vector<std::pair<double, double>>> data(static_cast<size_t>(pairs));
  std::vector<ModelTerm> truth(static_cast<size_t>(pairs));
  for (int k = 0; k < pairs; ++k) {
    truth[size_t(k)] = terms[size_t(k) % terms.size()];
    const double c1 = 1000.0 / truth[size_t(k)].evaluate(1024);
    for (int e = 3; e <= 10; ++e) {
      const double p = std::ldexp(1.0, e);
      data[size_t(k)].emplace_back(p, (5 + c1 * truth[size_t(k)].evaluate(p)) * noise(rng));
    }
  }
  const auto t0 = std::chrono::steady_clock::now();
  int right = 0;
  for (int k = 0; k < pairs; ++k) right += fit_single_parameter("p", data[size_t(k)]).term == truth[size_t(k)];
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("%d (metric, parameter) pairs, 8 points each, %zu hypotheses: %.3f s (%.1f us per pair); %d of %d terms as generated\n",
              pairs, terms.size(), s, s / pairs * 1e6, right, pairs);
  bench::figure("models_s." + std::to_string(pairs), s, "s");
  bench::figure("models_right_fraction", double(right) / pairs, "fraction");
  return 0;
}
