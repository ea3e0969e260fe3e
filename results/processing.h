// process_scaling_results: from an experiment's fanout.sqlite (importing a SmartSim-Scaling tree first when
// the folder is one), per-run statistics per metric, CSV files, plots and a self-contained HTML report in
// <dir>/processed/ (built aside and renamed into place, so it is whole or absent).
#pragma once
#include <filesystem>
#include <string>
#include <utility>
#include <vector>


namespace fanout {

struct ProcessOptions {
  bool overwrite = true;
  bool gzip_samples = false;
  // --scaling=strong:PARAM / weak:PARAM (repeatable): speedup and efficiency in csv/scaling.csv and the report; none
  // given: the varied placement parameters (nodes, ranks_per_node, *_nodes, *_per_node, *threads), strong.
  std::vector<std::string> scaling;
};

struct ProcessReport {
  std::filesystem::path out_dir;
  int imported_runs = 0;
  std::vector<std::string> warnings;    // plots not drawn, producer sessions without timings, ...
  std::vector<std::string> unreadable;  // SmartSim-Scaling sessions that could not be read ("<file>:<line>: why")
  std::vector<std::filesystem::path> files;
  // Where the time went: (phase, seconds) in order (import, statistics, csv, plots, report), for
  // bench/scaling_results_bench and anyone asking why a large tree is slow.
  std::vector<std::pair<std::string, double>> phase_s;
};

ProcessReport process_scaling_results(const std::filesystem::path& dir, const ProcessOptions& opts);

}  // namespace fanout
