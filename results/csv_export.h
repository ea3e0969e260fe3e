// CSV writers: they format what the store and metric_stats.h compute, nothing more. Each file appears whole
// or not at all (written aside, then renamed).
#pragma once
#include <filesystem>
#include <string>
#include <vector>

namespace fanout {

class ResultsDb;
struct ExperimentStats;

struct CsvFiles {
  std::filesystem::path samples, statistics, runs;
  size_t sample_rows = 0, statistic_rows = 0, run_rows = 0;
};

// Long format: one row per sample with the run's session, status and parameters. gzip: samples.csv.gz.
size_t write_samples_csv(const ResultsDb& db, const std::filesystem::path& file, bool gzip);
// One row per run and metric: parameters, role, metric, unit and every summary column (warmup excluded).
size_t write_statistics_csv(const ExperimentStats& stats, const std::filesystem::path& file);
// One row per run: parameters, then <metric>.<stat> columns for every metric (role-qualified when a metric
// name is recorded by several roles).
size_t write_runs_csv(const ExperimentStats& stats, const std::filesystem::path& file);
// across_runs.csv: per permutation and metric, the median of its runs' medians with the interval across them,
// and the runs and samples it rests on (metric_stats.h across_runs).
size_t write_across_runs_csv(const ExperimentStats& stats, const std::filesystem::path& file);

// All three into out_dir: samples.csv[.gz], statistics.csv, runs.csv.
CsvFiles export_csv(const ResultsDb& db, const std::filesystem::path& out_dir, bool gzip = false);

// RFC 4180 quoting of one field; text a spreadsheet would run as a formula (=, +, -, @ first, not a number)
// gets a leading apostrophe.
std::string csv_field(const std::string& s);
// A figure as the CSV files write it (12 significant digits).
std::string csv_number(double v);

}  // namespace fanout
