// A lab store (issue 55): many experiments of many benchmarks over time, on many machines, in one place that
// `fanout history` reads. `fanout history add DIR...` (or a sweep's --lab) records each experiment as a point: its
// revision, when its code was committed and when it ran, and per figure the run-level median with its interval
// across runs. A benchmark is the experiment's name; its figures are matched across points on role, metric, unit
// and every parameter of their permutation (results/history.h).
// Where: an SQLite file (--lab=PATH; default $FANOUT_LAB, else ~/.local/share/fanout/lab.sqlite) or, for a team
// sharing one store between clusters, PostgreSQL (--lab=postgresql://...) through libpq: the same schema and SQL,
// versioned (lab_meta.schema), concurrent writers safe (each add is one transaction).
#pragma once
#include <memory>
#include <string>
#include <vector>

#include "results/history.h"

namespace fanout {

class LabConnection;

class LabStore {
 public:
  // Opens (creating where it is new and `create`) the store at `where`. Throws UserError naming it when it is not
  // a Fanout lab, is of a newer schema, or cannot be reached.
  LabStore(const std::string& where, bool create);
  ~LabStore();
  LabStore(const LabStore&) = delete;
  LabStore& operator=(const LabStore&) = delete;

  // Adds experiments in one transaction; an experiment already recorded (the same machine and folder) is replaced
  // by what its folder holds now (a resumed sweep has more runs). Returns the benchmark each was added under.
  std::vector<std::string> add(const std::vector<HistoryInput>& experiments, const std::string& benchmark_override = "");
  std::vector<std::string> benchmarks();
  // The points of one benchmark, as history_changes takes them (in no order: it orders them).
  std::vector<HistoryInput> load(const std::string& benchmark);
  const std::string& where() const { return where_; }

 private:
  void migrate(bool create);
  std::string where_;
  std::unique_ptr<LabConnection> db_;
};

// $FANOUT_LAB, else ~/.local/share/fanout/lab.sqlite.
std::string default_lab();
// What --lab names: "default" is default_lab(), anything else itself.
inline std::string resolve_lab(const std::string& flag) { return flag == "default" ? default_lab() : flag; }
// Where a store is, as messages and pages say it: a PostgreSQL URI without its password.
std::string lab_shown(const std::string& where);
// Whether `where` names a PostgreSQL database (postgresql:// or postgres://) rather than an SQLite file.
bool lab_is_postgres(const std::string& where);

// The schema this fanout writes; a store of a later one is refused.
inline constexpr int kLabSchema = 1;

}  // namespace fanout
