#include "results/history_report.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>

#include "common/clock.h"
#include "common/error.h"
#include "common/files.h"
#include "common/text.h"
#include "results/display_unit.h"
#include "results/models.h"  // first: html_report.h's and plots.h's defaults name FigureModel and ScalingRow
#include "results/html_report.h"
#include "results/metric_stats.h"
#include "results/plots.h"

namespace fanout {

namespace fs = std::filesystem;

namespace {

constexpr const char* kMarker = ".fanout-history";  // a dashboard folder fanout made, and may replace

template <typename Figure>  // a FigureSeries or a FigureChange: "metric (role) parameters"
std::string figure_name(const Figure& s) { return s.metric + " (" + s.role + ")" + (s.match.empty() ? "" : " " + s.match); }
std::string anchor(size_t i) { return "figure-" + std::to_string(i); }

std::string number(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.4g", v);
  return buf;
}

// One figure's series over the revisions: the median of each experiment's runs with the interval across them, the
// revisions as tick labels, a dashed line before each change's first point.
fs::path series_script(const HistoryChanges& h, const FigureSeries& s, size_t i, const fs::path& dir) {
  std::vector<double> sorted = s.median;
  std::sort(sorted.begin(), sorted.end());
  const DisplayUnit du = display_unit(s.unit, sorted[sorted.size() / 2]);
  const std::string stem = "series_" + std::to_string(i);
  std::ofstream data(dir / (stem + ".dat"));
  for (size_t k = 0; k < s.points.size(); ++k)
    data << s.points[k] << " " << s.median[k] * du.factor << " " << s.low[k] * du.factor << " " << s.high[k] * du.factor << "\n";
  data.close();
  std::ostringstream g;
  // Its own folder first: one gnuplot session draws the plots of many pages (a lab's dashboard).
  g << gnuplot_preamble() << "cd " << gnuplot_quoted(dir.string()) << "\n"
    << "set terminal pngcairo size 1200,500 noenhanced font ',10'\nset output " << gnuplot_quoted(stem + ".png")
    << "\nset title " << gnuplot_quoted(figure_name(s)) << "\nset ylabel " << gnuplot_quoted(s.metric + " [" + du.label + "], median of runs, bars: across runs")
    << "\nset grid\nunset key\nset xtics rotate by -45 font ',8'\nset xrange [-0.5:" << double(h.points.size()) - 0.5 << "]\n";
  g << "set xtics (";
  for (size_t p = 0; p < h.points.size(); ++p) g << (p ? ", " : "") << gnuplot_quoted(h.points[p].revision) << " " << p;
  g << ")\n";
  for (size_t c : s.changes) {
    const double x = double(s.points[c]) - 0.5;
    g << "set arrow from " << x << ", graph 0 to " << x << ", graph 1 nohead dt 2 lw 2 lc rgb 'red'\n";
  }
  g << "plot " << gnuplot_quoted(stem + ".dat") << " using 1:2:3:4 with yerrorlines lw 2 pt 7\n";
  const fs::path script = dir / (stem + ".gp");
  std::ofstream(script) << g.str();
  return script;
}


// The folder a dashboard goes to, checked: it and the two beside it this writes through (SITE.tmp, SITE.old) are
// fanout's, or absent (a user's `site.old` is never removed). Returns the staging folder, made, with the marker.
fs::path begin_site(const fs::path& out_arg, fs::path& out_dir) {
  out_dir = fs::absolute(out_arg).lexically_normal();  // gnuplot runs in the plots' folder
  if (out_dir.filename().empty()) out_dir = out_dir.parent_path();  // "site/"
  for (const fs::path& p : {out_dir, fs::path(out_dir.string() + ".tmp"), fs::path(out_dir.string() + ".old")})
    if (fs::exists(p) && !fs::exists(p / kMarker))
      throw UserError("--out " + out_arg.string() + ": " + p.string() + " exists and is not a dashboard fanout wrote: give a new folder");
  const fs::path staging = out_dir.string() + ".tmp";
  fs::remove_all(staging);
  fs::create_directories(staging);
  std::ofstream(staging / kMarker) << "written by fanout history report\n";
  return staging;
}

// Whole or absent: the old dashboard goes only once the new one is complete.
void finish_site(const fs::path& staging, const fs::path& out_dir) {
  const fs::path old = out_dir.string() + ".old";
  fs::remove_all(old);
  if (fs::exists(out_dir)) fs::rename(out_dir, old);
  fs::rename(staging, out_dir);
  fs::remove_all(old);
}

// One benchmark's page: its plots' scripts first (drawn later, with every page's, by one run_gnuplot_scripts).
struct Page {
  const HistoryChanges* h = nullptr;
  fs::path dir;
  std::vector<size_t> order;  // figures, then what the runs cost
  size_t figures = 0;
  std::vector<fs::path> scripts;
};

Page plan_page(const HistoryChanges& h, const fs::path& dir) {
  Page p;
  p.h = &h;
  p.dir = dir;
  fs::create_directories(dir / "plots");
  for (size_t i = 0; i < h.series.size(); ++i)
    if (!is_resource_metric(h.series[i].metric)) p.order.push_back(i);
  p.figures = p.order.size();
  for (size_t i = 0; i < h.series.size(); ++i)
    if (is_resource_metric(h.series[i].metric)) p.order.push_back(i);
  for (size_t i : p.order) p.scripts.push_back(series_script(h, h.series[i], i, dir / "plots"));
  return p;
}

std::string change_row(const FigureChange& c, const std::string& figure_link, const std::string& figure_text) {
  const DisplayUnit du = display_unit(c.unit, c.median_before);
  std::ostringstream row;
  row << "<td class=\"l\">" << html_escape(c.verdict) << "</td><td class=\"l\"><a href=\"" << figure_link << "\">" << html_escape(figure_text)
      << "</a></td><td class=\"l\">" << html_escape(c.before) << "</td><td class=\"l\">" << html_escape(c.after) << "</td><td>"
      << number(c.median_before * du.factor) << " " << html_escape(du.label) << "</td><td>" << number(c.median_after * du.factor) << " "
      << html_escape(du.label) << "</td><td>" << (std::isfinite(c.change_pct) ? number(c.change_pct) + " %" : "") << "</td><td>"
      << number(c.p_value) << "</td><td>" << (std::isfinite(c.shift_pct) ? number(c.shift_pct_low) + " .. " + number(c.shift_pct_high) + " %" : "")
      << "</td><td class=\"l\">" << html_escape(c.pairwise) << (c.agrees ? " (agrees)" : " (disagrees)") << "</td>";
  return row.str();
}

size_t figure_of(const HistoryChanges& h, const FigureChange& c) {
  size_t figure = 0;
  for (size_t i = 0; i < h.series.size(); ++i)
    if (h.series[i].role == c.role && h.series[i].metric == c.metric && h.series[i].unit == c.unit && h.series[i].match == c.match) figure = i;
  return figure;
}

void write_page(const Page& p, const std::vector<std::string>& failed, size_t first, const std::string& title, const std::string& up,
                std::vector<std::string>& warnings) {
  const HistoryChanges& h = *p.h;
  std::ostringstream page;
  page << html_page_head("fanout: " + title) << "<h1>" << html_escape(title) << "</h1>\n" << up << "<p id=\"points\">" << h.points.size()
       << " experiments, oldest first by " << (h.by_commit_time ? "their code's commit time" : "when they ran") << ":";
  for (auto& pt : h.points) page << " <code>" << html_escape(pt.revision) << "</code>";
  page << "; generated " << html_escape(iso8601_utc(wall_ns())) << ". Change points: E-Divisive means on each experiment's "
       << "run-level medians with a permutation test (docs/results.md, A benchmark over time).</p>\n";
  page << "<h2 id=\"changes\">Changes, newest first</h2>\n";
  if (h.changes.empty()) page << "<p>No change point beyond the threshold.</p>\n";
  else {
    page << "<table class=\"changes\"><tr><th class=\"l\">verdict</th><th class=\"l\">figure</th><th class=\"l\">from</th><th class=\"l\">to</th>"
            "<th>before</th><th>after</th><th>change</th><th>p</th><th>size, 95 %</th><th class=\"l\">the two alone</th></tr>\n";
    for (auto& c : h.changes)
      page << "<tr>" << change_row(c, "#" + anchor(figure_of(h, c)), figure_name(c)) << "</tr>\n";
    page << "</table>\n";
  }
  for (size_t k = 0; k < p.order.size(); ++k) {
    if (k == 0 && p.figures > 0) page << "<h2 id=\"figures\">Figures</h2>\n";
    if (k == p.figures) page << "<h2 id=\"resources\">Resources</h2>\n";
    const size_t i = p.order[k];
    const FigureSeries& s = h.series[i];
    page << "<h3 id=\"" << anchor(i) << "\">" << html_escape(figure_name(s)) << "</h3>\n";
    if (!failed[first + k].empty()) {
      warnings.push_back(failed[first + k]);
      page << "<p>Not drawn: " << html_escape(failed[first + k]) << "</p>\n";
      continue;
    }
    const fs::path png = fs::path(p.scripts[k]).replace_extension(".png");
    page << "<img class=\"plot\" alt=\"" << html_escape(figure_name(s)) << " over the revisions\" src=\"data:image/png;base64,"
         << base64(read_file(png)) << "\">\n";
    if (!s.changes.empty()) {
      page << "<p>Changes at:";
      for (size_t c : s.changes) page << " <code>" << html_escape(h.points[s.points[c]].revision) << "</code>";
      page << "</p>\n";
    }
  }
  page << html_page_end();
  write_file_atomic(p.dir / "index.html", page.str(), 0644);
  fs::remove_all(p.dir / "plots");  // embedded in the page
}

}  // namespace

HistoryReport write_history_report(const HistoryChanges& h, const fs::path& out_arg) {
  HistoryReport report;
  fs::path out_dir;
  const fs::path staging = begin_site(out_arg, out_dir);
  const Page page = plan_page(h, staging);
  const std::vector<std::string> failed = run_gnuplot_scripts(page.scripts);
  write_page(page, failed, 0, "History", "", report.warnings);
  finish_site(staging, out_dir);
  report.index = out_arg / "index.html";
  return report;
}

HistoryReport write_lab_report(const std::vector<std::pair<std::string, HistoryChanges>>& benchmarks, const std::string& lab,
                               const fs::path& out_arg) {
  HistoryReport report;
  fs::path out_dir;
  const fs::path staging = begin_site(out_arg, out_dir);
  // A page per benchmark (folder b<i>: a benchmark's name is anyone's text), every plot of every page drawn at once.
  std::vector<Page> pages;
  std::vector<fs::path> scripts;
  for (size_t b = 0; b < benchmarks.size(); ++b) {
    pages.push_back(plan_page(benchmarks[b].second, staging / ("b" + std::to_string(b))));
    scripts.insert(scripts.end(), pages.back().scripts.begin(), pages.back().scripts.end());
  }
  const std::vector<std::string> failed = run_gnuplot_scripts(scripts);
  size_t first = 0;
  for (size_t b = 0; b < pages.size(); ++b) {
    write_page(pages[b], failed, first, "History of " + benchmarks[b].first, "<p><a href=\"../index.html\">All benchmarks</a></p>\n", report.warnings);
    first += pages[b].scripts.size();
  }
  // The index: every benchmark's changes together, the newest first (by the time of the revision after the change).
  struct Latest {
    double time;
    size_t benchmark;
    const FigureChange* change;
  };
  std::vector<Latest> latest;
  for (size_t b = 0; b < benchmarks.size(); ++b)
    for (auto& c : benchmarks[b].second.changes) latest.push_back({benchmarks[b].second.points[c.point].time, b, &c});
  std::stable_sort(latest.begin(), latest.end(), [](const Latest& a, const Latest& b) { return a.time > b.time; });
  std::ostringstream index;
  index << html_page_head("fanout: lab") << "<h1>Lab</h1>\n<p id=\"lab\">" << benchmarks.size() << " benchmark(s) of <code>" << html_escape(lab)
        << "</code> with 3 experiments or more; generated " << html_escape(iso8601_utc(wall_ns())) << ".</p>\n<h2 id=\"changes\">Changes, newest first</h2>\n";
  if (latest.empty()) index << "<p>No change point beyond the threshold.</p>\n";
  else {
    index << "<table class=\"changes\"><tr><th class=\"l\">benchmark</th><th class=\"l\">verdict</th><th class=\"l\">figure</th><th class=\"l\">from</th>"
             "<th class=\"l\">to</th><th>before</th><th>after</th><th>change</th><th>p</th><th>size, 95 %</th><th class=\"l\">the two alone</th></tr>\n";
    for (auto& l : latest) {
      const std::string page = "b" + std::to_string(l.benchmark) + "/index.html";
      const FigureChange& c = *l.change;
      index << "<tr><td class=\"l\"><a href=\"" << page << "\">" << html_escape(benchmarks[l.benchmark].first) << "</a></td>"
            << change_row(c, page + "#" + anchor(figure_of(benchmarks[l.benchmark].second, c)),
                          figure_name(c))
            << "</tr>\n";
    }
    index << "</table>\n";
  }
  index << "<h2 id=\"benchmarks\">Benchmarks</h2>\n<table class=\"changes\"><tr><th class=\"l\">benchmark</th><th>experiments</th>"
           "<th>changes</th><th class=\"l\">newest</th></tr>\n";
  for (size_t b = 0; b < benchmarks.size(); ++b) {
    const HistoryChanges& h = benchmarks[b].second;
    index << "<tr><td class=\"l\"><a href=\"b" << b << "/index.html\">" << html_escape(benchmarks[b].first) << "</a></td><td>" << h.points.size()
          << "</td><td>" << h.changes.size() << (h.latest_regression ? " (newest after a regression)" : "") << "</td><td class=\"l\">"
          << (h.points.empty() ? "" : html_escape(h.points.back().revision)) << "</td></tr>\n";
  }
  index << "</table>\n" << html_page_end();
  write_file_atomic(staging / "index.html", index.str(), 0644);
  finish_site(staging, out_dir);
  report.index = out_arg / "index.html";
  return report;
}

}  // namespace fanout
