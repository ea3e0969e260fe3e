// A run's folder: results/<exp>/run-<stamp>/<session>/ holding run.toml (every parameter, the steps,
// provenance, its job's id once submitted, and the final status), job.sh, <role>.out/.err and samples/. The folder alone is enough to
// rebuild the run's rows in the database.
#pragma once
#include <cstdint>
#include <filesystem>
#include <map>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/files.h"

namespace fanout {

struct RunStep {
  std::string role;
  int nodes = 1, tasks_per_node = 1;
  std::string placement;
  int cpus_per_task = 1;
  int gpus_per_task = 0, memory_mb = 0;
  std::string binding;
  bool exclusive = false;
  std::string entry;     // the plugin's role when it differs from the step's name (role)
  std::string settings;  // JSON object of the step's settings, or empty
  bool mpi_program = false;  // the step's program joins the launcher's PMIx itself (StepTemplate::mpi_program)
};

struct RankExitRecord {
  std::string role;
  int rank = 0, exit_code = 0, signal = 0;
};

struct RunStatusRecord {
  std::string state;  // Slurm's words: COMPLETED, FAILED, TIMEOUT, CANCELLED, NODE_FAIL, ...
  std::string job_id, node_list, reason;
  int exit_code = 0, signal = 0;
  int64_t start_wall_ns = 0, end_wall_ns = 0;
  std::vector<RankExitRecord> ranks;
};

struct RunMetadata {
  std::string session;     // the run's folder name
  std::string experiment;  // exp_name
  std::string subcommand;  // the experiment template or "run"
  std::string plugin, plugin_path, plugin_version;
  std::string param_hash;
  std::string scheduler;  // stored as "launcher" (run.toml key and runs column: SmartSim's word)
  int64_t walltime_s = 0;
  int64_t created_wall_ns = 0;
  std::vector<std::pair<std::string, std::string>> parameters;  // every parameter, defaults included
  std::vector<RunStep> steps;
  // A shared step's service folder (fanout_plugin.h, service_dir): this run's own folder when it is the
  // service, the service's when the run uses one; empty otherwise.
  std::string service_dir;
  bool service_provider = false;
  std::map<std::string, std::string> provenance;  // host, user, fanout version, git revision, command line ...
  std::string job_id;                              // the scheduler's id of its job ([job] id), once submitted
  std::optional<RunStatusRecord> status;           // absent until the run has ended
};

constexpr const char* kRunMetadataFile = "run.toml";
// A run.toml larger than this is refused unread (one holds parameters, steps, provenance and per-rank exits).
constexpr size_t kMaxRunMetadataBytes = size_t(64) << 20;

// Atomic; Deferred leaves the fsync to the caller's sync_filesystem() (common/files.h).
std::string run_metadata_text(const RunMetadata& m);  // run.toml's bytes
void write_run_metadata(const std::filesystem::path& run_dir, const RunMetadata& m, Durability durability = Durability::Now);
// What a run adds to the run.toml it was laid out with as it goes: its job's id as it is submitted ([job]) and its
// end ([status]), each appended in one write, not the whole file written aside and renamed over the old nor a file
// of its own (a new inode a run, and a freed one, which ext4 makes the next inode allocation pay for: most of the
// driver's CPU a run on a filesystem without a journal). Read back as if written whole; an append cut short is not.
void append_run_job(const std::filesystem::path& run_dir, const std::string& job_id, Durability durability = Durability::Now);
void append_run_status(const std::filesystem::path& run_dir, const RunStatusRecord& s, Durability durability = Durability::Now);
RunMetadata read_run_metadata(const std::filesystem::path& run_dir);                  // throws UserError
std::filesystem::path samples_dir(const std::filesystem::path& run_dir);

}  // namespace fanout
