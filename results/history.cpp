#include "results/history.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <sstream>
#include <map>
#include <set>
#include <tuple>

#include <sqlite3.h>

#include "common/error.h"
#include "common/parallel.h"
#include "common/text.h"
#include "results/compare.h"
#include "results/csv_export.h"
#include "results/display_unit.h"
#include "results/layout.h"
#include "results/metric_stats.h"
#include "results/statistics.h"
#include "results/store.h"

namespace fanout {

namespace fs = std::filesystem;

namespace {

// "2026-11-28T05:12:00+01:00" (git's %cI) as Unix seconds; NaN when it is not that.
double iso8601_seconds(const std::string& t) {
  std::tm tm{};
  int tz_h = 0, tz_m = 0;
  char sign = 'Z';
  if (std::sscanf(t.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d", &tm.tm_year, &tm.tm_mon, &tm.tm_mday, &tm.tm_hour, &tm.tm_min, &tm.tm_sec) != 6)
    return NAN;
  if (t.size() >= 25) sign = t[19], tz_h = std::atoi(t.c_str() + 20), tz_m = std::atoi(t.c_str() + 23);
  tm.tm_year -= 1900, tm.tm_mon -= 1;
  double s = double(timegm(&tm));
  const double offset = (tz_h * 60 + tz_m) * 60.0;
  return sign == '+' ? s - offset : sign == '-' ? s + offset : s;
}

// One provenance value of an experiment (the first run's), or "".
std::string provenance(const ResultsDb& db, const std::string& key) {
  const auto values = db.provenance_values(key);
  return values.empty() ? std::string() : values.front();
}

double first_start(const ResultsDb& db) {
  sqlite3_stmt* st = nullptr;
  double out = NAN;
  if (sqlite3_prepare_v2(db.handle(), "SELECT min(started_at) FROM runs", -1, &st, nullptr) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW &&
      sqlite3_column_type(st, 0) != SQLITE_NULL)
    out = sqlite3_column_double(st, 0);
  sqlite3_finalize(st);
  return out;
}

using Parameters = std::vector<std::pair<std::string, std::string>>;

double median_of(std::vector<double> v) { return v.empty() ? NAN : summarize_runs(std::move(v)).median; }

// The experiment's own name (the experiments table), else its folder's.
std::string experiment_name(const ResultsDb& db, const fs::path& dir) {
  sqlite3_stmt* st = nullptr;
  std::string out;
  if (sqlite3_prepare_v2(db.handle(), "SELECT name FROM experiments ORDER BY id LIMIT 1", -1, &st, nullptr) == SQLITE_OK && sqlite3_step(st) == SQLITE_ROW)
    if (const unsigned char* t = sqlite3_column_text(st, 0)) out = reinterpret_cast<const char*>(t);
  sqlite3_finalize(st);
  return out.empty() ? fs::absolute(dir).lexically_normal().filename().string() : out;
}

// A figure's identity across experiments: every parameter of its permutation (as compare matches runs), less
// --ignore, sorted: two nights at different sizes are two series, whether or not either night varied the size.
Parameters figure_identity(Parameters params, const std::vector<std::string>& ignore) {
  std::erase_if(params, [&](const auto& kv) { return std::count(ignore.begin(), ignore.end(), kv.first) > 0; });
  std::sort(params.begin(), params.end());
  return params;
}

}  // namespace

HistoryInput history_input(const fs::path& dir) {
  if (!fs::exists(dir / layout::kDatabase))
    throw UserError("history: " + dir.string() + " is not an experiment folder (no " + std::string(layout::kDatabase) + ")");
  HistoryInput l;
  {
    ResultsDb db(dir / layout::kDatabase, ResultsDb::ReadOnly{});
    l.point.dir = dir;
    l.point.revision = provenance(db, "revision");
    if (l.point.revision.empty()) l.point.revision = fs::absolute(dir).lexically_normal().filename().string();
    l.dirty = provenance(db, "source_dirty") == "true";
    if (l.dirty) l.point.revision += " (dirty)";
    l.commit_time = iso8601_seconds(provenance(db, "source_commit_time"));
    l.start = first_start(db);
    l.name = experiment_name(db, dir);
    l.machine = provenance(db, "host");
  }
  l.figures = across_runs(load_experiment_stats(dir));
  return l;
}

HistoryChanges history_changes(const std::vector<fs::path>& dirs, const HistoryOptions& opts) {
  std::vector<HistoryInput> inputs;
  for (auto& dir : dirs) inputs.push_back(history_input(dir));
  return history_changes(std::move(inputs), opts);
}

HistoryChanges history_changes(std::vector<HistoryInput> loaded, const HistoryOptions& opts) {
  HistoryChanges h;
  // The code's order when every point knows its commit's time; else the order the experiments ran in.
  h.by_commit_time = std::all_of(loaded.begin(), loaded.end(), [](const HistoryInput& l) { return std::isfinite(l.commit_time); });
  for (auto& l : loaded) l.point.time = h.by_commit_time ? l.commit_time : l.start;
  // Commits of one second (a rebase) in the order they ran; a point with no time at all (no run started) last.
  auto order = [](const HistoryInput& l) {
    return std::make_tuple(std::isfinite(l.point.time) ? l.point.time : INFINITY, std::isfinite(l.start) ? l.start : INFINITY);
  };
  std::stable_sort(loaded.begin(), loaded.end(), [&](const HistoryInput& a, const HistoryInput& b) { return order(a) < order(b); });
  for (auto& l : loaded) h.points.push_back(l.point);

  // Each figure's series: (role, metric, unit, permutation) -> (point, its figure there), oldest first.
  using Key = std::tuple<std::string, std::string, std::string, Parameters>;
  std::map<Key, std::vector<std::pair<size_t, const AcrossRuns*>>> series;
  std::map<Key, std::string> better;
  for (size_t p = 0; p < loaded.size(); ++p)
    for (auto& f : loaded[p].figures) {
      if (!opts.metrics.empty() && !std::count(opts.metrics.begin(), opts.metrics.end(), f.metric)) continue;
      if (f.setup_cost || !std::isfinite(f.runs.median)) continue;
      const Key key{f.role, f.metric, f.unit, figure_identity(f.parameters, opts.ignore)};
      series[key].emplace_back(p, &f);
      if (!f.better.empty()) better[key] = f.better;
    }
  // A figure is named by the parameters that set it apart from the other figures (the rest, the same everywhere, would
  // only make each line long: an exec step's command and settings are parameters too).
  std::map<std::string, std::set<std::string>> values_of;  // parameter -> its values over the figures listed
  std::map<std::string, size_t> present;                    // parameter -> how many of them have it
  size_t listed = 0;
  for (auto& [key, points] : series)
    if (points.size() >= 3) {
      ++listed;
      for (auto& [k, v] : std::get<3>(key)) values_of[k].insert(v), ++present[k];
    }
  auto shown = [&](const Parameters& params) {
    std::string out;
    for (auto& [k, v] : params)
      if (values_of[k].size() > 1 || present[k] < listed) out += (out.empty() ? "" : " ") + k + "=" + v;
    return out;
  };
  // Each figure's run-level medians, and its change points on its own (a permutation test is most of the time):
  // over the cores.
  std::vector<std::vector<double>> medians;
  for (auto& [key, points] : series) {
    if (points.size() < 3) continue;
    medians.emplace_back();
    for (auto& [p, f] : points) medians.back().push_back(f->runs.median);
  }
  std::vector<std::vector<ChangePoint>> found(medians.size());
  auto analyse = [&](size_t i) { found[i] = e_divisive(medians[i], opts.change_points); };
  if (opts.parallel) parallel_for(medians.size(), analyse);
  else
    for (size_t i = 0; i < medians.size(); ++i) analyse(i);
  size_t next = 0;
  for (auto& [key, points] : series) {
    if (points.size() < 3) continue;
    ++h.figures;
    const std::vector<double>& values = medians[next];
    const auto& cps = found[next++];
    FigureSeries line;
    line.role = std::get<0>(key), line.metric = std::get<1>(key), line.unit = std::get<2>(key), line.match = shown(std::get<3>(key));
    line.better = better.count(key) ? better[key] : unit_better(line.unit);
    for (size_t i = 0; i < points.size(); ++i)
      line.points.push_back(points[i].first), line.median.push_back(values[i]), line.low.push_back(points[i].second->runs.low),
          line.high.push_back(points[i].second->runs.high);
    for (size_t c = 0; c < cps.size(); ++c) {
      const size_t from = c == 0 ? 0 : cps[c - 1].index, at = cps[c].index, to = c + 1 < cps.size() ? cps[c + 1].index : values.size();
      FigureChange fc;
      fc.role = std::get<0>(key), fc.metric = std::get<1>(key), fc.unit = std::get<2>(key), fc.match = shown(std::get<3>(key));
      fc.better = better.count(key) ? better[key] : unit_better(fc.unit);
      fc.point = points[at].first;
      fc.before = h.points[points[at - 1].first].revision, fc.after = h.points[fc.point].revision;
      fc.median_before = median_of({values.begin() + long(from), values.begin() + long(at)});
      fc.median_after = median_of({values.begin() + long(at), values.begin() + long(to)});
      fc.change_pct = fc.median_before != 0 ? (fc.median_after - fc.median_before) / std::fabs(fc.median_before) * 100 : NAN;
      fc.p_value = cps[c].p_value;
      // As compare: a change within the threshold is no verdict (a stable benchmark's significant 0.3 %), and the
      // same median either side (a change of spread alone) has no direction.
      if (std::isfinite(fc.change_pct) && std::fabs(fc.change_pct) <= opts.threshold_pct) {
        ++h.small;
        continue;
      }
      // Its size with its interval: the Hodges-Lehmann shift of the points before it to those after it (no test: the
      // permutation test above is this change's), in percent of the median before.
      CompareOptions copts;
      copts.threshold_pct = opts.threshold_pct;
      const Shift size = hodges_lehmann({values.begin() + long(from), values.begin() + long(at)}, {values.begin() + long(at), values.begin() + long(to)},
                                        copts.alpha);
      const double base = std::fabs(fc.median_before);
      fc.shift_pct = base != 0 ? size.estimate / base * 100 : NAN;
      fc.shift_pct_low = base != 0 ? size.low / base * 100 : NAN;
      fc.shift_pct_high = base != 0 ? size.high / base * 100 : NAN;
      // And the neighbouring revisions alone, judged as `results compare` would judge them.
      ComparisonRow pair;
      pair.better = fc.better == "lower" || fc.better == "higher" || fc.better == "none" ? fc.better : "";
      measure_row(pair, points[at - 1].second->run_medians, points[at].second->run_medians, copts);
      if (pair.verdict.empty()) judge_row(pair, 0, copts);
      fc.pairwise = pair.verdict, fc.pairwise_p = pair.p_value;
      line.changes.push_back(at);
      if (fc.better == "none" || fc.median_after == fc.median_before) fc.verdict = "changed";
      else if (fc.better != "lower" && fc.better != "higher") fc.verdict = "changed (no direction)";
      else fc.verdict = (fc.median_after > fc.median_before) == (fc.better == "lower") ? "regression" : "improvement";
      fc.agrees = fc.pairwise == fc.verdict;
      // The newest point lies after the figure's last change: when that change was a regression, the code as it is now
      // is slower than before it (a lone newest point cannot be told from an outlier: it takes two to show a step).
      if (c + 1 == cps.size() && at + 1 < values.size() && points.back().first + 1 == h.points.size() && fc.verdict == "regression")
        h.latest_regression = true;
      h.changes.push_back(std::move(fc));
    }
    h.series.push_back(std::move(line));
  }
  std::stable_sort(h.changes.begin(), h.changes.end(), [](const FigureChange& a, const FigureChange& b) { return a.point > b.point; });
  return h;
}

void print_history_changes(const HistoryChanges& h, std::ostream& out) {
  out << h.points.size() << " point(s), oldest first by " << (h.by_commit_time ? "their code's commit time" : "when they ran (not every point has --source)")
      << ":";
  for (auto& p : h.points) out << " " << p.revision;
  out << "\n";
  auto number = [](const char* format, double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, format, v);
    return std::string(buf);
  };
  for (auto& c : h.changes) {
    const DisplayUnit du = display_unit(c.unit, c.median_before);
    std::string verdict = c.verdict;
    verdict.resize(std::max<size_t>(verdict.size(), 22), ' ');
    out << verdict << " " << c.metric << " (" << c.role << ")" << (c.match.empty() ? "" : " " + c.match) << ": "
        << number("%.4g", c.median_before * du.factor) << " -> " << number("%.4g", c.median_after * du.factor) << " " << du.label << " ("
        << number("%+.1f", c.change_pct) << " %) from " << c.before << " to " << c.after << ", p=" << number("%.3g", c.p_value)
        << "; size " << number("%+.1f", c.shift_pct) << " % [" << number("%+.1f", c.shift_pct_low) << " %, " << number("%+.1f", c.shift_pct_high)
        << " %]; " << c.before << " vs " << c.after << " alone: " << c.pairwise << " (p=" << number("%.3g", c.pairwise_p) << ", "
        << (c.agrees ? "agrees" : "disagrees") << ")\n";
  }
  out << h.changes.size() << " change point(s) in " << h.figures << " figure(s) (E-Divisive means on run-level medians, permutation test)";
  if (h.small) out << ", " << h.small << " more within the threshold";
  out << (h.latest_regression ? "; the newest point comes after a regression" : "") << "\n";
}

void write_history_changes_csv(const HistoryChanges& h, std::ostream& out) {
  out << "role,metric,unit,parameters,better,verdict,before,after,median_before,median_after,change_pct,p_value,shift_pct,shift_pct_low,"
         "shift_pct_high,pairwise,pairwise_p,agrees\n";
  for (auto& c : h.changes)
    out << csv_field(c.role) << ',' << csv_field(c.metric) << ',' << csv_field(c.unit) << ',' << csv_field(c.match) << ',' << c.better << ','
        << csv_field(c.verdict) << ',' << csv_field(c.before) << ',' << csv_field(c.after) << ',' << csv_number(c.median_before) << ','
        << csv_number(c.median_after) << ',' << csv_number(c.change_pct) << ',' << csv_number(c.p_value) << ',' << csv_number(c.shift_pct) << ','
        << csv_number(c.shift_pct_low) << ',' << csv_number(c.shift_pct_high) << ',' << csv_field(c.pairwise) << ',' << csv_number(c.pairwise_p) << ','
        << (c.agrees ? "true" : "false") << '\n';
}

}  // namespace fanout
