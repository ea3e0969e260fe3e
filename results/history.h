// A benchmark over time (issue 55): experiment folders as the points of a series, ordered by the code they
// measured, and each figure's change points across them (results/change_points.h on the run-level medians).
// `fanout history changes DIR...` prints what this returns.
#pragma once

#include <cmath>
#include <filesystem>
#include <ostream>
#include <string>
#include <vector>

#include "results/change_points.h"
#include "results/metric_stats.h"

namespace fanout {

struct HistoryPoint {
  std::filesystem::path dir;
  std::string revision;  // provenance "revision" (--revision / --source), else the folder's name; " (dirty)" when the
                         // working tree had changes to tracked files
  double time = 0;       // Unix seconds: the commit's time (source_commit_time) when every point has one, else the first run's start
};

struct FigureChange {
  // match: the permutation's parameters that set this figure apart from the others listed ("size=128"); the
  // series is matched on all of them (less --ignore)
  std::string role, metric, unit, match;
  std::string better;                     // lower, higher, none or "" (declared, else from the unit)
  size_t point = 0;                       // index into HistoryChanges::points of the first point after the change
  std::string before, after;              // the revisions either side
  double median_before = 0, median_after = 0, change_pct = 0, p_value = 1;
  // The change's size with its interval: the Hodges-Lehmann shift from the points before it to those after it (up to
  // the neighbouring change points), in percent of the median before, with its 95 % distribution-free interval.
  double shift_pct = 0, shift_pct_low = 0, shift_pct_high = 0;
  std::string verdict;  // regression, improvement, changed (none), changed (no direction)
  // The pairwise compare of the two neighbouring revisions alone (their runs, as `results compare` judges them: the
  // threshold, Mann-Whitney at 0.05): its verdict ("undecided" with too few runs a side) and p; agrees when it is
  // the change's verdict (a gradual change, or too few runs, shows as a disagreement).
  std::string pairwise;
  double pairwise_p = 1;
  bool agrees = false;
};

// One figure's series, as the dashboard draws it: per point it has, the run-level median and the interval across
// that experiment's runs; where its change points are.
struct FigureSeries {
  std::string role, metric, unit, match, better;
  std::vector<size_t> points;              // indexes into HistoryChanges::points
  std::vector<double> median, low, high;   // the same length
  std::vector<size_t> changes;             // indexes into `points` of the first point after each change listed
};

struct HistoryChanges {
  std::vector<HistoryPoint> points;  // oldest first
  bool by_commit_time = false;
  size_t figures = 0;  // figures with 3 points or more (the least a split needs)
  std::vector<FigureChange> changes;
  std::vector<FigureSeries> series;  // every figure with 3 points or more
  size_t small = 0;    // change points whose size is within --threshold: counted, not listed
  // The newest point lies after a figure's last change, at least one point after it (a lone newest point cannot be
  // told from an outlier), and that change was a regression.
  bool latest_regression = false;
};

struct HistoryOptions {
  std::vector<std::string> metrics;  // only these (all when empty)
  std::vector<std::string> ignore;   // parameters left out of a figure's identity (as compare's --ignore)
  double threshold_pct = 5;          // a change point smaller than this (in percent of the median before) is not listed
  bool parallel = true;              // figures over the cores (off where the caller already runs series in parallel)
  ChangePointOptions change_points;
};

// One experiment as a point of a series: what history needs of it, read from its folder or from a lab store.
struct HistoryInput {
  HistoryPoint point;
  double commit_time = NAN;  // source_commit_time as Unix seconds (NaN without --source)
  double start = NAN;        // its first run's start, Unix seconds
  std::string name, machine; // the experiment's name (its benchmark, in a lab) and the host its runs ran on
  bool dirty = false;
  std::vector<AcrossRuns> figures;
};
// Throws UserError naming a folder that is not an experiment.
HistoryInput history_input(const std::filesystem::path& dir);
HistoryChanges history_changes(std::vector<HistoryInput> inputs, const HistoryOptions& opts);
HistoryChanges history_changes(const std::vector<std::filesystem::path>& dirs, const HistoryOptions& opts);

void print_history_changes(const HistoryChanges& h, std::ostream& out);
void write_history_changes_csv(const HistoryChanges& h, std::ostream& out);

}  // namespace fanout
