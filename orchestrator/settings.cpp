#include "orchestrator/settings.h"

#include <algorithm>

#include "common/error.h"
#include "common/text.h"

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

std::vector<DriverSetting> make_settings() {
  std::vector<DriverSetting> s;
  s.push_back(text("exp_name", "name", "name of the experiment (its folder under results_dir)", "",
                   [](ExperimentSettings& st, const std::string& v) { st.exp_name = v; }));
  s.push_back(text("launcher", "launcher", "where runs go: local, slurm, pbs, auto", "local",
                   [](ExperimentSettings& st, const std::string& v) { st.launcher = v; }));
  s.push_back(text("step_launcher", "step_launcher", "how steps start inside a batch job: srun (slurm default), mpirun (pbs default)", "",
                   [](ExperimentSettings& st, const std::string& v) { st.options.step_launcher = v; }, {"srun", "mpirun"}));
  s.push_back(text("results_dir", "results_dir", "folder that holds one folder per experiment", "results",
                   [](ExperimentSettings& st, const std::string& v) { st.results_dir = v; }));
  DriverSetting walltime{"walltime", "walltime", Kind::Walltime, "wall time of each run (HH:MM:SS or seconds)", "01:00:00",
                         [](ExperimentRequest& r, const std::string& v, const std::string& origin) {
                           r.settings.walltime_s = parse_walltime(v, origin);
                         }};
  s.push_back(walltime);
  s.push_back(integer("max_parallel", "runs submitted at once (0: 1 for local, all for slurm; with --array: the array's throttle)", 0, 0,
                      kMaxParallel, [](ExperimentSettings& st, int64_t v) { st.max_parallel = int(v); }));
  s.push_back(boolean("array", "submit runs as job arrays, one per resource shape (slurm)", [](ExperimentSettings& st, bool v) { st.array = v; }));
  s.push_back(integer("max_retries", "run a failed run (FAILED, TIMEOUT, NODE_FAIL, ...) again up to this many times", 0, 0, kMaxRetries,
                      [](ExperimentSettings& st, int64_t v) { st.max_retries = int(v); }));
  s.push_back(integer("stall_timeout", "seconds without a new sample from any rank after which a running run is stopped as TIMEOUT (0: off; --walltime still applies)",
                      0, 0, kMaxSeconds, [](ExperimentSettings& st, int64_t v) { st.stall_timeout_s = v; }));
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
  s.push_back(boolean("no_reuse", "start the experiment's shared step (e.g. the database of throughput_standard) in every run instead of once per group of runs",
                      [](ExperimentSettings& st, bool v) { st.no_reuse = v; }));
  s.push_back(boolean("resume", "run only the permutations without a COMPLETED run in this experiment's database",
                      [](ExperimentSettings& st, bool v) { st.resume = v; }));
  s.push_back(text("site", "site", "site profile (TOML: modules, env, setup lines per site and role) the batch scripts run before the steps; default $FANOUT_SITE, else ~/.config/fanout/site.toml; none: no profile", "",
                   [](ExperimentSettings& st, const std::string& v) { st.site = v; }));
  s.push_back(text("partition", "partition", "scheduler partition / queue", "",
                   [](ExperimentSettings& st, const std::string& v) { st.options.partition = v; }));
  s.push_back(text("account", "account", "scheduler account", "", [](ExperimentSettings& st, const std::string& v) { st.options.account = v; }));
  s.push_back(text("constraint", "constraint", "node features the runs need", "",
                   [](ExperimentSettings& st, const std::string& v) { st.options.constraint = v; }));
  s.push_back(boolean("exclusive", "ask for whole nodes", [](ExperimentSettings& st, bool v) { st.options.exclusive = v; }));
  s.push_back(list("batch_args", "batch_args", "more batch options as key=value (slurm: qos, reservation, mem, gres, nodelist, exclude_nodes, comment; repeatable)",
                   [](ExperimentRequest& r, const std::string& kv, const std::string& origin) {
                     auto eq = kv.find('=');
                     if (eq == std::string::npos || eq == 0) throw UserError(origin + ": '" + kv + "' is not key=value");
                     r.settings.options.batch_args.emplace_back(kv.substr(0, eq), kv.substr(eq + 1));
                   }));
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
  static const std::vector<DriverSetting> settings = make_settings();
  return settings;
}

const DriverSetting* setting_for_file_key(const std::string& key) {
  for (auto& s : driver_settings())
    if (!key.empty() && s.file_key == key) return &s;
  return nullptr;
}

}  // namespace fanout
