// The run folder the results benches generate: run.json as the driver leaves it for a COMPLETED run of
// throughput_standard in experiment "bench" (the samples files are each bench's own).
#pragma once
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "results/run_folder.h"

namespace bench {

inline void write_completed_run(const std::filesystem::path& dir, const std::string& plugin, int index,
                                std::vector<std::pair<std::string, std::string>> parameters) {
  std::filesystem::create_directories(fanout::samples_dir(dir));
  fanout::RunMetadata m;
  m.session = dir.filename().string();
  m.experiment = "bench";
  m.subcommand = "throughput_standard";
  m.plugin = plugin;
  m.param_hash = std::to_string(index);
  m.parameters = std::move(parameters);
  m.status = fanout::RunStatusRecord{"COMPLETED", "", "", "", 0, 0, 0, 0, {}};
  fanout::write_run_metadata(dir, m);
}

}  // namespace bench
