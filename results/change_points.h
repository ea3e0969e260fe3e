// Change points of a series (issue 55): E-Divisive means (Matteson and James, "A nonparametric approach for
// multiple change point analysis of multivariate data", JASA 2014), as MongoDB applied it to nightly performance
// series (Daly et al., ICPE 2020) and Apache Otava keeps it (compute_change_points_orig): split the series where the
// energy distance between the two sides, weighted by their sizes, is largest; keep the split while a permutation
// test says it is significant; then look for the next split within the pieces. One place computes it; `fanout
// history changes` and the dashboard only report it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace fanout {

struct ChangePoint {
  size_t index = 0;   // the first point after the change
  double qhat = 0;    // the statistic that chose it
  double p_value = 1; // permutation test: permutations with a statistic at least as large, over permutations + 1
                      // (a split that cannot be kept stops its test once p passes max_p: the same decisions, sooner)
};

struct ChangePointOptions {
  double max_p_value = 0.001;  // Otava's default: a split is kept when p <= this
  int permutations = 100;
  uint64_t seed = 1;           // the permutations' shuffles: the same series and seed give the same answer
};

// Change points of `series` (oldest first), sorted by index. Fewer than 3 points: none.
std::vector<ChangePoint> e_divisive(const std::vector<double>& series, const ChangePointOptions& opts = {});

// The best split of series[start, end): its index (start < tau < end) and statistic Q(tau, kappa) maximised over
// kappa too (start < tau < kappa <= end), with |x - y| distances (power 1). For tests and the permutation test.
ChangePoint best_split(const std::vector<double>& series, size_t start, size_t end);

}  // namespace fanout
