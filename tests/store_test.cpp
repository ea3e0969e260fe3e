#include <gtest/gtest.h>

#include <sqlite3.h>

#include <thread>

#include "common/files.h"
#include "results/csv_export.h"
#include "results/run_folder.h"
#include "results/sample_file.h"
#include "results/store.h"
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
std::filesystem::path make_run(const std::filesystem::path& root, const std::string& session, int ranks, int samples_per_rank) {
  auto dir = root / session;
  std::filesystem::create_directories(samples_dir(dir));
  RunMetadata m;
  m.session = session;
  m.experiment = "exp";
  m.subcommand = "calibration_sleep";
  m.plugin = "calibration";
  m.param_hash = "h-" + session;
  m.parameters = {{"sleep_us", "100"}, {"ranks", std::to_string(ranks)}};
  m.steps = {{"sleep", 1, ranks, "disjoint"}};
  m.status = RunStatusRecord{"COMPLETED", "local-1", "host", "", 0, 0, 1, 2, {{"sleep", 0, 0, 0}}};
  write_run_metadata(dir, m);
  for (int r = 0; r < ranks; ++r) {
    SampleWriter w(samples_dir(dir) / ("sleep." + std::to_string(r) + ".samples"), r, "sleep", "node" + std::to_string(r), 0, 0);
    w.record("sleep", "us", -1, 0, 999, true);
    for (int i = 0; i < samples_per_rank; ++i) w.record("sleep", "us", i, i, 100 + i, false);
  }
  return dir;
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
  EXPECT_EQ(count(db, "SELECT count(*) FROM sample_values WHERE run_id NOT IN (SELECT id FROM runs)"), 0);
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
  EXPECT_ANY_THROW(db.ingest_run(d.path / "empty"));
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
            "session,status,sleep_us,ranks,role,metric,unit,metric_ranks,count,min,mean,median,median_ci_low,median_ci_high,p90,p95,p99,max,std,mad,outliers");
  EXPECT_NE(stats.find("a,COMPLETED,100,1,sleep,sleep,us,1,5,100,102,102,"), std::string::npos) << stats;  // warmup 999 excluded
  EXPECT_EQ(test::line_count_summary(read_file(files.samples)), "19");
  for (auto& e : std::filesystem::directory_iterator(d.path / "csv"))  // no staging file left behind
    EXPECT_EQ(e.path().filename().string().find(".tmp"), std::string::npos) << e.path();
}

TEST(Store, CsvQuotesFields) {
  EXPECT_EQ(csv_field("plain"), "plain");
  EXPECT_EQ(csv_field("a,b"), "\"a,b\"");
  EXPECT_EQ(csv_field("say \"hi\""), "\"say \"\"hi\"\"\"");
}
