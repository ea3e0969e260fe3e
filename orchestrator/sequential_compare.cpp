#include "orchestrator/sequential_compare.h"

#include <algorithm>
#include <cmath>
#include <ostream>

#include "common/error.h"

namespace fanout {

std::vector<int> look_schedule(int first, int max_repeat) {
  std::vector<int> looks;
  for (double n = std::max(5, first); n < max_repeat; n = std::max(n + 1, std::round(n * 1.4))) looks.push_back(int(n));
  looks.push_back(max_repeat);
  return looks;
}

namespace {

// The fewest runs a side any compared figure rests on.
size_t fewest_runs(const ComparisonReport& r) {
  size_t n = SIZE_MAX;
  for (auto& row : r.rows) n = std::min({n, row.runs_a, row.runs_b});
  return n == SIZE_MAX ? 0 : n;
}

}  // namespace

ComparisonReport compare_until_decided(const std::filesystem::path& a, const std::filesystem::path& b, CompareOptions& opts,
                                       int max_repeat, const std::function<int(const std::filesystem::path&, int)>& more,
                                       std::ostream& progress) {
  const double alpha = opts.alpha;
  ComparisonReport first = compare_experiments(a, b, opts);
  const std::vector<int> looks = look_schedule(int(std::min<size_t>(fewest_runs(first), size_t(max_repeat))), max_repeat);
  opts.alpha = alpha / double(looks.size());
  progress << "fanout: --until-decided: looks at " << looks.size() << " point(s) up to " << max_repeat
           << " runs a side, alpha " << alpha << " spent evenly: " << opts.alpha << " each\n";
  ComparisonReport report;
  for (size_t k = 0; k < looks.size(); ++k) {
    // Both sides in turn, the side that goes first alternating, so that drift on the machine falls on both.
    const bool a_first = k % 2 == 0;
    for (const auto* side : {a_first ? &a : &b, a_first ? &b : &a}) {
      const int rc = more(*side, looks[k]);
      if (rc != 0 && rc != 1)  // 1: some run failed; its permutation is simply not compared
        throw UserError("results compare --until-decided: " + side->string() + " could not be run to " + std::to_string(looks[k]) +
                        " repeats (exit " + std::to_string(rc) + ")");
    }
    report = compare_experiments(a, b, opts);
    const size_t open = size_t(std::count_if(report.rows.begin(), report.rows.end(), [](const ComparisonRow& r) { return !decided(r); }));
    progress << "fanout: --until-decided: look " << k + 1 << "/" << looks.size() << " at " << fewest_runs(report)
             << " runs a side: " << report.rows.size() - open << " of " << report.rows.size() << " figure(s) decided\n";
    if (open == 0) return report;
  }
  mark_undecided_after(report, size_t(looks.back()));
  return report;
}

}  // namespace fanout
