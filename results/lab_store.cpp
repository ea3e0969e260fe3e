#include "results/lab_store.h"

#include <cmath>
#include <cstdio>
#include <algorithm>
#include <cstdlib>
#include <map>

#include <nlohmann/json.hpp>

#include "common/clock.h"
#include "common/error.h"
#include "common/text.h"
#include "results/lab_connection.h"

namespace fanout {

namespace fs = std::filesystem;

double LabValue::as_double() const {
  if (null) return NAN;
  if (numeric) return number;
  char* end = nullptr;
  const double v = std::strtod(text.c_str(), &end);
  return end == text.c_str() ? NAN : v;
}

std::string LabValue::as_text() const {
  if (null) return "";
  if (!numeric) return text;
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", number);
  return buf;
}

LabParam LabParam::real(double v) {
  LabParam p;
  if (!std::isfinite(v)) return p;
  p.kind = Kind::Number;
  p.number = v;
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  p.text = buf;
  return p;
}

bool lab_is_postgres(const std::string& where) { return starts_with(where, "postgresql://") || starts_with(where, "postgres://"); }

std::string default_lab() {
  if (const char* v = std::getenv("FANOUT_LAB"); v && *v) return v;
  const char* home = std::getenv("HOME");
  return (fs::path(home && *home ? home : ".") / ".local" / "share" / "fanout" / "lab.sqlite").string();
}

std::string lab_shown(const std::string& where) {
  if (!lab_is_postgres(where)) return where;
  const size_t scheme = where.find("://") + 3, at = where.find('@', scheme), colon = where.find(':', scheme);
  if (at == std::string::npos || colon == std::string::npos || colon > at) return where;
  return where.substr(0, colon) + ":***" + where.substr(at);
}

namespace {

// The schema, in SQL both databases take ({KEY}: each one's auto-numbered key).
const char* const kSchema[] = {
    "CREATE TABLE lab_meta(key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE lab_experiments(id {KEY}, benchmark TEXT NOT NULL, machine TEXT NOT NULL, path TEXT NOT NULL, revision TEXT NOT NULL, "
    "dirty INTEGER NOT NULL, commit_time DOUBLE PRECISION, started DOUBLE PRECISION, added_at DOUBLE PRECISION NOT NULL, UNIQUE(machine, path))",
    "CREATE INDEX lab_experiments_benchmark ON lab_experiments(benchmark)",
    "CREATE TABLE lab_figures(experiment_id BIGINT NOT NULL REFERENCES lab_experiments(id) ON DELETE CASCADE, role TEXT NOT NULL, "
    "metric TEXT NOT NULL, unit TEXT NOT NULL, better TEXT NOT NULL, setup_cost INTEGER NOT NULL, parameters TEXT NOT NULL, "
    "runs INTEGER NOT NULL, samples BIGINT NOT NULL, median DOUBLE PRECISION, low DOUBLE PRECISION, high DOUBLE PRECISION, run_medians TEXT NOT NULL)",
    "CREATE INDEX lab_figures_experiment ON lab_figures(experiment_id)",
};

std::string parameters_json(const std::vector<std::pair<std::string, std::string>>& params) {
  nlohmann::json a = nlohmann::json::array();
  for (auto& [k, v] : params) a.push_back({k, v});
  return a.dump();
}

// Run medians as JSON numbers, each the shortest text that reads back as the same double (nlohmann's dump);
// a NaN (a run of no finite sample) as null.
std::string numbers_json(const std::vector<double>& v) {
  nlohmann::json a = nlohmann::json::array();
  for (double x : v) a.push_back(std::isfinite(x) ? nlohmann::json(x) : nlohmann::json());
  return a.dump();
}

std::vector<double> numbers_of(const std::string& text, const std::string& where) {
  std::vector<double> out;
  try {
    for (auto& x : nlohmann::json::parse(text)) out.push_back(x.is_null() ? NAN : x.get<double>());
  } catch (const std::exception& e) {
    throw UserError("lab " + where + ": a figure's run medians are not what fanout wrote (" + e.what() + ")");
  }
  return out;
}

std::vector<std::pair<std::string, std::string>> parameters_of(const std::string& text, const std::string& where) {
  std::vector<std::pair<std::string, std::string>> out;
  try {
    for (auto& kv : nlohmann::json::parse(text)) out.emplace_back(kv.at(0).get<std::string>(), kv.at(1).get<std::string>());
  } catch (const std::exception& e) {
    throw UserError("lab " + where + ": a figure's parameters are not what fanout wrote (" + e.what() + ")");
  }
  return out;
}

}  // namespace

LabStore::LabStore(const std::string& where, bool create) : where_(lab_shown(where)) {
  db_ = lab_is_postgres(where) ? open_postgres_lab(where) : open_sqlite_lab(where, create);
  migrate(create);
}

LabStore::~LabStore() = default;

void LabStore::migrate(bool create) {
  // A store at this schema is read as it is: no write transaction (a reader with read-only access to a shared file,
  // or many readers at once, never wait on one another). Anything else is settled inside one, checked again there.
  {
    bool current = false;
    for (auto& row : db_->query(db_->tables_sql()))
      if (row.at(0).as_text() == "lab_meta") current = true;
    if (current) {
      auto rows = db_->query("SELECT value FROM lab_meta WHERE key = 'schema'");
      current = !rows.empty() && parse_int(rows[0].at(0).as_text()) == kLabSchema;
    }
    if (current) return;
  }
  db_->begin(true);
  try {
    std::vector<std::string> tables;
    for (auto& row : db_->query(db_->tables_sql())) tables.push_back(row.at(0).as_text());
    const bool has_meta = std::count(tables.begin(), tables.end(), "lab_meta") > 0;
    if (!has_meta) {
      if (!tables.empty())
        throw UserError("--lab: " + where_ + " is not a Fanout lab store (it holds " + join(tables, ", ") + " and no lab_meta)");
      if (!create) throw UserError("--lab: no lab store at " + where_ + " yet (`fanout history add` makes one)");
      for (const char* sql : kSchema) {
        std::string s = sql;
        if (auto at = s.find("{KEY}"); at != std::string::npos) s.replace(at, 5, db_->serial_key());
        db_->exec(s);
      }
      db_->exec("INSERT INTO lab_meta(key, value) VALUES('schema', $1)", {std::to_string(kLabSchema)});
    } else {
      auto rows = db_->query("SELECT value FROM lab_meta WHERE key = 'schema'");
      const auto version = rows.empty() ? std::nullopt : parse_int(rows[0].at(0).as_text());
      if (!version) throw UserError("--lab: " + where_ + " is not a Fanout lab store (lab_meta has no schema version)");
      if (*version > kLabSchema)
        throw UserError("--lab: " + where_ + " is a lab store of schema " + std::to_string(*version) + ", newer than this fanout's (" +
                        std::to_string(kLabSchema) + "): use a newer fanout; nothing was changed");
      // Schema 1 is the first: later versions add their migrations here, each in this transaction.
    }
    db_->commit();
  } catch (...) {
    db_->rollback();
    throw;
  }
}

std::vector<std::string> LabStore::add(const std::vector<HistoryInput>& experiments, const std::string& benchmark_override) {
  std::vector<std::string> out;
  db_->begin(false);
  try {
    for (const HistoryInput& e : experiments) {
      const std::string benchmark = benchmark_override.empty() ? e.name : benchmark_override;
      const std::string path = fs::absolute(e.point.dir).lexically_normal().string();
      db_->exec("DELETE FROM lab_figures WHERE experiment_id IN (SELECT id FROM lab_experiments WHERE machine = $1 AND path = $2)", {e.machine, path});
      db_->exec("DELETE FROM lab_experiments WHERE machine = $1 AND path = $2", {e.machine, path});
      auto id = db_->query("INSERT INTO lab_experiments(benchmark, machine, path, revision, dirty, commit_time, started, added_at) "
                           "VALUES($1, $2, $3, $4, $5, $6, $7, $8) RETURNING id",
                           {benchmark, e.machine, path, e.point.revision, LabParam::real(e.dirty ? 1 : 0), LabParam::real(e.commit_time), LabParam::real(e.start),
                            LabParam::real(double(wall_ns()) / 1e9)});
      const LabParam experiment_id = LabParam::real(id.at(0).at(0).as_double());
      for (const AcrossRuns& f : e.figures)
        db_->exec("INSERT INTO lab_figures(experiment_id, role, metric, unit, better, setup_cost, parameters, runs, samples, median, low, high, run_medians) "
                  "VALUES($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13)",
                  {experiment_id, f.role, f.metric, f.unit, f.better, LabParam::real(f.setup_cost ? 1 : 0), parameters_json(f.parameters),
                   LabParam::real(double(f.runs.runs)), LabParam::real(double(f.samples)), LabParam::real(f.runs.median), LabParam::real(f.runs.low), LabParam::real(f.runs.high),
                   numbers_json(f.run_medians)});
      out.push_back(benchmark);
    }
    db_->commit();
  } catch (...) {
    db_->rollback();
    throw;
  }
  return out;
}

std::vector<std::string> LabStore::benchmarks() {
  std::vector<std::string> out;
  for (auto& row : db_->query("SELECT DISTINCT benchmark FROM lab_experiments")) out.push_back(row.at(0).as_text());
  std::sort(out.begin(), out.end());  // byte order on both databases (PostgreSQL's ORDER BY follows its locale)
  return out;
}

std::vector<HistoryInput> LabStore::load(const std::string& benchmark) {
  std::vector<HistoryInput> out;
  std::map<std::string, size_t> index;
  const auto rows = db_->query(
      "SELECT e.id, e.path, e.machine, e.revision, e.dirty, e.commit_time, e.started, f.role, f.metric, f.unit, f.better, f.setup_cost, "
      "f.parameters, f.runs, f.samples, f.median, f.low, f.high, f.run_medians FROM lab_experiments e LEFT JOIN lab_figures f ON f.experiment_id = e.id "
      "WHERE e.benchmark = $1 ORDER BY e.id",
      {benchmark});
  for (const LabRow& r : rows) {
    const std::string id = r.at(0).as_text();
    auto [it, fresh] = index.emplace(id, out.size());
    if (fresh) {
      HistoryInput h;
      h.point.dir = r[1].as_text();
      h.machine = r[2].as_text();
      h.point.revision = r[3].as_text();
      h.dirty = r[4].as_double() == 1;
      h.commit_time = r[5].as_double();
      h.start = r[6].as_double();
      h.name = benchmark;
      out.push_back(std::move(h));
    }
    if (r[7].null) continue;  // an experiment without figures
    AcrossRuns f;
    f.role = r[7].as_text(), f.metric = r[8].as_text(), f.unit = r[9].as_text(), f.better = r[10].as_text();
    f.setup_cost = r[11].as_double() == 1;
    f.parameters = parameters_of(r[12].as_text(), where_);
    f.runs.runs = size_t(r[13].as_double());
    f.samples = uint64_t(r[14].as_double());
    f.runs.median = r[15].as_double(), f.runs.low = r[16].as_double(), f.runs.high = r[17].as_double();
    f.run_medians = numbers_of(r[18].as_text(), where_);
    out[it->second].figures.push_back(std::move(f));
  }
  return out;
}

}  // namespace fanout
