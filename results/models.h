// The scaling models of an experiment (results/scaling_model.h on its run-level medians): for each figure and each
// varied numeric parameter, one model per combination of the other varied parameters; for two varied numeric
// parameters (and nothing else varied), Extra-P's two-parameter model too. `fanout results model`, the report's
// Models section, csv/models.csv and compare's scaling verdict all read what this returns.
#pragma once
#include <iosfwd>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "results/scaling_model.h"
#include "results/scaling_spec.h"

namespace fanout {

struct ExperimentStats;
struct StoredRun;

struct FigureModel {
  std::string role, metric, unit;
  std::vector<std::pair<std::string, std::string>> series;  // the other varied parameters' values ("" when none)
  bool two = false;                                         // a two-parameter model (single otherwise)
  SingleParameterModel single;
  TwoParameterModel pair;
  std::string label() const;  // "t(size)" or "t(nodes, size)", with "[mode=fast]" for a series
};

struct ModelOptions {
  std::vector<std::string> metrics, params;  // only these (all when empty)
};
std::vector<FigureModel> experiment_models(const ExperimentStats& stats, const ModelOptions& opts = {});

// Speedup and parallel efficiency against the smallest count of a parameter that counts nodes, ranks or threads.
// strong (the same work spread wider): speedup = T(p0) / T(p) for a lower-is-better figure (R(p) / R(p0) for a
// higher-is-better one), ideal p / p0, efficiency = speedup / ideal. weak (work grown with p): efficiency = T(p0) / T(p)
// (R(p) / (R(p0) * p / p0) for a rate), speedup = efficiency * ideal. Figures without a direction are left out.
// The placement parameters a sweep varies, strong by default: nodes, ranks_per_node, and names ending in _nodes,
// _per_node or threads.
std::vector<ScalingSpec> default_scaling(const ExperimentStats& stats);
// What the runs stored (provenance "scaling": the sweep's --scaling or its plugin's declaration), each parameter once
// (the newest run's word for it).
std::vector<ScalingSpec> stored_scaling(const std::vector<StoredRun>& runs);
struct ScalingRow {
  std::string role, metric, unit, mode, param;
  std::vector<std::pair<std::string, std::string>> series;
  double count = 0, base_count = 0, median = 0, speedup = 0, ideal = 0, efficiency = 0;
};
std::vector<ScalingRow> scaling_rows(const ExperimentStats& stats, const std::vector<ScalingSpec>& specs);
void write_scaling_csv(const std::vector<ScalingRow>& rows, std::ostream& out);

// A parameter's values for --predict: "size=4096" or "nodes=64,size=4096".
struct Prediction {
  std::vector<std::pair<std::string, double>> at;
};
Prediction parse_prediction(const std::string& text);  // throws UserError naming --predict

// For people: one line per model ("t(size) = 0.31 + 2.1e-09 * size^(3)   adj. R^2 0.999, SMAPE 1.2 %, fitted on size
// 128..1024 (6 values)"), or why there is none; with a prediction, its value and whether it is an extrapolation.
void print_models(const std::vector<FigureModel>& models, const std::optional<Prediction>& predict, std::ostream& out);
// For machines: csv (a header line) or json.
void write_models(const std::vector<FigureModel>& models, const std::string& format, std::ostream& out);

}  // namespace fanout
