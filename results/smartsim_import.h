// Import of SmartSim-Scaling result trees, so that users keep their history in the same database:
//   <dir>/run-<date>/<session>/run.cfg            INI: [run] name, path, versions, db, date, language;
//                                                 [attributes] every parameter
//   <dir>/run-<date>/<session>/rank_<r>_timing.csv  lines "rank,function,seconds"
// Every line of every rank file is a sample (the original drops the first line of each file); each session
// is stored on its own (the original leaks earlier runs' data into later frames). A malformed session is
// reported and skipped; the rest are imported. Re-importing replaces, never duplicates.
#pragma once
#include <filesystem>
#include <string>
#include <vector>

namespace fanout {

class ResultsDb;

struct SmartSimImportReport {
  int runs = 0;
  int producers = 0;  // aggregation producer sessions: they write no timings (as in SmartSim-Scaling), none imported
  uint64_t samples = 0;
  std::vector<std::string> skipped;  // "<session dir>: why"
};

// True when dir holds SmartSim-Scaling sessions (run.cfg or rank_*_timing.csv files below it).
bool is_smartsim_tree(const std::filesystem::path& dir);
SmartSimImportReport import_smartsim_tree(const std::filesystem::path& dir, ResultsDb& db);

}  // namespace fanout
