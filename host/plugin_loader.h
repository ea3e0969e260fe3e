// Loads plugins through the ABI in plugins/sdk/fanout_plugin.h. The checks run in a fixed order, each with
// its own error, as Slurm's plugin loader does: the file opens; it exports the entry symbol ("not a fanout
// plugin"); its ABI version is one this host reads (4, or 3 through host/abi_v3.h); its descriptor is well
// formed; and only when a rank asks for it, init() succeeds ("init failed"). Whatever the ABI, the descriptor
// is read once into the model below: nothing else sees the plugin's raw structs.
#pragma once
#include <algorithm>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "plugins/sdk/fanout_plugin.h"

namespace fanout {

enum class PluginErrorKind { CannotOpen, NotAPlugin, BadVersion, BadDescriptor, InitFailed, NotFound };

class PluginError : public std::runtime_error {
 public:
  PluginError(PluginErrorKind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
  PluginErrorKind kind() const { return kind_; }

 private:
  PluginErrorKind kind_;
};

struct ParamSpec {
  std::string name;
  fanout_param_type type = FANOUT_PARAM_STRING;
  std::string default_value;
  std::string help;
  std::vector<std::string> choices;  // empty: any value of the type
  std::string min, max;              // empty: open
  bool min_exclusive = false, max_exclusive = false;
  bool path_output = false;  // PATH: a file the run may write (its folder must exist), not one it reads
  bool repeatable = false;   // the flag may be given several times: the values join, one per line (not a sweep)
  std::string scaling;       // "strong" or "weak": it counts what the work is spread over (ABI 4.8); "" otherwise
  bool setting = false;      // how the plugin runs, not what is measured: no CSV column unless it varies (ABI 4.9)
};

struct RoleSpec {
  std::string name;
  std::string summary;
  fanout_role_fn run;
};

struct StepTemplate {
  std::string role;
  std::string nodes;           // a count expression (below)
  std::string tasks_per_node;  // a count expression
  std::string placement;       // "disjoint" or "colocated"
  std::string cpus_per_task = "1";  // a count expression
  std::string gpus_per_task = "0";  // an amount expression (below)
  std::string memory_mb = "0";      // an amount expression: megabytes per node
  std::string binding;              // "cores", "none", "map:<cpu>,...", or "" (the run's --binding)
  bool exclusive = false;           // CPUs of its own (no overlap with the job's other steps)
  // The step's program is an MPI program whose MPI_COMM_WORLD is the step's ranks: the rank runner leaves the
  // launcher's PMIx to it (a PMIx server takes one connection per rank) and meets its peers through fanout's
  // rendezvous service instead.
  bool mpi_program = false;
  // Experiment files only. The step's name (its samples, logs and exits carry it): empty = role. Several steps
  // may run one role under different names (two exec steps).
  std::string name;
  // The file's further keys for this step (the plugin's step_keys) as one JSON object, and where each was given.
  std::string settings_json;
  std::vector<std::pair<std::string, std::string>> setting_origins;  // key, "file:line"
  std::string origin;  // "file:line" of the [[steps]] entry ("" for a plugin's template)
  // Another plugin whose role this step runs (a name or a path; empty: the experiment's), as a shared step: a
  // service job of its own, once per group of runs agreeing on its parameters (the smartsim plugin's db for
  // exec steps).
  std::string plugin;
  bool shared = false;  // the step is the experiment's shared step (a service job), as a template's shared_step
  const std::string& label() const { return name.empty() ? role : name; }
};

struct ExperimentTemplate {
  std::string name;
  std::string summary;
  std::vector<StepTemplate> steps;
  std::vector<std::pair<std::string, std::string>> defaults;
  std::string session_name;            // "" or a template with {param}
  std::string shared_step;             // "" or the role of a step shared by a group of runs
  std::vector<std::string> shared_by;  // the parameters that define a group
  std::vector<std::string> uses;       // the parameters it uses, in the plugin's order (every one when it says none)
  bool uses_param(const std::string& name) const { return std::find(uses.begin(), uses.end(), name) != uses.end(); }
  // A parameter's default under this experiment: its own override, else the plugin's.
  std::string default_text(const ParamSpec& p) const {
    for (auto& [n, v] : defaults)
      if (n == p.name) return v;
    return p.default_value;
  }
};

// A step of role on nodes x tasks_per_node, the rest as StepTemplate's defaults.
inline StepTemplate make_step(std::string role, std::string nodes, std::string tasks_per_node, std::string placement) {
  StepTemplate st;
  st.role = std::move(role), st.nodes = std::move(nodes), st.tasks_per_node = std::move(tasks_per_node), st.placement = std::move(placement);
  return st;
}

// The {name} references of a session-name template (empty names and unbalanced braces are errors: nullopt).
std::optional<std::vector<std::string>> template_references(const std::string& text);

// What a plugin says of one of its metrics (fanout_metric_spec): exact name or a prefix ending in '*'.
struct MetricSpec {
  std::string name;
  int better = FANOUT_BETTER_UNDECLARED;  // fanout_better
  uint32_t flags = 0;                     // FANOUT_METRIC_SETUP_COST
  std::string help;
};
// The declaration that covers `metric` in `specs`: an exact name first, else the longest matching prefix; nullptr
// when none does.
const MetricSpec* find_metric_spec(const std::vector<MetricSpec>& specs, const std::string& metric);
// "lower", "higher", "none", or "" for FANOUT_BETTER_UNDECLARED (the text stored with the samples).
const char* better_name(int better);

// One step of one permutation for Plugin::plan_step (fanout_step_plan).
struct StepPlanRequest {
  std::string step, role, settings_json, submit_dir;
  std::vector<std::pair<std::string, std::string>> run_steps;  // every step of the run: name, settings JSON
  std::vector<std::pair<std::string, std::string>> values;
  int64_t ranks = 1;
  bool local = false;  // the ranks run on this machine (FANOUT_STEP_PLAN_LOCAL)
};
// The plugin's answer: accepted (what each rank will run, and warnings) or refused (why).
struct StepPlanAnswer {
  bool accepted = true;
  std::string runs;                   // what each rank will run ("" when the plugin does not say)
  std::vector<std::string> warnings;  // its "warning: " lines, without the prefix
  std::string refusal;
};

// A loaded plugin: the shared object stays open for the lifetime of this object.
class Plugin {
 public:
  ~Plugin();
  Plugin(const Plugin&) = delete;
  Plugin& operator=(const Plugin&) = delete;

  // Opens and checks a plugin without initialising it (what the driver needs for help and validation).
  static std::unique_ptr<Plugin> open(const std::filesystem::path& path);
  // Calls the plugin's init(); throws PluginError(InitFailed) naming the file and the plugin's reason.
  void init();

  const std::filesystem::path& path() const { return path_; }
  uint32_t abi_version() const { return abi_version_; }  // what the plugin was built for: the host ops it gets
  const std::string& name() const { return name_; }
  const std::string& summary() const { return summary_; }
  const std::string& version() const { return version_; }
  const std::vector<ParamSpec>& params() const { return params_; }
  const ParamSpec* param(const std::string& name) const;
  const RoleSpec* role(const std::string& name) const;
  std::vector<std::string> role_names() const;
  const std::vector<ExperimentTemplate>& experiments() const { return experiments_; }
  // Parameters it does not declare are the user's own (FANOUT_PLUGIN_USER_PARAMETERS).
  bool user_parameters() const { return user_parameters_; }
  // Keys an experiment file's [[steps]] may carry for its roles (fanout_plugin.step_keys).
  const std::vector<std::string>& step_keys() const { return step_keys_; }
  // The metrics it describes (fanout_plugin.metrics; empty for a plugin built before ABI 4.6).
  const std::vector<MetricSpec>& metrics() const { return metrics_; }
  const ExperimentTemplate* experiment(const std::string& name) const;  // nullptr when there is none of that name
  // What a run's roles read: its stored values (the parameters its experiment uses) and, for the ones the
  // experiment does not use, their fixed defaults under it. A run without an experiment stores every value.
  std::vector<std::pair<std::string, std::string>> values_for_roles(const std::string& experiment,
                                                                    std::vector<std::pair<std::string, std::string>> stored) const;
  // The plugin's own check of one permutation (names and values in order); empty when it accepts them or has
  // no check, else its reason.
  std::string check(const std::vector<std::pair<std::string, std::string>>& values) const;
  // The plugin's plan of one step (fanout_plugin.plan_step, ABI 4.7); accepted and empty when it has none.
  StepPlanAnswer plan_step(const StepPlanRequest& request) const;

 private:
  Plugin() = default;
  void read_abi3(const void* descriptor);
  void read_abi4(const void* descriptor);
  void check_and_complete();  // the descriptor checks, shared by every ABI; fills defaults (placement, shared_by)

  std::filesystem::path path_;
  void* handle_ = nullptr;
  uint32_t abi_version_ = 0;
  std::string name_, summary_, version_;
  std::vector<ParamSpec> params_;
  std::vector<RoleSpec> roles_;
  std::vector<ExperimentTemplate> experiments_;
  std::vector<std::string> shared_by_text_;  // per experiment, as declared (validated into shared_by)
  std::vector<std::string> uses_text_;       // per experiment, as declared (validated into uses)
  int (*init_)(char*, size_t) = nullptr;
  void (*fini_)(void) = nullptr;
  int (*check_)(const char* const*, const char* const*, uint32_t, char*, size_t) = nullptr;
  int (*plan_step_)(const fanout_step_plan*, char*, size_t) = nullptr;
  bool initialised_ = false;
  bool user_parameters_ = false;
  std::vector<std::string> step_keys_;
  std::vector<MetricSpec> metrics_;
};

// A step's node or task count: "N", "{a}", "{a*b}" or "{a/b}" (rounded up).
struct CountExpr {
  int64_t literal = 0;   // when no parameter is named
  std::string lhs, rhs;  // parameter names (rhs empty for "{a}")
  char op = 0;           // '*' or '/' when rhs is set
  // An amount's condition (" if <param>=<value>"): the count where the parameter has that value, else 0.
  std::string when_param, when_value;
  std::vector<std::string> names() const;  // every parameter it reads, the condition's included
};
// Empty when the text is not a count expression.
std::optional<CountExpr> parse_count_expr(const std::string& text);
// A step's GPU or memory amount: a count expression or "0", optionally followed by " if <param>=<value>".
std::optional<CountExpr> parse_amount_expr(const std::string& text);
// The parameters a step's counts and amounts read (none for literals or text that does not parse).
std::vector<std::string> step_references(const StepTemplate& st);
// Why a step binding is not "cores", "none" or "map:<cpu>,<cpu>,..." (empty when it is one, or empty).
std::string binding_error(const std::string& binding);

const char* param_type_name(fanout_param_type t);
// Parameter names a plugin may not use: they are the driver's own flags (orchestrator/settings.h; a test keeps
// the two lists equal: the host cannot see the driver's table).
const std::vector<std::string>& reserved_flag_names();
// Checks one value against a parameter's type, choices and bounds; returns an empty string when valid, else why
// it is not ("'udp' is not one of tcp, uds").
std::string check_param_value(const ParamSpec& p, const std::string& value);
// The constraints in words for --help and `fanout plugins`: "one of tcp, uds", ">= 1", "> 0 and <= 64000", or "".
std::string describe_constraints(const ParamSpec& p);

// Where plugins are looked for, in order: $FANOUT_PLUGIN_PATH (colon-separated), then the directories next
// to the running executable (<exe dir>/plugins for the build tree, <exe dir>/../lib/fanout/plugins when
// installed). The current directory is never searched.
std::vector<std::filesystem::path> plugin_search_path();

struct PluginScan {
  std::vector<std::unique_ptr<Plugin>> plugins;
  std::vector<std::string> refused;  // one line per file that looked like a plugin but failed a check
};
// Opens every fanout_*.so on the search path; the first plugin of a given name wins.
PluginScan scan_plugins();
// A name ("calibration") is looked up on the search path; a path (contains '/') is opened directly.
std::unique_ptr<Plugin> find_plugin(const std::string& name_or_path);

}  // namespace fanout
