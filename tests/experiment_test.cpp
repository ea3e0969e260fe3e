#include <gtest/gtest.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <set>
#include <thread>

#include "common/error.h"
#include "common/files.h"
#include "common/held_lines.h"
#include "orchestrator/experiment.h"
#include "orchestrator/experiment_runner.h"
#include "orchestrator/settings.h"
#include "results/layout.h"
#include "tests/expect_throw.h"
#include "tests/test_util.h"

using namespace fanout;

namespace {

std::unique_ptr<Plugin> calibration() { return Plugin::open(test::build_dir() / "plugins" / "fanout_calibration.so"); }

std::filesystem::path write(const test::TempDir& d, const std::string& name, const std::string& text) {
  auto p = d.path / name;
  std::ofstream(p) << text;
  return p;
}

std::string error_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const UserError& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST(Experiment, FileWithStepsProductZipAndExclude) {
  test::TempDir d;
  auto f = write(d, "exp.toml", R"(
[experiment]
name = "sweep"
plugin = "calibration"
walltime = "00:02:00"
max_retries = 2
stall_timeout = 30

[[steps]]
role = "sleep"
nodes = "{n}"
tasks_per_node = "{ranks_per_node}"

[parameters]
n = [1, 2]
ranks_per_node = [1, 2]
sleep_us = [100, 200, 300]
iterations = [10, 20, 30]

[[zip]]
params = ["sleep_us", "iterations"]

[[exclude]]
n = 2
ranks_per_node = 2
)");
  auto req = parse_experiment_file(f);
  EXPECT_EQ(req.settings.exp_name, "sweep");
  EXPECT_EQ(req.settings.walltime_s, 120);
  EXPECT_EQ(req.settings.max_retries, 2);
  EXPECT_EQ(req.settings.stall_timeout_s, 30);
  auto plan = plan_experiment(req, *calibration());
  ASSERT_EQ(plan.runs.size(), 9u);  // (2 x 2 - 1 excluded) x 3 zipped
  for (auto& r : plan.runs) {
    auto us = std::stoi(*r.point->find("sleep_us")), it = std::stoi(*r.point->find("iterations"));
    EXPECT_EQ(it, us / 10) << "zipped values must advance together";
    EXPECT_FALSE(*r.point->find("n") == "2" && *r.point->find("ranks_per_node") == "2");
    EXPECT_EQ(r.steps[0].nodes, std::stoi(*r.point->find("n")));
    EXPECT_EQ(r.steps[0].tasks_per_node, std::stoi(*r.point->find("ranks_per_node")));
    EXPECT_EQ(r.point->find("copy_bytes") ? *r.point->find("copy_bytes") : "", "1048576") << "defaults are recorded";
  }
  // Runs whose steps are equal share one list; no run shares another's that differs.
  for (auto& a : plan.runs)
    for (auto& b : plan.runs)
      EXPECT_EQ(&a.steps.get() == &b.steps.get(), *a.point->find("n") == *b.point->find("n") &&
                                                       *a.point->find("ranks_per_node") == *b.point->find("ranks_per_node"))
          << a.session << " " << b.session;
}

TEST(Experiment, BadTomlNamesTheLine) {
  test::TempDir d;
  auto f = write(d, "bad.toml", "[experiment]\nplugin = \"calibration\"\n\n[parameters]\nsleep_us = [1, 2\n");
  std::string m = error_of([&] { parse_experiment_file(f); });
  EXPECT_NE(m.find(f.string() + ":5"), std::string::npos) << m;
}

TEST(Experiment, UnknownParameterInFileNamesItsLine) {
  test::TempDir d;
  auto f = write(d, "exp.toml", "[experiment]\nplugin = \"calibration\"\ntemplate = \"calibration_sleep\"\n[parameters]\nsleep_us = 5\nbogus = 3\n");
  auto req = parse_experiment_file(f);
  std::string m = error_of([&] { plan_experiment(req, *calibration()); });
  EXPECT_NE(m.find(f.string() + ":6"), std::string::npos) << m;
  EXPECT_NE(m.find("unknown parameter 'bogus'"), std::string::npos) << m;
}

TEST(Experiment, TypeErrorsNameTheFlag) {
  ExperimentRequest req;
  req.plugin = "calibration";
  req.subcommand = "calibration_sleep";
  req.params.push_back({"sleep_us", ParamSource{"[100,abc]", "--sleep_us", {}, {}}});
  std::string m = error_of([&] { plan_experiment(req, *calibration()); });
  EXPECT_NE(m.find("--sleep_us: 'abc' is not an integer"), std::string::npos) << m;
}

TEST(Experiment, NodesMustBePositive) {
  ExperimentRequest req;
  req.subcommand = "calibration_sleep";
  req.params.push_back({"nodes", ParamSource{"[1,0]", "--nodes", {}, {}}});
  std::string m = error_of([&] { plan_experiment(req, *calibration()); });
  EXPECT_NE(m.find("--nodes: '0' is not >= 1"), std::string::npos) << m;  // calibration declares the bound
}

// A step size from a parameter without declared bounds (an ABI 3 plugin has none) is still refused when < 1.
TEST(Experiment, StepSizesMustBePositiveEvenWithoutDeclaredBounds) {
  ExperimentRequest req;
  req.subcommand = "abi3_echo";
  req.params.push_back({"ranks", ParamSource{"[2,0]", "--ranks", {}, {}}});
  std::string m = error_of([&] { plan_experiment(req, *Plugin::open(FANOUT_ABI3_PLUGIN)); });
  EXPECT_NE(m.find("must be a positive integer, got '0' from parameter 'ranks'"), std::string::npos) << m;
}

TEST(Experiment, HashIsStableAndSessionsAreUnique) {
  ExperimentRequest req;
  req.subcommand = "calibration_sleep";
  req.params.push_back({"sleep_us", ParamSource{"[1,2,3]", "--sleep_us", {}, {}}});
  req.params.push_back({"ranks_per_node", ParamSource{"[1,2]", "--ranks_per_node", {}, {}}});
  auto a = plan_experiment(req, *calibration());
  std::swap(req.params[0], req.params[1]);  // the order flags are given in does not change the hash
  auto b = plan_experiment(req, *calibration());
  ASSERT_EQ(a.runs.size(), 6u);
  std::set<std::string> sessions;
  for (size_t i = 0; i < a.runs.size(); ++i) {
    EXPECT_EQ(a.runs[i].param_hash, b.runs[i].param_hash);
    sessions.insert(a.runs[i].session);
  }
  EXPECT_EQ(sessions.size(), 6u);
  EXPECT_NE(a.runs[0].session.find("sleep_us1"), std::string::npos) << a.runs[0].session;
}

TEST(Experiment, WalltimeAndExcludeFlagParsing) {
  EXPECT_EQ(parse_walltime("01:00:00", "w"), 3600);
  EXPECT_EQ(parse_walltime("05:00", "w"), 300);
  EXPECT_EQ(parse_walltime("90", "w"), 90);
  EXPECT_EQ(parse_walltime("1-00:00:00", "w"), 86400);
  EXPECT_THROW_WITH(parse_walltime("soon", "--walltime"), UserError, "--walltime: 'soon' is not a wall time");
  EXPECT_THROW_WITH(parse_walltime("0", "--walltime"), UserError, "--walltime: '0' is not a wall time");
  // Overflowed int64 (tests/fuzz). Wrapped, both would be positive and over a year ("is longer than the longest wall
  // time"): "is not a wall time" shows the overflow itself was caught.
  EXPECT_THROW_WITH(parse_walltime("400000000084881008:88", "--walltime"), UserError, "'400000000084881008:88' is not a wall time");
  EXPECT_THROW_WITH(parse_walltime("1006039852890528905-2304", "--walltime"), UserError, "'1006039852890528905-2304' is not a wall time");
  auto e = parse_exclude_flag("a=1,b=[2,3]", "--exclude");
  EXPECT_EQ(e.conditions.at("a"), std::vector<std::string>{"1"});
  EXPECT_EQ(e.conditions.at("b"), (std::vector<std::string>{"2", "3"}));
  EXPECT_THROW_WITH(parse_exclude_flag("a", "--exclude"), UserError, "--exclude: 'a' is not name=value");
}

TEST(Experiment, TextAndFileParseTheSame) {
  auto req = fanout::parse_experiment_text("[experiment]\nplugin = \"calibration\"\nwalltime = \"00:01:30\"\n", "dir/sweep.toml");
  EXPECT_EQ(req.plugin, "calibration");
  EXPECT_EQ(req.settings.exp_name, "sweep");
  EXPECT_EQ(req.settings.walltime_s, 90);
  std::string m = error_of([] { fanout::parse_experiment_text("[experiment\n", "x.toml"); });
  EXPECT_NE(m.find("x.toml:1"), std::string::npos) << m;
  m = error_of([] { fanout::parse_experiment_file("/nonexistent/exp.toml"); });
  EXPECT_NE(m.find("/nonexistent/exp.toml"), std::string::npos) << m;
}

// Non-ASCII characters are fine in strings and comments, refused (with their line) anywhere toml++ 3.3.0 would
// test them as whitespace, which reaches __builtin_unreachable in that version.
TEST(Experiment, NonAsciiOnlyInStringsAndComments) {
  auto req = fanout::parse_experiment_text("# µs and ü in a comment\n[experiment]\nplugin = \"calibration\"\nname = 'büro'\n"
                                           "[parameters]\nmessage = \"\"\"naïve\n\"\"\"\n",
                                           "ok.toml");
  EXPECT_EQ(req.settings.exp_name, "büro");
  // Keys with digits or dashes next to non-ASCII strings are not numbers.
  std::string ok = error_of([] {
    fanout::parse_experiment_text("[experiment]\nplugin = \"calibration\"\n[parameters]\nstep1=\"café\"\nmy-key=\"é\"\n"
                                  "x = {a1=\"é\"}\na1.\"é\" = 2\nl = [1, \"é\", [2,\"ü\"]]\n",
                                  "keys.toml");
  });
  EXPECT_EQ(ok.find("non-ASCII"), std::string::npos) << ok;
  for (auto [text, line] : std::vector<std::pair<std::string, std::string>>{
           {"[experiment]\nplugin = \"calibration\"\né = 1\n", ":3:"},
           {"[experiment]\nplugin = \"calibration\" \xca\x80\n", ":2:"},
           {"[experiment]\nplugin = \"calibration\"\n[parameters]\nx = 1'\xc3\xa9'\n", ":4:"},  // scanned as a number
           {"[experiment]\nplugin = \"calibration\"\n[parameters]\nm = \"\"\"a \\ \xc3\xbc\"\"\"\n", ":4:"},
           {"[experiment]\nplugin = \"calibration\"\n[parameters]\nm = \"\"\"a \\\n  \xc2\xa0" "b\"\"\"\n", ":5:"}}) {
    std::string m = error_of([&] { fanout::parse_experiment_text(text, "bad.toml"); });
    EXPECT_NE(m.find("bad.toml" + line + " a non-ASCII character outside a string or comment"), std::string::npos) << m;
  }
}

// The driver's settings are one table: files and the command line accept the same keys with the same checks, and
// a plugin may use none of their names for a parameter.
TEST(Settings, EveryDriverSettingIsReservedFromPlugins) {
  const auto& reserved = reserved_flag_names();
  for (auto& s : driver_settings())
    for (auto& name : {s.name, s.alias})
      if (!name.empty()) {
        EXPECT_NE(std::find(reserved.begin(), reserved.end(), name), reserved.end()) << name << " is not reserved";
      }
  EXPECT_NE(std::find(reserved.begin(), reserved.end(), "dry_run"), reserved.end());
}

TEST(Settings, AnExperimentFileTakesEverySettingTheCommandLineTakes) {
  auto req = parse_experiment_text(R"([experiment]
plugin = "calibration"
resume = true
batch_args = ["qos=high", "comment=nightly"]
max_parallel = 0
step_launcher = "mpirun"
walltime = "00:10:00"
)", "exp.toml");
  EXPECT_TRUE(req.settings.resume);
  ASSERT_EQ(req.settings.options.batch_args.size(), 2u);
  EXPECT_EQ(req.settings.options.batch_args[1], (std::pair<std::string, std::string>{"comment", "nightly"}));
  EXPECT_EQ(req.settings.max_parallel, 0);
  EXPECT_EQ(req.settings.options.step_launcher, "mpirun");
  EXPECT_EQ(req.settings.walltime_s, 600);
  for (auto& s : driver_settings()) {
    if (s.name == "zip" || s.name == "exclude") continue;  // the file's [[zip]] and [[exclude]] tables
    EXPECT_NE(setting_for_file_key(s.file_key), nullptr) << s.name << " has no file key";
  }
  // The same bounds and choices, named by where the value came from.
  EXPECT_THROW_WITH(parse_experiment_text("[experiment]\nplugin = \"c\"\nmax_parallel = -1\n", "exp.toml"), UserError,
                    "exp.toml:3: experiment.max_parallel: -1 is out of range (0 to 100000)");
  EXPECT_THROW_WITH(parse_experiment_text("[experiment]\nplugin = \"c\"\nstep_launcher = \"aprun\"\n", "exp.toml"), UserError,
                    "experiment.step_launcher: 'aprun' is not one of srun, mpirun");
  EXPECT_THROW_WITH(parse_experiment_text("[experiment]\nplugin = \"c\"\nbatch_args = \"qos\"\n", "exp.toml"), UserError,
                    "experiment.batch_args: 'qos' is not key=value");
}

// Issue 40: --repeat runs every permutation N times as runs of their own, in the asked order; repeat 1 keeps the
// identity of the run without --repeat (a sweep repeated later resumes it), the others are runs of their own.
TEST(Experiment, RepeatsAreRunsOfTheirOwnInTheAskedOrder) {
  ExperimentRequest req;
  req.subcommand = "calibration_sleep";
  req.settings.exp_name = "rep";
  req.params.push_back({"sleep_us", ParamSource{"[1,2]", "--sleep_us", {}, {}}});
  const auto once = plan_experiment(req, *calibration());
  req.settings.repeat = 3;
  const auto inter = plan_experiment(req, *calibration());
  ASSERT_EQ(inter.runs.size(), 6u);
  std::vector<std::string> order;
  for (auto& r : inter.runs) order.push_back(*r.point->find("sleep_us") + "/" + std::to_string(r.repeat));
  EXPECT_EQ(order, (std::vector<std::string>{"1/0", "2/0", "1/1", "2/1", "1/2", "2/2"}));
  EXPECT_EQ(inter.runs[0].param_hash, once.runs[0].param_hash) << "repeat 1 is the run without --repeat";
  std::set<std::string> hashes, sessions;
  for (auto& r : inter.runs) hashes.insert(r.param_hash), sessions.insert(r.session);
  EXPECT_EQ(hashes.size(), 6u);
  EXPECT_EQ(sessions.size(), 6u);
  EXPECT_NE(inter.runs[2].session.find("-r2-"), std::string::npos) << inter.runs[2].session;
  // A permutation's repeats share its list of steps (a copy each was most of a planned run), and so do
  // permutations whose steps are equal (FileWithStepsProductZipAndExclude: those that differ do not).
  for (auto& r : inter.runs) EXPECT_EQ(&r.steps.get(), &inter.runs[0].steps.get()) << r.session;
  EXPECT_FALSE(inter.runs[0].steps.empty());
  req.settings.repeat_order = "grouped";
  order.clear();
  for (auto& r : plan_experiment(req, *calibration()).runs) order.push_back(*r.point->find("sleep_us") + "/" + std::to_string(r.repeat));
  EXPECT_EQ(order, (std::vector<std::string>{"1/0", "1/1", "1/2", "2/0", "2/1", "2/2"}));
  req.settings.repeat_order = "random";
  auto r1 = plan_experiment(req, *calibration()), r2 = plan_experiment(req, *calibration());
  std::multiset<std::string> all;
  for (size_t i = 0; i < r1.runs.size(); ++i) {
    EXPECT_EQ(r1.runs[i].param_hash, r2.runs[i].param_hash) << "the same order again (a resume plans it again)";
    all.insert(r1.runs[i].param_hash);
  }
  EXPECT_EQ(all, std::multiset<std::string>(hashes.begin(), hashes.end()));
  req.settings.max_runs = 5;
  EXPECT_NE(error_of([&] { plan_experiment(req, *calibration()); }).find("2 permutations x --repeat=3 exceed --max_runs=5"), std::string::npos);
}

// CI once saw a second driver, started beside the first on one experiment, refuse the folder the first had just
// made: its check asked for the database and the lock before the first had made them, then listed the folder after
// (the lock and a run folder in it). Here a thread makes folders as a driver does (the folder, its lock, its
// database, a run folder) while this one checks each as soon as it is there: none may be taken for a stranger's.
// However the two interleave the answer is the same, so the test holds on any machine; on this one the check
// before the fix refused some of the 300 within the first runs.
TEST(Experiment, AFolderAnotherDriverIsMakingIsNeverTakenForAStrangersFolder) {
  test::TempDir d;
  constexpr int kFolders = 300;
  auto folder = [&](int i) { return d.path / ("exp" + std::to_string(i)); };
  std::thread driver([&] {
    for (int i = 0; i < kFolders; ++i) {
      std::filesystem::create_directory(folder(i));
      std::ofstream(folder(i) / layout::kDriverLock) << "pid 1\n";
      std::ofstream(folder(i) / layout::kDatabase) << "";
      std::filesystem::create_directory(folder(i) / "run-20261206T000000Z");
    }
  });
  std::vector<std::string> refused;
  for (int i = 0; i < kFolders; ++i) {
    while (!std::filesystem::exists(folder(i))) std::this_thread::yield();
    const std::string why = error_of([&] { refuse_a_folder_fanout_did_not_make(folder(i)); });
    if (!why.empty()) refused.push_back(why);
  }
  driver.join();
  EXPECT_TRUE(refused.empty()) << refused.size() << " refused, the first: " << refused.front();
  // A folder of someone else's is still refused, and one holding only [build]'s log (or the log being written) is not.
  std::filesystem::create_directories(d.path / "theirs" / "csv");
  EXPECT_NE(error_of([&] { refuse_a_folder_fanout_did_not_make(d.path / "theirs"); }).find("is no fanout experiment"), std::string::npos);
  std::filesystem::create_directories(d.path / "built");
  std::ofstream(d.path / "built" / (std::string(layout::kBuildLog) + ".tmp.42")) << "cc ...";
  EXPECT_EQ(error_of([&] { refuse_a_folder_fanout_did_not_make(d.path / "built"); }), "");
}

// The driver's event lines are held and written a poll cycle at a time. What is held reaches the file whole when
// flushed; past kMaxHeldBytes whole lines go out without a flush and a line cut short waits for its end; a
// descriptor that takes nothing sets the stream's badbit instead of holding the text forever. (Lines held past
// kMaxHoldNs go out the same way; that rule is not timed here.)
TEST(Experiment, HeldLinesReachTheirFileWholeWhenFlushedOrWhenTooManyAreHeld) {
  test::TempDir d;
  const std::string file = (d.path / "log").string();
  const int fd = ::open(file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  ASSERT_GE(fd, 0);
  auto written = [&] { return read_file(file); };
  {
    HeldLines out(fd, int64_t(3600) * 1000000000);  // held by size alone here, however slow the machine
    out << "fanout: submitted a\n" << "fanout: a COMPLETED" << " in 5ms" << '\n' << "fanout: b";
    EXPECT_EQ(written(), "");
    out.flush();
    EXPECT_EQ(written(), "fanout: submitted a\nfanout: a COMPLETED in 5ms\nfanout: b");
    const std::string line(99, 'x');
    std::string expected = written();
    size_t lines = 0;
    while (written().size() == expected.size() && lines < 2 * HeldLinesBuf::kMaxHeldBytes / 100) out << line << '\n', ++lines;
    EXPECT_GE(lines * 100, HeldLinesBuf::kMaxHeldBytes - 100) << "written before kMaxHeldBytes were held";
    EXPECT_LE(lines * 100, HeldLinesBuf::kMaxHeldBytes + 100) << "held past kMaxHeldBytes";
    const size_t before = written().size();
    EXPECT_EQ(written().back(), '\n');
    out << "cut";
    out << std::string(HeldLinesBuf::kMaxHeldBytes, 'y');  // a line's middle is never written alone
    EXPECT_EQ(written().size(), before);
    out << "\n";
    EXPECT_EQ(written().size(), before + 3 + HeldLinesBuf::kMaxHeldBytes + 1);
    out << "last";
  }  // the destructor writes what is left
  EXPECT_EQ(written().substr(written().size() - 5), "\nlast");
  ::close(fd);
  HeldLines closed(-1, int64_t(3600) * 1000000000);
  closed << "nowhere\n";
  closed.flush();
  EXPECT_TRUE(closed.bad());
  // Lines lost in a write made without a flush (past kMaxHeldBytes) are reported by the next flush.
  HeldLines lost(-1, int64_t(3600) * 1000000000);
  lost << std::string(HeldLinesBuf::kMaxHeldBytes, 'z') << "\n";
  EXPECT_FALSE(lost.bad());
  lost.flush();
  EXPECT_TRUE(lost.bad());
}
