// fanout results compare A B: runs of two experiments matched by their parameters (optionally ignoring some;
// the --repeat runs of a permutation count together), per metric the change of the median of the run medians,
// and a verdict on run-level evidence: a regression is a change for the worse beyond the threshold that is also
// significant across runs (two-sided Mann-Whitney U on the run medians, alpha 0.05 by default). What varies
// between runs (placement, caches, other jobs) is most of the noise on a real machine; an interval from the
// samples of one run ignores it and cried wolf. Too few runs to reach alpha: "undecided", never a guess.
// Worse means slower for time units, lower for rates.
#pragma once
#include <filesystem>
#include <iosfwd>
#include <string>
#include <vector>

namespace fanout {

// Fewer runs than this on either side: no verdict ("undecided"), whatever alpha.
constexpr size_t kMinRuns = 3;

struct CompareOptions {
  double threshold_pct = 5.0;
  double alpha = 0.05;                // significance of the Mann-Whitney U test on run medians
  std::vector<std::string> ignore;  // parameters left out of the matching (e.g. the one being changed)
  std::vector<std::string> metrics;  // only these metrics (all when empty)
};

struct ComparisonRow {
  std::string match, role, metric, unit;
  double median_a = 0, median_b = 0, change_pct = 0;  // medians of the run medians
  double ci_a_low = 0, ci_a_high = 0, ci_b_low = 0, ci_b_high = 0;  // across runs (statistics.h summarize_runs)
  size_t runs_a = 0, runs_b = 0, samples_a = 0, samples_b = 0;
  double p_value = 1;
  std::string verdict;  // "regression", "improvement", "unchanged", "changed" (direction unknown), "undecided"
};

struct ComparisonReport {
  std::vector<ComparisonRow> rows;
  size_t regressions = 0, undecided = 0, unmatched_a = 0, unmatched_b = 0;
  // Parameters whose values differ between A and B ("sleep_us: A 2000; B 8000"): why runs did not match.
  std::vector<std::string> differing;
  // Where the runs were made, where A and B differ ("host_cpu_model: A ...; B ..."): printed before the verdicts.
  std::vector<std::string> provenance_differs;
};
// The exit status for a report: 1 on a regression, 3 when some figure could not be decided (too few runs), else 0.
int comparison_status(const ComparisonReport& r);

// 1 = worse is higher (times), -1 = worse is lower (rates), 0 = unknown.
int worse_direction(const std::string& unit);
ComparisonReport compare_experiments(const std::filesystem::path& a, const std::filesystem::path& b, const CompareOptions& opts);
void print_comparison(const ComparisonReport& r, const CompareOptions& opts, std::ostream& out);
// For machines: every row, as CSV (a header line) or JSON (an object with rows, counts and provenance_differs).
void write_comparison(const ComparisonReport& r, const std::string& format, std::ostream& out);

}  // namespace fanout
