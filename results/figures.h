// Figures: numbers a program printed (a benchmark's rates, ratios, seconds), stored as one run's samples so that
// fanout's own statistics (median, spread, percentiles) and reports serve a benchmark as they serve experiments
// (bench/run-all keeps every round of every bench this way). The text form, one figure per line:
//   metric iteration value unit [t_unix_s]
// iteration: the round the figure came from; t_unix_s: when it was measured (default: when recorded);
// blank lines and lines starting with '#' are skipped. A metric keeps one unit.
#pragma once
#include <cstdint>
#include <filesystem>
#include <istream>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "results/store.h"

namespace fanout {

struct Figure {
  std::string metric;
  int64_t iteration = 0;
  double value = 0;
  std::string unit;
  double t_unix_s = 0;  // 0: not given
};

// Throws UserError("<origin>:<line>: ...") for a malformed line or a metric given two units; nothing is returned
// half-read.
std::vector<Figure> parse_figures(std::istream& in, const std::string& origin);

struct FigureRun {
  std::string experiment;  // the database's experiment name (e.g. "benchmarks")
  std::string name;        // the run's name within it (e.g. "tensor_bench"); its key is <exp_dir>/figures/<name>
  std::vector<std::pair<std::string, std::string>> parameters;
  std::map<std::string, std::string> provenance;  // host, commit, ...
};

// Stores the figures as the run's samples (role "bench", rank 0), replacing an earlier copy of the same run, in
// one transaction. Throws UserError when there are none (a bench that printed nothing is a failure, not a run).
IngestReport record_figures(ResultsDb& db, const std::filesystem::path& exp_dir, const FigureRun& run,
                            const std::vector<Figure>& figures);

}  // namespace fanout
