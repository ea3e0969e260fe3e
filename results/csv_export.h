// CSV writers: they format what the store and statistics.h compute, nothing more.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

namespace fanout {

class ResultsDb;

struct CsvFiles {
  std::filesystem::path samples, statistics;
  size_t sample_rows = 0, statistic_rows = 0;
};

// Writes <out_dir>/samples.csv (long format: one row per sample, with the run's session and parameters)
// and <out_dir>/statistics.csv (one row per run and metric, warmup excluded). Each file appears whole or not
// at all (write then rename).
CsvFiles export_csv(const ResultsDb& db, const std::filesystem::path& out_dir);

// RFC 4180 quoting of one field.
std::string csv_field(const std::string& s);

}  // namespace fanout
