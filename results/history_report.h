// The dashboard of a benchmark over time (issue 55): one static page, index.html, in a folder of its own (no server;
// it opens from a file or from any web server): the newest changes first, then each figure's series over the
// revisions with the interval across each experiment's runs and its change points marked, what the runs cost
// (resource.*) after the figures. Statistics come from results/history.h; this only draws and formats.
#pragma once

#include <filesystem>
#include <string>
#include <vector>

#include "results/history.h"

namespace fanout {

struct HistoryReport {
  std::filesystem::path index;
  std::vector<std::string> warnings;  // plots that could not be drawn (gnuplot missing or failing)
};

// Writes out_dir (made aside, then renamed into place: whole or absent). Throws UserError when out_dir exists and is
// not a dashboard fanout wrote (it is never overwritten then).
HistoryReport write_history_report(const HistoryChanges& h, const std::filesystem::path& out_dir);
// A lab's dashboard: out_dir/index.html lists every benchmark's changes together, newest first (each linked to its
// figure), then the benchmarks; out_dir/b<i>/index.html is benchmark i's page as above. Every plot of every page is
// drawn in one batch (one gnuplot session per CPU).
HistoryReport write_lab_report(const std::vector<std::pair<std::string, HistoryChanges>>& benchmarks, const std::string& lab,
                               const std::filesystem::path& out_dir);

}  // namespace fanout
