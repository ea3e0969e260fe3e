#include "results/compare.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <ostream>

#include "common/error.h"
#include "common/text.h"
#include "results/display_unit.h"
#include "results/metric_stats.h"
#include "results/store.h"
#include "results/layout.h"

namespace fanout {

namespace fs = std::filesystem;

int worse_direction(const std::string& unit) {
  for (const char* t : {"s", "ms", "us", "ns", "seconds", "cycles"})
    if (unit == t) return 1;
  if (unit.find("/s") != std::string::npos || unit.find("per_s") != std::string::npos) return -1;
  return 0;
}

namespace {

ExperimentStats load(const fs::path& dir) {
  fs::path file = dir / layout::kDatabase;
  if (!fs::exists(file)) throw UserError(dir.string() + ": no fanout.sqlite (is it an experiment folder?)");
  ResultsDb db(file);
  return compute_statistics(db, dir.filename().string());
}

std::string match_key(const MetricStats& m, const std::vector<std::string>& ignore) {
  auto params = m.parameters;
  std::sort(params.begin(), params.end());
  std::string key;
  for (auto& [k, v] : params)
    if (std::find(ignore.begin(), ignore.end(), k) == ignore.end()) key += (key.empty() ? "" : " ") + k + "=" + v;
  return key;
}

}  // namespace

ComparisonReport compare_experiments(const fs::path& a, const fs::path& b, const CompareOptions& opts) {
  ExperimentStats sa = load(a), sb = load(b);
  using Key = std::tuple<std::string, std::string, std::string, std::string>;  // match, role, metric, unit
  auto index = [&](const ExperimentStats& s) {
    std::map<Key, const MetricStats*> out;  // the latest run wins when a parameter set was run twice
    for (auto& m : s.stats)
      if (opts.metrics.empty() || std::find(opts.metrics.begin(), opts.metrics.end(), m.metric) != opts.metrics.end())
        out[{match_key(m, opts.ignore), m.role, m.metric, m.unit}] = &m;
    return out;
  };
  auto ia = index(sa), ib = index(sb);
  ComparisonReport report;
  for (auto& [key, ma] : ia) {
    auto it = ib.find(key);
    if (it == ib.end()) {
      ++report.unmatched_a;
      continue;
    }
    const Summary &x = ma->summary, &y = it->second->summary;
    ComparisonRow r{std::get<0>(key), std::get<1>(key), std::get<2>(key), std::get<3>(key), x.median, y.median,
                    x.median != 0 ? (y.median - x.median) / std::fabs(x.median) * 100.0 : 0.0,
                    x.median_ci_low, x.median_ci_high, y.median_ci_low, y.median_ci_high, "unchanged"};
    const bool disjoint = y.median_ci_low > x.median_ci_high || y.median_ci_high < x.median_ci_low;
    const int dir = worse_direction(r.unit);
    if (x.count < kMinSamples || y.count < kMinSamples) {
      r.verdict = "too-few";  // an interval from a handful of samples says nothing
    } else if (disjoint && std::fabs(r.change_pct) > opts.threshold_pct) {
      if (dir == 0) r.verdict = "changed";
      else r.verdict = (r.change_pct > 0) == (dir > 0) ? "regression" : "improvement";
    }
    if (r.verdict == "regression") ++report.regressions;
    report.rows.push_back(r);
  }
  for (auto& [key, mb] : ib)
    if (!ia.count(key)) ++report.unmatched_b;
  // What sets A and B apart, for a user whose runs did not match.
  auto values = [&](const ExperimentStats& s) {
    std::map<std::string, std::set<std::string, NaturalLess>> v;
    for (auto& m : s.stats)
      for (auto& [k, x] : m.parameters)
        if (std::find(opts.ignore.begin(), opts.ignore.end(), k) == opts.ignore.end()) v[k].insert(x);
    return v;
  };
  auto va = values(sa), vb = values(sb);
  auto list = [](const std::set<std::string, NaturalLess>& s) {
    std::string out;
    for (auto& x : s) out += (out.empty() ? "" : ",") + x;
    return out.empty() ? std::string("(none)") : out;
  };
  std::set<std::string> names;
  for (auto* v : {&va, &vb})
    for (auto& [k, x] : *v) names.insert(k);
  auto capped = [](std::string s) { return s.size() > 120 ? s.substr(0, 117) + "..." : s; };
  for (auto& k : names)
    if (va[k] != vb[k]) report.differing.push_back(printable(capped(k + ": A " + list(va[k]) + "; B " + list(vb[k]))));
  return report;
}

// One line per figure for people: the largest changes first, medians in a human unit, and of the parameters only
// those that vary between the rows (the rest are the same everywhere, and said once above them).
void print_comparison(const ComparisonReport& r, const CompareOptions& opts, std::ostream& out) {
  std::vector<const ComparisonRow*> rows;
  for (auto& row : r.rows) rows.push_back(&row);
  // Largest change first; a change that is not a number (a median of 0 or NaN) last.
  auto size = [](const ComparisonRow* r) { return std::isfinite(r->change_pct) ? std::fabs(r->change_pct) : -1.0; };
  std::stable_sort(rows.begin(), rows.end(), [&](const ComparisonRow* a, const ComparisonRow* b) { return size(a) > size(b); });
  std::map<std::string, std::set<std::string>> seen;  // parameter -> values among the rows
  for (auto* row : rows)
    for (auto& word : split(row->match, ' '))
      if (auto eq = word.find('='); eq != std::string::npos) seen[word.substr(0, eq)].insert(word.substr(eq + 1));
  std::string same;
  for (auto& [k, v] : seen)
    if (v.size() == 1) same += (same.empty() ? "" : " ") + k + "=" + *v.begin();
  if (!same.empty()) out << "all runs: " << printable(same) << "\n";
  char line[160];
  for (auto* row : rows) {
    std::string varied;
    for (auto& word : split(row->match, ' '))
      if (auto eq = word.find('='); eq != std::string::npos && seen[word.substr(0, eq)].size() > 1) varied += (varied.empty() ? "" : " ") + word;
    const DisplayUnit du = display_unit(row->unit, std::max(std::fabs(row->median_a), std::fabs(row->median_b)));
    std::snprintf(line, sizeof line, "%-11s %+7.1f%%  %-24s %9.4g -> %-9.4g %-6s  ", row->verdict.c_str(), row->change_pct,
                  printable(row->role + ":" + row->metric).c_str(), row->median_a * du.factor, row->median_b * du.factor,
                  printable(du.label).c_str());
    out << line << printable(varied) << "\n";  // the parameters whole, however long: never a cut line
  }
  out << r.rows.size() << " comparisons, " << r.regressions << " regression(s) beyond " << opts.threshold_pct
      << " % with disjoint 95 % intervals";
  if (r.unmatched_a || r.unmatched_b) out << "; unmatched: " << r.unmatched_a << " in A, " << r.unmatched_b << " in B";
  out << "\n";
}

}  // namespace fanout
