// Results processing end to end: SmartSim-Scaling import, process_scaling_results (CSV, plots, HTML checked in
// headless Chromium), and compare on real experiments run by fanout.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <fstream>
#include <tuple>
#include <regex>
#include <sstream>

#include "common/files.h"
#include "common/text.h"
#include "results/display_unit.h"
#include "results/plots.h"
#include "results/processing.h"
#include "results/smartsim_export.h"
#include "results/smartsim_import.h"
#include "results/store.h"
#include "tests/test_util.h"

using namespace fanout;
namespace fs = std::filesystem;

namespace {

// A plot is a real PNG of the size results/plots.cpp asks gnuplot for (pngcairo 1200x700), not just a file.
void expect_png(const fs::path& file) {
  const std::string png = read_file(file);
  ASSERT_GE(png.size(), 24u) << file;
  EXPECT_EQ(png.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8)) << file;
  EXPECT_EQ(png.substr(12, 4), "IHDR") << file;
  auto be32 = [&](size_t at) {
    return uint32_t(uint8_t(png[at])) << 24 | uint32_t(uint8_t(png[at + 1])) << 16 | uint32_t(uint8_t(png[at + 2])) << 8 | uint8_t(png[at + 3]);
  };
  EXPECT_EQ(be32(16), 1200u) << file;
  EXPECT_EQ(be32(20), 700u) << file;
}

int64_t count(const fs::path& db_file, const std::string& sql) { return std::stoll(test::sql_one(db_file, sql)); }

// SmartSim-Scaling's utils.write_run_config, as Python's configparser writes it: [run] then [attributes]
// ("key = value", str() of each value, a blank line after every section), `language` in both sections.
void write_run_config(const fs::path& dir, const std::string& path, const std::vector<std::pair<std::string, std::string>>& attributes,
                      const std::string& language) {
  std::ofstream f(dir / "run.cfg");
  f << "[run]\nname = " << fs::path(path).filename().string() << "\npath = " << path
    << "\nsmartsim_version = 0.5.1\nsmartredis_version = 0.3.1\ndb = redis-server\ndate = 2023-07-17\nlanguage = " << language << "\n\n";
  f << "[attributes]\n";
  for (auto& [k, v] : attributes) f << k << " = " << v << "\n";
  f << "\n";
}

// cpp-throughput/throughput_scaling.cpp's rank file: `timing_file << rank << "," << name << "," << seconds`, default
// ostream formatting (6 significant digits, 2.38419e-06 below 1e-4), client(), put/unpack x iterations, loop_time, main().
void write_cpp_throughput_rank(const fs::path& session, int rank, int iterations, double put_s) {
  std::ofstream f(session / ("rank_" + std::to_string(rank) + "_timing.csv"));
  f << rank << "," << "client()" << "," << 0.5 << "\n";
  for (int i = 0; i < iterations; i++) {
    f << rank << "," << "put_tensor" << "," << put_s * (1 + i) << "\n";
    f << rank << "," << "unpack_tensor" << "," << 2.38419e-06 << "\n";
  }
  f << rank << "," << "loop_time" << "," << 1.25 << "\n";
  f << rank << "," << "main()" << "," << 1.5 << std::endl << std::flush;
}

// A SmartSim-Scaling results folder as its driver leaves it: results/<exp>/run-<date>-<time>/ with the run-level
// run.cfg (lists as Python reprs), database/, the log, and sessions with their .out/.err, run.cfg and one timing
// file per rank; plus one broken session (a truncated rank file).
fs::path make_smartsim_tree(const fs::path& root) {
  fs::path exp = root / "results" / "throughput-standard-scaling";
  const std::string run_name = "run-2023-07-17-13:21:17";
  fs::path run = exp / run_name;
  fs::create_directories(run / "database");
  std::ofstream(run / "database" / "orchestrator.out") << "";
  std::ofstream(run / "scaling-2023-07-17.log") << "";
  write_run_config(run, "results/throughput-standard-scaling/" + run_name,
                   {{"colocated", "0"}, {"client_per_node", "[2]"}, {"client_nodes", "[1, 2]"}, {"database_nodes", "[1]"},
                    {"database_cpus", "[2]"}, {"iterations", "3"}, {"tensor_bytes", "[1024]"}, {"language", "['cpp']"}, {"wall_time", "05:00:00"}},
                   "['cpp']");
  for (int nodes : {1, 2}) {
    const std::string name = "throughput-sess-cpp-N" + std::to_string(nodes) + "-T2-DBN1-DBCPU2-ITER3-TB1024-3f2" + std::to_string(nodes);
    fs::path s = run / name;
    fs::create_directories(s);
    std::ofstream(s / (name + ".out")) << "";
    std::ofstream(s / (name + ".err")) << "";
    write_run_config(s, fs::absolute(s).string(),
                     {{"colocated", "0"}, {"client_total", std::to_string(2 * nodes)}, {"client_per_node", "2"}, {"client_nodes", std::to_string(nodes)},
                      {"database_nodes", "1"}, {"database_cpus", "2"}, {"iterations", "3"}, {"tensor_bytes", "1024"}, {"language", "cpp"}},
                     "cpp");
    for (int r = 0; r < 2 * nodes; ++r) write_cpp_throughput_rank(s, r, 3, 0.001 * nodes);
  }
  fs::path bad = run / "throughput-sess-cpp-N4-T2-DBN1-DBCPU2-ITER3-TB1024-dead";
  fs::create_directories(bad);
  write_run_config(bad, fs::absolute(bad).string(), {{"colocated", "0"}, {"client_nodes", "4"}, {"language", "cpp"}}, "cpp");
  std::ofstream(bad / "rank_0_timing.csv") << "0,client(),0.5\n0,put_tensor,0.001\n0,put_ten";  // a rank that died mid-write
  return exp;
}

test::CommandResult run(const test::TempDir& d, std::vector<std::string> args) { return test::run_fanout(d.path, args); }

}  // namespace

// Issue 41 item 19: rank 4294967296 was stored as rank 0, and a huge rank in a file name failed the whole import
// with a bare "stoi". Both now skip their session with a reason naming the file; the rest is imported.
TEST(SmartSimImport, RanksOutOfRangeSkipTheirSessionNamingTheFile) {
  test::TempDir d;
  fs::path exp = make_smartsim_tree(d.path);
  fs::path run = exp / "run-2023-07-17-13:21:17";
  for (auto [name, file, line] : {std::tuple{"throughput-sess-cpp-N8-bigname", "rank_4294967296_timing.csv", "0,put_tensor,0.1\n"},
                                  {"throughput-sess-cpp-N8-bigvalue", "rank_0_timing.csv", "4294967296,put_tensor,0.1\n"}}) {
    fs::create_directories(run / name);
    write_run_config(run / name, fs::absolute(run / name).string(), {{"colocated", "0"}, {"client_nodes", "8"}, {"language", "cpp"}}, "cpp");
    std::ofstream(run / name / file) << line;
  }
  ResultsDb db(exp / "fanout.sqlite");
  auto r = import_smartsim_tree(exp, db);
  EXPECT_EQ(r.runs, 2);
  ASSERT_EQ(r.skipped.size(), 3u);
  std::string all;
  for (auto& s : r.skipped) all += s + "\n";
  EXPECT_NE(all.find("rank_4294967296_timing.csv: rank 4294967296 in the file name is outside 0..10000000"), std::string::npos) << all;
  EXPECT_NE(all.find("-bigvalue/rank_0_timing.csv:1: rank is outside 0..10000000"), std::string::npos) << all;
}

TEST(SmartSimImport, EveryLineLandsOnceAndBrokenSessionsAreSkipped) {
  test::TempDir d;
  fs::path exp = make_smartsim_tree(d.path);
  ASSERT_TRUE(is_smartsim_tree(exp));
  ResultsDb db(exp / "fanout.sqlite");
  auto r = import_smartsim_tree(exp, db);
  EXPECT_EQ(r.runs, 2) << "the run-level run.cfg is not a session";
  ASSERT_EQ(r.skipped.size(), 1u);
  EXPECT_NE(r.skipped[0].find("-dead/rank_0_timing.csv:3: expected rank,function,seconds in '0,put_ten'"), std::string::npos) << r.skipped[0];
  // 9 lines per rank file (client(), 3 x put/unpack, loop_time, main()), 2 + 4 ranks: nothing dropped.
  EXPECT_EQ(r.samples, 9u * 6u);
  fs::path file = exp / "fanout.sqlite";
  EXPECT_EQ(count(file, "SELECT count(*) FROM samples WHERE metric='client()'"), 6) << "the first line of each file is kept";
  // Numbers as the C++ client prints them (%g): 2.38419e-06 read back exactly.
  EXPECT_EQ(count(file, "SELECT count(*) FROM samples WHERE metric='unpack_tensor' AND value=2.38419e-06"), 18);
  // No leakage between sessions: each run holds exactly its own ranks' samples.
  EXPECT_EQ(count(file, "SELECT count(*) FROM samples s JOIN parameters p ON p.run_id=s.run_id AND p.name='client_nodes' "
                        "WHERE p.value='1'"), 18);
  EXPECT_EQ(count(file, "SELECT count(*) FROM samples s JOIN parameters p ON p.run_id=s.run_id AND p.name='client_nodes' "
                        "WHERE p.value='2'"), 36);
  // `language` is in both sections of every run.cfg: one parameter, the [run] copy in provenance.
  EXPECT_EQ(count(file, "SELECT count(*) FROM parameters WHERE name='language' AND value='cpp'"), 2);
  EXPECT_EQ(count(file, "SELECT count(*) FROM runs WHERE status='COMPLETED'"), 2);
  import_smartsim_tree(exp, db);
  EXPECT_EQ(count(file, "SELECT count(*) FROM samples"), 54) << "re-import replaces";
}

// A folder with timing files is a session even when its run.cfg's [run] name begins with "run-" like the run
// folder's own config (found by the long fuzz run: such a session was neither imported nor reported).
TEST(SmartSimImport, ASessionWhoseConfigLooksLikeTheRunFoldersIsStillASession) {
  test::TempDir d;
  fs::path exp = d.path / "results" / "odd";
  fs::path session = exp / "run-2023-07-17-13:21:17" / "throughput-sess-cpp-N1-T1-DBN1-DBCPU2-ITER1-TB1024-0001";
  fs::create_directories(session);
  write_run_config(session, "run-2023-07-17-13:21:17", {{"client_nodes", "1"}, {"language", "cpp"}}, "cpp");
  write_cpp_throughput_rank(session, 0, 1, 0.001);
  ResultsDb db(exp / "fanout.sqlite");
  auto r = import_smartsim_tree(exp, db);
  EXPECT_EQ(r.runs, 1) << (r.skipped.empty() ? "" : r.skipped.front());
  EXPECT_EQ(r.samples, 5u);  // client(), put, unpack, loop_time, main()
}

// The aggregation experiment's tree: producer sessions write no timing file, the consumer (one task) writes
// rank_0_timing.csv; a Fortran inference session writes its loop lines with E25.16 (leading blanks).
TEST(SmartSimImport, AggregationAndFortranSessionsAsTheirClientsWriteThem) {
  test::TempDir d;
  fs::path run = d.path / "results" / "aggregation-standard-scaling" / "run-2023-07-17-13:21:17";
  const std::string prod = "aggregate-sess-prod-cpp-N1-T2-DBN1-ITER2-TB1024-TPD4-a7b0";
  const std::string cons = "aggregate-sess-cons-cpp-N1-T2-DBN1-ITER2-TB1024-TPD4-CT2-9c1d";
  const std::vector<std::pair<std::string, std::string>> attrs = {
      {"client_total", "2"}, {"client_per_node", "2"}, {"client_nodes", "1"}, {"database_nodes", "1"}, {"database_cpus", "36"},
      {"iterations", "2"}, {"tensor_bytes", "1024"}, {"t_per_dataset", "4"}};
  for (const auto& name : {prod, cons}) fs::create_directories(run / name);
  auto with = [&](std::vector<std::pair<std::string, std::string>> a, bool consumer) {
    if (consumer) a.emplace_back("client_threads", "2");
    a.emplace_back("language", "cpp");
    return a;
  };
  write_run_config(run / prod, fs::absolute(run / prod).string(), with(attrs, false), "cpp");
  write_run_config(run / cons, fs::absolute(run / cons).string(), with(attrs, true), "cpp");
  std::ofstream(run / cons / "rank_0_timing.csv") << "0,client(),0.25\n0,get_list,0.0123457\n0,poll_list,0.5\n0,get_list,0.0125\n"
                                                   << "0,poll_list,0.25\n0,loop_time,1.5\n0,main(),2\n";
  const std::string fort = "infer-sess-fortran-N1-T1-DBN1-DBCPU8-ITER100-DBTPQ8-f8a6";
  fs::create_directories(run / fort);
  write_run_config(run / fort, fs::absolute(run / fort).string(), {{"colocated", "0"}, {"client_nodes", "1"}, {"language", "fortran"}}, "fortran");
  std::ofstream(run / fort / "rank_0_timing.csv") << "0,client(),0.0000000000000000\n0,put_tensor,   0.1234567890000000E-01\n"
                                                   << "0,run_model,   0.1500000000000000E+01\n0,main(),12.500000000000000\n";
  fs::path exp = d.path / "results" / "aggregation-standard-scaling";
  ResultsDb db(exp / "fanout.sqlite");
  auto r = import_smartsim_tree(exp, db);
  EXPECT_TRUE(r.skipped.empty()) << r.skipped[0];
  EXPECT_EQ(r.runs, 2);
  EXPECT_EQ(r.producers, 1) << "the producer holds no timings by design";
  fs::path file = exp / "fanout.sqlite";
  EXPECT_EQ(count(file, "SELECT count(*) FROM samples WHERE metric='get_list'"), 2);
  EXPECT_EQ(test::sql_one(file, "SELECT value FROM samples WHERE metric='run_model'"), "1.5");
  EXPECT_EQ(test::sql_one(file, "SELECT value FROM parameters p JOIN runs r ON r.id=p.run_id WHERE p.name='client_threads'"), "2");
}

TEST(ProcessScalingResults, DropInOnASmartSimFolderProducesCsvPlotsAndReport) {
  test::TempDir d;
  fs::path exp = make_smartsim_tree(d.path);
  auto r = run(d, {"process_scaling_results", "--scaling_dir=" + exp.string()});
  EXPECT_EQ(r.exit_code, 1) << "a session that could not be read is an error: " << r.err;
  EXPECT_NE(r.out.find("imported 2 SmartSim-Scaling run(s)"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("fanout: error: session not imported: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("rank_0_timing.csv:3:"), std::string::npos) << "names the file and line: " << r.err;
  fs::path out = exp / "processed", csv = exp / "csv";  // plots + report; the CSVs once, in csv/
  std::string runs = read_file(csv / "runs.csv");
  EXPECT_EQ(test::line_count_summary(runs), "3");  // header + 2 runs
  EXPECT_NE(runs.find("put_tensor.median"), std::string::npos);
  EXPECT_NE(runs.find("put_tensor.median_ci_low"), std::string::npos);
  EXPECT_EQ(test::line_count_summary(read_file(csv / "statistics.csv")), std::to_string(1 + 2 * 5));  // 5 functions
  EXPECT_EQ(test::line_count_summary(read_file(csv / "samples.csv")), "55");
  for (const char* copy : {"runs.csv", "statistics.csv", "samples.csv"}) EXPECT_FALSE(fs::exists(out / copy)) << "no second copy: " << copy;
  EXPECT_NE(r.out.find((csv / "runs.csv").string()), std::string::npos) << "the command names where the CSVs are: " << r.out;
  expect_png(out / "plots" / "violin_client_put_tensor.png");
  const std::string report = read_file(out / "report.html");
  EXPECT_NE(report.find("<table class=\"stats\">"), std::string::npos);
  EXPECT_NE(report.find("<img class=\"plot\" alt=\""), std::string::npos) << "the report embeds the plots";
  EXPECT_NE(report.find("src=\"data:image/png;base64,iVBORw0KGgo"), std::string::npos) << "as PNG data";
  // --overwrite=false refuses to replace; the default replaces.
  auto refuse = run(d, {"process_scaling_results", "--scaling_dir=" + exp.string(), "--overwrite=false"});
  EXPECT_EQ(refuse.exit_code, 2);
  EXPECT_NE(refuse.err.find("pass --overwrite"), std::string::npos) << refuse.err;
  // A tree of which nothing can be read stores nothing and says so: exit 2, not 0.
  fs::path empty = d.path / "results" / "broken-only" / "run-2023-07-17-13:21:17" / "throughput-sess-cpp-N1-T1-DBN1-DBCPU2-ITER3-TB1024-beef";
  fs::create_directories(empty);
  std::ofstream(empty / "run.cfg") << "[run]\nname = x\n\n[attributes]\nlanguage = cpp\nlanguage = cpp\n\n";
  auto none = run(d, {"process_scaling_results", "--scaling_dir=" + (d.path / "results" / "broken-only").string()});
  EXPECT_EQ(none.exit_code, 2) << none.err;
  EXPECT_NE(none.err.find("run.cfg:6: 'language' twice in [attributes]"), std::string::npos) << none.err;
}

TEST(ProcessScalingResults, OurExperimentWithGzipAndAReportThatRendersInChromium) {
  test::TempDir d;
  ASSERT_EQ(run(d, {"calibration_copy", "--exp_name=bw", "--copy_bytes=[4096,65536]", "--ranks_per_node=[1,2]",
                       "--iterations=30"}).exit_code, 0);
  auto r = run(d, {"process_scaling_results", "--scaling_dir=results/bw", "--gzip"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  fs::path out = d.path / "results" / "bw" / "processed";
  EXPECT_TRUE(fs::exists(d.path / "results" / "bw" / "csv" / "samples.csv.gz"));
  auto gunzip = test::run_command({"/usr/bin/gzip", "-dc", (d.path / "results" / "bw" / "csv" / "samples.csv.gz").string()}, d.path);
  // 4 runs with 1+2+1+2 = 6 ranks; each rank: 1 rendezvous + (30 + 3 warmup) x (copy, copy_bandwidth) samples.
  // ... and the 8 resource.* figures of what it cost.
  EXPECT_EQ(test::line_count_summary(gunzip.out), std::to_string(1 + 6 * (1 + 33 * 2 + 8)));
  expect_png(out / "plots" / "bandwidth_copy_copy_bandwidth.png");  // a bytes/s metric over a size parameter
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
  // Issues 21 and 51: the page leads with what the study is for, the figure against what was swept (then the aggregate
  // bandwidth against the clients), after a table of contents; setup costs (declared by the plugin) come last.
  std::regex first("data-first-plot=\"([^\"]*)\"");
  ASSERT_TRUE(std::regex_search(page.out, m, first)) << page.out.substr(0, 2000);
  EXPECT_EQ(m[1].str().rfind("median copy (copy) by ", 0), 0u) << m[1].str();
  EXPECT_NE(page.out.find("alt=\"aggregate bandwidth from copy (copy): ranks x copy_bytes / median\""), std::string::npos);
  const auto toc = page.out.find("<nav id=\"toc\">"), headline = page.out.find("<h2 id=\"headline\">What was swept</h2>"),
             distributions = page.out.find("<h2 id=\"distributions\">"), bookkeeping = page.out.find("<h2 id=\"bookkeeping\">");
  ASSERT_NE(toc, std::string::npos);
  ASSERT_NE(headline, std::string::npos);
  ASSERT_NE(distributions, std::string::npos);
  ASSERT_NE(bookkeeping, std::string::npos);
  EXPECT_LT(toc, headline);
  EXPECT_LT(page.out.find("<h2 id=\"medians\">Medians</h2>"), toc) << "the first screen has the numbers";
  EXPECT_LT(headline, distributions);
  EXPECT_LT(distributions, bookkeeping);
  EXPECT_EQ(page.out.find("rendezvous (copy): distribution by ranks"), std::string::npos) << "a setup cost is a table, not a violin";
  EXPECT_GT(page.out.find("<td class=\"l\">rendezvous (copy)</td>"), bookkeeping) << "setup costs come last, as a table";
  // Human units: copies of 4 KiB and 64 KiB take well under a millisecond; the table and the axes say so.
  EXPECT_EQ(page.out.find(">copy <small>(copy, s)</small>"), std::string::npos) << "not in seconds";
  EXPECT_TRUE(page.out.find(">copy <small>(copy, ns)</small>") != std::string::npos || page.out.find(">copy <small>(copy, us)</small>") != std::string::npos);
  // Issue 54: what the runs cost, in a section of its own after the headline, before the distributions.
  const auto resources = page.out.find("<h2 id=\"resources\">Resources</h2>");
  ASSERT_NE(resources, std::string::npos);
  EXPECT_LT(headline, resources);
  EXPECT_LT(resources, distributions);
  EXPECT_NE(page.out.find("alt=\"median resource.peak_rss (copy) by copy_bytes\"", resources), std::string::npos);
  EXPECT_EQ(page.out.find("resource.peak_rss (copy): distribution"), std::string::npos) << "no per-run violins of what a run cost";
  // Memory copies run at GB/s here, hundreds of MB/s on a slow or loaded machine: a bandwidth unit either way, never
  // B/s (a unit error) nor the raw bytes/s.
  const std::string agg = read_file(out / "plots" / "aggregate_bandwidth_copy_copy.gp");
  EXPECT_TRUE(agg.find("[GB/s]") != std::string::npos || agg.find("[MB/s]") != std::string::npos) << agg;
  // Legends name parameter values, never session names with their hashes.
  const std::string hist = read_file(out / "plots" / "hist_copy_copy.gp");
  EXPECT_NE(hist.find("title \"ranks_per_node=1, copy_bytes=4096\""), std::string::npos) << hist;
  EXPECT_EQ(hist.find("-sess-"), std::string::npos) << hist;
}

// run.cfg read by configparser's own rules (what SmartSim-Scaling's readers get): continuation lines indented
// deeper than their key, comment lines inside a value skipped, an empty line inside a value kept, trailing white
// space dropped. Python's configparser reads the same file, and every attribute must agree.
TEST(SmartSimImport, RunCfgIsReadAsConfigparserReadsIt) {
  test::TempDir d;
  fs::path exp = d.path / "results" / "cfg";
  fs::path s = exp / "run-2023-07-17-13:21:17" / "throughput-sess-cpp-N1-T1-x";
  fs::create_directories(s);
  std::ofstream(s / "run.cfg") << "[run]\nname = throughput-sess-cpp-N1-T1-x\nlanguage = cpp\n\n[attributes]\n"
                                  "a = 1\n  continued\n# a comment\nb = x\n\t# a comment inside the value\n\ty\n"
                                  "c = z\n\n  after a blank line\nd = last   \ne = \n\n";
  write_cpp_throughput_rank(s, 0, 1, 0.001);
  ResultsDb db(exp / "fanout.sqlite");
  auto r = import_smartsim_tree(exp, db);
  ASSERT_EQ(r.runs, 1) << (r.skipped.empty() ? "" : r.skipped[0]);
  auto py = test::run_command({"/usr/bin/python3", "-c",
                               "import configparser,sys,json\nc=configparser.ConfigParser()\nc.read(sys.argv[1])\n"
                               "print(json.dumps(dict(c['attributes'])))",
                               (s / "run.cfg").string()}, d.path, {}, 30);
  ASSERT_EQ(py.exit_code, 0) << py.err;
  const auto expect = nlohmann::json::parse(py.out);
  ASSERT_EQ(expect.size(), 5u) << py.out;
  for (auto& [k, v] : expect.items())
    EXPECT_EQ(test::sql_one(exp / "fanout.sqlite", "SELECT value FROM parameters WHERE name='" + k + "'"), v.get<std::string>()) << k;
}

// Issue 41 item 12: a newline in a value forged an attribute in the exported run.cfg (configparser and our importer
// read "forged" as a key). Values are now written as configparser's own write() writes them (a line break continues
// on a tab-indented line): Python's configparser, SmartSim-Scaling's reader, reads the value back whole, and so does
// our importer.
TEST(SmartSimExport, ANewlineInAValueCannotForgeAnAttribute) {
  test::TempDir d;
  std::ofstream(d.path / "figures.txt") << "put_tensor 0 0.001 s\nput_tensor 1 0.002 s\n";
  const std::string value = "a\nforged = 1\r\n[run]\n\nz";
  ASSERT_EQ(run(d, {"results", "record", "results/nl", "--run=r1", "--file=" + (d.path / "figures.txt").string(), "--param=note=" + value}).exit_code, 0);
  auto r = run(d, {"results", "export-smartsim", "results/nl", "--out=" + (d.path / "tree").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  fs::path cfg;
  for (auto& e : fs::recursive_directory_iterator(d.path / "tree"))
    if (e.path().filename() == "run.cfg" && fs::exists(e.path().parent_path() / "rank_0_timing.csv")) cfg = e.path();
  ASSERT_FALSE(cfg.empty());
  const std::string expect = "a\nforged = 1\n[run]\n\nz";  // CRLF is one break, as configparser's reader takes it
  auto py = test::run_command({"/usr/bin/python3", "-c",
                               "import configparser,sys\nc=configparser.ConfigParser()\nc.read(sys.argv[1])\n"
                               "sys.stdout.write(repr(sorted(c['attributes'].keys()))+'|'+c['attributes']['note'])",
                               cfg.string()}, d.path, {}, 30);
  ASSERT_EQ(py.exit_code, 0) << py.err;
  EXPECT_EQ(py.out.substr(py.out.find('|') + 1), expect) << py.out;
  EXPECT_EQ(py.out.find("'forged'"), std::string::npos) << py.out;
  ResultsDb db(d.path / "tree" / "fanout.sqlite");
  auto imported = import_smartsim_tree(d.path / "tree", db);
  ASSERT_EQ(imported.runs, 1) << (imported.skipped.empty() ? "" : imported.skipped[0]);
  EXPECT_EQ(test::sql_one(d.path / "tree" / "fanout.sqlite", "SELECT value FROM parameters WHERE name='note'"), expect);
  EXPECT_EQ(test::sql_one(d.path / "tree" / "fanout.sqlite", "SELECT count(*) FROM parameters WHERE name='forged'"), "0");
}

// Issue 21 item 10: fanout runs in SmartSim-Scaling's own layout, written as its utils.write_run_config and C++
// clients write them; our own importer (which reads real SmartSim-Scaling trees) reads the export back whole.
TEST(SmartSimExport, WritesTheirLayoutAndRoundTripsThroughTheImporter) {
  test::TempDir d;
  ASSERT_EQ(run(d, {"calibration_sleep", "--exp_name=ex", "--ranks_per_node=[1,2]", "--iterations=5", "--warmup=1", "--sleep_us=1000"}).exit_code, 0);
  auto r = run(d, {"results", "export-smartsim", "results/ex", "--out=" + (d.path / "tree").string()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // Left out: the 3 ranks' warmup and their 8 resource.* figures each (no operation's timing).
  EXPECT_NE(r.out.find(": 2 session(s), 18 timing line(s); 27 sample(s) left out"), std::string::npos) << r.out;
  fs::path run_dir;
  for (auto& e : fs::directory_iterator(d.path / "tree")) run_dir = e.path();
  ASSERT_TRUE(std::regex_match(run_dir.filename().string(), std::regex(R"(run-\d{4}-\d\d-\d\d-\d\d:\d\d:\d\d)"))) << run_dir;
  const std::string sweep = read_file(run_dir / "run.cfg");
  EXPECT_NE(sweep.find("\n\n[attributes]\n"), std::string::npos) << sweep;
  EXPECT_NE(sweep.find("\nranks_per_node = [1, 2]\n"), std::string::npos) << "a varied parameter as Python's list repr: " << sweep;
  size_t sessions = 0;
  const std::regex line(R"((\d+),(rendezvous|sleep),([0-9.e+-]+))");
  for (auto& e : fs::directory_iterator(run_dir)) {
    if (!e.is_directory()) continue;
    ++sessions;
    const std::string session = e.path().filename().string(), cfg = read_file(e.path() / "run.cfg");
    EXPECT_EQ(cfg.rfind("[run]\nname = " + session + "\npath = ", 0), 0u) << cfg;
    EXPECT_NE(cfg.find("\nlanguage = cpp\n\n[attributes]\n"), std::string::npos) << cfg;
    EXPECT_EQ(cfg.substr(cfg.size() - 2), "\n\n") << "a blank line after each section, as configparser writes";
    const int ranks = cfg.find("\nranks_per_node = 2\n") != std::string::npos ? 2 : 1;
    for (int rank = 0; rank < ranks; ++rank) {
      std::istringstream in(read_file(e.path() / ("rank_" + std::to_string(rank) + "_timing.csv")));
      std::vector<std::string> lines;
      for (std::string l; std::getline(in, l);) lines.push_back(l);
      ASSERT_EQ(lines.size(), 6u) << "rendezvous + 5 iterations, warmup left out";
      std::smatch m;
      for (auto& l : lines) {
        ASSERT_TRUE(std::regex_match(l, m, line)) << l;
        EXPECT_EQ(m[1].str(), std::to_string(rank));
        // Seconds, formatted as the C++ clients' ostream does (6 significant digits): 1000 us sleeps read ~0.001.
        std::ostringstream again;
        again << std::stod(m[3].str());
        EXPECT_EQ(again.str(), m[3].str()) << l;
        if (m[2] == "sleep") {
          EXPECT_TRUE(std::stod(m[3].str()) >= 0.001 && std::stod(m[3].str()) < 1.0) << l;
        }
      }
      EXPECT_EQ(lines.front().find(std::to_string(rank) + ",rendezvous,"), 0u) << "lines in the order their timers stopped";
    }
  }
  EXPECT_EQ(sessions, 2u);
  // Read back by the importer that reads real SmartSim-Scaling trees: every line lands.
  ResultsDb db(d.path / "back.sqlite");
  auto back = import_smartsim_tree(d.path / "tree", db);
  EXPECT_EQ(back.runs, 2);
  EXPECT_EQ(back.samples, 18u);
  EXPECT_TRUE(back.skipped.empty()) << back.skipped.front();
  // An existing folder is never overwritten.
  auto again = run(d, {"results", "export-smartsim", "results/ex", "--out=" + (d.path / "tree").string()});
  EXPECT_EQ(again.exit_code, 2);
  EXPECT_NE(again.err.find("exists"), std::string::npos) << again.err;
}

// A rank file that cannot be read (here a folder in its place) skips its session, named, as a malformed one does;
// the other sessions are imported.
TEST(SmartSimImport, AnUnreadableRankFileSkipsItsSessionNamingIt) {
  test::TempDir d;
  fs::path exp = make_smartsim_tree(d.path);
  fs::path session;
  for (auto& e : fs::recursive_directory_iterator(exp))
    if (e.is_directory() && e.path().filename().string().find("-N2-") != std::string::npos) session = e.path();
  ASSERT_FALSE(session.empty());
  fs::create_directories(session / "rank_9_timing.csv");
  ResultsDb db(exp / "fanout.sqlite");
  auto r = import_smartsim_tree(exp, db);
  EXPECT_EQ(r.runs, 1);
  ASSERT_EQ(r.skipped.size(), 2u);
  const std::string all = r.skipped[0] + "\n" + r.skipped[1];
  EXPECT_NE(all.find("rank_9_timing.csv: not a regular file"), std::string::npos) << all;
}

// A SmartSim-Scaling tree imported, exported and imported again: its runs carry SmartSim-Scaling's own `language`
// parameter, which the export must write once in [attributes] (the importer refuses a key twice, as configparser).
TEST(SmartSimExport, AnImportedTreeExportsAndImportsAgain) {
  test::TempDir d;
  ResultsDb db(d.path / "first.sqlite");
  ASSERT_EQ(import_smartsim_tree(make_smartsim_tree(d.path), db).runs, 2);
  export_smartsim_layout(db, d.path / "tree");
  ResultsDb again(d.path / "second.sqlite");
  auto back = import_smartsim_tree(d.path / "tree", again);
  EXPECT_TRUE(back.skipped.empty()) << back.skipped.front();
  EXPECT_EQ(back.runs, 2);
  EXPECT_EQ(count(d.path / "second.sqlite", "SELECT count(*) FROM parameters WHERE name='language' AND value='cpp'"), 2);
}

// Scripts share gnuplot sessions (a share per CPU); one that fails stops its session, so its share is drawn again
// a script at a time: only the bad one is reported, by name, and every other PNG is drawn, those after it too. A
// script that sets something (a log scale here) does not reach the next one: each starts with reset.
TEST(Plots, AFailingScriptIsNamedAndTheOthersInItsSessionAreStillDrawn) {
  test::TempDir d;
  std::vector<fs::path> scripts;
  for (int i = 0; i < 6; ++i) {
    scripts.push_back(d.path / ("p" + std::to_string(i) + ".gp"));
    std::ofstream f(scripts.back());
    f << "reset\nset terminal pngcairo size 1200,700\nset output '" << (d.path / ("p" + std::to_string(i) + ".png")).string() << "'\n";
    if (i == 1) f << "plot x with nonsense\n";
    else if (i == 3) f << "set logscale y\nplot [0:1] x + 1\n";
    else if (i == 4) f << "plot [-1:0] x\n";  // no point could be drawn on the log scale p3 set, had it stayed
    else f << "plot sin(x)\n";
  }
  const auto failed = run_gnuplot_scripts(scripts);
  ASSERT_EQ(failed.size(), scripts.size());
  for (size_t i = 0; i < scripts.size(); ++i) {
    if (i == 1) {
      EXPECT_NE(failed[i].find("p1.gp"), std::string::npos) << failed[i];
      continue;
    }
    EXPECT_EQ(failed[i], "") << scripts[i];
    expect_png(fs::path(scripts[i]).replace_extension(".png"));
  }
}

TEST(DisplayUnit, TypicalValuesAreShownBetweenOneAndAThousand) {
  auto is = [](const std::string& unit, double v, const std::string& label, double factor) {
    const auto d = fanout::display_unit(unit, v);
    EXPECT_EQ(d.label, label) << unit << " " << v;
    EXPECT_DOUBLE_EQ(d.factor, factor) << unit << " " << v;
  };
  is("s", 2.5e-6, "us", 1e6);
  is("s", 0.004, "ms", 1e3);
  is("s", 3.0, "s", 1.0);
  is("us", 20000, "ms", 1e-3);
  is("us", 0.5, "ns", 1e3);
  is("bytes/s", 3.2e10, "GB/s", 1e-9);
  is("bytes/s", 5e5, "KB/s", 1e-3);
  is("bytes", 4.0 * 1048576, "MiB", 1.0 / 1048576);
  is("items", 1234, "items", 1.0);   // other units as they are below 10^4,
  is("items", 12345, "k items", 1e-3);  // then with a decimal prefix (issue 52: not 1.187e+05)
  is("requests/s", 118700, "k requests/s", 1e-3);
  is("requests/s", 2.5e7, "M requests/s", 1e-6);
  is("%", 5e4, "%", 1.0);
  is("MB/s", 5e4, "MB/s", 1.0);  // already scaled, or a time per something: as they are
  is("KiB", 5e4, "KiB", 1.0);
  is("ms/step", 5e4, "ms/step", 1.0);
  is("s", 0, "s", 1.0);
}

// Issue 40: compare decides on run-level evidence (Mann-Whitney U on the run medians), and says when it cannot.
TEST(Compare, DecidesOnRunsAndSaysWhenItCannot) {
  test::TempDir d;
  // Five runs a side; 2000 -> 3000 us is +50 % asked of each run's median. The machine adds its wake-up overshoot to
  // both, and under a neighbour's load not the same to each (one side measured before the other): a step this large
  // keeps every run of B above every run of A, and the change read within 25..70 % allows 400 us more overshoot on
  // one side than the other (a +10 % step allowed 27 us, and CI's load is more than that).
  for (auto [name, us] : {std::pair{"base", "2000"}, {"slower", "3000"}})
    ASSERT_EQ(run(d, {"calibration_sleep", std::string("--exp_name=") + name, std::string("--sleep_us=") + us, "--iterations=20", "--repeat=5"}).exit_code, 0);
  // The same measurements twice (a copy of the experiment): nothing to flag.
  fs::copy(d.path / "results" / "base", d.path / "results" / "again", fs::copy_options::recursive);
  auto noise = run(d, {"results", "compare", "results/base", "results/again"});
  EXPECT_EQ(noise.exit_code, 0) << noise.out;
  EXPECT_NE(noise.out.find("0 regression(s)"), std::string::npos) << noise.out;
  auto planted = run(d, {"results", "compare", "results/base", "results/slower", "--ignore=sleep_us", "--metric=sleep"});
  EXPECT_EQ(planted.exit_code, 1) << planted.out;
  // One line per changed figure, for people: the verdict, the change, the metric, both medians in a human unit, the runs.
  const auto at = planted.out.find("regression ");
  ASSERT_NE(at, std::string::npos) << planted.out;
  const std::string line = planted.out.substr(at, planted.out.find('\n', at) - at);
  EXPECT_NE(line.find("sleep:sleep"), std::string::npos) << line;
  EXPECT_NE(line.find(" ms"), std::string::npos) << line << ": 2000 us reads as 2 ms";
  // Five runs a side, every run of B slower than every run of A: p = 2/252 exactly, or about 0.007 with ties.
  const auto p_at = line.find("5/5 runs p=");
  ASSERT_NE(p_at, std::string::npos) << line;
  EXPECT_LT(std::strtod(line.c_str() + p_at + 11, nullptr), 0.01) << line;
  const double change = std::strtod(planted.out.c_str() + planted.out.find_first_of("+-", at), nullptr);
  EXPECT_GT(change, 25.0) << planted.out;
  EXPECT_LT(change, 70.0) << planted.out;
  auto reverse = run(d, {"results", "compare", "results/slower", "results/base", "--ignore=sleep_us", "--metric=sleep"});
  EXPECT_EQ(reverse.exit_code, 0) << reverse.out;
  EXPECT_NE(reverse.out.find("improvement"), std::string::npos) << reverse.out;
  // Machines read every figure: CSV and JSON.
  auto csv = run(d, {"results", "compare", "results/base", "results/slower", "--ignore=sleep_us", "--metric=sleep", "--format=csv"});
  EXPECT_EQ(csv.exit_code, 1);
  EXPECT_EQ(csv.out.substr(0, csv.out.find('\n')),
            "match,role,metric,unit,better,better_from,verdict,change_pct,change,shift,shift_low,shift_high,shift_pct,shift_pct_low,"
            "shift_pct_high,shift_confidence,median_a,median_b,low_a,high_a,low_b,high_b,runs_a,runs_b,samples_a,samples_b,p_value,"
            "p_adjusted,param.nodes,param.ranks_per_node,param.iterations,param.warmup,param.fail_rank,param.crash_rank,param.hang_rank");
  EXPECT_NE(csv.out.find(",sleep,sleep,us,lower,declared,regression,"), std::string::npos) << csv.out;
  auto json = run(d, {"results", "compare", "results/base", "results/slower", "--ignore=sleep_us", "--metric=sleep", "--format=json"});
  EXPECT_NE(json.out.find("\"regressions\": 1"), std::string::npos) << json.out;
  EXPECT_NE(json.out.find("\"runs_a\": 5"), std::string::npos) << json.out;
  // Two runs a side: no test can decide; it says so and exits 3, never "unchanged".
  for (auto [name, us] : {std::pair{"two", "2000"}, {"two_slower", "2200"}})
    ASSERT_EQ(run(d, {"calibration_sleep", std::string("--exp_name=") + name, std::string("--sleep_us=") + us, "--iterations=20", "--repeat=2"}).exit_code, 0);
  auto two = run(d, {"results", "compare", "results/two", "results/two_slower", "--ignore=sleep_us", "--metric=sleep"});
  EXPECT_EQ(two.exit_code, 3) << two.out;
  EXPECT_NE(two.out.find("undecided"), std::string::npos) << two.out;
  EXPECT_NE(two.out.find("run both with --repeat=5"), std::string::npos) << two.out;
  // No run in common (sleep_us differs and is not ignored): an error, never "0 comparisons, 0 regressions".
  auto none = run(d, {"results", "compare", "results/base", "results/slower"});
  EXPECT_EQ(none.exit_code, 2) << none.out;
  EXPECT_NE(none.err.find("no run of results/base matches one of results/slower ("), std::string::npos) << none.err;
  EXPECT_NE(none.err.find("differing: sleep_us: A 2000; B 3000"), std::string::npos) << none.err << ": it names the parameter that differs";
  // Where the runs were made is recorded with them, and compare says what differs before its verdicts.
  EXPECT_NE(test::sql_one(d.path / "results/base/fanout.sqlite", "SELECT value FROM provenance WHERE key='host_cpus' LIMIT 1"), "<none>");
  EXPECT_EQ(test::sql_one(d.path / "results/base/fanout.sqlite", "SELECT count(*) FROM provenance WHERE key='repeat' AND value LIKE '%/5'"), "5");
  auto edit = test::run_command({"/usr/bin/sqlite3", (d.path / "results/again/fanout.sqlite").string(),
                                 "UPDATE provenance_values SET value='another CPU' WHERE key='host_cpu_model'"}, d.path);
  ASSERT_EQ(edit.exit_code, 0) << edit.err;
  auto moved = run(d, {"results", "compare", "results/base", "results/again"});
  EXPECT_NE(moved.out.find("differs: host_cpu_model: A "), std::string::npos) << moved.out;
}

// Issue 40: reference values, as ReFrame's: written from a result, checked per figure, and at a sweep's end.
TEST(Reference, WrittenFromAResultAndChecked) {
  test::TempDir d;
  ASSERT_EQ(run(d, {"calibration_sleep", "--exp_name=base", "--sleep_us=[2000,4000]", "--iterations=20", "--repeat=3"}).exit_code, 0);
  auto wrote = run(d, {"results", "check", "results/base", "--write-reference=ref.toml", "--tolerance=20"});
  ASSERT_EQ(wrote.exit_code, 0) << wrote.err;
  const std::string ref = read_file(d.path / "ref.toml");
  EXPECT_NE(ref.find("[[reference]]"), std::string::npos) << ref;
  auto ok = run(d, {"results", "check", "results/base", "--reference=ref.toml"});
  EXPECT_EQ(ok.exit_code, 0) << ok.out;
  EXPECT_NE(ok.out.find("pass  sleep:sleep sleep_us=2000"), std::string::npos) << ok.out;
  EXPECT_NE(ok.out.find("of 3 run(s)"), std::string::npos) << ok.out;
  // References the result misses: 2000 us sleeps against 1000 +- 5 %, and a reference in another unit.
  std::ofstream(d.path / "tight.toml") << "[[reference]]\nrole = \"sleep\"\nmetric = \"sleep\"\nparameters = { sleep_us = 2000 }\n"
                                          "value = 1000\nunit = \"us\"\nlower = -0.05\nupper = 0.05\n"
                                          "[[reference]]\nmetric = \"sleep\"\nvalue = 1\nunit = \"ms\"\n";
  auto bad = run(d, {"results", "check", "results/base", "--reference=tight.toml"});
  EXPECT_EQ(bad.exit_code, 1) << bad.out;
  EXPECT_NE(bad.out.find("FAIL  sleep:sleep sleep_us=2000: 2"), std::string::npos) << bad.out;
  EXPECT_NE(bad.out.find("the runs record it in us, the reference in ms"), std::string::npos) << bad.out;
  EXPECT_NE(bad.out.find("2 reference(s): 0 pass, 2 fail"), std::string::npos) << bad.out;
  // A sweep checks its own figures at its end. Its sleeps are measured at another moment than those the reference
  // was written from, under whatever load a neighbour then makes: a reference of +-50 % (1 ms at 2000 us of overshoot
  // that differs between the two moments) keeps the pass a pass.
  ASSERT_EQ(run(d, {"results", "check", "results/base", "--write-reference=loose.toml", "--tolerance=50"}).exit_code, 0);
  auto sweep_ok = run(d, {"calibration_sleep", "--exp_name=again", "--sleep_us=[2000,4000]", "--iterations=20", "--reference=loose.toml"});
  EXPECT_EQ(sweep_ok.exit_code, 0) << sweep_ok.err;
  auto sweep_bad = run(d, {"calibration_sleep", "--exp_name=again2", "--sleep_us=2000", "--iterations=20", "--reference=tight.toml"});
  EXPECT_EQ(sweep_bad.exit_code, 1) << sweep_bad.err;
  EXPECT_NE(sweep_bad.err.find("FAIL"), std::string::npos) << sweep_bad.err;
  // A malformed reference names its line.
  std::ofstream(d.path / "broken.toml") << "[[reference]]\nmetric = \"sleep\"\nvalue = 1\nunit = \"us\"\nlower = 0.1\n";
  auto broken = run(d, {"results", "check", "results/base", "--reference=broken.toml"});
  EXPECT_EQ(broken.exit_code, 2);
  EXPECT_NE(broken.err.find("broken.toml:1: lower must be <= 0"), std::string::npos) << broken.err;
}

// Issue 51: references from any experiment. An exec sweep whose runs print one figure each (one sample per run) is
// held to references like any (run-level medians across its repeats); an experiment with nothing to hold writes no
// file and says why, exit 2, instead of a file of comments that check then refuses.
TEST(Reference, RunsOfOneSampleAreFiguresAndNothingIsNeverWritten) {
  test::TempDir d;
  ASSERT_EQ(run(d, {"exec", "--exp_name=one", "--command=/bin/echo t={n}", "--param", "n=[10,20]", "--parse", "regex:t=(?<value>\\d+)",
                    "--metric=t", "--unit=ms", "--repeat=3"}).exit_code, 0);
  auto wrote = run(d, {"results", "check", "results/one", "--write-reference=ref.toml"});
  ASSERT_EQ(wrote.exit_code, 0) << wrote.err;
  const std::string ref = read_file(d.path / "ref.toml");
  // Two [[reference]] tables of t, one per n. Of what echo cost: its peak stays under fanout-rank's own (not
  // recorded), its CPU time (well under 100 ms) and storage bytes (0) are left out, as the file says.
  EXPECT_EQ(std::count(ref.begin(), ref.end(), '['), 4) << ref;
  size_t t_tables = 0, rss_tables = 0;
  for (size_t p = ref.find("metric = 't'"); p != std::string::npos; p = ref.find("metric = 't'", p + 1)) ++t_tables;
  for (size_t p = ref.find("metric = 'resource.peak_rss'"); p != std::string::npos; p = ref.find("metric = 'resource.peak_rss'", p + 1)) ++rss_tables;
  EXPECT_EQ(t_tables, 2u) << ref;
  EXPECT_EQ(rss_tables, 0u) << ref;
  EXPECT_EQ(ref.find("resource.user_cpu'"), std::string::npos) << ref;
  EXPECT_EQ(ref.find("resource.voluntary_switches'"), std::string::npos) << "better = none: " << ref;
  EXPECT_NE(ref.find("value = 20.0"), std::string::npos) << ref;
  auto ok = run(d, {"results", "check", "results/one", "--reference=ref.toml"});
  EXPECT_EQ(ok.exit_code, 0) << ok.out << ok.err;
  EXPECT_NE(ok.out.find("of 3 run(s)"), std::string::npos) << ok.out;
  // Only failed runs: no figure at all.
  ASSERT_NE(run(d, {"exec", "--exp_name=none", "--command=/bin/false"}).exit_code, 0);
  auto empty = run(d, {"results", "check", "results/none", "--write-reference=empty.toml"});
  EXPECT_EQ(empty.exit_code, 2) << empty.out;
  EXPECT_NE(empty.err.find("has no figure to hold to a reference"), std::string::npos) << empty.err;
  EXPECT_FALSE(fs::exists(d.path / "empty.toml"));
}

// Issue 53: two metrics whose names differ only where a file name cannot ("a/b" and "a_b") get plots of their own;
// neither distribution is lost.
TEST(Plots, MetricsThatFileNamesWouldMergeKeepTheirOwnPlots) {
  test::TempDir d;
  std::ofstream(d.path / "rec.txt") << "a/b 0 1 s\na/b 1 2 s\na/b 2 3 s\na_b 0 4 s\na_b 1 5 s\na_b 2 6 s\n";
  ASSERT_EQ(run(d, {"results", "record", "results/rec", "--run", "r1", "--file", "rec.txt"}).exit_code, 0);
  auto r = run(d, {"process_scaling_results", "results/rec"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::set<std::string> hists;
  for (auto& e : fs::directory_iterator(d.path / "results" / "rec" / "processed" / "plots"))
    if (e.path().extension() == ".png" && e.path().filename().string().rfind("hist_", 0) == 0) hists.insert(e.path().filename().string());
  EXPECT_EQ(hists.size(), 2u) << "one histogram per metric";
  EXPECT_TRUE(hists.count("hist_bench_a_b.png"));
}

// Issue 53 MEDIUM: one metric in two units (a program that printed ms in one run and s in another) is two figures;
// their plots shared one file, and one distribution was lost. Each unit now has its own, named with the unit.
TEST(Plots, AMetricInTwoUnitsKeepsAPlotPerUnit) {
  test::TempDir d;
  std::ofstream(d.path / "ms.txt") << "t 0 5 ms\nt 1 6 ms\nt 2 7 ms\n";
  std::ofstream(d.path / "s.txt") << "t 0 0.005 s\nt 1 0.006 s\nt 2 0.007 s\n";
  ASSERT_EQ(run(d, {"results", "record", "results/units", "--run", "r1", "--file", "ms.txt", "--param", "v=1"}).exit_code, 0);
  ASSERT_EQ(run(d, {"results", "record", "results/units", "--run", "r2", "--file", "s.txt", "--param", "v=2"}).exit_code, 0);
  auto r = run(d, {"process_scaling_results", "results/units"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::set<std::string> hists;
  for (auto& e : fs::directory_iterator(d.path / "results" / "units" / "processed" / "plots"))
    if (e.path().extension() == ".png" && e.path().filename().string().rfind("hist_", 0) == 0) hists.insert(e.path().filename().string());
  EXPECT_EQ(hists, (std::set<std::string>{"hist_bench_t_ms.png", "hist_bench_t_s.png"}));
}
