#include "results/plots.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <tuple>


#include "common/parallel.h"
#include "common/subprocess.h"
#include "common/text.h"
#include "results/display_unit.h"
#include "results/metric_stats.h"
#include "results/models.h"
#include "results/store.h"

namespace fanout {

namespace fs = std::filesystem;

namespace {

// Per-run distribution plots (a violin and a histogram series per run) up to this many runs of a metric.
constexpr size_t kMaxPerRunSeries = 200;

// A gnuplot double-quoted string: backslash and double quote escaped, control characters as blanks. Not single
// quotes with '' for a quote inside: gnuplot reads a string that starts with a quote ('''q') as the empty string ''
// followed by another, and the plot failed (a metric named 'q).
std::string gq(const std::string& s) {
  std::string out = "\"";
  for (char c : s) {
    if (c == '\\' || c == '"') out += '\\', out += c;
    else out += (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) ? ' ' : c;
  }
  return out + "\"";
}

// Every script's first lines: `reset` because scripts share a gnuplot session (run_gnuplot_scripts); reset leaves the
// terminal and output alone, which each script then sets.
const char* kTerminal = "reset\nset terminal pngcairo size 1200,700 noenhanced font ',10'\n";

// Draws every plot from the script beside its PNG (stem.gp); a plot whose script fails is left out with a
// warning, the others are kept, in the plots' order.
void run_gnuplot(std::vector<Plot>& plots, std::vector<std::string>& warnings) {
  std::vector<fs::path> scripts;
  for (auto& p : plots) scripts.push_back(fs::path(p.png).replace_extension(".gp"));
  const std::vector<std::string> failed = run_gnuplot_scripts(scripts);
  std::vector<Plot> drawn;
  for (size_t i = 0; i < plots.size(); ++i) {
    if (failed[i].empty()) drawn.push_back(std::move(plots[i]));
    else warnings.push_back(failed[i]);
  }
  plots = std::move(drawn);
}

// Groups of stats by metric identity.
std::map<std::tuple<std::string, std::string, std::string>, std::vector<const MetricStats*>> by_metric(const ExperimentStats& e) {
  std::map<std::tuple<std::string, std::string, std::string>, std::vector<const MetricStats*>> out;
  for (auto& m : e.stats) out[{m.role, m.metric, m.unit}].push_back(&m);
  return out;
}

// Varied parameters whose value follows from `axis` (the x of a plot): they do not split series.
std::vector<std::string> series_params(const std::vector<const MetricStats*>& group, const std::vector<std::string>& varied,
                                       const std::function<std::string(const MetricStats&)>& axis) {
  std::vector<std::string> keep;
  for (auto& name : varied) {
    std::map<std::string, std::set<std::string>> values_at;
    for (auto* m : group)
      for (auto& [k, v] : m->parameters)
        if (k == name) values_at[axis(*m)].insert(v);
    bool determined = std::all_of(values_at.begin(), values_at.end(), [](auto& kv) { return kv.second.size() <= 1; });
    if (!determined) keep.push_back(name);
  }
  return keep;
}

// The group's display unit, chosen by the median of its runs' medians.
DisplayUnit unit_of(const std::vector<const MetricStats*>& group) {
  std::vector<double> medians;
  for (auto* m : group) medians.push_back(m->summary.median);
  std::sort(medians.begin(), medians.end());
  return display_unit(group.front()->unit, medians.empty() ? 0.0 : medians[medians.size() / 2]);
}

// A metric every rank records at most once per run (setup or teardown, not the measured loop).
// A plot file's name: the role and metric made safe for a file name; when that changed them ("a/b" and "a_b" would
// both be "a_b"), a hash of the names keeps the two plots apart.
// A metric recorded in two units (a program that printed ms in one run and s in another) is two figures: their
// plots get the unit in their names too, or the second would overwrite the first.
std::string file_stem(const std::string& role, const std::string& metric, const std::string& unit, bool several_units) {
  const std::string raw = role + "_" + metric + (several_units ? "_" + unit : ""), safe = filename_safe(raw, 80);
  return safe == raw ? safe : safe + "-" + fnv1a_hex(role + "\n" + metric + (several_units ? "\n" + unit : "")).substr(0, 8);
}

// Whether the experiment holds this role's metric in more than one unit.
bool several_units(const ExperimentStats& e, const std::string& role, const std::string& metric) {
  const std::string* first = nullptr;
  for (auto& m : e.stats)
    if (m.role == role && m.metric == metric) {
      if (first && *first != m.unit) return true;
      first = &m.unit;
    }
  return false;
}
std::string file_stem(const ExperimentStats& e, const std::string& role, const std::string& metric, const std::string& unit) {
  return file_stem(role, metric, unit, several_units(e, role, metric));
}

void violin(const std::vector<const MetricStats*>& group, const ExperimentStats& e, const fs::path& dir, std::vector<Plot>& plots,
            Plot::Section section) {
  const MetricStats& first = *group.front();
  const DisplayUnit du = unit_of(group);
  auto axis = [](const MetricStats& m) { return std::to_string(m.ranks); };
  auto params = series_params(group, e.varied, axis);
  std::vector<int> xs;
  std::vector<std::string> labels;
  for (auto* m : group) {
    if (std::find(xs.begin(), xs.end(), m->ranks) == xs.end()) xs.push_back(m->ranks);
    std::string l = series_label(*m, params);
    if (std::find(labels.begin(), labels.end(), l) == labels.end()) labels.push_back(l);
  }
  std::sort(xs.begin(), xs.end());
  std::sort(labels.begin(), labels.end(), NaturalLess());
  const double slot = 0.8 / double(labels.size());
  std::string stem = "violin_" + file_stem(e, first.role, first.metric, first.unit);
  std::ofstream data(dir / (stem + ".dat")), med(dir / (stem + "_median.dat"));
  double lo = INFINITY, hi = -INFINITY;
  for (size_t s = 0; s < labels.size(); ++s) {
    for (auto* m : group) {
      if (series_label(*m, params) != labels[s] || m->density.empty()) continue;
      double x0 = double(std::find(xs.begin(), xs.end(), m->ranks) - xs.begin()) + (double(s) - (labels.size() - 1) / 2.0) * slot;
      double peak = 0;
      for (auto& [y, d] : m->density) peak = std::max(peak, d);
      double half = slot * 0.45;
      for (auto& [y, d] : m->density) data << x0 + half * d / peak << " " << y << "\n";
      for (auto it = m->density.rbegin(); it != m->density.rend(); ++it) data << x0 - half * it->second / peak << " " << it->first << "\n";
      data << x0 + half * m->density.front().second / peak << " " << m->density.front().first << "\n\n";
      med << x0 << " " << m->summary.median << "\n";
      lo = std::min(lo, m->summary.min);
      hi = std::max(hi, m->summary.max);
    }
    data << "\n";  // two blank lines in all: the next index
    med << "\n\n";
  }
  data.close();
  med.close();
  std::ostringstream g;
  g << kTerminal << "set output " << gq(stem + ".png") << "\n"
    << "set title " << gq(first.metric + " (" + first.role + ") by ranks, one violin per run") << "\n"
    << "set xlabel 'ranks recording the metric'\nset ylabel " << gq(first.metric + " [" + du.label + "]") << "\n"
    << "set key outside right top\nset grid ytics\nset style fill transparent solid 0.45 border\n"
    << "set xrange [-0.6:" << double(xs.size()) - 0.4 << "]\nset xtics (";
  for (size_t i = 0; i < xs.size(); ++i) g << (i ? ", " : "") << "'" << xs[i] << "' " << i;
  g << ")\n";
  if (lo > 0 && hi / lo > 100) g << "set logscale y\n";
  g << "plot ";
  for (size_t s = 0; s < labels.size(); ++s)
    g << (s ? ", " : "") << gq(stem + ".dat") << " index " << s << " using 1:($2*" << du.factor << ") with filledcurves closed lc " << s + 1
      << " title " << gq(labels[s]) << ", " << gq(stem + "_median.dat") << " index " << s << " using 1:($2*" << du.factor
      << ") with points pt 7 ps 0.8 lc rgb 'black' notitle";
  g << "\n";
  std::ofstream(dir / (stem + ".gp")) << g.str();
  plots.push_back({first.metric + " (" + first.role + "): distribution by ranks", dir / (stem + ".png"), section});
}

void histogram(const std::vector<const MetricStats*>& group, const ExperimentStats& e, const ResultsDb& db, const fs::path& dir,
               std::vector<Plot>& plots, Plot::Section section) {
  const MetricStats& first = *group.front();
  const DisplayUnit du = unit_of(group);
  double lo = INFINITY, hi = -INFINITY;
  std::map<int64_t, size_t> series;  // run -> index
  for (auto* m : group) {
    lo = std::min(lo, m->summary.min);
    hi = std::max(hi, m->summary.max);
    series.emplace(m->run_id, series.size());
  }
  const int bins = 50;
  // Data spanning orders of magnitude get log-spaced bins (and a log axis), else nearly all land in one.
  const bool logx = lo > 0 && hi / lo > 100;
  auto pos = [&](double v) { return logx ? std::log(v) : v; };
  auto at = [&](double p) { return logx ? std::exp(p) : p; };
  double width = hi > lo ? (pos(hi) - pos(lo)) / bins : 1.0;
  std::vector<std::vector<uint64_t>> counts(series.size(), std::vector<uint64_t>(bins, 0));
  db.for_each_value(first.role, first.metric, first.unit, [&](int64_t run, double v) {
    auto it = series.find(run);
    if (it == series.end()) return;
    int b = std::clamp(int((pos(v) - pos(lo)) / width), 0, bins - 1);
    ++counts[it->second][size_t(b)];
  });
  std::string stem = "hist_" + file_stem(e, first.role, first.metric, first.unit);
  std::ofstream data(dir / (stem + ".dat"));
  for (auto* m : group) {
    size_t s = series.at(m->run_id);
    for (int b = 0; b < bins; ++b) data << at(pos(lo) + (b + 0.5) * width) << " " << counts[s][size_t(b)] << "\n";
    data << "\n\n";
  }
  data.close();
  std::ostringstream g;
  g << kTerminal << "set output " << gq(stem + ".png") << "\n"
    << "set title " << gq(first.metric + " (" + first.role + "): histogram per run, dashed line = median") << "\n"
    << "set xlabel " << gq(first.metric + " [" + du.label + "]") << "\nset ylabel 'samples'\nset key outside right top\nset grid\n"
    << (logx ? "set logscale x\n" : "");
  for (auto* m : group)
    g << "set arrow from " << m->summary.median * du.factor << ", graph 0 to " << m->summary.median * du.factor << ", graph 1 nohead dt 2 lc "
      << series.at(m->run_id) + 1 << "\n";
  g << "plot ";
  for (auto* m : group) {
    size_t s = series.at(m->run_id);
    g << (s ? ", " : "") << gq(stem + ".dat") << " index " << s << " using ($1*" << du.factor << "):2 with steps lw 1.5 lc " << s + 1
      << " title " << gq(series_label(*m, e.varied));
  }
  g << "\n";
  std::ofstream(dir / (stem + ".gp")) << g.str();
  plots.push_back({first.metric + " (" + first.role + "): histograms", dir / (stem + ".png"), section});
}

// One data block per line (points sorted by x) in <stem>.dat, and the plot clauses that draw them, y scaled by
// `factor` (the display unit), one colour and legend entry per line.
using Lines = std::map<std::string, std::vector<std::pair<double, double>>, NaturalLess>;  // legends in numeric order
std::string write_line_series(const fs::path& dir, const std::string& stem, Lines& lines, double factor) {
  std::ofstream data(dir / (stem + ".dat"));
  std::ostringstream clauses;
  size_t i = 0;
  for (auto& [label, pts] : lines) {
    std::sort(pts.begin(), pts.end());
    for (auto& [x, y] : pts) data << x << " " << y << "\n";
    data << "\n\n";
    clauses << (i ? ", " : "") << gq(stem + ".dat") << " index " << i << " using 1:($2*" << factor << ") with linespoints lw 2 pt 7 lc "
            << i + 1 << " title " << gq(label);
    ++i;
  }
  return clauses.str();
}

bool is_size_param(const std::string& n) {
  return n.find("bytes") != std::string::npos || n.find("size") != std::string::npos || n == "len" ||
         n.find("_len") != std::string::npos;
}

void bandwidth(const std::vector<const MetricStats*>& group, const ExperimentStats& e, const fs::path& dir, std::vector<Plot>& plots) {
  const MetricStats& first = *group.front();
  if (first.unit.find("bytes/s") == std::string::npos && first.unit.find("B/s") == std::string::npos) return;
  const DisplayUnit du = unit_of(group);
  std::string size_param;
  for (auto& v : e.varied)
    if (is_size_param(v)) size_param = v;
  if (size_param.empty()) return;
  auto axis = [&](const MetricStats& m) {
    for (auto& [k, v] : m.parameters)
      if (k == size_param) return v;
    return std::string();
  };
  auto params = series_params(group, e.varied, axis);
  params.erase(std::remove(params.begin(), params.end(), size_param), params.end());
  Lines lines;
  for (auto* m : group)
    if (auto x = parse_double(axis(*m))) lines[series_label(*m, params)].emplace_back(*x, m->summary.median);
  std::string stem = "bandwidth_" + file_stem(e, first.role, first.metric, first.unit);
  const std::string clauses = write_line_series(dir, stem, lines, du.factor);
  std::ostringstream g;
  g << kTerminal << "set output " << gq(stem + ".png") << "\n"
    << "set title " << gq("median " + first.metric + " (" + first.role + ") by " + size_param) << "\n"
    << "set xlabel " << gq(size_param + " [bytes]") << "\nset ylabel " << gq(first.metric + " [" + du.label + "]") << "\n"
    << "set logscale x 2\nset format x '%.0f'\nset key outside right top\nset grid\nplot ";  // 1048576, not 1.04858e+06
  g << clauses << "\n";
  std::ofstream(dir / (stem + ".gp")) << g.str();
  plots.push_back({"bandwidth: median " + first.metric + " by " + size_param, dir / (stem + ".png"), Plot::Section::Headline, 2});
}

// Headline: the metric's median against the ranks recording it (the clients), one line per combination of the
// other varied parameters. A time metric with a varied size parameter is shown as the aggregate bandwidth those
// ranks moved, ranks x size / median time (SmartSim-Scaling's throughput plots), one line per size.
void scaling(const std::vector<const MetricStats*>& group, const ExperimentStats& e, const fs::path& dir, std::vector<Plot>& plots) {
  const MetricStats& first = *group.front();
  std::set<int> ranks;
  for (auto* m : group) ranks.insert(m->ranks);
  if (ranks.size() < 2) return;  // nothing scales: the distributions say it all
  std::string size_param;
  for (auto& v : e.varied)
    if (is_size_param(v)) size_param = v;
  const bool aggregate = is_time_unit(first.unit) && !size_param.empty();
  auto params = series_params(group, e.varied, [](const MetricStats& m) { return std::to_string(m.ranks); });
  Lines lines;
  std::vector<double> ys;
  for (auto* m : group) {
    double y = m->summary.median;
    if (aggregate) {
      std::optional<double> size;
      for (auto& [k, v] : m->parameters)
        if (k == size_param) size = parse_double(v);
      if (!size || !(y > 0)) continue;
      y = double(m->ranks) * *size / (y * seconds_per(first.unit));
    }
    lines[series_label(*m, params)].emplace_back(double(m->ranks), y);
    ys.push_back(y);
  }
  if (ys.empty()) return;
  std::sort(ys.begin(), ys.end());
  const DisplayUnit du = aggregate ? display_unit("bytes/s", ys[ys.size() / 2]) : unit_of(group);
  const std::string stem = (aggregate ? "aggregate_bandwidth_" : "scaling_") + file_stem(e, first.role, first.metric, first.unit);
  const std::string clauses = write_line_series(dir, stem, lines, du.factor);
  const std::string title = aggregate ? "aggregate bandwidth from " + first.metric + " (" + first.role + "): ranks x " + size_param + " / median"
                                      : "median " + first.metric + " (" + first.role + ") by ranks";
  std::ostringstream g;
  g << kTerminal << "set output " << gq(stem + ".png") << "\nset title " << gq(title) << "\n"
    << "set xlabel 'ranks recording the metric'\nset ylabel "
    << gq((aggregate ? std::string("aggregate bandwidth") : "median " + first.metric) + " [" + du.label + "]") << "\n"
    << (*ranks.rbegin() >= 4 * *ranks.begin() ? "set logscale x 2\n" : "")
    << (ys.front() > 0 && ys.back() / ys.front() > 100 ? "set logscale y\n" : "")  // small and large sizes on one plot
    << "set xtics (";
  size_t t = 0;
  for (int r : ranks) g << (t++ ? ", " : "") << "'" << r << "' " << r;
  g << ")\nset key outside right top\nset grid\nplot ";
  g << clauses << "\n";
  std::ofstream(dir / (stem + ".gp")) << g.str();
  plots.push_back({title, dir / (stem + ".png"), Plot::Section::Headline, aggregate ? 0 : 1});
}

// The gnuplot expression of a fitted single-parameter model in x, scaled by `factor` (the display unit).
std::string gnuplot_model(const SingleParameterModel& m, double factor) {
  char buf[256];
  std::snprintf(buf, sizeof buf, "(%.17g + %.17g * x**(%d.0/%d.0) * (log(x)/log(2.0))**%d) * %.17g", m.c0, m.c1, m.term.num, m.term.den,
                m.term.log, factor);
  return buf;
}

bool all_powers_of_two(const std::set<double>& xs) {
  return std::all_of(xs.begin(), xs.end(), [](double x) { return x >= 1 && std::fabs(std::exp2(std::round(std::log2(x))) - x) < 1e-9 * x; });
}

// Headline: the figure against each varied numeric parameter (what a sweep is run for): the run-level median (the
// median of the runs' medians, as compare uses) with the across-runs interval as error bars, one line per
// combination of the other varied parameters (past 8 lines: one panel each), log axes where the values span 8x or
// more (powers of two on 2^k ticks), the fitted model drawn where there is one.
void swept(const std::tuple<std::string, std::string, std::string>& key, const std::vector<const AcrossRuns*>& rows, const std::string& param,
           const ExperimentStats& e, const std::vector<FigureModel>& models, const fs::path& dir, std::vector<Plot>& plots) {
  const auto& [role, metric, unit] = key;
  using Series = std::vector<std::pair<std::string, std::string>>;
  std::map<Series, std::vector<std::array<double, 4>>> series;  // x, median, low, high
  std::set<double> xs;
  std::vector<double> ys;
  for (auto* f : rows) {
    Series others;
    std::optional<double> x;
    for (auto& [k, v] : f->parameters) {
      if (k == param) x = parse_double(v);
      else if (std::count(e.varied.begin(), e.varied.end(), k)) others.emplace_back(k, v);
    }
    if (!x) return;  // not numeric for this figure
    series[others].push_back({*x, f->runs.median, f->runs.low, f->runs.high});
    xs.insert(*x);
    ys.push_back(f->runs.median);
  }
  if (xs.size() < 2) return;
  std::sort(ys.begin(), ys.end());
  const DisplayUnit du = display_unit(unit, ys[ys.size() / 2]);
  const std::string stem = "swept_" + file_stem(e, role, metric, unit) + "_by_" + filename_safe(param, 40);
  std::ofstream data(dir / (stem + ".dat"));
  std::vector<std::string> labels;
  for (auto& [others, pts] : series) {
    std::sort(pts.begin(), pts.end());
    for (auto& p : pts) data << p[0] << " " << p[1] << " " << p[2] << " " << p[3] << "\n";
    data << "\n\n";
    std::string label;
    for (auto& [k, v] : others) label += (label.empty() ? "" : ", ") + k + "=" + v;
    labels.push_back(label.empty() ? "all runs" : label);
  }
  data.close();
  const double lo = *xs.begin(), hi = *xs.rbegin();
  const bool logx = lo > 0 && hi / lo >= 8, logy = ys.front() > 0 && ys.back() / ys.front() >= 8;
  std::ostringstream g;
  g << kTerminal << "set output " << gq(stem + ".png") << "\n"
    << "set xlabel " << gq(param) << "\nset ylabel " << gq(metric + " [" + du.label + "], median of runs, bars: across runs") << "\n"
    << "set key outside right top\nset grid\nset samples 400\n";
  if (logx) g << "set logscale x 2\n";
  // Ticks at the swept values themselves (2^k for powers of two) while they are few enough to read.
  if (xs.size() <= 16) {
    const bool pow2 = all_powers_of_two(xs);
    g << "set xtics (";
    size_t t = 0;
    for (double x : xs) {
      char label[48];
      if (pow2) std::snprintf(label, sizeof label, "2^%d", int(std::lround(std::log2(x))));
      else std::snprintf(label, sizeof label, "%g", x);
      g << (t++ ? ", " : "") << gq(label) << " " << x;
    }
    g << ")\n";
  }
  if (logy) g << "set logscale y 10\n";
  g << "set xrange [" << lo / (logx ? 1.15 : 1) - (logx ? 0 : (hi - lo) * 0.03) << ":" << hi * (logx ? 1.15 : 1) + (logx ? 0 : (hi - lo) * 0.03) << "]\n";
  const bool panels = labels.size() > 8;
  if (panels) {
    const size_t cols = size_t(std::ceil(std::sqrt(double(labels.size()))));
    g << "set terminal pngcairo size " << std::min<size_t>(2400, 400 * cols) << "," << std::min<size_t>(2400, 320 * ((labels.size() + cols - 1) / cols))
      << " noenhanced font ',9'\nset output " << gq(stem + ".png") << "\nset multiplot layout " << (labels.size() + cols - 1) / cols << "," << cols
      << " title " << gq("median " + metric + " (" + role + ") by " + param) << "\nunset key\n";
  } else {
    g << "set title " << gq("median " + metric + " (" + role + ") by " + param) << "\nplot ";
  }
  size_t i = 0;
  for (auto& [others, pts] : series) {
    const FigureModel* fm = nullptr;
    for (auto& m : models)
      if (!m.two && m.single.fitted && m.role == role && m.metric == metric && m.unit == unit && m.single.param == param && m.series == others) fm = &m;
    std::ostringstream clause;
    clause << gq(stem + ".dat") << " index " << i << " using 1:($2*" << du.factor << "):($3*" << du.factor << "):($4*" << du.factor
           << ") with yerrorlines lw 2 pt 7 lc " << i % 8 + 1 << " title " << gq(labels[i]);
    if (fm) clause << ", " << gnuplot_model(fm->single, du.factor) << " with lines dt 2 lw 1.5 lc " << i % 8 + 1 << " title "
                   << gq("model: " + fm->single.formula());
    if (panels) g << "set title " << gq(labels[i]) << "\nplot " << clause.str() << "\n";
    else g << (i ? ", " : "") << clause.str();
    ++i;
  }
  g << (panels ? "unset multiplot\n" : "\n");
  std::ofstream(dir / (stem + ".gp")) << g.str();
  plots.push_back({"median " + metric + " (" + role + ") by " + param, dir / (stem + ".png"), Plot::Section::Headline, -1});
}

// Speedup against the smallest count (csv/scaling.csv's rows), one line per combination of the other varied values,
// the ideal (count / smallest count) dashed.
void speedup(const std::vector<ScalingRow>& rows, const fs::path& dir, std::vector<Plot>& plots) {
  // role, metric, unit, param, mode
  std::map<std::tuple<std::string, std::string, std::string, std::string, std::string>, Lines> figures;
  std::map<std::pair<std::string, std::string>, std::set<std::string>> units;  // (role, metric) -> its units
  double top = 0;
  for (auto& r : rows) {
    std::string label;
    for (auto& [k, v] : r.series) label += (label.empty() ? "" : ", ") + k + "=" + v;
    figures[{r.role, r.metric, r.unit, r.param, r.mode}][label.empty() ? "all runs" : label].emplace_back(r.count, r.speedup);
    units[{r.role, r.metric}].insert(r.unit);
    top = std::max(top, r.count / r.base_count);
  }
  for (auto& [key, lines] : figures) {
    const auto& [role, metric, unit, param, mode] = key;
    const std::string stem = "speedup_" + file_stem(role, metric, unit, units[{role, metric}].size() > 1) + "_by_" + filename_safe(param, 40);
    double x0 = INFINITY;
    for (auto& [label, pts] : lines)
      for (auto& p : pts) x0 = std::min(x0, p.first);
    const std::string clauses = write_line_series(dir, stem, lines, 1.0);
    std::ostringstream g;
    g << kTerminal << "set output " << gq(stem + ".png") << "\nset title " << gq(mode + " scaling of " + metric + " (" + role + ") by " + param)
      << "\nset xlabel " << gq(param) << "\nset ylabel " << gq("speedup against " + param + "=" + model_number(x0))
      << "\nset key outside right top\nset grid\n" << (top >= 8 ? "set logscale xy 2\n" : "") << "plot " << clauses << ", x / " << x0
      << " with lines dt 2 lc rgb 'black' title 'ideal'\n";
    std::ofstream(dir / (stem + ".gp")) << g.str();
    plots.push_back({mode + " scaling: speedup of " + metric + " (" + role + ") by " + param, dir / (stem + ".png"), Plot::Section::Headline, 0});
  }
}

}  // namespace

std::vector<Plot> draw_plots(const ExperimentStats& exp, const ResultsDb& db, const fs::path& dir, std::vector<std::string>& warnings,
                             const std::vector<FigureModel>& models, const std::vector<ScalingRow>& speedups) {
  std::vector<Plot> plots;
  if (run_process({"gnuplot", "--version"}, {}, 30).exit_code != 0) {
    warnings.push_back("gnuplot is not installed: no plots (scripts/install-deps.sh installs gnuplot-nox)");
    return plots;
  }
  fs::create_directories(dir);
  // What a sweep is run for first: each figure against each varied numeric parameter.
  std::map<std::tuple<std::string, std::string, std::string>, std::vector<const AcrossRuns*>> figures;
  const auto across = across_runs(exp);
  for (auto& f : across)
    if (!f.setup_cost) figures[{f.role, f.metric, f.unit}].push_back(&f);
  // What the runs cost (resource.*) against what was swept, in a section of its own after the headline.
  for (auto& [key, rows] : figures)
    for (auto& param : exp.varied) {
      const size_t before = plots.size();
      swept(key, rows, param, exp, models, dir, plots);
      if (is_resource_metric(std::get<1>(key)))
        for (size_t k = before; k < plots.size(); ++k) plots[k].section = Plot::Section::Resources;
    }
  speedup(speedups, dir, plots);
  for (auto& [key, group] : by_metric(exp)) {
    if (is_resource_metric(std::get<1>(key))) continue;  // one figure per rank and invocation: the tables say the rest
    if (declared_setup_cost(group)) {
      // One sample per rank (setup costs, per-rank totals): a table in the report; their distribution only where
      // a run has ranks enough to have one (a violin of one or two points says nothing).
      const bool many = std::any_of(group.begin(), group.end(), [](const MetricStats* m) { return m->summary.count >= 8; });
      if (many && group.size() > kMaxPerRunSeries)
        warnings.push_back(std::get<1>(key) + " (" + std::get<0>(key) + "): " + std::to_string(group.size()) + " runs: per-run violins and "
                           "histograms of a setup cost are drawn up to " + std::to_string(kMaxPerRunSeries) + " runs; the report's table holds every run");
      else if (many) {
        violin(group, exp, dir, plots, Plot::Section::Bookkeeping);
        histogram(group, exp, db, dir, plots, Plot::Section::Bookkeeping);
      }
      continue;
    }
    scaling(group, exp, dir, plots);
    bandwidth(group, exp, dir, plots);
    // A violin and a histogram per run: past kMaxPerRunSeries runs they are unreadable and gnuplot takes a minute
    // (10,000 runs: 67 s of 68): left out with a warning that names the metric; the headline plots hold every run.
    if (group.size() > kMaxPerRunSeries) {
      warnings.push_back(std::get<1>(key) + " (" + std::get<0>(key) + "): " + std::to_string(group.size()) + " runs: per-run violins and "
                         "histograms are drawn up to " + std::to_string(kMaxPerRunSeries) + " runs; the plots against what was swept "
                         "and csv/statistics.csv hold every run");
      continue;
    }
    violin(group, exp, dir, plots, Plot::Section::Distribution);
    histogram(group, exp, db, dir, plots, Plot::Section::Distribution);
  }
  run_gnuplot(plots, warnings);
  std::stable_sort(plots.begin(), plots.end(), [](const Plot& a, const Plot& b) { return std::tie(a.section, a.order) < std::tie(b.section, b.order); });
  return plots;
}

std::string gnuplot_preamble() { return kTerminal; }
std::string gnuplot_quoted(const std::string& s) { return gq(s); }

std::vector<std::string> run_gnuplot_scripts(const std::vector<fs::path>& scripts) {
  auto run = [&](size_t begin, size_t end) {
    std::vector<std::string> argv{"gnuplot"};
    for (size_t i = begin; i < end; ++i) argv.push_back(scripts[i].string());
    return run_process(argv, scripts[begin].parent_path(), 120 + double(end - begin));  // a share of many plots takes longer
  };
  std::vector<std::string> failed(scripts.size());
  const size_t shares = std::min(scripts.size(), usable_cpus());
  parallel_for(shares, [&](size_t s) {
    const size_t begin = scripts.size() * s / shares, end = scripts.size() * (s + 1) / shares;
    if (run(begin, end).exit_code == 0) return;
    for (size_t i = begin; i < end; ++i)
      if (auto r = run(i, i + 1); r.exit_code != 0) failed[i] = "gnuplot failed on " + scripts[i].string() + ": " + trim(r.err);
  });
  return failed;
}

}  // namespace fanout
