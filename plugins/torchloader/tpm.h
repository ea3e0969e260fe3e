// TPM, the throughput prediction model of torchloader (A-Dloader): two offline linear regressions.
//
// Loader model (from loader-bound runs): seconds per sample = 1 / throughput = a / workers + b, so throughput
// rises with the worker count and saturates at 1 / b. Fitted by ordinary least squares of 1/throughput
// against 1/workers; a negative b (more than linear scaling: noise) is refitted as b = 0, a negative a (more
// workers slower: a loaded machine) as a = 0.
//
// Compute (GPU) model (from GPU-bound runs): iteration seconds =
//   c0 + c_work * batch_per_device * flops_per_sample + c_comm * (devices - 1) * params + c_params * params
// Fitted by ordinary least squares (normal equations on column-scaled features, solved by Gaussian elimination
// with partial pivoting; degenerate designs are refused).
//
// Demand (per application): max compute throughput per device = (batch / devices) / predicted iteration seconds
// / apps sharing the busiest device; workers per device = that / one worker's loader throughput
// (LoaderModel::samples_per_second(1)); demand = floor(workers per device) + 2 workers per device; the
// fractional part is the "overload" the WAA sorts by.
//
// Errors (bad observations, too few or degenerate ones, malformed JSON) throw std::runtime_error.
#pragma once
#include <string>
#include <utility>
#include <vector>

namespace torchloader {

struct LoaderModel {
  double a = 0, b = 0;
  // a / workers + b. workers must be >= 1 (throws std::invalid_argument otherwise).
  double seconds_per_sample(int workers) const;
  // 1 / seconds_per_sample(workers); +infinity if the model predicts no time per sample (<= 0).
  double samples_per_second(int workers) const;
};

// The loader a run's emulated workers follow when the model is wrong by up to `error` (a fraction): a and b each
// scaled by 1 + e, e drawn uniformly from [-error, error] by (seed, app, coefficient), the same on every node and
// every restart. error 0: the model itself. Planning (WAA) keeps the model; only the emulated loaders change.
LoaderModel loader_with_error(const LoaderModel& model, double error, uint64_t seed, int app);

// obs: (workers, samples per second) pairs. Needs >= 2 observations with >= 2 distinct worker counts, all
// workers >= 1 and throughputs positive and finite. Throws when the fitted one-worker time a + b is not positive.
LoaderModel fit_loader(const std::vector<std::pair<int, double>>& obs);

struct ComputeModel {
  double c0 = 0, c_work = 0, c_params = 0, c_comm = 0;
  double iteration_seconds(double batch_per_device, double flops_per_sample, double params, int devices) const;
};

struct ComputeObs {
  double batch_per_device, flops, params;  // flops per sample; params = model parameter count
  int devices;                             // data-parallel devices (>= 1)
  double iteration_seconds;
};

// Needs >= 4 observations whose features (1, batch_per_device*flops, (devices-1)*params, params) are linearly
// independent: varied per-device work, at least two parameter counts, and some multi-device runs.
ComputeModel fit_compute(const std::vector<ComputeObs>& obs);

struct Demand {
  double workers_per_device;          // unrounded need
  int demand;                         // floor(workers_per_device) + 2, per device
  double overload;                    // workers_per_device - floor(workers_per_device), in [0, 1)
  double compute_samples_per_second;  // max compute throughput per device (already divided by sharing apps)
};

// batch is the application's overall batch (across all devices); devices >= 1; apps_sharing_busiest_device >= 1.
// Throws std::invalid_argument on bad arguments and std::runtime_error when a model predicts a non-positive time.
Demand predict_demand(const ComputeModel& compute, const LoaderModel& loader, double batch, double flops,
                      double params, int devices, int apps_sharing_busiest_device);

// {"compute": {"c0":..,"c_work":..,"c_params":..,"c_comm":..}, "loader": {"a":..,"b":..}}; doubles round-trip.
std::string to_json(const ComputeModel& compute, const LoaderModel& loader);
// Throws std::runtime_error on unparsable text, a missing key ("missing key 'loader.b'") or a non-number value.
// The outputs are only written when the whole input is valid.
void from_json(const std::string& text, ComputeModel& compute, LoaderModel& loader);

}  // namespace torchloader
