// Plots drawn with gnuplot (pngcairo) from statistics already computed: violins of each metric against the
// number of ranks that recorded it, one series per combination of the other varied parameters (any number
// of series); a histogram of each metric with its median; bandwidth against message size when a bytes/s
// metric and a size parameter exist.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

namespace fanout {

struct ExperimentStats;
class ResultsDb;

struct Plot {
  std::string title;
  std::filesystem::path png;
};

// Writes PNGs into out_dir; what cannot be drawn (no gnuplot, no data) becomes a warning, not an error.
std::vector<Plot> draw_plots(const ExperimentStats& exp, const ResultsDb& db, const std::filesystem::path& out_dir,
                             std::vector<std::string>& warnings);

}  // namespace fanout
