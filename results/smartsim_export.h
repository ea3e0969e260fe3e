// Export of an experiment's runs in SmartSim-Scaling's own layout, so that its pandas scripts read fanout runs
// unchanged (the mirror of smartsim_import.h):
//   <out>/run-<YYYY-MM-DD-HH:MM:SS>/run.cfg                     the sweep: [run] name, path, ...; [attributes] each
//                                                               parameter, varied ones as Python list reprs
//   <out>/run-<...>/<session>/run.cfg                           [run] name, path, smartsim_version, smartredis_version,
//                                                               db, date, language; [attributes] its parameters, for the
//                                                               SmartSim-like experiments under SmartSim-Scaling's names
//                                                               (client_total, client_per_node, database_nodes, ...)
//   <out>/run-<...>/<session>/rank_<r>_timing.csv               "rank,function,seconds" per line
// Files are written as SmartSim-Scaling writes them: utils.write_run_config through Python's configparser
// ("key = value", a blank line after each section, `language` in both sections) and the C++ clients'
// `timing_file << rank << "," << name << "," << seconds << "\n"` (default ostream formatting, 6 significant
// digits). Only time metrics are exported (their files hold seconds; other units are counted, not written),
// warmup samples are left out, and a rank's lines follow the order its samples were taken. A run with several
// roles exports the role that recorded the most time samples (the clients); the others are counted.
#pragma once
#include <cstdint>
#include <filesystem>
#include <string>

namespace fanout {

class ResultsDb;

struct SmartSimExportReport {
  std::filesystem::path run_dir;  // <out>/run-<stamp>
  int runs = 0;
  uint64_t lines = 0;
  uint64_t left_out = 0;  // samples not exported: warmup, other units, other roles
};

// Builds the tree aside and renames it into place (whole or absent). Throws UserError when out_dir exists or the
// database holds no run.
SmartSimExportReport export_smartsim_layout(const ResultsDb& db, const std::filesystem::path& out_dir);

}  // namespace fanout
