#include "tpm.h"

#include <array>
#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>
#include <random>
#include <set>
#include <stdexcept>

namespace torchloader {

double LoaderModel::seconds_per_sample(int workers) const {
  if (workers < 1) throw std::invalid_argument("loader model: workers must be >= 1, got " + std::to_string(workers));
  return a / workers + b;
}

double LoaderModel::samples_per_second(int workers) const {
  double s = seconds_per_sample(workers);
  return s > 0 ? 1.0 / s : std::numeric_limits<double>::infinity();
}

LoaderModel fit_loader(const std::vector<std::pair<int, double>>& obs) {
  std::set<int> distinct;
  for (const auto& [w, thr] : obs) {
    if (w < 1) throw std::runtime_error("fit_loader: workers must be >= 1, got " + std::to_string(w));
    if (!(thr > 0) || !std::isfinite(thr))
      throw std::runtime_error("fit_loader: throughput must be positive and finite, got " + std::to_string(thr));
    distinct.insert(w);
  }
  if (distinct.size() < 2)
    throw std::runtime_error("fit_loader: need observations at >= 2 distinct worker counts, got " +
                             std::to_string(distinct.size()));
  // Simple linear regression y = a x + b, x = 1/w, y = 1/thr; centred sums for accuracy.
  double n = static_cast<double>(obs.size()), mx = 0, my = 0;
  for (const auto& [w, thr] : obs) {
    mx += 1.0 / w;
    my += 1.0 / thr;
  }
  mx /= n;
  my /= n;
  double sxx = 0, sxy = 0;
  for (const auto& [w, thr] : obs) {
    double dx = 1.0 / w - mx, dy = 1.0 / thr - my;
    sxx += dx * dx;
    sxy += dx * dy;
  }
  LoaderModel m;
  m.a = sxy / sxx;
  m.b = my - m.a * mx;
  // A negative serial part (more than linear scaling, from noise in a few runs) is not a loader: refit through
  // the origin (b = 0, perfect scaling), least squares of y = a x.
  if (m.b < 0) {
    double xy = 0, xx = 0;
    for (const auto& [w, thr] : obs) xy += (1.0 / w) / thr, xx += 1.0 / (double(w) * w);
    m.a = xy / xx;
    m.b = 0;
  }
  // A negative parallel part (more workers measured slower: a loaded machine) is no loader either: no scaling at
  // all, b = the mean time per sample.
  if (m.a < 0) m.a = 0, m.b = my;
  if (!(m.a + m.b > 0))
    throw std::runtime_error("fit_loader: the fitted model predicts a non-positive time per sample for one worker");
  return m;
}

double ComputeModel::iteration_seconds(double batch_per_device, double flops_per_sample, double params,
                                       int devices) const {
  return c0 + c_work * batch_per_device * flops_per_sample + c_comm * (devices - 1) * params + c_params * params;
}

namespace {
constexpr int kK = 4;  // features: 1, bpd*flops, (devices-1)*params, params
using Row = std::array<double, kK>;

Row features(const ComputeObs& o) {
  return {1.0, o.batch_per_device * o.flops, (o.devices - 1) * o.params, o.params};
}
}  // namespace

ComputeModel fit_compute(const std::vector<ComputeObs>& obs) {
  if (obs.size() < static_cast<size_t>(kK))
    throw std::runtime_error("fit_compute: need at least " + std::to_string(kK) + " observations, got " +
                             std::to_string(obs.size()));
  std::vector<Row> X;
  X.reserve(obs.size());
  for (size_t i = 0; i < obs.size(); ++i) {
    const ComputeObs& o = obs[i];
    if (o.devices < 1 || !std::isfinite(o.batch_per_device) || !std::isfinite(o.flops) || !std::isfinite(o.params) ||
        !std::isfinite(o.iteration_seconds) || o.batch_per_device < 0 || o.flops < 0 || o.params < 0 ||
        !(o.iteration_seconds > 0))
      throw std::runtime_error("fit_compute: observation " + std::to_string(i) +
                               " is invalid (needs devices >= 1, non-negative finite features, positive time)");
    X.push_back(features(o));
  }
  // Scale each column to unit RMS so the normal matrix has O(1) entries (raw columns span ~1 to ~1e12).
  Row scale{};
  for (const Row& r : X)
    for (int j = 0; j < kK; ++j) scale[j] += r[j] * r[j];
  static const char* names[kK] = {"constant", "batch_per_device*flops", "(devices-1)*params", "params"};
  for (int j = 0; j < kK; ++j) {
    scale[j] = std::sqrt(scale[j] / static_cast<double>(X.size()));
    if (!(scale[j] > 0))
      throw std::runtime_error(std::string("fit_compute: degenerate observations: feature ") + names[j] +
                               " is zero in every observation (e.g. only single-device runs)");
  }
  // Normal equations A c = r with A = Xs^T Xs / n, r = Xs^T y / n.
  double A[kK][kK + 1] = {};
  for (size_t i = 0; i < X.size(); ++i) {
    Row s;
    for (int j = 0; j < kK; ++j) s[j] = X[i][j] / scale[j];
    for (int j = 0; j < kK; ++j) {
      for (int k = 0; k < kK; ++k) A[j][k] += s[j] * s[k];
      A[j][kK] += s[j] * obs[i].iteration_seconds;
    }
  }
  // Unit-RMS columns give a unit diagonal: a pivot this small means (near) collinear features.
  const double tiny = 1e-9 * static_cast<double>(X.size());
  for (int col = 0; col < kK; ++col) {
    int piv = col;
    for (int r = col + 1; r < kK; ++r)
      if (std::fabs(A[r][col]) > std::fabs(A[piv][col])) piv = r;
    if (!(std::fabs(A[piv][col]) > tiny))
      throw std::runtime_error(
          "fit_compute: degenerate observations: the features are (nearly) collinear; vary the per-device work, "
          "the parameter count and the device count");
    if (piv != col)
      for (int k = 0; k <= kK; ++k) std::swap(A[col][k], A[piv][k]);
    for (int r = col + 1; r < kK; ++r) {
      double f = A[r][col] / A[col][col];
      for (int k = col; k <= kK; ++k) A[r][k] -= f * A[col][k];
    }
  }
  double c[kK];
  for (int j = kK - 1; j >= 0; --j) {
    double s = A[j][kK];
    for (int k = j + 1; k < kK; ++k) s -= A[j][k] * c[k];
    c[j] = s / A[j][j];
  }
  ComputeModel m;
  m.c0 = c[0] / scale[0];
  m.c_work = c[1] / scale[1];
  m.c_comm = c[2] / scale[2];
  m.c_params = c[3] / scale[3];
  return m;
}

Demand predict_demand(const ComputeModel& compute, const LoaderModel& loader, double batch, double flops,
                      double params, int devices, int apps_sharing_busiest_device) {
  if (devices < 1) throw std::invalid_argument("predict_demand: devices must be >= 1");
  if (apps_sharing_busiest_device < 1) throw std::invalid_argument("predict_demand: apps sharing a device must be >= 1");
  if (!(batch > 0)) throw std::invalid_argument("predict_demand: batch must be positive");
  double bpd = batch / devices;
  double t = compute.iteration_seconds(bpd, flops, params, devices);
  if (!(t > 0) || !std::isfinite(t))
    throw std::runtime_error("predict_demand: the compute model predicts a non-positive iteration time");
  double one_worker = loader.samples_per_second(1);
  if (!(one_worker > 0) || !std::isfinite(one_worker))
    throw std::runtime_error("predict_demand: the loader model predicts no finite one-worker throughput");
  Demand d;
  d.compute_samples_per_second = bpd / t / apps_sharing_busiest_device;
  d.workers_per_device = d.compute_samples_per_second / one_worker;
  double fl = std::floor(d.workers_per_device);
  if (fl > std::numeric_limits<int>::max() - 2) throw std::runtime_error("predict_demand: demand overflows");
  d.demand = static_cast<int>(fl) + 2;
  d.overload = d.workers_per_device - fl;
  return d;
}

std::string to_json(const ComputeModel& compute, const LoaderModel& loader) {
  nlohmann::json j;
  j["compute"] = {{"c0", compute.c0}, {"c_work", compute.c_work}, {"c_params", compute.c_params},
                  {"c_comm", compute.c_comm}};
  j["loader"] = {{"a", loader.a}, {"b", loader.b}};
  return j.dump(2);
}

namespace {
double number_at(const nlohmann::json& root, const char* obj, const char* key) {
  std::string path = std::string(obj) + "." + key;
  if (!root.contains(obj)) throw std::runtime_error("torchloader model JSON: missing key '" + std::string(obj) + "'");
  const nlohmann::json& o = root.at(obj);
  if (!o.is_object()) throw std::runtime_error("torchloader model JSON: '" + std::string(obj) + "' is not an object");
  if (!o.contains(key)) throw std::runtime_error("torchloader model JSON: missing key '" + path + "'");
  const nlohmann::json& v = o.at(key);
  if (!v.is_number()) throw std::runtime_error("torchloader model JSON: '" + path + "' is not a number");
  double d = v.get<double>();
  if (!std::isfinite(d)) throw std::runtime_error("torchloader model JSON: '" + path + "' is not finite");
  return d;
}
}  // namespace

void from_json(const std::string& text, ComputeModel& compute, LoaderModel& loader) {
  nlohmann::json root;
  try {
    root = nlohmann::json::parse(text);
  } catch (const nlohmann::json::parse_error& e) {
    throw std::runtime_error(std::string("torchloader model JSON: parse error: ") + e.what());
  }
  if (!root.is_object()) throw std::runtime_error("torchloader model JSON: the top level is not an object");
  ComputeModel c;
  c.c0 = number_at(root, "compute", "c0");
  c.c_work = number_at(root, "compute", "c_work");
  c.c_params = number_at(root, "compute", "c_params");
  c.c_comm = number_at(root, "compute", "c_comm");
  LoaderModel l;
  l.a = number_at(root, "loader", "a");
  l.b = number_at(root, "loader", "b");
  compute = c;
  loader = l;
}


LoaderModel loader_with_error(const LoaderModel& model, double error, uint64_t seed, int app) {
  if (error <= 0) return model;
  auto draw = [&](int coefficient) {
    std::mt19937_64 rng(seed * 1000003u + uint64_t(app) * 2u + uint64_t(coefficient));
    return std::uniform_real_distribution<double>(-error, error)(rng);
  };
  return LoaderModel{model.a * (1 + draw(0)), model.b * (1 + draw(1))};
}

}  // namespace torchloader
