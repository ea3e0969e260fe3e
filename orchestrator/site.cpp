#include "orchestrator/site.h"

#include <algorithm>
#include <cstdlib>
#include <regex>
#include <set>

#include "common/error.h"
#include "common/files.h"
#include "common/text.h"
#include "host/plugin_loader.h"
#include "orchestrator/experiment.h"
#include "orchestrator/settings.h"
#include "orchestrator/toml_place.h"

namespace fanout {

namespace {

SiteLines read_lines(const std::filesystem::path& file, const toml::table& t) {
  static const std::regex kName("[A-Za-z_][A-Za-z0-9_]*");
  SiteLines out;
  for (auto& [k, v] : t) {
    const std::string key(k.str()), at = toml_at(file, v);
    if (key == "setup") {
      auto s = v.value<std::string>();
      if (!s) throw UserError(at + ": setup must be a string (shell lines)");
      out.setup = *s;
    } else if (key == "modules") {
      auto* a = v.as_array();
      if (!a) throw UserError(at + ": modules must be a list of strings");
      for (auto& m : *a) {
        auto s = m.value<std::string>();
        if (!s || s->empty()) throw UserError(toml_at(file, m) + ": modules must be a list of non-empty strings");
        out.modules.push_back(*s);
      }
    } else if (key == "env") {
      auto* e = v.as_table();
      if (!e) throw UserError(at + ": env must be a table of NAME = \"value\"");
      for (auto& [name, value] : *e) {
        auto s = value.value<std::string>();
        if (!std::regex_match(std::string(name.str()), kName) || !s)
          throw UserError(toml_at(file, value) + ": env." + std::string(name.str()) + " must be a variable name with a string value");
        out.env.emplace_back(std::string(name.str()), *s);
      }
    } else {
      throw UserError(at + ": unknown key '" + key + "' (known: setup, modules, env)");
    }
  }
  return out;
}

}  // namespace

std::string SiteLines::shell() const {
  std::string s;
  if (!setup.empty()) s += setup + (setup.back() == '\n' ? "" : "\n");  // the site's own shell, trusted as its file is
  if (!modules.empty()) {
    s += "module load";
    for (auto& m : modules) s += " " + shell_quote(m);
    s += "\n";
  }
  for (auto& [k, v] : env) s += "export " + k + "=" + shell_quote(v) + "\n";
  return s;
}

SiteProfile load_site(const std::string& flag) {
  SiteProfile p;
  if (flag == "none") return p;
  if (!flag.empty()) p.file = flag, p.origin = "--site";
  else if (const char* env = std::getenv("FANOUT_SITE"); env && *env) p.file = env, p.origin = "FANOUT_SITE";
  else if (const char* home = std::getenv("HOME"); home && *home) {
    std::filesystem::path user = std::filesystem::path(home) / ".config" / "fanout" / "site.toml";
    if (!std::filesystem::exists(user)) return p;
    p.file = user, p.origin = "~/.config/fanout/site.toml";
  } else {
    return p;
  }
  if (!std::filesystem::is_regular_file(p.file)) throw UserError(p.origin + ": no site profile at " + p.file.string());
  const toml::table root = parse_toml(read_file(p.file), p.file);
  for (auto& [k, v] : root) {
    const std::string key(k.str());
    if (key == "site" && v.is_table()) p.site = read_lines(p.file, *v.as_table());
    else if (key == "roles" && v.is_table())
      for (auto& [role, t] : *v.as_table()) {
        if (!t.is_table()) throw UserError(toml_at(p.file, t) + ": roles." + std::string(role.str()) + " must be a table");
        p.roles[std::string(role.str())] = read_lines(p.file, *t.as_table());
      }
    else if (key == "settings" && v.is_table())
      for (auto& [name, value] : *v.as_table()) {
        const std::string k2(name.str()), origin = toml_at(p.file, value) + ": settings." + k2;
        const DriverSetting* setting = setting_for_file_key(k2);
        if (!setting || k2 == "site") {
          std::vector<std::string> known;
          for (auto& s : driver_settings())
            if (!s.file_key.empty() && s.file_key != "site") known.push_back(s.file_key);
          throw UserError(origin + ": not a setting a site gives (known: " + join(known, ", ") + ")");
        }
        p.settings.push_back({k2, setting_texts(*setting, value, p.file, origin), origin});
      }
    else if (key == "parameters" && v.is_table())
      for (auto& [name, value] : *v.as_table()) {
        const std::string origin = toml_at(p.file, value) + ": parameters." + std::string(name.str());
        p.parameters.push_back({std::string(name.str()), toml_values(value, origin), origin});
      }
    else throw UserError(toml_at(p.file, v) + ": unknown section '" + key + "' (known: [site], [roles.<role>], [settings], [parameters])");
  }
  return p;
}

void apply_site_defaults(const SiteProfile& site, const Plugin& plugin, ExperimentRequest& req) {
  const std::set<std::string> given = req.settings.given;  // what the user said; the site's defaults are not that
  for (auto& v : site.settings) {
    const DriverSetting* setting = setting_for_file_key(v.key);
    if (given.count(setting->name)) continue;  // the experiment file or the command line said
    for (auto& text : v.values) setting->apply(req, text, v.origin);
  }
  req.settings.given = given;
  const ExperimentTemplate* tmpl = plugin.experiment(req.subcommand);
  for (auto& v : site.parameters) {
    if (!plugin.param(v.key) || (tmpl && !tmpl->uses_param(v.key))) continue;
    auto given = [&](const auto& p) { return p.first == v.key; };
    if (std::find_if(req.params.begin(), req.params.end(), given) != req.params.end()) continue;
    req.params.push_back({v.key, ParamSource{"", v.origin, v.values, std::filesystem::absolute(site.file).parent_path()}});
  }
}

}  // namespace fanout
