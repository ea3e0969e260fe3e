#include "results/html_report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <set>
#include <sstream>
#include <tuple>

#include "common/clock.h"
#include "common/files.h"
#include "results/display_unit.h"
#include "results/metric_stats.h"
#include "results/models.h"
#include "results/plots.h"

namespace fanout {

namespace fs = std::filesystem;

std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

std::string html_page_head(const std::string& title) {
  return "<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>" + html_escape(title) + "</title>\n"
         "<style>body{font-family:sans-serif;margin:2em;max-width:1400px}table{border-collapse:collapse;margin:1em 0}"
         "td,th{border:1px solid #ccc;padding:2px 6px;text-align:right}th{background:#eee}td.l,th.l{text-align:left}"
         "img{max-width:100%;border:1px solid #ddd;margin:0.5em 0}</style></head>\n<body>\n";
}

// Marks the page once every plot has decoded, so a headless browser check can tell rendered from present.
std::string html_page_end() {
  return "<script>window.addEventListener('load',function(){var i=document.querySelectorAll('img.plot'),n=0;"
         "i.forEach(function(e){if(e.complete&&e.naturalWidth>0)n++;});document.body.setAttribute('data-plots-rendered',n);"
         "if(i.length)document.body.setAttribute('data-first-plot',i[0].alt);});"
         "</script>\n</body></html>\n";
}

std::string base64(const std::string& in) {
  static const char* t = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  size_t i = 0;
  for (; i + 2 < in.size(); i += 3) {
    uint32_t v = (uint8_t(in[i]) << 16) | (uint8_t(in[i + 1]) << 8) | uint8_t(in[i + 2]);
    out += t[v >> 18];
    out += t[(v >> 12) & 63];
    out += t[(v >> 6) & 63];
    out += t[v & 63];
  }
  if (i + 1 == in.size()) {
    uint32_t v = uint8_t(in[i]) << 16;
    out += t[v >> 18];
    out += t[(v >> 12) & 63];
    out += "==";
  } else if (i + 2 == in.size()) {
    uint32_t v = (uint8_t(in[i]) << 16) | (uint8_t(in[i + 1]) << 8);
    out += t[v >> 18];
    out += t[(v >> 12) & 63];
    out += t[(v >> 6) & 63];
    out += '=';
  }
  return out;
}

namespace {

std::string num(double v) {
  if (std::isnan(v)) return "";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

using MetricGroups = std::map<std::tuple<std::string, std::string, std::string>, std::vector<const MetricStats*>>;

// A run's (or a permutation's) values of the varied parameters, one table cell each (empty where it has no such
// parameter).
void varied_cells(const ExperimentStats& exp, const std::vector<std::pair<std::string, std::string>>& parameters, std::ostream& h) {
  for (auto& v : exp.varied) {
    std::string val;
    for (auto& [k, x] : parameters)
      if (k == v) val = x;
    h << "<td>" << html_escape(val) << "</td>";
  }
}

// The first screen's table: one row per run, its varied parameters, and the medians of up to six metrics (those
// the study measures first, then the setup costs their plugins declared), each in its column's display unit.
void write_medians_table(const ExperimentStats& exp, const MetricGroups& groups, std::ostream& h) {
  constexpr size_t kMaxRows = 30, kMaxMetrics = 6;
  std::vector<std::pair<const MetricGroups::key_type*, DisplayUnit>> cols;
  // What the study measures first, then declared setup costs.
  std::vector<const MetricGroups::value_type*> order;
  for (auto& g : groups)
    if (!declared_setup_cost(g.second)) order.push_back(&g);
  for (auto& g : groups)
    if (declared_setup_cost(g.second)) order.push_back(&g);
  for (auto* g : order) {
    const auto& [key, rows] = *g;
    if (cols.size() == kMaxMetrics) break;
    double largest = 0;  // the column's unit fits its largest value: 16 us and 0.07 us, not 1.599e+04 ns
    for (auto* m : rows) largest = std::max(largest, std::abs(m->summary.median));
    cols.emplace_back(&key, display_unit(std::get<2>(key), largest));
  }
  std::vector<int64_t> runs;
  std::map<int64_t, std::map<const MetricGroups::key_type*, const MetricStats*>> cell;
  std::map<int64_t, const MetricStats*> any;
  for (auto& [key, du] : cols)
    for (auto* m : groups.at(*key)) {
      if (!any.count(m->run_id)) runs.push_back(m->run_id), any[m->run_id] = m;
      cell[m->run_id][key] = m;
    }
  if (cols.empty()) return;
  std::sort(runs.begin(), runs.end());
  h << "<h2 id=\"medians\">Medians</h2>\n<table class=\"medians\"><tr>";
  for (auto& v : exp.varied) h << "<th>" << html_escape(v) << "</th>";
  for (auto& [key, du] : cols) h << "<th>" << html_escape(std::get<1>(*key)) << " [" << html_escape(du.label) << "]</th>";
  h << "</tr>\n";
  for (size_t i = 0; i < runs.size() && i < kMaxRows; ++i) {
    h << "<tr>";
    varied_cells(exp, any[runs[i]]->parameters, h);
    for (auto& [key, du] : cols) {
      auto it = cell[runs[i]].find(key);
      h << "<td>" << (it == cell[runs[i]].end() ? "" : num(it->second->summary.median * du.factor)) << "</td>";
    }
    h << "</tr>\n";
  }
  h << "</table>\n";
  if (runs.size() > kMaxRows) h << "<p>" << runs.size() - kMaxRows << " more run(s): see Statistics below and csv/statistics.csv.</p>\n";
}

// With --repeat (several runs of a permutation): per permutation and metric the median of the run medians, the
// interval across the runs and the runs and samples it rests on (metric_stats.h across_runs). Nothing otherwise.
void write_across_runs_table(const ExperimentStats& exp, const std::vector<AcrossRuns>& rows, std::ostream& h) {
  if (std::none_of(rows.begin(), rows.end(), [](const AcrossRuns& a) { return a.runs.runs > 1; })) return;
  constexpr size_t kMaxRows = 60;
  h << "<h2 id=\"across-runs\">Across runs</h2>\n<p>Each permutation's runs (--repeat) together: the median of the runs' medians, "
       "the order-statistic interval across the runs (its coverage of the median; [min, max] below 6 runs), and the runs and "
       "samples the figure rests on. What results compare decides on.</p>\n<table class=\"across\"><tr>";
  for (auto& v : exp.varied) h << "<th>" << html_escape(v) << "</th>";
  h << "<th class=\"l\">metric</th><th>median</th><th>low</th><th>high</th><th>coverage</th><th>runs</th><th>samples</th></tr>\n";
  for (size_t i = 0; i < rows.size() && i < kMaxRows; ++i) {
    const AcrossRuns& a = rows[i];
    const DisplayUnit du = display_unit(a.unit, std::max(std::abs(a.runs.low), std::abs(a.runs.high)));
    h << "<tr>";
    varied_cells(exp, a.parameters, h);
    h << "<td class=\"l\">" << html_escape(a.role + ":" + a.metric) << " [" << html_escape(du.label) << "]</td><td>" << num(a.runs.median * du.factor)
      << "</td><td>" << num(a.runs.low * du.factor) << "</td><td>" << num(a.runs.high * du.factor) << "</td><td>" << num(a.runs.coverage * 100)
      << " %</td><td>" << a.runs.runs << "</td><td>" << a.samples << "</td></tr>\n";
  }
  h << "</table>\n";
  if (rows.size() > kMaxRows) h << "<p>" << rows.size() - kMaxRows << " more: csv/across_runs.csv.</p>\n";
}

// Declared setup costs: one row per run and metric, its varied parameters, the
// ranks, and the median and slowest rank in the metric's display unit. False when there are none.
bool write_setup_table(const ExperimentStats& exp, const MetricGroups& groups, const char* id, const char* title, const char* note, std::ostream& h) {
  bool any = false;
  for (auto& [key, rows] : groups) {
    if (!declared_setup_cost(rows)) continue;
    if (!any) {
      h << "<h2 id=\"" << id << "\">" << title << "</h2>\n<p>" << note << "</p>\n<table class=\"setup\"><tr><th class=\"l\">metric</th>";
      for (auto& v : exp.varied) h << "<th>" << html_escape(v) << "</th>";
      h << "<th>ranks</th><th>median</th><th>slowest rank</th></tr>\n";
    }
    any = true;
    double largest = 0;
    for (auto* m : rows) largest = std::max(largest, std::abs(m->summary.max));
    const DisplayUnit du = display_unit(std::get<2>(key), largest);
    for (auto* m : rows) {
      h << "<tr><td class=\"l\">" << html_escape(std::get<1>(key)) << " (" << html_escape(std::get<0>(key)) << ")</td>";
      varied_cells(exp, m->parameters, h);
      h << "<td>" << m->ranks << "</td><td>" << num(m->summary.median * du.factor) << " " << html_escape(du.label) << "</td><td>"
        << num(m->summary.max * du.factor) << " " << html_escape(du.label) << "</td></tr>\n";
    }
  }
  if (any) h << "</table>\n";
  return any;
}

}  // namespace

void write_html_report(const ExperimentStats& exp, const std::vector<Plot>& plots, const fs::path& file, const std::vector<FigureModel>& models) {
  std::ostringstream h;
  h << html_page_head("fanout: " + exp.name) << "<h1>Experiment " << html_escape(exp.name) << "</h1>\n<p id=\"summary\">Runs:";
  for (auto& [status, n] : exp.runs_by_status) h << " " << n << " " << html_escape(status) << ";";
  std::set<int64_t> superseded;
  for (auto& m : exp.superseded) superseded.insert(m.run_id);
  if (!superseded.empty())
    h << " " << superseded.size() << " attempt(s) that did not complete, of permutations that later did (cancelled before a resume, "
      << "failed before a retry), are left out of the statistics and plots (runs.csv lists them);";
  h << " generated " << html_escape(iso8601_utc(wall_ns())) << ". Statistics exclude warmup samples; the median's 95 % "
    << "interval is a bootstrap (order-statistic interval above 1000 samples); outliers are samples further than 3 scaled MADs "
       "from the median.</p>\n";
  if (!exp.varied.empty()) {
    h << "<p>Varied parameters:";
    for (auto& v : exp.varied) h << " <code>" << html_escape(v) << "</code>";
    h << "</p>\n";
  }
  // Sections in the order a reader wants them: what the study is for, then distributions, then setup costs.
  struct Section {
    Plot::Section kind;
    const char *id, *title, *note;
  };
  const Section sections[] = {
      {Plot::Section::Headline, "headline", "What was swept", "each figure's median of the runs' medians against each varied parameter, bars across runs, the fitted scaling model dashed; then medians against the ranks recording them and aggregate bandwidth where a size was varied"},
      {Plot::Section::Resources, "resources", "Resources", "what the runs cost, against each varied parameter: every rank's resource.* figures (peak RSS, user and system CPU, context switches, major faults, storage bytes; exec: each invocation of the program with the children it waited for)"},
      {Plot::Section::Distribution, "distributions", "Distributions", "every sample of each run: violins by ranks, histograms per run"},
      {Plot::Section::Bookkeeping, "bookkeeping", "Setup costs", "costs paid once per run that their plugin declared so (rendezvous, database start): a table, one row per run; their distributions where a run has 8 ranks or more"}};
  MetricGroups groups;
  for (auto& m : exp.stats) groups[{m.role, m.metric, m.unit}].push_back(&m);
  auto anchor = [](const std::string& role, const std::string& metric) { return "stats-" + html_escape(role) + "-" + html_escape(metric); };
  // With repeats, the per-permutation table (Across runs) says what the per-run one would, once per permutation
  // instead of once per run: the page's first screen keeps room for the plots.
  const auto across = across_runs(exp);
  if (std::none_of(across.begin(), across.end(), [](const AcrossRuns& a) { return a.runs.runs > 1; })) write_medians_table(exp, groups, h);
  write_across_runs_table(exp, across, h);
  h << "<nav id=\"toc\"><h2>Contents</h2><ol>";
  const bool setup_costs = std::any_of(groups.begin(), groups.end(), [](const auto& g) { return declared_setup_cost(g.second); });
  for (auto& sec : sections)
    if ((sec.kind == Plot::Section::Bookkeeping && setup_costs) ||
        std::any_of(plots.begin(), plots.end(), [&](const Plot& p) { return p.section == sec.kind; }))
      h << "<li><a href=\"#" << sec.id << "\">" << sec.title << "</a></li>";
  if (!models.empty()) h << "<li><a href=\"#models\">Scaling models</a></li>";
  h << "<li><a href=\"#statistics\">Statistics</a><ol>";
  for (auto& [key, rows] : groups)
    h << "<li><a href=\"#" << anchor(std::get<0>(key), std::get<1>(key)) << "\">" << html_escape(std::get<1>(key)) << " ("
      << html_escape(std::get<0>(key)) << ")</a></li>";
  h << "</ol></li></ol></nav>\n";
  for (auto& sec : sections) {
    bool any = false;
    // The models right after the headline plots: what the plots' dashed curves are, and why a figure has none.
    if (sec.kind == Plot::Section::Distribution && !models.empty()) {
      h << "<h2 id=\"models\">Scaling models</h2>\n<p>Extra-P's performance model normal form with one term, c0 + c1 * p^i * "
           "log2(p)^j, fitted on the run-level medians, the term chosen by leave-one-out cross-validation (SMAPE); "
           "<code>fanout results model</code> prints the same, csv/models.csv holds it.</p>\n<pre class=\"models\">";
      std::ostringstream text;
      print_models(models, std::nullopt, text);
      h << html_escape(text.str()) << "</pre>\n";
    }
    if (sec.kind == Plot::Section::Bookkeeping) any = write_setup_table(exp, groups, sec.id, sec.title, sec.note, h);
    for (auto& p : plots) {
      if (p.section != sec.kind) continue;
      if (!any) h << "<h2 id=\"" << sec.id << "\">" << sec.title << "</h2>\n<p>" << sec.note << "</p>\n";
      any = true;
      h << "<figure><figcaption>" << html_escape(p.title) << "</figcaption><img class=\"plot\" alt=\"" << html_escape(p.title)
        << "\" src=\"data:image/png;base64," << base64(read_file(p.png)) << "\"></figure>\n";
    }
  }
  if (plots.empty()) h << "<p>No plots (see the warnings of process_scaling_results).</p>\n";
  h << "<h2 id=\"statistics\">Statistics</h2>\n";
  for (auto& [key, rows] : groups) {
    auto& [role, metric, unit] = key;
    std::vector<double> medians;
    for (auto* m : rows) medians.push_back(m->summary.median);
    std::sort(medians.begin(), medians.end());
    const DisplayUnit du = display_unit(unit, medians[medians.size() / 2]);
    auto shown = [&](double v) { return num(v * du.factor); };
    h << "<h3 id=\"" << anchor(role, metric) << "\">" << html_escape(metric) << " <small>(" << html_escape(role) << ", "
      << html_escape(du.label) << ")</small></h3>\n"
      << "<table class=\"stats\"><tr><th class=\"l\">run</th>";
    for (auto& v : exp.varied) h << "<th>" << html_escape(v) << "</th>";
    h << "<th>ranks</th><th>n</th><th>median</th><th>95% CI</th><th>p95</th><th>p99</th><th>mean</th><th>std</th><th>outliers</th></tr>\n";
    for (auto* m : rows) {
      h << "<tr><td class=\"l\">" << html_escape(m->session) << "</td>";
      varied_cells(exp, m->parameters, h);
      const Summary& s = m->summary;
      h << "<td>" << m->ranks << "</td><td>" << s.count << "</td><td>" << shown(s.median) << "</td><td>" << shown(s.median_ci_low)
        << " &ndash; " << shown(s.median_ci_high) << "</td><td>" << shown(s.p95) << "</td><td>" << shown(s.p99) << "</td><td>"
        << shown(s.mean) << "</td><td>" << shown(s.stddev) << "</td><td>" << s.outliers << "</td></tr>\n";
    }
    h << "</table>\n";
  }
  h << html_page_end();
  write_file_atomic(file, h.str());
}

}  // namespace fanout
