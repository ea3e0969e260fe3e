#include "results/scaling_model.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <map>

namespace fanout {

namespace {

// Extra-P's constants (modelers/single_parameter/abstract_base.py): a constant coefficient this small against the
// smallest value is 0, and a term contributing less than this share of every value is no term.
constexpr double kCleanConstant = 0.0005;
constexpr double kMinTermContribution = 0.0005;

struct Fit {
  double c0 = 0, c1 = 0;
};

// Least squares of y = c0 + c1 * x.
Fit least_squares(const std::vector<double>& x, const std::vector<double>& y) {
  const double n = double(x.size());
  double mx = 0, my = 0;
  for (size_t k = 0; k < x.size(); ++k) mx += x[k] / n, my += y[k] / n;
  double sxx = 0, sxy = 0;
  for (size_t k = 0; k < x.size(); ++k) sxx += (x[k] - mx) * (x[k] - mx), sxy += (x[k] - mx) * (y[k] - my);
  Fit f;
  f.c1 = sxx > 0 ? sxy / sxx : 0;
  f.c0 = my - f.c1 * mx;
  return f;
}

double smape_term(double actual, double predicted) {
  const double abssum = std::fabs(actual) + std::fabs(predicted);
  return abssum != 0 ? std::fabs(predicted - actual) / abssum * 2 : 0;
}

// Least squares with several columns (constant first): normal equations on columns scaled to unit size, solved by
// Gaussian elimination with partial pivoting. Columns of p^3 and of 1 differ by many orders: scaling keeps it stable.
std::vector<double> least_squares(const std::vector<std::vector<double>>& cols, const std::vector<double>& y) {
  const size_t m = cols.size(), n = y.size();
  std::vector<double> scale(m, 1);
  for (size_t c = 0; c < m; ++c) {
    double s = 0;
    for (double v : cols[c]) s = std::max(s, std::fabs(v));
    scale[c] = s > 0 ? s : 1;
  }
  std::vector<std::vector<double>> a(m, std::vector<double>(m + 1, 0));
  for (size_t r = 0; r < m; ++r) {
    for (size_t c = 0; c < m; ++c)
      for (size_t k = 0; k < n; ++k) a[r][c] += cols[r][k] / scale[r] * cols[c][k] / scale[c];
    for (size_t k = 0; k < n; ++k) a[r][m] += cols[r][k] / scale[r] * y[k];
  }
  for (size_t p = 0; p < m; ++p) {
    size_t best = p;
    for (size_t r = p + 1; r < m; ++r)
      if (std::fabs(a[r][p]) > std::fabs(a[best][p])) best = r;
    std::swap(a[p], a[best]);
    if (std::fabs(a[p][p]) < 1e-300) return std::vector<double>(m, std::numeric_limits<double>::quiet_NaN());
    for (size_t r = 0; r < m; ++r) {
      if (r == p) continue;
      const double f = a[r][p] / a[p][p];
      for (size_t c = p; c <= m; ++c) a[r][c] -= f * a[p][c];
    }
  }
  std::vector<double> out(m);
  for (size_t c = 0; c < m; ++c) out[c] = a[c][m] / a[c][c] / scale[c];
  return out;
}

double adjusted_r2(double rss, double tss, size_t n, size_t terms) {
  if (tss <= 0 || n <= terms + 1) return 1;
  return 1 - (rss / tss) * (double(n) - 1) / (double(n) - double(terms) - 1);
}

}  // namespace

double ModelTerm::evaluate(double p) const {
  double v = 1;
  if (num != 0) v *= std::pow(p, exponent());
  if (log != 0) v *= std::pow(std::log2(p), log);
  return v;
}

std::string ModelTerm::text(const std::string& param) const {
  if (constant()) return "";
  std::string out;
  if (num != 0) out = param + "^(" + std::to_string(num) + (den == 1 ? "" : "/" + std::to_string(den)) + ")";
  if (log != 0) out += (out.empty() ? "" : " * ") + std::string("log2(") + param + ")^(" + std::to_string(log) + ")";
  return out;
}

bool ModelTerm::operator<(const ModelTerm& o) const {
  if (num * o.den != o.num * den) return num * o.den < o.num * den;
  return log < o.log;
}

const std::vector<ModelTerm>& model_terms() {
  static const std::vector<ModelTerm> terms = [] {
    const std::pair<int, int> exps[] = {{0, 1}, {1, 4}, {1, 3}, {1, 2}, {2, 3}, {3, 4}, {1, 1}, {5, 4}, {4, 3}, {3, 2},
                                        {5, 3}, {7, 4}, {2, 1}, {9, 4}, {7, 3}, {5, 2}, {8, 3}, {11, 4}, {3, 1}};
    std::vector<ModelTerm> out;
    for (auto [num, den] : exps)
      for (int log = 0; log <= 2; ++log)
        if (num != 0 || log != 0) out.push_back({num, den, log});
    return out;
  }();
  return terms;
}

std::string model_number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

std::string SingleParameterModel::formula() const {
  if (!fitted) return "";
  if (term.constant()) return model_number(c0);
  return model_number(c0) + (c1 < 0 ? " - " : " + ") + model_number(std::fabs(c1)) + " * " + term.text(param);
}

SingleParameterModel fit_single_parameter(const std::string& param, std::vector<std::pair<double, double>> points) {
  SingleParameterModel m;
  m.param = param;
  std::sort(points.begin(), points.end());
  m.points = points.size();
  if (points.size() < kModelMinPoints) {
    m.why = std::to_string(points.size()) + " distinct value(s) of " + param + "; a model needs " + std::to_string(kModelMinPoints);
    return m;
  }
  for (auto& [p, v] : points)
    if (!std::isfinite(p) || !std::isfinite(v)) {
      m.why = "a value of " + param + " or of the figure is not a finite number";
      return m;
    }
  m.lo = points.front().first, m.hi = points.back().first;
  const size_t n = points.size();
  std::vector<double> ps(n), vs(n);
  for (size_t k = 0; k < n; ++k) ps[k] = points[k].first, vs[k] = points[k].second;
  // The constant model: the mean, its SMAPE over all points (Extra-P's create_constant_model).
  double mean = 0;
  for (double v : vs) mean += v / double(n);
  double tss = 0, const_smape = 0;
  for (double v : vs) tss += (v - mean) * (v - mean), const_smape += smape_term(v, mean);
  m.fitted = true;
  m.c0 = mean, m.c1 = 0, m.term = {};
  m.smape = const_smape / double(n) * 100;
  m.rss = tss;
  if (tss == 0) return m;  // the data are constant
  // Non-positive values: no power or log of them is a model of growth.
  const bool positive = ps.front() > 0;
  if (!positive) {
    m.why = param + " has values <= 0: only the constant model";
    return m;
  }
  const bool logs = ps.front() >= 1;  // Extra-P drops log terms when a value is below 1
  for (const ModelTerm& t : model_terms()) {
    if (t.log != 0 && !logs) continue;
    std::vector<double> xs(n);
    for (size_t k = 0; k < n; ++k) xs[k] = t.evaluate(ps[k]);
    // Leave one out: fit on the others, predict the one left out (Extra-P's compute_cost_leave_one_out).
    double loo_smape = 0, loo_rss = 0;
    for (size_t out = 0; out < n; ++out) {
      std::vector<double> tx, ty;
      for (size_t k = 0; k < n; ++k)
        if (k != out) tx.push_back(xs[k]), ty.push_back(vs[k]);
      Fit f = least_squares(tx, ty);
      const double train_min = *std::min_element(ty.begin(), ty.end());
      if (train_min == 0 ? std::fabs(f.c0) < kCleanConstant : std::fabs(f.c0 / train_min) < kCleanConstant) f.c0 = 0;
      const double predicted = f.c0 + f.c1 * xs[out];
      loo_rss += (predicted - vs[out]) * (predicted - vs[out]);
      loo_smape += smape_term(vs[out], predicted) / double(n) * 100;
    }
    if (!std::isfinite(loo_rss)) continue;  // numeric imprecision: Extra-P ignores the hypothesis
    const Fit all = least_squares(xs, vs);
    if (all.c1 == 0) continue;
    double contribution = 0;
    for (size_t k = 0; k < n; ++k) contribution = std::max(contribution, std::fabs(all.c1 * xs[k] / vs[k]));
    if (!(contribution >= kMinTermContribution)) continue;
    if (loo_smape < m.smape) {
      m.c0 = all.c0, m.c1 = all.c1, m.term = t, m.smape = loo_smape;
      double rss = 0;
      for (size_t k = 0; k < n; ++k) rss += (all.c0 + all.c1 * xs[k] - vs[k]) * (all.c0 + all.c1 * xs[k] - vs[k]);
      m.rss = rss;
    }
  }
  m.adj_r2 = m.term.constant() ? 1 : adjusted_r2(m.rss, tss, n, 1);
  return m;
}

double TwoParameterModel::evaluate(double xv, double yv) const {
  const double a_term = tx.evaluate(xv), b_term = ty.evaluate(yv);
  return c0 + a * a_term + b * b_term + c * a_term * b_term;
}

std::string TwoParameterModel::formula() const {
  if (!fitted) return "";
  std::string out = model_number(c0);
  auto add = [&](double coef, const std::string& term) {
    if (coef == 0) return;
    out += (coef < 0 ? " - " : " + ") + model_number(std::fabs(coef)) + " * " + term;
  };
  add(a, tx.text(x));
  add(b, ty.text(y));
  add(c, tx.text(x) + " * " + ty.text(y));
  return out;
}

TwoParameterModel fit_two_parameters(const std::string& x, const std::string& y, const std::vector<std::array<double, 3>>& points) {
  TwoParameterModel m;
  m.x = x, m.y = y;
  m.points = points.size();
  // Each parameter's single-parameter model from the means over the other (Extra-P's find_best_measurement_points
  // on a full grid).
  std::map<double, std::pair<double, int>> by_x, by_y;
  for (auto& [xv, yv, v] : points) {
    auto& bx = by_x[xv];
    bx.first += v, ++bx.second;
    auto& byy = by_y[yv];
    byy.first += v, ++byy.second;
  }
  auto means = [](const std::map<double, std::pair<double, int>>& g) {
    std::vector<std::pair<double, double>> out;
    for (auto& [k, s] : g) out.emplace_back(k, s.first / s.second);
    return out;
  };
  const SingleParameterModel mx = fit_single_parameter(x, means(by_x)), my = fit_single_parameter(y, means(by_y));
  if (!mx.fitted || !my.fitted) {
    m.why = !mx.fitted ? mx.why : my.why;
    return m;
  }
  m.fitted = true;
  m.tx = mx.term, m.ty = my.term;
  const size_t n = points.size();
  std::vector<double> vs(n), tx(n), ty(n), txy(n), ones(n, 1);
  double mean = 0;
  for (size_t k = 0; k < n; ++k) {
    vs[k] = points[k][2];
    tx[k] = m.tx.evaluate(points[k][0]);
    ty[k] = m.ty.evaluate(points[k][1]);
    txy[k] = tx[k] * ty[k];
    mean += vs[k] / double(n);
  }
  double tss = 0;
  for (double v : vs) tss += (v - mean) * (v - mean);
  struct Hyp {
    std::string form;
    bool use_a, use_b, use_c;
  };
  std::vector<Hyp> hyps;
  if (m.tx.constant() && m.ty.constant()) hyps = {{"constant", false, false, false}};
  else if (m.ty.constant()) hyps = {{"x only", true, false, false}};
  else if (m.tx.constant()) hyps = {{"y only", false, true, false}};
  else hyps = {{"multiplicative", false, false, true}, {"additive", true, true, false}, {"x + x*y", true, false, true}, {"y + x*y", false, true, true}};
  bool have = false;
  for (auto& h : hyps) {
    std::vector<std::vector<double>> cols{ones};
    if (h.use_a) cols.push_back(tx);
    if (h.use_b) cols.push_back(ty);
    if (h.use_c) cols.push_back(txy);
    const std::vector<double> coef = h.form == "constant" ? std::vector<double>{mean} : least_squares(cols, vs);
    if (!std::all_of(coef.begin(), coef.end(), [](double c) { return std::isfinite(c); })) continue;
    size_t at = 1;
    const double a = h.use_a ? coef[at++] : 0, b = h.use_b ? coef[at++] : 0, c = h.use_c ? coef[at++] : 0;
    double rss = 0, smape = 0, contribution_a = 0, contribution_b = 0, contribution_c = 0;
    for (size_t k = 0; k < n; ++k) {
      const double pred = coef[0] + a * tx[k] + b * ty[k] + c * txy[k];
      rss += (pred - vs[k]) * (pred - vs[k]);
      smape += smape_term(vs[k], pred) / double(n) * 100;
      contribution_a = std::max(contribution_a, std::fabs(a * tx[k] / vs[k]));
      contribution_b = std::max(contribution_b, std::fabs(b * ty[k] / vs[k]));
      contribution_c = std::max(contribution_c, std::fabs(c * txy[k] / vs[k]));
    }
    const bool small = (h.use_a && !(contribution_a >= kMinTermContribution)) || (h.use_b && !(contribution_b >= kMinTermContribution)) ||
                       (h.use_c && !(contribution_c >= kMinTermContribution));
    // Extra-P keeps the first hypothesis as the best even when a term of it is small; later ones must pass.
    if (have && (small || !(smape < m.smape))) continue;
    have = true;
    m.form = h.form, m.c0 = coef[0], m.a = a, m.b = b, m.c = c, m.smape = smape, m.rss = rss;
    m.adj_r2 = adjusted_r2(rss, tss, n, size_t(h.use_a) + size_t(h.use_b) + 2 * size_t(h.use_c));
  }
  if (!have) m.fitted = false, m.why = "no hypothesis could be fitted (numeric imprecision)";
  return m;
}

}  // namespace fanout
