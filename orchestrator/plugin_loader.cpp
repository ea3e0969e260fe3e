#include "orchestrator/plugin_loader.h"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <regex>
#include <set>

#include "common/text.h"

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

const std::vector<std::string>& reserved_flag_names() {
  static const std::vector<std::string> names = {"exp_name", "launcher", "results_dir", "walltime", "max_parallel",
                                                 "dry_run", "zip", "exclude", "partition", "account",
                                                 "constraint", "exclusive", "array", "batch_args", "step_launcher", "max_retries", "resume", "stall_timeout", "no_reuse", "help", "version"};
  return names;
}

const char* param_type_name(fanout_param_type t) {
  switch (t) {
    case FANOUT_PARAM_INT: return "int";
    case FANOUT_PARAM_FLOAT: return "float";
    case FANOUT_PARAM_STRING: return "string";
    case FANOUT_PARAM_BOOL: return "bool";
  }
  return "?";
}

std::string check_param_value(fanout_param_type t, const std::string& value) {
  switch (t) {
    case FANOUT_PARAM_INT: return parse_int(value) ? "" : "'" + value + "' is not an integer";
    case FANOUT_PARAM_FLOAT: return parse_double(value) ? "" : "'" + value + "' is not a number";
    case FANOUT_PARAM_BOOL: return parse_bool(value) ? "" : "'" + value + "' is not a boolean (true/false)";
    case FANOUT_PARAM_STRING: return "";
  }
  return "unknown parameter type";
}

Plugin::~Plugin() {
  if (initialised_ && desc_ && desc_->fini) desc_->fini();
  if (handle_) dlclose(handle_);
}

std::unique_ptr<Plugin> Plugin::open(const fs::path& path) {
  const std::string p = path.string();
  std::unique_ptr<Plugin> plugin(new Plugin());
  plugin->path_ = path;
  plugin->handle_ = dlopen(p.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!plugin->handle_) throw PluginError(PluginErrorKind::CannotOpen, "cannot open plugin " + p + ": " + str(dlerror()));
  auto entry = reinterpret_cast<fanout_plugin_entry_fn>(dlsym(plugin->handle_, FANOUT_PLUGIN_ENTRY_SYMBOL));
  if (!entry)
    throw PluginError(PluginErrorKind::NotAPlugin,
                      p + " is not a fanout plugin: it does not export " FANOUT_PLUGIN_ENTRY_SYMBOL "()");
  const fanout_plugin* d = entry();
  if (!d) throw PluginError(PluginErrorKind::NotAPlugin, p + " is not a fanout plugin: its entry returned no descriptor");
  if (d->abi_version != FANOUT_PLUGIN_ABI_VERSION)
    throw PluginError(PluginErrorKind::BadVersion, "plugin " + p + " was built for fanout plugin ABI " +
                                                       std::to_string(d->abi_version) + ", this fanout expects ABI " +
                                                       std::to_string(FANOUT_PLUGIN_ABI_VERSION) + "; rebuild it");
  auto bad = [&](const std::string& why) {
    return PluginError(PluginErrorKind::BadDescriptor, "plugin " + p + " has a malformed descriptor: " + why);
  };
  if (!d->name || !std::regex_match(d->name, std::regex("[a-z0-9_]+"))) throw bad("name must match [a-z0-9_]+");
  if (d->n_roles == 0 || !d->roles) throw bad("it declares no roles");
  plugin->desc_ = d;
  std::set<std::string> seen;
  for (uint32_t i = 0; i < d->n_params; ++i) {
    const auto& ps = d->params[i];
    std::string name = str(ps.name);
    if (!valid_identifier(name)) throw bad("parameter name '" + name + "' is not an identifier");
    if (!seen.insert(name).second) throw bad("parameter '" + name + "' is declared twice");
    const auto& reserved = reserved_flag_names();
    if (std::find(reserved.begin(), reserved.end(), name) != reserved.end())
      throw bad("parameter '" + name + "' collides with the driver's own --" + name + " flag");
    if (ps.type < FANOUT_PARAM_INT || ps.type > FANOUT_PARAM_BOOL) throw bad("parameter '" + name + "' has an unknown type");
    plugin->params_.push_back({name, ps.type, str(ps.default_value), str(ps.help)});
  }
  for (uint32_t i = 0; i < d->n_roles; ++i)
    if (!d->roles[i].name || !d->roles[i].run) throw bad("role " + std::to_string(i) + " has no name or entry function");
  for (uint32_t i = 0; i < d->n_experiments; ++i) {
    const auto& e = d->experiments[i];
    ExperimentTemplate t;
    t.name = str(e.name);
    t.summary = str(e.summary);
    if (!valid_identifier(t.name)) throw bad("experiment name '" + t.name + "' is not an identifier");
    if (e.n_steps == 0) throw bad("experiment '" + t.name + "' has no steps");
    for (uint32_t s = 0; s < e.n_steps; ++s) {
      StepTemplate st{str(e.steps[s].role), str(e.steps[s].nodes), str(e.steps[s].tasks_per_node), str(e.steps[s].placement)};
      if (st.placement.empty()) st.placement = "disjoint";
      if (!plugin->role(st.role)) throw bad("experiment '" + t.name + "' names unknown role '" + st.role + "'");
      if (!parse_count_expr(st.nodes) || !parse_count_expr(st.tasks_per_node))
        throw bad("experiment '" + t.name + "' step '" + st.role + "' needs nodes/tasks_per_node as N, {a}, {a*b} or {a/b}");
      if (st.placement != "disjoint" && st.placement != "colocated")
        throw bad("experiment '" + t.name + "' step '" + st.role + "' has placement '" + st.placement + "'");
      t.steps.push_back(st);
    }
    for (uint32_t k = 0; k < e.n_defaults; ++k) {
      std::string n = str(e.defaults[k].name);
      if (!plugin->param(n)) throw bad("experiment '" + t.name + "' overrides unknown parameter '" + n + "'");
      t.defaults.emplace_back(n, str(e.defaults[k].value));
    }
    t.session_name = str(e.session_name);
    auto refs = template_references(t.session_name);
    if (!refs) throw bad("experiment '" + t.name + "' has a malformed session_name '" + t.session_name + "'");
    for (auto& r : *refs)
      if (!plugin->param(r)) throw bad("experiment '" + t.name + "' session_name refers to unknown parameter '" + r + "'");
    t.shared_step = str(e.shared_step);
    if (!t.shared_step.empty()) {
      auto is_shared = [&](const StepTemplate& st) { return st.role == t.shared_step; };
      if (std::count_if(t.steps.begin(), t.steps.end(), is_shared) != 1 || t.steps.size() < 2)
        throw bad("experiment '" + t.name + "' shares step '" + t.shared_step + "', which is not exactly one of its several steps");
      for (size_t k = 1; k < t.steps.size(); ++k)
        if (t.steps[k].placement == "colocated" && is_shared(t.steps[0]))
          throw bad("experiment '" + t.name + "' step '" + t.steps[k].role + "' is colocated with the shared step");
      for (auto& n : split(str(e.shared_by), ',')) {
        std::string name = trim(n);
        if (name.empty()) continue;  // no names: one group of every permutation
        if (!plugin->param(name)) throw bad("experiment '" + t.name + "' shared_by names unknown parameter '" + name + "'");
        t.shared_by.push_back(name);
      }
    }
    plugin->experiments_.push_back(std::move(t));
  }
  return plugin;
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
  if (initialised_ || !desc_->init) {
    initialised_ = true;
    return;
  }
  char err[512] = {0};
  if (desc_->init(err, sizeof err) != 0)
    throw PluginError(PluginErrorKind::InitFailed,
                      "plugin " + path_.string() + " init failed: " + (err[0] ? std::string(err) : "no reason given"));
  initialised_ = true;
}

std::string Plugin::check(const std::vector<std::pair<std::string, std::string>>& values) const {
  if (!desc_->check) return "";
  std::vector<const char*> names, texts;
  for (auto& [n, v] : values) names.push_back(n.c_str()), texts.push_back(v.c_str());
  char err[512] = {0};
  if (desc_->check(names.data(), texts.data(), uint32_t(values.size()), err, sizeof err) == 0) return "";
  return err[0] ? std::string(err) : "refused without a reason";
}

const ParamSpec* Plugin::param(const std::string& name) const {
  for (auto& p : params_)
    if (p.name == name) return &p;
  return nullptr;
}

const fanout_role* Plugin::role(const std::string& name) const {
  for (uint32_t i = 0; i < desc_->n_roles; ++i)
    if (name == desc_->roles[i].name) return &desc_->roles[i];
  return nullptr;
}

std::vector<std::string> Plugin::role_names() const {
  std::vector<std::string> out;
  for (uint32_t i = 0; i < desc_->n_roles; ++i) out.push_back(desc_->roles[i].name);
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
