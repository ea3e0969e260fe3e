#include <gtest/gtest.h>
#include <toml++/toml.h>

#include <fcntl.h>
#include <sqlite3.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/vfs.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <csignal>
#include <cstring>
#include <limits>
#include <map>
#include <set>
#include <sstream>
#include <thread>
#include <tuple>

#include "common/error.h"
#include "common/files.h"
#include "results/cache_bound.h"
#include "results/csv_export.h"
#include "results/figures.h"
#include "results/metric_stats.h"
#include "results/run_folder.h"
#include "results/sample_block.h"
#include "results/sample_file.h"
#include "results/staged_file.h"
#include "results/store.h"
#include "tests/expect_throw.h"
#include "tests/test_util.h"

using namespace fanout;

namespace {

int64_t count(const ResultsDb& db, const std::string& sql) {
  sqlite3_stmt* s = nullptr;
  sqlite3_prepare_v2(db.handle(), sql.c_str(), -1, &s, nullptr);
  int64_t n = sqlite3_step(s) == SQLITE_ROW ? sqlite3_column_int64(s, 0) : -1;
  sqlite3_finalize(s);
  return n;
}

// A run folder as fanout-rank and the driver leave it: run.toml with a status, and one sample file per rank.
// A run's metadata with its folder made: one of experiment "exp" of `plugin`, its hash made from its session.
RunMetadata new_run(const std::filesystem::path& dir, const std::string& subcommand, const std::string& plugin,
                    std::vector<std::pair<std::string, std::string>> parameters) {
  std::filesystem::create_directories(samples_dir(dir));
  RunMetadata m;
  m.session = dir.filename().string();
  m.experiment = "exp";
  m.subcommand = subcommand;
  m.plugin = plugin;
  m.param_hash = "h-" + m.session;
  m.parameters = std::move(parameters);
  return m;
}

std::filesystem::path make_run(const std::filesystem::path& root, const std::string& session, int ranks, int samples_per_rank) {
  auto dir = root / session;
  RunMetadata m = new_run(dir, "calibration_sleep", "calibration", {{"sleep_us", "100"}, {"ranks", std::to_string(ranks)}});
  m.steps = {{"sleep", 1, ranks, "disjoint", 1, 0, 0, "", false, "", ""}};
  m.status = RunStatusRecord{"COMPLETED", "local-1", "host", "", 0, 0, 1, 2, {{"sleep", 0, 0, 0}}};
  write_run_metadata(dir, m);
  for (int r = 0; r < ranks; ++r) {
    SampleWriter w(samples_dir(dir) / ("sleep." + std::to_string(r) + ".samples"), r, "sleep", "node" + std::to_string(r), 0, 0);
    w.record("sleep", "us", -1, 0, 999, true);
    for (int i = 0; i < samples_per_rank; ++i) w.record("sleep", "us", i, i, 100 + i, false);
  }
  return dir;
}

// A database as an older fanout left it: schema_info at `version`, its experiments and runs tables (alike in schemas
// 1 and 2), and `rest`.
void make_database(const std::filesystem::path& file, int version, const std::string& rest) {
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(file.c_str(), &db), SQLITE_OK);
  const std::string sql = "CREATE TABLE schema_info(version INTEGER NOT NULL); INSERT INTO schema_info VALUES(" + std::to_string(version) + R"SQL();
CREATE TABLE experiments(id INTEGER PRIMARY KEY, name TEXT NOT NULL, plugin TEXT NOT NULL, subcommand TEXT NOT NULL,
  created_at TEXT NOT NULL, UNIQUE(name, plugin, subcommand));
CREATE TABLE runs(id INTEGER PRIMARY KEY, experiment_id INTEGER NOT NULL REFERENCES experiments(id),
  session TEXT NOT NULL, path TEXT NOT NULL UNIQUE, status TEXT NOT NULL, param_hash TEXT NOT NULL,
  launcher TEXT, job_id TEXT, node_list TEXT, exit_code INTEGER, signal INTEGER, reason TEXT,
  created_at REAL, started_at REAL, ended_at REAL, ingested_at REAL NOT NULL);
)SQL" + rest;
  EXPECT_EQ(sqlite3_exec(db, sql.c_str(), nullptr, nullptr, nullptr), SQLITE_OK) << sqlite3_errmsg(db);
  sqlite3_close(db);
}

}  // namespace

TEST(Store, IngestStoresEverythingOnceAndReingestReplaces) {
  test::TempDir d;
  auto run = make_run(d.path, "s1", 2, 10);
  ResultsDb db(d.path / "fanout.sqlite");
  auto rep = db.ingest_run(run);
  EXPECT_EQ(rep.samples, 22u);
  EXPECT_TRUE(rep.warnings.empty());
  EXPECT_EQ(count(db, "SELECT count(*) FROM samples"), 22);
  EXPECT_EQ(count(db, "SELECT count(*) FROM samples WHERE warmup=1"), 2);
  EXPECT_EQ(count(db, "SELECT count(*) FROM runs WHERE status='COMPLETED'"), 1);
  EXPECT_EQ(count(db, "SELECT count(*) FROM parameters"), 2);
  EXPECT_EQ(count(db, "SELECT count(*) FROM rank_nodes WHERE node='node1' AND rank=1"), 1);
  db.ingest_run(run);
  db.ingest_run(run);
  EXPECT_EQ(count(db, "SELECT count(*) FROM samples"), 22) << "re-ingest must not duplicate";
  EXPECT_EQ(count(db, "SELECT count(*) FROM runs"), 1);
  EXPECT_EQ(count(db, "SELECT count(*) FROM parameters"), 2);
  EXPECT_EQ(count(db, "SELECT count(*) FROM sample_blocks WHERE run_id NOT IN (SELECT id FROM runs)"), 0);
}

// How the driver stores runs as they end: a batch commits them together; another connection (a second driver, a
// report) sees them once it is committed, and a run that fails to store takes the batch back and says so.
TEST(Store, ABatchIsSeenWhenCommittedAndARunThatFailsTakesItBack) {
  test::TempDir d;
  std::vector<std::filesystem::path> runs;
  for (int i = 0; i < 3; ++i) runs.push_back(make_run(d.path, "b" + std::to_string(i), 2, 10));
  ResultsDb db(d.path / "fanout.sqlite");
  db.begin_batch();
  ASSERT_TRUE(db.in_batch());
  db.ingest_run(runs[0]);
  db.ingest_run(runs[1]);
  EXPECT_EQ(count(db, "SELECT count(*) FROM runs"), 2) << "the batch sees its own runs";
  {
    ResultsDb other(d.path / "fanout.sqlite", ResultsDb::ReadOnly{});
    EXPECT_EQ(count(other, "SELECT count(*) FROM runs"), 0) << "not yet committed";
  }
  db.commit_batch();
  EXPECT_FALSE(db.in_batch());
  {
    ResultsDb other(d.path / "fanout.sqlite", ResultsDb::ReadOnly{});
    EXPECT_EQ(count(other, "SELECT count(*) FROM runs"), 2);
    EXPECT_EQ(count(other, "SELECT count(*) FROM samples"), 44);
  }
  // The next batch: one run stored, then one whose storing fails half-way (its samples' producer throws).
  db.begin_batch();
  db.ingest_run(runs[2]);
  RunMetadata broken = read_run_metadata(runs[2]);
  broken.session = "broken";
  EXPECT_THROW_WITH(db.store_run(broken, d.path / "broken",
                                 [](const ResultsDb::SampleSink& sink, IngestReport&) {
                                   sink.sample(0, sink.metric("sleep", "sleep", "us"), 0, 0, 1, false);
                                   throw UserError("the disk is full");
                                 }),
                    UserError, "the disk is full (storing " + (d.path / "broken").string() + "; the 1 run(s) stored before it");
  EXPECT_FALSE(db.in_batch());
  EXPECT_EQ(count(db, "SELECT count(*) FROM runs"), 2) << "the failed batch left nothing";
  EXPECT_EQ(count(db, "SELECT count(*) FROM samples"), 44);
  // Outside a batch a failing run takes only itself back, as it always did.
  EXPECT_THROW_WITH(db.store_run(broken, d.path / "broken", [](const ResultsDb::SampleSink&, IngestReport&) { throw UserError("again"); }),
                    UserError, "again");
  db.ingest_run(runs[2]);
  EXPECT_EQ(count(db, "SELECT count(*) FROM runs"), 3);
  // A batch left open when the database closes is kept.
  {
    ResultsDb last(d.path / "fanout.sqlite");
    last.begin_batch();
    last.ingest_run(make_run(d.path, "b3", 1, 5));
  }
  ResultsDb again(d.path / "fanout.sqlite", ResultsDb::ReadOnly{});
  EXPECT_EQ(count(again, "SELECT count(*) FROM runs"), 4);
}

// The ids of experiments and metrics are kept across runs; a batch that goes back takes the rows it made
// with it, and the ids with them: the next run of that experiment and metric makes them again.
TEST(Store, AnExperimentAndMetricMadeInABatchThatWentBackAreMadeAgain) {
  test::TempDir d;
  ResultsDb db(d.path / "fanout.sqlite");
  db.ingest_run(make_run(d.path, "s1", 1, 3));  // known before the batch: the same id after it
  RunMetadata fresh = new_run(d.path / "fresh", "calibration_sleep", "calibration", {{"sleep_us", "1"}});
  fresh.experiment = "made-in-the-batch";
  fresh.provenance["host"] = "a host first seen in the batch";  // a provenance set and a declaration set made in it
  auto samples = [](const std::string& metric, bool fail) {
    return [=](const ResultsDb::SampleSink& sink, IngestReport&) {
      sink.sample(0, sink.metric("sleep", "sleep", "us"), 0, 0, 1, false);
      sink.sample(0, sink.metric("sleep", metric, "us"), 0, 0, 2, false);
      sink.declare("sleep", metric, "higher", false);
      if (fail) throw UserError("the disk is full");
    };
  };
  db.begin_batch();
  db.store_run(fresh, d.path / "fresh", samples("new_metric", false));
  RunMetadata broken = fresh;
  broken.session = "broken";
  EXPECT_THROW(db.store_run(broken, d.path / "broken", samples("new_metric", true)), UserError);
  EXPECT_EQ(count(db, "SELECT count(*) FROM experiments WHERE name = 'made-in-the-batch'"), 0);
  EXPECT_EQ(count(db, "SELECT count(*) FROM metrics WHERE name = 'new_metric'"), 0);
  EXPECT_EQ(count(db, "SELECT count(*) FROM provenance_values WHERE value = 'a host first seen in the batch'"), 0);
  EXPECT_EQ(count(db, "SELECT count(*) FROM declaration_values WHERE metric = 'new_metric'"), 0);
  db.store_run(fresh, d.path / "fresh", samples("new_metric", false));  // the ids it had would name no row
  EXPECT_EQ(count(db, "SELECT count(*) FROM provenance WHERE value = 'a host first seen in the batch' AND run_id = (SELECT id FROM runs WHERE session = 'fresh')"), 1);
  EXPECT_EQ(count(db, "SELECT count(*) FROM metric_declarations WHERE metric = 'new_metric' AND better = 'higher' AND run_id = (SELECT id FROM runs WHERE session = 'fresh')"), 1);
  EXPECT_EQ(count(db, "SELECT count(*) FROM runs r JOIN experiments e ON e.id = r.experiment_id WHERE e.name = 'made-in-the-batch'"), 1);
  EXPECT_EQ(count(db, "SELECT count(*) FROM samples WHERE metric IN ('sleep', 'new_metric') AND run_id = (SELECT id FROM runs WHERE session = 'fresh')"), 2);
  EXPECT_EQ(count(db, "SELECT count(*) FROM sample_blocks b LEFT JOIN metrics m ON m.id = b.metric_id WHERE m.id IS NULL"), 0);
}

// A rank listed twice (two sample files naming the same role and rank, an exit recorded twice) is stored once, with
// its last entry, and its resources with the last entry that names any: as a row per entry replaced in turn left it.
TEST(Store, ARankListedTwiceIsStoredOnceWithItsLastEntry) {
  test::TempDir d;
  ResultsDb db(d.path / "fanout.sqlite");
  RunMetadata m = new_run(d.path / "twice", "calibration_sleep", "calibration", {});
  m.status = RunStatusRecord{"COMPLETED", "1", "n1", "", 0, 0, 0, 0, {{"a", 0, 3, 0}, {"a", 1, 0, 0}, {"a", 0, 0, 0}}};
  // a0 listed three times: its node the last one's, its resources the last that names any; a1's resources
  // only in its first entry; b0 never names any.
  const std::vector<ResultsDb::RankPlace> ranks{{"a", 0, "n1", "0", ""}, {"b", 0, "n2", "", ""}, {"a", 1, "n3", "", "g0"}, {"a", 0, "n4", "1", ""},
                                                {"a", 1, "n5", "", ""}, {"a", 0, "n6", "", ""}};
  const int64_t id = db.store_run(m, d.path / "twice", [](const ResultsDb::SampleSink&, IngestReport&) {}, ranks).run_id;
  const std::string run = " WHERE run_id = " + std::to_string(id);
  EXPECT_EQ(test::sql_one(d.path / "fanout.sqlite", "SELECT group_concat(role || rank || ':' || node, ' ') FROM (SELECT * FROM rank_nodes" + run +
                                                        " ORDER BY role, rank)"), "a0:n6 a1:n5 b0:n2");
  EXPECT_EQ(test::sql_one(d.path / "fanout.sqlite", "SELECT group_concat(role || rank || ':' || cpus || '/' || gpus, ' ') FROM (SELECT * FROM rank_resources" +
                                                        run + " ORDER BY role, rank)"), "a0:1/ a1:/g0");
  EXPECT_EQ(test::sql_one(d.path / "fanout.sqlite", "SELECT group_concat(role || rank || ':' || exit_code, ' ') FROM (SELECT * FROM rank_exits" + run +
                                                        " ORDER BY role, rank)"), "a0:0 a1:0");
}

// A run deleted without foreign keys whose only rows left are its ranks' exits and resources (it recorded no sample
// and had no parameters): the next run given its id is stored, with its own rows only, not refused for theirs.
TEST(Store, RankRowsLeftByADeletedRunDoNotBlockTheNextRunGivenItsId) {
  test::TempDir d;
  const auto file = d.path / "fanout.sqlite";
  auto store = [&](const std::string& session, int exit_code) {
    ResultsDb db(file);
    RunMetadata m = new_run(d.path / session, "calibration_sleep", "calibration", {});
    m.status = RunStatusRecord{"FAILED", "1", "n1", "", exit_code, 0, 0, 0, {{"a", 0, exit_code, 0}}};
    return db.store_run(m, d.path / session, [](const ResultsDb::SampleSink&, IngestReport&) {}, {{"a", 0, "n1", "0", ""}}).run_id;
  };
  ASSERT_EQ(store("gone", 3), 1);
  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open(file.c_str(), &raw), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(raw, "PRAGMA foreign_keys=OFF; DELETE FROM runs; DELETE FROM rank_nodes;", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(raw);
  ASSERT_EQ(test::sql_one(file, "SELECT count(*) FROM rank_exits WHERE run_id = 1"), "1") << "the orphan is there";
  EXPECT_EQ(store("next", 5), 1) << "the id given again";
  EXPECT_EQ(test::sql_one(file, "SELECT group_concat(exit_code) FROM rank_exits"), "5");
  EXPECT_EQ(test::sql_one(file, "SELECT count(*) FROM rank_resources"), "1");
}

// A sweep's provenance is the same in every run but its repeat (and attempt), its metrics' declarations the same in
// all: stored once as a set each, which the runs point at, and read through views as one row a run.
TEST(Store, ProvenanceAndDeclarationsAlikeAreStoredOnceAsASet) {
  test::TempDir d;
  ResultsDb db(d.path / "fanout.sqlite");
  auto store = [&](const std::string& session, const std::string& repeat, const std::string& better) {
    RunMetadata m = new_run(d.path / session, "calibration_sleep", "calibration", {{"sleep_us", "1"}});
    m.plugin_version = "1.0";
    m.provenance = {{"host", "h"}, {"command_line", "fanout calibration_sleep --repeat=2"}, {"repeat", repeat},
                    {"plugin_version", "what its run.toml said"}};
    return db.store_run(m, d.path / session, [&](const ResultsDb::SampleSink& sink, IngestReport&) {
      for (const char* metric : {"a", "b"}) {
        sink.sample(0, sink.metric("sleep", metric, "us"), 0, 0, 1, false);
        sink.declare("sleep", metric, better, false);
      }
    }).run_id;
  };
  const int64_t r1 = store("r1", "1/2", "lower"), r2 = store("r2", "2/2", "lower");
  const int64_t r3 = store("r3", "1/2", "lower"), r4 = store("r4", "1/2", "higher");
  EXPECT_EQ(count(db, "SELECT count(*) FROM provenance_sets"), 2) << "repeat 1/2 and 2/2";
  EXPECT_EQ(count(db, "SELECT count(*) FROM declaration_sets"), 2) << "lower and higher";
  EXPECT_EQ(count(db, "SELECT count(DISTINCT provenance_set) FROM runs WHERE id IN (" + std::to_string(r1) + "," + std::to_string(r3) + "," +
                          std::to_string(r4) + ")"), 1);
  EXPECT_EQ(count(db, "SELECT count(*) FROM provenance"), 16) << "4 rows a run, as a table of them had";
  EXPECT_EQ(count(db, "SELECT count(*) FROM provenance WHERE run_id = " + std::to_string(r2) + " AND key = 'repeat' AND value = '2/2'"), 1);
  EXPECT_EQ(count(db, "SELECT count(*) FROM provenance WHERE key = 'plugin_version' AND value = '1.0'"), 4) << "the run's own version";
  EXPECT_EQ(count(db, "SELECT count(*) FROM metric_declarations WHERE better = 'higher'"), 2);
  EXPECT_EQ(count(db, "SELECT count(*) FROM metric_declarations WHERE run_id = " + std::to_string(r4) + " AND better = 'higher'"), 2);
  EXPECT_EQ(db.provenance_values("repeat"), (std::vector<std::string>{"1/2", "2/2"}));
  // Stored again (a resume's re-ingest) and by another connection (another driver): the same sets.
  store("r2", "2/2", "lower");
  ResultsDb other(d.path / "fanout.sqlite");
  RunMetadata m5 = new_run(d.path / "r5", "calibration_sleep", "calibration", {{"sleep_us", "1"}});
  m5.plugin_version = "1.0";
  m5.provenance = {{"host", "h"}, {"command_line", "fanout calibration_sleep --repeat=2"}, {"repeat", "2/2"}};
  other.store_run(m5, d.path / "r5", [](const ResultsDb::SampleSink&, IngestReport&) {});
  EXPECT_EQ(count(db, "SELECT count(*) FROM provenance_sets"), 2);
  EXPECT_EQ(count(db, "SELECT count(*) FROM metric_declarations WHERE run_id = (SELECT id FROM runs WHERE session = 'r5')"), 0) << "declared nothing";
  std::map<std::string, std::string> better;
  ExperimentStats head;
  for_each_statistic(db, "exp", false, head, [&](MetricStats&& s, bool) { better[s.metric + "@" + s.session] = s.better; });
  // In run order r1, r3 and r4 (r2 was stored again after r4): each run its own set's, as the sets change and back.
  EXPECT_EQ(better, (std::map<std::string, std::string>{{"a@r1", "lower"}, {"b@r1", "lower"}, {"a@r2", "lower"}, {"b@r2", "lower"},
                                                        {"a@r3", "lower"}, {"b@r3", "lower"}, {"a@r4", "higher"}, {"b@r4", "higher"}}));
}

// A database schema 2 made (provenance and metric_declarations stored per run) is read as it is, and a writing
// open migrates it: the same rows through the views, runs alike sharing a set, rows of deleted runs left behind.
TEST(Store, SchemaTwoDatabaseIsReadAsItIsAndMigratedWithTheSameRows) {
  test::TempDir d;
  auto file = d.path / "fanout.sqlite";
  // Schema 2's tables as its kSchema made them (git show 1b89ac1:results/store.cpp), rows as its store_run wrote.
  make_database(file, 2, R"SQL(
CREATE INDEX runs_param_hash ON runs(param_hash);
CREATE TABLE parameters(run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE, name TEXT NOT NULL, value TEXT NOT NULL,
  ordinal INTEGER NOT NULL, PRIMARY KEY(run_id, name)) WITHOUT ROWID;
CREATE TABLE metrics(id INTEGER PRIMARY KEY, role TEXT NOT NULL, name TEXT NOT NULL, unit TEXT NOT NULL, UNIQUE(role, name, unit));
CREATE TABLE sample_blocks(run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE, metric_id INTEGER NOT NULL REFERENCES metrics(id),
  rank INTEGER NOT NULL, block INTEGER NOT NULL, count INTEGER NOT NULL, rows TEXT NOT NULL,
  PRIMARY KEY(run_id, metric_id, rank, block)) WITHOUT ROWID;
CREATE TABLE provenance(run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE, key TEXT NOT NULL, value TEXT NOT NULL,
  PRIMARY KEY(run_id, key)) WITHOUT ROWID;
CREATE TABLE metric_declarations(run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE, role TEXT NOT NULL, metric TEXT NOT NULL,
  better TEXT NOT NULL, setup_cost INTEGER NOT NULL, PRIMARY KEY(run_id, role, metric)) WITHOUT ROWID;
CREATE VIEW samples AS
  SELECT b.run_id, b.rank, m.role, m.name AS metric, j.value ->> 0 AS iteration, j.value ->> 1 AS t_start,
         j.value ->> 2 AS value, m.unit, j.value ->> 3 AS warmup
  FROM sample_blocks b JOIN metrics m ON m.id = b.metric_id, json_each(b.rows) j;
INSERT INTO experiments VALUES(1, 'e', 'calibration', 'calibration_sleep', '2026-01-01T00:00:00Z');
INSERT INTO runs(id, experiment_id, session, path, status, param_hash, ingested_at) VALUES
  (1, 1, 'a', '/x/a', 'COMPLETED', 'h1', 0), (2, 1, 'b', '/x/b', 'COMPLETED', 'h2', 0), (3, 1, 'c', '/x/c', 'FAILED', 'h3', 0);
INSERT INTO metrics VALUES(1, 'client', 'put', 's');
INSERT INTO sample_blocks VALUES(1, 1, 0, 0, 1, '[[0,1.0,2.0,0]]'), (2, 1, 0, 0, 1, '[[0,1.0,3.0,0]]'), (3, 1, 0, 0, 1, '[[0,1.0,4.0,0]]');
INSERT INTO provenance VALUES(1, 'host', 'n1'), (1, 'plugin_version', '1.0'), (1, 'repeat', '1/2'),
  (2, 'host', 'n1'), (2, 'plugin_version', '1.0'), (2, 'repeat', '2/2'),
  (3, 'host', 'n1'), (3, 'plugin_version', '1.0'), (3, 'repeat', '1/2'), (9, 'host', 'a deleted run''s');
INSERT INTO metric_declarations VALUES(1, 'client', 'put', 'lower', 0), (2, 'client', 'put', 'lower', 0), (3, 'client', 'put', 'higher', 1),
  (9, 'client', 'put', 'none', 0);
INSERT INTO parameters VALUES(0, 'gone', '0', 0), (1, 'zeta', '1', 0), (1, 'alpha', '2', 1), (3, 'b', 'x', 0), (9, 'gone', '9', 0);
)SQL");
  const std::string kProvenance = "SELECT group_concat(run_id || ':' || key || '=' || value, ' ') FROM "
                                  "(SELECT * FROM provenance WHERE run_id IN (SELECT id FROM runs) ORDER BY run_id, key)";
  const std::string kDeclared = "SELECT group_concat(run_id || ':' || metric || '=' || better || setup_cost, ' ') FROM "
                                "(SELECT * FROM metric_declarations WHERE run_id IN (SELECT id FROM runs) ORDER BY run_id, metric)";
  const std::string provenance_rows = "1:host=n1 1:plugin_version=1.0 1:repeat=1/2 2:host=n1 2:plugin_version=1.0 2:repeat=2/2 "
                                      "3:host=n1 3:plugin_version=1.0 3:repeat=1/2";
  const std::string declared_rows = "1:put=lower0 2:put=lower0 3:put=higher1";
  // The runs' walk: each run's repeat from its own provenance, its parameters in their order (not their names'),
  // none of the rows of runs no longer listed.
  auto walked_runs = [](const ResultsDb& db) {
    std::vector<std::string> walked;
    db.for_each_run([&](StoredRun&& r) {
      std::string line = r.session + " r" + r.repeat;
      for (auto& [k, v] : r.parameters) line += " " + k + "=" + v;
      walked.push_back(line);
    });
    return walked;
  };
  const std::vector<std::string> kWalked{"a r1 zeta=1 alpha=2", "b r2", "c r1 b=x"};
  {
    ResultsDb read(file, ResultsDb::ReadOnly{});
    EXPECT_EQ(test::sql_one(file, kProvenance), provenance_rows);
    EXPECT_EQ(read.provenance_values("repeat"), (std::vector<std::string>{"1/2", "2/2"}));
    std::map<int64_t, std::string> better;
    read.for_each_metric([&](MetricSummaryRow& g) { better[g.run_id] = g.better; });
    EXPECT_EQ(better, (std::map<int64_t, std::string>{{1, "lower"}, {2, "lower"}, {3, "higher"}}));
    EXPECT_EQ(walked_runs(read), kWalked);
  }
  EXPECT_EQ(test::sql_one(file, "SELECT version FROM schema_info"), "2") << "reading changed nothing";
  ResultsDb db(file);
  EXPECT_EQ(count(db, "SELECT version FROM schema_info"), 3);
  EXPECT_EQ(count(db, "SELECT count(*) FROM sqlite_schema WHERE type = 'view' AND name IN ('provenance', 'metric_declarations')"), 2);
  // runs(param_hash)'s index is dropped by a writer's open: every new run wrote a page of its own into it.
  EXPECT_EQ(count(db, "SELECT count(*) FROM sqlite_schema WHERE type = 'index' AND name = 'runs_param_hash'"), 0);
  EXPECT_EQ(test::sql_one(file, kProvenance), provenance_rows);
  EXPECT_EQ(test::sql_one(file, kDeclared), declared_rows);
  EXPECT_EQ(count(db, "SELECT count(*) FROM provenance_sets"), 2) << "runs 1 and 3 share one";
  EXPECT_EQ(count(db, "SELECT count(*) FROM declaration_sets"), 2) << "runs 1 and 2 share one";
  EXPECT_EQ(count(db, "SELECT count(*) FROM provenance_values WHERE value = 'a deleted run''s'"), 0);
  EXPECT_EQ(walked_runs(db), kWalked) << "the same walk through the sets";
  // A run stored since, alike to run 1, joins its sets.
  RunMetadata m = new_run(d.path / "d", "calibration_sleep", "calibration", {});
  m.experiment = "e";
  m.plugin_version = "1.0";
  m.provenance = {{"host", "n1"}, {"repeat", "1/2"}};
  const int64_t id = db.store_run(m, d.path / "d", [](const ResultsDb::SampleSink& sink, IngestReport&) {
    sink.sample(0, sink.metric("client", "put", "s"), 0, 0, 1, false);
    sink.declare("client", "put", "lower", false);
  }).run_id;
  EXPECT_EQ(count(db, "SELECT count(*) FROM provenance_sets"), 2);
  EXPECT_EQ(count(db, "SELECT count(*) FROM declaration_sets"), 2);
  EXPECT_EQ(count(db, "SELECT provenance_set = (SELECT provenance_set FROM runs WHERE id = 1) FROM runs WHERE id = " + std::to_string(id)), 1);
  ResultsDb again(file);  // opening a migrated database changes nothing
  EXPECT_EQ(test::sql_one(file, kProvenance), provenance_rows + " " + std::to_string(id) + ":host=n1 " + std::to_string(id) +
                                                  ":plugin_version=1.0 " + std::to_string(id) + ":repeat=1/2");
}

// A driver following batch jobs makes their outcomes durable with the database's commits (the scheduler forgets a
// job minutes after it ends): synced commits stay synced across a bulk ingest's switch of journal.
// In schema 3 a table named provenance (or metric_declarations) would be read where the view of the runs' sets
// belongs (CREATE VIEW IF NOT EXISTS leaves it): refused by either open, naming it.
TEST(Store, ASchemaThreeDatabaseWithATableWhereAViewBelongsIsRefused) {
  test::TempDir d;
  const auto file = d.path / "fanout.sqlite";
  { ResultsDb db(file); }
  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open(file.c_str(), &raw), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(raw, "DROP VIEW provenance; CREATE TABLE provenance(run_id INTEGER, key TEXT, value TEXT); "
                              "INSERT INTO provenance VALUES(1, 'host', 'forged');", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(raw);
  const std::string why = "its 'provenance' is a table, where results schema 3 has a view; nothing read";
  EXPECT_THROW_WITH(ResultsDb(file, ResultsDb::ReadOnly{}), UserError, why);
  EXPECT_THROW_WITH(ResultsDb{file}, UserError, why);
}

TEST(Store, SyncedCommitsStaySyncedAcrossABulkIngest) {
  test::TempDir d;
  ResultsDb plain(d.path / "plain.sqlite");
  EXPECT_EQ(count(plain, "PRAGMA synchronous"), 1) << "NORMAL: a commit survives the process, not the host";
  ResultsDb db(d.path / "fanout.sqlite");
  db.sync_commits();
  EXPECT_EQ(count(db, "PRAGMA synchronous"), 2) << "FULL";
  std::vector<std::filesystem::path> runs = {make_run(d.path, "a", 1, 3), make_run(d.path, "b", 1, 3)};
  db.ingest_runs(runs, [](const std::filesystem::path&, const IngestReport&) {});  // through a rollback journal (a test above)
  EXPECT_EQ(count(db, "SELECT count(*) FROM runs"), 2);
  EXPECT_EQ(count(db, "PRAGMA synchronous"), 2) << "still FULL after the journal went back to WAL";
  EXPECT_EQ(test::sql_one(d.path / "fanout.sqlite", "PRAGMA journal_mode"), "wal");
}

// A host crash can keep a batch's synced commit and lose the [status] appended to a run.toml (the kernel had not
// written it back): ingesting that folder again keeps the end the database holds rather than storing UNKNOWN.
TEST(Store, AFolderThatLostItsEndKeepsTheEndTheDatabaseHolds) {
  test::TempDir d;
  auto run = make_run(d.path, "s1", 2, 10);
  auto lost = make_run(d.path, "s2", 1, 3);
  ResultsDb db(d.path / "fanout.sqlite");
  db.ingest_run(run);
  RunMetadata m = read_run_metadata(run);
  ASSERT_TRUE(m.status.has_value());
  m.status.reset();
  write_run_metadata(run, m);  // run.toml as laid out, its end never reached the disk
  ASSERT_FALSE(read_run_metadata(run).status.has_value());
  RunMetadata l = read_run_metadata(lost);
  l.status.reset();
  write_run_metadata(lost, l);  // never stored, no end: stored as UNKNOWN, as before
  std::map<std::string, IngestReport> reports;
  db.ingest_runs({run, lost}, [&](const std::filesystem::path& p, const IngestReport& r) { reports[p.filename().string()] = r; });
  ASSERT_EQ(reports.size(), 2u);
  EXPECT_EQ(reports["s1"].kept, "COMPLETED");
  ASSERT_EQ(reports["s1"].warnings.size(), 1u);
  EXPECT_NE(reports["s1"].warnings[0].find("records no end"), std::string::npos) << reports["s1"].warnings[0];
  EXPECT_EQ(reports["s2"].kept, "");
  EXPECT_EQ(test::sql_one(d.path / "fanout.sqlite", "SELECT status FROM runs WHERE session='s1'"), "COMPLETED");
  EXPECT_EQ(test::sql_one(d.path / "fanout.sqlite", "SELECT status FROM runs WHERE session='s2'"), "UNKNOWN");
  EXPECT_EQ(count(db, "SELECT count(*) FROM samples WHERE run_id=(SELECT id FROM runs WHERE session='s1')"), 22) << "its samples stay";
  // An UNKNOWN the database holds is no end: the folder is stored again (here with the end it records now).
  l.status = RunStatusRecord{"FAILED", "local-2", "host", "exit 1", 1, 0, 1, 2, {{"sleep", 0, 1, 0}}};
  write_run_metadata(lost, l);
  EXPECT_EQ(db.ingest_run(lost).kept, "");
  EXPECT_EQ(test::sql_one(d.path / "fanout.sqlite", "SELECT status FROM runs WHERE session='s2'"), "FAILED");
}

TEST(Store, CorruptSampleFileIsSkippedWithoutLeavingRows) {
  test::TempDir d;
  auto run = make_run(d.path, "s1", 2, 10);
  std::string good = read_file(samples_dir(run) / "sleep.1.samples");
  write_file_atomic(samples_dir(run) / "sleep.1.samples", good + "Q garbage");
  ResultsDb db(d.path / "fanout.sqlite");
  auto rep = db.ingest_run(run);
  EXPECT_EQ(rep.samples, 11u);
  ASSERT_EQ(rep.warnings.size(), 1u);
  EXPECT_NE(rep.warnings[0].find("sleep.1.samples"), std::string::npos) << rep.warnings[0];
  EXPECT_EQ(count(db, "SELECT count(*) FROM samples WHERE rank=1"), 0) << "no rows from the corrupt file";
}

TEST(Store, RunFolderWithoutMetadataIsAnErrorAndWritesNothing) {
  test::TempDir d;
  std::filesystem::create_directories(d.path / "empty");
  ResultsDb db(d.path / "fanout.sqlite");
  EXPECT_THROW_WITH(db.ingest_run(d.path / "empty"), UserError, "empty/run.toml");
  EXPECT_EQ(count(db, "SELECT count(*) FROM runs"), 0);
}

TEST(Store, TwoWritersNeverSeeDatabaseIsLocked) {
  test::TempDir d;
  std::vector<std::filesystem::path> runs;
  for (int i = 0; i < 16; ++i) runs.push_back(make_run(d.path, "s" + std::to_string(i), 2, 2000));
  std::string errors;
  std::mutex mu;
  auto writer = [&](int start) {
    try {
      ResultsDb db(d.path / "fanout.sqlite");  // its own connection, as a second fanout process has
      for (int i = start; i < 16; i += 2) db.ingest_run(runs[size_t(i)]);
    } catch (const std::exception& e) {
      std::lock_guard<std::mutex> l(mu);
      errors += e.what();
    }
  };
  std::thread a(writer, 0), b(writer, 1);
  a.join();
  b.join();
  EXPECT_EQ(errors, "");
  ResultsDb db(d.path / "fanout.sqlite");
  EXPECT_EQ(count(db, "SELECT count(*) FROM runs"), 16);
  EXPECT_EQ(count(db, "SELECT count(*) FROM samples"), 16 * 2 * 2001);
}

TEST(Store, CsvExportHasOneRowPerSampleAndPerRunMetric) {
  test::TempDir d;
  ResultsDb db(d.path / "fanout.sqlite");
  db.ingest_run(make_run(d.path, "a", 1, 5));
  db.ingest_run(make_run(d.path, "b", 2, 5));
  auto files = export_csv(db, d.path / "csv");
  EXPECT_EQ(files.sample_rows, 6u + 12u);
  EXPECT_EQ(files.statistic_rows, 2u);
  std::string stats = read_file(files.statistics);
  EXPECT_EQ(stats.substr(0, stats.find('\n')),
            "session,status,repeat,sleep_us,ranks,role,metric,unit,metric_ranks,nan_samples,count,min,mean,median,median_ci_low,median_ci_high,p90,p95,p99,max,std,mad,outliers");
  EXPECT_NE(stats.find("a,COMPLETED,1,100,1,sleep,sleep,us,1,0,5,100,102,102,"), std::string::npos) << stats;  // warmup 999 excluded
  EXPECT_EQ(test::line_count_summary(read_file(files.samples)), "19");
  for (auto& e : std::filesystem::directory_iterator(d.path / "csv"))  // no staging file left behind
    EXPECT_EQ(e.path().filename().string().find(".tmp"), std::string::npos) << e.path();
}

namespace {

// A run whose ranks record one sample of each (role, metric, value), one rank per role.
std::filesystem::path make_figures_run(const std::filesystem::path& root, const std::string& session, int n,
                                       const std::vector<std::tuple<std::string, std::string, double>>& figures,
                                       const std::string& label = "plain") {
  auto dir = root / session;
  RunMetadata m = new_run(dir, "run", "exec", {{"n", std::to_string(n)}, {"label", label}});
  std::map<std::string, int> rank_of;
  for (auto& [role, metric, v] : figures) rank_of.try_emplace(role, int(rank_of.size()));
  m.status = RunStatusRecord{"COMPLETED", "local-1", "host", "", 0, 0, 1, 2, {}};
  for (auto& [role, rank] : rank_of) {
    m.steps.push_back({role, 1, 1, "disjoint", 1, 0, 0, "", false, "", ""});
    m.status->ranks.push_back({role, 0, 0, 0});
  }
  write_run_metadata(dir, m);
  for (auto& [role, rank] : rank_of) {
    SampleWriter w(samples_dir(dir) / (role + ".0.samples"), 0, role, "node0", 0, 0);
    for (auto& [r, metric, v] : figures)
      if (r == role) w.record(metric, "ms", 0, 0, v, false);
  }
  return dir;
}

// A CSV file's records, each a list of fields: RFC 4180 quotes ("" inside), so a field may hold commas and newlines.
std::vector<std::vector<std::string>> records(const std::string& text) {
  std::vector<std::vector<std::string>> out;
  std::vector<std::string> record(1);
  bool quoted = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (quoted && c == '"' && i + 1 < text.size() && text[i + 1] == '"') record.back() += '"', ++i;
    else if (c == '"') quoted = !quoted;
    else if (!quoted && c == ',') record.emplace_back();
    else if (!quoted && c == '\n') out.push_back(std::move(record)), record.assign(1, "");
    else record.back() += c;
  }
  return out;
}

}  // namespace

// runs.csv is written as the statistics are made, its rows set aside until every column is known: a metric first
// recorded by a later run is a column whose cells stay empty in the earlier rows, a metric name that a later run's
// other role records too renames the earlier column "<role>:<metric>", and a parameter's value holding a newline
// and a comma stays one quoted field of one row. The same bytes come out of statistics held at once
// (process_scaling_results) and of the driver's pass.
TEST(Store, RunsCsvColumnsFirstSeenLaterArePaddedAndRenamed) {
  test::TempDir d;
  std::filesystem::create_directories(d.path / "exp");
  ResultsDb db(d.path / "exp" / "fanout.sqlite");
  db.ingest_run(make_figures_run(d.path, "a", 1, {{"client", "x", 1}}, "two\nlines, quoted"));
  db.ingest_run(make_figures_run(d.path, "b", 2, {{"client", "x", 2}, {"client", "y", 20}}));
  db.ingest_run(make_figures_run(d.path, "c", 3, {{"client", "x", 3}, {"server", "x", 300}}));
  auto files = export_csv(db, d.path / "exp" / "csv");
  EXPECT_EQ(files.run_rows, 3u);
  EXPECT_EQ(files.statistic_rows, 5u);
  const auto rows = records(read_file(files.runs));
  ASSERT_EQ(rows.size(), 4u) << read_file(files.runs);  // the header and a row per run: a field's newline parts no row
  const std::vector<std::string>& h = rows[0];
  const size_t stats = summary_columns().size();
  ASSERT_EQ(h.size(), 5 + 3 * stats);
  EXPECT_EQ(std::vector<std::string>(h.begin(), h.begin() + 5), (std::vector<std::string>{"session", "status", "repeat", "n", "label"}));
  EXPECT_EQ(h[5], "client:x.count");
  EXPECT_EQ(h[5 + stats], "y.count");
  EXPECT_EQ(h[5 + 2 * stats], "server:x.count");
  const size_t median = size_t(std::find(summary_columns().begin(), summary_columns().end(), "median") - summary_columns().begin());
  auto at = [&](const std::vector<std::string>& row, size_t column, size_t stat) { return row.at(5 + column * stats + stat); };
  for (size_t r = 1; r < rows.size(); ++r) ASSERT_EQ(rows[r].size(), h.size()) << "row " << r;
  const auto &ra = rows[1], &rb = rows[2], &rc = rows[3];
  EXPECT_EQ(ra[0], "a");
  EXPECT_EQ(ra[4], "two\nlines, quoted");
  EXPECT_EQ(at(ra, 0, median), "1");
  for (size_t column : {1, 2})
    for (size_t k = 0; k < stats; ++k) EXPECT_EQ(at(ra, column, k), "") << "a: column " << column << " (first seen later)";
  EXPECT_EQ(at(rb, 1, median), "20");
  for (size_t k = 0; k < stats; ++k) EXPECT_EQ(at(rb, 2, k), "");
  EXPECT_EQ(at(rc, 0, median), "3");
  EXPECT_EQ(at(rc, 1, 0), "");
  EXPECT_EQ(at(rc, 2, median), "300");
  // across_runs.csv: one row per permutation and figure.
  EXPECT_EQ(records(read_file(d.path / "exp" / "csv" / "across_runs.csv")).size(), 6u);
  // The same three files from statistics held at once.
  const std::string streamed = read_file(files.runs), streamed_stats = read_file(files.statistics),
                    streamed_across = read_file(d.path / "exp" / "csv" / "across_runs.csv");
  std::filesystem::create_directories(d.path / "held");
  write_statistics_files(compute_statistics(db, "exp"), d.path / "held");
  EXPECT_EQ(read_file(d.path / "held" / "runs.csv"), streamed);
  EXPECT_EQ(read_file(d.path / "held" / "statistics.csv"), streamed_stats);
  EXPECT_EQ(read_file(d.path / "held" / "across_runs.csv"), streamed_across);
  for (auto& e : std::filesystem::directory_iterator(d.path / "exp" / "csv"))  // the rows set aside left nothing
    EXPECT_EQ(e.path().filename().string().find(".runs.csv.rows"), std::string::npos) << e.path();
}

// A summary value that is not a number (the median of +inf and -inf: their midpoint) is nan in statistics.csv and an
// empty cell in runs.csv, while its other values (and the run's other figure) are numbers in both. Both files take
// the summary's text from one formatting (StatisticsFiles::add), so each file's rule is checked on its own here.
TEST(Store, ASummaryValueThatIsNoNumberIsNanInStatisticsCsvAndEmptyInRunsCsv) {
  test::TempDir d;
  std::filesystem::create_directories(d.path / "exp");
  ResultsDb db(d.path / "exp" / "fanout.sqlite");
  const double inf = std::numeric_limits<double>::infinity();
  db.ingest_run(make_figures_run(d.path, "a", 1, {{"client", "x", inf}, {"client", "x", -inf}, {"client", "y", 5}}));
  auto files = export_csv(db, d.path / "exp" / "csv");
  const auto stats = records(read_file(files.statistics)), runs = records(read_file(files.runs));
  ASSERT_EQ(stats.size(), 3u) << read_file(files.statistics);
  ASSERT_EQ(runs.size(), 2u) << read_file(files.runs);
  auto column = [](const std::vector<std::string>& header, const std::string& name) {
    const auto it = std::find(header.begin(), header.end(), name);
    EXPECT_NE(it, header.end()) << name;
    return size_t(it - header.begin());
  };
  const auto& sh = stats[0];
  ASSERT_EQ(stats[1].size(), sh.size());
  ASSERT_EQ(stats[2].size(), sh.size());
  const auto& sx = stats[1][column(sh, "metric")] == "x" ? stats[1] : stats[2];
  const auto& sy = stats[1][column(sh, "metric")] == "x" ? stats[2] : stats[1];
  EXPECT_EQ(sx[column(sh, "count")], "2");
  EXPECT_EQ(sx[column(sh, "min")], "-inf");
  EXPECT_EQ(sx[column(sh, "max")], "inf");
  EXPECT_TRUE(sx[column(sh, "median")] == "nan" || sx[column(sh, "median")] == "-nan") << sx[column(sh, "median")];  // the NaN's sign, as to_chars writes it
  EXPECT_EQ(sy[column(sh, "median")], "5");
  const auto& rh = runs[0];
  ASSERT_EQ(runs[1].size(), rh.size());
  EXPECT_EQ(runs[1][column(rh, "x.count")], "2");
  EXPECT_EQ(runs[1][column(rh, "x.min")], "-inf");
  EXPECT_EQ(runs[1][column(rh, "x.max")], "inf");
  EXPECT_EQ(runs[1][column(rh, "x.median")], "");
  EXPECT_EQ(runs[1][column(rh, "y.median")], "5");
}

// A run deleted by a connection without foreign keys (the sqlite3 shell's default) leaves its rows; SQLite gives
// its id to the next run stored, which gets none of them and stores whole. A provenance key the plugin's version
// would repeat is stored once, as the run's plugin version.
TEST(Store, TheRowsOfARunDeletedWithoutForeignKeysAreNotTheNextRunsAndEachKeyIsStoredOnce) {
  test::TempDir d;
  const auto a = make_run(d.path, "a", 2, 3), b = make_run(d.path, "b", 2, 3);
  RunMetadata c = read_run_metadata(make_run(d.path, "c", 1, 3));
  c.provenance["plugin_version"] = "what run.toml's provenance said";
  c.plugin_version = "7.1";
  {
    ResultsDb db(d.path / "fanout.sqlite");
    db.ingest_run(a);
    db.ingest_run(b);
  }
  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open((d.path / "fanout.sqlite").c_str(), &raw), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(raw, "DELETE FROM runs WHERE session = 'b'", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(raw);
  ResultsDb db(d.path / "fanout.sqlite");
  ASSERT_GT(count(db, "SELECT count(*) FROM parameters WHERE run_id NOT IN (SELECT id FROM runs)"), 0) << "b's rows are left";
  const auto stored = db.ingest_run(d.path / "c", c);
  EXPECT_EQ(count(db, "SELECT max(id) FROM runs"), stored.run_id);
  EXPECT_EQ(count(db, "SELECT count(*) FROM parameters WHERE run_id NOT IN (SELECT id FROM runs)"), 0);
  EXPECT_EQ(count(db, "SELECT count(*) FROM rank_nodes WHERE run_id NOT IN (SELECT id FROM runs)"), 0);
  EXPECT_EQ(count(db, "SELECT count(*) FROM parameters WHERE run_id = " + std::to_string(stored.run_id)), 2);
  EXPECT_EQ(count(db, "SELECT count(*) FROM rank_nodes WHERE run_id = " + std::to_string(stored.run_id)), 1) << "c has one rank, b had two";
  EXPECT_EQ(count(db, "SELECT count(*) FROM samples WHERE run_id = " + std::to_string(stored.run_id)), int64_t(stored.samples));
  EXPECT_EQ(count(db, "SELECT count(*) FROM provenance WHERE key = 'plugin_version' AND value = '7.1' AND run_id = " +
                          std::to_string(stored.run_id)), 1);
}

TEST(Store, CsvQuotesFields) {
  EXPECT_EQ(csv_field("plain"), "plain");
  EXPECT_EQ(csv_field("a,b"), "\"a,b\"");
  EXPECT_EQ(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
}

// A number in a CSV is printf's "%.12g", as the files have always had it: the cheaper formatting writes every double
// the same, its bit patterns drawn at random (fixed seed) and the edges (signed zero and NaN, infinities, subnormals,
// ties at the twelfth digit).
TEST(Store, CsvNumbersAreWrittenAsPrintfWritesThem) {
  auto printf_g12 = [](double v) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "%.12g", v);
    return std::string(buf);
  };
  std::vector<double> values = {0.0, -0.0, 1.0, 0.1, 1e21, 1e-7, 123456789012.5, 999999999999.5, 0.5e-4, 1e300, 5e-324,
                                std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity(), NAN, -NAN};
  uint64_t x = 0x9E3779B97F4A7C15ull;  // splitmix64
  for (int i = 0; i < 200000; ++i) {
    uint64_t z = (x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    z ^= z >> 31;
    double v;
    std::memcpy(&v, &z, sizeof v);
    values.push_back(v);
    values.push_back(double(int64_t(z >> 20)) / 1000.0);  // the everyday kind: milliseconds and counts
  }
  size_t differ = 0;
  for (double v : values)
    if (csv_number(v) != printf_g12(v) && differ++ < 5) ADD_FAILURE() << csv_number(v) << " where printf writes " << printf_g12(v);
  EXPECT_EQ(differ, 0u);
}

TEST(SampleBlock, NumbersComeBackExactAndSqliteReadsThemWithTheirTypes) {
  const double values[] = {30.0, -0.0, 0.1, 1e-300, 5e-324, 1.7976931348623157e308, 1763859371.123456789,
                           std::numeric_limits<double>::infinity(), -std::numeric_limits<double>::infinity(), NAN};
  SampleBlockWriter w;
  int64_t it = -1;
  for (double v : values) {
    w.add(it, 1763859371.5, v, it % 2 == 0);
    ++it;
  }
  SampleBlockReader r(w.text(), "test");
  SampleRowText row;
  it = -1;
  for (double v : values) {
    ASSERT_TRUE(r.next(row));
    EXPECT_EQ(stored_integer(row.iteration), it);
    EXPECT_EQ(stored_real(row.t_start), 1763859371.5);
    double back = stored_real(row.value);
    if (std::isnan(v)) EXPECT_TRUE(std::isnan(back)) << row.value;
    else EXPECT_EQ(std::memcmp(&back, &v, sizeof v), 0) << row.value;
    EXPECT_EQ(row.warmup, it % 2 == 0);
    ++it;
  }
  EXPECT_FALSE(r.next(row));
  EXPECT_NE(std::string(w.text()).find("[-1,1763859371.5,30.0,"), std::string::npos) << "reals keep a '.': " << w.text();

  // SQLite's own JSON reads the same text: REAL stays REAL (30.0, not 30), null is NULL, 9e999 is inf.
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open(":memory:", &db), SQLITE_OK);
  sqlite3_stmt* s = nullptr;
  ASSERT_EQ(sqlite3_prepare_v2(db, "SELECT typeof(j.value ->> 2), j.value ->> 2 FROM json_each(?) j", -1, &s, nullptr), SQLITE_OK)
      << sqlite3_errmsg(db);
  std::string text(w.text());
  sqlite3_bind_text(s, 1, text.data(), int(text.size()), SQLITE_STATIC);
  std::vector<std::string> types;
  std::vector<double> read;
  while (sqlite3_step(s) == SQLITE_ROW) {
    types.push_back(reinterpret_cast<const char*>(sqlite3_column_text(s, 0)));
    read.push_back(sqlite3_column_double(s, 1));
  }
  sqlite3_finalize(s);
  sqlite3_close(db);
  ASSERT_EQ(types.size(), std::size(values));
  EXPECT_EQ(types[0], "real");
  EXPECT_EQ(read[0], 30.0);
  EXPECT_EQ(read[2], 0.1);
  EXPECT_EQ(read[6], 1763859371.123456789);
  EXPECT_TRUE(std::isinf(read[7]) && read[7] > 0);
  EXPECT_EQ(types[9], "null");
}

TEST(SampleBlock, MalformedTextIsAClearError) {
  for (const char* bad : {"", "[[1,2,3]]", "[[1,2,3,2]]", "[[1,2,3,0]", "[[1,2,3,0]x]", "{}", "[[,2,3,0]]"}) {
    try {
      SampleBlockReader r(bad, "fanout.sqlite");
      SampleRowText row;
      while (r.next(row)) {
      }
      ADD_FAILURE() << "accepted " << bad;
    } catch (const UserError& e) {
      EXPECT_NE(std::string(e.what()).find("fanout.sqlite: stored sample block"), std::string::npos) << e.what();
    }
  }
  EXPECT_THROW_WITH(stored_real("abc"), UserError, "stored sample value 'abc' is not a number");
  EXPECT_THROW_WITH(stored_integer("1.5"), UserError, "stored iteration '1.5' is not an integer");
}

TEST(Store, LargeRunsSpanSeveralBlocksInRecordingOrder) {
  test::TempDir d;
  const int per_rank = int(2 * kSamplesPerBlock + 17);
  auto run = make_run(d.path, "big", 3, per_rank);
  ResultsDb db(d.path / "fanout.sqlite");
  EXPECT_EQ(db.ingest_run(run).samples, uint64_t(3 * (per_rank + 1)));
  EXPECT_EQ(count(db, "SELECT count(*) FROM sample_blocks"), 3 * 3) << "3 blocks per rank";
  EXPECT_EQ(count(db, "SELECT sum(count) FROM sample_blocks"), 3 * (per_rank + 1));
  EXPECT_EQ(count(db, "SELECT count(*) FROM samples"), 3 * (per_rank + 1));
  // The view gives back every value at its iteration (value = 100 + iteration), as REAL.
  EXPECT_EQ(count(db, "SELECT count(*) FROM samples WHERE warmup=0 AND value = 100.0 + iteration AND typeof(value)='real'"),
            3 * per_rank);
  // The reader's order: per rank, as recorded.
  std::vector<int64_t> iterations;
  db.for_each_sample([&](int64_t, int rank, int64_t, const SampleRowText& s) {
    if (rank == 2) iterations.push_back(stored_integer(s.iteration));
  });
  ASSERT_EQ(iterations.size(), size_t(per_rank + 1));
  EXPECT_EQ(iterations[0], -1) << "the warmup sample first, as recorded";
  for (int i = 0; i < per_rank; ++i) ASSERT_EQ(iterations[size_t(i) + 1], i);
}

// A rank defines its metrics one at a time as it first records them (the decoder's table of names grows while
// the file is read): every metric keeps its samples, once each, in recording order, in one block.
TEST(Store, MetricsDefinedOneAtATimeKeepTheirSamplesInOrder) {
  test::TempDir d;
  auto run = make_run(d.path, "many", 1, 0);
  {
    SampleWriter w(samples_dir(run) / "sleep.0.samples", 0, "sleep", "node0", 0, 0);
    for (int round = 0; round < 4; ++round)
      for (int m = 0; m < 24; ++m) w.record("m" + std::to_string(m), "s", round, round, m * 10 + round, false);
  }
  ResultsDb db(d.path / "fanout.sqlite");
  EXPECT_EQ(db.ingest_run(run).samples, 24u * 4u);
  EXPECT_EQ(count(db, "SELECT count(*) FROM metrics WHERE name LIKE 'm%'"), 24);
  EXPECT_EQ(count(db, "SELECT count(*) FROM sample_blocks"), 24) << "one block per metric";
  std::map<int64_t, std::vector<int64_t>> order;
  db.for_each_sample([&](int64_t, int, int64_t metric, const SampleRowText& s) { order[metric].push_back(stored_integer(s.iteration)); });
  ASSERT_EQ(order.size(), 24u);
  for (auto& [metric, its] : order) EXPECT_EQ(its, (std::vector<int64_t>{0, 1, 2, 3})) << "metric id " << metric;
  EXPECT_EQ(count(db, "SELECT count(*) FROM samples WHERE value = CAST(substr(metric, 2) AS INTEGER) * 10 + iteration"), 96);
}

TEST(Store, SchemaOneDatabaseIsMigratedWithEverySample) {
  test::TempDir d;
  auto file = d.path / "fanout.sqlite";
  // A database as fanout wrote it before schema 2: one row per sample in sample_values.
  make_database(file, 1, R"SQL(
CREATE TABLE metrics(id INTEGER PRIMARY KEY, role TEXT NOT NULL, name TEXT NOT NULL, unit TEXT NOT NULL, UNIQUE(role, name, unit));
CREATE TABLE sample_values(run_id INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE, metric_id INTEGER NOT NULL
  REFERENCES metrics(id), seq INTEGER NOT NULL, rank INTEGER NOT NULL, iteration INTEGER NOT NULL, t_start REAL NOT NULL,
  value REAL NOT NULL, warmup INTEGER NOT NULL, PRIMARY KEY(run_id, metric_id, seq)) WITHOUT ROWID;
CREATE VIEW samples AS SELECT s.run_id, s.rank, m.role, m.name AS metric, s.iteration, s.t_start, s.value, m.unit, s.warmup
  FROM sample_values s JOIN metrics m ON m.id = s.metric_id;
INSERT INTO experiments VALUES(1, 'e', 'calibration', 'calibration_sleep', '2026-01-01T00:00:00Z');
INSERT INTO runs(id, experiment_id, session, path, status, param_hash, ingested_at) VALUES(1, 1, 's', '/x/s', 'COMPLETED', 'h', 0);
INSERT INTO metrics VALUES(1, 'client', 'put', 's'), (2, 'client', 'get', 's');
INSERT INTO sample_values VALUES(1, 1, 0, 0, 0, 10.5, 0.25, 1), (1, 2, 1, 0, 0, 10.6, 0.5, 0), (1, 1, 2, 1, 0, 10.7, 1.0, 0),
  (1, 1, 3, 0, 1, 10.8, 2.0, 0), (1, 1, 4, 1, 1, 10.9, 4.0, 0);
)SQL");
  ResultsDb db(file);
  EXPECT_EQ(count(db, "SELECT version FROM schema_info"), kResultsSchemaVersion);
  EXPECT_EQ(count(db, "SELECT count(*) FROM sqlite_schema WHERE name='sample_values'"), 0);
  EXPECT_EQ(count(db, "SELECT count(*) FROM samples"), 5);
  EXPECT_EQ(count(db, "SELECT count(*) FROM samples WHERE metric='put' AND rank=0 AND warmup=0 AND value=2.0 AND iteration=1 "
                      "AND t_start=10.8"), 1);
  EXPECT_EQ(count(db, "SELECT sum(value * 100) FROM samples WHERE metric='put' AND warmup=0"), 700);
  EXPECT_EQ(count(db, "SELECT count(*) FROM sample_blocks"), 3) << "(put, rank 0), (put, rank 1), (get, rank 0)";
  ResultsDb again(file);  // opening a migrated database changes nothing
  EXPECT_EQ(count(again, "SELECT count(*) FROM samples"), 5);
}

// Figures (results/figures.h): a bench's printed numbers become one run's samples, one per round, so that the
// statistics of fanout's own store give their median and spread; bad lines name file:line and store nothing.
TEST(Figures, RoundsOfABenchBecomeOneRunWhoseStatisticsAreTheRounds) {
  test::TempDir d;
  std::istringstream text("# tensor_bench, 3 rounds\n"
                          "put_1KiB 1 25000 put/s 1764100000.5\n"
                          "put_1KiB 2 31000 put/s\n"
                          "\n"
                          "put_1KiB 3 28000 put/s\n"
                          "ratio_c_put_1KiB 1 0.99 x\n");
  const auto figures = parse_figures(text, "figures.txt");
  ASSERT_EQ(figures.size(), 4u);
  EXPECT_EQ(figures[0].t_unix_s, 1764100000.5);
  ResultsDb db(d.path / "fanout.sqlite");
  FigureRun run{"benchmarks", "tensor_bench", {{"bench", "tensor_bench"}, {"rounds", "3"}}, {{"commit", "abc123"}}};
  EXPECT_EQ(record_figures(db, d.path, run, figures).samples, 4u);
  EXPECT_EQ(record_figures(db, d.path, run, figures).samples, 4u);  // again: replaced, not doubled
  EXPECT_EQ(count(db, "SELECT count(*) FROM samples"), 4);
  EXPECT_EQ(count(db, "SELECT count(*) FROM samples WHERE metric = 'put_1KiB' AND t_start = 1764100000.5 AND iteration = 1"), 1);
  auto files = export_csv(db, d.path / "csv");
  const std::string stats = read_file(files.statistics);
  EXPECT_NE(stats.find("tensor_bench,COMPLETED,1,tensor_bench,3,bench,put_1KiB,put/s,1,0,3,25000,28000,28000,"), std::string::npos) << stats;
}

TEST(Figures, MalformedLinesNameTheLineAndNothingIsStored) {
  auto fails = [](const std::string& body, const std::string& text) {
    std::istringstream in(body);
    EXPECT_THROW_WITH(parse_figures(in, "f.txt"), UserError, text);
  };
  fails("a 1 2\n", "f.txt:1: expected 'metric iteration value unit [t_unix_s]', got 3 field(s)");
  fails("a 1 2 s\na x 2 s\n", "f.txt:2: iteration 'x' is not an integer");
  fails("a 1 fast s\n", "f.txt:1: value 'fast' is not a number");
  fails("a 1 2 s -5\n", "f.txt:1: t_unix_s '-5' is not a positive time");
  fails("a 1 2 s\na 2 3 ms\n", "f.txt:2: metric a in ms, earlier in s");
  test::TempDir d;
  ResultsDb db(d.path / "fanout.sqlite");
  EXPECT_THROW_WITH(record_figures(db, d.path, FigureRun{"benchmarks", "empty", {}, {}}, {}), UserError, "no figures for empty");
  EXPECT_EQ(count(db, "SELECT count(*) FROM runs"), 0);
}

TEST(Figures, ResultsRecordStoresStandardInputOrAFileAndRefusesBadNames) {
  test::TempDir d;
  write_file_atomic(d.path / "f.txt", "rate 1 10 op/s\nrate 2 12 op/s\n");
  auto r = test::run_fanout(d.path, {"results", "record", (d.path / "bench").string(), "--run", "pslite", "--file", (d.path / "f.txt").string(),
                          "--param", "size=1MiB", "--provenance", "commit=abc"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("2 figure(s) of pslite stored in"), std::string::npos) << r.out;
  EXPECT_EQ(test::sql_rows(d.path / "bench" / "fanout.sqlite", "SELECT value FROM parameters WHERE name = 'size'").at(0).at(0), "1MiB");
  EXPECT_EQ(test::sql_rows(d.path / "bench" / "fanout.sqlite", "SELECT value FROM provenance WHERE key = 'commit'").at(0).at(0), "abc");
  r = test::run_fanout(d.path, {"results", "record", (d.path / "bench").string(), "--run", "../x", "--file", (d.path / "f.txt").string()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--run ../x: a name of letters"), std::string::npos) << r.err;
  write_file_atomic(d.path / "bad.txt", "rate 1 10 op/s\nrate one 12 op/s\n");
  r = test::run_fanout(d.path, {"results", "record", (d.path / "bench").string(), "--run", "pslite", "--file", (d.path / "bad.txt").string()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("bad.txt:2: iteration 'one' is not an integer"), std::string::npos) << r.err;
  r = test::run_fanout(d.path, {"results", "record", (d.path / "bench").string(), "--run", "pslite", "--file", (d.path / "f.txt").string(),
                                "--param", "size=1", "--param", "size=2"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--param size is given twice"), std::string::npos) << r.err;
  // The earlier recording is intact.
  EXPECT_EQ(test::sql_rows(d.path / "bench" / "fanout.sqlite", "SELECT count(*) FROM samples").at(0).at(0), "2");
  // Nothing to record: refused before any folder or database is made.
  write_file_atomic(d.path / "empty.txt", "# nothing\n");
  r = test::run_fanout(d.path, {"results", "record", (d.path / "new").string(), "--run", "x", "--file", (d.path / "empty.txt").string()});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("no figures for x in"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(d.path / "new"));
}

TEST(Store, IngestRunsStoresEachInOrderAndStopsAtAnUnreadableFolder) {
  test::TempDir d;
  auto a = make_run(d.path, "a", 2, 3000), c = make_run(d.path, "c", 1, 10);
  std::filesystem::create_directories(d.path / "bad");  // no run.toml
  ResultsDb db(d.path / "fanout.sqlite");
  std::vector<std::string> stored;
  auto note = [&](const std::filesystem::path& run, const IngestReport& r) {
    stored.push_back(run.filename().string() + ":" + std::to_string(r.samples));
  };
  // The next folder is read while one is stored: the bad one fails while "a" is being stored, and is reported after.
  EXPECT_THROW_WITH(db.ingest_runs({a, d.path / "bad", c}, note), UserError, "bad/run.toml");
  EXPECT_EQ(stored, std::vector<std::string>{"a:6002"});
  EXPECT_EQ(count(db, "SELECT count(*) FROM runs"), 1);
  EXPECT_EQ(count(db, "SELECT count(*) FROM samples"), 6002);
  stored.clear();
  db.ingest_runs({c, a}, note);
  EXPECT_EQ(stored, (std::vector<std::string>{"c:11", "a:6002"}));
  EXPECT_EQ(count(db, "SELECT count(*) FROM runs"), 2);
}

// `fanout results ingest` commits runs together, as the driver does, and reports a run once it is committed: another
// connection sees it by then. The batch's bounds are the caller's; here one batch for all, then one a run.
TEST(Store, IngestedRunsAreCommittedTogetherAndReportedOnceCommitted) {
  test::TempDir d;
  std::vector<std::filesystem::path> runs;
  for (int i = 0; i < 4; ++i) runs.push_back(make_run(d.path, "r" + std::to_string(i), 1, 10));
  for (const uint64_t samples_a_batch : {uint64_t(1) << 40, uint64_t(1)}) {
    const auto file = d.path / ("batch" + std::to_string(samples_a_batch) + ".sqlite");
    ResultsDb db(file);
    ResultsDb reader(file, ResultsDb::ReadOnly{});
    std::vector<int64_t> seen;  // the runs another connection sees as each is reported
    db.ingest_runs(runs, [&](const std::filesystem::path&, const IngestReport&) { seen.push_back(count(reader, "SELECT count(*) FROM runs")); },
                   nullptr, {1e9, samples_a_batch});
    if (samples_a_batch > 1) EXPECT_EQ(seen, (std::vector<int64_t>{4, 4, 4, 4})) << "one batch: committed before the first is reported";
    else EXPECT_EQ(seen, (std::vector<int64_t>{1, 2, 3, 4})) << "a batch a run (11 samples each)";
  }
}

TEST(Store, NewDatabasesHave32KiBPagesAndOldOnesKeepTheirs) {
  test::TempDir d;
  {
    ResultsDb db(d.path / "new.sqlite");
    EXPECT_EQ(count(db, "PRAGMA page_size"), 32768);
  }
  // A database made with SQLite's default pages (fanout before 2026-11-26) opens, keeps them, and takes runs.
  sqlite3* raw = nullptr;
  ASSERT_EQ(sqlite3_open((d.path / "old.sqlite").c_str(), &raw), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(raw, "PRAGMA page_size=4096; CREATE TABLE t(x);", nullptr, nullptr, nullptr), SQLITE_OK);
  sqlite3_close(raw);
  ResultsDb db(d.path / "old.sqlite");
  EXPECT_EQ(count(db, "PRAGMA page_size"), 4096);
  EXPECT_EQ(db.ingest_run(make_run(d.path, "s1", 2, 10)).samples, 22u);
  EXPECT_EQ(count(db, "SELECT count(*) FROM samples"), 22);
}

TEST(Store, MetricGroupsComeInOrderWhetherParsedHereOrOnTheSecondThread) {
  // Chunks above 256 KiB of text are parsed on a second thread while the next is read; small ones inline; a group
  // above 8 MiB (big2: about 11 MB) comes in two chunks, its row and rank count carried from one to the next. Every
  // way, fn sees every (run, metric) once, in order, with its measured values (warmup left out) and its ranks.
  test::TempDir d;
  ResultsDb db(d.path / "fanout.sqlite");
  db.ingest_runs({make_run(d.path, "big1", 3, 20000), make_run(d.path, "small", 2, 5), make_run(d.path, "big2", 2, 200000)},
                 [](const std::filesystem::path&, const IngestReport&) {});
  ASSERT_GT(count(db, "SELECT sum(length(rows)) FROM sample_blocks WHERE run_id = 3"), 9 << 20);
  std::vector<std::string> seen;
  db.for_each_metric([&](MetricSummaryRow& g) {
    double lo = *std::min_element(g.values.begin(), g.values.end()), hi = *std::max_element(g.values.begin(), g.values.end());
    seen.push_back(std::to_string(g.run_id) + ":" + g.metric + ":" + std::to_string(g.values.size()) + ":" +
                   std::to_string(g.ranks) + ":" + std::to_string(int(lo)) + "-" + std::to_string(int(hi)));
  });
  EXPECT_EQ(seen, (std::vector<std::string>{"1:sleep:60000:3:100-20099", "2:sleep:10:2:100-104", "3:sleep:400000:2:100-200099"}));
}

// The CSV files' writer: the same bytes whether its whole chunks go through the page cache, bypass it (O_DIRECT,
// from the first chunk or after some), or are compressed; lines longer than its buffer and empty lines included.
// Nothing but the committed file is left, and an uncommitted one leaves nothing.
TEST(StagedFile, TheSameBytesThroughTheCacheOrAroundIt) {
  test::TempDir d;
  std::vector<std::string> lines;
  uint64_t x = 12345;
  for (int i = 0; i < 120000; ++i) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    lines.push_back(std::string(size_t(x >> 56), char('a' + i % 26)) + std::to_string(i));
    if (i == 50000) lines.push_back(std::string((size_t(6) << 20) + 7, 'L'));  // more than buffer and spill
    if (i % 997 == 0) lines.push_back("");
  }
  std::string expected;
  for (auto& l : lines) expected += l + "\n";
  ASSERT_GT(expected.size(), size_t(20) << 20);
  struct statfs fsinfo {};
  ASSERT_EQ(statfs(d.path.c_str(), &fsinfo), 0);
  const bool ext4 = fsinfo.f_type == 0xEF53;  // where O_DIRECT is known to be taken
  for (uint64_t after : {uint64_t(0), uint64_t(5) << 20, UINT64_MAX}) {
    const std::filesystem::path file = d.path / ("out-" + std::to_string(after) + ".csv");
    StagedFile out(file, false, after);
    for (auto& l : lines) out.line(l);
    EXPECT_FALSE(std::filesystem::exists(file)) << "only the staged copy until commit";
    out.commit();
    EXPECT_EQ(read_file(file), expected) << "direct after " << after;
    if (ext4) {
      EXPECT_EQ(out.went_direct(), after != UINT64_MAX) << after;
    }
  }
  {
    StagedFile out(d.path / "zipped.csv.gz", true, 0);
    for (auto& l : lines) out.line(l);
    out.commit();
    EXPECT_FALSE(out.went_direct());
    gzFile gz = gzopen((d.path / "zipped.csv.gz").c_str(), "rb");
    ASSERT_NE(gz, nullptr);
    std::string back(expected.size() + 1, '\0');
    EXPECT_EQ(gzread(gz, back.data(), unsigned(back.size())), int(expected.size()));
    gzclose(gz);
    back.resize(expected.size());
    EXPECT_TRUE(back == expected);
  }
  {
    StagedFile abandoned(d.path / "abandoned.csv", false, 0);
    for (int i = 0; i < 3; ++i) abandoned.line(expected.substr(0, size_t(3) << 20));
  }
  {  // a commit whose rename fails (a folder holds the name) leaves its staged copy behind neither
    std::filesystem::create_directories(d.path / "taken.csv" / "inside");
    StagedFile refused(d.path / "taken.csv", false);
    refused.line("a");
    EXPECT_THROW_WITH(refused.commit(), UserError, "cannot rename");
  }
  std::vector<std::string> left;
  for (auto& e : std::filesystem::directory_iterator(d.path)) left.push_back(e.path().filename().string());
  std::sort(left.begin(), left.end());
  EXPECT_EQ(left, (std::vector<std::string>{"out-0.csv", "out-18446744073709551615.csv", "out-5242880.csv", "taken.csv", "zipped.csv.gz"}));
}

// A direct chunk is written by the file's own thread while the next lines come: a write the disk refuses there
// (here the file-size limit, RLIMIT_FSIZE: a short write, then EFBIG) is thrown by a later line() or by commit(),
// naming the file and the system's reason, and the abandoned file leaves nothing behind.
TEST(StagedFile, AWriteRefusedOnItsWriterThreadIsThrownAndLeavesNothing) {
  test::TempDir d;
  struct statfs fsinfo {};
  ASSERT_EQ(statfs(d.path.c_str(), &fsinfo), 0);
  // Elsewhere O_DIRECT may be refused, no chunk goes to the writer thread, and this would test the caller's writes.
  if (fsinfo.f_type != 0xEF53) GTEST_SKIP() << "needs ext4, where O_DIRECT is known to be taken";
  const std::string line(1023, 'x');  // 1 KiB with its newline: whole chunks only, no tail for commit() to write itself
  const pid_t child = fork();
  if (child == 0) {
    alarm(120);  // a writer that never hands back fails the test instead of hanging the suite
    std::signal(SIGXFSZ, SIG_IGN);
    rlimit limit{rlim_t((5 << 20) + 123), rlim_t((5 << 20) + 123)};
    setrlimit(RLIMIT_FSIZE, &limit);
    int code = 4;  // nothing thrown
    try {
      StagedFile out(d.path / "big.csv", false, 0);
      for (int i = 0; i < 20 * 1024; ++i) out.line(line);  // 20 MiB: past the limit
      out.commit();
    } catch (const UserError& e) {
      const std::string what = e.what();
      code = what.find("big.csv.tmp.") != std::string::npos && what.find(std::strerror(EFBIG)) != std::string::npos ? 3 : 5;
    }
    if (code == 3 && !std::filesystem::is_empty(d.path)) code = 6;  // the staged copy was left
    _exit(code);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 3) << "4: nothing thrown, 5: the error named neither the file nor EFBIG, 6: a file was left";
  EXPECT_TRUE(std::filesystem::is_empty(d.path));
}

// Which attempts the statistics count (ExperimentStats::stats), the rest superseded: every COMPLETED run; of a
// permutation that never completed, its last attempt only; a run stored without a permutation's hash, always.
TEST(Store, CompletedRunsAndThoseOfPermutationsThatNeverCompletedTheirLastAttemptCount) {
  test::TempDir d;
  ResultsDb db(d.path / "fanout.sqlite");
  // (session, hash, status), stored in this order: ids grow with it. Hash "b"'s last attempt comes after "c"'s runs.
  const std::vector<std::array<std::string, 3>> runs = {{"a1", "a", "FAILED"},    {"a2", "a", "COMPLETED"}, {"b1", "b", "FAILED"},
                                                        {"c1", "c", "COMPLETED"}, {"c2", "c", "COMPLETED"}, {"b2", "b", "TIMEOUT"},
                                                        {"n1", "", "FAILED"},     {"a3", "a", "FAILED"}, {"n0", "", "FAILED"}};
  for (auto& [session, hash, status] : runs) {
    auto dir = make_run(d.path, session, 1, 3);
    RunMetadata m = read_run_metadata(dir);
    m.param_hash = hash;
    m.status->state = status;
    write_run_metadata(dir, m);
    db.ingest_run(dir);
  }
  std::set<std::string> counted, superseded;
  for (auto& m : compute_statistics(db, "exp").stats) counted.insert(m.session);
  for (auto& m : compute_statistics(db, "exp").superseded) superseded.insert(m.session);
  EXPECT_EQ(counted, (std::set<std::string>{"a2", "c1", "c2", "b2", "n1", "n0"}));
  EXPECT_EQ(superseded, (std::set<std::string>{"a1", "b1", "a3"}));
}

// The CSV and statistics passes read the runs beside the samples, in id order, one run held at a time.
TEST(Store, ARunWalkReadsOnToTheRunAskedAndRefusesOneItHasPassedOrThatIsNotThere) {
  test::TempDir d;
  ResultsDb db(d.path / "fanout.sqlite");
  for (const char* session : {"w1", "w2", "w3"}) db.ingest_run(make_run(d.path, session, 1, 2));
  const std::vector<StoredRun> stored = db.runs();
  ASSERT_EQ(stored.size(), 3u);
  RunWalk walk(db);
  EXPECT_EQ(walk.at(stored[1].id).session, "w2");  // w1 read past: it had nothing asked of it
  EXPECT_EQ(walk.at(stored[1].id).session, "w2");  // the run it is at, not read again
  EXPECT_EQ(walk.at(stored[1].id).parameters, stored[1].parameters);
  EXPECT_THROW(walk.at(stored[0].id), std::out_of_range);
  EXPECT_EQ(RunWalk(db).at(stored[2].id).session, "w3");
  EXPECT_THROW(RunWalk(db).at(stored[2].id + 1), std::out_of_range);
  ExperimentStats head;
  const CountedRuns counted = count_runs(db, head);
  EXPECT_TRUE(counted.counts(stored[0].id) && counted.counts(stored[2].id));
  EXPECT_THROW(counted.counts(stored[2].id + 1), std::out_of_range);
  EXPECT_EQ(head.runs_by_status, (std::map<std::string, int>{{"COMPLETED", 3}}));
}

namespace {
// The journal mode a database file's header says it has: 2 for WAL, 1 for a rollback journal (bytes 18 and 19). Read
// through a descriptor kept open while SQLite has the file: closing one would release SQLite's locks on it.
int header_journal_version(int fd) {
  char head[20];
  return ::pread(fd, head, sizeof head, 0) == ssize_t(sizeof head) && head[18] == head[19] ? int(head[18]) : -1;
}
}  // namespace

TEST(Store, IngestRunsWritesThroughARollbackJournalWhenAloneAndLeavesTheDatabaseInWal) {
  test::TempDir d;
  const auto file = d.path / "fanout.sqlite";
  const auto a = make_run(d.path, "a", 2, 3000), b = make_run(d.path, "b", 1, 10), c = make_run(d.path, "c", 3, 5);
  struct Descriptor {  // declared before the connections: closed after them
    int fd = -1;
    ~Descriptor() {
      if (fd >= 0) ::close(fd);
    }
  } kept;
  ResultsDb db(file);
  kept.fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
  const int header = kept.fd;
  ASSERT_GE(header, 0);
  ASSERT_EQ(header_journal_version(header), 2);
  std::vector<std::string> seen;  // what was beside the database as each run was stored
  auto note = [&](const std::filesystem::path& run, const IngestReport&) {
    seen.push_back(run.filename().string() + (std::filesystem::exists(file.string() + "-journal") ? " journal" : "") +
                   (std::filesystem::exists(file.string() + "-wal") ? " wal" : "") + " sync " + std::to_string(count(db, "PRAGMA synchronous")));
  };
  db.ingest_runs({a, b}, note);
  // FULL (2) with the rollback journal: NORMAL is crash-safe only with the log.
  EXPECT_EQ(seen, (std::vector<std::string>{"a journal sync 2", "b journal sync 2"}));
  EXPECT_EQ(header_journal_version(header), 2) << "back in WAL once the ingest is done";
  EXPECT_EQ(count(db, "PRAGMA synchronous"), 1);
  EXPECT_EQ(count(db, "SELECT count(*) FROM samples"), 6002 + 11);
  // An ingest that stops at an unreadable folder leaves it in WAL too, with the runs before it stored.
  std::filesystem::create_directories(d.path / "bad");  // no run.toml
  EXPECT_THROW(db.ingest_runs({a, d.path / "bad"}, note), UserError);
  EXPECT_EQ(header_journal_version(header), 2);
  EXPECT_EQ(count(db, "PRAGMA synchronous"), 1);
  EXPECT_FALSE(std::filesystem::exists(file.string() + "-journal"));
  EXPECT_EQ(count(db, "SELECT count(*) FROM runs"), 2);
  // Another connection open: the switch is refused, not waited for, and the runs go through the write-ahead log.
  ResultsDb reader(file, ResultsDb::ReadOnly{});
  EXPECT_EQ(count(reader, "SELECT count(*) FROM runs"), 2);
  seen.clear();
  db.ingest_runs({c}, note);
  EXPECT_EQ(seen, (std::vector<std::string>{"c wal sync 1"}));
  EXPECT_EQ(count(reader, "SELECT count(*) FROM runs"), 3);
  EXPECT_EQ(header_journal_version(header), 2);
}

namespace {
// How many of a file's pages are in the kernel's cache: mincore of a mapping never touched reads the cache. Through
// `fd` when given: closing a descriptor of its own would release the locks this process holds on the file.
size_t cached_pages(const std::filesystem::path& file, int fd = -1) {
  const size_t size = std::filesystem::file_size(file), page = size_t(::sysconf(_SC_PAGESIZE));
  const int own = fd < 0 ? ::open(file.c_str(), O_RDONLY | O_CLOEXEC) : -1;
  void* map = ::mmap(nullptr, size, PROT_READ, MAP_SHARED, fd < 0 ? own : fd, 0);
  if (own >= 0) ::close(own);
  std::vector<unsigned char> in((size + page - 1) / page);
  const bool ok = map != MAP_FAILED && ::mincore(map, size, in.data()) == 0;
  if (map != MAP_FAILED) ::munmap(map, size);
  return ok ? size_t(std::count_if(in.begin(), in.end(), [](unsigned char c) { return c & 1; })) : SIZE_MAX;
}

// Whether another process finds a lock on [start, start+len) of the file: what this process holds is not seen from
// inside it (POSIX locks are the process's own). The child only makes system calls.
bool another_process_sees_a_lock(const std::filesystem::path& file, off_t start, off_t len) {
  const pid_t child = ::fork();
  if (child == 0) {
    const int fd = ::open(file.c_str(), O_RDWR | O_CLOEXEC);
    struct flock l {};
    l.l_type = F_WRLCK;
    l.l_whence = SEEK_SET;
    l.l_start = start;
    l.l_len = len;
    ::_exit(fd >= 0 && ::fcntl(fd, F_GETLK, &l) == 0 ? (l.l_type == F_UNLCK ? 1 : 0) : 2);
  }
  int st = 0;
  ::waitpid(child, &st, 0);
  return WIFEXITED(st) && WEXITSTATUS(st) == 0;
}
}  // namespace

TEST(CacheBound, APassDropsALargeFilesCleanPagesThroughTheDescriptorItsOwnerHoldsAndKeepsItsLocks) {
  test::TempDir d;
  const auto file = d.path / "big.bin";
  std::string bytes(size_t(8) << 20, '\0');
  for (size_t i = 0; i < bytes.size(); ++i) bytes[i] = char(i * 2654435761u >> 24);
  write_file_atomic(file, bytes);
  const size_t pages = bytes.size() / size_t(::sysconf(_SC_PAGESIZE));
  // Whether this filesystem's cached pages can be dropped at all (tmpfs's pages are the file): asked directly.
  bool droppable = false;
  {
    const int probe = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
    ASSERT_EQ(read_file(file), bytes);
    ::posix_fadvise(probe, 0, 0, POSIX_FADV_DONTNEED);
    droppable = cached_pages(file, probe) < pages / 10;
    ::close(probe);
  }
  ASSERT_EQ(read_file(file), bytes);
  ASSERT_GT(cached_pages(file), pages / 2) << "just read";
  // Nobody holds it open: there is no descriptor to drop through, and none is opened.
  CacheBound(file, /*large=*/size_t(4) << 20).shed();
  EXPECT_GT(cached_pages(file), pages / 2) << "dropped through a descriptor of its own";
  // Its owner (SQLite, in the store) holds it open, with a lock on it.
  const int owner = ::open(file.c_str(), O_RDWR | O_CLOEXEC);
  ASSERT_GE(owner, 0);
  struct flock lock {};
  lock.l_type = F_RDLCK;
  lock.l_whence = SEEK_SET;
  lock.l_start = 100;
  lock.l_len = 10;
  ASSERT_EQ(::fcntl(owner, F_SETLK, &lock), 0);
  ASSERT_TRUE(another_process_sees_a_lock(file, 100, 10));
  {
    CacheBound small(file, /*large=*/size_t(16) << 20, /*every=*/size_t(1) << 20);
    small.passed(size_t(4) << 20);
    small.shed();
  }
  EXPECT_GT(cached_pages(file, owner), pages / 2) << "a file below the limit stays cached";
  {
    CacheBound big(file, /*large=*/size_t(4) << 20, /*every=*/size_t(1) << 20);
    big.passed(size_t(512) << 10);
    EXPECT_GT(cached_pages(file, owner), pages / 2) << "nothing dropped before `every` bytes have passed";
    big.passed(size_t(512) << 10);
    if (droppable) {
      EXPECT_LT(cached_pages(file, owner), pages / 10) << "dropped once `every` bytes have passed";
    }
  }
  EXPECT_TRUE(another_process_sees_a_lock(file, 100, 10)) << "closing any descriptor of the file would have released it";
  ::close(owner);
  EXPECT_EQ(read_file(file), bytes);
  // A file that is not there is nothing to drop.
  CacheBound none(d.path / "missing");
  none.passed(size_t(1) << 30);
  none.shed();
}

// SQLite keeps a WAL database's SHARED lock (the 510 bytes past 0x40000002) for as long as the connection is open,
// and counts on it: a pass that closed a descriptor of the file would release it, and another process could then
// take the database from under the connection.
TEST(Store, TheDatabasesLocksOutliveABulkIngestAndAWholePass) {
  test::TempDir d;
  const auto file = d.path / "fanout.sqlite";
  ResultsDb db(file);
  db.ingest_run(make_run(d.path, "a", 2, 100));
  constexpr off_t kSharedFirst = 0x40000002, kSharedSize = 510;
  ASSERT_TRUE(another_process_sees_a_lock(file, kSharedFirst, kSharedSize)) << "the premise: SQLite holds it";
  db.ingest_runs({make_run(d.path, "b", 1, 10)}, [](const std::filesystem::path&, const IngestReport&) {});
  EXPECT_EQ(count(db, "SELECT count(*) FROM runs"), 2);  // back in WAL, the lock is taken again by the first read
  EXPECT_TRUE(another_process_sees_a_lock(file, kSharedFirst, kSharedSize)) << "after a bulk ingest";
  uint64_t n = 0;
  db.for_each_sample([&](int64_t, int, int64_t, const SampleRowText&) { ++n; });
  EXPECT_EQ(n, 202u + 11u);
  EXPECT_TRUE(another_process_sees_a_lock(file, kSharedFirst, kSharedSize)) << "after a pass over every block";
}

// A run folder at `dir` whose run.toml is `m` as the driver lays it out: without its status.
std::filesystem::path laid_out_without_status(RunMetadata m, const std::filesystem::path& dir) {
  m.status.reset();
  std::filesystem::create_directories(dir);
  write_run_metadata(dir, m);
  return dir;
}

// A run's end is appended to the run.toml it was laid out with (one write: no file aside, no inode made or freed a
// run). It reads back as the same metadata as a run.toml written whole; a status cut short (a reader in the middle of
// the write, a crash before all of it reached the disk) is not read, the rest is; an append that fails leaves the
// file as it was, and one with no run.toml to go to names it.
TEST(RunFolder, AStatusAppendedReadsAsOneWrittenWholeAndOneCutShortIsNotRead) {
  test::TempDir d;
  const auto whole = make_run(d.path, "whole", 2, 1);
  const RunMetadata written = read_run_metadata(whole);
  ASSERT_TRUE(written.status);
  RunStatusRecord st = *written.status;
  st.ranks.push_back({"sleep", 1, 3, 9});
  st.reason = "a \"quoted\" reason\nover two lines";
  const auto appended = laid_out_without_status(written, d.path / "appended");
  const std::string before = read_file(appended / kRunMetadataFile);
  EXPECT_FALSE(read_run_metadata(appended).status);
  append_run_status(appended, st, Durability::Now);
  const std::string after = read_file(appended / kRunMetadataFile);
  ASSERT_EQ(after.compare(0, before.size(), before), 0) << "only added to";
  RunMetadata expect = written;
  expect.status = st;
  std::filesystem::create_directories(d.path / "rewritten");
  write_run_metadata(d.path / "rewritten", expect);
  const RunMetadata back = read_run_metadata(appended);
  ASSERT_TRUE(back.status);
  EXPECT_EQ(back.status->reason, st.reason);
  ASSERT_EQ(back.status->ranks.size(), 2u);
  EXPECT_EQ(back.status->ranks[1].exit_code, 3);
  EXPECT_EQ(back.status->ranks[1].signal, 9);
  // The same metadata as written whole: its text again from what was read is the same bytes.
  EXPECT_EQ(run_metadata_text(back), read_file(d.path / "rewritten" / kRunMetadataFile));
  for (size_t cut = 1; cut < after.size() - before.size(); cut += 7) {
    const std::string shorter = after.substr(0, after.size() - cut);
    write_file_atomic(appended / kRunMetadataFile, shorter);
    const RunMetadata partial = read_run_metadata(appended);
    EXPECT_FALSE(partial.status) << "cut " << cut << " bytes short";
    EXPECT_EQ(partial.parameters, written.parameters);
  }
  // A write the file-size limit stops part way (RLIMIT_FSIZE: a real short write, then EFBIG) is cut back off.
  write_file_atomic(appended / kRunMetadataFile, before);
  const pid_t child = fork();
  if (child == 0) {
    std::signal(SIGXFSZ, SIG_IGN);
    rlimit limit{rlim_t(before.size() + 10), rlim_t(before.size() + 10)};
    setrlimit(RLIMIT_FSIZE, &limit);
    try {
      append_run_status(appended, st, Durability::Now);
    } catch (const UserError& e) {
      _exit(std::string(e.what()).find(kRunMetadataFile) != std::string::npos ? 3 : 4);
    }
    _exit(0);
  }
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 3) << "the append failed with an error naming run.toml";
  EXPECT_EQ(read_file(appended / kRunMetadataFile), before) << "the part that went in was cut back off";
  EXPECT_THROW_WITH(append_run_status(d.path / "absent", st), UserError, "absent/run.toml");
}

// A run's job id is appended as it is submitted ([job]), its end after it ([status]): read back as the same
// metadata written whole; cut anywhere in either append, what was closed before the cut is read and nothing of the
// rest; an opening line inside the torn append's own value does not hide where it began.
TEST(RunFolder, AJobIdAppendedThenAStatusReadAsWrittenWholeAndACutAppendIsNotRead) {
  test::TempDir d;
  const auto whole = make_run(d.path, "whole", 1, 1);
  const RunMetadata written = read_run_metadata(whole);
  ASSERT_TRUE(written.status);
  const auto dir = laid_out_without_status(written, d.path / "appended");
  const std::string laid = read_file(dir / kRunMetadataFile);
  EXPECT_EQ(read_run_metadata(dir).job_id, "");
  append_run_job(dir, "4711_3", Durability::Deferred);
  const std::string submitted = read_file(dir / kRunMetadataFile);
  EXPECT_EQ(read_run_metadata(dir).job_id, "4711_3");
  EXPECT_FALSE(read_run_metadata(dir).status);
  append_run_status(dir, *written.status, Durability::Deferred);
  const std::string ended = read_file(dir / kRunMetadataFile);
  ASSERT_EQ(ended.compare(0, submitted.size(), submitted), 0) << "only added to";
  const RunMetadata back = read_run_metadata(dir);
  EXPECT_EQ(back.job_id, "4711_3");
  ASSERT_TRUE(back.status);
  RunMetadata expect = written;
  expect.job_id = "4711_3";
  std::filesystem::create_directories(d.path / "rewritten");
  write_run_metadata(d.path / "rewritten", expect);
  EXPECT_EQ(run_metadata_text(back), read_file(d.path / "rewritten" / kRunMetadataFile)) << "the same as written whole";
  // Every cut: inside [job], nothing of it; inside [status], the job and no status.
  for (size_t keep = laid.size(); keep < ended.size(); ++keep) {
    write_file_atomic(dir / kRunMetadataFile, ended.substr(0, keep));
    const RunMetadata partial = read_run_metadata(dir);
    EXPECT_EQ(partial.job_id, keep >= submitted.size() ? "4711_3" : "") << "kept " << keep << " bytes";
    EXPECT_FALSE(partial.status) << "kept " << keep << " bytes";
    EXPECT_EQ(partial.parameters, written.parameters);
  }
  // A status cut short whose reason holds the job's opening line (as a multi-line string): the job is read, the
  // status not, and the text before the fake line is not taken for the run.toml.
  write_file_atomic(dir / kRunMetadataFile, submitted);
  RunStatusRecord odd = *written.status;
  odd.reason = "a line\n# the run's job, appended as it was submitted\n[job]\nid = 'not this'\nand more";
  append_run_status(dir, odd, Durability::Deferred);
  const std::string odd_text = read_file(dir / kRunMetadataFile);
  EXPECT_EQ(read_run_metadata(dir).status->reason, odd.reason) << "closed: read whole";
  write_file_atomic(dir / kRunMetadataFile, odd_text.substr(0, odd_text.size() - 30));
  const RunMetadata torn = read_run_metadata(dir);
  EXPECT_EQ(torn.job_id, "4711_3");
  EXPECT_FALSE(torn.status);
}

// The lines that frame an appended status may stand inside a value (a multi-line command): such a run.toml reads
// whole, with or without a status after it. A run.toml that is a FIFO or a link is refused, not waited on or followed.
TEST(RunFolder, TheStatusLinesInsideAValueAndARunTomlThatIsNoFileAreNotTakenForAStatus) {
  test::TempDir d;
  const auto dir = make_run(d.path, "r", 1, 1);
  RunMetadata m = read_run_metadata(dir);
  const RunStatusRecord st = *m.status;
  m.status.reset();
  const std::string value = "./run.sh\n# the run's end, appended as it ended\n[status]\nstate = \"COMPLETED\"\n";
  m.parameters.emplace_back("command", value);
  write_run_metadata(dir, m);
  RunMetadata back = read_run_metadata(dir);
  EXPECT_FALSE(back.status);
  ASSERT_EQ(back.parameters.size(), 3u);
  EXPECT_EQ(back.parameters[2].second, value);
  append_run_status(dir, st);
  back = read_run_metadata(dir);
  ASSERT_TRUE(back.status);
  EXPECT_EQ(back.status->state, "COMPLETED");
  EXPECT_EQ(back.parameters[2].second, value);

  const auto fifo = d.path / "fifo";
  std::filesystem::create_directories(fifo);
  ASSERT_EQ(mkfifo((fifo / kRunMetadataFile).c_str(), 0600), 0);
  EXPECT_THROW_WITH(append_run_status(fifo, st), UserError, "fifo/run.toml");  // ENXIO: no reader, and not waited for
  const auto link = d.path / "link";
  std::filesystem::create_directories(link);
  std::filesystem::create_symlink(dir / kRunMetadataFile, link / kRunMetadataFile);
  const std::string target = read_file(dir / kRunMetadataFile);
  EXPECT_THROW_WITH(append_run_status(link, st), UserError, "link/run.toml");
  EXPECT_EQ(read_file(dir / kRunMetadataFile), target) << "the link's target is untouched";
}

// toml++'s own text of a run's metadata, built as results/run_folder.cpp built it before it wrote TOML directly:
// the reference the direct text must parse the same as.
namespace {
toml::table toml_plus_plus_status(const RunStatusRecord& s) {
  toml::array ranks;
  for (auto& r : s.ranks) ranks.push_back(toml::table{{"role", r.role}, {"rank", r.rank}, {"exit_code", r.exit_code}, {"signal", r.signal}});
  return toml::table{{"state", s.state},       {"job_id", s.job_id},         {"node_list", s.node_list},
                     {"reason", s.reason},     {"exit_code", s.exit_code},   {"signal", s.signal},
                     {"start_wall_ns", s.start_wall_ns}, {"end_wall_ns", s.end_wall_ns}, {"ranks", ranks}};
}
std::string toml_plus_plus_text(const RunMetadata& m) {
  toml::table run{{"session", m.session},     {"experiment", m.experiment}, {"subcommand", m.subcommand},
                  {"plugin", m.plugin},       {"plugin_path", m.plugin_path}, {"plugin_version", m.plugin_version},
                  {"param_hash", m.param_hash}, {"launcher", m.scheduler},   {"walltime_s", m.walltime_s},
                  {"created_wall_ns", m.created_wall_ns}};
  if (!m.service_dir.empty()) {
    run.insert("service_dir", m.service_dir);
    run.insert("service_provider", m.service_provider);
  }
  toml::table params;
  toml::array order;
  for (auto& [k, v] : m.parameters) {
    params.insert(k, v);
    order.push_back(k);
  }
  run.insert("parameter_order", order);
  toml::array steps;
  for (auto& s : m.steps) {
    toml::table t{{"role", s.role}, {"nodes", s.nodes}, {"tasks_per_node", s.tasks_per_node}, {"placement", s.placement},
                  {"cpus_per_task", s.cpus_per_task}};
    if (s.gpus_per_task) t.insert("gpus_per_task", s.gpus_per_task);
    if (s.memory_mb) t.insert("memory_mb", s.memory_mb);
    if (!s.binding.empty()) t.insert("binding", s.binding);
    if (s.exclusive) t.insert("exclusive", true);
    if (!s.entry.empty()) t.insert("entry", s.entry);
    if (!s.settings.empty()) t.insert("settings", s.settings);
    if (s.mpi_program) t.insert("mpi_program", true);
    steps.push_back(std::move(t));
  }
  toml::table prov;
  for (auto& [k, v] : m.provenance) prov.insert(k, v);
  toml::table root{{"run", run}, {"parameters", params}, {"steps", steps}, {"provenance", prov}};
  if (!m.job_id.empty()) root.insert("job", toml::table{{"id", m.job_id}});
  if (m.status) root.insert("status", toml_plus_plus_status(*m.status));
  std::ostringstream out;
  out << root;
  return out.str();
}
}  // namespace

TEST(Store, RunTomlWrittenDirectlyParsesAsTomlPlusPlusTextOfTheSameValues) {
  // Every kind of character a value or key can hold: quotes, backslashes, line breaks, tabs and other control
  // characters, DEL, well-formed UTF-8 of 2-4 bytes, and bytes that start no well-formed character (a stray
  // continuation, 0xff, a sequence cut short, an overlong form, a surrogate).
  const std::vector<std::string> nasty = {"plain", "", "with \"quotes\" and \\back\\slashes\\", "two\nlines\r\n", "tab\there",
                                          std::string("nul\0and\x01\x1f\x7f", 10), "caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x9a\x80",
                                          "stray \x80 and \xff\xfe", "cut \xe2\x82 short", "overlong \xc0\xaf", "surrogate \xed\xa0\x80",
                                          "'single' '''triple'''", "# not a comment", "[not.a.table]", "key = value"};
  RunMetadata m;
  m.session = "sess-" + nasty[2];
  m.experiment = nasty[3];
  m.subcommand = "run";
  m.plugin = nasty[6];
  m.plugin_path = "/p/a th/" + nasty[7];
  m.plugin_version = nasty[8];
  m.param_hash = "0123456789abcdef";
  m.scheduler = "local";
  m.walltime_s = std::numeric_limits<int64_t>::max();
  m.created_wall_ns = std::numeric_limits<int64_t>::min();
  const std::vector<std::string> keys = {"size", "with space", "dotted.key", "caf\xc3\xa9", "", "quote\"d", "-dash_1"};
  for (size_t i = 0; i < nasty.size(); ++i) m.parameters.emplace_back(keys[i % keys.size()] + (i < keys.size() ? "" : std::to_string(i)), nasty[i]);
  for (size_t i = 0; i < nasty.size(); ++i) m.provenance["k" + std::to_string(i) + (i % 3 ? " x" : "")] = nasty[i];
  RunStep full;
  full.role = "server";
  full.nodes = 2;
  full.tasks_per_node = 3;
  full.placement = "spread";
  full.cpus_per_task = 4;
  full.gpus_per_task = 1;
  full.memory_mb = 512;
  full.binding = "cores";
  full.exclusive = true;
  full.entry = "worker";
  full.settings = R"({"a": "b\nc", "d": [1, 2]})";
  full.mpi_program = true;
  m.steps = {full, RunStep{}};
  m.service_dir = nasty[9];
  m.service_provider = true;
  RunStatusRecord st;
  st.state = "FAILED";
  st.job_id = "123_4";
  st.node_list = "n[1-2]";
  st.reason = nasty[3] + nasty[5];
  st.exit_code = -1;
  st.signal = 9;
  st.start_wall_ns = 1;
  st.end_wall_ns = std::numeric_limits<int64_t>::max();
  st.ranks = {{"server", 0, 0, 0}, {nasty[2], 1, 3, 9}};
  auto same = [](const std::string& ours, const std::string& theirs, const std::string& what) {
    toml::table a, b;
    ASSERT_NO_THROW(a = toml::parse(ours)) << what << ":\n" << ours;
    ASSERT_NO_THROW(b = toml::parse(theirs)) << what << ":\n" << theirs;
    EXPECT_TRUE(a == b) << what << ": ours\n" << ours << "\ntoml++'s\n" << theirs;
  };
  same(run_metadata_text(m), toml_plus_plus_text(m), "no job, no status");
  // One difference, on purpose: a character cut short at a value's very end, which toml++ drops, is kept as bytes.
  m.session = "cut \xe2\x82";
  EXPECT_EQ(toml::parse(run_metadata_text(m))["run"]["session"].value<std::string>(), "cut \xc3\xa2\xc2\x82");
  // Two more that toml++ lost, kept: a value's leading line break (toml++ wrote a multi-line string, whose first
  // line break a reader drops) and a bad byte before a non-ASCII lead byte (toml++ escaped both).
  m.session = "\nleading";
  EXPECT_EQ(toml::parse(run_metadata_text(m))["run"]["session"].value<std::string>(), "\nleading");
  EXPECT_EQ(toml::parse(toml_plus_plus_text(m))["run"]["session"].value<std::string>(), "leading") << "as docs/results.md says";
  m.session = "\xe2\xc3\xa9";
  EXPECT_EQ(toml::parse(run_metadata_text(m))["run"]["session"].value<std::string>(), "\xc3\xa2\xc3\xa9");
  EXPECT_EQ(toml::parse(toml_plus_plus_text(m))["run"]["session"].value<std::string>(), "\xc3\xa2\xc3\x83\xc2\xa9");
  m.session = "sess";
  // A parameter name twice: the first stands, as in toml++'s table (a key written twice would not parse).
  m.parameters.emplace_back(m.parameters.front().first, "second");
  same(run_metadata_text(m), toml_plus_plus_text(m), "a parameter name twice");
  m.parameters.pop_back();
  m.job_id = "77";
  m.status = st;
  same(run_metadata_text(m), toml_plus_plus_text(m), "job and status");
  m.status->ranks.clear();
  m.steps.clear();
  m.service_dir.clear();
  m.parameters.clear();
  m.provenance.clear();
  same(run_metadata_text(m), toml_plus_plus_text(m), "nothing in the lists and tables");
  // What is appended as a run ends or is submitted: the same as toml++'s table of it.
  test::TempDir d;
  m.status.reset();
  m.job_id.clear();
  write_run_metadata(d.path, m);
  const std::string before = read_file(d.path / kRunMetadataFile);
  append_run_job(d.path, nasty[2], Durability::Deferred);
  append_run_status(d.path, st, Durability::Deferred);
  const std::string appended = read_file(d.path / kRunMetadataFile).substr(before.size());
  std::ostringstream theirs;
  theirs << toml::table{{"job", toml::table{{"id", nasty[2]}}}, {"status", toml_plus_plus_status(st)}};
  same(appended, theirs.str(), "appended [job] and [status]");
  // And the reader takes it back whole.
  const RunMetadata back = read_run_metadata(d.path);
  ASSERT_TRUE(back.status);
  EXPECT_EQ(back.job_id, nasty[2]);
  EXPECT_EQ(back.status->reason, st.reason);
  ASSERT_EQ(back.status->ranks.size(), 2u);
  EXPECT_EQ(back.status->ranks[1].role, nasty[2]);
}

// Runs deleted by a connection without foreign keys (the sqlite3 shell's default) leave their rows, and SQLite gives
// their ids to the next runs stored: those rows are forgotten, one run at a time and inside a batch (where whether an
// id can have any is looked at once, when the batch begins).
TEST(Store, RowsOfRunsDeletedWithoutForeignKeysAreNotTakenForTheNextRunsOfTheirIds) {
  test::TempDir d;
  std::vector<std::filesystem::path> runs;
  for (int i = 0; i < 6; ++i) runs.push_back(make_run(d.path, "o" + std::to_string(i), 2, 10 + i));
  const auto file = d.path / "fanout.sqlite";
  auto delete_without_foreign_keys = [&](const std::string& where) {
    sqlite3* raw = nullptr;
    ASSERT_EQ(sqlite3_open(file.c_str(), &raw), SQLITE_OK);
    ASSERT_EQ(sqlite3_exec(raw, ("PRAGMA foreign_keys=OFF; DELETE FROM runs " + where).c_str(), nullptr, nullptr, nullptr), SQLITE_OK)
        << sqlite3_errmsg(raw);
    sqlite3_close(raw);
  };
  auto samples_of = [&](const ResultsDb& db, int64_t id) { return count(db, "SELECT count(*) FROM samples WHERE run_id = " + std::to_string(id)); };
  {
    ResultsDb db(file);
    db.ingest_run(runs[0]);
    db.ingest_run(runs[1]);
  }
  delete_without_foreign_keys("WHERE id IN (1, 2)");
  {
    ResultsDb db(file);
    EXPECT_EQ(count(db, "SELECT count(*) FROM parameters WHERE run_id IN (1, 2)"), 4) << "the orphans are there";
    db.begin_batch();
    db.ingest_run(runs[2]);
    db.ingest_run(runs[3]);
    db.ingest_run(runs[4]);
    db.commit_batch();
    EXPECT_EQ(count(db, "SELECT min(id) = 1 AND max(id) = 3 FROM runs"), 1) << "ids 1 and 2 given again";
    EXPECT_EQ(count(db, "SELECT count(*) FROM runs"), 3);
    // 2 ranks of (one warmup sample + 10 + i) each: runs 2, 3 and 4 under ids 1, 2 and 3, nothing of runs 0 and 1.
    EXPECT_EQ(samples_of(db, 1), 2 * (1 + 12));
    EXPECT_EQ(samples_of(db, 2), 2 * (1 + 13));
    EXPECT_EQ(samples_of(db, 3), 2 * (1 + 14));
    EXPECT_EQ(count(db, "SELECT count(*) FROM parameters"), 6);
  }
  // One connection open throughout, the rows deleted by another between its transactions (what it looked at in
  // one transaction is not taken for the next): alone, then in batches.
  ResultsDb db(file);
  db.ingest_run(runs[5]);  // id 4, alone: looks, finds the highest rows are 3's
  delete_without_foreign_keys("WHERE id = 4");
  db.ingest_run(runs[0]);  // id 4 again, alone
  db.begin_batch();
  db.ingest_run(runs[1]);  // id 5, in a batch
  db.commit_batch();
  delete_without_foreign_keys("WHERE id = 5");
  db.begin_batch();
  db.ingest_run(runs[1]);  // id 5 again, in the next batch
  db.commit_batch();
  EXPECT_EQ(count(db, "SELECT max(id) FROM runs"), 5);
  EXPECT_EQ(samples_of(db, 4), 2 * (1 + 10));
  EXPECT_EQ(samples_of(db, 5), 2 * (1 + 11));
  EXPECT_EQ(count(db, "SELECT count(*) FROM parameters WHERE run_id IN (4, 5)"), 4);
}
