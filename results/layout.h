// Every name fanout gives a file or folder in an experiment, in one place. An experiment folder is
//   <results_dir>/<exp_name>/   fanout.sqlite  command.toml  driver.lock  csv/
//     run-<stamp>/<session>/    run.toml  job.sh  job.exit  steps.exit  kv.addr  kv.log
//                               samples/<role>.<rank>.samples  <role>.out/.err
//     run-<stamp>/<service>/    ready  stop  (a shared step's folder; the names are part of the plugin ABI)
// Plugins reach the experiment folder through fanout_host_ops.experiment_dir and their run folder through
// run_dir; what they put there is theirs.
#pragma once
#include <string_view>

#include "plugins/sdk/fanout_plugin.h"

namespace fanout::layout {

// In the experiment folder.
inline constexpr const char* kDatabase = "fanout.sqlite";
inline constexpr const char* kCommand = "command.toml";  // the command that made the experiment, for resume
inline constexpr const char* kDriverLock = "driver.lock";
inline constexpr const char* kCsvDir = "csv";
inline constexpr const char* kBuildLog = "build.log";  // [build]'s output, written before the first run
// In a run folder.
inline constexpr const char* kJobScript = "job.sh";
inline constexpr const char* kJobId = "job.id";  // read only: a fanout before 2026-12-06 kept the job's id here (now in run.toml's [job])
inline constexpr const char* kJobExitMarker = "job.exit";     // the job script's own exit status
inline constexpr const char* kStepExitMarker = "steps.exit";  // "<role> <status>" per step, as each ends
inline constexpr const char* kSamplesDir = "samples";
// In a shared step's service folder.
inline constexpr const char* kServiceReady = FANOUT_SERVICE_READY_FILE;
inline constexpr const char* kServiceStop = FANOUT_SERVICE_STOP_FILE;

// Names of a run folder's entries that fanout reads: a step (whose folder is named after it) may not take one, or
// what it writes there would be read as fanout's (a step "samples" forging ranks' sample files).
inline bool reserved_in_run_folder(std::string_view name) {
  for (std::string_view r : {std::string_view(kSamplesDir), std::string_view(FANOUT_RUN_PROVENANCE_DIR), std::string_view(kServiceReady),
                             std::string_view(kServiceStop)})
    if (name == r) return true;
  return false;
}

}  // namespace fanout::layout
