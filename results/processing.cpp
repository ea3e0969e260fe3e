#include "results/processing.h"

#include "common/clock.h"
#include "common/error.h"
#include "common/files.h"

#include <algorithm>
#include <sstream>
#include "results/csv_export.h"
#include "results/html_report.h"
#include "results/metric_stats.h"
#include "results/models.h"
#include "results/plots.h"
#include "results/smartsim_import.h"
#include "results/store.h"
#include "results/layout.h"

namespace fanout {

namespace fs = std::filesystem;

ProcessReport process_scaling_results(const fs::path& dir_in, const ProcessOptions& opts) {
  const fs::path dir = fs::absolute(dir_in).lexically_normal();
  if (!fs::is_directory(dir)) throw UserError("--scaling_dir: " + dir_in.string() + " is not a folder");
  ProcessReport report;
  report.out_dir = dir / "processed";
  if (fs::exists(report.out_dir) && !opts.overwrite)
    throw UserError(report.out_dir.string() + " exists; pass --overwrite to replace it");
  const bool ours = fs::exists(dir / layout::kDatabase) && !is_smartsim_tree(dir);
  if (!ours && !is_smartsim_tree(dir))
    throw UserError("--scaling_dir: " + dir.string() + " holds neither fanout.sqlite nor SmartSim-Scaling results (run.cfg, rank_*_timing.csv)");
  int64_t phase_start = monotonic_ns();
  auto phase_done = [&](const char* name) {
    const int64_t now = monotonic_ns();
    report.phase_s.emplace_back(name, double(now - phase_start) / 1e9);
    phase_start = now;
  };
  ResultsDb db(dir / layout::kDatabase);
  if (!ours) {
    // A SmartSim-Scaling experiment folder: import it (again) into the same database, then process as ours.
    auto imported = import_smartsim_tree(dir, db);
    report.imported_runs = imported.runs;
    report.unreadable = imported.skipped;
    if (imported.producers)
      report.warnings.push_back(std::to_string(imported.producers) + " aggregation producer session(s) hold no timings (SmartSim-Scaling's producers write none)");
    if (imported.runs == 0)
      throw UserError("--scaling_dir: no session of " + dir.string() + " could be imported" +
                      (imported.skipped.empty() ? std::string() : "; first: " + imported.skipped.front()));
  }
  // Build aside, then swap into place: the folder is whole or absent.
  fs::path staging = dir / "processed.tmp";
  fs::remove_all(staging);
  fs::create_directories(staging / "plots");
  ResultsDb::ReadSnapshot snapshot(db);  // statistics, samples and plots of the same runs
  phase_done("import");
  ExperimentStats stats = compute_statistics(db, dir.filename().string(), true);  // with densities: the violins
  phase_done("statistics");
  // The CSVs go where the driver writes them (DIR/csv), refreshed from this snapshot: one copy, not two. Each
  // file is written aside and renamed.
  const fs::path csv_dir = dir / layout::kCsvDir;
  fs::create_directories(csv_dir);
  write_samples_csv(db, csv_dir / (opts.gzip_samples ? "samples.csv.gz" : "samples.csv"), opts.gzip_samples, stats.parameter_names);
  write_statistics_files(stats, csv_dir);
  for (const char* name : {opts.gzip_samples ? "samples.csv.gz" : "samples.csv", "statistics.csv", "runs.csv"})
    report.files.push_back(csv_dir / name);
  phase_done("csv");
  // Scaling models of each figure against what was swept (results/models.h): csv/models.csv, the plots, the report.
  const std::vector<FigureModel> models = experiment_models(stats);
  if (!models.empty()) {
    std::ostringstream text;
    write_models(models, "csv", text);
    write_file_atomic(csv_dir / "models.csv", text.str(), 0644);
    report.files.push_back(csv_dir / "models.csv");
  }
  // What speedup is measured against: --scaling here, else what the sweep stored with its runs (its own --scaling
  // or its plugin's declared count parameters), else the varied placement parameters by name.
  std::vector<ScalingSpec> specs;
  for (auto& text : opts.scaling)
    for (auto& spec : parse_scaling_list(text)) specs.push_back(spec);
  for (auto& spec : specs)
    if (!std::count(stats.varied.begin(), stats.varied.end(), spec.param))
      report.warnings.push_back("--scaling " + spec.mode + ":" + spec.param + ": " + spec.param + " is not varied here: no speedup");
  // What the sweep stored, and the placement names it did not speak of (a plugin's declared threads beside an
  // undeclared nodes both count).
  if (specs.empty()) {
    specs = stored_scaling(db.runs());
    for (auto& d : default_scaling(stats))
      if (std::none_of(specs.begin(), specs.end(), [&](const ScalingSpec& s) { return s.param == d.param; })) specs.push_back(d);
  }
  const std::vector<ScalingRow> scaling = scaling_rows(stats, specs);
  if (!scaling.empty()) {
    std::ostringstream text;
    write_scaling_csv(scaling, text);
    write_file_atomic(csv_dir / "scaling.csv", text.str(), 0644);
    report.files.push_back(csv_dir / "scaling.csv");
  }
  phase_done("models");
  auto plots = draw_plots(stats, db, staging / "plots", report.warnings, models, scaling);
  phase_done("plots");
  write_html_report(stats, plots, staging / "report.html", models);
  // Each PNG keeps its gnuplot script and data beside it, so a plot can be restyled without fanout.
  fs::path old = dir / "processed.old";
  fs::remove_all(old);
  if (fs::exists(report.out_dir)) fs::rename(report.out_dir, old);
  fs::rename(staging, report.out_dir);
  fs::remove_all(old);
  for (auto& e : fs::recursive_directory_iterator(report.out_dir))
    if (e.is_regular_file()) report.files.push_back(e.path());
  phase_done("report");
  return report;
}

}  // namespace fanout
