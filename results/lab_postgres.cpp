// A lab store in PostgreSQL through libpq (results/lab_connection.h): a team's one store, shared by clusters and users.
#include <libpq-fe.h>

#include "common/error.h"
#include "results/lab_connection.h"

namespace fanout {

namespace {

// Every write to the store is one transaction holding this lock (pg_advisory_xact_lock), so that two drivers adding
// the same experiment, or creating the store, at the same moment take turns; readers never wait.
constexpr long long kLabLock = 0x66616e6f7574;  // "fanout"

class PostgresLab : public LabConnection {
 public:
  explicit PostgresLab(const std::string& conninfo) : conn_(PQconnectdb(conninfo.c_str())) {
    if (!conn_ || PQstatus(conn_) != CONNECTION_OK) {
      const std::string why = conn_ ? PQerrorMessage(conn_) : "out of memory";
      PQfinish(conn_);
      throw UserError("--lab: cannot connect to PostgreSQL: " + why);
    }
    // Every double as the shortest text that reads back the same (the default from PostgreSQL 12; 11 and older
    // print 15 digits unless told): the lab's series must be the folders' series.
    try {
      exec("SET client_min_messages = warning");
      exec("SET extra_float_digits = 3");
    } catch (...) {
      PQfinish(conn_);
      throw;
    }
  }
  ~PostgresLab() override { PQfinish(conn_); }

  std::vector<LabRow> query(const std::string& sql, const std::vector<LabParam>& params) override {
    std::vector<const char*> values;
    for (auto& p : params) values.push_back(p.kind == LabParam::Kind::Null ? nullptr : p.text.c_str());
    PGresult* r = PQexecParams(conn_, sql.c_str(), int(values.size()), nullptr, values.data(), nullptr, nullptr, 0);
    const ExecStatusType status = PQresultStatus(r);
    if (status != PGRES_COMMAND_OK && status != PGRES_TUPLES_OK) {
      const std::string why = PQresultErrorMessage(r);
      PQclear(r);
      throw UserError("--lab (PostgreSQL): " + why);
    }
    std::vector<LabRow> rows(size_t(PQntuples(r)));
    for (int i = 0; i < PQntuples(r); ++i) {
      rows[size_t(i)].resize(size_t(PQnfields(r)));
      for (int c = 0; c < PQnfields(r); ++c) {
        LabValue& v = rows[size_t(i)][size_t(c)];
        if (PQgetisnull(r, i, c)) continue;
        v.null = false;
        v.text.assign(PQgetvalue(r, i, c), size_t(PQgetlength(r, i, c)));
      }
    }
    PQclear(r);
    return rows;
  }
  void begin(bool) override {
    exec("BEGIN");
    exec("SELECT pg_advisory_xact_lock($1)", {std::to_string(kLabLock)});
  }
  void commit() override { exec("COMMIT"); }
  void rollback() override { PQclear(PQexec(conn_, "ROLLBACK")); }
  std::string serial_key() const override { return "BIGSERIAL PRIMARY KEY"; }
  std::string tables_sql() const override {
    return "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() ORDER BY table_name";
  }

 private:
  PGconn* conn_;
};

}  // namespace

std::unique_ptr<LabConnection> open_postgres_lab(const std::string& conninfo) { return std::make_unique<PostgresLab>(conninfo); }

}  // namespace fanout
