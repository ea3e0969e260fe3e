#include "orchestrator/settings.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/text.h"
#include "host/plugin_loader.h"
#include "launchers/step_launcher.h"
#include "schedulers/scheduler.h"
#include "orchestrator/list_value.h"
#include "orchestrator/toml_place.h"
#include "results/scaling_spec.h"
#include "plugins/sdk/fanout_counters.hpp"

namespace fanout {

namespace {

using Kind = DriverSetting::Kind;
using Apply = std::function<void(ExperimentRequest&, const std::string&, const std::string&)>;

DriverSetting text(std::string name, std::string key, std::string help, std::string def,
                   std::function<void(ExperimentSettings&, const std::string&)> set, std::vector<std::string> choices = {}) {
  Apply apply = [set, choices](ExperimentRequest& r, const std::string& v, const std::string& origin) {
    if (!choices.empty() && !v.empty() && std::find(choices.begin(), choices.end(), v) == choices.end())
      throw UserError(origin + ": '" + v + "' is not one of " + join(choices, ", "));
    set(r.settings, v);
  };
  return {std::move(name), std::move(key), Kind::Text, std::move(help), std::move(def), apply};
}

DriverSetting integer(std::string name, std::string help, int64_t def, int64_t lo, int64_t hi,
                      std::function<void(ExperimentSettings&, int64_t)> set) {
  Apply apply = [set, lo, hi](ExperimentRequest& r, const std::string& v, const std::string& origin) {
    auto i = parse_int(v);
    if (!i) throw UserError(origin + ": '" + v + "' is not an integer");
    require_range(origin, *i, lo, hi);
    set(r.settings, *i);
  };
  std::string key = name;
  return {std::move(name), std::move(key), Kind::Int, std::move(help), std::to_string(def), apply};
}

DriverSetting boolean(std::string name, std::string help, std::function<void(ExperimentSettings&, bool)> set) {
  Apply apply = [set](ExperimentRequest& r, const std::string& v, const std::string& origin) {
    auto b = parse_bool(v);
    if (!b) throw UserError(origin + ": '" + v + "' is not true or false");
    set(r.settings, *b);
  };
  std::string key = name;
  return {std::move(name), std::move(key), Kind::Bool, std::move(help), "", apply};
}

// file_key "": command line only (an experiment file has [[zip]] and [[exclude]] tables of its own).
DriverSetting list(std::string name, std::string file_key, std::string help, Apply apply) {
  return {std::move(name), std::move(file_key), Kind::List, std::move(help), "", std::move(apply)};
}

// One job option as key=value, or SmartSim-Scaling's dict of them as a JSON object ({"constraint": "P100"}).
std::vector<std::pair<std::string, std::string>> job_args(const std::string& text, const std::string& origin) {
  std::vector<std::pair<std::string, std::string>> out;
  if (!trim(text).empty() && trim(text).front() == '{') {
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(text);
    } catch (const std::exception& e) {
      throw UserError(origin + ": '" + text + "' is not a JSON object of options: " + e.what());
    }
    if (!j.is_object()) throw UserError(origin + ": '" + text + "' is not a JSON object of options");
    for (auto& [k, v] : j.items()) {
      if (v.is_string()) out.emplace_back(k, v.get<std::string>());
      else if (v.is_number_integer() || v.is_boolean()) out.emplace_back(k, v.dump());
      else throw UserError(origin + ": option '" + k + "' needs a string or integer value");
    }
    return out;
  }
  auto eq = text.find('=');
  if (eq == std::string::npos || eq == 0) throw UserError(origin + ": '" + text + "' is not key=value (or a JSON object)");
  out.emplace_back(text.substr(0, eq), text.substr(eq + 1));
  return out;
}

std::vector<DriverSetting> make_settings() {
  std::vector<DriverSetting> s;
  s.push_back(text("exp_name", "name", "name of the experiment (its folder under results_dir)", "",
                   [](ExperimentSettings& st, const std::string& v) { st.exp_name = v; }));
  // The scheduler and step launcher names come from their registries: the driver names no backend.
  s.push_back(text("launcher", "launcher", "where runs go (the scheduler): " + join(scheduler_names(), ", "), ExperimentSettings{}.scheduler,
                   [](ExperimentSettings& st, const std::string& v) { st.scheduler = v; }));
  std::vector<std::string> defaults;
  for (auto& name : scheduler_names())
    if (!scheduler_is_detected(name))
      if (auto d = scheduler_traits_of(name).default_step_launcher; !d.empty()) defaults.push_back(name + ": " + d);
  s.push_back(text("step_launcher", "step_launcher", "how steps start inside a batch job: " + join(step_launcher_names(), ", ") +
                   " (defaults " + join(defaults, ", ") + ")", "",
                   [](ExperimentSettings& st, const std::string& v) { st.options.step_launcher = v; }, step_launcher_names()));
  s.push_back(text("results_dir", "results_dir", "folder that holds one folder per experiment", "results",
                   [](ExperimentSettings& st, const std::string& v) { st.results_dir = v; }));
  DriverSetting walltime{"walltime", "walltime", Kind::Walltime, "wall time of each run (HH:MM:SS or seconds)", "01:00:00",
                         [](ExperimentRequest& r, const std::string& v, const std::string& origin) {
                           r.settings.walltime_s = parse_walltime(v, origin);
                         }};
  s.push_back(walltime);
  s.push_back(integer("max_parallel", "runs submitted at once (0: 1 for local, all for slurm; with --array: the array's throttle)", 0, 0,
                      kMaxParallel, [](ExperimentSettings& st, int64_t v) { st.max_parallel = int(v); }));
  s.push_back(integer("max_submitted", "runs submitted to the scheduler at once at most, also with --array (every array task counts); the rest are submitted as earlier ones end (0: what the scheduler takes, for Slurm half its controller's MaxJobCount; a per-user limit such as MaxSubmitJobs narrows it when Slurm refuses a job for it)",
                      0, 0, kMaxRunsLimit, [](ExperimentSettings& st, int64_t v) { st.max_submitted = v; }));
  s.push_back(boolean("array", "submit runs as job arrays, one per resource shape (slurm)", [](ExperimentSettings& st, bool v) { st.array = v; }));
  s.push_back({"repeat", "repeat", Kind::Number,
               "run every permutation this many times, each a run of its own (its repeat index in the run's provenance), so that "
               "statistics and compare see what varies between runs; auto: 5, then more rounds for the permutations whose "
               "across-runs interval is still wider than --precision (up to --max_repeat)",
               "1", [](ExperimentRequest& r, const std::string& v, const std::string& origin) {
                 r.settings.repeat_auto = v == "auto";
                 if (r.settings.repeat_auto) {
                   r.settings.repeat = 5;
                   return;
                 }
                 auto i = parse_int(v);
                 if (!i) throw UserError(origin + ": '" + v + "' is not a number of runs or auto");
                 require_range(origin, *i, 1, kMaxRepeat);
                 r.settings.repeat = int(*i);
               }});
  s.push_back(integer("max_repeat", "with --repeat=auto: runs of a permutation at the most", 30, 5, kMaxRepeat,
                      [](ExperimentSettings& st, int64_t v) { st.max_repeat = int(v); }));
  s.push_back({"precision", "precision", Kind::Number,
               "with --repeat=auto: a permutation is measured enough once every figure's across-runs interval lies within "
               "+- this percent of its median (e.g. 2 or 2%)",
               "2", [](ExperimentRequest& r, const std::string& v, const std::string& origin) {
                 std::string t = v;
                 if (!t.empty() && t.back() == '%') t.pop_back();
                 auto d = parse_double(t);
                 if (!d || !(*d > 0 && *d <= 100)) throw UserError(origin + ": '" + v + "' is not a percent above 0 and at most 100");
                 r.settings.precision_pct = *d;
               }});
  s.push_back(text("repeat_order", "repeat_order", "the order of repeated runs: interleaved (every permutation once, then again: drift "
                   "over time is spread over all), grouped (a permutation's repeats together), random (shuffled, seeded by the experiment's name)",
                   "interleaved", [](ExperimentSettings& st, const std::string& v) { st.repeat_order = v; }, {"interleaved", "grouped", "random"}));
  s.push_back({"scaling", "scaling", Kind::Text,
               "strong:PARAM or weak:PARAM (several: strong:nodes,weak:size): PARAM counts what the work is spread over, and the "
               "report gives speedup and parallel efficiency against its smallest value (stored with the runs; default: what "
               "the plugin declares, else nodes, ranks_per_node, *_nodes, *_per_node, *threads, strong)",
               "", [](ExperimentRequest& r, const std::string& v, const std::string& origin) {
                 parse_scaling_list(v, origin);  // refused here, with the flag or file line named
                 r.settings.scaling = v;
               }});
  s.push_back(text("revision", "revision", "the revision of the code under test (a commit, a tag, a version), stored with every run "
                   "(compare names it when A and B differ)", "", [](ExperimentSettings& st, const std::string& v) { st.revision = v; }));
  s.push_back(text("source", "source", "a git working tree of the code under test: its commit, whether tracked files differ from it, "
                   "and the commit's time are stored with every run (the commit is the revision unless --revision says)", "",
                   [](ExperimentSettings& st, const std::string& v) { st.source = v; }));
  s.push_back({"counters", "counters", Kind::Text,
               "performance counters of each rank's work and of each exec invocation, as resource.counter.<name>: perf names "
               "(instructions, cycles, branch-misses, cache-misses, task-clock, page-faults, context-switches, ...) or PAPI's "
               "(PAPI_TOT_INS, PAPI_TOT_CYC, PAPI_BR_MSP, ...); a node that cannot count one refuses the run with the reason",
               "", [](ExperimentRequest& r, const std::string& v, const std::string& origin) {
                 for (auto& name : fanout_sdk::counter_names(v))
                   if (!fanout_sdk::counter_named(name)) {
                     std::string known;
                     for (auto& c : fanout_sdk::known_counters()) known += (known.empty() ? "" : ", ") + std::string(c.name);
                     throw UserError(origin + ": no counter '" + name + "' (known: " + known + ")");
                   }
                 r.settings.counters = v;
               }});
  s.push_back(text("resources", "resources", "on: every rank records what it cost as resource.* figures (peak RSS, user and system CPU, "
                   "context switches, major faults, storage bytes read and written; exec: per invocation of the program with the "
                   "children it waited for); off: nothing beside the run's own figures", "on",
                   [](ExperimentSettings& st, const std::string& v) { st.resources = v != "off"; }, {"on", "off"}));
  s.push_back(text("reference", "reference", "check the sweep's figures against these reference values at its end (fanout results check); "
                   "exit 1 when one fails", "", [](ExperimentSettings& st, const std::string& v) { st.reference = v; }));
  s.push_back(text("lab", "lab", "add the experiment to this lab store when the sweep ends (fanout history add): an SQLite file or "
                   "postgresql://...; 'default' is $FANOUT_LAB, else ~/.local/share/fanout/lab.sqlite", "",
                   [](ExperimentSettings& st, const std::string& v) { st.lab = v; }));
  s.push_back(integer("max_retries", "run a failed run (FAILED, TIMEOUT, NODE_FAIL, ...) again up to this many times", 0, 0, kMaxRetries,
                      [](ExperimentSettings& st, int64_t v) { st.max_retries = int(v); }));
  s.push_back(integer("stall_timeout", "seconds without a new sample from any rank after which a running run is stopped as TIMEOUT (0: off; --walltime still applies)",
                      0, 0, kMaxSeconds, [](ExperimentSettings& st, int64_t v) { st.stall_timeout_s = v; }));
  s.push_back(integer("unknown_timeout", "seconds a job's state may stay unknowable (the scheduler's queries failing) before its run is recorded FAILED and the job cancelled; not retried, as the job may still run where the scheduler cannot see",
                      600, 1, kMaxSeconds, [](ExperimentSettings& st, int64_t v) { st.unknown_timeout_s = v; }));
  s.push_back(integer("max_pending", "seconds a job may wait in the queue; then it is cancelled and recorded FAILED with the scheduler's reason, and the sweep goes on (0: no limit)",
                      0, 0, kMaxSeconds, [](ExperimentSettings& st, int64_t v) { st.max_pending_s = v; }));
  s.push_back(list("fatal_pending", "fatal_pending", "one more pending reason that fails a job at once, matched as the start of the scheduler's reason, e.g. AssocMaxJobsLimit (besides PartitionDown, PartitionInactive, PartitionNodeLimit, 'ReqNodeNotAvail, UnavailableNodes', InvalidQOS, InvalidAccount, BadConstraints; 'none' empties the list; repeatable)",
                   [](ExperimentRequest& r, const std::string& v, const std::string&) {
                     if (v == "none") r.settings.fatal_pending.clear();
                     else r.settings.fatal_pending.push_back(v);
                   }));
  s.push_back(integer("status_interval", "seconds between status lines (done / running / pending / failed, ETA) when the output is not a terminal; a terminal's line is redrawn in place (0: none)",
                      30, 0, kMaxSeconds, [](ExperimentSettings& st, int64_t v) { st.status_interval_s = v; }));
  s.push_back(integer("max_runs", "refuse an experiment of more permutations than this", kDefaultMaxRuns, 1, kMaxRunsLimit,
                      [](ExperimentSettings& st, int64_t v) { st.max_runs = v; }));
  s.push_back(integer("max_local_ranks", "ranks one run may start on this host with the local launcher (0: 8 per CPU fanout may use); a larger run is refused before anything starts",
                      0, 0, 10000000, [](ExperimentSettings& st, int64_t v) { st.max_local_ranks = v; }));
  s.push_back(boolean("verbose", "print each run's submission and start, and the driver's own cost at the end (submission, polls, queries, CPU, memory)",
                      [](ExperimentSettings& st, bool v) { st.verbose = v; }));
  s.push_back(boolean("no_reuse", "start the experiment's shared step (e.g. the database of throughput_standard) in every run instead of once per group of runs",
                      [](ExperimentSettings& st, bool v) { st.no_reuse = v; }));
  s.push_back(boolean("resume", "run only the permutations without a COMPLETED run in this experiment's database",
                      [](ExperimentSettings& st, bool v) { st.resume = v; }));
  s.push_back(text("site", "site", "site profile (TOML: modules, env, setup lines per site and role) the batch scripts run before the steps; default $FANOUT_SITE, else ~/.config/fanout/site.toml; none: no profile", "",
                   [](ExperimentSettings& st, const std::string& v) { st.site = v; }));
  s.push_back(text("mpi", "mpi", "the MPI whose launcher starts steps with --step_launcher=mpirun: openmpi (mpirun), mpich (Hydra mpiexec), pals (Cray PALS mpiexec)", "openmpi",
                   [](ExperimentSettings& st, const std::string& v) { st.options.mpi = v; }, {"openmpi", "mpich", "pals"}));
  DriverSetting binding{"binding", "binding", Kind::Text,
                        "how the tasks of steps that do not say are bound to CPUs: cores, none, map:<cpu>,... (default: the scheduler's)", "",
                        [](ExperimentRequest& r, const std::string& v, const std::string& origin) {
                          if (auto why = binding_error(v); !why.empty()) throw UserError(origin + ": " + why);
                          r.settings.binding = v;
                        }};
  s.push_back(binding);
  s.push_back(boolean("mpi_program", "the steps' programs are MPI programs whose MPI_COMM_WORLD is the step's ranks (exec --command=./mpi_bench): "
                      "srun --mpi=pmix or mpirun starts them and the program, not fanout-rank, joins the launcher's PMIx",
                      [](ExperimentSettings& st, bool v) { st.mpi_program = v; }));
  s.push_back(text("partition", "partition", "scheduler partition / queue", "",
                   [](ExperimentSettings& st, const std::string& v) { st.options.partition = v; }));
  s.push_back(text("account", "account", "scheduler account", "", [](ExperimentSettings& st, const std::string& v) { st.options.account = v; }));
  s.push_back(text("constraint", "constraint", "node features the runs need", "",
                   [](ExperimentSettings& st, const std::string& v) { st.options.constraint = v; }));
  s.push_back(boolean("exclusive", "ask for whole nodes", [](ExperimentSettings& st, bool v) { st.options.exclusive = v; }));
  s.push_back(list("batch_args", "batch_args", "more batch options as key=value (slurm: qos, reservation, mem, gres, nodelist, exclude_nodes, comment; repeatable)",
                   [](ExperimentRequest& r, const std::string& v, const std::string& origin) {
                     for (auto& kv : job_args(v, origin)) r.settings.options.batch_args.push_back(kv);
                   }));
  // A shared step's service job (SmartSim-Scaling's database job, run_db_as_batch) apart from the runs' jobs.
  // SmartSim-Scaling takes db_hosts as a Python list ([n3,n4]); Slurm's --nodelist wants n3,n4.
  DriverSetting service_hosts{"service_hosts", "service_hosts", Kind::Text,
                              "nodes for each shared step's service job: n3,n4 or [n3,n4] (SmartSim-Scaling's db_hosts; slurm --nodelist)", "",
                              [](ExperimentRequest& r, const std::string& v, const std::string& origin) {
                                // Only a bracketed whole is a list: Slurm's own host lists (nid[01-04]) pass as given.
                                const bool listed = v.size() >= 2 && v.front() == '[' && v.back() == ']';
                                r.settings.service_hosts = listed ? join(parse_list_value(v, origin), ",") : v;
                              }};
  service_hosts.alias = "db_hosts";
  s.push_back(service_hosts);
  DriverSetting service_args = list("service_args", "service_args", "an allocation option of the service jobs only, key=value or a JSON object (SmartSim-Scaling's db_node_feature): constraint, partition, account, or a --batch_args key; repeatable",
                                    [](ExperimentRequest& r, const std::string& v, const std::string& origin) {
                                      for (auto& kv : job_args(v, origin)) r.settings.service_args.push_back(kv);
                                    });
  service_args.alias = "db_node_feature";
  s.push_back(service_args);
  s.push_back(list("node_feature", "node_feature", "an allocation option of the runs' jobs only (not the service jobs), key=value or a JSON object (SmartSim-Scaling's node_feature); repeatable",
                   [](ExperimentRequest& r, const std::string& v, const std::string& origin) {
                     for (auto& kv : job_args(v, origin)) r.settings.run_args.push_back(kv);
                   }));
  DriverSetting service_walltime{"service_walltime", "service_walltime", Kind::Walltime,
                                 "wall time of each service job (SmartSim-Scaling's wall_time; default: its runs' wall times one after another, plus 10 minutes)", "",
                                 [](ExperimentRequest& r, const std::string& v, const std::string& origin) {
                                   r.settings.service_walltime_s = parse_walltime(v, origin);
                                 }};
  service_walltime.alias = "wall_time";
  s.push_back(service_walltime);
  s.push_back(list("zip", "", "parameters whose lists advance together, e.g. --zip=a,b (repeatable)",
                   [](ExperimentRequest& r, const std::string& z, const std::string& origin) {
                     std::vector<std::string> names;
                     for (auto& n : split(z, ',')) names.push_back(trim(n));
                     r.zips.push_back({names, origin + "=" + z});
                   }));
  s.push_back(list("exclude", "", "drop permutations matching all of name=value[,name=value] (repeatable)",
                   [](ExperimentRequest& r, const std::string& e, const std::string& origin) {
                     r.excludes.push_back(parse_exclude_flag(e, origin + "=" + e));
                   }));
  return s;
}

}  // namespace

const std::vector<DriverSetting>& driver_settings() {
  static const std::vector<DriverSetting> settings = [] {
    auto all = make_settings();
    for (auto& s : all)  // what was given, so that a site profile's defaults fill in only the rest
      s.apply = [apply = s.apply, name = s.name](ExperimentRequest& r, const std::string& v, const std::string& origin) {
        apply(r, v, origin);
        r.settings.given.insert(name);
        r.settings.origins[name] = origin;
      };
    return all;
  }();
  return settings;
}

std::vector<std::string> setting_texts(const DriverSetting& setting, const toml::node& v, const std::filesystem::path& file, const std::string& origin) {
  auto str = [&]() {
    auto s = v.value_exact<std::string>();
    if (!s) throw UserError(origin + " must be a string");
    return *s;
  };
  // The file's TOML types here; the one check every setting has wherever it comes from is its apply().
  switch (setting.kind) {
    case DriverSetting::Kind::Int:
      if (!v.value_exact<int64_t>()) throw UserError(origin + " must be an integer");
      return {std::to_string(*v.value_exact<int64_t>())};
    case DriverSetting::Kind::Bool:
      if (!v.value_exact<bool>()) throw UserError(origin + " must be true or false");
      return {*v.value_exact<bool>() ? "true" : "false"};
    case DriverSetting::Kind::Walltime:
      return {v.value_exact<int64_t>() ? std::to_string(*v.value_exact<int64_t>()) : str()};
    case DriverSetting::Kind::Number:
      if (auto i = v.value_exact<int64_t>()) return {std::to_string(*i)};
      if (auto d = v.value_exact<double>()) return {std::to_string(*d)};
      return {str()};
    case DriverSetting::Kind::List:
      if (auto* items = v.as_array()) {
        std::vector<std::string> out;
        for (auto& item : *items) {
          auto s = item.value_exact<std::string>();
          if (!s) throw UserError(toml_at(file, item) + ": " + setting.file_key + " must hold strings");
          out.push_back(*s);
        }
        return out;
      }
      return {str()};
    case DriverSetting::Kind::Text:
      return {str()};
  }
  return {};
}

const DriverSetting* setting_for_file_key(const std::string& key) {
  for (auto& s : driver_settings())
    if (!key.empty() && (s.file_key == key || (!s.file_key.empty() && s.alias == key))) return &s;
  return nullptr;
}

}  // namespace fanout
