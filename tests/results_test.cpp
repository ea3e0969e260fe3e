// Results processing end to end: SmartSim-Scaling import, process_scaling_results (CSV, plots, HTML checked in
// headless Chromium), and compare on real experiments run by fanout.
#include <gtest/gtest.h>

#include <fstream>
#include <regex>

#include "common/files.h"
#include "common/text.h"
#include "results/processing.h"
#include "results/smartsim_import.h"
#include "results/store.h"
#include "tests/test_util.h"

using namespace fanout;
namespace fs = std::filesystem;

namespace {

int64_t count(const fs::path& db_file, const std::string& sql) { return std::stoll(test::sql_one(db_file, sql)); }

// A SmartSim-Scaling throughput experiment folder as its driver leaves it: two good sessions and a broken one.
fs::path make_smartsim_tree(const fs::path& root) {
  fs::path exp = root / "throughput-scaling";
  for (int nodes : {1, 2}) {
    fs::path s = exp / "run-2024-01-01-00:00:00" / ("throughput-sess-cpp-N" + std::to_string(nodes) + "-T2-DBN1-ITER3-TB1024-0");
    fs::create_directories(s);
    std::ofstream(s / "run.cfg") << "[run]\nname = throughput\nlanguage = cpp\nsmartsim_version = 0.6.0\n\n[attributes]\n"
                                 << "client_nodes = " << nodes << "\nclients_per_node = 2\ndatabase_nodes = 1\ntensor_bytes = 1024\n";
    for (int r = 0; r < 2 * nodes; ++r) {
      std::ofstream f(s / ("rank_" + std::to_string(r) + "_timing.csv"));
      f << r << ",client()," << 0.5 << "\n";  // the first line: the original driver drops it
      for (int i = 0; i < 3; ++i) f << r << ",put_tensor," << 0.001 * (nodes + i) << "\n" << r << ",unpack_tensor," << 0.002 << "\n";
      f << r << ",main()," << 1.5 << "\n";
    }
  }
  fs::path bad = exp / "run-2024-01-01-00:00:00" / "throughput-sess-cpp-N4-broken";
  fs::create_directories(bad);
  std::ofstream(bad / "run.cfg") << "[run]\nname = throughput\n[attributes]\nclient_nodes = 4\n";
  std::ofstream(bad / "rank_0_timing.csv") << "0,put_tensor,0.001\n0,put_tensor,not-a-number\n";
  return exp;
}

test::CommandResult run(const test::TempDir& d, std::vector<std::string> args) { return test::run_fanout(d.path, args); }

}  // namespace

TEST(SmartSimImport, EveryLineLandsOnceAndBrokenSessionsAreSkipped) {
  test::TempDir d;
  fs::path exp = make_smartsim_tree(d.path);
  ASSERT_TRUE(is_smartsim_tree(exp));
  ResultsDb db(exp / "fanout.sqlite");
  auto r = import_smartsim_tree(exp, db);
  EXPECT_EQ(r.runs, 2);
  ASSERT_EQ(r.skipped.size(), 1u);
  EXPECT_NE(r.skipped[0].find("rank_0_timing.csv:2: seconds is not a number"), std::string::npos) << r.skipped[0];
  // 8 lines per rank file (client(), 3 x put/unpack, main()), 2 + 4 ranks: nothing dropped.
  EXPECT_EQ(r.samples, 8u * 6u);
  fs::path file = exp / "fanout.sqlite";
  EXPECT_EQ(count(file, "SELECT count(*) FROM samples WHERE metric='client()'"), 6) << "the first line of each file is kept";
  // No leakage between sessions: each run holds exactly its own ranks' samples.
  EXPECT_EQ(count(file, "SELECT count(*) FROM samples s JOIN parameters p ON p.run_id=s.run_id AND p.name='client_nodes' "
                        "WHERE p.value='1'"), 16);
  EXPECT_EQ(count(file, "SELECT count(*) FROM samples s JOIN parameters p ON p.run_id=s.run_id AND p.name='client_nodes' "
                        "WHERE p.value='2'"), 32);
  EXPECT_EQ(count(file, "SELECT count(*) FROM runs WHERE status='COMPLETED'"), 2);
  import_smartsim_tree(exp, db);
  EXPECT_EQ(count(file, "SELECT count(*) FROM samples"), 48) << "re-import replaces";
}

TEST(ProcessScalingResults, DropInOnASmartSimFolderProducesCsvPlotsAndReport) {
  test::TempDir d;
  fs::path exp = make_smartsim_tree(d.path);
  auto r = run(d, {"process_scaling_results", "--scaling_dir=" + exp.string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("imported 2 SmartSim-Scaling run(s)"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("skipped"), std::string::npos) << "the broken session is reported";
  fs::path out = exp / "processed";
  std::string runs = read_file(out / "runs.csv");
  EXPECT_EQ(test::line_count_summary(runs), "3");  // header + 2 runs
  EXPECT_NE(runs.find("put_tensor.median"), std::string::npos);
  EXPECT_NE(runs.find("put_tensor.median_ci_low"), std::string::npos);
  EXPECT_EQ(test::line_count_summary(read_file(out / "statistics.csv")), std::to_string(1 + 2 * 4));  // 4 functions
  EXPECT_EQ(test::line_count_summary(read_file(out / "samples.csv")), "49");
  EXPECT_TRUE(fs::exists(out / "plots" / "violin_client_put_tensor.png"));
  EXPECT_TRUE(fs::exists(out / "report.html"));
  // --overwrite=false refuses to replace; the default replaces.
  auto refuse = run(d, {"process_scaling_results", "--scaling_dir=" + exp.string(), "--overwrite=false"});
  EXPECT_EQ(refuse.exit_code, 2);
  EXPECT_NE(refuse.err.find("pass --overwrite"), std::string::npos) << refuse.err;
}

TEST(ProcessScalingResults, OurExperimentWithGzipAndAReportThatRendersInChromium) {
  test::TempDir d;
  ASSERT_EQ(run(d, {"calibration_copy", "--exp_name=bw", "--copy_bytes=[4096,65536]", "--ranks_per_node=[1,2]",
                       "--iterations=30"}).exit_code, 0);
  auto r = run(d, {"process_scaling_results", "--scaling_dir=results/bw", "--gzip"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  fs::path out = d.path / "results" / "bw" / "processed";
  EXPECT_TRUE(fs::exists(out / "samples.csv.gz"));
  auto gunzip = test::run_command({"/usr/bin/gzip", "-dc", (out / "samples.csv.gz").string()}, d.path);
  // 4 runs with 1+2+1+2 = 6 ranks; each rank: 1 rendezvous + (30 + 3 warmup) x (copy, copy_bandwidth) samples.
  EXPECT_EQ(test::line_count_summary(gunzip.out), std::to_string(1 + 6 * (1 + 33 * 2)));
  EXPECT_TRUE(fs::exists(out / "plots" / "bandwidth_copy_copy_bandwidth.png")) << "bytes/s metric + size parameter";
  std::string html = read_file(out / "report.html");
  size_t images = 0;
  for (size_t p = html.find("<img class=\"plot\""); p != std::string::npos; p = html.find("<img class=\"plot\"", p + 1)) ++images;
  ASSERT_GE(images, 5u);
  fs::path chromium = "/usr/bin/chromium";
  ASSERT_TRUE(fs::exists(chromium)) << "chromium is installed by scripts/install-deps.sh test";
  auto page = test::run_command({chromium.string(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                                 "--user-data-dir=" + (d.path / "chromium").string(), "--virtual-time-budget=10000",
                                 "--dump-dom", "file://" + (out / "report.html").string()},
                                d.path, {}, 120);
  std::smatch m;
  std::regex rendered("data-plots-rendered=\"(\\d+)\"");
  ASSERT_TRUE(std::regex_search(page.out, m, rendered)) << "the page did not run its load handler\n" << page.err.substr(0, 2000);
  EXPECT_EQ(size_t(std::stoi(m[1])), images) << "every plot decoded and rendered";
  EXPECT_NE(page.out.find("<table class=\"stats\">"), std::string::npos);
}

TEST(Compare, FlagsAPlantedRegressionAndNotNoise) {
  test::TempDir d;
  for (auto [name, us] : {std::pair{"base", "2000"}, {"again", "2000"}, {"slower", "2200"}})
    ASSERT_EQ(run(d, {"calibration_sleep", std::string("--exp_name=") + name, std::string("--sleep_us=") + us, "--iterations=60"}).exit_code, 0);
  auto noise = run(d, {"results", "compare", "results/base", "results/again"});
  EXPECT_EQ(noise.exit_code, 0) << noise.out;
  EXPECT_NE(noise.out.find("0 regression(s)"), std::string::npos) << noise.out;
  auto planted = run(d, {"results", "compare", "results/base", "results/slower", "--ignore=sleep_us", "--metric=sleep"});
  EXPECT_EQ(planted.exit_code, 1) << planted.out;
  EXPECT_NE(planted.out.find("regression"), std::string::npos) << planted.out;
  EXPECT_NE(planted.out.find("+10.0"), std::string::npos) << planted.out;  // 2000 -> 2200 us
  auto reverse = run(d, {"results", "compare", "results/slower", "results/base", "--ignore=sleep_us", "--metric=sleep"});
  EXPECT_EQ(reverse.exit_code, 0) << reverse.out;
  EXPECT_NE(reverse.out.find("improvement"), std::string::npos) << reverse.out;
}
