// CSV writers: they format what the store and metric_stats.h compute, nothing more. Each file appears whole
// or not at all (written aside, then renamed).
#pragma once
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "results/metric_stats.h"

namespace fanout {

class ResultsDb;
class StagedFile;

struct CsvFiles {
  std::filesystem::path samples, statistics, runs;
  size_t sample_rows = 0, statistic_rows = 0, run_rows = 0;
};

// Long format: one row per sample with the run's session, status and parameters. gzip: samples.csv.gz.
size_t write_samples_csv(const ResultsDb& db, const std::filesystem::path& file, bool gzip);
// The same with its parameter columns known (count_runs or the statistics made them): the runs are not read for them again.
size_t write_samples_csv(const ResultsDb& db, const std::filesystem::path& file, bool gzip, const std::vector<std::string>& parameter_names);
// The statistics files of a folder, written row by row as a statistics pass makes them (metric_stats.h
// for_each_statistic), rows in run order; each appears at commit(), whole:
//   statistics.csv   one row per counted run and metric: parameters, role, metric, unit, every summary column
//                    (warmup excluded)
//   runs.csv         one row per attempt: parameters, then <metric>.<stat> columns for every metric (role-qualified
//                    when a metric name is recorded by several roles); its rows wait in an unnamed file beside it
//                    until the columns are known
//   across_runs.csv  per permutation and metric, the median of its runs' medians with the interval across them, and
//                    the runs and samples it rests on (metric_stats.h across_runs)
// What it holds is a row and the permutations' run medians, never the experiment's statistics.
class StatisticsFiles {
 public:
  StatisticsFiles(const std::filesystem::path& dir, std::vector<std::string> parameter_names);
  ~StatisticsFiles();
  StatisticsFiles(const StatisticsFiles&) = delete;
  StatisticsFiles& operator=(const StatisticsFiles&) = delete;
  void add(const MetricStats& m, bool counts);  // counts: a row of ExperimentStats::stats, else superseded
  CsvFiles commit();                            // statistics, runs and their rows

 private:
  void end_run();
  size_t column_of(const MetricStats& m);
  std::filesystem::path dir_;
  std::vector<std::string> names_;
  std::unique_ptr<StagedFile> statistics_;
  size_t statistic_rows_ = 0;
  AcrossRunsBuilder across_;
  std::FILE* run_rows_ = nullptr;
  size_t run_rows_written_ = 0;
  std::vector<std::pair<std::string, std::string>> columns_;  // runs.csv's metric columns, (role, metric), first seen first
  std::vector<std::string> column_fields_;                     // each as statistics.csv's ",<role>,<metric>" fields
  std::map<std::pair<std::string, std::string>, size_t> column_;
  std::map<std::string, std::set<std::string>> roles_of_;
  // The columns of the run before and of this one, in the order its metrics came: a sweep's runs record the same
  // metrics in the same order, so the previous run's k-th is this one's k-th without a look in column_ (two string
  // compares in a tree, a third of writing these files for a 100,000-run sweep).
  std::vector<size_t> previous_run_columns_, run_columns_;
  std::vector<std::pair<size_t, size_t>> columns_at_;  // (first row, columns known when it was written), as they grew
  int64_t run_ = -1;
  std::string run_prefix_;
  std::vector<std::string> run_cells_;  // the current run's cells by column, empty where it has none (kept allocated)
};
// The same three files of statistics already held (process_scaling_results, which plots them too).
CsvFiles write_statistics_files(const ExperimentStats& stats, const std::filesystem::path& dir);

// All four into out_dir: samples.csv[.gz], statistics.csv, runs.csv, across_runs.csv.
CsvFiles export_csv(const ResultsDb& db, const std::filesystem::path& out_dir, bool gzip = false);

// RFC 4180 quoting of one field; text a spreadsheet would run as a formula (=, +, -, @ first, not a number)
// gets a leading apostrophe.
std::string csv_field(const std::string& s);
void append_csv_field(std::string& out, std::string_view text);  // the same, added to `out`
// A figure as the CSV files write it (12 significant digits).
std::string csv_number(double v);
void append_csv_number(std::string& s, double v);  // the same, added to s

}  // namespace fanout
