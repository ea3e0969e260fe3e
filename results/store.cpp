#include "results/store.h"

#include <dirent.h>
#include <sqlite3.h>
#include <cstdio>
#include <unistd.h>

#include <chrono>
#include <algorithm>
#include <cmath>
#include <future>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <utility>

#include "common/clock.h"
#include "common/error.h"
#include "common/files.h"
#include "common/parallel.h"
#include "common/text.h"
#include "results/cache_bound.h"
#include "results/run_folder.h"
#include "results/sample_block.h"
#include "results/sample_file.h"
#include "plugins/sdk/fanout_plugin.h"

namespace fanout {

namespace fs = std::filesystem;

namespace {

const char* kSchema = R"SQL(
CREATE TABLE IF NOT EXISTS schema_info(version INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS experiments(
  id INTEGER PRIMARY KEY, name TEXT NOT NULL, plugin TEXT NOT NULL, subcommand TEXT NOT NULL,
  created_at TEXT NOT NULL, UNIQUE(name, plugin, subcommand));
CREATE TABLE IF NOT EXISTS runs(
  id INTEGER PRIMARY KEY, experiment_id INTEGER NOT NULL REFERENCES experiments(id),
  session TEXT NOT NULL, path TEXT NOT NULL UNIQUE, status TEXT NOT NULL, param_hash TEXT NOT NULL,
  launcher TEXT, job_id TEXT, node_list TEXT, exit_code INTEGER, signal INTEGER, reason TEXT,
  created_at REAL, started_at REAL, ended_at REAL, ingested_at REAL NOT NULL,
  provenance_set INTEGER REFERENCES provenance_sets(id), declaration_set INTEGER REFERENCES declaration_sets(id));
-- Up to 2026-12-06 runs(param_hash) had an index; only summarize_experiment_db read it, and a new run's hash is a
-- random place in it: at 100,000 runs a page of its own written at every commit. Dropped where a writer opens.
DROP INDEX IF EXISTS runs_param_hash;
CREATE TABLE IF NOT EXISTS parameters(
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE, name TEXT NOT NULL, value TEXT NOT NULL,
  ordinal INTEGER NOT NULL, PRIMARY KEY(run_id, name)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS metrics(
  id INTEGER PRIMARY KEY, role TEXT NOT NULL, name TEXT NOT NULL, unit TEXT NOT NULL, UNIQUE(role, name, unit));
CREATE TABLE IF NOT EXISTS sample_blocks(
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE, metric_id INTEGER NOT NULL REFERENCES metrics(id),
  rank INTEGER NOT NULL, block INTEGER NOT NULL, count INTEGER NOT NULL, rows TEXT NOT NULL,
  PRIMARY KEY(run_id, metric_id, rank, block)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS provenance_sets(id INTEGER PRIMARY KEY, content TEXT NOT NULL UNIQUE);
CREATE TABLE IF NOT EXISTS provenance_values(
  set_id INTEGER NOT NULL REFERENCES provenance_sets(id), key TEXT NOT NULL, value TEXT NOT NULL,
  PRIMARY KEY(set_id, key)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS rank_resources(
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE, role TEXT NOT NULL, rank INTEGER NOT NULL,
  cpus TEXT NOT NULL, gpus TEXT NOT NULL, PRIMARY KEY(run_id, role, rank)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS rank_nodes(
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE, role TEXT NOT NULL, rank INTEGER NOT NULL,
  node TEXT NOT NULL, PRIMARY KEY(run_id, role, rank)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS declaration_sets(id INTEGER PRIMARY KEY, content TEXT NOT NULL UNIQUE);
CREATE TABLE IF NOT EXISTS declaration_values(
  set_id INTEGER NOT NULL REFERENCES declaration_sets(id), role TEXT NOT NULL, metric TEXT NOT NULL,
  better TEXT NOT NULL, setup_cost INTEGER NOT NULL, PRIMARY KEY(set_id, role, metric)) WITHOUT ROWID;
CREATE TABLE IF NOT EXISTS rank_exits(
  run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE, role TEXT NOT NULL, rank INTEGER NOT NULL,
  exit_code INTEGER NOT NULL, signal INTEGER NOT NULL, PRIMARY KEY(run_id, role, rank)) WITHOUT ROWID;
)SQL";

// The rows of sample_blocks, one per sample, in plain SQL (json_each is built into SQLite).
const char* kSamplesView = R"SQL(
CREATE VIEW IF NOT EXISTS samples AS
  SELECT b.run_id, b.rank, m.role, m.name AS metric, j.value ->> 0 AS iteration, j.value ->> 1 AS t_start,
         j.value ->> 2 AS value, m.unit, j.value ->> 3 AS warmup
  FROM sample_blocks b JOIN metrics m ON m.id = b.metric_id, json_each(b.rows) j;
)SQL";
// A run's provenance and its metrics' declarations, each row as schema 2 stored it per run: since schema 3 the
// rows are stored once per distinct set (ResultsDb::row_set), which the run points at.
const char* kProvenanceView = R"SQL(
CREATE VIEW IF NOT EXISTS provenance AS
  SELECT r.id AS run_id, v.key, v.value FROM runs r JOIN provenance_values v ON v.set_id = r.provenance_set;
)SQL";
const char* kDeclarationsView = R"SQL(
CREATE VIEW IF NOT EXISTS metric_declarations AS
  SELECT r.id AS run_id, d.role, d.metric, d.better, d.setup_cost
  FROM runs r JOIN declaration_values d ON d.set_id = r.declaration_set;
)SQL";
// Schema 2's per-run table, for a database of that version read without upgrading it (it may predate the table).
const char* kDeclarationsTable2 = R"SQL(
CREATE TABLE IF NOT EXISTS metric_declarations(
  run_id INTEGER NOT NULL, role TEXT NOT NULL, metric TEXT NOT NULL,
  better TEXT NOT NULL, setup_cost INTEGER NOT NULL, PRIMARY KEY(run_id, role, metric)) WITHOUT ROWID;
)SQL";

// A database is fanout's only as fanout made it: its names are tables (a view named `runs` could be an endless
// query that hangs every reader), it has no triggers, and its one view, `samples`, is fanout's own. Checked before
// anything else reads it; `why` names what is wrong, "" when nothing is.
// A view's text as compared: blanks collapsed, "IF NOT EXISTS" and a trailing ';' left out.
std::string normalized_sql(std::string_view sql) {
  std::string out;
  for (char c : sql) {
    const bool blank = c == ' ' || c == '\n' || c == '\t' || c == '\r';
    if (blank) {
      if (!out.empty() && out.back() != ' ') out += ' ';
    } else {
      out += c;
    }
  }
  while (!out.empty() && (out.back() == ' ' || out.back() == ';')) out.pop_back();
  if (const size_t at = out.find("IF NOT EXISTS "); at != std::string::npos) out.erase(at, 14);
  return out;
}

std::string foreign_schema_reason(sqlite3* db) {
  // fanout's views, and schema 1's samples (which opening migrates). provenance and metric_declarations were
  // tables up to schema 2.
  static const std::pair<std::string, std::string> kViews[] = {
      {"samples", normalized_sql(kSamplesView)},
      {"samples", normalized_sql("CREATE VIEW samples AS SELECT s.run_id, s.rank, m.role, m.name AS metric, s.iteration, s.t_start, "
                                 "s.value, m.unit, s.warmup FROM sample_values s JOIN metrics m ON m.id = s.metric_id")},
      {"provenance", normalized_sql(kProvenanceView)},
      {"metric_declarations", normalized_sql(kDeclarationsView)}};
  static const char* const kTables[] = {"schema_info", "experiments", "runs", "parameters", "metrics", "sample_blocks",
                                        "provenance_sets", "provenance_values", "declaration_sets", "declaration_values",
                                        "rank_resources", "rank_nodes", "rank_exits"};
  sqlite3_stmt* s = nullptr;
  if (sqlite3_prepare_v2(db, "SELECT type, name, coalesce(sql, '') FROM sqlite_master", -1, &s, nullptr) != SQLITE_OK)
    return std::string("its schema cannot be read (") + sqlite3_errmsg(db) + ")";
  std::string why;
  while (why.empty() && sqlite3_step(s) == SQLITE_ROW) {
    const std::string type = reinterpret_cast<const char*>(sqlite3_column_text(s, 0)), name = reinterpret_cast<const char*>(sqlite3_column_text(s, 1)),
                      sql = reinterpret_cast<const char*>(sqlite3_column_text(s, 2));
    if (type == "trigger") why = "it has a trigger, '" + printable(name) + "', that fanout never makes";
    else if (type == "view" && std::find(std::begin(kViews), std::end(kViews), std::pair(name, normalized_sql(sql))) == std::end(kViews))
      why = "its view '" + printable(name) + "' is not fanout's";
    else if (type != "table" && std::find(std::begin(kTables), std::end(kTables), name) != std::end(kTables))
      why = "its '" + printable(name) + "' is a " + type + ", not fanout's table";
  }
  sqlite3_finalize(s);
  return why;
}

// Throws UserError naming `file` when foreign_schema_reason finds something fanout did not make.
void refuse_foreign_schema(sqlite3* db, const fs::path& file) {
  if (std::string why = foreign_schema_reason(db); !why.empty())
    throw UserError(file.string() + " is not a fanout results database as fanout makes them: " + why + "; nothing read");
}

// A prepared statement that finalizes itself.
class Stmt {
 public:
  Stmt(sqlite3* db, const char* sql) : db_(db) {
    if (sqlite3_prepare_v2(db, sql, -1, &s_, nullptr) != SQLITE_OK)
      throw UserError(std::string("results database: ") + sqlite3_errmsg(db));
  }
  // A statement kept prepared by its database (ResultsDb::prepared): reset, not finalized, when done.
  Stmt(sqlite3* db, sqlite3_stmt* kept) : db_(db), s_(kept), kept_(true) {}
  ~Stmt() {
    if (!kept_) sqlite3_finalize(s_);
    else sqlite3_reset(s_), sqlite3_clear_bindings(s_);
  }
  Stmt(const Stmt&) = delete;
  Stmt& operator=(const Stmt&) = delete;
  Stmt& bind(int i, int64_t v) { return check(sqlite3_bind_int64(s_, i, v)); }
  Stmt& bind(int i, double v) { return check(sqlite3_bind_double(s_, i, v)); }
  Stmt& bind(int i, std::string_view v) { return check(sqlite3_bind_text(s_, i, v.data(), int(v.size()), SQLITE_TRANSIENT)); }
  // Binds text that stays alive and unchanged until the statement has run (no copy).
  Stmt& bind_static(int i, std::string_view v) { return check(sqlite3_bind_text(s_, i, v.data(), int(v.size()), SQLITE_STATIC)); }
  // Steps once; true while a row is available.
  bool step() {
    int rc = sqlite3_step(s_);
    if (rc == SQLITE_ROW) return true;
    if (rc == SQLITE_DONE) return false;
    throw UserError(std::string("results database: ") + sqlite3_errmsg(db_));
  }
  void run() {
    step();
    sqlite3_reset(s_);
  }
  void reset() { sqlite3_reset(s_); }
  int64_t i64(int c) const { return sqlite3_column_int64(s_, c); }
  sqlite3_stmt* handle() const { return s_; }
  double dbl(int c) const { return sqlite3_column_double(s_, c); }
  std::string text(int c) const {
    auto p = sqlite3_column_text(s_, c);
    return p ? reinterpret_cast<const char*>(p) : "";
  }
  // Valid until the next step.
  std::string_view view(int c) const {
    auto p = reinterpret_cast<const char*>(sqlite3_column_text(s_, c));
    return p ? std::string_view(p, size_t(sqlite3_column_bytes(s_, c))) : std::string_view();
  }

 private:
  Stmt& check(int rc) {
    if (rc != SQLITE_OK) throw UserError(std::string("results database: ") + sqlite3_errmsg(db_));
    return *this;
  }
  sqlite3* db_;
  sqlite3_stmt* s_ = nullptr;
  bool kept_ = false;
};

double ns_to_s(int64_t ns) { return double(ns) / 1e9; }

// Whether the database file itself (not this connection's TEMP schema) has a table of that name.
bool has_table(sqlite3* db, std::string_view name) {
  Stmt q(db, "SELECT 1 FROM main.sqlite_master WHERE type = 'table' AND name = ?");
  return q.bind(1, name).step();
}

// Schema 3 keeps provenance and metric_declarations as views of the sets: a table of either name (which schema 2
// had) in a schema 3 file would stand where the view belongs and be read instead of the runs' sets.
void refuse_tables_for_views(sqlite3* db, const fs::path& file) {
  for (const char* name : {"provenance", "metric_declarations"})
    if (has_table(db, name))
      throw UserError(file.string() + " is not a fanout results database as fanout makes them: its '" + name +
                      "' is a table, where results schema 3 has a view; nothing read");
}

// Packs samples into sample_blocks rows: one open block per (run, metric, rank), written when full, and all of
// them when the open ones together pass kMaxBufferedBytes (a run with thousands of ranks stays bounded).
constexpr const char* kInsertBlock = "INSERT INTO sample_blocks(run_id, metric_id, rank, block, count, rows) VALUES(?,?,?,?,?,?)";

class BlockPacker {
 public:
  explicit BlockPacker(sqlite3* db) : insert_(db, kInsertBlock) {}
  // With the statement its database keeps prepared (a packer a run prepared it again: 4 % of the driver's CPU).
  BlockPacker(sqlite3* db, sqlite3_stmt* insert) : insert_(db, insert) {}
  void add(int64_t run_id, int64_t metric_id, int64_t rank, int64_t iteration, double t_start, double value, bool warmup) {
    Open& b = open_[{run_id, metric_id, rank}];
    size_t before = b.rows.bytes();
    b.rows.add(iteration, t_start, value, warmup);
    buffered_ += b.rows.bytes() - before;
    if (b.rows.count() >= kSamplesPerBlock) write({run_id, metric_id, rank}, b);
    if (buffered_ > kMaxBufferedBytes) flush();
  }
  // A block packed elsewhere, stored after anything already added for its (run, metric, rank).
  void add_block(int64_t run_id, int64_t metric_id, int64_t rank, size_t count, std::string_view rows) {
    Key key{run_id, metric_id, rank};
    Open& b = open_[key];
    write(key, b);
    insert(key, b.next_block++, count, rows);
  }
  void flush() {
    for (auto& [key, b] : open_) write(key, b);
  }

 private:
  static constexpr size_t kMaxBufferedBytes = 64 << 20;
  using Key = std::tuple<int64_t, int64_t, int64_t>;
  struct Open {
    SampleBlockWriter rows;
    int64_t next_block = 0;
  };
  void write(const Key& key, Open& b) {
    if (b.rows.count() == 0) return;
    insert(key, b.next_block++, b.rows.count(), b.rows.text());
    buffered_ -= b.rows.bytes();
    b.rows.clear();
  }
  void insert(const Key& key, int64_t block, size_t count, std::string_view rows) {
    auto [run, metric, rank] = key;
    insert_.bind(1, run).bind(2, metric).bind(3, rank).bind(4, block).bind(5, int64_t(count)).bind_static(6, rows).run();
  }
  Stmt insert_;
  std::map<Key, Open> open_;
  size_t buffered_ = 0;
};

// Schema 1 kept one row per sample in sample_values; schema 2 packs them (sample_block.h). Same samples, same
// order within (run, metric, rank).
void migrate_1_to_2(sqlite3* db) {
  BlockPacker packer(db);
  Stmt rows(db, "SELECT run_id, metric_id, rank, iteration, t_start, value, warmup FROM sample_values "
                "ORDER BY run_id, metric_id, rank, seq");
  while (rows.step())
    packer.add(rows.i64(0), rows.i64(1), rows.i64(2), rows.i64(3), rows.dbl(4),
               sqlite3_column_type(rows.handle(), 5) == SQLITE_NULL ? NAN : rows.dbl(5), rows.i64(6) != 0);
  packer.flush();
}

// How long a writer waits for another process's transaction before it fails.
constexpr int kWriterBusyTimeoutMs = 60000;

// A connection is used by one thread at a time (the threads that read and parse files beside it never touch it):
// SQLite's own lock around each call, taken and released at every step, bind and column read, was 2-3 % of the
// driver's CPU a run.
constexpr int kOneThreadAtATime = SQLITE_OPEN_NOMUTEX;

// The schema version a database records, `none` when it records none (a new file).
int64_t stored_schema_version(sqlite3* db, int64_t none) {
  Stmt v(db, "SELECT version FROM schema_info");
  return v.step() ? v.i64(0) : none;
}

}  // namespace

// (store.h) Before SQLite's first use in the process: a statement journal (the pages a statement inside a transaction
// changes, kept to undo that statement alone) stays in memory up to 8 MiB rather than 64 KiB. With 32 KiB pages
// the default sent every statement's second page to a temporary file: 19 page writes a run when runs are stored
// in batches. And no memory statistics (nothing reads them): keeping them took a process-wide mutex at every
// allocation SQLite made.
void configure_sqlite_once() {
  static std::once_flag once;
  std::call_once(once, [] {
    sqlite3_config(SQLITE_CONFIG_STMTJRNL_SPILL, 8 << 20);
    sqlite3_config(SQLITE_CONFIG_MEMSTATUS, 0);
  });
}


ResultsDb::ResultsDb(const fs::path& file) : file_(file) {
  configure_sqlite_once();
  if (sqlite3_open_v2(file.c_str(), &db_, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | kOneThreadAtATime, nullptr) !=
      SQLITE_OK) {
    std::string msg = db_ ? sqlite3_errmsg(db_) : "out of memory";
    sqlite3_close(db_);
    throw UserError("cannot open results database " + file.string() + ": " + msg);
  }
  // Writers from several fanout processes wait for each other instead of failing with "database is locked".
  sqlite3_busy_timeout(db_, kWriterBusyTimeoutMs);
  // A new database gets 32 KiB pages (set before WAL, which fixes the page size): a block of samples is about
  // 160 KB of text, on SQLite's default 4 KiB pages a chain of 40 overflow pages, each a WAL frame of its own.
  // Larger pages cost small runs: a commit writes every page it touched whole, about ten per run. Measured with
  // bench/results_bench, ingesting 10 M samples in 40 runs / 200 k in 2,000 runs: 4 KiB 3.5-4.0 / 1.3-1.6 s,
  // 32 KiB 2.9-3.1 / 2.4-2.8 s, 64 KiB 2.6-3.0 / 2.9-3.5 s. An existing database keeps its page size.
  exec("PRAGMA page_size=32768;");
  // 64 MiB page cache: ingestion of large runs stays in memory until commit.
  exec("PRAGMA journal_mode=WAL; PRAGMA synchronous=NORMAL; PRAGMA foreign_keys=ON; PRAGMA cache_size=-65536;");
  exec("BEGIN IMMEDIATE;");
  try {
    refuse_foreign_schema(db_, file);
    exec(kSchema);
    int64_t version = stored_schema_version(db_, 0);
    if (version == 0) {
      exec("INSERT INTO schema_info(version) VALUES(" + std::to_string(kResultsSchemaVersion) + ")");
      version = kResultsSchemaVersion;
    }
    if (version == 1) {
      migrate_1_to_2(db_);
      exec("DROP VIEW IF EXISTS samples; DROP TABLE sample_values; UPDATE schema_info SET version = 2;");
      version = 2;
    }
    if (version == 2) {
      migrate_2_to_3();
      exec("UPDATE schema_info SET version = 3;");
      version = 3;
    }
    if (version != kResultsSchemaVersion)
      throw UserError(file.string() + " has results schema version " + std::to_string(version) + ", this fanout uses " +
                      std::to_string(kResultsSchemaVersion));
    refuse_tables_for_views(db_, file);
    exec(kSamplesView);
    exec(kProvenanceView);
    exec(kDeclarationsView);
    exec("COMMIT;");
  } catch (...) {
    rollback();
    sqlite3_close(db_);
    db_ = nullptr;
    throw;
  }
}

// Opens an existing database to read, waiting (as writers do) while another connection holds it. A WAL database
// needs its -shm index, which SQLite makes beside it: in a folder the user cannot write, with no writer there to
// have made it, the open cannot start (SQLITE_CANTOPEN); only then is it read as immutable, no locks taken. (A
// writer that is busy says BUSY, never this, and is waited for.) Throws UserError naming the file.
static sqlite3* open_to_read(const fs::path& file) {
  configure_sqlite_once();
  auto attempt = [&](const std::string& name, int flags, std::string& why, int& code) -> sqlite3* {
    sqlite3* db = nullptr;
    code = sqlite3_open_v2(name.c_str(), &db, flags, nullptr);
    if (code == SQLITE_OK) {
      sqlite3_busy_timeout(db, 10000);
      code = sqlite3_exec(db, "SELECT count(*) FROM sqlite_master", nullptr, nullptr, nullptr);
      if (code == SQLITE_OK) return db;
    }
    why = db ? sqlite3_errmsg(db) : "cannot open";
    sqlite3_close(db);
    return nullptr;
  };
  if (!fs::is_regular_file(file)) throw UserError(file.string() + ": no such results database");
  std::string why;
  int code = 0;
  if (sqlite3* db = attempt(file.string(), SQLITE_OPEN_READONLY | kOneThreadAtATime, why, code)) return db;
  // A bulk ingest that was cut short (results ingest stores through a rollback journal) left its journal: the file
  // holds part of a transaction until a writer rolls it back. A reader cannot, and read as immutable it would see
  // the half-written transaction: refused, saying what mends it.
  std::error_code ec;
  if (fs::file_size(file.string() + "-journal", ec) > 0 && !ec)
    throw UserError(file.string() + ": a write in progress or cut short left " + file.filename().string() +
                    "-journal beside it; once no fanout writes it, open it with write access (fanout results ingest, or any command "
                    "that stores runs) to roll that write back (" + why + ")");
  if (((code & 0xff) == SQLITE_CANTOPEN || (code & 0xff) == SQLITE_READONLY) && ::access(file.parent_path().empty() ? "." : file.parent_path().c_str(), W_OK) != 0) {
    std::string uri = "file:";
    for (char c : fs::absolute(file).string()) {  // percent-encode what a URI path cannot hold as it is
      if (c == '%' || c == '?' || c == '#') {
        char buf[4];
        std::snprintf(buf, sizeof buf, "%%%02X", static_cast<unsigned char>(c));
        uri += buf;
      } else {
        uri += c;
      }
    }
    std::string why_immutable;
    int code_immutable = 0;
    if (sqlite3* db = attempt(uri + "?immutable=1", SQLITE_OPEN_READONLY | SQLITE_OPEN_URI | kOneThreadAtATime, why_immutable, code_immutable))
      return db;
  }
  throw UserError(file.string() + ": " + why);
}

ResultsDb::ResultsDb(const fs::path& file, ReadOnly) : db_(open_to_read(file)), file_(file) {
  try {
    refuse_foreign_schema(db_, file);
    int64_t version = stored_schema_version(db_, 0);
    // Schema 2 reads as it is: its per-run provenance and metric_declarations tables have the names and columns of
    // schema 3's views.
    if (version != kResultsSchemaVersion && version != 2)
      throw UserError(file.string() + " has results schema version " + std::to_string(version) + ", this fanout reads " +
                      std::to_string(kResultsSchemaVersion) + " and 2 (a command that writes it upgrades an older one)");
    if (version == kResultsSchemaVersion) refuse_tables_for_views(db_, file);
    // Tables added to version 2 later (metric_declarations, rank_exits, rank_resources) are missing from a database
    // an older fanout made, where a writing open adds them: read only, an empty one of each in this connection's TEMP
    // schema stands in (an unqualified name finds TEMP first), and the database is left as it is.
    std::string tables = kSchema;
    if (version == 2) tables += kDeclarationsTable2;
    for (const auto& statement : split(tables, ';')) {
      const std::string create = "CREATE TABLE IF NOT EXISTS ";
      const auto at = statement.find(create);
      if (at == std::string::npos) continue;
      const std::string name = statement.substr(at + create.size(), statement.find('(', at) - at - create.size());
      if (!has_table(db_, name)) exec("CREATE TEMP TABLE IF NOT EXISTS " + statement.substr(at + create.size()) + ";");
    }
  } catch (...) {
    sqlite3_close(db_);
    db_ = nullptr;
    throw;
  }
}

ResultsDb::~ResultsDb() {
  // Runs of a batch still open are kept (closing would roll them back): a driver leaving on an exception
  // keeps what it stored.
  if (!sqlite3_get_autocommit(db_)) sqlite3_exec(db_, "COMMIT;", nullptr, nullptr, nullptr);
  for (auto& [sql, stmt] : prepared_) sqlite3_finalize(stmt);
  sqlite3_close(db_);
}

sqlite3_stmt* ResultsDb::prepared(const char* sql) const {
  auto [it, fresh] = prepared_.try_emplace(sql, nullptr);
  if (fresh && sqlite3_prepare_v2(db_, sql, -1, &it->second, nullptr) != SQLITE_OK) {
    prepared_.erase(it);
    throw UserError(std::string("results database: ") + sqlite3_errmsg(db_));
  }
  return it->second;
}

void ResultsDb::cap_page_cache(int mib) { exec("PRAGMA cache_size=-" + std::to_string(mib * 1024) + ";"); }

void ResultsDb::sync_commits() {
  exec("PRAGMA synchronous=FULL;");
  synced_commits_ = true;
}

void ResultsDb::begin_batch() {
  if (sqlite3_get_autocommit(db_)) exec("BEGIN IMMEDIATE;");
  batch_runs_ = 0;
  orphan_free_after_ = -1;
}

void ResultsDb::commit_batch() {
  try {
    if (!sqlite3_get_autocommit(db_)) exec("COMMIT;");
  } catch (...) {
    rollback();  // and the ids it cached go with the rows
    throw;
  }
  batch_runs_ = 0;
  orphan_free_after_ = -1;
}

bool ResultsDb::in_batch() const { return !sqlite3_get_autocommit(db_); }

// Inside a batch (this connection's open transaction) the batch's own view is the snapshot.
ResultsDb::ReadSnapshot::ReadSnapshot(const ResultsDb& db) : db_(db), own_(!db.in_batch()) {
  if (!own_) return;
  db_.exec("BEGIN;");
  db_.exec("SELECT count(*) FROM runs;");  // a deferred transaction takes its snapshot at the first read
}

ResultsDb::ReadSnapshot::~ReadSnapshot() {
  if (!own_) return;
  try {
    db_.exec("COMMIT;");
  } catch (...) {
    // Nothing was written: ending a read cannot lose data.
  }
}

void ResultsDb::require_writable() const {
  if (sqlite3_db_readonly(db_, "main") == 1)
    throw UserError("results database " + file_.string() + " is read-only; fanout must write to it (check its and its folder's permissions)");
}

void ResultsDb::rollback() const {
  // SQLite rolls a transaction back by itself on some errors (SQLITE_FULL, SQLITE_IOERR): a second ROLLBACK
  // would fail with "no transaction is active" and hide the real error, which is what propagates.
  if (!sqlite3_get_autocommit(db_)) sqlite3_exec(db_, "ROLLBACK;", nullptr, nullptr, nullptr);
  experiment_ids_.clear();  // rows the transaction made may be gone with it
  metric_ids_.clear();
  orphan_free_after_ = -1;
  for (auto& ids : set_ids_) ids.clear();
}

void ResultsDb::exec(const std::string& sql) const {
  // SQLite answers SQLITE_BUSY without calling the busy handler in some cases (switching to WAL, WAL recovery
  // while another connection opens the database); every statement we pass here is idempotent, so retry.
  const int64_t deadline = monotonic_ns() + 60'000'000'000;
  for (int64_t pause_us = 1000;; pause_us = std::min<int64_t>(pause_us * 2, 50000)) {
    char* err = nullptr;
    int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &err);
    if (rc == SQLITE_OK) return;
    std::string msg = err ? err : "unknown error";
    sqlite3_free(err);
    if ((rc & 0xff) != SQLITE_BUSY && (rc & 0xff) != SQLITE_LOCKED) throw UserError("results database " + file_.string() + ": " + msg);
    if (monotonic_ns() > deadline) throw UserError("results database " + file_.string() + ": " + msg + " (for 60 s)");
    std::this_thread::sleep_for(std::chrono::microseconds(pause_us));
  }
}

namespace {

std::string id_key(const std::string& a, const std::string& b, const std::string& c) {
  std::string key = a;
  key += '\0';
  key += b;
  key += '\0';
  key += c;
  return key;
}

}  // namespace

int64_t ResultsDb::experiment_id(const std::string& name, const std::string& plugin, const std::string& subcommand) {
  int64_t& id = experiment_ids_[id_key(name, plugin, subcommand)];
  if (id == 0) id = experiment_row(name, plugin, subcommand);
  return id;
}

int64_t ResultsDb::metric_id(const std::string& role, const std::string& name, const std::string& unit) {
  int64_t& id = metric_ids_[id_key(role, name, unit)];
  if (id == 0) id = metric_row(role, name, unit);
  return id;
}

int64_t ResultsDb::experiment_row(const std::string& name, const std::string& plugin, const std::string& subcommand) {
  Stmt ins(db_, prepared("INSERT OR IGNORE INTO experiments(name, plugin, subcommand, created_at) VALUES(?,?,?,?)"));
  ins.bind(1, name).bind(2, plugin).bind(3, subcommand).bind(4, iso8601_utc(wall_ns())).run();
  Stmt q(db_, prepared("SELECT id FROM experiments WHERE name=? AND plugin=? AND subcommand=?"));
  q.bind(1, name).bind(2, plugin).bind(3, subcommand);
  q.step();
  return q.i64(0);
}

int64_t ResultsDb::metric_row(const std::string& role, const std::string& name, const std::string& unit) {
  Stmt ins(db_, prepared("INSERT OR IGNORE INTO metrics(role, name, unit) VALUES(?,?,?)"));
  ins.bind(1, role).bind(2, name).bind(3, unit).run();
  Stmt q(db_, prepared("SELECT id FROM metrics WHERE role=? AND name=? AND unit=?"));
  q.bind(1, role).bind(2, name).bind(3, unit);
  q.step();
  return q.i64(0);
}

namespace {

// One rank's sample file decoded and packed into blocks (the CPU-heavy half of ingestion, done per file so that
// files are packed in parallel while nothing touches the database).
struct PackedFile {
  SampleFileInfo info;
  std::vector<std::pair<std::string, std::string>> metrics;  // index -> (name, unit)
  struct Block {
    uint32_t metric;
    size_t count;
    std::string rows;
  };
  std::vector<Block> blocks;  // per metric, in recording order
  std::string error;          // not a sample file / corrupt: the file is left out whole
  fs::path streamed;          // a run too large to hold: read again while it is stored, its blocks never all held
  uintmax_t streamed_size = 0;           // the file as the first read saw it: a file that changed before the
  fs::file_time_type streamed_mtime{};   // second read is left out, not stored half from each
};

// A run's sample files up to this size together are packed in memory (on every core, while the run before is
// stored); a larger run is read once for what its files say and again, a block at a time, as it is stored, so
// that ingesting it costs a chunk of each file and a block of each metric, not its samples (30 M samples took the
// driver to 2.0 GB).
constexpr uintmax_t kPackInMemoryBytes = 64u << 20;
// Below this a run's files are packed on this thread alone: a thread started for each costs more than the small
// files of a short run take to pack.
constexpr uintmax_t kPackOnEveryCoreBytes = 1u << 20;

// Every sample of a file as blocks of one (metric), each handed over when full and the rest at the end, in
// recording order; `metric` names each of the file's metrics once, as it first comes.
void pack_blocks(const fs::path& file, SampleFileInfo& info, const std::function<void(uint16_t, const Sample&)>& metric,
                 const std::function<void(uint32_t metric, size_t count, std::string rows)>& block) {
  std::vector<SampleBlockWriter> open;  // by the file's metric id
  info = read_sample_file(file, [&](const Sample& s) {
    if (s.metric_id >= open.size()) open.resize(s.metric_id + 1u);
    SampleBlockWriter& w = open[s.metric_id];
    if (w.count() == 0) metric(s.metric_id, s);
    w.add(s.iteration, s.t_start_s, s.value, s.warmup);
    if (const size_t n = w.count(); n >= kSamplesPerBlock) block(s.metric_id, n, w.take());  // count before take
  });
  for (uint32_t m = 0; m < open.size(); ++m)
    if (const size_t n = open[m].count()) block(m, n, open[m].take());
}

PackedFile pack_sample_file(const fs::path& file, bool stream) {
  PackedFile p;
  try {
    if (stream) {
      p.streamed_size = fs::file_size(file);
      p.streamed_mtime = fs::last_write_time(file);
      p.info = read_sample_file(file, [](const Sample&) {});  // what it says (rank, node, declarations), no samples kept
      p.streamed = file;
      return p;
    }
    pack_blocks(
        file, p.info,
        [&](uint16_t id, const Sample& s) {
          if (id >= p.metrics.size()) p.metrics.resize(id + 1u);
          if (p.metrics[id].first.empty()) p.metrics[id] = {std::string(s.metric), std::string(s.unit)};
        },
        [&](uint32_t m, size_t count, std::string rows) { p.blocks.push_back({m, count, std::move(rows)}); });
  } catch (const UserError& e) {
    p.error = std::string(e.what()) + " (file skipped)";
  }
  return p;
}

// A run folder read and packed, ready to store: everything but the database's part of ingestion.
struct PackedRun {
  RunMetadata meta;
  fs::path dir;
  std::vector<PackedFile> files;
  std::vector<ResultsDb::RankPlace> ranks;
  ResultsDb::Declarations declared;  // of files held whole, each (role, metric) as the last declared it (streamed: none)
  std::vector<std::string> warnings;
};

// What the run's ranks said they ran (FANOUT_RUN_PROVENANCE_DIR): NAME=value lines, stored as plugin.NAME. Bounded
// and checked like any input: regular files of at most 64 KiB, names of [A-Za-z0-9_.-], values of one printable line.
void read_plugin_provenance(const fs::path& run_dir, RunMetadata& meta, std::vector<std::string>& warnings) {
  std::error_code ec;
  const fs::path dir = run_dir / FANOUT_RUN_PROVENANCE_DIR;  // most runs have none: one failed open
  const std::vector<FolderEntry> listed = list_folder(dir, ec);
  if (ec && ec != std::errc::no_such_file_or_directory) warnings.push_back(dir.string() + ": " + ec.message() + ", not read");
  for (auto& e : listed) {
    std::string text;
    try {
      text = read_input_file(dir / e.name, 64 * 1024);
    } catch (const UserError& err) {
      warnings.push_back(std::string(err.what()) + ": not read");
      continue;
    }
    for (const auto& line : split(text, '\n')) {
      const auto eq = line.find('=');
      const std::string key = line.substr(0, eq == std::string::npos ? 0 : eq);
      if (key.empty() || key.size() > 128 || filename_safe(key, 128) != key) continue;
      const std::string value = printable(line.substr(eq + 1).substr(0, 1024));
      meta.provenance.emplace("plugin." + key, value);  // never over a key of the driver's
    }
  }
}

// A run folder whose run.toml says `meta`, packed for storing.
PackedRun pack_run_as(const fs::path& run_dir, RunMetadata meta) {
  PackedRun run;
  run.meta = std::move(meta);
  run.dir = run_dir;
  read_plugin_provenance(run_dir, run.meta, run.warnings);
  std::vector<fs::path> files;
  std::error_code ec;
  const fs::path samples = samples_dir(run_dir);
  const std::vector<FolderEntry> listed = list_folder(samples, ec);
  if (ec && ec != std::errc::no_such_file_or_directory)  // a run that recorded nothing has no samples/
    run.warnings.push_back(samples.string() + ": " + ec.message() + ", no sample file read");
  for (auto& e : listed) {
    const fs::path file = samples / e.name;
    if (file.extension() != ".samples") continue;
    std::error_code type_ec;
    const bool regular = e.type == DT_UNKNOWN ? fs::symlink_status(file, type_ec).type() == fs::file_type::regular : e.type == DT_REG;
    if (!regular) {  // a FIFO would hang the read, a device never end
      run.warnings.push_back(file.string() + ": not a regular file, not read");
      continue;
    }
    files.push_back(file);
  }
  std::sort(files.begin(), files.end());
  // Every file packed on every core (a run of more than a MiB). Memory holds this run's samples (ingest_runs: two
  // runs', this one and the one being stored), up to kPackInMemoryBytes of files; past it they are streamed when stored.
  uintmax_t bytes = 0;
  for (auto& f : files) {
    const uintmax_t n = fs::file_size(f, ec);
    if (!ec) bytes += n;
  }
  const bool stream = bytes > kPackInMemoryBytes;
  run.files.resize(files.size());
  auto pack = [&](size_t i) { run.files[i] = pack_sample_file(files[i], stream); };
  if (bytes >= kPackOnEveryCoreBytes) parallel_for(files.size(), pack);
  else for (size_t i = 0; i < files.size(); ++i) pack(i);
  for (size_t i = 0; i < files.size(); ++i) {
    const PackedFile& p = run.files[i];
    if (!p.error.empty()) {
      run.warnings.push_back(p.error);
      continue;
    }
    // Rank -1 holds figures of a step as a whole (a scheduler's accounting): no rank ran there, no place to record.
    if (p.info.rank >= 0) run.ranks.push_back({p.info.role, p.info.rank, p.info.node, p.info.cpus, p.info.gpus});
    if (!stream)  // a streamed file is read again as it is stored, and declares only if it has not changed since
      for (auto& d : p.info.declarations) run.declared[{p.info.role, d.metric}] = {better_text(d.better), (d.flags & 1u) != 0};
    if (p.info.truncated) run.warnings.push_back(files[i].string() + ": ends inside a record (the rank died while writing)");
  }
  return run;
}

PackedRun pack_run(const fs::path& run_dir) { return pack_run_as(run_dir, read_run_metadata(run_dir)); }

// Stores a packed run in one transaction.
IngestReport store_packed(ResultsDb& db, const PackedRun& run) {
  auto report = db.store_run(run.meta, run.dir, [&](const ResultsDb::SampleSink& sink, IngestReport& stored) {
    for (auto& p : run.files) {
      if (!p.error.empty()) continue;
      if (!p.streamed.empty()) {  // read again, each block stored as it fills
        std::error_code ec;
        if (fs::file_size(p.streamed, ec) != p.streamed_size || ec || fs::last_write_time(p.streamed, ec) != p.streamed_mtime || ec) {
          stored.warnings.push_back(p.streamed.string() + ": changed while it was being stored (file skipped)");
          continue;
        }
        std::vector<int64_t> ids;
        SampleFileInfo again;
        pack_blocks(
            p.streamed, again,
            [&](uint16_t id, const Sample& s) {
              if (id >= ids.size()) ids.resize(id + 1u, -1);
              if (ids[id] < 0) ids[id] = sink.metric(p.info.role, std::string(s.metric), std::string(s.unit));
            },
            [&](uint32_t m, size_t count, std::string rows) { sink.block(p.info.rank, ids[m], count, rows); });
        for (auto& d : p.info.declarations) sink.declare(p.info.role, d.metric, better_text(d.better), d.flags & 1u);
      } else {
        std::vector<int64_t> ids(p.metrics.size(), -1);  // resolved on first use: a metric may be defined and never recorded
        for (auto& b : p.blocks) {
          if (ids[b.metric] < 0) ids[b.metric] = sink.metric(p.info.role, p.metrics[b.metric].first, p.metrics[b.metric].second);
          sink.block(p.info.rank, ids[b.metric], b.count, b.rows);
        }
      }
    }
  }, run.ranks, &run.declared);
  report.warnings.insert(report.warnings.begin(), run.warnings.begin(), run.warnings.end());
  return report;
}

}  // namespace

IngestReport ResultsDb::ingest_run(const fs::path& run_dir) { return store_packed(*this, pack_run(run_dir)); }
IngestReport ResultsDb::ingest_run(const fs::path& run_dir, RunMetadata meta) {
  return store_packed(*this, pack_run_as(run_dir, std::move(meta)));
}

// While held, the database keeps a rollback journal instead of its write-ahead log, when no other connection has it
// open (otherwise nothing changes). A rollback journal keeps only the pages a transaction changes that were in the
// file when it began: the pages a bulk ingest appends (the sample blocks, almost all of it) are written once, into
// the file, where the log writes each page twice (into the log, then into the file at its checkpoint).
class ResultsDb::BulkJournal {
 public:
  explicit BulkJournal(ResultsDb& db) : db_(db) {
    // Inside a batch its transaction stays as it is; a read-only connection writes nothing.
    if (!sqlite3_get_autocommit(db_.db_) || sqlite3_db_readonly(db_.db_, "main") == 1) return;
    // NORMAL is crash-safe with a write-ahead log, not with a rollback journal (a power cut could leave a journal
    // that does not match the file): FULL syncs the journal before the file is changed. The journal holds only the
    // few pages a run changes that were there before, so its sync is small. Set first: no switch without it.
    db_.exec("PRAGMA synchronous=FULL;");
    // Leaving WAL needs the database to itself: asked once, not waited for (another connection keeps it in WAL).
    sqlite3_busy_timeout(db_.db_, 0);
    const bool asked = sqlite3_exec(db_.db_, "PRAGMA journal_mode=TRUNCATE;", nullptr, nullptr, nullptr) == SQLITE_OK;
    sqlite3_busy_timeout(db_.db_, kWriterBusyTimeoutMs);
    switched_ = asked && mode() == "truncate";
    if (!switched_) db_.exec(db_.synced_commits_ ? "PRAGMA synchronous=FULL;" : "PRAGMA synchronous=NORMAL;");
  }
  ~BulkJournal() {
    if (!switched_) return;
    try {
      db_.exec("PRAGMA journal_mode=WAL;");  // waits out a reader that came meanwhile
      if (mode() == "wal" && !db_.synced_commits_) db_.exec("PRAGMA synchronous=NORMAL;");
    } catch (...) {
      // Left with its rollback journal, and FULL with it: the next writer's open puts it back in WAL.
    }
  }
  BulkJournal(const BulkJournal&) = delete;
  BulkJournal& operator=(const BulkJournal&) = delete;

  // A run's commit synced its pages to the file (a rollback journal's commit does): a large database lets them go.
  void committed() const {
    if (switched_) cache_.shed();
  }

 private:
  std::string mode() const {
    Stmt m(db_.db_, "PRAGMA journal_mode;");
    return m.step() ? m.text(0) : "";
  }
  ResultsDb& db_;
  bool switched_ = false;
  CacheBound cache_{db_.file_};
};

void ResultsDb::ingest_runs(const std::vector<fs::path>& run_dirs,
                            const std::function<void(const fs::path&, const IngestReport&)>& stored,
                            const std::function<void(const fs::path&, const std::string&)>& skipped, IngestBatch batch) {
  BulkJournal bulk(*this);
  // Committed together, as the driver commits the runs that end within a second (IngestBatch, store.h).
  std::vector<std::pair<fs::path, IngestReport>> uncommitted;
  int64_t batch_since_ns = 0;
  uint64_t batch_samples = 0;
  auto commit = [&] {
    if (!in_batch()) return;
    commit_batch();
    bulk.committed();
    for (auto& [dir, report] : uncommitted) stored(dir, report);
    uncommitted.clear();
  };
  // The next folder is read and packed in a thread of its own while this one is stored: SQLite takes one writer,
  // and packing had waited for it (10 M samples in 40 runs: 3.2 s one after the other, 2.6 s overlapped).
  std::future<PackedRun> next;
  if (!run_dirs.empty()) next = std::async(std::launch::async, pack_run, run_dirs[0]);
  for (size_t i = 0; i < run_dirs.size(); ++i) {
    std::optional<PackedRun> run;
    std::string unreadable;
    try {
      run = next.get();  // an unreadable run.toml is thrown here, in folder order
    } catch (const UserError& e) {
      if (!skipped) {
        commit();  // the runs before it are stored
        throw;
      }
      unreadable = e.what();
    }
    if (i + 1 < run_dirs.size()) next = std::async(std::launch::async, pack_run, run_dirs[i + 1]);
    if (!in_batch()) {
      begin_batch();
      batch_since_ns = monotonic_ns();
      batch_samples = 0;
    }
    if (run) {
      IngestReport report = store_packed(*this, *run);
      batch_samples += report.samples;
      uncommitted.emplace_back(run_dirs[i], std::move(report));
    } else {
      // A folder that no longer reads keeps no rows from an earlier ingest: they would stand for a run that is
      // not there any more, silently (issue 41).
      Stmt del(db_, "DELETE FROM runs WHERE path=?");
      del.bind(1, fs::absolute(run_dirs[i]).lexically_normal().string()).run();
      const bool had_rows = sqlite3_changes(db_) > 0;
      commit();  // what was stored before it is reported first, in folder order
      skipped(run_dirs[i], unreadable + (had_rows ? "; its rows from an earlier ingest were removed" : ""));
    }
    if (batch_samples >= batch.samples || double(monotonic_ns() - batch_since_ns) >= batch.seconds * 1e9) commit();
  }
  commit();
}

// A run's rows go with it (ON DELETE CASCADE) when foreign keys are on, as fanout's connections have them; a run
// deleted by a connection without them (the sqlite3 shell's default) leaves its rows, and SQLite gives its id to the
// next run stored: those rows are not that run's, and its plain INSERTs would collide with them.
void ResultsDb::forget_orphans_of(int64_t run_id) {
  // Looked at once a write transaction (a batch stores hundreds of runs, each given an id above the last): the
  // run tables' highest run_id, each a look at the end of its key.
  if (orphan_free_after_ < 0) {
    Stmt top(db_, prepared("SELECT coalesce(max(m), 0) FROM (SELECT max(run_id) AS m FROM parameters UNION ALL SELECT max(run_id) FROM sample_blocks "
                           "UNION ALL SELECT max(run_id) FROM rank_resources UNION ALL SELECT max(run_id) FROM rank_nodes "
                           "UNION ALL SELECT max(run_id) FROM rank_exits)"));
    orphan_free_after_ = top.step() ? top.i64(0) : 0;
  }
  if (run_id > orphan_free_after_) return;
  Stmt any(db_, prepared("SELECT 1 FROM parameters WHERE run_id = ?1 UNION ALL SELECT 1 FROM sample_blocks WHERE run_id = ?1 "
                         "UNION ALL SELECT 1 FROM rank_nodes WHERE run_id = ?1 UNION ALL SELECT 1 FROM rank_exits WHERE run_id = ?1 "
                         "UNION ALL SELECT 1 FROM rank_resources WHERE run_id = ?1 LIMIT 1"));
  if (!any.bind(1, run_id).step()) return;
  for (const char* table : {"parameters", "sample_blocks", "rank_resources", "rank_nodes", "rank_exits"})
    Stmt(db_, ("DELETE FROM " + std::string(table) + " WHERE run_id = ?").c_str()).bind(1, run_id).run();
}

namespace {

// A set's content: its rows in one text, each field length-prefixed (no separator a value could hold).
void append_field(std::string& out, std::string_view field) {
  out += std::to_string(field.size());
  out += ':';
  out += field;
}

}  // namespace

int64_t ResultsDb::row_set(SetKind kind, const std::string& content, const std::function<void(int64_t)>& insert_rows) {
  struct Sql {
    const char *find, *make;
  };
  static const Sql kSql[] = {{"SELECT id FROM provenance_sets WHERE content = ?", "INSERT INTO provenance_sets(content) VALUES(?)"},
                             {"SELECT id FROM declaration_sets WHERE content = ?", "INSERT INTO declaration_sets(content) VALUES(?)"}};
  auto& ids = set_ids_[size_t(kind)];
  if (auto it = ids.find(content); it != ids.end()) return it->second;
  int64_t id = 0;
  Stmt find(db_, prepared(kSql[size_t(kind)].find));
  if (find.bind_static(1, content).step()) {
    id = find.i64(0);
  } else {
    Stmt(db_, prepared(kSql[size_t(kind)].make)).bind_static(1, content).run();
    id = sqlite3_last_insert_rowid(db_);
    insert_rows(id);
  }
  if (ids.size() >= 64) ids.clear();  // a sweep has a few; runs that each differ must not grow it without bound
  ids.emplace(content, id);
  return id;
}

int64_t ResultsDb::provenance_set(const RunMetadata& meta) {
  std::vector<std::pair<std::string_view, std::string_view>> rows;
  for (auto& [k, v] : meta.provenance)
    if (k != "plugin_version") rows.emplace_back(k, v);
  rows.emplace_back("plugin_version", meta.plugin_version);  // the run's own, not what its run.toml's provenance said
  std::string content;
  for (auto [k, v] : rows) append_field(content, k), append_field(content, v);
  return row_set(SetKind::provenance, content, [&](int64_t id) {
    Stmt ins(db_, prepared("INSERT INTO provenance_values(set_id, key, value) VALUES(?,?,?)"));
    for (auto [k, v] : rows) ins.bind(1, id).bind(2, k).bind(3, v).run();
  });
}

int64_t ResultsDb::declaration_set(const Declarations& declared) {
  std::string content;
  for (auto& [key, how] : declared)
    append_field(content, key.first), append_field(content, key.second), append_field(content, how.first), content += how.second ? '1' : '0';
  return row_set(SetKind::declarations, content, [&](int64_t id) {
    Stmt ins(db_, prepared("INSERT INTO declaration_values(set_id, role, metric, better, setup_cost) VALUES(?,?,?,?,?)"));
    for (auto& [key, how] : declared)
      ins.bind(1, id).bind(2, key.first).bind(3, key.second).bind(4, how.first).bind(5, int64_t(how.second ? 1 : 0)).run();
  });
}

// Schema 2 stored provenance and metric_declarations per run: each run's rows become a set (runs alike share one),
// rows of runs no longer there are left behind, and the tables give way to schema 3's views of the same names.
void ResultsDb::migrate_2_to_3() {
  exec("ALTER TABLE runs ADD COLUMN provenance_set INTEGER REFERENCES provenance_sets(id);"
       "ALTER TABLE runs ADD COLUMN declaration_set INTEGER REFERENCES declaration_sets(id);");
  // Reads a table's rows of runs still there in run order, one run at a time; end_run gives the run's set, set on
  // the runs once the read is done (not while a query reading runs is open).
  auto per_run = [&](const std::string& sql, const char* column, const std::function<void(Stmt&)>& add_row,
                     const std::function<int64_t()>& end_run) {
    std::vector<std::pair<int64_t, int64_t>> sets;  // run, set
    {
      Stmt rows(db_, sql.c_str());
      int64_t run = 0;
      while (rows.step()) {
        if (rows.i64(0) != run && run != 0) sets.emplace_back(run, end_run());
        run = rows.i64(0);
        add_row(rows);
      }
      if (run != 0) sets.emplace_back(run, end_run());
    }
    Stmt set(db_, ("UPDATE runs SET " + std::string(column) + " = ? WHERE id = ?").c_str());
    for (auto [run, id] : sets) set.bind(1, id).bind(2, run).run();
  };
  if (has_table(db_, "provenance")) {
    RunMetadata meta;
    per_run("SELECT run_id, key, value FROM provenance WHERE run_id IN (SELECT id FROM runs) ORDER BY run_id, key", "provenance_set",
            [&](Stmt& r) {
              if (r.view(1) == "plugin_version") meta.plugin_version = r.text(2);
              else meta.provenance[r.text(1)] = r.text(2);
            },
            [&] {
              const int64_t id = provenance_set(meta);
              meta = RunMetadata{};
              return id;
            });
    exec("DROP TABLE provenance;");
  }
  if (has_table(db_, "metric_declarations")) {
    Declarations declared;
    per_run("SELECT run_id, role, metric, better, setup_cost FROM metric_declarations WHERE run_id IN (SELECT id FROM runs) "
            "ORDER BY run_id, role, metric", "declaration_set",
            [&](Stmt& r) { declared[{r.text(1), r.text(2)}] = {r.text(3), r.i64(4) != 0}; },
            [&] {
              const int64_t id = declaration_set(declared);
              declared.clear();
              return id;
            });
    exec("DROP TABLE metric_declarations;");
  }
}

namespace {

// The indices of `ranks` (anything with a role and a rank) that are the last entry of their (role, rank) among those
// `counts`, in order: what a row per entry replaced in turn (INSERT OR REPLACE) would have left.
template <class Rank>
std::vector<size_t> last_of_each_rank(const std::vector<Rank>& ranks, bool (*counts)(const Rank&) = nullptr) {
  std::vector<size_t> out;
  std::set<std::pair<std::string_view, int>> seen;
  for (size_t i = ranks.size(); i-- > 0;)
    if ((!counts || counts(ranks[i])) && (ranks.size() == 1 || seen.emplace(ranks[i].role, ranks[i].rank).second)) out.push_back(i);
  std::reverse(out.begin(), out.end());
  return out;
}

bool has_resources(const ResultsDb::RankPlace& r) { return !r.cpus.empty() || !r.gpus.empty(); }

}  // namespace

IngestReport ResultsDb::store_run(const RunMetadata& meta, const fs::path& run_dir_in,
                                  const std::function<void(const SampleSink&, IngestReport&)>& emit,
                                  const std::vector<RankPlace>& ranks, const Declarations* declared_first) {
  const fs::path run_dir = fs::absolute(run_dir_in).lexically_normal();
  IngestReport report;
  // In a batch the run joins its transaction. Not a savepoint: SQLite journals every page a savepoint touches first
  // (37 pages of 32 KiB a run, in a temporary file), more than the batch saves.
  const bool nested = in_batch();
  if (!nested) exec("BEGIN IMMEDIATE;"), orphan_free_after_ = -1;
  try {
    if (!meta.status) {
      // A folder that records no end, of a run the database holds as ended: its [status] append can be lost in a
      // host crash that the synced commit of its batch survived (docs/schedulers.md). Re-storing it would turn an
      // ended run into UNKNOWN; the stored row stands.
      {
        Stmt ended(db_, prepared("SELECT id, status FROM runs WHERE path=? AND status != 'UNKNOWN'"));
        if (ended.bind(1, run_dir.string()).step()) report.run_id = ended.i64(0), report.kept = ended.text(1);
      }
      if (!report.kept.empty()) {
        report.warnings.push_back("its run.toml records no end, but the database holds it as " + report.kept +
                                  ": kept as stored (a host crash can lose run.toml's [status] after the database's commit)");
        if (!nested) exec("COMMIT;");  // nothing written: not counted among the batch's runs a failure takes back
        return report;
      }
    }
    Stmt del(db_, prepared("DELETE FROM runs WHERE path=?"));
    del.bind(1, run_dir.string()).run();
    const RunStatusRecord st = meta.status.value_or(RunStatusRecord{"UNKNOWN", "", "", "run did not record an end", 0, 0, 0, 0, {}});
    Stmt ins(db_, prepared("INSERT INTO runs(experiment_id, session, path, status, param_hash, launcher, job_id, node_list, exit_code, "
             "signal, reason, created_at, started_at, ended_at, ingested_at, provenance_set, declaration_set) "
             "VALUES(?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)"));
    ins.bind(1, experiment_id(meta.experiment, meta.plugin, meta.subcommand))
        .bind(2, meta.session).bind(3, run_dir.string()).bind(4, st.state).bind(5, meta.param_hash)
        .bind(6, meta.scheduler).bind(7, st.job_id).bind(8, st.node_list).bind(9, int64_t(st.exit_code))
        .bind(10, int64_t(st.signal)).bind(11, st.reason).bind(12, ns_to_s(meta.created_wall_ns))
        .bind(13, ns_to_s(st.start_wall_ns)).bind(14, ns_to_s(st.end_wall_ns)).bind(15, ns_to_s(wall_ns()))
        .bind(16, provenance_set(meta));
    if (declared_first && !declared_first->empty()) ins.bind(17, declaration_set(*declared_first));  // else NULL
    ins.run();
    report.run_id = sqlite3_last_insert_rowid(db_);
    forget_orphans_of(report.run_id);
    // Plain INSERTs, each key once: INSERT OR REPLACE cost twice as much a row (its conflict handling on a table
    // with foreign keys), half of what storing a run cost.
    Stmt par(db_, prepared("INSERT INTO parameters(run_id, name, value, ordinal) VALUES(?,?,?,?)"));
    int64_t ordinal = 0;
    for (auto& [k, v] : meta.parameters) par.bind(1, report.run_id).bind(2, k).bind(3, v).bind(4, ordinal++).run();
    // A rank listed twice (two sample files naming the same one) keeps its last entry, its resources their last
    // entry that names any, as INSERT OR REPLACE left them, at half its cost a row. A deleted run's rows left behind
    // under this id are gone first (forget_orphans_of).
    Stmt ex(db_, prepared("INSERT INTO rank_exits(run_id, role, rank, exit_code, signal) VALUES(?,?,?,?,?)"));
    for (size_t i : last_of_each_rank(st.ranks)) {
      const RankExitRecord& r = st.ranks[i];
      ex.bind(1, report.run_id).bind(2, r.role).bind(3, int64_t(r.rank)).bind(4, int64_t(r.exit_code)).bind(5, int64_t(r.signal)).run();
    }
    Stmt node(db_, prepared("INSERT INTO rank_nodes(run_id, role, rank, node) VALUES(?,?,?,?)"));
    Stmt res(db_, prepared("INSERT INTO rank_resources(run_id, role, rank, cpus, gpus) VALUES(?,?,?,?,?)"));
    for (size_t i : last_of_each_rank(ranks))
      node.bind(1, report.run_id).bind(2, ranks[i].role).bind(3, int64_t(ranks[i].rank)).bind(4, ranks[i].node).run();
    for (size_t i : last_of_each_rank(ranks, has_resources))
      res.bind(1, report.run_id).bind(2, ranks[i].role).bind(3, int64_t(ranks[i].rank)).bind(4, ranks[i].cpus).bind(5, ranks[i].gpus).run();

    BlockPacker packer(db_, prepared(kInsertBlock));
    SampleSink sink;
    sink.metric = [&](const std::string& role, const std::string& metric, const std::string& unit) { return metric_id(role, metric, unit); };
    sink.sample = [&](int rank, int64_t mid, int64_t iteration, double t_start, double value, bool warmup) {
      packer.add(report.run_id, mid, rank, iteration, t_start, value, warmup);
      ++report.samples;
    };
    sink.block = [&](int rank, int64_t mid, size_t count, std::string_view rows) {
      packer.add_block(report.run_id, mid, rank, count, rows);
      report.samples += count;
    };
    // Every rank declares its metrics: each (role, metric) stored once, as the last rank declared it.
    Declarations declared;
    sink.declare = [&](const std::string& role, const std::string& metric, const std::string& better, bool setup_cost) {
      declared[{role, metric}] = {better, setup_cost};
    };
    emit(sink, report);
    packer.flush();
    if (!declared.empty()) {
      if (declared_first)
        for (auto& [key, how] : *declared_first) declared.try_emplace(key, how);  // emit's are the later word
      Stmt(db_, prepared("UPDATE runs SET declaration_set = ? WHERE id = ?")).bind(1, declaration_set(declared)).bind(2, report.run_id).run();
    }
    if (nested) ++batch_runs_;
    else exec("COMMIT;");
  } catch (const std::exception& e) {
    rollback();
    if (!nested || batch_runs_ == 0) throw;
    // As SQLite itself ends the whole transaction on SQLITE_FULL or SQLITE_IOERR.
    const size_t lost = std::exchange(batch_runs_, 0);
    throw UserError(std::string(e.what()) + " (storing " + run_dir.string() + "; the " + std::to_string(lost) +
                    " run(s) stored before it since the last commit went back with it: their folders are intact, and a resume "
                    "or `fanout results ingest` stores them)");
  }
  return report;
}

size_t ResultsDb::metric_declaration_count() const {
  Stmt q(db_, "SELECT count(*) FROM metric_declarations");
  return q.step() ? size_t(q.i64(0)) : 0;
}

std::vector<std::string> ResultsDb::provenance_values(const std::string& key) const {
  std::vector<std::string> out;
  Stmt q(db_, "SELECT value FROM provenance WHERE key = ? AND value != '' GROUP BY value ORDER BY min(run_id)");
  q.bind(1, key);
  while (q.step()) out.push_back(q.text(0));
  return out;
}

std::vector<StoredRun> ResultsDb::runs() const {
  std::vector<StoredRun> out;
  for_each_run([&](StoredRun&& r) { out.push_back(std::move(r)); });
  return out;
}

struct ResultsDb::RunReader::Statements {
  Stmt runs, parameters;
  bool done = false;
  bool parameters_done = false, parameter_held = false;  // the scan of parameters, a row ahead of the runs' at most
};

namespace {

// The runs in id order with three provenance values each. Schema 3 keeps provenance once per distinct set: read
// from the set the run points at (through the provenance view each lookup also found the run again by its id, a
// third of a 100,000-run walk). Schema 2 (read as it is) kept it per run.
std::string run_walk_sql(sqlite3* db) {
  const std::string from = stored_schema_version(db, kResultsSchemaVersion) == 2 ? "provenance WHERE run_id = runs.id" : "provenance_values WHERE set_id = runs.provenance_set";
  auto value = [&](const char* key) { return "(SELECT value FROM " + from + " AND key = '" + key + "')"; };
  return "SELECT id, session, status, path, param_hash, job_id, node_list, reason, " + value("repeat") + ", " + value("scaling") + ", " +
         value("plugin_settings") + " FROM runs ORDER BY id";
}

}  // namespace

// The parameters are one scan in run order beside the runs', not a statement per run: each sorted its few rows by
// ordinal in a temporary b-tree (as much again as the walk's own rows).
ResultsDb::RunReader::RunReader(const ResultsDb& db)
    : s_(new Statements{Stmt(db.db_, run_walk_sql(db.db_).c_str()), Stmt(db.db_, "SELECT run_id, ordinal, name, value FROM parameters ORDER BY run_id")}) {}

ResultsDb::RunReader::~RunReader() = default;

bool ResultsDb::RunReader::next(StoredRun& r) {
  Stmt& q = s_->runs;
  if (s_->done || !q.step()) return s_->done = true, false;  // a finished statement stepped again would start over
  // The repeat index is the provenance's "k/N" (or "k/auto"): its k.
  const std::string repeat = q.text(8), settings = q.text(10);
  r = StoredRun{q.i64(0), q.text(1), q.text(2), q.text(3), q.text(4), q.text(5), q.text(6), q.text(7), {},
                repeat.empty() ? "1" : repeat.substr(0, repeat.find('/')), q.text(9), {}};
  for (auto& name : split(settings, ','))
    if (!name.empty()) r.settings.insert(name);
  Stmt& p = s_->parameters;
  std::vector<std::pair<int64_t, size_t>> order;  // (ordinal, index in r.parameters)
  while (!s_->parameters_done) {
    if (!s_->parameter_held && !p.step()) {
      s_->parameters_done = true;
      break;
    }
    s_->parameter_held = true;
    const int64_t run = p.i64(0);
    if (run > r.id) break;  // the next run's: held for it
    s_->parameter_held = false;
    if (run < r.id) continue;  // a run no longer listed
    order.emplace_back(p.i64(1), r.parameters.size());
    r.parameters.emplace_back(p.text(2), p.text(3));
  }
  if (!std::is_sorted(order.begin(), order.end())) {
    std::sort(order.begin(), order.end());
    std::vector<std::pair<std::string, std::string>> sorted;
    for (auto& [ordinal, i] : order) sorted.push_back(std::move(r.parameters[i]));
    r.parameters = std::move(sorted);
  }
  return true;
}

void ResultsDb::for_each_run(const std::function<void(StoredRun&&)>& fn) const {
  RunReader reader(*this);
  for (StoredRun r; reader.next(r);) fn(std::move(r));
}

namespace {

// A sample that counts in statistics: not warmup, and a number (null: the rank recorded NaN).
bool measured(const SampleRowText& row, double& value) {
  if (row.warmup) return false;
  value = stored_real(row.value);
  return !std::isnan(value);
}

// Consecutive stored blocks of one (run, metric), rank by rank, with the group's row so far: a chunk of at most
// about kChunkBytes of text is parsed while the next is read, so memory holds two chunks and the values.
struct MetricChunk {
  MetricSummaryRow row;  // run and names set when the group starts; values and ranks grow chunk by chunk
  int last_rank = -1;    // the last rank counted in row.ranks: blocks come rank by rank
  bool ends_group = false;
  size_t bytes = 0;
  std::vector<std::pair<int, std::string>> blocks;  // (rank, rows)
};
constexpr size_t kChunkBytes = 8u << 20;

// Adds the chunk's measured values (warmup and NaN left out) to its row.
MetricChunk parse_chunk(MetricChunk c, const std::string& what) {
  SampleRowText text;
  for (auto& [rank, rows] : c.blocks) {
    SampleBlockReader reader(rows, what);
    while (reader.next(text)) {
      double v = 0;
      if (!measured(text, v)) {
        if (!text.warmup) ++c.row.not_a_number;
        continue;
      }
      c.row.values.push_back(v);
      if (rank != c.last_rank) ++c.row.ranks, c.last_rank = rank;
    }
  }
  c.blocks.clear();
  return c;
}

}  // namespace

void ResultsDb::for_each_metric(const std::function<void(MetricSummaryRow&)>& fn) const {
  // Stages: this thread reads a chunk of blocks while the previous chunk is parsed on a second thread, and fn (on
  // this thread, in order) may summarise a finished group on a third. Parsing the text was half the time of
  // computing statistics.
  const auto names = metrics();
  const std::string what = file_.string();
  std::future<MetricChunk> parsing;  // a large chunk's, on its thread
  std::optional<MetricChunk> parsed;  // or a small one's, parsed here: a thread costs more than its parsing
  auto hand_over = [&](MetricChunk next) {
    std::optional<MetricSummaryRow> finished;
    if (parsing.valid()) parsed = parsing.get();
    if (parsed) {
      MetricChunk done = std::move(*parsed);
      parsed.reset();
      if (done.ends_group) finished = std::move(done.row);
      else next.row = std::move(done.row), next.last_rank = done.last_rank;  // the same group goes on
    }
    if (next.bytes < (256u << 10)) parsed = parse_chunk(std::move(next), what);
    else parsing = std::async(std::launch::async, parse_chunk, std::move(next), std::cref(what));
    if (finished && !finished->values.empty()) fn(*finished);
  };
  // The declarations of the run whose groups are being read, (role, metric) -> (better, setup cost), and what they
  // say of each metric id met. Schema 3 keeps them once per distinct set, which a sweep's runs share: read again only
  // when the set changes (a statement, a map and a look in it with two copied strings a run and a group were a
  // tenth of a 100,000-run sweep's CSV pass). Schema 2 (read as it is) kept them per run.
  const bool by_set = stored_schema_version(db_, kResultsSchemaVersion) >= 3;
  std::optional<Stmt> set_of;  // schema 2's runs have no declaration_set
  if (by_set) set_of.emplace(db_, "SELECT declaration_set FROM runs WHERE id = ?");
  Stmt declared(db_, by_set ? "SELECT role, metric, better, setup_cost FROM declaration_values WHERE set_id = ?"
                            : "SELECT role, metric, better, setup_cost FROM metric_declarations WHERE run_id = ?");
  Declarations of_run;
  std::unordered_map<int64_t, const Declarations::mapped_type*> of_metric;  // nullptr: declared by no rank
  int64_t declared_run = -1, declared_set = -2;
  auto start_group = [&](int64_t run, int64_t metric) {
    MetricChunk c;
    const MetricInfo& info = names.at(metric);
    c.row.run_id = run;
    c.row.role = info.role;
    c.row.metric = info.name;
    c.row.unit = info.unit;
    if (run != declared_run) {
      declared_run = run;
      int64_t set = run;
      if (by_set) {
        set_of->reset();
        set = set_of->bind(1, run).step() && sqlite3_column_type(set_of->handle(), 0) != SQLITE_NULL ? set_of->i64(0) : -1;
      }
      if (set != declared_set) {
        declared_set = set;
        of_run.clear(), of_metric.clear();
        declared.reset();
        declared.bind(1, set);
        while (declared.step()) of_run[{declared.text(0), declared.text(1)}] = {declared.text(2), declared.i64(3) != 0};
      }
    }
    auto [known, fresh] = of_metric.try_emplace(metric, nullptr);
    if (fresh)
      if (auto d = of_run.find({info.role, info.name}); d != of_run.end()) known->second = &d->second;
    if (known->second) c.row.better = known->second->first, c.row.setup_cost = known->second->second;
    return c;
  };
  MetricChunk cur;
  int64_t cur_metric = -1;
  for_each_block("", [&](int64_t run, int64_t metric, int rank, std::string_view rows) {
    if (cur_metric < 0 || run != cur.row.run_id || metric != cur_metric) {
      if (cur_metric >= 0) {
        cur.ends_group = true;
        hand_over(std::move(cur));
      }
      cur = start_group(run, metric);
      cur_metric = metric;
    } else if (cur.bytes >= kChunkBytes) {
      MetricChunk rest;  // the group goes on: its row is carried over from this chunk when parsed
      rest.row.run_id = run;
      hand_over(std::exchange(cur, std::move(rest)));
    }
    cur.blocks.emplace_back(rank, std::string(rows));
    cur.bytes += rows.size();
  });
  if (cur_metric >= 0) {
    cur.ends_group = true;
    hand_over(std::move(cur));
  }
  hand_over(MetricChunk{});  // collects the last group (an empty chunk: nothing to parse)
}

void ResultsDb::for_each_block(const std::string& where,
                               const std::function<void(int64_t, int64_t, int, std::string_view)>& fn) const {
  // Primary-key order: run, metric, rank, block (recording order within a rank).
  Stmt q(db_, ("SELECT b.run_id, b.metric_id, b.rank, b.rows FROM sample_blocks b " + where +
               " ORDER BY b.run_id, b.metric_id, b.rank, b.block").c_str());
  CacheBound cache(file_);
  while (q.step()) {
    const std::string_view rows = q.view(3);
    fn(q.i64(0), q.i64(1), int(q.i64(2)), rows);
    cache.passed(rows.size());
  }
}

void ResultsDb::for_each_row(const std::string& where,
                             const std::function<void(int64_t, int64_t, int, const SampleRowText&)>& fn) const {
  SampleRowText row;
  for_each_block(where, [&](int64_t run, int64_t metric, int rank, std::string_view rows) {
    SampleBlockReader reader(rows, file_.string());
    while (reader.next(row)) fn(run, metric, rank, row);
  });
}

void ResultsDb::for_each_value(const std::string& role, const std::string& metric, const std::string& unit,
                               const std::function<void(int64_t, double)>& fn) const {
  int64_t id = -1;
  for (auto& [mid, m] : metrics())
    if (m.role == role && m.name == metric && m.unit == unit) id = mid;
  if (id < 0) return;
  for_each_row("WHERE b.metric_id = " + std::to_string(id), [&](int64_t run, int64_t, int, const SampleRowText& row) {
    double v = 0;
    if (measured(row, v)) fn(run, v);
  });
}

std::map<int64_t, ResultsDb::MetricInfo> ResultsDb::metrics() const {
  std::map<int64_t, MetricInfo> out;
  Stmt q(db_, "SELECT id, role, name, unit FROM metrics");
  while (q.step()) out[q.i64(0)] = {q.text(1), q.text(2), q.text(3)};
  return out;
}

void ResultsDb::for_each_sample(const std::function<void(int64_t, int, int64_t, const SampleRowText&)>& fn) const {
  for_each_row("", [&](int64_t run, int64_t metric, int rank, const SampleRowText& row) { fn(run, rank, metric, row); });
}

ExperimentSummary summarize_experiment_db(const std::filesystem::path& file) {
  // Read-only, and never created: another driver may be writing this experiment, and a missing file is an error.
  sqlite3* db = open_to_read(file);
  try {
    refuse_foreign_schema(db, file);
  } catch (const UserError&) {
    sqlite3_close(db);
    throw;
  }
  ExperimentSummary summary;
  sqlite3_stmt* st = nullptr;
  // An attempt that did not complete is superseded once its permutation was run again (a retry, a resume); a later
  // failure after an earlier completion is a failure.
  // (An attempt is superseded when its permutation has a later one: its id below its hash's last.)
  const char* sql =
      "SELECT CASE WHEN a.status != 'COMPLETED' AND a.id < l.last THEN '' ELSE a.status END, count(*), max(a.ended_at) "
      "FROM runs a JOIN (SELECT param_hash, max(id) AS last FROM runs GROUP BY param_hash) l USING (param_hash) GROUP BY 1";
  if (sqlite3_prepare_v2(db, sql, -1, &st, nullptr) != SQLITE_OK) {
    std::string why = sqlite3_errmsg(db);
    sqlite3_close(db);
    throw UserError(file.string() + ": not a fanout results database (" + why + ")");
  }
  int rc;
  while ((rc = sqlite3_step(st)) == SQLITE_ROW) {
    const int64_t n = sqlite3_column_int64(st, 1);
    const std::string status = reinterpret_cast<const char*>(sqlite3_column_text(st, 0));
    if (status.empty()) summary.superseded = n;
    else summary.runs_by_status[status] = n;
    summary.runs += n;
    if (sqlite3_column_type(st, 2) != SQLITE_NULL) summary.last_end_s = std::max(summary.last_end_s, sqlite3_column_double(st, 2));
  }
  std::string why = rc == SQLITE_DONE ? "" : sqlite3_errmsg(db);
  sqlite3_finalize(st);
  auto each = [&](const char* q, const std::function<void(const std::string&)>& take) {
    sqlite3_stmt* s = nullptr;
    if (!why.empty()) return;
    if (sqlite3_prepare_v2(db, q, -1, &s, nullptr) != SQLITE_OK) {
      why = sqlite3_errmsg(db);
      return;
    }
    int r;
    while ((r = sqlite3_step(s)) == SQLITE_ROW) take(reinterpret_cast<const char*>(sqlite3_column_text(s, 0)));
    if (r != SQLITE_DONE) why = sqlite3_errmsg(db);
    sqlite3_finalize(s);
  };
  each("SELECT DISTINCT param_hash FROM runs WHERE status = 'COMPLETED'", [&](const std::string& v) { summary.completed.insert(v); });
  each("SELECT value FROM provenance WHERE key = 'revision' AND value != '' GROUP BY value ORDER BY min(run_id)",
       [&](const std::string& v) { summary.revisions.push_back(v); });
  each("SELECT DISTINCT value FROM provenance WHERE key = 'source_dirty'", [&](const std::string& v) { summary.dirty.push_back(v); });
  sqlite3_close(db);
  if (!why.empty()) throw UserError(file.string() + ": " + why);
  return summary;
}

}  // namespace fanout
