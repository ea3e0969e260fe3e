#include "results/run_folder.h"

#include <algorithm>
#include <string_view>
#include <toml++/toml.h>

#include "common/error.h"
#include "common/toml_document.h"
#include "common/files.h"
#include "common/text.h"
#include "common/toml_text.h"
#include "results/layout.h"

namespace fanout {

namespace fs = std::filesystem;

fs::path samples_dir(const fs::path& run_dir) { return run_dir / layout::kSamplesDir; }

namespace {

// A run's [status] (or the table `name`), its ranks' exits after its own keys.
void status_text(TomlText& t, const RunStatusRecord& s, std::string_view name) {
  t.table(name).string("state", s.state).string("job_id", s.job_id).string("node_list", s.node_list).string("reason", s.reason);
  t.integer("exit_code", s.exit_code).integer("signal", s.signal).integer("start_wall_ns", s.start_wall_ns).integer("end_wall_ns", s.end_wall_ns);
  if (s.ranks.empty()) t.strings("ranks", {});
  const std::string ranks = std::string(name) + ".ranks";
  for (auto& r : s.ranks) t.array_table(ranks).string("role", r.role).integer("rank", r.rank).integer("exit_code", r.exit_code).integer("signal", r.signal);
}

// What is appended to a run.toml as the run goes (its [job] as it is submitted, its [status] as it ends) lies
// between an opening and a closing line; one not closed (a reader in the middle of the write, a crash before the
// write reached the disk) is not read. An append not closed can only be the file's last.
struct Appended {
  std::string_view opens, closes;
};
constexpr Appended kJobAppended{"\n# the run's job, appended as it was submitted\n", "\n# end of the run's job\n"};
constexpr Appended kStatusAppended{"\n# the run's end, appended as it ended\n", "\n# end of the run's end\n"};

void append_text(const fs::path& run_dir, const Appended& how, const TomlText& t, Durability durability) {
  std::string out;
  out.reserve(how.opens.size() + t.text().size() + how.closes.size());
  out.append(how.opens).append(t.text()).append(how.closes);
  append_to_file(run_dir / kRunMetadataFile, out, durability);
}

// run.toml's table without an append that was opened but not closed: the first opening line after the last closing
// one starts it (one inside the torn append's own values comes later; the start of an opening line cut short is only
// a comment). An opening line found inside a value (toml++ writes a value with line breaks as a multi-line string)
// leaves what precedes it unparseable: then it was not an append's.
toml::table parse_without_an_open_append(std::string_view text, const std::string& file) {
  size_t closed_to = 0, at = std::string_view::npos;
  for (const Appended* a : {&kJobAppended, &kStatusAppended})
    if (const size_t p = text.rfind(a->closes); p != std::string_view::npos) closed_to = std::max(closed_to, p + a->closes.size());
  for (const Appended* a : {&kJobAppended, &kStatusAppended}) at = std::min(at, text.find(a->opens, closed_to));
  if (at != std::string_view::npos) {
    try {
      return parse_toml_document(text.substr(0, at), file);
    } catch (const UserError&) {  // the whole text's error below is the one to report
    }
  }
  return parse_toml_document(text, file);
}

}  // namespace

std::string run_metadata_text(const RunMetadata& m) {
  TomlText t;
  t.raw("# fanout run metadata (written by fanout; see docs/architecture.md)\n");
  if (m.steps.empty()) t.strings("steps", {});  // a root key: before the first table
  t.table("run").string("session", m.session).string("experiment", m.experiment).string("subcommand", m.subcommand);
  t.string("plugin", m.plugin).string("plugin_path", m.plugin_path).string("plugin_version", m.plugin_version);
  t.string("param_hash", m.param_hash).string("launcher", m.scheduler).integer("walltime_s", m.walltime_s);
  t.integer("created_wall_ns", m.created_wall_ns);
  if (!m.service_dir.empty()) t.string("service_dir", m.service_dir).boolean("service_provider", m.service_provider);
  // TOML tables are unordered; the sweep order of parameters is kept here
  std::vector<std::string> order;
  order.reserve(m.parameters.size());
  for (auto& [k, v] : m.parameters) order.push_back(k);
  t.strings("parameter_order", order);
  t.table("parameters");
  // A name twice would be a key twice, which no TOML reader takes: the first stands, as in toml++'s table.
  for (size_t i = 0; i < m.parameters.size(); ++i) {
    const auto& [k, v] = m.parameters[i];
    bool seen = false;
    for (size_t j = 0; j < i && !seen; ++j) seen = m.parameters[j].first == k;
    if (!seen) t.string(k, v);
  }
  t.table("provenance");
  for (auto& [k, v] : m.provenance) t.string(k, v);
  if (!m.job_id.empty()) t.table("job").string("id", m.job_id);
  if (m.status) status_text(t, *m.status, "status");
  for (auto& s : m.steps) {
    t.array_table("steps").string("role", s.role).integer("nodes", s.nodes).integer("tasks_per_node", s.tasks_per_node);
    t.string("placement", s.placement).integer("cpus_per_task", s.cpus_per_task);
    // What a step did not ask is left out (older readers and hashes see the same file as before).
    if (s.gpus_per_task) t.integer("gpus_per_task", s.gpus_per_task);
    if (s.memory_mb) t.integer("memory_mb", s.memory_mb);
    if (!s.binding.empty()) t.string("binding", s.binding);
    if (s.exclusive) t.boolean("exclusive", true);
    if (!s.entry.empty()) t.string("entry", s.entry);
    if (!s.settings.empty()) t.string("settings", s.settings);
    if (s.mpi_program) t.boolean("mpi_program", true);
  }
  return t.take();
}

void write_run_metadata(const fs::path& run_dir, const RunMetadata& m, Durability durability) {
  write_file_atomic(run_dir / kRunMetadataFile, run_metadata_text(m), 0644, durability);
}

void append_run_job(const fs::path& run_dir, const std::string& job_id, Durability durability) {
  append_text(run_dir, kJobAppended, TomlText().table("job").string("id", job_id), durability);
}

void append_run_status(const fs::path& run_dir, const RunStatusRecord& s, Durability durability) {
  TomlText t;
  status_text(t, s, "status");
  append_text(run_dir, kStatusAppended, t, durability);
}

RunMetadata read_run_metadata(const fs::path& run_dir) {
  const fs::path file = run_dir / kRunMetadataFile;
  const std::string text = read_input_file(file, kMaxRunMetadataBytes);
  toml::table root = parse_without_an_open_append(text, file.string());
  auto need_str = [&](toml::node_view<toml::node> n, const char* key) {
    auto v = n[key].value<std::string>();
    if (!v) throw UserError(file.string() + ": missing '" + std::string(key) + "'");
    return *v;
  };
  RunMetadata m;
  auto run = root["run"];
  m.session = need_str(run, "session");
  // A session names a folder in exports (SmartSim-Scaling's layout): one plain name, never a path.
  if (!plain_folder_name(m.session))
    throw UserError(file.string() + ": session '" + printable(m.session) + "' is not a plain folder name (no '/', not '.' or '..', no control character)");
  m.experiment = need_str(run, "experiment");
  m.subcommand = run["subcommand"].value_or(std::string());
  m.plugin = need_str(run, "plugin");
  m.plugin_path = run["plugin_path"].value_or(std::string());
  m.plugin_version = run["plugin_version"].value_or(std::string());
  m.param_hash = need_str(run, "param_hash");
  m.scheduler = run["launcher"].value_or(std::string());
  m.walltime_s = run["walltime_s"].value_or(int64_t(0));
  m.created_wall_ns = run["created_wall_ns"].value_or(int64_t(0));
  m.service_dir = run["service_dir"].value_or(std::string());
  m.service_provider = run["service_provider"].value_or(false);
  if (auto* params = root["parameters"].as_table()) {
    std::vector<std::string> order;
    if (auto* o = run["parameter_order"].as_array())
      for (auto& n : *o) order.push_back(n.value_or(std::string()));
    for (auto& [k, v] : *params)
      if (std::find(order.begin(), order.end(), std::string(k.str())) == order.end()) order.emplace_back(k.str());
    for (auto& name : order)
      if (auto v = (*params)[name].value<std::string>()) m.parameters.emplace_back(name, *v);
  }
  if (auto* steps = root["steps"].as_array())
    for (auto& s : *steps) {
      auto t = toml::node_view<const toml::node>(s);
      m.steps.push_back({t["role"].value_or(std::string()), int(t["nodes"].value_or(int64_t(1))),
                         int(t["tasks_per_node"].value_or(int64_t(1))), t["placement"].value_or(std::string()),
                         int(t["cpus_per_task"].value_or(int64_t(1))), int(t["gpus_per_task"].value_or(int64_t(0))),
                         int(t["memory_mb"].value_or(int64_t(0))), t["binding"].value_or(std::string()),
                         t["exclusive"].value_or(false), t["entry"].value_or(std::string()),
                         t["settings"].value_or(std::string()), t["mpi_program"].value_or(false)});
    }
  if (auto* prov = root["provenance"].as_table())
    for (auto& [k, v] : *prov) m.provenance[std::string(k.str())] = v.value_or(std::string());
  m.job_id = root["job"]["id"].value_or(std::string());
  if (auto st = root["status"]; st.is_table()) {
    RunStatusRecord s;
    s.state = st["state"].value_or(std::string());
    s.job_id = st["job_id"].value_or(std::string());
    s.node_list = st["node_list"].value_or(std::string());
    s.reason = st["reason"].value_or(std::string());
    s.exit_code = int(st["exit_code"].value_or(int64_t(0)));
    s.signal = int(st["signal"].value_or(int64_t(0)));
    s.start_wall_ns = st["start_wall_ns"].value_or(int64_t(0));
    s.end_wall_ns = st["end_wall_ns"].value_or(int64_t(0));
    if (auto* ranks = st["ranks"].as_array())
      for (auto& r : *ranks) {
        auto t = toml::node_view<const toml::node>(r);
        s.ranks.push_back({t["role"].value_or(std::string()), int(t["rank"].value_or(int64_t(0))),
                           int(t["exit_code"].value_or(int64_t(0))), int(t["signal"].value_or(int64_t(0)))});
      }
    m.status = s;
  }
  return m;
}

}  // namespace fanout
