// fanout results compare A B: runs of two experiments matched by their parameters (optionally ignoring
// some), per metric the change of the median with both medians' 95 % intervals, and a verdict:
// a regression is a change for the worse beyond the threshold whose intervals do not overlap (so noise,
// whose intervals overlap, is not flagged). Worse means slower for time units, lower for rates.
#pragma once
#include <filesystem>
#include <iosfwd>
#include <string>
#include <vector>

namespace fanout {

// Fewer samples than this on either side: no verdict ("too-few").
constexpr size_t kMinSamples = 5;

struct CompareOptions {
  double threshold_pct = 5.0;
  std::vector<std::string> ignore;  // parameters left out of the matching (e.g. the one being changed)
  std::vector<std::string> metrics;  // only these metrics (all when empty)
};

struct ComparisonRow {
  std::string match, role, metric, unit;
  double median_a = 0, median_b = 0, change_pct = 0;
  double ci_a_low = 0, ci_a_high = 0, ci_b_low = 0, ci_b_high = 0;
  std::string verdict;  // "regression", "improvement", "unchanged", "changed" (direction unknown), "too-few"
};

struct ComparisonReport {
  std::vector<ComparisonRow> rows;
  size_t regressions = 0, unmatched_a = 0, unmatched_b = 0;
  // Parameters whose values differ between A and B ("sleep_us: A 2000; B 8000"): why runs did not match.
  std::vector<std::string> differing;
};

// 1 = worse is higher (times), -1 = worse is lower (rates), 0 = unknown.
int worse_direction(const std::string& unit);
ComparisonReport compare_experiments(const std::filesystem::path& a, const std::filesystem::path& b, const CompareOptions& opts);
void print_comparison(const ComparisonReport& r, const CompareOptions& opts, std::ostream& out);

}  // namespace fanout
