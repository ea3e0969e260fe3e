#include "results/smartsim_export.h"

#include <sqlite3.h>

#include <algorithm>
#include <ctime>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <tuple>
#include <vector>

#include "common/error.h"
#include "common/files.h"
#include "common/text.h"
#include "results/display_unit.h"
#include "results/metric_stats.h"
#include "results/sample_block.h"
#include "results/store.h"
#include "version.h"

namespace fanout {

namespace fs = std::filesystem;

namespace {

struct Line {
  double t_start;
  std::string function;
  double seconds;
};

// configparser's str() of a list: ['cpp', 'fortran'] for strings, [1, 2] for numbers.
std::string python_list(const std::vector<std::string>& values) {
  std::string out = "[";
  for (size_t i = 0; i < values.size(); ++i) {
    const bool number = parse_double(values[i]).has_value();
    out += (i ? ", " : "") + (number ? values[i] : "'" + values[i] + "'");
  }
  return out + "]";
}

std::string utc(double epoch_s, const char* format) {
  const time_t t = time_t(epoch_s);
  tm parts{};
  gmtime_r(&t, &parts);
  char buf[64];
  strftime(buf, sizeof buf, format, &parts);
  return buf;
}

// A value as configparser's write() puts it: a line break continues the value on the next line, indented by a
// tab, so a newline in a value cannot start a key of its own. A carriage return, which configparser's reader also
// takes for a line break, is written as one (it reads back as a newline).
std::string ini_value(const std::string& v) {
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i] == '\r' && i + 1 < v.size() && v[i + 1] == '\n') continue;  // CRLF: one break
    out += v[i] == '\n' || v[i] == '\r' ? std::string("\n\t") : std::string(1, v[i]);
  }
  return out;
}

// utils.write_run_config: [run] then [attributes], "key = value", a blank line after each section.
void write_run_config(const fs::path& file, const std::vector<std::pair<std::string, std::string>>& run,
                      const std::vector<std::pair<std::string, std::string>>& attributes) {
  std::ofstream f(file);
  f << "[run]\n";
  for (auto& [k, v] : run) f << k << " = " << ini_value(v) << "\n";
  f << "\n[attributes]\n";
  for (auto& [k, v] : attributes) f << k << " = " << ini_value(v) << "\n";
  f << "\n";
  if (!f.flush()) throw UserError("cannot write " + file.string());
}

std::string language_of(const std::vector<std::pair<std::string, std::string>>& params) {
  for (auto& [k, v] : params)
    if (k == "language" || k == "languages") return v;
  return "cpp";  // fanout's clients are C++
}

// The first column of `sql`'s first row for one run (its one parameter), as text; nullopt when there is no row.
// What the export needs of a run beyond StoredRun: its start, its experiment's subcommand, whether it is a service.
std::optional<std::string> run_value(const ResultsDb& db, const char* sql, int64_t run_id) {
  sqlite3_stmt* st = nullptr;
  std::optional<std::string> out;
  if (sqlite3_prepare_v2(db.handle(), sql, -1, &st, nullptr) == SQLITE_OK) {
    sqlite3_bind_int64(st, 1, run_id);
    if (sqlite3_step(st) == SQLITE_ROW) {
      const auto* text = sqlite3_column_text(st, 0);
      out = text ? reinterpret_cast<const char*>(text) : "";
    }
  }
  sqlite3_finalize(st);
  return out;
}

bool is_service(const ResultsDb& db, int64_t run_id) {
  return run_value(db, "SELECT 1 FROM provenance WHERE run_id=? AND key='shared_step'", run_id).has_value();
}

std::string subcommand_of(const ResultsDb& db, int64_t run_id) {
  return run_value(db, "SELECT e.subcommand FROM runs r JOIN experiments e ON e.id = r.experiment_id WHERE r.id=?", run_id).value_or("");
}

// A run's [attributes] as SmartSim-Scaling's drivers write them for the same experiment (driverthroughput and
// driverinference main.py: colocated, client_total, client_per_node, client_nodes, database_nodes, database_cpus,
// ..., language, in that order), then any parameter of ours they have no name for. Other plugins' runs keep
// their own parameter names.
std::vector<std::pair<std::string, std::string>> attributes_of(const StoredRun& r, const std::string& subcommand) {
  std::map<std::string, std::string> p(r.parameters.begin(), r.parameters.end());
  if (!p.count("clients_per_node")) return r.parameters;
  auto get = [&](const std::string& k, const std::string& fallback = "") { return p.count(k) ? p[k] : fallback; };
  const bool colocated = subcommand.size() >= 10 && subcommand.compare(subcommand.size() - 10, 10, "_colocated") == 0;
  const bool inference = subcommand.rfind("inference", 0) == 0;
  const std::string nodes = colocated ? get("nodes") : get("client_nodes");
  const auto total = parse_int(nodes), per = parse_int(get("clients_per_node"));
  std::vector<std::pair<std::string, std::string>> a = {{"colocated", colocated ? "1" : "0"}};
  if (colocated) a.emplace_back("pin_app_cpus", get("pin_app_cpus", "0"));
  a.emplace_back("client_total", total && per ? std::to_string(*total * *per) : "");
  a.emplace_back("client_per_node", get("clients_per_node"));
  a.emplace_back("client_nodes", nodes);
  a.emplace_back("database_nodes", colocated ? nodes : get("db_nodes"));
  a.emplace_back("database_cpus", get("db_cpus"));
  if (inference) {
    a.emplace_back("database_threads_per_queue", get("db_tpq"));
    a.emplace_back("batch_size", get("batch_size"));
    a.emplace_back("device", get("device"));
    a.emplace_back("num_devices", get("num_devices"));
  } else {
    a.emplace_back("iterations", get("iterations"));
    a.emplace_back("tensor_bytes", get("tensor_bytes"));
  }
  // fanout's smartsim plugin says "languages"; a run imported from SmartSim-Scaling keeps its "language".
  a.emplace_back("language", get("languages", get("language", "cpp")));
  if (inference && !colocated) a.emplace_back("iterations", get("iterations"));
  static const std::set<std::string> mapped = {"nodes", "client_nodes", "clients_per_node", "db_nodes", "db_cpus", "db_tpq", "batch_size",
                                               "device", "num_devices", "iterations", "tensor_bytes", "languages", "language",
                                               "pin_app_cpus"};
  for (auto& [k, v] : r.parameters)
    if (!mapped.count(k)) a.emplace_back(k, v);
  return a;
}

double started_at(const ResultsDb& db, int64_t run_id) {
  return parse_double(run_value(db, "SELECT coalesce(started_at, created_at, ingested_at) FROM runs WHERE id=?", run_id).value_or("")).value_or(0);
}

}  // namespace

SmartSimExportReport export_smartsim_layout(const ResultsDb& db, const fs::path& out_dir) {
  if (fs::exists(out_dir)) throw UserError(out_dir.string() + " exists: export to a new folder (--out)");
  ResultsDb::ReadSnapshot snapshot(db);
  const std::vector<StoredRun> runs = db.runs();
  if (runs.empty()) throw UserError("no run to export in " + out_dir.parent_path().string());
  const auto metrics = db.metrics();
  double first_start = 0;
  std::map<int64_t, double> start_of;
  for (auto& r : runs) {
    start_of[r.id] = started_at(db, r.id);
    if (first_start == 0 || (start_of[r.id] > 0 && start_of[r.id] < first_start)) first_start = start_of[r.id];
  }
  // Session names come from the database (and so from run folders anyone may craft): each must be one plain folder
  // name, or it could place a write outside --out ("/abs", "../.."). Refused before anything is written.
  for (auto& r : runs)
    if (!plain_folder_name(r.session))
      throw UserError("run " + std::to_string(r.id) + "'s session name '" + printable(r.session) +
                      "' is not a plain folder name (1 to 255 bytes, no '/', not '.' or '..', no control character): nothing exported");

  SmartSimExportReport report;
  const std::string run_name = "run-" + utc(first_start, "%Y-%m-%d-%H:%M:%S");
  const fs::path staging = out_dir.string() + ".tmp";
  fs::remove_all(staging);
  fs::create_directories(staging / run_name);
  report.run_dir = out_dir / run_name;

  // The sweep's run.cfg: every parameter, a list repr where runs differ (as SmartSim-Scaling's driver arguments).
  std::vector<std::string> names;
  std::map<std::string, std::vector<std::string>> values;
  for (auto& r : runs)
    for (auto& [k, v] : r.parameters) {
      if (!values.count(k)) names.push_back(k);
      auto& vs = values[k];
      if (std::find(vs.begin(), vs.end(), v) == vs.end()) vs.push_back(v);
    }
  std::vector<std::pair<std::string, std::string>> sweep;
  for (auto& n : names) sweep.emplace_back(n, values[n].size() > 1 ? python_list(values[n]) : values[n].front());
  const std::string sweep_language = values.count("languages") ? python_list(values["languages"]) : "['cpp']";
  write_run_config(staging / run_name / "run.cfg",
                   {{"name", run_name}, {"path", report.run_dir.string()}, {"smartsim_version", "fanout-" FANOUT_VERSION},
                    {"smartredis_version", "fanout-" FANOUT_VERSION}, {"db", "redis-server"}, {"date", utc(first_start, "%Y-%m-%d")},
                    {"language", sweep_language}},
                   sweep);

  // One session per run: lines gathered per role and rank, then the clients' role written out.
  std::map<int64_t, const StoredRun*> by_id;
  for (auto& r : runs) by_id[r.id] = &r;
  std::map<std::string, std::map<int, std::vector<Line>>> by_role;  // of the run being read
  int64_t current = -1;
  auto flush = [&] {
    if (current < 0) return;
    const StoredRun& r = *by_id.at(current);
    const fs::path session = staging / run_name / r.session;
    fs::create_directories(session);
    write_run_config(session / "run.cfg",
                     {{"name", r.session}, {"path", (report.run_dir / r.session).string()}, {"smartsim_version", "fanout-" FANOUT_VERSION},
                      {"smartredis_version", "fanout-" FANOUT_VERSION}, {"db", "redis-server"},
                      {"date", utc(start_of[current], "%Y-%m-%d")}, {"language", language_of(r.parameters)}},
                     attributes_of(r, subcommand_of(db, current)));
    const std::map<int, std::vector<Line>>* chosen = nullptr;
    size_t most = 0;
    for (auto& [role, ranks] : by_role) {
      size_t n = 0;
      for (auto& [rank, lines] : ranks) n += lines.size();
      if (n > most || !chosen) chosen = &ranks, most = n;
    }
    for (auto& [role, ranks] : by_role)
      if (&ranks != chosen)
        for (auto& [rank, lines] : ranks) report.left_out += lines.size();
    if (chosen)
      for (auto& [rank, lines] : *chosen) {
        std::vector<Line> ordered = lines;
        // A client writes each line when its timer stops: in order of end (main() last, as in SmartSim-Scaling).
        std::stable_sort(ordered.begin(), ordered.end(),
                         [](const Line& a, const Line& b) { return a.t_start + a.seconds < b.t_start + b.seconds; });
        std::ofstream f(session / ("rank_" + std::to_string(rank) + "_timing.csv"));
        for (auto& l : ordered) f << rank << "," << l.function << "," << l.seconds << "\n";  // the C++ clients' formatting
        if (!f.flush()) throw UserError("cannot write " + (session / ("rank_" + std::to_string(rank) + "_timing.csv")).string());
        report.lines += ordered.size();
      }
    ++report.runs;
    by_role.clear();
  };
  std::set<int64_t> services;  // a shared step's database runs: SmartSim-Scaling keeps those in database/, not as sessions
  for (auto& r : runs)
    if (is_service(db, r.id)) services.insert(r.id);
  db.for_each_sample([&](int64_t run_id, int rank, int64_t metric_id, const SampleRowText& row) {
    if (services.count(run_id)) return;
    if (run_id != current) flush(), current = run_id;
    const auto& m = metrics.at(metric_id);
    const double per = seconds_per(m.unit);
    // Their timing files hold what the clients timed: not warmup, not figures in other units, not what a run cost
    // (resource.user_cpu is in seconds but times no operation).
    if (row.warmup || per <= 0 || is_resource_metric(m.name)) {
      ++report.left_out;
      return;
    }
    by_role[m.role][rank].push_back({stored_real(row.t_start), m.name, stored_real(row.value) * per});
  });
  flush();
  for (auto& r : runs)  // runs without samples still get their session folder and run.cfg
    if (!services.count(r.id) && !fs::exists(staging / run_name / r.session)) current = r.id, flush();
  fs::rename(staging, out_dir);
  return report;
}

}  // namespace fanout
