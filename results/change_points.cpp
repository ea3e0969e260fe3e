#include "results/change_points.h"

#include <algorithm>
#include <cmath>
#include <random>

namespace fanout {

namespace {

// Prefix sums of the distance matrix, P[r][c] = sum over j < r of |x_j - x_c|: every sum the statistic needs is a
// difference of two of them, so a piece of length L costs O(L^2), not O(L^3). Stored by r (row r holds every c), so
// that the inner loop, which walks c for fixed r, reads memory in order; the buffer is kept across the permutations
// of a test (a fresh one each time cost a page fault per 4 KiB: most of the time at 365 points).
struct Distances {
  size_t n = 0;
  std::vector<double> prefix;  // (n + 1) rows of n
  std::vector<double> diag;    // P[c][c]: sum over j < c of |x_j - x_c|
  std::vector<double> reciprocal;  // 1/k for k in [0, n] (1/0 taken as 0)
  Distances() = default;
  explicit Distances(const std::vector<double>& x) { assign(x); }
  void assign(const std::vector<double>& x) {
    n = x.size();
    prefix.resize(n * (n + 1));
    std::fill(prefix.begin(), prefix.begin() + long(n), 0.0);  // row 0; every other row is written below
    diag.resize(n);
    for (size_t r = 0; r < n; ++r) {
      const double* from = &prefix[r * n];
      double* to = &prefix[(r + 1) * n];
      for (size_t c = 0; c < n; ++c) to[c] = from[c] + std::fabs(x[r] - x[c]);
    }
    for (size_t c = 0; c < n; ++c) diag[c] = prefix[c * n + c];
    if (reciprocal.size() != n + 1) {
      reciprocal.assign(n + 1, 0.0);
      for (size_t k = 1; k <= n; ++k) reciprocal[k] = 1.0 / double(k);
    }
  }
  const double* row(size_t r) const { return &prefix[r * n]; }
};

// Q(tau, kappa) = 2/(m+n) sum|X-Y| - 2m/((m+n)(n-1)) sum_{i<k}|X_i-X_k| - 2n/((m+n)(m-1)) sum_{j<k}|Y_j-Y_k|, with
// X = x[start, tau) (n points) and Y = x[tau, kappa) (m points); a within-sum of one point is 0. Ties keep the
// smallest tau, then the smallest kappa (numpy's argmax over Otava's matrix, row by row).
// Written as 2/(m+n) * (cross - m/(n-1) within_x - n/(m-1) within_y) with reciprocals from a table: no division in
// the inner loop, which runs L^2/2 times a piece for each of a test's permutations.
ChangePoint best_of(const Distances& d, size_t start, size_t end) {
  ChangePoint best;
  best.qhat = -INFINITY;
  double within_x = 0;  // sum over start <= i < k < tau
  const double* row_start = d.row(start);
  const double* inv = d.reciprocal.data();  // inv[k] = 1/k (inv[0] = 0: a within-sum of one point counts 0)
  for (size_t tau = start + 1; tau < end; ++tau) {
    within_x += d.diag[tau - 1] - row_start[tau - 1];  // sum of |x_j - x_{tau-1}| for j in [start, tau - 1)
    const size_t n = tau - start;
    const double wx = within_x * inv[n - 1];
    const double* row_tau = d.row(tau);
    double cross = 0, within_y = 0;
    for (size_t kappa = tau + 1; kappa <= end; ++kappa) {
      const size_t y = kappa - 1;  // the point Y gains
      cross += row_tau[y] - row_start[y];
      within_y += d.diag[y] - row_tau[y];
      const size_t m = kappa - tau;
      const double q = 2.0 * inv[m + n] * (cross - double(m) * wx - double(n) * inv[m - 1] * within_y);
      if (q > best.qhat) best.qhat = q, best.index = tau;
    }
  }
  return best;
}

// The pieces the change points so far cut the series into, [start, end).
std::vector<std::pair<size_t, size_t>> pieces(const std::vector<ChangePoint>& cps, size_t n) {
  std::vector<std::pair<size_t, size_t>> out;
  size_t from = 0;
  for (auto& c : cps) {
    if (c.index > from) out.emplace_back(from, c.index);
    from = c.index;
  }
  if (n > from) out.emplace_back(from, n);
  return out;
}

// The best split over every piece of two points or more (the first of equal statistics).
ChangePoint next_candidate(const Distances& d, const std::vector<std::pair<size_t, size_t>>& parts, bool& found) {
  ChangePoint best;
  found = false;
  for (auto& [s, e] : parts) {
    if (e - s < 2) continue;
    ChangePoint c = best_of(d, s, e);
    if (!found || c.qhat > best.qhat) best = c, found = true;
  }
  return best;
}

}  // namespace

ChangePoint best_split(const std::vector<double>& series, size_t start, size_t end) {
  return best_of(Distances(series), start, end);
}

std::vector<ChangePoint> e_divisive(const std::vector<double>& series, const ChangePointOptions& opts) {
  std::vector<ChangePoint> cps;
  if (series.size() < 3) return cps;
  const Distances d(series);
  std::mt19937_64 rng(opts.seed);
  for (;;) {
    const auto parts = pieces(cps, series.size());
    bool found = false;
    ChangePoint candidate = next_candidate(d, parts, found);
    if (!found) break;
    // Permutation test: shuffle within every piece (what is already split stays split), take the best split again.
    int as_large = 0;
    std::vector<double> shuffled = series;
    Distances permuted;
    for (int k = 0; k < opts.permutations; ++k) {
      shuffled = series;
      for (auto& [s, e] : parts) std::shuffle(shuffled.begin() + long(s), shuffled.begin() + long(e), rng);
      bool any = false;
      permuted.assign(shuffled);
      if (next_candidate(permuted, parts, any).qhat >= candidate.qhat) ++as_large;
      // Once p can no longer reach max_p the answer is known: the split is not kept.
      if (double(as_large) / double(opts.permutations + 1) > opts.max_p_value) break;
    }
    candidate.p_value = double(as_large) / double(opts.permutations + 1);
    if (!(candidate.p_value <= opts.max_p_value)) break;
    cps.push_back(candidate);
    std::sort(cps.begin(), cps.end(), [](const ChangePoint& a, const ChangePoint& b) { return a.index < b.index; });
  }
  return cps;
}

}  // namespace fanout
