#include "results/compare.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <limits>
#include <optional>
#include <map>
#include <set>
#include <ostream>

#include "common/error.h"
#include "common/text.h"
#include "results/csv_export.h"
#include "results/display_unit.h"
#include "results/metric_stats.h"
#include "results/models.h"
#include "results/reference.h"
#include "results/store.h"
#include "results/layout.h"
#include "results/statistics.h"

#include <nlohmann/json.hpp>
#include <sqlite3.h>

namespace fanout {

namespace fs = std::filesystem;

AbsThreshold parse_abs_threshold(const std::string& text) {
  AbsThreshold t;
  std::string rest = text;
  if (auto eq = rest.find('='); eq != std::string::npos) t.metric = rest.substr(0, eq), rest = rest.substr(eq + 1);
  size_t used = 0;
  double v = 0;
  try {
    v = std::stod(rest, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  t.value = v, t.unit = rest.substr(used), t.origin = "--abs_threshold " + printable(text);
  t.unit_given = !t.unit.empty();
  if (used == 0 || !std::isfinite(v) || v < 0 || (t.metric.empty() && text.find('=') != std::string::npos))
    throw UserError("--abs_threshold '" + printable(text) + "': expected [METRIC=]VALUE[UNIT] with VALUE >= 0 (e.g. 2ms, latency=0.5)");
  return t;
}

std::vector<AbsThreshold> abs_thresholds_from_references(const fs::path& file) {
  std::vector<AbsThreshold> out;
  for (auto& r : read_references(file))
    if (r.abs_threshold >= 0) out.push_back({r.metric, r.role, r.parameters, r.abs_threshold, r.unit, true, r.origin});
  if (out.empty()) throw UserError(file.string() + ": no [[reference]] table has an abs_threshold (what results compare --reference reads)");
  return out;
}

void check_compare_options(const CompareOptions& opts) {
  if (!(opts.threshold_pct >= 0 && opts.threshold_pct <= 1000))
    throw UserError("--threshold " + std::to_string(opts.threshold_pct) + ": a percent from 0 to 1000");
  if (!(opts.alpha > 0 && opts.alpha <= 0.5)) throw UserError("--alpha " + std::to_string(opts.alpha) + ": from above 0 to 0.5");
}

namespace {


std::string match_key(const MetricStats& m, const std::vector<std::string>& ignore) {
  ParameterList params = m.parameters;
  std::sort(params.begin(), params.end());
  std::string key;
  for (auto& [k, v] : params)
    if (std::find(ignore.begin(), ignore.end(), k) == ignore.end()) key += (key.empty() ? "" : " ") + k + "=" + v;
  return key;
}

// The absolute threshold that applies to a figure, in its own unit: the most specific one of its own (a role and
// more parameters before fewer; at equal scope the first given: compare puts its flags before its file's), then a general one; 0 when none applies.
// One of its own in a unit that does not convert to the figure's is an error naming where it was given: a
// threshold that silently did not apply would let a change through.
double abs_threshold_for(const std::vector<AbsThreshold>& all, const ComparisonRow& row) {
  auto in_unit = [&](const AbsThreshold& t) -> std::optional<double> {
    if ((t.unit.empty() && !t.unit_given) || t.unit == row.unit) return t.value;
    const double from = seconds_per(t.unit), to = seconds_per(row.unit);
    if (from > 0 && to > 0) return t.value * from / to;
    return std::nullopt;
  };
  const AbsThreshold* own = nullptr;
  auto scope = [](const AbsThreshold& t) { return (t.role.empty() ? 0 : 1) + t.parameters.size(); };
  for (auto& t : all) {
    if (t.metric.empty()) continue;
    Reference figure;
    figure.metric = t.metric, figure.role = t.role, figure.parameters = t.parameters;
    if (reference_covers(figure, row.role, row.metric, row.parameters) && (!own || scope(t) > scope(*own))) own = &t;
  }
  if (own) {
    if (auto v = in_unit(*own)) return *v;
    throw UserError(own->origin + ": an absolute threshold in '" + printable(own->unit) + "' for " + printable(row.metric) +
                    ", which is in '" + printable(row.unit) + "' (give it in the figure's unit)");
  }
  for (auto& t : all)
    if (t.metric.empty())
      if (auto v = in_unit(t)) return *v;
  return 0;
}

// The smallest two-sided p the exact U test can give with na and nb runs: 2 / C(na + nb, na).
double smallest_p(size_t na, size_t nb) {
  double c = 1;
  for (size_t i = 1; i <= na; ++i) c = c * double(nb + i) / double(i);
  return std::min(1.0, 2 / c);
}

// Provenance keys that say where and with what a run was made (not which run it was).
bool describes_machine(const std::string& key) {
  for (const char* p : {"host", "host_", "version_", "env_", "fanout_version", "fanout_git_revision", "plugin_abi", "plugin.", "revision", "source_commit",
                        "source_dirty"})
    if (key == p || ((std::string(p).back() == '_' || std::string(p).back() == '.') && key.rfind(p, 0) == 0)) return true;
  return false;
}

std::map<std::string, std::set<std::string>> machine_values(const fs::path& dir) {
  std::map<std::string, std::set<std::string>> out;
  ResultsDb db(dir / layout::kDatabase, ResultsDb::ReadOnly{});
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

bool decided(const ComparisonRow& row) {
  if (row.verdict == "unchanged") return row.within_threshold || is_resource_metric(row.metric);
  return row.verdict != "undecided";
}

void mark_undecided_after(ComparisonReport& r, size_t runs) {
  for (auto& row : r.rows)
    if (row.verdict == "unchanged" && !row.within_threshold && !is_resource_metric(row.metric)) {
      row.verdict = "undecided (neither beyond nor within the threshold after " + std::to_string(runs) + " runs)";
      --r.unchanged, ++r.undecided, ++r.inconclusive;
    }
}

namespace {

// The same figure's scaling model on both sides: a change of its term (the growth), judged by its direction.
void compare_models(const ExperimentStats& sa, const ExperimentStats& sb, const CompareOptions& opts, ComparisonReport& report) {
  ModelOptions mo;
  mo.metrics = opts.metrics;
  const auto ma = experiment_models(sa, mo), mb = experiment_models(sb, mo);
  std::map<std::string, std::string> better;  // metric -> declared direction, from either side's runs
  for (auto* s : {&sb, &sa})
    for (auto& m : s->stats)
      if (!m.better.empty() && !better.count(m.metric)) better[m.metric] = m.better;
  for (auto& a : ma) {
    if (a.two || !a.single.fitted) continue;
    for (auto& b : mb) {
      if (b.two || !b.single.fitted || b.role != a.role || b.metric != a.metric || b.unit != a.unit || b.single.param != a.single.param ||
          b.series != a.series || b.single.term == a.single.term)
        continue;
      std::string dir = better.count(a.metric) ? better[a.metric] : unit_better(a.unit);
      const bool faster = a.single.term < b.single.term;  // B's figure grows faster with the parameter
      ComparisonReport::ScalingChange c;
      c.figure = a.label();
      c.term_a = a.single.term.constant() ? "constant" : a.single.term.text(a.single.param);
      c.term_b = b.single.term.constant() ? "constant" : b.single.term.text(b.single.param);
      c.model_a = a.single.formula(), c.model_b = b.single.formula();
      c.verdict = dir == "lower" ? (faster ? "scaling regression" : "scaling improvement")
                  : dir == "higher" ? (faster ? "scaling improvement" : "scaling regression")
                                    : "scaling changed";
      report.scaling_regressions += c.verdict == "scaling regression";
      report.scaling_changes.push_back(std::move(c));
    }
  }
}

}  // namespace

void measure_row(ComparisonRow& r, const std::vector<double>& ma, const std::vector<double>& mb, const CompareOptions& opts) {
  const RunLevel x = summarize_runs(ma), y = summarize_runs(mb);
  r.runs_a = x.runs, r.runs_b = y.runs;
  r.median_a = x.median, r.median_b = y.median;
  r.ci_a_low = x.low, r.ci_a_high = x.high, r.ci_b_low = y.low, r.ci_b_high = y.high;
  r.change = y.median - x.median;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  r.change_pct = x.median != 0 ? r.change / std::fabs(x.median) * 100.0 : nan;
  r.verdict.clear();
  if (!std::isfinite(x.median) || !std::isfinite(y.median)) {
    r.verdict = "undecided (no finite samples)";  // an inf or NaN median has no size to judge
    return;
  }
  r.p_value = r.p_adjusted = mann_whitney_p(ma, mb);
  r.shift = hodges_lehmann(ma, mb, opts.alpha);
  const double base = std::fabs(x.median);
  r.shift_pct = x.median != 0 ? r.shift.estimate / base * 100 : nan;
  r.shift_pct_low = x.median != 0 ? r.shift.low / base * 100 : nan;
  r.shift_pct_high = x.median != 0 ? r.shift.high / base * 100 : nan;
  if (r.runs_a < kMinRuns || r.runs_b < kMinRuns || smallest_p(r.runs_a, r.runs_b) > opts.alpha)
    r.verdict = "undecided";  // no test of so few runs can reach alpha: saying "unchanged" would be a guess
}

void judge_row(ComparisonRow& r, double abs_min, const CompareOptions& opts) {
  // Beyond the thresholds: the percent one where A's median has a size, the absolute one always (0 when none). The
  // size judged is the Hodges-Lehmann shift, the one printed and the one whose interval shows a figure within them:
  // a difference of two medians jumps with which mode each side's middle run fell in (a benchmark whose runs land
  // in two cache states), the median of every pairwise difference does not.
  const bool big = std::fabs(r.shift.estimate) > abs_min && (r.median_a == 0 || std::fabs(r.shift_pct) > opts.threshold_pct);
  r.within_threshold = r.shift.bounded &&
      (r.median_a != 0 ? std::fabs(r.shift_pct_low) < opts.threshold_pct && std::fabs(r.shift_pct_high) < opts.threshold_pct
                       : (r.shift.low == 0 && r.shift.high == 0) || (std::fabs(r.shift.low) < abs_min && std::fabs(r.shift.high) < abs_min));
  if (!(r.p_adjusted < opts.alpha && big)) r.verdict = "unchanged";
  else if (r.better == "none") r.verdict = "changed";
  else if (r.better.empty()) r.verdict = "changed (no direction)";
  else r.verdict = (r.shift.estimate > 0) == (r.better == "lower") ? "regression" : "improvement";
}

int comparison_status(const ComparisonReport& r) {
  return r.regressions || r.undirected || r.scaling_regressions ? 1 : r.undecided ? 3 : 0;
}

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
  // Which way is better: what a run of either side declared (the candidate's first), else the unit.
  auto declared = [](const std::vector<const MetricStats*>& runs) {
    for (auto* m : runs)
      if (!m->better.empty()) return m->better;
    return std::string();
  };
  std::vector<size_t> testable;  // rows whose p enters the correction
  for (auto& [key, runs_a] : ia) {
    auto it = ib.find(key);
    if (it == ib.end()) {
      ++report.unmatched_a;
      continue;
    }
    ComparisonRow r;
    std::tie(r.match, r.role, r.metric, r.unit) = key;
    for (auto& [k, v] : runs_a.front()->parameters)
      if (std::find(opts.ignore.begin(), opts.ignore.end(), k) == opts.ignore.end()) r.parameters.emplace_back(k, v);
    const std::vector<double> ma = medians(runs_a, r.samples_a), mb = medians(it->second, r.samples_b);
    r.better = declared(it->second);
    if (r.better.empty()) r.better = declared(runs_a);
    r.better_from = r.better.empty() ? "" : "declared";
    if (r.better.empty() && !(r.better = unit_better(r.unit)).empty()) r.better_from = "unit";
    measure_row(r, ma, mb, opts);
    if (r.verdict.empty()) testable.push_back(report.rows.size());
    report.rows.push_back(r);
  }
  // Many figures at once: the p-values adjusted together, then each verdict.
  std::vector<double> ps;
  for (size_t i : testable) ps.push_back(report.rows[i].p_value);
  const auto adjusted = adjust_p_values(ps, opts.correction);
  report.tested = testable.size();
  for (size_t k = 0; k < testable.size(); ++k) {
    ComparisonRow& r = report.rows[testable[k]];
    r.p_adjusted = adjusted[k];
    judge_row(r, abs_threshold_for(opts.abs_thresholds, r), opts);
  }
  for (auto& r : report.rows) {
    if (r.verdict == "regression") ++report.regressions;
    else if (r.verdict == "improvement") ++report.improvements;
    else if (r.verdict == "unchanged") ++report.unchanged;
    else if (r.verdict == "changed") ++report.informational;
    else if (r.verdict == "changed (no direction)") ++report.undirected;
    else ++report.undecided, report.not_finite += r.verdict.rfind("undecided (no finite", 0) == 0;
  }
  for (auto& [key, mb] : ib)
    if (!ia.count(key)) ++report.unmatched_b;
  compare_models(sa, sb, opts, report);
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

namespace {

// A parameter as people read it: name=value, the value quoted when it holds a blank or a quote.
std::string param_text(const std::string& k, const std::string& v) {
  const bool quote = v.empty() || v.find_first_of(" \t\"'") != std::string::npos;
  if (!quote) return k + "=" + v;
  std::string q = "\"";
  for (char c : v) q += c == '"' || c == '\\' ? std::string("\\") + c : std::string(1, c);
  return k + "=" + q + "\"";
}

// How big the change is, for people: the Hodges-Lehmann shift in percent of A's median with its interval, or in the
// unit from a median of 0.
std::string change_text(const ComparisonRow& row) {
  char buf[160];
  if (row.verdict.rfind("undecided (no finite", 0) == 0) return "n/a";
  if (std::isfinite(row.shift_pct)) {
    std::snprintf(buf, sizeof buf, "%+.1f %% [%+.1f %%, %+.1f %%]", row.shift_pct, row.shift_pct_low, row.shift_pct_high);
    return buf;
  }
  const double scale = std::max({std::fabs(row.shift.estimate), std::fabs(row.shift.low), std::fabs(row.shift.high), std::fabs(row.median_b)});
  const DisplayUnit du = display_unit(row.unit, scale);
  std::snprintf(buf, sizeof buf, "%+.4g %s from 0 [%+.4g, %+.4g]", row.shift.estimate * du.factor, printable(du.label).c_str(),
                row.shift.low * du.factor, row.shift.high * du.factor);
  return buf;
}

}  // namespace

// One line per changed or undecided figure, for people: the largest changes first, medians in a human unit, the
// runs each side rests on, and of the parameters only those that vary between the rows (the rest are the same
// everywhere, and said once above them). What differs in where A and B were made comes first.
void print_comparison(const ComparisonReport& r, const CompareOptions& opts, std::ostream& out) {
  for (auto& d : r.provenance_differs) out << "differs: " << d << "\n";
  std::vector<const ComparisonRow*> rows;
  for (auto& row : r.rows)
    if (row.verdict != "unchanged") rows.push_back(&row);
  // Largest change first; a change from 0 or of no finite size last.
  auto size = [](const ComparisonRow* r) { return std::isfinite(r->shift_pct) ? std::fabs(r->shift_pct) : -1.0; };
  std::stable_sort(rows.begin(), rows.end(), [&](const ComparisonRow* a, const ComparisonRow* b) { return size(a) > size(b); });
  std::map<std::string, std::set<std::string>> seen;  // parameter -> values among all rows
  for (auto& row : r.rows)
    for (auto& [k, v] : row.parameters) seen[k].insert(v);
  std::string same;
  for (auto& [k, v] : seen)  // an empty value (a setting left unset: exec's env="" cwd="") says nothing
    if (v.size() == 1 && !v.begin()->empty()) same += (same.empty() ? "" : " ") + param_text(k, *v.begin());
  if (!same.empty()) out << "all runs: " << printable(same) << "\n";
  char line[400];
  for (auto* row : rows) {
    std::string varied;
    for (auto& [k, v] : row->parameters)
      if (seen[k].size() > 1) varied += (varied.empty() ? "" : " ") + param_text(k, v);
    const DisplayUnit du = display_unit(row->unit, std::max(std::fabs(row->median_a), std::fabs(row->median_b)));
    std::snprintf(line, sizeof line, "%-22s %-28s %-24s %9.4g -> %-9.4g %-6s %zu/%zu runs p=%.3g (adj. %.3g)  ", row->verdict.c_str(),
                  change_text(*row).c_str(), printable(row->role + ":" + row->metric).c_str(), row->median_a * du.factor,
                  row->median_b * du.factor, printable(du.label).c_str(), row->runs_a, row->runs_b, row->p_value, row->p_adjusted);
    out << line << printable(varied) << "\n";  // the parameters whole, however long: never a cut line
  }
  for (auto& c : r.scaling_changes)
    out << c.verdict << ": " << printable(c.figure) << ": " << printable(c.term_a) << " -> " << printable(c.term_b) << "  (A: "
        << printable(c.model_a) << "; B: " << printable(c.model_b) << ")\n";
  out << r.rows.size() << " comparisons: " << r.regressions << " regression(s), " << r.improvements << " improvement(s), "
      << r.unchanged << " unchanged";
  if (r.informational) out << ", " << r.informational << " changed (declared better = none: for information)";
  if (r.undirected)
    out << ", " << r.undirected << " changed with no direction (fails the gate: declare it, e.g. exec --better=lower, or "
        << "use a unit that says: a time or <x>/s)";
  if (r.inconclusive)
    out << ", " << r.inconclusive << " undecided after --max_repeat runs a side (neither beyond nor within the threshold: "
        << "more runs, or a steadier benchmark)";
  if (r.undecided > r.not_finite + r.inconclusive)
    out << ", " << r.undecided - r.not_finite - r.inconclusive << " undecided (too few runs a side to reach alpha, at least " << kMinRuns
        << " and 4 a side for 0.05: run both with --repeat=5)";
  if (r.not_finite) out << ", " << r.not_finite << " undecided (a median that is not a finite number has no size)";
  out << ". A verdict needs a change beyond " << opts.threshold_pct << " %";
  if (!opts.abs_thresholds.empty()) out << " and the absolute threshold";
  out << ", significant across runs (Mann-Whitney U on run medians, alpha " << opts.alpha << ", p adjusted by "
      << (opts.correction == Correction::BenjaminiHochberg ? "Benjamini-Hochberg" : opts.correction == Correction::Holm ? "Holm" : "nothing")
      << " over " << r.tested << " figure(s)); sizes are Hodges-Lehmann shifts of the run medians with their "
      << int(std::lround((1 - opts.alpha) * 100)) << " % interval";
  if (r.unmatched_a || r.unmatched_b) out << "; unmatched: " << r.unmatched_a << " in A, " << r.unmatched_b << " in B";
  out << "\n";
}

void write_comparison(const ComparisonReport& r, const std::string& format, std::ostream& out) {
  static const char* cols[] = {"match", "role", "metric", "unit", "better", "better_from", "verdict", "change_pct", "change",
                               "shift", "shift_low", "shift_high", "shift_pct", "shift_pct_low", "shift_pct_high", "shift_confidence",
                               "median_a", "median_b", "low_a", "high_a", "low_b", "high_b", "runs_a", "runs_b", "samples_a",
                               "samples_b", "p_value", "p_adjusted"};
  constexpr size_t kFirstNumber = 7;
  auto values = [](const ComparisonRow& row) {
    return std::vector<std::string>{row.match, row.role, row.metric, row.unit, row.better, row.better_from, row.verdict,
                                    csv_number(row.change_pct), csv_number(row.change), csv_number(row.shift.estimate),
                                    csv_number(row.shift.low), csv_number(row.shift.high), csv_number(row.shift_pct),
                                    csv_number(row.shift_pct_low), csv_number(row.shift_pct_high), csv_number(row.shift.confidence),
                                    csv_number(row.median_a), csv_number(row.median_b), csv_number(row.ci_a_low),
                                    csv_number(row.ci_a_high), csv_number(row.ci_b_low), csv_number(row.ci_b_high),
                                    std::to_string(row.runs_a), std::to_string(row.runs_b), std::to_string(row.samples_a),
                                    std::to_string(row.samples_b), csv_number(row.p_value), csv_number(row.p_adjusted)};
  };
  std::vector<std::string> params;  // one column per parameter, in first-seen order
  for (auto& row : r.rows)
    for (auto& [k, v] : row.parameters)
      if (std::find(params.begin(), params.end(), k) == params.end()) params.push_back(k);
  if (format == "csv") {
    for (size_t i = 0; i < std::size(cols); ++i) out << (i ? "," : "") << cols[i];
    for (auto& p : params) out << "," << csv_field("param." + p);
    out << "\n";
    for (auto& row : r.rows) {
      auto v = values(row);
      for (size_t i = 0; i < v.size(); ++i) out << (i ? "," : "") << csv_field(v[i]);
      for (auto& p : params) {
        auto it = std::find_if(row.parameters.begin(), row.parameters.end(), [&](auto& kv) { return kv.first == p; });
        out << "," << csv_field(it == row.parameters.end() ? "" : it->second);
      }
      out << "\n";
    }
    return;
  }
  nlohmann::json j;
  j["regressions"] = r.regressions, j["improvements"] = r.improvements, j["unchanged"] = r.unchanged;
  j["changed_no_direction"] = r.undirected, j["changed_informational"] = r.informational, j["undecided"] = r.undecided;
  j["unmatched_a"] = r.unmatched_a, j["unmatched_b"] = r.unmatched_b, j["tested"] = r.tested;
  j["provenance_differs"] = r.provenance_differs;
  j["scaling_changes"] = nlohmann::json::array();
  for (auto& c : r.scaling_changes)
    j["scaling_changes"].push_back({{"verdict", c.verdict}, {"figure", c.figure}, {"term_a", c.term_a}, {"term_b", c.term_b},
                                    {"model_a", c.model_a}, {"model_b", c.model_b}});
  j["rows"] = nlohmann::json::array();
  for (auto& row : r.rows) {
    nlohmann::json o;
    auto v = values(row);
    for (size_t i = 0; i < v.size(); ++i) {
      const std::string c = cols[i];
      const bool count = c == "runs_a" || c == "runs_b" || c == "samples_a" || c == "samples_b";
      if (i < kFirstNumber) o[c] = v[i];
      else if (count) o[c] = std::stoull(v[i]);
      else {
        const double x = std::strtod(v[i].c_str(), nullptr);
        o[c] = std::isfinite(x) && !v[i].empty() ? nlohmann::json(x) : nlohmann::json(nullptr);  // JSON has no NaN
      }
    }
    nlohmann::json ps = nlohmann::json::object();
    for (auto& [k, val] : row.parameters) ps[k] = val;
    o["parameters"] = ps;
    j["rows"].push_back(o);
  }
  out << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
}

}  // namespace fanout
