// Plots drawn with gnuplot (pngcairo) from statistics already computed, in the order a reader wants them:
//   headline      what a sweep is run for: each figure's run-level median against each varied numeric parameter,
//                 across-runs intervals as error bars, the fitted scaling model drawn (results/models.h); then the
//                 median against the ranks recording it (the
//                 clients), one line per combination of the other varied parameters; for a time metric with a
//                 size parameter, the aggregate bandwidth (ranks x size / median time); a bytes/s metric
//                 against message size
//   distribution  violins of each metric by ranks (one per run) and histograms per run
//   bookkeeping   metrics a rank records once (setup and teardown: rendezvous, cluster_create, db_start)
// Values are shown in human units (results/display_unit.h); legends name the varied parameters' values.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

namespace fanout {

struct ExperimentStats;
struct FigureModel;
struct ScalingRow;
class ResultsDb;

struct Plot {
  enum class Section { Headline, Resources, Distribution, Bookkeeping };  // the report's order
  std::string title;
  std::filesystem::path png;
  Section section = Section::Distribution;
  int order = 0;  // within a section, lower first: aggregate bandwidth, then medians by ranks, then by size
};

// Writes PNGs into out_dir, returned headline first, then distributions, then bookkeeping; what cannot be drawn (no gnuplot, no data) becomes a warning, not an error.
std::vector<Plot> draw_plots(const ExperimentStats& exp, const ResultsDb& db, const std::filesystem::path& out_dir,
                             std::vector<std::string>& warnings, const std::vector<FigureModel>& models = {},
                             const std::vector<ScalingRow>& scaling = {});

// Runs gnuplot scripts (each sets its own terminal and output, and starts with `reset`): one gnuplot per CPU, each
// running a contiguous share of them in one session, since a start costs about three plots. gnuplot stops at a
// script's error, so a share that fails is run again one script per gnuplot. Returns, per script, "" or why it
// failed (naming it).
std::vector<std::string> run_gnuplot_scripts(const std::vector<std::filesystem::path>& scripts);
// What every script of ours starts with (reset, the PNG terminal), and text as a gnuplot string: for other pages'
// plots (results/history_report.h) drawn the same way.
std::string gnuplot_preamble();
std::string gnuplot_quoted(const std::string& s);

}  // namespace fanout
