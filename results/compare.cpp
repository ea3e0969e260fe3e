#include "results/compare.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <ostream>

#include "common/error.h"
#include "common/text.h"
#include "results/csv_export.h"
#include "results/display_unit.h"
#include "results/metric_stats.h"
#include "results/store.h"
#include "results/layout.h"
#include "results/statistics.h"

#include <nlohmann/json.hpp>
#include <sqlite3.h>

namespace fanout {

namespace fs = std::filesystem;

int worse_direction(const std::string& unit) {
  for (const char* t : {"s", "ms", "us", "ns", "seconds", "cycles"})
    if (unit == t) return 1;
  if (unit.find("/s") != std::string::npos || unit.find("per_s") != std::string::npos) return -1;
  return 0;
}

namespace {


std::string match_key(const MetricStats& m, const std::vector<std::string>& ignore) {
  auto params = m.parameters;
  std::sort(params.begin(), params.end());
  std::string key;
  for (auto& [k, v] : params)
    if (std::find(ignore.begin(), ignore.end(), k) == ignore.end()) key += (key.empty() ? "" : " ") + k + "=" + v;
  return key;
}

// The smallest two-sided p the exact U test can give with na and nb runs: 2 / C(na + nb, na).
double smallest_p(size_t na, size_t nb) {
  double c = 1;
  for (size_t i = 1; i <= na; ++i) c = c * double(nb + i) / double(i);
  return std::min(1.0, 2 / c);
}

// Provenance keys that say where and with what a run was made (not which run it was).
bool describes_machine(const std::string& key) {
  for (const char* p : {"host", "host_", "version_", "env_", "fanout_version", "fanout_git_revision", "plugin_abi", "plugin."})
    if (key == p || ((std::string(p).back() == '_' || std::string(p).back() == '.') && key.rfind(p, 0) == 0)) return true;
  return false;
}

std::map<std::string, std::set<std::string>> machine_values(const fs::path& dir) {
  std::map<std::string, std::set<std::string>> out;
  ResultsDb db(dir / layout::kDatabase);
  sqlite3_stmt* st = nullptr;
  if (sqlite3_prepare_v2(db.handle(), "SELECT key, value FROM provenance", -1, &st, nullptr) != SQLITE_OK) return out;
  while (sqlite3_step(st) == SQLITE_ROW) {
    std::string k = reinterpret_cast<const char*>(sqlite3_column_text(st, 0)), v = reinterpret_cast<const char*>(sqlite3_column_text(st, 1));
    if (describes_machine(k)) out[k].insert(v);
  }
  sqlite3_finalize(st);
  return out;
}

}  // namespace

int comparison_status(const ComparisonReport& r) { return r.regressions ? 1 : r.undecided ? 3 : 0; }

ComparisonReport compare_experiments(const fs::path& a, const fs::path& b, const CompareOptions& opts) {
  ExperimentStats sa = load_experiment_stats(a), sb = load_experiment_stats(b);
  using Key = std::tuple<std::string, std::string, std::string, std::string>;  // match, role, metric, unit
  auto index = [&](const ExperimentStats& s) {
    std::map<Key, std::vector<const MetricStats*>> out;  // every run of the permutation: its repeats, its reruns
    for (auto& m : s.stats)
      if (opts.metrics.empty() || std::find(opts.metrics.begin(), opts.metrics.end(), m.metric) != opts.metrics.end())
        // Only completed runs: a failed attempt's partial median is not a run of the permutation.
        if (m.summary.count && m.status == "COMPLETED") out[{match_key(m, opts.ignore), m.role, m.metric, m.unit}].push_back(&m);
    return out;
  };
  auto ia = index(sa), ib = index(sb);
  ComparisonReport report;
  auto medians = [](const std::vector<const MetricStats*>& runs, size_t& samples) {
    std::vector<double> v;
    for (auto* m : runs) v.push_back(m->summary.median), samples += m->summary.count;
    return v;
  };
  for (auto& [key, runs_a] : ia) {
    auto it = ib.find(key);
    if (it == ib.end()) {
      ++report.unmatched_a;
      continue;
    }
    ComparisonRow r;
    std::tie(r.match, r.role, r.metric, r.unit) = key;
    const std::vector<double> ma = medians(runs_a, r.samples_a), mb = medians(it->second, r.samples_b);
    const RunLevel x = summarize_runs(ma), y = summarize_runs(mb);
    r.runs_a = x.runs, r.runs_b = y.runs;
    r.median_a = x.median, r.median_b = y.median;
    r.ci_a_low = x.low, r.ci_a_high = x.high, r.ci_b_low = y.low, r.ci_b_high = y.high;
    r.change_pct = x.median != 0 ? (y.median - x.median) / std::fabs(x.median) * 100.0 : 0.0;
    r.p_value = mann_whitney_p(ma, mb);
    const int dir = worse_direction(r.unit);
    if (r.runs_a < kMinRuns || r.runs_b < kMinRuns || smallest_p(r.runs_a, r.runs_b) > opts.alpha) {
      r.verdict = "undecided";  // no test of so few runs can reach alpha: saying "unchanged" would be a guess
      ++report.undecided;
    } else if (r.p_value < opts.alpha && std::fabs(r.change_pct) > opts.threshold_pct) {
      r.verdict = dir == 0 ? "changed" : (r.change_pct > 0) == (dir > 0) ? "regression" : "improvement";
    } else {
      r.verdict = "unchanged";
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
  auto pa = machine_values(a), pb = machine_values(b);
  std::set<std::string> keys;
  for (auto* p : {&pa, &pb})
    for (auto& [k, v] : *p) keys.insert(k);
  auto joined = [](const std::set<std::string>& s) {
    std::string out;
    for (auto& x : s) out += (out.empty() ? "" : ", ") + x;
    return out.empty() ? std::string("(not recorded)") : out;
  };
  for (auto& k : keys)
    if (pa[k] != pb[k]) report.provenance_differs.push_back(printable(capped(k + ": A " + joined(pa[k]) + "; B " + joined(pb[k]))));
  return report;
}

// One line per changed or undecided figure, for people: the largest changes first, medians in a human unit, the
// runs each side rests on, and of the parameters only those that vary between the rows (the rest are the same
// everywhere, and said once above them). What differs in where A and B were made comes first.
void print_comparison(const ComparisonReport& r, const CompareOptions& opts, std::ostream& out) {
  for (auto& d : r.provenance_differs) out << "differs: " << d << "\n";
  std::vector<const ComparisonRow*> rows;
  size_t unchanged = 0;
  for (auto& row : r.rows) {
    if (row.verdict == "unchanged") ++unchanged;
    else rows.push_back(&row);
  }
  // Largest change first; a change that is not a number (a median of 0 or NaN) last.
  auto size = [](const ComparisonRow* r) { return std::isfinite(r->change_pct) ? std::fabs(r->change_pct) : -1.0; };
  std::stable_sort(rows.begin(), rows.end(), [&](const ComparisonRow* a, const ComparisonRow* b) { return size(a) > size(b); });
  std::map<std::string, std::set<std::string>> seen;  // parameter -> values among all rows
  for (auto& row : r.rows)
    for (auto& word : split(row.match, ' '))
      if (auto eq = word.find('='); eq != std::string::npos) seen[word.substr(0, eq)].insert(word.substr(eq + 1));
  std::string same;
  for (auto& [k, v] : seen)
    if (v.size() == 1) same += (same.empty() ? "" : " ") + k + "=" + *v.begin();
  if (!same.empty()) out << "all runs: " << printable(same) << "\n";
  char line[200];
  for (auto* row : rows) {
    std::string varied;
    for (auto& word : split(row->match, ' '))
      if (auto eq = word.find('='); eq != std::string::npos && seen[word.substr(0, eq)].size() > 1) varied += (varied.empty() ? "" : " ") + word;
    const DisplayUnit du = display_unit(row->unit, std::max(std::fabs(row->median_a), std::fabs(row->median_b)));
    std::snprintf(line, sizeof line, "%-11s %+7.1f%%  %-24s %9.4g -> %-9.4g %-6s %zu/%zu runs p=%.3g  ", row->verdict.c_str(), row->change_pct,
                  printable(row->role + ":" + row->metric).c_str(), row->median_a * du.factor, row->median_b * du.factor,
                  printable(du.label).c_str(), row->runs_a, row->runs_b, row->p_value);
    out << line << printable(varied) << "\n";  // the parameters whole, however long: never a cut line
  }
  out << r.rows.size() << " comparisons, " << r.regressions << " regression(s) beyond " << opts.threshold_pct
      << " % and significant across runs (Mann-Whitney U on run medians, alpha " << opts.alpha << "), " << unchanged << " unchanged";
  if (r.undecided)
    out << ", " << r.undecided << " undecided: too few runs a side to reach alpha (at least " << kMinRuns
        << "; 4 a side for 0.05): run both with --repeat=5";
  if (r.unmatched_a || r.unmatched_b) out << "; unmatched: " << r.unmatched_a << " in A, " << r.unmatched_b << " in B";
  out << "\n";
}

void write_comparison(const ComparisonReport& r, const std::string& format, std::ostream& out) {
  static const char* cols[] = {"match", "role", "metric", "unit", "verdict", "change_pct", "median_a", "median_b", "low_a", "high_a",
                               "low_b", "high_b", "runs_a", "runs_b", "samples_a", "samples_b", "p_value"};
  auto values = [](const ComparisonRow& row) {
    return std::vector<std::string>{row.match, row.role, row.metric, row.unit, row.verdict, csv_number(row.change_pct),
                                    csv_number(row.median_a), csv_number(row.median_b), csv_number(row.ci_a_low),
                                    csv_number(row.ci_a_high), csv_number(row.ci_b_low), csv_number(row.ci_b_high),
                                    std::to_string(row.runs_a), std::to_string(row.runs_b), std::to_string(row.samples_a),
                                    std::to_string(row.samples_b), csv_number(row.p_value)};
  };
  if (format == "csv") {
    for (size_t i = 0; i < std::size(cols); ++i) out << (i ? "," : "") << cols[i];
    out << "\n";
    for (auto& row : r.rows) {
      auto v = values(row);
      for (size_t i = 0; i < v.size(); ++i) out << (i ? "," : "") << csv_field(v[i]);
      out << "\n";
    }
    return;
  }
  nlohmann::json j;
  j["regressions"] = r.regressions, j["undecided"] = r.undecided, j["unmatched_a"] = r.unmatched_a, j["unmatched_b"] = r.unmatched_b;
  j["provenance_differs"] = r.provenance_differs;
  j["rows"] = nlohmann::json::array();
  for (auto& row : r.rows) {
    nlohmann::json o;
    auto v = values(row);
    for (size_t i = 0; i < v.size(); ++i) o[cols[i]] = i >= 5 && i != 12 && i != 13 && i != 14 && i != 15 ? nlohmann::json(std::strtod(v[i].c_str(), nullptr)) : nlohmann::json(v[i]);
    for (const char* n : {"runs_a", "runs_b", "samples_a", "samples_b"}) o[n] = std::stoull(o[n].get<std::string>());
    j["rows"].push_back(o);
  }
  out << j.dump(2) << "\n";
}

}  // namespace fanout
