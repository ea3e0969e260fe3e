// The one place where stored samples become statistics: every (run, role, metric) group of an experiment's
// database, read one group at a time (memory bounded by the largest group), summarised by statistics.h.
// CSV, plots, the HTML report and compare all format or compare what this returns.
#pragma once
#include <cstdint>
#include <filesystem>
#include <functional>
#include <map>
#include <memory>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

#include "results/statistics.h"
#include "results/store.h"

namespace fanout {

using ParameterList = std::vector<std::pair<std::string, std::string>>;

// A run's parameters, held once and shared by every row made of the run (each metric's statistics, each figure
// across runs): a copy per row was most of what a 100,000-run sweep's statistics held. Read like a const list.
class SharedParameters {
 public:
  SharedParameters() = default;
  SharedParameters(ParameterList list) : list_(std::make_shared<const ParameterList>(std::move(list))) {}
  const ParameterList& list() const { return list_ ? *list_ : none(); }
  operator const ParameterList&() const { return list(); }
  ParameterList::const_iterator begin() const { return list().begin(); }
  ParameterList::const_iterator end() const { return list().end(); }
  size_t size() const { return list().size(); }
  bool empty() const { return list().empty(); }
  bool operator==(const SharedParameters& o) const { return list() == o.list(); }

 private:
  static const ParameterList& none() {
    static const ParameterList nothing;
    return nothing;
  }
  std::shared_ptr<const ParameterList> list_;
};

struct MetricStats {
  int64_t run_id = 0;
  std::string session, status, param_hash, role, metric, unit;
  SharedParameters parameters;
  std::string repeat;  // StoredRun::repeat
  int ranks = 0;  // distinct ranks that recorded the metric ("clients")
  uint64_t not_a_number = 0;  // samples recorded as NaN, left out of the summary (statistics.csv: nan_samples)
  std::string better;       // what the run's plugin declared: "lower", "higher", "none", or "" (undeclared)
  bool setup_cost = false;  // declared a cost paid once per run (FANOUT_METRIC_SETUP_COST)
  Summary summary;
  std::vector<std::pair<double, double>> density;  // KDE (for violins): only when compute_statistics is asked for it
};

struct ExperimentStats {
  std::string name;
  std::map<std::string, int> runs_by_status;
  // The runs that count: every COMPLETED run, and for a permutation (param_hash) that never completed its last
  // attempt. Statistics, plots, the report and compare read `stats`; attempts that did not complete beside a
  // completed one (cancelled before a resume, failed before a retry) are in `superseded`, which runs.csv lists too.
  std::vector<MetricStats> stats;
  std::vector<MetricStats> superseded;
  std::vector<std::string> parameter_names;  // the CSV files' parameter columns: shown_parameters of the runs
  std::vector<std::string> varied;           // parameters whose value differs between runs
};

// The parameters the results' CSV files have columns for, in first-seen order: every parameter of the runs, less
// the plugin's settings of how it runs (FANOUT_PARAM_SETTING: exec's command, parser, environment) that hold one
// value in all of them. A setting that varies is a column like any parameter; run.toml and the database keep all.
// Made run by run (a first value and whether another differs), never holding the runs.
class ParameterColumns {
 public:
  void add(const StoredRun& run);
  std::vector<std::string> shown() const;   // the columns, as above
  std::vector<std::string> varied() const;  // the parameters whose value differs between runs, first seen first

 private:
  struct Column {
    std::string first;  // its first value
    bool named = false;  // seen as a parameter (not only as a setting's name)
    bool varies = false;
    size_t setting_in = 0;  // runs whose plugin calls it a setting
  };
  std::vector<std::string> order_;
  std::map<std::string, Column> seen_;
  size_t runs_ = 0;
};
std::vector<std::string> shown_parameters(const std::vector<StoredRun>& runs);

// Which runs count (ExperimentStats::stats): every COMPLETED run (repeats of a permutation, runs imported from
// several sessions); of a permutation (param_hash) that never completed, its last attempt; a run without a hash.
// Attempts that did not complete beside a completed one are superseded. Found in one pass over the runs that also
// gives head's run-level fields (runs_by_status, parameter_names, varied); held as 9 bytes a run.
class CountedRuns {
 public:
  bool counts(int64_t run_id) const;  // std::out_of_range for a run it was not made with

 private:
  friend CountedRuns count_runs(const ResultsDb& db, ExperimentStats& head);
  std::vector<int64_t> ids_;  // in id order
  std::vector<bool> counts_;  // beside them
};
CountedRuns count_runs(const ResultsDb& db, ExperimentStats& head);

// The runs read in id order beside a table read in run order (its samples, its metric groups): at(id) reads on
// to that run, so a pass holds the run it is at, never every run. Ids asked for do not decrease.
class RunWalk {
 public:
  explicit RunWalk(const ResultsDb& db) : reader_(db) {}
  const StoredRun& at(int64_t run_id);  // std::out_of_range when no run has that id

 private:
  ResultsDb::RunReader reader_;
  StoredRun run_;
  bool started_ = false;
};

// The pass that makes them: `head` gets the experiment's run-level fields (name, runs_by_status, parameter_names,
// varied) before the first row, then `row` gets each group's statistics in (run, metric) order with whether it
// counts (stats) or is superseded. Memory is the runs' names and the largest group, never the rows: what writes a
// row as it comes (export_csv) holds no experiment's statistics at once.
void for_each_statistic(const ResultsDb& db, const std::string& name, bool with_density, ExperimentStats& head,
                        const std::function<void(MetricStats&&, bool counts)>& row);
// The same pass after count_runs (which made head): a caller that reads the runs for more than statistics counts once.
void for_each_statistic(const ResultsDb& db, const CountedRuns& counted, bool with_density,
                        const std::function<void(MetricStats&&, bool counts)>& row);
// Every row of that pass held. with_density: each group's kernel density too (64 points: what the violin plots
// draw, and nothing else reads).
ExperimentStats compute_statistics(const ResultsDb& db, const std::string& name, bool with_density = false);
// The same for an experiment folder (its fanout.sqlite, named by the folder). Throws UserError when there is none.
ExperimentStats load_experiment_stats(const std::filesystem::path& exp_dir);

// One figure across the runs of a permutation (its --repeat runs, and reruns of the same parameters): the runs'
// medians summarised (summarize_runs), and how many runs and samples it rests on. COMPLETED runs only.
struct AcrossRuns {
  SharedParameters parameters;
  std::string role, metric, unit;
  RunLevel runs;
  std::vector<double> run_medians;  // each COMPLETED run's median, in run order (what runs summarises)
  uint64_t samples = 0;
  std::string better;       // as its runs declared it ("" when none did)
  bool setup_cost = false;
};
std::vector<AcrossRuns> across_runs(const ExperimentStats& stats);
// The same made row by row, from the rows that count (ExperimentStats::stats) in their order, as a pass makes them.
class AcrossRunsBuilder {
 public:
  void add(const MetricStats& m);
  std::vector<AcrossRuns> finish();

 private:
  size_t list_index(const SharedParameters& p);
  // A permutation is its parameter list's index and its figure's (role, metric, unit) index, each found by hash,
  // and the pair's index in out_. The list's text is made once per list met: a pass shares one list among a
  // permutation's repeats (for_each_statistic), held here so that its address stays its own. A key of the whole text
  // made and hashed for every row was a seventh of a 100,000-run sweep's CSV pass.
  std::unordered_map<const ParameterList*, size_t> list_at_address_;
  std::vector<SharedParameters> lists_held_;
  std::unordered_map<std::string, size_t> list_index_, figure_index_;
  std::unordered_map<uint64_t, size_t> at_;
  std::vector<AcrossRuns> out_;
};

// A setup cost (rendezvous, database start): its plugin declared it so (FANOUT_SETUP_METRIC). Such a group is shown
// as a table, not as distributions, and has no reference. One sample per rank is no reason: a program run once per
// rank prints one figure, and that figure is the point of the sweep.
bool declared_setup_cost(const std::vector<const MetricStats*>& group);
// What a run cost (FANOUT_RESOURCE_METRIC_PREFIX: resource.peak_rss, ...): judged, plotted and modelled like any figure,
// but never what --repeat=auto or compare --until-decided wait for, and no speedup.
bool is_resource_metric(const std::string& metric);

// "param=value, ..." of the varied parameters except `except` (a series label), or "all runs".
std::string series_label(const MetricStats& m, const std::vector<std::string>& varied, const std::string& except = "");

}  // namespace fanout
