#include "orchestrator/experiment.h"

#include <algorithm>
#include <cstdio>
#include <functional>
#include <random>
#include <set>
#include <sstream>
#include <nlohmann/json.hpp>
#include <toml++/toml.h>

#include "common/error.h"
#include "common/files.h"
#include "common/text.h"
#include "orchestrator/list_value.h"
#include "orchestrator/revision.h"
#include "orchestrator/settings.h"
#include "orchestrator/toml_place.h"
#include "results/layout.h"
#include "results/scaling_spec.h"
#include "plugins/sdk/fanout_placeholders.hpp"
#include "plugins/sdk/fanout_counters.hpp"

namespace fanout {

namespace fs = std::filesystem;

void require_range(const std::string& origin, int64_t v, int64_t lo, int64_t hi) {
  if (v < lo || v > hi)
    throw UserError(origin + ": " + std::to_string(v) + " is out of range (" + std::to_string(lo) + " to " + std::to_string(hi) + ")");
}

int64_t parse_walltime(const std::string& text, const std::string& origin) {
  auto bad = [&] { return UserError(origin + ": '" + text + "' is not a wall time (HH:MM:SS, MM:SS, D-HH:MM:SS or seconds)"); };
  std::string t = trim(text);
  int64_t days = 0;
  if (auto dash = t.find('-'); dash != std::string::npos) {
    auto d = parse_int(t.substr(0, dash));
    if (!d || *d < 0) throw bad();
    days = *d;
    t = t.substr(dash + 1);
  }
  auto parts = split(t, ':');
  if (parts.empty() || parts.size() > 3) throw bad();
  // Checked arithmetic: a wall time beyond int64 seconds is refused, not wrapped.
  int64_t secs = 0;
  bool overflow = false;
  for (auto& p : parts) {
    auto v = parse_int(p);
    if (!v || *v < 0) throw bad();
    overflow |= __builtin_mul_overflow(secs, 60, &secs) || __builtin_add_overflow(secs, *v, &secs);
  }
  if (parts.size() == 2 && days) overflow |= __builtin_mul_overflow(secs, 60, &secs);  // D-HH:MM
  int64_t day_secs = 0;
  overflow |= __builtin_mul_overflow(days, 86400, &day_secs) || __builtin_add_overflow(secs, day_secs, &secs);
  if (overflow || secs <= 0) throw bad();
  if (secs > kMaxSeconds) throw UserError(origin + ": '" + text + "' is longer than the longest wall time fanout accepts (365 days)");
  return secs;
}

Exclusion parse_exclude_flag(const std::string& text, const std::string& origin) {
  Exclusion e;
  e.origin = origin;
  std::string cur;
  int depth = 0;
  std::vector<std::string> terms;
  for (char c : text) {
    if (c == '[') ++depth;
    if (c == ']') --depth;
    if (c == ',' && depth == 0) {
      terms.push_back(cur);
      cur.clear();
    } else {
      cur += c;
    }
  }
  terms.push_back(cur);
  for (auto& term : terms) {
    auto eq = term.find('=');
    if (eq == std::string::npos || trim(term.substr(0, eq)).empty())
      throw UserError(origin + ": '" + term + "' is not name=value");
    e.conditions[trim(term.substr(0, eq))] = parse_list_value(term.substr(eq + 1), origin);
  }
  return e;
}

namespace {

std::string count_text(const toml::node& n, const std::string& origin) {
  if (auto i = n.value_exact<int64_t>()) return std::to_string(*i);
  if (auto s = n.value_exact<std::string>(); s && parse_count_expr(*s)) return *s;
  throw UserError(origin + ": expected an integer, \"{a}\", \"{a*b}\" or \"{a/b}\"");
}

// A GPU or memory amount: a count, 0, or either followed by " if <param>=<value>".
std::string amount_text(const toml::node& n, const std::string& origin) {
  if (auto i = n.value_exact<int64_t>(); i && *i >= 0) return std::to_string(*i);
  if (auto s = n.value_exact<std::string>(); s && parse_amount_expr(*s)) return *s;
  throw UserError(origin + ": expected an integer >= 0, \"{a}\", \"{a*b}\" or \"{a/b}\", optionally followed by \" if <param>=<value>\"");
}

// [build]: source = "DIR", command = "make mm" (sh -c) or ["make", "mm"] (argv).
BuildSpec parse_build(const toml::table& root, const fs::path& file) {
  const toml::table* b = root["build"].as_table();
  if (!b) throw UserError(toml_at(file, *root.get("build")) + ": build must be a table ([build])");
  BuildSpec spec;
  spec.origin = toml_at(file, *b);
  for (auto& [k, v] : *b) {
    const std::string key(k.str()), where = toml_at(file, v) + ": build." + key;
    if (key == "source") {
      auto s = v.value_exact<std::string>();
      if (!s || s->empty()) throw UserError(where + " must be a folder's path");
      spec.source = *s;
    } else if (key == "command") {
      if (auto s = v.value_exact<std::string>()) {
        if (s->empty()) throw UserError(where + " is empty");
        spec.argv = {"/bin/sh", "-c", *s};
      } else if (auto* a = v.as_array()) {
        for (auto& w : *a) {
          auto word = w.value_exact<std::string>();
          if (!word) throw UserError(where + ": every word of an array command is a string");
          spec.argv.push_back(*word);
        }
        if (spec.argv.empty()) throw UserError(where + " is empty");
      } else {
        throw UserError(where + " must be a string (run by /bin/sh -c) or an array of strings (argv)");
      }
    } else {
      throw UserError(where + ": unknown key (known: source, command)");
    }
  }
  if (spec.source.empty() || spec.argv.empty()) throw UserError(spec.origin + ": [build] needs source = \"DIR\" and command = ...");
  return spec;
}

}  // namespace

ExperimentRequest parse_experiment_file(const fs::path& file) { return parse_experiment_text(read_file(file), file); }

ExperimentRequest parse_experiment_text(std::string_view toml_text, const fs::path& file) {
  const toml::table root = parse_toml(toml_text, file);
  ExperimentRequest req;
  req.subcommand = "run";
  static const std::set<std::string> top_keys = {"experiment", "steps", "parameters", "zip", "exclude", "build"};
  for (auto& [k, v] : root)
    if (!top_keys.count(std::string(k.str())))
      throw UserError(toml_at(file, v) + ": unknown section '" + std::string(k.str()) + "' (known: experiment, steps, parameters, zip, exclude, build)");
  if (root.contains("build")) req.build = parse_build(root, file);
  auto* exp = root["experiment"].as_table();
  if (!exp) throw UserError(file.string() + ": missing [experiment] table with plugin = \"...\"");
  for (auto& entry : *exp) {
    const toml::node& v = entry.second;  // not a structured binding: the lambda below captures it (clang 14)
    const std::string key(entry.first.str()), where = toml_at(file, v), origin = where + ": experiment." + key;
    auto str = [&]() {
      auto s = v.value_exact<std::string>();
      if (!s) throw UserError(origin + " must be a string");
      return *s;
    };
    if (key == "plugin") {
      req.plugin = str();
      continue;
    }
    if (key == "template") {
      req.subcommand = str();
      continue;
    }
    const DriverSetting* setting = setting_for_file_key(key);
    if (!setting) {
      std::vector<std::string> known = {"plugin", "template"};
      for (auto& s : driver_settings())
        if (!s.file_key.empty()) known.push_back(s.file_key);
      throw UserError(where + ": unknown key 'experiment." + key + "' (known: " + join(known, ", ") + ")");
    }
    for (auto& text : setting_texts(*setting, v, file, origin)) setting->apply(req, text, origin);
  }
  if (req.plugin.empty()) throw UserError(toml_at(file, *exp) + ": [experiment] needs plugin = \"<name or path>\"");
  if (!req.build.argv.empty() && req.settings.source.empty()) req.settings.source = req.build.source;  // what was built is what ran
  if (req.settings.exp_name.empty()) req.settings.exp_name = file.stem().string();

  if (auto* steps = root["steps"].as_array()) {
    req.steps_origin = toml_at(file, *steps);
    for (auto& s : *steps) {
      auto* t = s.as_table();
      std::string where = toml_at(file, s);
      if (!t) throw UserError(where + ": [[steps]] entries must be tables");
      StepTemplate st = make_step("", "1", "1", "disjoint");
      st.origin = where;
      toml::table settings;  // the keys the host does not know: the plugin's step settings, checked when it is loaded
      for (auto& [k, v] : *t) {
        std::string key(k.str()), w = toml_at(file, v);
        if (key == "role") st.role = v.value_or(std::string());
        else if (key == "name") {
          st.name = v.value_or(std::string());
          if (!v.is_string() || st.name.empty() || filename_safe(st.name, 64) != st.name || st.name.find('.') != std::string::npos)
            throw UserError(w + ": a step's name must be 1 to 64 of [A-Za-z0-9_-]");
        } else if (key == "nodes") st.nodes = count_text(v, w);
        else if (key == "tasks_per_node" || key == "ranks_per_node") st.tasks_per_node = count_text(v, w);
        else if (key == "cpus_per_task") st.cpus_per_task = count_text(v, w);
        else if (key == "gpus_per_task") st.gpus_per_task = amount_text(v, w);
        else if (key == "memory_mb") st.memory_mb = amount_text(v, w);
        else if (key == "placement") st.placement = v.value_or(std::string());
        else if (key == "binding") {
          st.binding = v.value_or(std::string());
          if (auto why = binding_error(st.binding); !why.empty() || !v.is_string()) throw UserError(w + ": binding " + (why.empty() ? "must be a string" : why));
        } else if (key == "exclusive" || key == "shared" || key == "mpi_program") {
          if (!v.is_boolean()) throw UserError(w + ": " + key + " must be true or false");
          (key == "shared" ? st.shared : key == "mpi_program" ? st.mpi_program : st.exclusive) = *v.value<bool>();
        } else if (key == "plugin") {
          st.plugin = v.value_or(std::string());
          if (!v.is_string() || st.plugin.empty()) throw UserError(w + ": plugin must be a plugin's name or path");
        } else {
          settings.insert(key, v);
          st.setting_origins.emplace_back(key, w);
        }
      }
      if (!settings.empty()) {
        std::ostringstream json;
        json << toml::json_formatter(settings, toml::format_flags::none);
        st.settings_json = json.str();
      }
      if (st.placement != "disjoint" && st.placement != "colocated")
        throw UserError(where + ": placement must be \"disjoint\" or \"colocated\"");
      req.steps.push_back(st);
    }
  } else if (root.contains("steps")) {
    throw UserError(toml_at(file, *root.get("steps")) + ": steps must be an array of tables ([[steps]])");
  }

  if (auto* params = root["parameters"].as_table())
    for (auto& [k, v] : *params) {
      std::string where = toml_at(file, v);
      req.params.push_back({std::string(k.str()), ParamSource{"", where, toml_values(v, where), fs::absolute(file).parent_path()}});
    }
  if (auto* zips = root["zip"].as_array())
    for (auto& z : *zips) {
      std::string where = toml_at(file, z);
      auto* names = z.as_table() ? (*z.as_table())["params"].as_array() : nullptr;
      if (!names) throw UserError(where + ": [[zip]] needs params = [\"a\", \"b\"]");
      std::vector<std::string> list;
      for (auto& n : *names) list.push_back(n.value_or(std::string()));
      req.zips.push_back({list, where});
    }
  if (auto* excl = root["exclude"].as_array())
    for (auto& x : *excl) {
      std::string where = toml_at(file, x);
      auto* t = x.as_table();
      if (!t) throw UserError(where + ": [[exclude]] entries must be tables of name = value(s)");
      Exclusion e;
      e.origin = where;
      e.base = fs::absolute(file).parent_path();
      for (auto& [k, v] : *t) e.conditions[std::string(k.str())] = toml_values(v, toml_at(file, v));
      req.excludes.push_back(std::move(e));
    }
  return req;
}

namespace {

// A count (amount = false) or an amount (0 allowed, and " if <param>=<value>") for one permutation.
int resolve_count(const std::string& expr, const ParameterPoint& p, const std::string& what, bool amount = false) {
  auto e = amount ? parse_amount_expr(expr) : parse_count_expr(expr);
  if (!e) throw UserError(what + ": '" + expr + "' is not N, {a}, {a*b} or {a/b}" + (amount ? " (or 0, with ' if <param>=<value>')" : ""));
  if (!e->when_param.empty()) {
    const std::string* v = p.find(e->when_param);
    if (!v) throw UserError(what + ": '" + expr + "' tests parameter '" + e->when_param + "', which the run does not have");
    if (*v != e->when_value) return 0;
  }
  if (e->lhs.empty()) return int(e->literal);
  auto operand = [&](const std::string& name) {
    std::string text = p.find(name) ? *p.find(name) : "";
    auto v = parse_int(text);
    if (!v || *v < 1 || *v > 1000000)
      throw UserError(what + " must be a positive integer, got '" + text + "' from parameter '" + name + "'");
    return *v;
  };
  int64_t v = operand(e->lhs);
  if (e->op == '*') v *= operand(e->rhs);
  if (e->op == '/') v = (v + operand(e->rhs) - 1) / operand(e->rhs);
  if (v > 1000000) throw UserError(what + " is " + std::to_string(v) + " (" + expr + "): more than 1000000");
  return int(v);
}

// "-<name><value>" for each of `names` (their values in `point`), as session names carry parameters.
std::string parameter_tags(const std::vector<std::string>& names, const ParameterPoint& point) {
  std::string tags;
  for (auto& n : names) tags += "-" + filename_safe(n, 24) + filename_safe(*point.find(n), 24);
  return tags;
}

// A run's session (its folder's name, before the hash): the template with {param} replaced, or
// "<experiment>-sess" and the varied parameters.
std::string session_name(const std::string& templ, const std::string& experiment, const ParameterPoint& point,
                         const std::vector<std::string>& varied) {
  if (templ.empty()) return experiment + "-sess" + parameter_tags(varied, point);
  std::string name;
  for (size_t i = 0; i < templ.size(); ++i) {
    size_t end = templ[i] == '{' ? templ.find('}', i) : std::string::npos;
    if (end == std::string::npos) {
      name += templ[i];
      continue;
    }
    const std::string* v = point.find(templ.substr(i + 1, end - i - 1));
    name += v ? filename_safe(*v, 24) : "";
    i = end;
  }
  return name;
}

void validate_settings(const ExperimentSettings& s) {
  s.options.validate();
  s.run_options().validate();
  s.service_options().validate();
  // The name is one folder below results_dir: "." and ".." would write into results_dir or its parent. (Empty
  // only in a request not yet named; run_experiment refuses it.)
  if (s.exp_name == "." || s.exp_name == ".." || filename_safe(s.exp_name, 128) != s.exp_name)
    throw UserError("--exp_name: '" + s.exp_name + "' must be a name of [A-Za-z0-9._-], not '.' or '..'");
  // Paths reach job scripts (#SBATCH --output=, cd), redis.conf and logs: one line each.
  require_single_line("--results_dir", fs::absolute(s.results_dir).string());
}

// Counted before anything is expanded: a product of long lists is refused by its size, never allocated. With
// exclusions the points are visited one at a time, up to 100 x --max_runs of them.
void check_permutation_count(const ParameterSpace& space, int64_t max_runs) {
  std::string product;
  for (auto& axis : space.axes())
    if (axis.values.size() > 1) product += (product.empty() ? "" : " x ") + std::to_string(axis.values.size());
  const auto n = space.cardinality();
  const uint64_t limit = uint64_t(max_runs) * (space.has_exclusions() ? 100 : 1);
  if (!n || *n > limit)
    throw UserError((n ? std::to_string(*n) : std::string("more than 2^64")) + " permutations (" + product + ") exceed --max_runs=" +
                    std::to_string(max_runs) + (space.has_exclusions() ? " (x 100 before exclusions)" : "") +
                    "; narrow the lists or raise --max_runs");
}

}  // namespace

namespace {

// An experiment file's steps against their plugins (step_plugin: the experiment's, or the one a step names): a
// step without role runs its plugin's only role; names are unique (they name the samples and logs); further keys
// are its plugin's step_keys; a step of another plugin is the shared one (a job of its own: one job loads one plugin).
void check_file_steps(std::vector<StepTemplate>& steps, const std::function<const Plugin&(const StepTemplate&)>& step_plugin) {
  std::set<std::string> labels;
  int shared = 0;
  for (auto& s : steps) {
    const Plugin& plugin = step_plugin(s);
    if (!s.plugin.empty() && !s.shared)
      throw UserError(s.origin + ": a step of plugin " + plugin.name() + " runs as the experiment's shared step, a job of its own: add shared = true");
    if (s.shared && ++shared > 1) throw UserError(s.origin + ": only one step may be shared = true");
    if (s.role.empty()) {
      if (plugin.role_names().size() != 1)
        throw UserError(s.origin + ": a step needs role = \"...\" (plugin " + plugin.name() + " has roles " + join(plugin.role_names(), ", ") + ")");
      s.role = plugin.role_names().front();
    }
    if (layout::reserved_in_run_folder(s.label()))
      throw UserError(s.origin + ": a step may not be named '" + s.label() + "': its folder would be the run folder's own " + s.label() +
                      " (fanout reads what is there); give it another name = \"...\"");
    if (!labels.insert(s.label()).second)
      throw UserError(s.origin + ": two steps are named '" + s.label() + "'; give each a name = \"...\" of its own");
    if (!plugin.role(s.role))
      throw UserError(s.origin + ": plugin " + plugin.name() + " has no role '" + s.role + "' (roles: " + join(plugin.role_names(), ", ") + ")");
    const auto& keys = plugin.step_keys();
    for (auto& [key, where] : s.setting_origins)
      if (std::find(keys.begin(), keys.end(), key) == keys.end())
        throw UserError(where + ": unknown step key '" + key + "' (known: name, role, plugin, shared, nodes, tasks_per_node, ranks_per_node, " +
                        "cpus_per_task, gpus_per_task, memory_mb, binding, exclusive, placement, mpi_program" + (keys.empty() ? "" : "; plugin " + plugin.name() + "'s: " + join(keys, ", ")) + ")");
  }
}

// "{name}" in a step setting's strings names a parameter ("{{" and "}}" are literal braces; "{3}" and "{2,5}" in a
// regular expression are not names). An unknown one is refused here, before anything runs.
void check_setting_references(const std::vector<StepTemplate>& steps, const std::function<bool(const std::string&)>& known) {
  for (auto& s : steps) {
    if (s.settings_json.empty()) continue;
    // Regular expressions (a parser's pattern, a readiness line) are not filled in: their braces are the regex's.
    nlohmann::json settings = nlohmann::json::parse(s.settings_json, nullptr, false);
    if (settings.is_object()) {
      settings.erase("parse");
      if (settings.contains("ready") && settings["ready"].is_string() && settings["ready"].get<std::string>().rfind("line:", 0) == 0)
        settings.erase("ready");
    }
    for (auto& name : fanout_sdk::placeholder_names(settings.dump()))
      if (!known(name) && !fanout_sdk::step_variable(name))
        throw UserError(s.origin + ": step '" + s.label() + "' refers to {" + name + "}, which is no parameter; give it with [parameters] " +
                        name + " = ... (or write {{" + name + "}} for the braces themselves)");
  }
}

}  // namespace

namespace {

// What a run's identity hash reads after its head and kind: every parameter, sorted, and the resolved steps.
// Made again when a repeat's identity is made, rather than kept in every plan (a third of a planned run's memory).
std::string identity_body(const ParameterPoint& point, const std::vector<StepSpec>& steps) {
  std::string canon;
  auto sorted = point.pairs();
  std::sort(sorted.begin(), sorted.end());
  for (auto& [k, v] : sorted) canon += k + "=" + v + "\n";
  for (auto& step : steps)
    canon += "step " + step.role + " " + std::to_string(step.nodes) + "x" + std::to_string(step.tasks_per_node) +
             (step.cpus_per_task != 1 ? "c" + std::to_string(step.cpus_per_task) : "") +
             (step.gpus_per_task ? "g" + std::to_string(step.gpus_per_task) : "") +
             (step.memory_mb ? "m" + std::to_string(step.memory_mb) : "") + (step.binding.empty() ? "" : "b" + step.binding) +
             (step.exclusive ? "x" : "") + (step.mpi_program ? "p" : "") + " " + step.placement + (step.entry.empty() ? "" : " entry " + step.entry) +
             (step.settings.empty() ? "" : " settings " + step.settings) + "\n";
  return canon;
}

// `steps` as one of the lists made before when equal to it (the 16 latest are looked at: a sweep has a few step
// shapes, and a sweep of thousands is not searched), else as a new list, which joins them.
SharedList<StepSpec> shared_steps(std::vector<SharedList<StepSpec>>& made, std::vector<StepSpec> steps) {
  constexpr size_t kLooked = 16;
  for (size_t i = made.size(); i-- > 0 && made.size() - i <= kLooked;)
    if (made[i].get() == steps) return made[i];
  if (made.size() == 2 * kLooked) made.erase(made.begin(), made.begin() + kLooked);
  made.emplace_back(std::move(steps));
  return made.back();
}

// Each run `repeat` times, in the asked order. Runs that share a service stay together (a service serves one
// block of consecutive runs): the order applies within each such block.
std::vector<RunPlan> repeated_runs(std::vector<RunPlan> runs, const ExperimentSettings& st, const std::string& identity_head) {
  std::vector<RunPlan> out;
  out.reserve(runs.size() * size_t(st.repeat));  // grown by doubling, the last copy held both: 16 MB at 100,000 runs
  std::mt19937_64 rng(std::stoull(fnv1a_hex(st.exp_name).substr(0, 15), nullptr, 16));  // the same order on a resume
  for (size_t begin = 0; begin < runs.size();) {
    size_t end = begin + 1;
    while (end < runs.size() && runs[end].service == runs[begin].service) ++end;
    std::vector<std::pair<size_t, int>> order;  // (run, repeat)
    if (st.repeat_order == "grouped") {
      for (size_t r = begin; r < end; ++r)
        for (int k = 0; k < st.repeat; ++k) order.emplace_back(r, k);
    } else {
      for (int k = 0; k < st.repeat; ++k)
        for (size_t r = begin; r < end; ++r) order.emplace_back(r, k);
      if (st.repeat_order == "random") std::shuffle(order.begin(), order.end(), rng);
    }
    for (auto [r, k] : order) out.push_back(repeat_of(identity_head, runs[r], k));
    begin = end;
  }
  return out;
}

}  // namespace

RunPlan repeat_of(const std::string& identity_head, const RunPlan& base, int k) {
  RunPlan run = base;
  run.repeat = k;
  // Repeat 1 is the run without --repeat: the same identity, so that a sweep repeated later extends it.
  run.param_hash = fnv1a_hex(identity_head + (k ? "repeat " + std::to_string(k) + "\n" : "") + identity_body(*run.point, run.steps));
  run.session = run.session_stem + "-r" + std::to_string(k + 1) + "-" + run.param_hash.substr(0, 8);
  if (k > 0) std::string().swap(run.session_stem);  // later repeats are made from repeat 0 (--repeat=auto): one stem each
  return run;
}

SchedulerOptions ExperimentSettings::service_options() const {
  SchedulerOptions o = options.with_job_args(service_args);
  if (!service_hosts.empty()) o = o.with_job_args({{"nodelist", service_hosts}});
  return o;
}

// A PATH parameter's value as the ranks get it (they start in their run folder): absolute, resolved against
// `base` (the experiment file's or site profile's folder) or else the working directory; an input file that
// exists (an output's folder), or one of its words.
static std::string resolve_path_value(const ParamSpec& p, const std::string& v, const std::string& where, const fs::path& base = {}) {
  if (v.empty() || std::find(p.choices.begin(), p.choices.end(), v) != p.choices.end()) return v;
  std::error_code ec;
  const fs::path from = base.empty() ? fs::current_path(ec) : base;
  const fs::path abs = (from / v).lexically_normal();
  const std::string resolved = fs::path(v).is_absolute() ? "" : " (resolved against " + from.string() + ")";
  if (p.path_output) {
    if (!fs::is_directory(abs.parent_path(), ec)) throw UserError(where + ": " + abs.parent_path().string() + ": no such folder for '" + v + "'" + resolved);
  } else if (!fs::is_regular_file(abs, ec)) {
    throw UserError(where + ": " + abs.string() + ": no such file" + resolved +
                    (p.choices.empty() ? "" : "; or one of " + join(p.choices, ", ")));
  }
  return abs.string();
}

// What speedup is measured against: --scaling (each name a parameter of the sweep; one it does not vary is a
// warning), else the plugin's declared count parameters that the sweep varies.
static std::string scaling_of(const ExperimentRequest& request, const Plugin& plugin, const ParameterSpace& space,
                       const std::vector<std::string>& varied, std::vector<std::string>& warnings) {
  std::vector<ScalingSpec> specs = parse_scaling_list(request.settings.scaling);
  auto is_varied = [&](const std::string& n) { return std::count(varied.begin(), varied.end(), n) > 0; };
  for (auto& s : specs) {
    bool known = false;
    for (auto& axis : space.axes()) known = known || std::count(axis.names.begin(), axis.names.end(), s.param);
    if (!known) {
      std::vector<std::string> names;
      for (auto& axis : space.axes()) names.insert(names.end(), axis.names.begin(), axis.names.end());
      throw UserError("--scaling " + s.mode + ":" + s.param + ": the experiment has no parameter '" + s.param + "' (its parameters: " + join(names, ", ") + ")");
    }
    if (!is_varied(s.param)) warnings.push_back("--scaling " + s.mode + ":" + s.param + ": " + s.param + " has one value here: no speedup to measure");
  }
  if (specs.empty())
    for (auto& p : plugin.params())
      if (!p.scaling.empty() && is_varied(p.name)) specs.push_back({p.scaling, p.name});
  return scaling_text(specs);
}

ExperimentPlan plan_experiment(const ExperimentRequest& request, const Plugin& plugin) {
  validate_settings(request.settings);  // once for every run, dry run included
  ExperimentPlan plan;
  plan.request = request;
  const ExperimentTemplate* tmpl = plugin.experiment(request.subcommand);
  if (!request.steps.empty()) {
    plan.steps = request.steps;
  } else if (tmpl) {
    plan.steps = tmpl->steps;
  } else {
    std::vector<std::string> names;
    for (auto& e : plugin.experiments()) names.push_back(e.name);
    throw UserError("plugin " + plugin.name() + " has no experiment '" + request.subcommand +
                    "'; give [[steps]] or one of: " + join(names, ", "));
  }
  // Steps that name another plugin: opened once each, kept with the plan (its services' jobs load them).
  std::map<std::string, const Plugin*> others;
  for (auto& s : plan.steps)
    if (!s.plugin.empty() && !others.count(s.plugin)) {
      std::shared_ptr<const Plugin> p = find_plugin(s.plugin);
      plan.step_plugins.push_back(p);
      others[s.plugin] = p.get();
    }
  auto step_plugin = [&](const StepTemplate& s) -> const Plugin& { return s.plugin.empty() ? plugin : *others.at(s.plugin); };
  check_file_steps(plan.steps, step_plugin);
  for (auto& s : plan.steps)
    if (!step_plugin(s).role(s.role))
      throw UserError((!s.origin.empty() ? s.origin : request.steps_origin.empty() ? std::string("steps") : request.steps_origin) +
                      ": plugin " + plugin.name() + " has no role '" + s.role + "' (roles: " + join(plugin.role_names(), ", ") + ")");

  // Placement parameters: names the steps refer to that are not plugin parameters.
  std::set<std::string> placement;
  for (auto& s : plan.steps)
    for (auto& r : step_references(s))
      if (!plugin.param(r)) placement.insert(r);
  // Parameters of another plugin's step: checked against that plugin, and passed to every step like the rest.
  std::map<std::string, const ParamSpec*> step_params;
  for (auto& s : plan.steps)
    if (!s.plugin.empty())
      for (auto& [name, src] : request.params)
        if (const ParamSpec* p = step_plugin(s).param(name); p && !plugin.param(name)) step_params[name] = p, placement.insert(name);
  // The user's own parameters (FANOUT_PLUGIN_USER_PARAMETERS): any given name the plugin does not declare.
  if (plugin.user_parameters())
    for (auto& [name, src] : request.params)
      if (!plugin.param(name)) {
        if (fanout_sdk::placeholder_names("{" + name + "}").size() != 1) throw UserError(src.origin + ": '" + name + "' is not a parameter name ([A-Za-z_][A-Za-z0-9_]*)");
        placement.insert(name);
      }

  std::map<std::string, const ParamSource*> given;
  for (auto& [name, src] : request.params) {
    if (!plugin.param(name) && !placement.count(name)) {
      std::vector<std::string> known;
      for (auto& p : plugin.params()) known.push_back(p.name);
      throw UserError(src.origin + ": unknown parameter '" + name + "' for plugin " + plugin.name() +
                      (known.empty() ? "" : " (known: " + join(known, ", ") + ")"));
    }
    if (tmpl && plugin.param(name) && !tmpl->uses_param(name)) {  // from the command line or an experiment file
      std::vector<std::string> users;
      for (auto& t : plugin.experiments())
        if (t.uses_param(name)) users.push_back(t.name);
      throw UserError(src.origin + ": " + tmpl->name + " does not use this parameter" +
                      (users.empty() ? std::string() : " (" + join(users, ", ") + (users.size() == 1 ? " does" : " do") + ")") +
                      "; its parameters: " + join(tmpl->uses, ", "));
    }
    if (given.count(name)) throw UserError(src.origin + ": parameter '" + name + "' is given twice");
    given[name] = &src;
  }
  for (auto& name : placement)
    if (!given.count(name)) throw UserError("steps refer to {" + name + "} but no parameter '" + name + "' is given");
  check_setting_references(plan.steps, [&](const std::string& n) { return plugin.param(n) || placement.count(n); });

  auto values_of = [&](const std::string& name, const std::string& fallback_text, const std::string& fallback_origin) {
    auto it = given.find(name);
    // An empty default is the empty text (a plugin's optional setting), not a malformed list.
    if (it == given.end()) return trim(fallback_text).empty() ? std::vector<std::string>{""} : parse_list_value(fallback_text, fallback_origin);
    if (!it->second->values.empty()) return it->second->values;
    return parse_list_value(it->second->text, it->second->origin);
  };
  // Only what the experiment uses is swept, stored and shown; the roles get the rest as fixed defaults (rank).
  // A plugin whose file steps carry their own settings (exec): its parameters are the flags' form of those
  // settings, so an experiment file's run stores only the ones it gives, not defaults its steps override.
  const bool steps_own_settings = !request.steps.empty() && !plugin.step_keys().empty();
  for (auto& p : plugin.params()) {
    if (tmpl && !tmpl->uses_param(p.name)) continue;
    if (steps_own_settings && !given.count(p.name)) continue;
    std::string def = tmpl ? tmpl->default_text(p) : p.default_value, origin = "default of " + plugin.name() + "." + p.name;
    auto it = given.find(p.name);
    std::string where = it != given.end() ? it->second->origin : origin;
    const fs::path base = it != given.end() ? it->second->base : fs::path();
    auto values = p.repeatable && it == given.end() ? std::vector<std::string>{def} : values_of(p.name, def, origin);
    for (auto& v : values) {
      if (p.type == FANOUT_PARAM_PATH) v = resolve_path_value(p, v, where, base);
      if (auto why = check_param_value(p, v); !why.empty()) {
        // python-fire reads --nodes=4,8 as a tuple; here a sweep is a bracketed list.
        const bool numeric = p.type == FANOUT_PARAM_INT || p.type == FANOUT_PARAM_FLOAT;
        if (numeric && v.find(',') != std::string::npos && values.size() == 1)
          why += "; to sweep it, write [" + v + "] (a list in brackets)";
        throw UserError(where + ": " + why);
      }
      // Stored, written to run.toml and compared byte for byte: a value that is not UTF-8 would come back changed.
      if (!valid_utf8(v)) throw UserError(where + ": the value is not valid UTF-8 text");
    }
    plan.space.add(p.name, values);
  }
  for (auto& name : placement) {
    auto values = values_of(name, "", given.at(name)->origin);
    if (auto it = step_params.find(name); it != step_params.end())
      for (auto& v : values)
        if (auto why = check_param_value(*it->second, v); !why.empty()) throw UserError(given.at(name)->origin + ": " + why);
    plan.space.add(name, values);
  }
  for (auto& [names, origin] : request.zips) plan.space.zip(names, origin);
  for (Exclusion e : request.excludes) {
    // A file parameter's values are absolute in the plan: an exclusion names them as typed, so it is resolved alike.
    for (auto& [name, values] : e.conditions)
      if (const ParamSpec* p = plugin.param(name); p && p->type == FANOUT_PARAM_PATH)
        for (auto& v : values) v = resolve_path_value(*p, v, e.origin, e.base);
    plan.space.exclude(e);
  }

  std::vector<std::string> varied;
  for (auto& axis : plan.space.axes())
    if (axis.values.size() > 1) varied.insert(varied.end(), axis.names.begin(), axis.names.end());
  plan.scaling = scaling_of(request, plugin, plan.space, varied, plan.warnings);
  plan.revision = revision_provenance(request.settings.revision, request.settings.source);  // before anything is written

  // A run's identity: the plugin, the experiment, every parameter and the resolved steps.
  plan.identity_head = plugin.name() + "\n" + request.subcommand + "\n";
  auto identify = [&](RunPlan& run, const std::string& kind) { run.param_hash = fnv1a_hex(plan.identity_head + kind + identity_body(*run.point, run.steps)); };
  auto validate = [&](const RunPlan& run) {
    JobSpec probe;
    probe.name = run.session;
    probe.steps = run.steps;
    probe.walltime_s = request.settings.walltime_s;
    probe.validate();
  };
  // The shared step: a template's (unless --no_reuse), or an experiment file's step marked shared. Its group is
  // the runs that agree on shared_by: the template's list, or the file step's plugin's parameters given and the
  // names its sizes read. Another plugin's step is always a service (one job loads one plugin): --no_reuse gives
  // each run its own.
  std::string shared_role;
  std::vector<std::string> shared_by;
  const Plugin* shared_plugin = nullptr;
  if (tmpl && request.steps.empty() && !tmpl->shared_step.empty() && !request.settings.no_reuse) {
    shared_role = tmpl->shared_step, shared_by = tmpl->shared_by;
  }
  for (auto& s : plan.steps)
    if (s.shared && (!s.plugin.empty() || !request.settings.no_reuse)) {
      shared_role = s.label();
      if (!s.plugin.empty()) shared_plugin = &step_plugin(s);
      // What regroups the step: the parameters its plugin's own experiments share it by (as they reuse it today),
      // else every parameter of its plugin; and the names its sizes read.
      std::set<std::string> by;
      for (auto& t : step_plugin(s).experiments())
        if (t.shared_step == s.role) by.insert(t.shared_by.begin(), t.shared_by.end());
      const auto refs = step_references(s);
      for (auto& axis : plan.space.axes())
        for (auto& n : axis.names)
          if ((by.empty() ? step_plugin(s).param(n) != nullptr : by.count(n) > 0) || std::count(refs.begin(), refs.end(), n)) shared_by.push_back(n);
    }
  const bool sharing = !shared_role.empty();
  const bool service_per_run = sharing && request.settings.no_reuse;
  auto is_varied = [&](const std::string& name) { return std::find(varied.begin(), varied.end(), name) != varied.end(); };
  std::string group_key;
  // Each step as its plugin plans it (fanout_plugin.plan_step): refused here, before anything is written, with the
  // permutation named; its warnings kept once; what each rank runs kept for --dry-run.
  std::error_code cwd_error;
  const std::string submit_dir = fs::current_path(cwd_error).string();
  const std::string& scheduler = request.settings.scheduler;
  const bool local = scheduler_traits_of(scheduler_is_detected(scheduler) ? request.auto_scheduler : scheduler).one_host;  // ranks see our files
  std::set<std::string> warned;
  // Counters the ranks cannot read here are refused now, with the reason (a cluster's nodes are asked by their ranks).
  if (local)
    for (auto& name : fanout_sdk::counter_names(request.settings.counters))
      if (const auto* c = fanout_sdk::counter_named(name))
        if (std::string why = fanout_sdk::counter_unavailable(*c); !why.empty()) throw UserError("--counters " + why);
  // "size=128, nodes=2": the varied values of a permutation, as a refusal names it.
  auto permutation_text = [&](const ParameterPoint& point) {
    std::string where;
    for (auto& v : varied) where += (where.empty() ? "" : ", ") + v + "=" + *point.find(v);
    return where;
  };
  // `roles_values`: what the experiment's own plugin reads of the point (values_for_roles, once per permutation).
  auto plan_step = [&](const StepTemplate& s, const StepSpec& step, const ParameterPoint& point,
                       const std::vector<std::pair<std::string, std::string>>& roles_values) {
    StepPlanRequest r;
    r.step = s.label(), r.role = s.role, r.settings_json = s.settings_json, r.submit_dir = submit_dir, r.local = local;
    for (auto& other : plan.steps) r.run_steps.emplace_back(other.label(), other.settings_json);
    r.ranks = int64_t(step.nodes) * step.tasks_per_node;
    const Plugin& p = step_plugin(s);
    r.values = &p == &plugin ? roles_values : point.pairs();
    if (&p != &plugin)  // another plugin's step: its parameters the point does not give, at their defaults
      for (auto& ps : p.params())
        if (!point.find(ps.name)) r.values.emplace_back(ps.name, ps.default_value);
    StepPlanAnswer a = p.plan_step(r);
    if (!a.accepted) {
      const std::string where = permutation_text(point);
      throw UserError(a.refusal + (where.empty() ? "" : " (in the permutation " + where + ")"));
    }
    for (auto& w : a.warnings)
      if (warned.insert(w).second) plan.warnings.push_back(w);
    return a.runs;
  };
  check_permutation_count(plan.space, request.settings.max_runs);
  uint64_t kept = 0;
  // The step lists made so far, the latest last: a permutation whose steps equal one of them shares it (most sweeps
  // vary what the ranks do, not how many there are: a list each was a quarter of a planned run).
  std::vector<SharedList<StepSpec>> step_lists;
  if (auto n = plan.space.cardinality()) plan.runs.reserve(size_t(std::min<uint64_t>(*n, uint64_t(request.settings.max_runs))));
  plan.space.for_each([&](ParameterPoint&& point) {
    if (++kept > uint64_t(request.settings.max_runs))
      throw UserError("more than " + std::to_string(request.settings.max_runs) +
                      " permutations remain after the exclusions; narrow the lists or raise --max_runs");
    const auto roles_values = plugin.values_for_roles(request.subcommand, point.pairs());
    if (auto why = plugin.check(roles_values); !why.empty()) {
      const std::string where = permutation_text(point);
      throw UserError("plugin " + plugin.name() + " refuses the permutation" + (where.empty() ? "" : " (" + where + ")") + ": " + why);
    }
    RunPlan run;
    run.point = std::make_shared<const ParameterPoint>(point);
    StepSpec shared;
    std::string shared_command;
    std::vector<StepSpec> steps;
    for (auto& s : plan.steps) {
      StepSpec step;
      step.role = s.label();
      step.entry = s.name.empty() || s.name == s.role ? "" : s.role;
      step.settings = s.settings_json;
      step.placement = s.placement;
      step.nodes = resolve_count(s.nodes, point, "step '" + s.role + "' nodes");
      step.tasks_per_node = resolve_count(s.tasks_per_node, point, "step '" + s.role + "' tasks_per_node");
      step.cpus_per_task = resolve_count(s.cpus_per_task, point, "step '" + s.role + "' cpus_per_task");
      step.gpus_per_task = resolve_count(s.gpus_per_task, point, "step '" + s.role + "' gpus_per_task", true);
      step.memory_mb = resolve_count(s.memory_mb, point, "step '" + s.role + "' memory_mb", true);
      step.binding = s.binding.empty() ? request.settings.binding : s.binding;  // the step's own, else the run's --binding
      step.exclusive = s.exclusive;
      step.mpi_program = s.mpi_program || request.settings.mpi_program;  // the step's own, else the run's --mpi_program
      const std::string command = plan_step(s, step, point, roles_values);
      if (sharing && s.label() == shared_role) shared = step, shared_command = command;
      else steps.push_back(step), run.step_commands.push_back(command);
    }
    run.steps = shared_steps(step_lists, std::move(steps));
    // What each rank runs, kept for --dry-run only when some plugin said it (a string per run otherwise for nothing).
    if (std::all_of(run.step_commands.begin(), run.step_commands.end(), [](const std::string& c) { return c.empty(); })) std::vector<std::string>().swap(run.step_commands);
    identify(run, "");
    run.session_stem = filename_safe(session_name(tmpl ? tmpl->session_name : "", request.subcommand == "run" ? plugin.name() : request.subcommand,
                                                  point, varied), 160);
    run.session = run.session_stem + "-" + run.param_hash.substr(0, 8);
    validate(run);
    if (sharing) {
      // Consecutive runs that agree on shared_by use one service: a new group starts where a value changes.
      std::string key = service_per_run ? run.session : "";
      for (auto& n : shared_by) key += n + "=" + *point.find(n) + "\n";
      if (plan.services.empty() || key != group_key) {
        RunPlan service;
        ParameterPoint served;
        auto served_names = std::make_shared<std::vector<std::string>>();
        for (size_t i = 0; i < point.size(); ++i)
          if (const std::string& k = point.name(i); !is_varied(k) || std::count(shared_by.begin(), shared_by.end(), k))
            served_names->push_back(k), served.values.push_back(point.values[i]);
        served.names = std::move(served_names);
        service.point = std::make_shared<const ParameterPoint>(std::move(served));
        service.steps = std::vector<StepSpec>{shared};
        service.step_commands = {shared_command};
        service.plugin = shared_plugin;
        // Groups with equal values stay apart; another plugin's service is that plugin's.
        identify(service, "service " + std::to_string(plan.services.size()) + "\n" + (shared_plugin ? "plugin " + shared_plugin->name() + "\n" : ""));
        service.session = filename_safe(shared_role + "-service" + parameter_tags(shared_by, point), 160) + "-" +
                          service.param_hash.substr(0, 8);
        validate(service);
        plan.services.push_back(std::move(service));
        group_key = key;
      }
      run.service = int(plan.services.size()) - 1;
    }
    plan.runs.push_back(std::move(run));
  });
  if (plan.runs.empty()) throw UserError("every permutation is excluded: nothing to run");
  if (request.settings.repeat > 1) {
    const int most = request.settings.repeat_auto ? std::max(request.settings.repeat, request.settings.max_repeat) : request.settings.repeat;
    if (plan.runs.size() * size_t(most) > size_t(request.settings.max_runs))
      throw UserError(std::to_string(plan.runs.size()) + " permutations x " +
                      (request.settings.repeat_auto ? "--max_repeat=" : "--repeat=") + std::to_string(most) +
                      " exceed --max_runs=" + std::to_string(request.settings.max_runs) + "; narrow the lists or raise --max_runs");
    plan.runs = repeated_runs(std::move(plan.runs), request.settings, plan.identity_head);
  }
  return plan;
}

}  // namespace fanout
