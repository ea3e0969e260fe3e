#include "host/plugin_loader.h"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <regex>
#include <set>

#include "common/text.h"
#include "host/elf_symbols.h"
#include "host/abi_v3.h"

namespace fanout {

namespace fs = std::filesystem;

namespace {

std::string str(const char* s) { return s ? s : ""; }

bool valid_identifier(const std::string& s) {
  static const std::regex re("[A-Za-z_][A-Za-z0-9_]*");
  return std::regex_match(s, re);
}

}  // namespace

std::vector<std::string> CountExpr::names() const {
  std::vector<std::string> out;
  if (!lhs.empty()) out.push_back(lhs);
  if (!rhs.empty()) out.push_back(rhs);
  if (!when_param.empty()) out.push_back(when_param);
  return out;
}

std::optional<CountExpr> parse_count_expr(const std::string& text) {
  CountExpr e;
  if (text.size() > 2 && text.front() == '{' && text.back() == '}') {
    std::string inner = text.substr(1, text.size() - 2);
    size_t op = inner.find_first_of("*/");
    e.lhs = inner.substr(0, op);
    if (op != std::string::npos) e.op = inner[op], e.rhs = inner.substr(op + 1);
    if (!valid_identifier(e.lhs) || (e.op && !valid_identifier(e.rhs))) return std::nullopt;
    return e;
  }
  auto v = parse_int(text);
  if (!v || *v < 1) return std::nullopt;
  e.literal = *v;
  return e;
}

std::optional<CountExpr> parse_amount_expr(const std::string& text) {
  std::string count = text, condition;
  if (size_t at = text.find(" if "); at != std::string::npos) count = trim(text.substr(0, at)), condition = trim(text.substr(at + 4));
  auto e = count == "0" ? std::optional<CountExpr>(CountExpr{}) : parse_count_expr(count);
  if (!e || (text.find(" if ") != std::string::npos && condition.empty())) return std::nullopt;
  if (!condition.empty()) {
    size_t eq = condition.find('=');
    if (eq == std::string::npos) return std::nullopt;
    e->when_param = trim(condition.substr(0, eq)), e->when_value = trim(condition.substr(eq + 1));
    if (!valid_identifier(e->when_param) || e->when_value.empty()) return std::nullopt;
  }
  return e;
}

std::vector<std::string> step_references(const StepTemplate& st) {
  std::vector<std::string> out;
  for (auto& e : {parse_count_expr(st.nodes), parse_count_expr(st.tasks_per_node), parse_count_expr(st.cpus_per_task),
                  parse_amount_expr(st.gpus_per_task), parse_amount_expr(st.memory_mb)})
    if (e)
      for (auto& n : e->names()) out.push_back(n);
  return out;
}

std::string binding_error(const std::string& binding) {
  if (binding.empty() || binding == "cores" || binding == "none") return "";
  if (starts_with(binding, "map:")) {
    auto cpus = split(binding.substr(4), ',');
    bool ok = !cpus.empty();
    for (auto& c : cpus) ok = ok && parse_int(c) && *parse_int(c) >= 0 && *parse_int(c) < 65536;
    if (ok) return "";
  }
  return "'" + binding + "' is not cores, none or map:<cpu>,<cpu>,... (one CPU number per task of a node)";
}

const std::vector<std::string>& reserved_flag_names() {
  static const std::vector<std::string> names = {"exp_name", "launcher", "results_dir", "walltime", "max_parallel", "max_submitted",
                                                 "dry_run", "zip", "exclude", "partition", "account",
                                                 "constraint", "exclusive", "array", "batch_args", "step_launcher", "max_retries", "resume", "stall_timeout", "status_interval", "max_pending", "unknown_timeout", "fatal_pending", "site", "mpi", "mpi_program", "binding", "service_hosts", "db_hosts", "service_args", "db_node_feature", "node_feature", "service_walltime", "wall_time", "no_reuse", "max_runs", "max_local_ranks", "verbose", "repeat", "repeat_order", "max_repeat", "precision", "reference", "lab", "scaling", "resources", "counters", "revision", "source", "param", "help", "version"};
  return names;
}

const char* param_type_name(fanout_param_type t) {
  switch (t) {
    case FANOUT_PARAM_INT: return "int";
    case FANOUT_PARAM_FLOAT: return "float";
    case FANOUT_PARAM_STRING: return "string";
    case FANOUT_PARAM_BOOL: return "bool";
    case FANOUT_PARAM_PATH: return "path";
  }
  return "?";
}

namespace {

std::string type_error(fanout_param_type t, const std::string& value) {
  switch (t) {
    case FANOUT_PARAM_INT: return parse_int(value) ? "" : "'" + value + "' is not an integer";
    case FANOUT_PARAM_FLOAT: return parse_double(value) ? "" : "'" + value + "' is not a number";
    case FANOUT_PARAM_BOOL: return parse_bool(value) ? "" : "'" + value + "' is not a boolean (true/false)";
    case FANOUT_PARAM_STRING: return "";
    case FANOUT_PARAM_PATH: return value.empty() ? "an empty path" : "";
  }
  return "unknown parameter type";
}

// A number of the parameter's type (INT as an exact integer, FLOAT as a double) for comparing with a bound.
std::optional<long double> number(fanout_param_type t, const std::string& text) {
  if (t == FANOUT_PARAM_INT) {
    if (auto v = parse_int(text)) return (long double)*v;
  } else if (auto v = parse_double(text)) {
    return *v;
  }
  return std::nullopt;
}

}  // namespace

std::string check_param_value(const ParamSpec& p, const std::string& value) {
  if (auto why = type_error(p.type, value); !why.empty()) return why;
  if (!p.choices.empty() && p.type != FANOUT_PARAM_PATH && std::find(p.choices.begin(), p.choices.end(), value) == p.choices.end())
    return "'" + value + "' is not one of " + join(p.choices, ", ");
  const auto v = number(p.type, value);
  if (!p.min.empty() && v) {
    const long double lo = *number(p.type, p.min);
    if (p.min_exclusive ? !(*v > lo) : !(*v >= lo)) return "'" + value + "' is not " + (p.min_exclusive ? "> " : ">= ") + p.min;
  }
  if (!p.max.empty() && v) {
    const long double hi = *number(p.type, p.max);
    if (p.max_exclusive ? !(*v < hi) : !(*v <= hi)) return "'" + value + "' is not " + (p.max_exclusive ? "< " : "<= ") + p.max;
  }
  return "";
}

std::string describe_constraints(const ParamSpec& p) {
  if (p.type == FANOUT_PARAM_PATH)  // resolved against the working directory by the driver
    return std::string(p.path_output ? "a file to write" : "an existing file") + (p.choices.empty() ? "" : ", or " + join(p.choices, ", "));
  if (!p.choices.empty()) return "one of " + join(p.choices, ", ");
  std::string out;
  if (!p.min.empty()) out = (p.min_exclusive ? "> " : ">= ") + p.min;
  if (!p.max.empty()) out += (out.empty() ? "" : " and ") + std::string(p.max_exclusive ? "< " : "<= ") + p.max;
  return out;
}

Plugin::~Plugin() {
  if (initialised_ && fini_) fini_();
  if (handle_) dlclose(handle_);
}

namespace {

PluginError malformed(const std::string& path, const std::string& why) {
  return PluginError(PluginErrorKind::BadDescriptor, "plugin " + path + " has a malformed descriptor: " + why);
}

// ABI 4 reading: a struct is copied up to the size the plugin declares (fields it predates stay zero; fields
// of a newer header than ours are skipped), and arrays are stepped through by their elements' struct_size.
// kAbi4Size<T> is where T ended in ABI 4.0: anything smaller was not built from an ABI 4 header.
template <class T> constexpr uint32_t kAbi4Size = sizeof(T);
template <> constexpr uint32_t kAbi4Size<fanout_param_spec> = offsetof(fanout_param_spec, max) + sizeof(const char*);
template <> constexpr uint32_t kAbi4Size<fanout_role> = offsetof(fanout_role, run) + sizeof(fanout_role_fn);
template <> constexpr uint32_t kAbi4Size<fanout_step_spec> = offsetof(fanout_step_spec, placement) + sizeof(const char*);
template <> constexpr uint32_t kAbi4Size<fanout_param_default> = offsetof(fanout_param_default, value) + sizeof(const char*);
template <> constexpr uint32_t kAbi4Size<fanout_experiment_spec> = offsetof(fanout_experiment_spec, shared_by) + sizeof(const char*);
template <> constexpr uint32_t kAbi4Size<fanout_plugin> = offsetof(fanout_plugin, check) + sizeof(void*);

ParamSpec unconstrained(const char* name, fanout_param_type type, const char* default_value, const char* help) {
  ParamSpec p;
  p.name = str(name), p.type = type, p.default_value = str(default_value), p.help = str(help);
  return p;
}

template <class T>
T read_sized(const void* at, uint32_t size) {
  T out{};
  std::memcpy(static_cast<void*>(&out), at, std::min<size_t>(size, sizeof(T)));
  return out;
}

template <class T>
std::vector<T> read_array(const T* base, uint32_t n, const std::string& what, const std::string& path) {
  std::vector<T> out;
  if (n == 0) return out;
  if (!base) throw malformed(path, what + " is NULL with a count of " + std::to_string(n));
  uint32_t stride = 0;
  std::memcpy(&stride, base, sizeof stride);
  if (stride < kAbi4Size<T>)
    throw malformed(path, what + "[0].struct_size is " + std::to_string(stride) + ", smaller than ABI 4's " +
                              std::to_string(kAbi4Size<T>) + " (set it with the FANOUT_* macros or the SDK's builders)");
  for (uint32_t i = 0; i < n; ++i) {
    const char* element = reinterpret_cast<const char*>(base) + size_t(i) * stride;
    uint32_t size = 0;
    std::memcpy(&size, element, sizeof size);
    if (size != stride)
      throw malformed(path, what + "[" + std::to_string(i) + "].struct_size is " + std::to_string(size) + ", not " +
                                std::to_string(stride) + " as the array's first element");
    out.push_back(read_sized<T>(element, stride));
  }
  return out;
}

}  // namespace

const MetricSpec* find_metric_spec(const std::vector<MetricSpec>& specs, const std::string& metric) {
  const MetricSpec* best = nullptr;
  for (auto& s : specs) {
    if (s.name == metric) return &s;
    if (s.name.back() == '*' && metric.compare(0, s.name.size() - 1, s.name, 0, s.name.size() - 1) == 0 &&
        (!best || best->name.size() < s.name.size()))
      best = &s;
  }
  return best;
}

const char* better_name(int better) {
  switch (better) {
    case FANOUT_BETTER_LOWER: return "lower";
    case FANOUT_BETTER_HIGHER: return "higher";
    case FANOUT_BETTER_NONE: return "none";
    default: return "";
  }
}

std::unique_ptr<Plugin> Plugin::open(const fs::path& path) {
  const std::string p = path.string();
  std::unique_ptr<Plugin> plugin(new Plugin());
  plugin->path_ = path;
  std::error_code ec;
  if (!fs::is_regular_file(path, ec))
    throw PluginError(PluginErrorKind::CannotOpen, "cannot open plugin " + p + ": " + (fs::exists(path, ec) ? "not a regular file" : "no such file"));
  // Read from the file before dlopen, which runs the library's constructors: a file that is no plugin runs nothing.
  if (std::string why = elf_exports_function(path, FANOUT_PLUGIN_ENTRY_SYMBOL); !why.empty())
    throw PluginError(PluginErrorKind::NotAPlugin, p + " is not a fanout plugin: " + why + " (read from the file; none of its code ran)");
  plugin->handle_ = dlopen(p.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!plugin->handle_) throw PluginError(PluginErrorKind::CannotOpen, "cannot open plugin " + p + ": " + str(dlerror()));
  auto entry = reinterpret_cast<fanout_plugin_entry_fn>(dlsym(plugin->handle_, FANOUT_PLUGIN_ENTRY_SYMBOL));
  if (!entry)
    throw PluginError(PluginErrorKind::NotAPlugin,
                      p + " is not a fanout plugin: it does not export " FANOUT_PLUGIN_ENTRY_SYMBOL "()");
  const void* d = entry();
  if (!d) throw PluginError(PluginErrorKind::NotAPlugin, p + " is not a fanout plugin: its entry returned no descriptor");
  std::memcpy(&plugin->abi_version_, d, sizeof(uint32_t));  // the first field in every ABI
  if (plugin->abi_version_ == 3) {
    plugin->read_abi3(d);
  } else if (plugin->abi_version_ == FANOUT_PLUGIN_ABI_VERSION) {
    plugin->read_abi4(d);
  } else {
    throw PluginError(PluginErrorKind::BadVersion,
                      "plugin " + p + " was built for fanout plugin ABI " + std::to_string(plugin->abi_version_) +
                          ", this fanout expects ABI " + std::to_string(FANOUT_PLUGIN_ABI_VERSION) + " (and still loads " +
                          std::to_string(FANOUT_PLUGIN_ABI_OLDEST) + "); rebuild it");
  }
  plugin->check_and_complete();
  return plugin;
}

void Plugin::read_abi3(const void* descriptor) {
  const auto* d = static_cast<const abi3::Plugin*>(descriptor);
  name_ = str(d->name), summary_ = str(d->summary), version_ = str(d->version);
  init_ = d->init, fini_ = d->fini, check_ = d->check;
  if (d->n_params && !d->params) throw malformed(path_.string(), "params is NULL with a count");
  for (uint32_t i = 0; i < d->n_params; ++i)
    params_.push_back(unconstrained(d->params[i].name, d->params[i].type, d->params[i].default_value, d->params[i].help));
  if (d->n_roles && !d->roles) throw malformed(path_.string(), "roles is NULL with a count");
  for (uint32_t i = 0; i < d->n_roles; ++i) roles_.push_back({str(d->roles[i].name), str(d->roles[i].summary), d->roles[i].run});
  if (d->n_experiments && !d->experiments) throw malformed(path_.string(), "experiments is NULL with a count");
  for (uint32_t i = 0; i < d->n_experiments; ++i) {
    const auto& e = d->experiments[i];
    ExperimentTemplate t{str(e.name), str(e.summary), {}, {}, str(e.session_name), str(e.shared_step), {}, {}};
    for (uint32_t k = 0; e.steps && k < e.n_steps; ++k)
      t.steps.push_back(make_step(str(e.steps[k].role), str(e.steps[k].nodes), str(e.steps[k].tasks_per_node), str(e.steps[k].placement)));
    for (uint32_t k = 0; e.defaults && k < e.n_defaults; ++k) t.defaults.emplace_back(str(e.defaults[k].name), str(e.defaults[k].value));
    experiments_.push_back(std::move(t));
    shared_by_text_.push_back(str(e.shared_by));
    uses_text_.push_back("");
  }
}

void Plugin::read_abi4(const void* descriptor) {
  const std::string p = path_.string();
  uint32_t size = 0;
  std::memcpy(&size, static_cast<const char*>(descriptor) + offsetof(fanout_plugin, struct_size), sizeof size);
  if (size < kAbi4Size<fanout_plugin>)
    throw malformed(p, "its struct_size is " + std::to_string(size) + ", smaller than ABI 4's " +
                           std::to_string(kAbi4Size<fanout_plugin>) + " (build it with FANOUT_PLUGIN or the SDK)");
  const auto d = read_sized<fanout_plugin>(descriptor, size);
  name_ = str(d.name), summary_ = str(d.summary), version_ = str(d.version);
  init_ = d.init, fini_ = d.fini, check_ = d.check, plan_step_ = d.plan_step;  // NULL before ABI 4.7
  for (const auto& ps : read_array(d.params, d.n_params, "params", p)) {
    ParamSpec spec = unconstrained(ps.name, ps.type, ps.default_value, ps.help);
    if (ps.n_choices && !ps.choices) throw malformed(p, "parameter '" + spec.name + "' has n_choices but no choices");
    for (uint32_t k = 0; k < ps.n_choices; ++k) spec.choices.push_back(str(ps.choices[k]));
    spec.min = str(ps.min), spec.max = str(ps.max);
    spec.min_exclusive = ps.flags & FANOUT_PARAM_MIN_EXCLUSIVE, spec.max_exclusive = ps.flags & FANOUT_PARAM_MAX_EXCLUSIVE;
    spec.path_output = ps.flags & FANOUT_PARAM_PATH_OUTPUT;
    spec.repeatable = ps.flags & FANOUT_PARAM_REPEATABLE;
    spec.setting = ps.flags & FANOUT_PARAM_SETTING;
    if ((ps.flags & FANOUT_PARAM_STRONG_SCALING) && (ps.flags & FANOUT_PARAM_WEAK_SCALING))
      throw malformed(p, "parameter '" + spec.name + "' is flagged both strong and weak scaling (one or the other)");
    spec.scaling = ps.flags & FANOUT_PARAM_STRONG_SCALING ? "strong" : ps.flags & FANOUT_PARAM_WEAK_SCALING ? "weak" : "";
    params_.push_back(std::move(spec));
  }
  for (const auto& r : read_array(d.roles, d.n_roles, "roles", p)) roles_.push_back({str(r.name), str(r.summary), r.run});
  user_parameters_ = d.flags & FANOUT_PLUGIN_USER_PARAMETERS;  // 0 in a plugin built before ABI 4.5
  if (d.n_step_keys && !d.step_keys) throw malformed(p, "step_keys is NULL with a count");
  for (uint32_t k = 0; k < d.n_step_keys; ++k) {
    step_keys_.push_back(str(d.step_keys[k]));
    if (!valid_identifier(step_keys_.back())) throw malformed(p, "step key '" + step_keys_.back() + "' is not an identifier");
  }
  for (const auto& m : read_array(d.metrics, d.n_metrics, "metrics", p)) {
    MetricSpec spec{str(m.name), int(m.better), m.flags, str(m.help)};
    if (spec.name.empty() || spec.name == "*") throw malformed(p, "a metric description has no name");
    if (spec.better < FANOUT_BETTER_UNDECLARED || spec.better > FANOUT_BETTER_NONE)
      throw malformed(p, "metric '" + spec.name + "' declares better = " + std::to_string(spec.better) + " (0 to 3)");
    metrics_.push_back(std::move(spec));
  }
  for (const auto& e : read_array(d.experiments, d.n_experiments, "experiments", p)) {
    const std::string where = "experiment '" + str(e.name) + "' ";
    ExperimentTemplate t{str(e.name), str(e.summary), {}, {}, str(e.session_name), str(e.shared_step), {}, {}};
    for (const auto& st : read_array(e.steps, e.n_steps, where + "steps", p)) {
      StepTemplate s = make_step(str(st.role), str(st.nodes), str(st.tasks_per_node), str(st.placement));
      s.cpus_per_task = st.cpus_per_task ? str(st.cpus_per_task) : "1";
      s.gpus_per_task = st.gpus_per_task ? str(st.gpus_per_task) : "0";
      s.memory_mb = st.memory_mb ? str(st.memory_mb) : "0";
      s.binding = str(st.binding);
      s.exclusive = st.exclusive != 0;
      t.steps.push_back(std::move(s));
    }
    for (const auto& df : read_array(e.defaults, e.n_defaults, where + "defaults", p)) t.defaults.emplace_back(str(df.name), str(df.value));
    experiments_.push_back(std::move(t));
    shared_by_text_.push_back(str(e.shared_by));
    uses_text_.push_back(str(e.uses));  // NULL in an ABI 4.0 plugin: its struct_size ends before `uses`
  }
}

void Plugin::check_and_complete() {
  const std::string p = path_.string();
  auto bad = [&](const std::string& why) { return malformed(p, why); };
  if (!std::regex_match(name_, std::regex("[a-z0-9_]+"))) throw bad("name must match [a-z0-9_]+");
  if (roles_.empty()) throw bad("it declares no roles");
  std::set<std::string> seen;
  for (const auto& ps : params_) {
    const std::string& name = ps.name;
    if (!valid_identifier(name)) throw bad("parameter name '" + name + "' is not an identifier");
    if (!seen.insert(name).second) throw bad("parameter '" + name + "' is declared twice");
    const auto& reserved = reserved_flag_names();
    if (std::find(reserved.begin(), reserved.end(), name) != reserved.end())
      throw bad("parameter '" + name + "' collides with the driver's own --" + name + " flag");
    if (ps.type < FANOUT_PARAM_INT || ps.type > FANOUT_PARAM_PATH) throw bad("parameter '" + name + "' has an unknown type");
    if (!ps.choices.empty() && ps.type != FANOUT_PARAM_STRING && ps.type != FANOUT_PARAM_INT && ps.type != FANOUT_PARAM_PATH)
      throw bad("parameter '" + name + "' has choices, which only string, int and path parameters may have");
    for (const auto& c : ps.choices)
      if (auto why = type_error(ps.type, c); !why.empty()) throw bad("parameter '" + name + "' choice " + why);
    for (const auto* bound : {&ps.min, &ps.max}) {
      if (bound->empty()) continue;
      if (ps.type != FANOUT_PARAM_INT && ps.type != FANOUT_PARAM_FLOAT)
        throw bad("parameter '" + name + "' has a min or max, which only int and float parameters may have");
      if (!number(ps.type, *bound)) throw bad("parameter '" + name + "' bound '" + *bound + "' is not a " + param_type_name(ps.type));
    }
    if (!ps.min.empty() && !ps.max.empty() && *number(ps.type, ps.min) > *number(ps.type, ps.max))
      throw bad("parameter '" + name + "' has min " + ps.min + " above max " + ps.max);
  }
  for (size_t i = 0; i < roles_.size(); ++i)
    if (roles_[i].name.empty() || !roles_[i].run) throw bad("role " + std::to_string(i) + " has no name or entry function");
  for (size_t i = 0; i < experiments_.size(); ++i) {
    ExperimentTemplate& t = experiments_[i];
    if (!valid_identifier(t.name)) throw bad("experiment name '" + t.name + "' is not an identifier");
    if (t.steps.empty()) throw bad("experiment '" + t.name + "' has no steps");
    for (auto& st : t.steps) {
      if (st.placement.empty()) st.placement = "disjoint";
      if (!role(st.role)) throw bad("experiment '" + t.name + "' names unknown role '" + st.role + "'");
      if (!parse_count_expr(st.nodes) || !parse_count_expr(st.tasks_per_node) || !parse_count_expr(st.cpus_per_task))
        throw bad("experiment '" + t.name + "' step '" + st.role + "' needs nodes/tasks_per_node/cpus_per_task as N, {a}, {a*b} or {a/b}");
      if (!parse_amount_expr(st.gpus_per_task) || !parse_amount_expr(st.memory_mb))
        throw bad("experiment '" + t.name + "' step '" + st.role + "' needs gpus_per_task/memory_mb as 0, N, {a}, {a*b} or {a/b}, " +
                  "optionally followed by ' if <param>=<value>'");
      if (auto why = binding_error(st.binding); !why.empty()) throw bad("experiment '" + t.name + "' step '" + st.role + "' binding " + why);
      if (st.placement != "disjoint" && st.placement != "colocated")
        throw bad("experiment '" + t.name + "' step '" + st.role + "' has placement '" + st.placement + "'");
    }
    for (auto& [n, v] : t.defaults)
      if (!param(n)) throw bad("experiment '" + t.name + "' overrides unknown parameter '" + n + "'");
    auto refs = template_references(t.session_name);
    if (!refs) throw bad("experiment '" + t.name + "' has a malformed session_name '" + t.session_name + "'");
    for (auto& r : *refs)
      if (!param(r)) throw bad("experiment '" + t.name + "' session_name refers to unknown parameter '" + r + "'");
    if (!t.shared_step.empty()) {
      auto is_shared = [&](const StepTemplate& st) { return st.role == t.shared_step; };
      if (std::count_if(t.steps.begin(), t.steps.end(), is_shared) != 1 || t.steps.size() < 2)
        throw bad("experiment '" + t.name + "' shares step '" + t.shared_step + "', which is not exactly one of its several steps");
      for (size_t k = 1; k < t.steps.size(); ++k)
        if (t.steps[k].placement == "colocated" && is_shared(t.steps[0]))
          throw bad("experiment '" + t.name + "' step '" + t.steps[k].role + "' is colocated with the shared step");
      for (auto& n : split(shared_by_text_[i], ',')) {
        std::string name = trim(n);
        if (name.empty()) continue;  // no names: one group of every permutation
        if (!param(name)) throw bad("experiment '" + t.name + "' shared_by names unknown parameter '" + name + "'");
        t.shared_by.push_back(name);
      }
    }
    // The parameters it uses, in the plugin's declaration order (the sweep's order); none declared: all of them.
    std::vector<std::string> declared;
    for (auto& n : split(uses_text_[i], ',')) {
      const std::string name = trim(n);
      if (name.empty()) continue;
      if (!param(name)) throw bad("experiment '" + t.name + "' uses unknown parameter '" + name + "'");
      declared.push_back(name);
    }
    for (auto& ps : params_)
      if (declared.empty() || std::find(declared.begin(), declared.end(), ps.name) != declared.end()) t.uses.push_back(ps.name);
    if (refs)
      for (auto& r : *refs)
        if (!t.uses_param(r)) throw bad("experiment '" + t.name + "' names its sessions by '" + r + "', which it does not use");
    // A parameter the experiment does not use has one value in all its runs, so it never splits a group.
    std::erase_if(t.shared_by, [&](const std::string& n) { return !t.uses_param(n); });
    for (auto& st : t.steps)
      for (auto& r : step_references(st))
        if (param(r) && !t.uses_param(r))
            throw bad("experiment '" + t.name + "' sizes step '" + st.role + "' by '" + r + "', which it does not use");
    // A parameter the experiment does not use cannot be given, so a list default would multiply its runs unseen.
    for (auto& ps : params_) {
      if (t.uses_param(ps.name)) continue;
      const std::string def = t.default_text(ps);
      if (!trim(def).empty() && trim(def).front() == '[')
        throw bad("experiment '" + t.name + "' does not use '" + ps.name + "' but its default is a list (" + def + "): give it a single default");
      // The ranks get this text as it is (values_for_roles): it must be a plain value the parameter accepts.
      if (!trim(def).empty() && (trim(def).front() == '"' || trim(def).front() == '\''))
        throw bad("experiment '" + t.name + "' does not use '" + ps.name + "': give its default unquoted (" + def + ")");
      if (auto why = trim(def).empty() ? std::string() : check_param_value(ps, trim(def)); !why.empty())
        throw bad("experiment '" + t.name + "' fixes '" + ps.name + "' to " + def + ": " + why);
    }
  }
}

std::optional<std::vector<std::string>> template_references(const std::string& text) {
  std::vector<std::string> refs;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '}') return std::nullopt;
    if (text[i] != '{') continue;
    size_t end = text.find('}', i);
    if (end == std::string::npos || end == i + 1) return std::nullopt;
    refs.push_back(text.substr(i + 1, end - i - 1));
    i = end;
  }
  return refs;
}

void Plugin::init() {
  if (initialised_ || !init_) {
    initialised_ = true;
    return;
  }
  char err[512] = {0};
  if (init_(err, sizeof err) != 0)
    throw PluginError(PluginErrorKind::InitFailed,
                      "plugin " + path_.string() + " init failed: " + (err[0] ? std::string(err) : "no reason given"));
  initialised_ = true;
}

const ExperimentTemplate* Plugin::experiment(const std::string& name) const {
  for (auto& e : experiments_)
    if (e.name == name) return &e;
  return nullptr;
}

std::vector<std::pair<std::string, std::string>> Plugin::values_for_roles(
    const std::string& experiment_name, std::vector<std::pair<std::string, std::string>> stored) const {
  const ExperimentTemplate* t = experiment(experiment_name);
  for (auto& ps : params_) {
    // A run of an experiment file stores what it was given (and, for most plugins, every default); the rest
    // reach the ranks as their defaults.
    if (t && t->uses_param(ps.name)) continue;
    bool present = false;
    for (auto& [n, v] : stored) present = present || n == ps.name;
    // A single value: the loader refuses list defaults for parameters an experiment does not use.
    if (!present) stored.emplace_back(ps.name, trim(t ? t->default_text(ps) : ps.default_value));
  }
  return stored;
}

std::string Plugin::check(const std::vector<std::pair<std::string, std::string>>& values) const {
  if (!check_) return "";
  std::vector<const char*> names, texts;
  for (auto& [n, v] : values) names.push_back(n.c_str()), texts.push_back(v.c_str());
  char err[512] = {0};
  if (check_(names.data(), texts.data(), uint32_t(values.size()), err, sizeof err) == 0) return "";
  return err[0] ? std::string(err) : "refused without a reason";
}

StepPlanAnswer Plugin::plan_step(const StepPlanRequest& r) const {
  StepPlanAnswer answer;
  if (!plan_step_) return answer;
  std::vector<const char*> names, texts;
  for (auto& [n, v] : r.values) names.push_back(n.c_str()), texts.push_back(v.c_str());
  fanout_step_plan step{};
  step.struct_size = sizeof step;
  step.flags = r.local ? FANOUT_STEP_PLAN_LOCAL : 0u;
  step.step = r.step.c_str(), step.role = r.role.c_str(), step.settings = r.settings_json.c_str();
  step.names = names.data(), step.values = texts.data(), step.n = uint32_t(r.values.size());
  step.ranks = r.ranks, step.submit_dir = r.submit_dir.c_str();
  std::vector<const char*> step_names, step_settings;
  for (auto& [name, settings] : r.run_steps) step_names.push_back(name.c_str()), step_settings.push_back(settings.c_str());
  step.run_steps = step_names.data(), step.run_step_settings = step_settings.data(), step.n_run_steps = uint32_t(r.run_steps.size());
  std::string out(65536, '\0');  // a longer answer is cut at this size (the plugin's snprintf)
  const int rc = plan_step_(&step, out.data(), out.size());
  out.resize(std::strlen(out.c_str()));
  if (rc != 0) {
    answer.accepted = false;
    answer.refusal = out.empty() ? "refused without a reason" : out;
    return answer;
  }
  for (size_t at = 0; at < out.size();) {
    size_t nl = out.find('\n', at);
    if (nl == std::string::npos) nl = out.size();
    const std::string line = out.substr(at, nl - at);
    if (line.rfind("warning: ", 0) == 0) answer.warnings.push_back(line.substr(9));
    else if (!line.empty()) answer.runs += (answer.runs.empty() ? "" : "\n") + line;
    at = nl + 1;
  }
  return answer;
}

const ParamSpec* Plugin::param(const std::string& name) const {
  for (auto& p : params_)
    if (p.name == name) return &p;
  return nullptr;
}

const RoleSpec* Plugin::role(const std::string& name) const {
  for (auto& r : roles_)
    if (r.name == name) return &r;
  return nullptr;
}

std::vector<std::string> Plugin::role_names() const {
  std::vector<std::string> out;
  for (auto& r : roles_) out.push_back(r.name);
  return out;
}

std::vector<fs::path> plugin_search_path() {
  std::vector<fs::path> dirs;
  if (const char* env = std::getenv("FANOUT_PLUGIN_PATH"))
    for (auto& d : split(env, ':'))
      if (!d.empty() && d != ".") dirs.emplace_back(d);
  std::error_code ec;
  fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec) {
    dirs.push_back(exe.parent_path() / "plugins");
    dirs.push_back(exe.parent_path().parent_path() / "lib" / "fanout" / "plugins");
  }
  // Never the current directory, even when a relative entry would resolve to it.
  fs::path cwd = fs::current_path(ec);
  dirs.erase(std::remove_if(dirs.begin(), dirs.end(),
                            [&](const fs::path& d) { return d.is_relative() || fs::equivalent(d, cwd, ec); }),
             dirs.end());
  return dirs;
}

PluginScan scan_plugins() {
  PluginScan scan;
  std::set<std::string> names;
  for (auto& dir : plugin_search_path()) {
    std::error_code ec;
    if (!fs::is_directory(dir, ec)) continue;
    std::vector<fs::path> files;
    for (auto& e : fs::directory_iterator(dir, ec)) {
      auto fn = e.path().filename().string();
      if (starts_with(fn, "fanout_") && e.path().extension() == ".so") files.push_back(e.path());
    }
    std::sort(files.begin(), files.end());
    for (auto& f : files) {
      try {
        auto p = Plugin::open(f);
        if (names.insert(p->name()).second) scan.plugins.push_back(std::move(p));
      } catch (const PluginError& e) {
        scan.refused.push_back(e.what());
      }
    }
  }
  return scan;
}

std::unique_ptr<Plugin> find_plugin(const std::string& name_or_path) {
  if (name_or_path.find('/') != std::string::npos) return Plugin::open(name_or_path);
  for (auto& dir : plugin_search_path()) {
    fs::path candidate = dir / ("fanout_" + name_or_path + ".so");
    std::error_code ec;
    if (fs::exists(candidate, ec)) return Plugin::open(candidate);
  }
  std::vector<std::string> dirs;
  for (auto& d : plugin_search_path()) dirs.push_back(d.string());
  throw PluginError(PluginErrorKind::NotFound, "unknown plugin '" + name_or_path + "' (searched " + join(dirs, ":") +
                                                   "; `fanout plugins` lists what is installed)");
}

}  // namespace fanout
