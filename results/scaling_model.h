// Scaling models of a figure against what was swept, as Extra-P fits them (Calotoiu et al., "Using automated
// performance modeling to find scalability bugs in complex codes", SC13; github extra-p/extrap, its
// modelers/single_parameter/basic.py and multi_parameter/multi_parameter_modeler.py): the performance model normal
// form with one term, f(p) = c0 + c1 * p^i * log2(p)^j, i in {0, 1/4, 1/3, 1/2, 2/3, 3/4, 1, 5/4, 4/3, 3/2, 5/3, 7/4,
// 2, 9/4, 7/3, 5/2, 8/3, 11/4, 3}, j in {0, 1, 2}; coefficients by least squares; the hypothesis chosen by
// leave-one-out cross-validation on SMAPE, against the constant model, a term contributing less than 0.05 % of every
// value refused, as Extra-P's basic modeler does. Two parameters: the best single-parameter term of each (from the
// means over the other parameter), combined additively and multiplicatively, the best by SMAPE, as Extra-P's
// multi-parameter modeler does. Pure functions of the points they are given (run-level medians): no I/O.
#pragma once
#include <array>
#include <cstddef>
#include <string>
#include <utility>
#include <vector>

namespace fanout {

// Extra-P needs this many distinct values of a parameter for a model (min_measurement_points).
constexpr size_t kModelMinPoints = 5;

// p^(num/den) * log2(p)^log, or 1 for the constant.
struct ModelTerm {
  int num = 0, den = 1, log = 0;
  bool constant() const { return num == 0 && log == 0; }
  double exponent() const { return double(num) / double(den); }
  double evaluate(double p) const;
  std::string text(const std::string& param) const;  // "size^(3/2) * log2(size)^(1)"; "" for the constant
  // Orders growth: a larger exponent, then a larger log power, grows faster.
  bool operator<(const ModelTerm& o) const;
  bool operator==(const ModelTerm& o) const { return num * o.den == o.num * den && log == o.log; }
};
// Every hypothesis term, constant excluded, in Extra-P's order of growth.
const std::vector<ModelTerm>& model_terms();

struct SingleParameterModel {
  bool fitted = false;
  std::string why;  // when not fitted: "4 distinct values of size; a model needs 5"
  std::string param;
  double c0 = 0, c1 = 0;
  ModelTerm term;      // constant() for the constant model
  double smape = 0;    // cross-validated, in percent (the selection criterion)
  double adj_r2 = 1;   // of the fit to all points
  double rss = 0;      // of the fit to all points
  double lo = 0, hi = 0;
  size_t points = 0;
  double evaluate(double p) const { return c0 + c1 * term.evaluate(p); }
  // "0.31 + 2.1e-09 * size^(3)"
  std::string formula() const;
};
// points: (parameter value, run-level median); one per distinct value (means of repeats are the caller's).
SingleParameterModel fit_single_parameter(const std::string& param, std::vector<std::pair<double, double>> points);

struct TwoParameterModel {
  bool fitted = false;
  std::string why;
  std::string x, y;
  ModelTerm tx, ty;  // the single-parameter terms combined (constant(): that parameter does not matter)
  // f = c0 + a * tx + b * ty + c * tx * ty, with the hypothesis' absent terms 0
  double c0 = 0, a = 0, b = 0, c = 0;
  std::string form;  // "additive", "multiplicative", "x + x*y", "y + x*y", "x only", "y only", "constant"
  double smape = 0, adj_r2 = 1, rss = 0;
  size_t points = 0;
  double evaluate(double xv, double yv) const;
  std::string formula() const;
};
// points: (x, y, run-level median).
TwoParameterModel fit_two_parameters(const std::string& x, const std::string& y, const std::vector<std::array<double, 3>>& points);

// "1.5e+03" style number for formulas: 4 significant digits.
std::string model_number(double v);

}  // namespace fanout
