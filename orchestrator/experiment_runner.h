// Carries out an experiment plan: lays out the run folders, submits the jobs through a scheduler, polls them
// all with one query per cycle, shows progress, records each run's end in its folder and ingests it into the
// results database.
#pragma once
#include <atomic>
#include <filesystem>
#include <iosfwd>
#include <string>
#include <vector>

#include "orchestrator/experiment.h"
#include "orchestrator/plugin_loader.h"

namespace fanout {

struct ExperimentOutcome {
  std::filesystem::path exp_dir, run_root, database, csv_dir;
  size_t runs = 0, completed = 0, failed = 0;  // failed = every final state other than COMPLETED
  bool interrupted = false;
};

struct RunnerOptions {
  std::filesystem::path rank_exe;  // fanout-rank
  std::string command_line;        // for provenance
  std::ostream* progress = nullptr;
  const std::atomic<bool>* interrupt = nullptr;  // set by SIGINT/SIGTERM: cancel the experiment's jobs
};

// Prints what would run: one line per run with its parameters, and each job script.
void print_dry_run(const ExperimentPlan& plan, const Plugin& plugin, const RunnerOptions& opts, std::ostream& out);
ExperimentOutcome run_experiment(const ExperimentPlan& plan, const Plugin& plugin, const RunnerOptions& opts);

}  // namespace fanout
