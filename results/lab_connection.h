// The two databases a lab store lives in, behind one small interface (results/lab_store.cpp writes the SQL once):
// SQLite (lab_sqlite.cpp) and PostgreSQL through libpq (lab_postgres.cpp). Statements use $1, $2 ... for their
// parameters, which both read; every value goes as a bound parameter, never into the SQL text.
#pragma once
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace fanout {

struct LabValue {
  bool null = true;
  std::string text;  // as the database gives it (PostgreSQL: always text; SQLite: a text column)
  double number = 0; // SQLite's REAL and INTEGER columns, read as such (its text of a REAL keeps only 15 digits)
  bool numeric = false;
  double as_double() const;
  std::string as_text() const;
};
using LabRow = std::vector<LabValue>;
// A bound parameter: text, a number (SQLite binds it as a double, PostgreSQL reads its shortest exact text), or NULL.
struct LabParam {
  enum class Kind { Null, Text, Number } kind = Kind::Null;
  std::string text;
  double number = 0;
  LabParam() = default;
  LabParam(std::string t) : kind(Kind::Text), text(std::move(t)) {}
  LabParam(const char* t) : kind(Kind::Text), text(t) {}
  static LabParam real(double v);  // NULL when not finite
};

class LabConnection {
 public:
  virtual ~LabConnection() = default;
  virtual std::vector<LabRow> query(const std::string& sql, const std::vector<LabParam>& params = {}) = 0;
  void exec(const std::string& sql, const std::vector<LabParam>& params = {}) { query(sql, params); }
  // A transaction that writers take one at a time where it matters (SQLite: BEGIN IMMEDIATE; PostgreSQL: BEGIN and,
  // for a schema change, an advisory lock so two drivers creating the store at once do not race).
  virtual void begin(bool schema_change) = 0;
  virtual void commit() = 0;
  virtual void rollback() = 0;
  // The SQL type of an auto-numbered key column; a query whose rows name every table of the database (its schema).
  virtual std::string serial_key() const = 0;
  virtual std::string tables_sql() const = 0;
};

std::unique_ptr<LabConnection> open_sqlite_lab(const std::string& path, bool create);
std::unique_ptr<LabConnection> open_postgres_lab(const std::string& conninfo);

}  // namespace fanout
