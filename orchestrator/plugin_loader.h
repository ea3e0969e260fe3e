// Loads plugins through the ABI in plugins/sdk/fanout_plugin.h. The checks run in a fixed order, each with
// its own error, as Slurm's plugin loader does: the file opens; it exports the entry symbol ("not a fanout
// plugin"); its ABI version matches ("built for ABI x, this fanout expects y"); its descriptor is well formed;
// and only when a rank asks for it, init() succeeds ("init failed").
#pragma once
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
  fanout_param_type type;
  std::string default_value;
  std::string help;
};

struct StepTemplate {
  std::string role;
  std::string nodes;           // a count expression (below)
  std::string tasks_per_node;  // a count expression
  std::string placement;       // "disjoint" or "colocated"
};

struct ExperimentTemplate {
  std::string name;
  std::string summary;
  std::vector<StepTemplate> steps;
  std::vector<std::pair<std::string, std::string>> defaults;
  std::string session_name;            // "" or a template with {param}
  std::string shared_step;             // "" or the role of a step shared by a group of runs
  std::vector<std::string> shared_by;  // the parameters that define a group
};

// The {name} references of a session-name template (empty names and unbalanced braces are errors: nullopt).
std::optional<std::vector<std::string>> template_references(const std::string& text);

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
  const fanout_plugin& descriptor() const { return *desc_; }
  std::string name() const { return desc_->name; }
  std::string summary() const { return desc_->summary ? desc_->summary : ""; }
  std::string version() const { return desc_->version ? desc_->version : ""; }
  const std::vector<ParamSpec>& params() const { return params_; }
  const ParamSpec* param(const std::string& name) const;
  const fanout_role* role(const std::string& name) const;
  std::vector<std::string> role_names() const;
  const std::vector<ExperimentTemplate>& experiments() const { return experiments_; }
  // The plugin's own check of one permutation (names and values in order); empty when it accepts them or has
  // no check, else its reason.
  std::string check(const std::vector<std::pair<std::string, std::string>>& values) const;

 private:
  Plugin() = default;
  std::filesystem::path path_;
  void* handle_ = nullptr;
  const fanout_plugin* desc_ = nullptr;
  std::vector<ParamSpec> params_;
  std::vector<ExperimentTemplate> experiments_;
  bool initialised_ = false;
};

// A step's node or task count: "N", "{a}", "{a*b}" or "{a/b}" (rounded up).
struct CountExpr {
  int64_t literal = 0;   // when no parameter is named
  std::string lhs, rhs;  // parameter names (rhs empty for "{a}")
  char op = 0;           // '*' or '/' when rhs is set
  std::vector<std::string> names() const;
};
// Empty when the text is not a count expression.
std::optional<CountExpr> parse_count_expr(const std::string& text);

const char* param_type_name(fanout_param_type t);
// Parameter names a plugin may not use: they are the driver's own flags.
const std::vector<std::string>& reserved_flag_names();
// Checks one value against a parameter type; returns an empty string when valid, else why it is not.
std::string check_param_value(fanout_param_type t, const std::string& value);

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
