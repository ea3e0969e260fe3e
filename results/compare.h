// fanout results compare A B: runs of two experiments matched by their parameters (optionally ignoring some;
// the --repeat runs of a permutation count together), per metric the change of the median of the run medians,
// and a verdict on run-level evidence: a regression is a change for the worse beyond the thresholds that is also
// significant across runs (two-sided Mann-Whitney U on the run medians, p adjusted for the many figures one compare
// tests, Benjamini-Hochberg by default). What varies between runs (placement, caches, other jobs) is most of the
// noise on a real machine; an interval from the samples of one run ignores it and cried wolf. Too few runs to reach
// alpha: "undecided", never a guess. Which way is worse is what the metric's plugin declared (fanout_better; exec's
// --better); a unit alone decides only when it is a time ("ms", "ms/step": lower) or "<x>/s" (higher).
#pragma once
#include <filesystem>
#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "results/display_unit.h"
#include "results/statistics.h"

namespace fanout {

// Fewer runs than this on either side: no verdict ("undecided"), whatever alpha.
constexpr size_t kMinRuns = 3;

// --abs_threshold [METRIC=]VALUE[UNIT]: a change smaller than this is no change, whatever its percent (the only
// size a change from a median of 0 has). Without a unit the value is in each metric's own unit. With one, a general
// threshold applies to metrics whose unit converts to it (time units among themselves) or is that exact unit; a
// metric's own (a flag's METRIC=, a reference file's table, whose unit is always given) in a unit that does not
// convert is refused, naming where it was given.
// A reference file's abs_threshold (compare --reference) is one figure's: its metric, and its role and parameters
// when the table names them; the most specific that covers a figure applies; at equal scope a flag's before the file's.
struct AbsThreshold {
  std::string metric;  // "" = every metric
  std::string role;    // "" = any role
  std::vector<std::pair<std::string, std::string>> parameters;  // the figure's point must have these
  double value = 0;
  std::string unit;    // with unit_given false and "": the metric's own
  bool unit_given = false;  // a reference table's unit, even "" (a figure of no unit): only that unit, or one converting
  std::string origin;  // "--abs_threshold latency=2ms", "ref.toml:12": named when it cannot apply
};
// Parses "2ms", "latency=0.5", "put_tensor=20us"; throws UserError naming the flag and the text.
AbsThreshold parse_abs_threshold(const std::string& text);
// The abs_threshold of every [[reference]] table that has one (results/reference.h).
std::vector<AbsThreshold> abs_thresholds_from_references(const std::filesystem::path& file);

struct CompareOptions {
  double threshold_pct = 5.0;
  std::vector<AbsThreshold> abs_thresholds;
  double alpha = 0.05;               // significance of the Mann-Whitney U test on run medians, after correction
  Correction correction = Correction::BenjaminiHochberg;
  std::vector<std::string> ignore;   // parameters left out of the matching (e.g. the one being changed)
  std::vector<std::string> metrics;  // only these metrics (all when empty)
};
// Throws UserError naming the option when a value is out of its range (threshold 0..1000 %, alpha in (0, 0.5]).
void check_compare_options(const CompareOptions& opts);

struct ComparisonRow {
  std::string match, role, metric, unit;  // match: "name=value ..." of the parameters that matched the runs
  std::vector<std::pair<std::string, std::string>> parameters;  // the same, each whole
  double median_a = 0, median_b = 0, change_pct = 0;  // medians of the run medians; change_pct NaN when A's is 0
  double change = 0;                                  // median_b - median_a, in the unit
  double ci_a_low = 0, ci_a_high = 0, ci_b_low = 0, ci_b_high = 0;  // across runs (statistics.h summarize_runs)
  size_t runs_a = 0, runs_b = 0, samples_a = 0, samples_b = 0;
  double p_value = 1, p_adjusted = 1;
  Shift shift;                                           // Hodges-Lehmann shift of the run medians, B - A
  double shift_pct = 0, shift_pct_low = 0, shift_pct_high = 0;  // the same against A's median (NaN when it is 0)
  std::string better;       // "lower", "higher", "none", or "" when neither a declaration nor the unit says
  std::string better_from;  // "declared", "unit" or ""
  // The shift's interval lies inside the thresholds (+-threshold % of A's median, or +-the absolute threshold
  // from a median of 0): "unchanged" shown, not just not shown changed.
  bool within_threshold = false;
  // "regression", "improvement", "unchanged", "changed" (declared better = none: for information),
  // "changed (no direction)" (fails the gate: nothing says which way is worse), "undecided" (too few runs),
  // "undecided (no finite samples)" (a median is NaN or infinite).
  std::string verdict;
};

struct ComparisonReport {
  std::vector<ComparisonRow> rows;
  size_t regressions = 0, improvements = 0, unchanged = 0, undirected = 0, informational = 0, undecided = 0;
  size_t not_finite = 0;    // of the undecided: a median that is NaN or infinite
  size_t inconclusive = 0;  // of the undecided: --until-decided reached its last look
  size_t unmatched_a = 0, unmatched_b = 0;
  size_t tested = 0;  // figures the correction counted
  // Parameters whose values differ between A and B ("sleep_us: A 2000; B 8000"): why runs did not match.
  std::vector<std::string> differing;
  // Where the runs were made, where A and B differ ("host_cpu_model: A ...; B ..."): printed before the verdicts.
  std::vector<std::string> provenance_differs;
  // Scaling models of the same figure on both sides (results/models.h) whose leading term changed: "scaling
  // regression: t(size): size^(2) -> size^(3)". A term that grows faster for a lower-is-better figure (slower for a
  // higher-is-better one) is a regression and fails the gate.
  struct ScalingChange {
    std::string verdict;  // "scaling regression", "scaling improvement", "scaling changed" (no direction)
    std::string figure, term_a, term_b, model_a, model_b;
  };
  std::vector<ScalingChange> scaling_changes;
  size_t scaling_regressions = 0;
};
// One figure's run medians, A's and B's, measured: medians and their intervals, the change, p, the Hodges-Lehmann
// shift; verdict left empty when the figure can be tested, else "undecided" or "undecided (no finite samples)".
// r.better must be set. compare_experiments and bench/sequential_alpha's simulation both judge through these two.
void measure_row(ComparisonRow& r, const std::vector<double>& ma, const std::vector<double>& mb, const CompareOptions& opts);
// The verdict of a measured, testable figure once r.p_adjusted is set, with the absolute threshold in its unit.
void judge_row(ComparisonRow& r, double abs_min, const CompareOptions& opts);

// For `compare --until-decided`: a figure is decided once it is beyond the thresholds and significant (any verdict
// but unchanged and undecided), shown within the thresholds (unchanged with within_threshold), or has no finite
// median (more runs will not give it one).
bool decided(const ComparisonRow& row);
// At the last look of --until-decided: figures "unchanged" but not shown within the thresholds become
// "undecided (neither beyond nor within the threshold after N runs)".
void mark_undecided_after(ComparisonReport& r, size_t runs);

// The exit status for a report: 1 on a regression or a change with no direction, 3 when some figure could not be
// decided, else 0.
int comparison_status(const ComparisonReport& r);

ComparisonReport compare_experiments(const std::filesystem::path& a, const std::filesystem::path& b, const CompareOptions& opts);
void print_comparison(const ComparisonReport& r, const CompareOptions& opts, std::ostream& out);
// For machines: every row, as CSV (a header line) or JSON (an object with rows, counts and provenance_differs).
void write_comparison(const ComparisonReport& r, const std::string& format, std::ostream& out);

}  // namespace fanout
