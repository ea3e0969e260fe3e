// A lab store in an SQLite file (results/lab_connection.h).
#include <sqlite3.h>

#include <filesystem>
#include <map>

#include "common/error.h"
#include "results/lab_connection.h"
#include "results/store.h"

namespace fanout {

namespace {

class SqliteLab : public LabConnection {
 public:
  SqliteLab(const std::string& path, bool create) : path_(path) {
    namespace fs = std::filesystem;
    if (!create && !fs::exists(path)) throw UserError("--lab: no lab store at " + path + " yet (`fanout history add` makes one)");
    if (create && fs::path(path).has_parent_path()) fs::create_directories(fs::path(path).parent_path());
    configure_sqlite_once();  // a lab can be SQLite's first use in the process (fanout run --lab=...)
    if (sqlite3_open_v2(path.c_str(), &db_, SQLITE_OPEN_READWRITE | (create ? SQLITE_OPEN_CREATE : 0), nullptr) != SQLITE_OK) {
      const std::string why = db_ ? sqlite3_errmsg(db_) : "out of memory";
      sqlite3_close(db_);
      throw UserError("--lab: cannot open " + path + ": " + why);
    }
    sqlite3_busy_timeout(db_, 60000);  // another driver adding at the same moment: wait for it
    // The default rollback journal, not WAL: a lab is often a file under $HOME on a cluster's network filesystem,
    // where SQLite's WAL (shared memory between processes) does not work.
    try {
      exec("PRAGMA foreign_keys = ON");
      query("SELECT count(*) FROM sqlite_master", {});  // reads the header: a file that is not SQLite says so here
    } catch (const UserError&) {
      const std::string why = sqlite3_errmsg(db_);
      for (auto& [sql, st] : statements_) sqlite3_finalize(st);
      sqlite3_close(db_);
      throw UserError("--lab: " + path + " is not a Fanout lab store (not an SQLite database: " + why + ")");
    }
  }
  ~SqliteLab() override {
    for (auto& [sql, st] : statements_) sqlite3_finalize(st);
    sqlite3_close(db_);
  }

  std::vector<LabRow> query(const std::string& sql, const std::vector<LabParam>& params) override {
    sqlite3_stmt*& st = statements_[sql];
    if (!st && sqlite3_prepare_v2(db_, sql.c_str(), -1, &st, nullptr) != SQLITE_OK) fail();
    sqlite3_reset(st);
    sqlite3_clear_bindings(st);
    for (size_t i = 0; i < params.size(); ++i) {
      const int at = sqlite3_bind_parameter_index(st, ("$" + std::to_string(i + 1)).c_str());
      if (at == 0) continue;
      const LabParam& p = params[i];
      if (p.kind == LabParam::Kind::Text) sqlite3_bind_text(st, at, p.text.data(), int(p.text.size()), SQLITE_TRANSIENT);
      else if (p.kind == LabParam::Kind::Number) sqlite3_bind_double(st, at, p.number);
      else sqlite3_bind_null(st, at);
    }
    std::vector<LabRow> rows;
    for (int rc; (rc = sqlite3_step(st)) != SQLITE_DONE;) {
      if (rc != SQLITE_ROW) fail();
      LabRow row(size_t(sqlite3_column_count(st)));
      for (int c = 0; c < int(row.size()); ++c) {
        LabValue& v = row[size_t(c)];
        switch (sqlite3_column_type(st, c)) {
          case SQLITE_NULL: break;
          case SQLITE_INTEGER:
          case SQLITE_FLOAT: v.null = false, v.numeric = true, v.number = sqlite3_column_double(st, c); break;
          default:
            v.null = false;
            v.text.assign(reinterpret_cast<const char*>(sqlite3_column_text(st, c)), size_t(sqlite3_column_bytes(st, c)));
        }
      }
      rows.push_back(std::move(row));
    }
    sqlite3_reset(st);
    return rows;
  }
  void begin(bool) override { exec("BEGIN IMMEDIATE"); }
  void commit() override { exec("COMMIT"); }
  void rollback() override { sqlite3_exec(db_, "ROLLBACK", nullptr, nullptr, nullptr); }
  std::string serial_key() const override { return "INTEGER PRIMARY KEY"; }
  std::string tables_sql() const override { return "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%' ORDER BY name"; }

 private:
  [[noreturn]] void fail() { throw UserError("--lab " + path_ + ": " + sqlite3_errmsg(db_)); }
  std::string path_;
  sqlite3* db_ = nullptr;
  std::map<std::string, sqlite3_stmt*> statements_;
};

}  // namespace

std::unique_ptr<LabConnection> open_sqlite_lab(const std::string& path, bool create) { return std::make_unique<SqliteLab>(path, create); }

}  // namespace fanout
