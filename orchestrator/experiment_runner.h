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
#include "orchestrator/site.h"
#include "host/plugin_loader.h"

namespace fanout {

struct ExperimentOutcome {
  std::filesystem::path exp_dir, run_root, database, csv_dir;
  size_t runs = 0, completed = 0, failed = 0;  // failed = every final state other than COMPLETED (after retries)
  size_t retries = 0;
  bool interrupted = false;
};

struct RunnerOptions {
  std::filesystem::path rank_exe;  // fanout-rank
  std::string command_line;        // for provenance
  std::vector<std::string> argv;   // the driver's arguments, kept in <exp>/command.toml for `fanout resume`
  std::ostream* progress = nullptr;
  const std::atomic<bool>* interrupt = nullptr;  // set by SIGINT/SIGTERM: cancel the experiment's jobs
  SiteProfile site;                               // lines every job script runs (site.h)
};

// Prints what would run: one line per run with its parameters, and each job script.
void print_dry_run(const ExperimentPlan& plan, const Plugin& plugin, const RunnerOptions& opts, std::ostream& out);
// UserError naming the run, when a scheduler that starts every rank on this host would start more at once than
// --max_local_ranks (default 8 per usable CPU). Dry runs and real runs check it before anything starts.
void refuse_too_many_local_ranks(const ExperimentPlan& plan, const std::string& scheduler);
// With settings.resume, first ingests run folders that ended but never reached the database (the driver was
// killed), then runs only the permutations (by parameter hash) without a COMPLETED run.
ExperimentOutcome run_experiment(const ExperimentPlan& plan, const Plugin& plugin, const RunnerOptions& opts);
// An experiment folder is fanout's: an existing folder with things in it but no database (nor a driver's lock) is
// someone else's, whose csv/ and processed/ a sweep would overwrite: UserError naming it. A folder holding only
// [build]'s log (layout::kBuildLog) is one fanout began.
void refuse_a_folder_fanout_did_not_make(const std::filesystem::path& dir);

// `fanout resume <exp_dir>`: the command that made the experiment (from <exp>/command.toml) and its folder.
struct SavedCommand {
  std::vector<std::string> argv;
  std::filesystem::path cwd;
};
SavedCommand read_saved_command(const std::filesystem::path& exp_dir);

}  // namespace fanout
