// An experiment request (from flags or from an experiment TOML file) and its resolution against a plugin's
// self-description into concrete runs. Everything is validated here, before anything is written or started.
#pragma once
#include <filesystem>
#include <optional>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "common/shared_list.h"
#include "launchers/job_spec.h"
#include "schedulers/scheduler.h"
#include "orchestrator/parameter_space.h"
#include "host/plugin_loader.h"

namespace fanout {

struct ParamSource {
  std::string text;    // "[1,2]" or "1" (flag form) or already-split values (file form)
  std::string origin;  // "--sleep_us" or "exp.toml:12", for error messages
  std::vector<std::string> values;  // parsed values
  // Where a relative file parameter (FANOUT_PARAM_PATH) is found: an experiment file's or site profile's folder,
  // as `plugin = "..."` in the same file; empty: the working directory (a flag).
  std::filesystem::path base;
};

// Bounds of the driver's settings, the same for flags and experiment files.
constexpr int64_t kDefaultMaxRuns = 100000;
constexpr int64_t kMaxRunsLimit = 1000000;  // a planned run holds ~900 B: 10 M needed ~9 GB (issue 41 item 14)
constexpr int64_t kMaxParallel = 100000;
constexpr int64_t kMaxRetries = 1000;
constexpr int64_t kMaxRepeat = 1000;
constexpr int64_t kMaxSeconds = int64_t(365) * 86400;  // wall time and stall timeout: a year
// Throws UserError("<origin>: <v> is out of range (<lo> to <hi>)").
void require_range(const std::string& origin, int64_t v, int64_t lo, int64_t hi);

struct ExperimentSettings {
  std::string exp_name;
  std::string scheduler = default_scheduler_name();  // where runs go: the flag keeps SmartSim's name, --launcher
  int64_t walltime_s = 3600;
  std::filesystem::path results_dir = "results";
  int max_parallel = 0;  // 0: the launcher's default (1 for local, every run for slurm)
  int64_t max_submitted = 0;  // the sweep's jobs submitted at once at most (0: what the scheduler takes, Slurm half its MaxJobCount)
  bool array = false;    // submit runs as job arrays (one submission per resource shape)
  int max_retries = 0;   // a run that fails (not cancelled) is run again up to this many times
  int repeat = 1;        // runs of every permutation (--repeat), each with its repeat index
  std::string repeat_order = "interleaved";  // interleaved, grouped, random
  // --repeat=auto: `repeat` (5) runs first, then one more round at a time for the permutations whose across-runs
  // interval of a figure is still wider than +-precision_pct of its median, up to max_repeat runs each.
  bool repeat_auto = false;
  int max_repeat = 30;
  double precision_pct = 2.0;
  std::string revision, source;  // --revision, --source: the code under test (orchestrator/revision.h)
  std::string counters;   // --counters: "instructions,task-clock" (plugins/sdk/fanout_counters.hpp)
  bool resources = true;  // --resources: ranks record resource.* figures (provenance "resources" = "off" when not)
  std::string scaling;    // --scaling: "strong:nodes,weak:size" (results/scaling_spec.h); "" the plugin's declaration
  std::string reference;  // --reference: a reference file checked at the sweep's end (results/reference.h)
  std::string lab;        // --lab: a lab store the experiment is added to at the sweep's end (results/lab_store.h)
  bool resume = false;   // skip permutations that already have a COMPLETED run in the experiment's database
  int64_t status_interval_s = 30;  // a status line in a log this often (a terminal's is redrawn in place)
  int64_t stall_timeout_s = 0;  // a running run in which no rank records a sample for this long is stopped (0: off)
  int64_t max_pending_s = 0;    // a job still pending after this long is cancelled and recorded FAILED (0: off)
  int64_t unknown_timeout_s = 600;  // a job whose state stays unknowable this long is recorded FAILED (not retried)
  // Pending reasons (the scheduler's words, as squeue shows them; an entry matches a reason that starts with it)
  // that no wait will cure: such a job is cancelled and recorded FAILED with the reason at once. ReqNodeNotAvail
  // only with unavailable (down, drained) nodes: "ReqNodeNotAvail, Reserved for maintenance" ends by itself.
  std::vector<std::string> fatal_pending = {"PartitionDown", "PartitionInactive", "PartitionNodeLimit",
                                            "ReqNodeNotAvail, UnavailableNodes", "InvalidQOS", "InvalidAccount",
                                            "BadConstraints"};
  bool no_reuse = false;        // run an experiment's shared step (e.g. the database) in every run, not once per group
  int64_t max_runs = kDefaultMaxRuns;  // more permutations than this are refused before any is expanded
  SchedulerOptions options;
  std::string site;  // --site: a site profile file, "none", or "" (FANOUT_SITE, else ~/.config/fanout/site.toml)
  std::string binding;  // --binding: how steps that say nothing bind their tasks ("": the scheduler's default)
  bool mpi_program = false;  // --mpi_program: every step's program is an MPI program (StepTemplate::mpi_program)
  // A shared step's service job and the runs' jobs apart (SmartSim-Scaling's db_hosts, db_node_feature,
  // node_feature, wall_time): options on top of `options` for each.
  std::string service_hosts;
  std::vector<std::pair<std::string, std::string>> service_args, run_args;
  int64_t service_walltime_s = 0;  // 0: the runs it serves, one after another
  SchedulerOptions run_options() const { return options.with_job_args(run_args); }
  SchedulerOptions service_options() const;
  std::set<std::string> given;  // the settings given (file or command line), which a site profile's do not override
  // Where each setting's value came from, for messages: "--partition", "sweep.toml:8: experiment.batch_args",
  // "site.toml:5: settings.partition". A setting absent here has its default.
  std::map<std::string, std::string> origins;
  bool verbose = false;  // the driver's own cost at the end (submit, polls, CPU, peak memory)
  int64_t max_local_ranks = 0;  // ranks one run may start on this host (0: 8 per CPU this process may use)
};

// An experiment file's [build]: the code under test, built once before the runs (issue 55). A string command runs
// under /bin/sh -c in `source` (a build line, the file's author's own, as a Makefile's); an array runs as argv.
struct BuildSpec {
  std::string source;               // the source folder (a git working tree): also the sweep's --source
  std::vector<std::string> argv;    // empty: no [build]
  std::string origin;               // file:line, for messages
};

struct ExperimentRequest {
  std::string plugin;      // name or path
  BuildSpec build;
  std::string subcommand;  // the plugin's experiment template; "run" for an experiment file with its own steps
  std::vector<StepTemplate> steps;  // from the file; empty = the template's
  std::string steps_origin;
  std::vector<std::pair<std::string, ParamSource>> params;  // given values, in the order given
  std::vector<std::pair<std::vector<std::string>, std::string>> zips;  // names + origin
  std::vector<Exclusion> excludes;
  ExperimentSettings settings;
  // What --launcher=auto means on this host, filled by the driver before planning (the registry detects it);
  // empty: taken as a cluster's, so a program missing here is a warning, not a refusal.
  std::string auto_scheduler;
};

// One run of the experiment: a point of the parameter space with its steps resolved.
struct RunPlan {
  // Every parameter of the plugin (and the file's placement parameters): one copy for all the --repeat runs of a
  // permutation (half a planned run's memory was its own copy).
  std::shared_ptr<const ParameterPoint> point;
  std::string param_hash, session;
  SharedList<StepSpec> steps;  // one list for the runs whose steps are equal (a permutation's repeats among them)
  int service = -1;  // index into ExperimentPlan::services of the shared step this run uses, or -1
  int repeat = 0;    // which of the permutation's --repeat runs (0-based); part of its identity, not a parameter
  // Its session name before the repeat and hash: a later repeat's is made from it, so only repeat 0 keeps it.
  std::string session_stem;
  const Plugin* plugin = nullptr;  // a service's own plugin when its step names another (ExperimentPlan::step_plugins)
  // Per step: what each rank runs, as its plugin's plan_step says ("" unsaid); empty when no step's plugin said.
  std::vector<std::string> step_commands;
};

struct ExperimentPlan {
  ExperimentRequest request;
  std::vector<StepTemplate> steps;
  ParameterSpace space;
  std::vector<RunPlan> runs;
  std::string identity_head;  // what every run's identity hash reads first: the plugin and the experiment template
  // The shared step's services (fanout_plugin.h, shared_step): one per group of consecutive runs that agree
  // on the template's shared_by parameters; each carries that step only, with the group's parameters.
  std::vector<RunPlan> services;
  // The plugins of steps that name another plugin than the experiment's (an exec run's smartsim db), kept open.
  std::vector<std::shared_ptr<const Plugin>> step_plugins;
  std::vector<std::string> warnings;  // what the plugins' plan_step warned of, each once
  // The code under test, as --revision and --source say (provenance of every run: orchestrator/revision.h).
  std::map<std::string, std::string> revision;
  // What speedup is measured against (provenance "scaling" of every run): --scaling, else the plugin's declared
  // count parameters that the sweep varies. "" when neither says.
  std::string scaling;
};

// Reads an experiment file. Throws UserError naming the file and line for syntax errors and bad entries.
ExperimentRequest parse_experiment_file(const std::filesystem::path& file);
// The same from the file's text; `origin` names it in errors and gives the default experiment name (its stem).
ExperimentRequest parse_experiment_text(std::string_view toml, const std::filesystem::path& origin);
// Validates the request against the plugin and expands it. Throws UserError naming the flag or line.
ExperimentPlan plan_experiment(const ExperimentRequest& request, const Plugin& plugin);

// Run k (0-based) of the permutation `base` (its repeat 0): the identity and session name --repeat gives it.
// identity_head: ExperimentPlan::identity_head.
RunPlan repeat_of(const std::string& identity_head, const RunPlan& base, int k);

// "--exclude" text: "a=1,b=[2,3]" (all conditions must match to exclude a point).
Exclusion parse_exclude_flag(const std::string& text, const std::string& origin);
// "HH:MM:SS", "MM:SS", "D-HH:MM:SS" or plain seconds.
int64_t parse_walltime(const std::string& text, const std::string& origin);

}  // namespace fanout
