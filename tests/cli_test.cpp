// End to end: the fanout driver as a user runs it, on the local launcher, with real ranks and a real database.
#include <sched.h>
#include <gtest/gtest.h>

#include <signal.h>
#include <sqlite3.h>
#include <sys/wait.h>

#include <algorithm>
#include <fstream>
#include <map>
#include <set>
#include <sstream>


#include "common/files.h"
#include "plugins/sdk/fanout_plugin.h"
#include "common/text.h"
#include "tests/test_util.h"
#include "tests/timer_slack.h"

using namespace fanout;
namespace fs = std::filesystem;

namespace {

test::CommandResult fanout_cmd(const test::TempDir& d, std::vector<std::string> args) { return test::run_fanout(d.path, args); }

std::vector<std::vector<std::string>> query(const fs::path& db_file, const std::string& sql) { return test::sql_rows(db_file, sql); }

fs::path db_of(const test::TempDir& d, const std::string& exp) { return d.path / "results" / exp / "fanout.sqlite"; }

}  // namespace

TEST(Cli, CalibrationSweepReportsTheKnownCost) {
  test::TempDir d;
  auto r = fanout_cmd(d, {"calibration_sleep", "--exp_name=calib", "--sleep_us=[2000,5000]", "--ranks_per_node=[1,2]",
                          "--iterations=40", "--warmup=2"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.err.find("4/4 run(s) COMPLETED"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("statistics.csv"), std::string::npos) << r.err;
  auto db = db_of(d, "calib");
  EXPECT_EQ(query(db, "SELECT count(*) FROM runs WHERE status='COMPLETED'")[0][0], "4");
  // Every rank of every run delivered exactly its samples: 40 measured + 2 warmup.
  auto per_rank = query(db, "SELECT r.session, s.rank, sum(s.warmup=0), sum(s.warmup=1) FROM samples s JOIN runs r ON r.id=s.run_id "
                            "WHERE s.metric='sleep' GROUP BY r.id, s.rank");
  ASSERT_EQ(per_rank.size(), 6u);  // 1 + 2 + 1 + 2 ranks
  for (auto& row : per_rank) {
    EXPECT_EQ(row[2], "40") << row[0];
    EXPECT_EQ(row[3], "2") << row[0];
  }
  // The measured median (from statistics.csv) is the true cost in the right unit: never shorter than the sleep,
  // longer only by what a busy machine adds (a unit error would be 1000x).
  std::ifstream stats(d.path / "results" / "calib" / "csv" / "statistics.csv");
  auto split_csv = [](const std::string& line) {
    std::vector<std::string> cols;
    std::stringstream ss(line);
    for (std::string c; std::getline(ss, c, ',');) cols.push_back(c);
    return cols;
  };
  std::string line, header;
  std::getline(stats, header);
  auto names = split_csv(header);
  auto col = [&](const std::string& n) { return size_t(std::find(names.begin(), names.end(), n) - names.begin()); };
  int checked = 0;
  while (std::getline(stats, line)) {
    auto cols = split_csv(line);
    if (cols.at(col("metric")) != "sleep") continue;
    double sleep_us = std::stod(cols.at(col("sleep_us"))), median = std::stod(cols.at(col("median")));
    // Longer by at most the sleep again plus 5 ms, or by what a sleep overshoots on this machine now (p90, 4x).
    const double late_us = std::min(100 * sleep_us, 4e6 * test::sleep_overshoot_s(sleep_us * 1e-6, 5));  // a 1000x unit error still fails
    EXPECT_GE(median, sleep_us) << line;
    EXPECT_LT(median, 2 * sleep_us + std::max(5000.0, late_us)) << line;
    ++checked;
  }
  EXPECT_EQ(checked, 4);
}

// fanout's own revision is taken at each build, not when cmake first ran: a build after later commits named the
// commit of its first configure (provenance said e22b734 of a build of fd671ee on 2026-12-06).
TEST(Cli, VersionAndProvenanceNameTheCommitTheBuildWasMadeFrom) {
  test::TempDir d;
  const auto rev = test::run_command({"/usr/bin/git", "-C", FANOUT_SOURCE_DIR, "rev-parse", "--short=12", "HEAD"}, d.path);
  if (rev.exit_code != 0) GTEST_SKIP() << "the source is not a git checkout git can read (fanout says 'unknown'): " << rev.err;
  const std::string head = trim(rev.out);
  ASSERT_EQ(head.size(), 12u) << head;
  auto v = fanout_cmd(d, {"--version"});
  ASSERT_EQ(v.exit_code, 0) << v.out << v.err;
  EXPECT_NE((v.out + v.err).find("(" + head), std::string::npos) << v.out << v.err;
  auto r = fanout_cmd(d, {"calibration_sleep", "--exp_name=rev", "--iterations=1", "--warmup=0", "--sleep_us=0"});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  const std::string stored = query(db_of(d, "rev"), "SELECT value FROM provenance WHERE key='fanout_git_revision'")[0][0];
  EXPECT_EQ(stored.substr(0, 12), head) << stored;
}

TEST(Cli, FailingRankGivesFailedWithItsExitCode) {
  test::TempDir d;
  auto r = fanout_cmd(d, {"calibration_sleep", "--exp_name=f", "--ranks_per_node=2", "--fail_rank=1", "--iterations=5"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("FAILED"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("rank 1 of step 'sleep' exited with code 3"), std::string::npos) << r.err;
  auto rows = query(db_of(d, "f"), "SELECT status, exit_code, signal FROM runs");
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0], (std::vector<std::string>{"FAILED", "3", "0"}));
}

TEST(Cli, CrashingRankIsRecordedWithItsSignal) {
  test::TempDir d;
  auto r = fanout_cmd(d, {"calibration_copy", "--exp_name=c", "--crash_rank=0", "--iterations=5"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  auto rows = query(db_of(d, "c"), "SELECT status, signal FROM runs");
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0], (std::vector<std::string>{"FAILED", "11"}));
  EXPECT_NE(r.err.find("SIGSEGV"), std::string::npos) << r.err;
}

TEST(Cli, HungRankTimesOut) {
  test::TempDir d;
  auto r = fanout_cmd(d, {"calibration_sleep", "--exp_name=t", "--hang_rank=0", "--walltime=1"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(query(db_of(d, "t"), "SELECT status FROM runs")[0][0], "TIMEOUT");
  const auto left = test::processes_left((d.path / "results" / "t").string(), 60);
  EXPECT_TRUE(left.empty()) << "left behind: " << (left.empty() ? "" : left.front());
}

TEST(Cli, ExperimentFileWithZipAndExclude) {
  test::TempDir d;
  std::ofstream(d.path / "exp.toml") << R"(
[experiment]
name = "filed"
plugin = "calibration"
template = "calibration_copy"
[parameters]
copy_bytes = [1024, 4096, 16384]
iterations = [3, 4, 5]
ranks_per_node = [1, 2]
[[zip]]
params = ["copy_bytes", "iterations"]
[[exclude]]
copy_bytes = 16384
ranks_per_node = 2
)";
  auto dry = fanout_cmd(d, {"run", "exp.toml", "--dry-run"});
  ASSERT_EQ(dry.exit_code, 0) << dry.err;
  EXPECT_NE(dry.out.find("5 run(s)"), std::string::npos) << dry.out;
  EXPECT_FALSE(fs::exists(d.path / "results")) << "a dry run writes nothing";
  auto r = fanout_cmd(d, {"run", "exp.toml"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto rows = query(db_of(d, "filed"),
                    "SELECT a.value, b.value, count(*) FROM runs r JOIN parameters a ON a.run_id=r.id AND a.name='copy_bytes' "
                    "JOIN parameters b ON b.run_id=r.id AND b.name='iterations' GROUP BY a.value, b.value ORDER BY 0+a.value");
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0], (std::vector<std::string>{"1024", "3", "2"}));
  EXPECT_EQ(rows[2], (std::vector<std::string>{"16384", "5", "1"}));
}

TEST(Cli, BadInputGivesOneLineErrorAndWritesNothing) {
  test::TempDir d;
  std::ofstream(d.path / "bad.toml") << "[experiment]\nplugin = \"calibration\"\n[parameters\nx = 1\n";
  std::ofstream(d.path / "unknown.toml") << "[experiment]\nplugin = \"calibration\"\ntemplate = \"calibration_sleep\"\n[parameters]\nsleep_us = 1\nbogus = 2\n";
  struct Case {
    std::vector<std::string> args;
    std::string expect;
  } cases[] = {
      {{"calibration_sleep", "--bogus_flag=1"}, "--bogus_flag"},
      {{"calibration_sleep", "--sleep_us=[1,2"}, "--sleep_us: malformed list '[1,2': missing closing ']'"},
      {{"calibration_sleep", "--sleep_us=[1,x]"}, "--sleep_us: 'x' is not an integer"},
      {{"calibration_sleep", "--launcher=nope"}, "--launcher: unknown launcher 'nope'"},
      {{"no_such_experiment"}, "unknown subcommand 'no_such_experiment'"},
      {{"run", "bad.toml"}, "bad.toml:3"},
      {{"run", "unknown.toml"}, "unknown.toml:6: unknown parameter 'bogus'"},
      {{"run", "missing.toml"}, "missing.toml"},
      // A newline would end the #SBATCH / #PBS line and start a shell command in job.sh.
      {{"calibration_sleep", "--batch_args=comment=x\ntouch pwned"}, "--batch_args comment: control characters"},
      {{"calibration_sleep", "--partition=debug\ntouch pwned"}, "--partition: control characters"},
  };
  for (auto& c : cases) {
    auto r = fanout_cmd(d, c.args);
    EXPECT_EQ(r.exit_code, 2) << c.args[0] << " " << r.err;
    EXPECT_NE(r.err.find(c.expect), std::string::npos) << "expected '" << c.expect << "' in: " << r.err;
    EXPECT_EQ(r.err.rfind("fanout: error: ", 0), 0u) << r.err;
    EXPECT_FALSE(fs::exists(d.path / "results")) << c.args[0] << " wrote results";
  }
  std::ofstream(d.path / "plugin.toml") << "[experiment]\nplugin = \"nonexistent_plugin\"\n";
  auto r = fanout_cmd(d, {"run", "plugin.toml"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("unknown plugin 'nonexistent_plugin'"), std::string::npos) << r.err;
  EXPECT_EQ(test::line_count_summary(r.err), "1") << r.err;
}

TEST(Cli, PluginsListingAndAbiCheck) {
  test::TempDir d;
  auto r = fanout_cmd(d, {"plugins"});
  ASSERT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("calibration 1.0.0"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("template_hello"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("--fail_rank (int, default -1)"), std::string::npos) << r.out;
  auto bad = fanout_cmd(d, {"plugins", "--check", test::broken_plugin(1).string()});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("was built for fanout plugin ABI " + std::to_string(FANOUT_PLUGIN_ABI_VERSION + 98) + ", this fanout expects ABI " +
                         std::to_string(FANOUT_PLUGIN_ABI_VERSION) + " (and still loads 3); rebuild it"),
            std::string::npos)
      << bad.err;
  auto init = fanout_cmd(d, {"run", "x.toml"});
  EXPECT_EQ(init.exit_code, 2);
  EXPECT_NE(init.err.find("x.toml"), std::string::npos) << init.err;
}

// ABI 4 did not break plugins built before it: one built from the frozen ABI 3 header runs end to end (its role
// fails unless it is handed the ABI 3 host-ops table it was compiled for) and its samples land.
TEST(Cli, RunsAPluginBuiltForAbi3) {
  test::TempDir d;
  std::ofstream(d.path / "exp.toml") << "[experiment]\nname = \"old\"\nplugin = \"" FANOUT_ABI3_PLUGIN "\"\ntemplate = \"abi3_echo\"\n"
                                     << "[parameters]\nvalue = [3, 5]\n";
  auto r = fanout_cmd(d, {"run", "exp.toml"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // 2 runs x 2 ranks x 4 iterations (the experiment's own default), each sample the run's value.
  auto rows = query(db_of(d, "old"), "SELECT value, count(*) FROM samples WHERE metric='abi3_value' GROUP BY value ORDER BY value");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0], (std::vector<std::string>{"3.0", "8"}));
  EXPECT_EQ(rows[1], (std::vector<std::string>{"5.0", "8"}));
  EXPECT_EQ(query(db_of(d, "old"), "SELECT count(*) FROM runs WHERE status='COMPLETED' AND path LIKE '%abi3-3-%'")[0][0], "1");
}

// ABI 4 constraints are the driver's: a value outside a parameter's choices or bounds is refused before anything
// is written, naming the flag, and --help says what is allowed.
TEST(Cli, ValuesOutsideDeclaredChoicesAndBoundsAreRefusedAtPlanTime) {
  test::TempDir d;
  auto r = fanout_cmd(d, {"calibration_sleep", "--ranks_per_node=[1,5000]"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--ranks_per_node: '5000' is not <= 4096"), std::string::npos) << r.err;
  r = fanout_cmd(d, {"template_hello", "--ranks=0"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--ranks: '0' is not >= 1"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(d.path / "results"));
  auto help = fanout_cmd(d, {"calibration_sleep", "--help"});
  EXPECT_NE(help.out.find("int, >= 1 and <= 4096"), std::string::npos) << help.out;
  auto listing = fanout_cmd(d, {"plugins"});
  EXPECT_NE(listing.out.find("--sleep_us (int, >= 0 and <= 3600000000, default 1000)"), std::string::npos) << listing.out;
}

TEST(Cli, InitFailureFailsTheRunWithThePluginsReason) {
  test::TempDir d;
  std::ofstream(d.path / "exp.toml") << "[experiment]\nplugin = \"" << test::broken_plugin(2).string()
                                     << "\"\n[[steps]]\nrole = \"noop\"\n";
  auto r = fanout_cmd(d, {"run", "exp.toml"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  auto rows = query(db_of(d, "exp"), "SELECT status, path FROM runs");
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0][0], "FAILED");
  EXPECT_NE(read_file(fs::path(rows[0][1]) / "noop.err").find("init failed: the test plugin refuses to start"), std::string::npos);
}

TEST(Cli, TemplatePluginRunsAndParametersNeverReachAShell) {
  test::TempDir d;
  const std::string evil = "$(touch pwned1) `touch pwned2`; touch pwned3\ntouch pwned4 'q\"";
  auto r = fanout_cmd(d, {"template_hello", "--exp_name=tpl", "--ranks=2", "--iterations=3", "--message=" + evil});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (auto* f : {"pwned1", "pwned2", "pwned3", "pwned4"}) EXPECT_FALSE(fs::exists(d.path / f)) << f;
  auto rows = query(db_of(d, "tpl"), "SELECT p.value, r.path FROM parameters p JOIN runs r ON r.id=p.run_id WHERE p.name='message'");
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0][0], evil);
  // The rank that received the message over the rendezvous logged it verbatim.
  EXPECT_NE(read_file(fs::path(rows[0][1]) / "hello.err").find("pwned3"), std::string::npos);
  EXPECT_EQ(query(db_of(d, "tpl"), "SELECT count(*) FROM samples WHERE metric='work' AND warmup=0")[0][0], "6");
  // Run folders are not world-writable.
  auto perms = fs::status(fs::path(rows[0][1])).permissions();
  EXPECT_EQ(perms & fs::perms::others_write, fs::perms::none);
}

// Issue 55 item 1: what code a sweep measured. --source reads a git working tree (its commit, whether tracked files
// differ, the commit's time) and --revision names it; every run stores them, compare names a difference, and a
// folder that is not a working tree is refused before anything runs.
TEST(Cli, TheCodeUnderTestIsRecordedWithEveryRun) {
  test::TempDir d;
  const fs::path code = d.path / "code";
  fs::create_directories(code);
  auto git = [&](std::vector<std::string> args) { return test::git(code, std::move(args)); };
  git({"init", "-q"});
  std::ofstream(code / "main.c") << "int main(void) { return 0; }\n";
  git({"add", "main.c"});
  git({"commit", "-q", "-m", "first"});
  const std::string commit = git({"rev-parse", "HEAD"}), when = git({"log", "-1", "--format=%cI"});
  auto provenance = [&](const std::string& exp) {
    std::map<std::string, std::string> out;
    for (auto& row : query(db_of(d, exp), "SELECT DISTINCT key, value FROM provenance WHERE key = 'revision' OR key LIKE 'source_%'")) out[row[0]] = row[1];
    return out;
  };
  ASSERT_EQ(fanout_cmd(d, {"exec", "--exp_name=clean", "--command=/bin/true", "--repeat=2", "--source=code"}).exit_code, 0);
  auto clean = provenance("clean");
  EXPECT_EQ(clean["revision"], commit);
  EXPECT_EQ(clean["source_commit"], commit);
  EXPECT_EQ(clean["source_dirty"], "false");
  EXPECT_EQ(clean["source_commit_time"], when);
  EXPECT_EQ(clean["source_dir"], code.string());
  EXPECT_EQ(query(db_of(d, "clean"), "SELECT count(*) FROM provenance WHERE key = 'source_commit'")[0][0], "2") << "every run";
  // A tracked file changed: dirty; an untracked one is not the code under test.
  std::ofstream(code / "notes.txt") << "untracked\n";
  ASSERT_EQ(fanout_cmd(d, {"exec", "--exp_name=untracked", "--command=/bin/true", "--source=code"}).exit_code, 0);
  EXPECT_EQ(provenance("untracked")["source_dirty"], "false");
  std::ofstream(code / "main.c", std::ios::app) << "/* changed */\n";
  ASSERT_EQ(fanout_cmd(d, {"exec", "--exp_name=dirty", "--command=/bin/true", "--repeat=2", "--source=code", "--revision=v1.2-rc"}).exit_code, 0);
  auto dirty = provenance("dirty");
  EXPECT_EQ(dirty["source_dirty"], "true");
  EXPECT_EQ(dirty["revision"], "v1.2-rc") << "--revision names it; the commit stays beside";
  EXPECT_EQ(dirty["source_commit"], commit);
  // One experiment, one revision: a new commit is refused in an experiment whose runs measured another, before any run.
  std::ofstream(code / "other.c") << "int other;\n";
  git({"add", "other.c"});
  git({"commit", "-q", "-m", "second"});
  auto mixed = fanout_cmd(d, {"exec", "--exp_name=clean", "--command=/bin/true", "--repeat=3", "--source=code", "--resume"});
  EXPECT_EQ(mixed.exit_code, 2) << mixed.err;
  EXPECT_NE(mixed.err.find("measured revision " + commit + ", this one is " + git({"rev-parse", "HEAD"})), std::string::npos) << mixed.err;
  EXPECT_EQ(query(db_of(d, "clean"), "SELECT count(*) FROM runs")[0][0], "2") << "nothing added";
  // compare names what differs in the code under test.
  auto cmp = fanout_cmd(d, {"results", "compare", "results/clean", "results/dirty"});
  EXPECT_NE(cmp.out.find("differs: revision: A " + commit + "; B v1.2-rc"), std::string::npos) << cmp.out << cmp.err;
  EXPECT_NE(cmp.out.find("differs: source_dirty: A false; B true"), std::string::npos) << cmp.out;
  // Not a working tree, or no folder at all: refused, naming the flag, nothing written.
  for (const std::string& bad : std::vector<std::string>{d.path.string() + "/nowhere", "/"}) {
    auto r = fanout_cmd(d, {"exec", "--exp_name=bad", "--command=/bin/true", "--source=" + bad});
    EXPECT_EQ(r.exit_code, 2) << bad;
    EXPECT_NE(r.err.find("--source " + bad), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(d.path / "results" / "bad")) << bad;
  }
}

// Issue 51, the template plugin's own experiment: its report leads with the figure against both swept numbers, and
// the count it declares (ranks, weak scaling) gets its efficiency plot without --scaling.
TEST(Cli, TemplateSweepLeadsItsReportWithTheFigureAgainstWhatWasSwept) {
  test::TempDir d;
  auto r = fanout_cmd(d, {"template_hello", "--exp_name=tw", "--ranks=[1,2]", "--work=[1000,8000]", "--iterations=3"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto plots = test::headline_plots(d.path, d.path / "results" / "tw");
  for (auto* title : {"median work (hello) by work", "median work (hello) by ranks", "weak scaling: speedup of work (hello) by ranks"})
    EXPECT_NE(std::find(plots.begin(), plots.end(), title), plots.end()) << title;
  ASSERT_FALSE(plots.empty());
  EXPECT_EQ(plots.front().rfind("median ", 0), 0u) << plots.front();
}

// Issue 53 LOW: `fanout resume --dry-run` says what the saved command would run, and runs nothing.
TEST(Cli, ResumeDryRunShowsTheMissingRunsAndRunsNothing) {
  test::TempDir d;
  auto first = fanout_cmd(d, {"calibration_sleep", "--exp_name=dr", "--sleep_us=100", "--iterations=2", "--fail_rank=[-1,0]"});
  EXPECT_NE(first.exit_code, 0) << "fail_rank=0 fails its run";
  const std::string before = query(db_of(d, "dr"), "SELECT count(*) FROM runs")[0][0];
  auto dry = fanout_cmd(d, {"resume", "results/dr", "--dry-run"});
  ASSERT_EQ(dry.exit_code, 0) << dry.err;
  EXPECT_NE(dry.out.find("fanout: resume --dry-run: in '" + d.path.string() + "': fanout 'calibration_sleep' '--sleep_us=100'"), std::string::npos) << dry.out;
  EXPECT_NE(dry.out.find("resume --dry-run: 1 of 2 run(s) already COMPLETED; would run 1"), std::string::npos) << dry.out;
  EXPECT_NE(dry.out.find("fail_rank=0"), std::string::npos) << dry.out;
  EXPECT_EQ(dry.out.find("fail_rank=-1"), std::string::npos) << "the COMPLETED one is not shown: " << dry.out;
  EXPECT_EQ(query(db_of(d, "dr"), "SELECT count(*) FROM runs")[0][0], before) << "nothing run";
}

TEST(Cli, ReingestDoesNotDuplicateAndCsvCommandWorks) {
  test::TempDir d;
  ASSERT_EQ(fanout_cmd(d, {"calibration_copy", "--exp_name=re", "--iterations=5", "--ranks_per_node=[1,2]"}).exit_code, 0);
  auto before = query(db_of(d, "re"), "SELECT count(*) FROM samples")[0][0];
  auto again = fanout_cmd(d, {"results", "ingest", "results/re"});
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_NE(again.out.find("2 run(s) ingested"), std::string::npos) << again.out;
  EXPECT_EQ(query(db_of(d, "re"), "SELECT count(*) FROM samples")[0][0], before);
  auto csv = fanout_cmd(d, {"results", "csv", "results/re", "--out", "out"});
  ASSERT_EQ(csv.exit_code, 0) << csv.err;
  EXPECT_TRUE(fs::exists(d.path / "out" / "samples.csv"));
  EXPECT_EQ(test::line_count_summary(read_file(d.path / "out" / "samples.csv")), std::to_string(std::stoi(before) + 1));
}

// Ctrl-C (SIGINT), SIGTERM and a closed SSH session (SIGHUP) all stop a sweep the same way: the running job is
// cancelled, every run recorded, exit 130, and no rank outlives the driver.
void interrupt_cancels_and_records(int sig) {
  test::TempDir d;
  // With retries allowed: a cancelled run is never retried.
  pid_t pid = test::spawn_fanout(d.path, {"calibration_sleep", "--exp_name=int", "--hang_rank=0", "--sleep_us=[1,2]", "--max_retries=2"},
                                 d.path / "err.txt");
  ASSERT_GT(pid, 0);
  ASSERT_TRUE(test::wait_for_a_running_rank(d.path / "results", 120));
  kill(pid, sig);
  int st = 0;
  ASSERT_TRUE(test::wait_for([&] { return waitpid(pid, &st, WNOHANG) == pid; }, 30));
  EXPECT_EQ(test::exit_status(st), 130) << read_file(d.path / "err.txt");
  // The running job was cancelled; the one never started is recorded as such.
  auto rows = query(db_of(d, "int"), "SELECT status, reason FROM runs ORDER BY session");
  ASSERT_EQ(rows.size(), 2u) << "no retry of a cancelled run";
  EXPECT_EQ(read_file(d.path / "err.txt").find("retrying"), std::string::npos) << read_file(d.path / "err.txt");
  EXPECT_EQ(rows[0], (std::vector<std::string>{"CANCELLED", "cancelled"}));
  EXPECT_EQ(rows[1][0], "CANCELLED");
  EXPECT_NE(rows[1][1].find("not started"), std::string::npos) << rows[1][1];
  // The run never started is counted in one line, not listed: the running one is, once in the recap.
  const std::string err = read_file(d.path / "err.txt");
  EXPECT_NE(err.find("fanout: 1 run(s) not started recorded CANCELLED"), std::string::npos) << err;
  EXPECT_NE(err.find(", 2 did not (1 never started, the others listed below)"), std::string::npos) << err;
  EXPECT_NE(err.find("fanout: 1 attempt(s) did not complete"), std::string::npos) << err;
  EXPECT_EQ(err.find("sleep_us2-"), std::string::npos) << "the run never started has no line of its own\n" << err;
  EXPECT_TRUE(test::wait_for([&] { return test::run_command({"/usr/bin/pgrep", "-f", d.path.string() + "/results/int"}, "/").exit_code == 1; }, 10))
      << "a rank outlived the driver";
}

TEST(Cli, InterruptCancelsTheRunningJobAndRecordsIt) { interrupt_cancels_and_records(SIGINT); }
TEST(Cli, HangupCancelsAndRecordsLikeCtrlC) { interrupt_cancels_and_records(SIGHUP); }

// Laying out a big sweep's folders takes seconds: Ctrl-C stops it there, not after the last folder. The runs laid
// out are recorded CANCELLED, the driver says how many got no folder, no process is left, and resume plans them all.
TEST(Cli, InterruptWhileLayingOutFoldersStopsThere) {
  test::TempDir d;
  const int planned = 20000;
  std::string sleeps;
  for (int i = 0; i < 200; ++i) sleeps += (i ? "," : "") + std::to_string(i);
  pid_t pid = test::spawn_fanout(d.path, {"calibration_sleep", "--exp_name=lo", "--iterations=1", "--warmup=0", "--sleep_us=[" + sleeps + "]",
                                          "--repeat=100", "--max_parallel=1"},
                                 d.path / "err.txt");
  ASSERT_GT(pid, 0);
  auto folders = [&] {
    size_t n = 0;
    if (!fs::exists(d.path / "results" / "lo")) return n;
    for (auto& root : fs::directory_iterator(d.path / "results" / "lo"))
      if (root.is_directory() && root.path().filename().string().rfind("run-", 0) == 0)
        for (auto& run : fs::directory_iterator(root.path())) n += run.is_directory() ? 1 : 0;
    return n;
  };
  ASSERT_TRUE(test::wait_for([&] { return folders() > 0; }, 60));
  kill(pid, SIGINT);
  int st = 0;
  ASSERT_TRUE(test::wait_for([&] { return waitpid(pid, &st, WNOHANG) == pid; }, 120));
  const std::string err = read_file(d.path / "err.txt");
  EXPECT_EQ(test::exit_status(st), 130) << err;
  const auto at = err.find(" more not laid out");
  ASSERT_NE(at, std::string::npos) << err.substr(0, 2000);
  const size_t left = std::stoul(err.substr(err.rfind(' ', at - 1) + 1));
  const size_t laid = folders();
  EXPECT_GT(left, 0u);
  EXPECT_EQ(laid + left, size_t(planned)) << "every planned run has a folder or is counted as having none";
  EXPECT_EQ(query(db_of(d, "lo"), "SELECT count(*) FROM runs WHERE status = 'CANCELLED'")[0][0], std::to_string(laid));
  // None of them started: one line counts them, and the summary lists none.
  EXPECT_NE(err.find("fanout: " + std::to_string(laid) + " run(s) not started recorded CANCELLED"), std::string::npos) << err.substr(0, 2000);
  EXPECT_NE(err.find(" did not (" + std::to_string(laid) + " never started)"), std::string::npos) << err.substr(0, 2000);
  EXPECT_EQ(err.find("attempt(s) did not complete"), std::string::npos) << err.substr(0, 2000);
  EXPECT_TRUE(test::wait_for([&] { return test::run_command({"/usr/bin/pgrep", "-f", d.path.string() + "/results/lo"}, "/").exit_code == 1; }, 10))
      << "a rank outlived the driver";
  auto dry = fanout_cmd(d, {"resume", "results/lo", "--dry-run"});
  ASSERT_EQ(dry.exit_code, 0) << dry.err;
  EXPECT_NE(dry.out.find("0 of " + std::to_string(planned) + " run(s) already COMPLETED; would run " + std::to_string(planned)), std::string::npos)
      << dry.out.substr(0, 2000);
}

TEST(Cli, FailedRunsAreRetriedUpToMaxRetries) {
  test::TempDir d;
  // fail_rank=0 fails every attempt; fail_rank=-1 succeeds at once and is not retried.
  auto r = fanout_cmd(d, {"calibration_sleep", "--exp_name=retry", "--fail_rank=[-1,0]", "--iterations=2", "--max_retries=2"});
  EXPECT_EQ(r.exit_code, 1) << "one permutation failed after its retries";
  EXPECT_NE(r.err.find("(attempt 3 of 3)"), std::string::npos) << r.err;
  auto rows = query(db_of(d, "retry"), "SELECT p.value, r.status, count(*) FROM runs r JOIN parameters p ON p.run_id=r.id AND "
                                       "p.name='fail_rank' GROUP BY p.value, r.status ORDER BY p.value");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0], (std::vector<std::string>{"-1", "COMPLETED", "1"}));
  EXPECT_EQ(rows[1], (std::vector<std::string>{"0", "FAILED", "3"})) << "the first attempt and two retries";
  EXPECT_EQ(query(db_of(d, "retry"), "SELECT count(*) FROM provenance WHERE key='attempt' AND value='3'")[0][0], "1");
  EXPECT_NE(r.err.find("1/2 run(s) COMPLETED, 1 did not"), std::string::npos) << r.err;
}

// Issue 21 item 4: a sweep says what it submitted, what started where, how far it is (status lines in a log),
// and recaps every attempt that did not complete, with its logs, at the end.
TEST(Cli, ProgressShowsSubmissionsStartsStatusAndAFailureRecap) {
  test::TempDir d;
  auto r = fanout_cmd(d, {"calibration_sleep", "--exp_name=prog", "--fail_rank=[-1,0]", "--iterations=2", "--max_retries=1",
                          "--status_interval=600"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  const std::string ok = "calibration_sleep-sess-fail_rank-1-", bad = "calibration_sleep-sess-fail_rank0-";
  // One line per attempt, at its end, with its job and node (issue 52: not three); submissions and starts only
  // with --verbose.
  for (const std::string& s : {ok, bad}) {
    EXPECT_EQ(r.err.find("fanout: submitted " + s), std::string::npos) << s << "\n" << r.err;
    EXPECT_NE(r.err.find("fanout: " + s), std::string::npos) << s << "\n" << r.err;
  }
  EXPECT_EQ(r.err.find(" running (job "), std::string::npos) << r.err;
  const auto ok_line = r.err.find("fanout: " + ok);
  ASSERT_NE(ok_line, std::string::npos) << r.err;
  EXPECT_EQ(r.err.find("fanout: " + ok, ok_line + 1), std::string::npos) << "one line for the completed run: " << r.err;
  EXPECT_NE(r.err.find(" samples (job local-", ok_line), std::string::npos) << r.err;
  // Two runs: their own lines and no status line (issue 52: a status line for sweeps of more than 10 runs, or one
  // that has lasted a status interval: 600 s here, which it never does).
  EXPECT_EQ(r.err.find(" done | "), std::string::npos) << r.err;
  // Eleven runs: the first status line comes before any run has ended; counts exclude nothing and ETA waits for a run.
  auto many = fanout_cmd(d, {"calibration_sleep", "--exp_name=many", "--sleep_us=[1,2,3,4,5,6,7,8,9,10,11]", "--iterations=2",
                             "--status_interval=1"});
  EXPECT_EQ(many.exit_code, 0) << many.err;
  EXPECT_NE(many.err.find("fanout: [0/11 done | "), std::string::npos) << many.err;
  EXPECT_NE(many.err.find("ETA after the first run]"), std::string::npos) << many.err;
  // The recap: both attempts of the failing permutation, the first marked retried, each with where its logs are.
  const auto recap = r.err.find("fanout: 2 attempt(s) did not complete (why: each one's line above, and its logs):\n");
  ASSERT_NE(recap, std::string::npos) << r.err;
  const std::string tail = r.err.substr(recap);
  const auto first = tail.find("\n  " + bad), retry = tail.find("-retry1 FAILED; logs: ");
  ASSERT_NE(first, std::string::npos) << tail;
  ASSERT_NE(retry, std::string::npos) << tail;
  EXPECT_NE(tail.find("FAILED (retried); logs: "), std::string::npos) << tail;
  // Each reason once: live as the attempt ended, not again in the recap.
  EXPECT_EQ(tail.find("exited with code 3"), std::string::npos) << tail;
  EXPECT_NE(tail.find("logs: " + (d.path / "results" / "prog").string()), std::string::npos) << tail;
  EXPECT_EQ(tail.find(ok), std::string::npos) << "a completed run is not in the recap";
  // --status_interval=0: no status line in a log.
  auto quiet = fanout_cmd(d, {"calibration_sleep", "--exp_name=quiet", "--iterations=2", "--status_interval=0"});
  EXPECT_EQ(quiet.exit_code, 0) << quiet.err;
  EXPECT_EQ(quiet.err.find(" done | "), std::string::npos) << quiet.err;
}

// On a terminal the status is one line redrawn in place (carriage return + erase line), and the last one stays.
TEST(Cli, OnATerminalTheStatusLineIsRedrawnInPlace) {
  test::TempDir d;
  // script(1) (util-linux, in every Debian) gives the driver a pseudo-terminal; the command is ours, not user input.
  const std::string cmd = test::build_dir().string() + "/fanout calibration_sleep --exp_name=tty --sleep_us=[1,2,3,4,5,6,7,8,9,10,11] --iterations=3";
  auto r = test::run_command({"script", "-qfec", cmd, "/dev/null"}, d.path);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("\r\033[K[0/11 done | "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\r\033[K[11/11 done | 0 running | 0 pending | "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("11/11 run(s) COMPLETED"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("fanout: [0/11"), std::string::npos) << "no log-style status lines on a terminal";
  // Two quick runs (at most 10): their lines only, no status line to redraw (--status_interval=600: it never lasts that).
  const std::string few = test::build_dir().string() + "/fanout calibration_sleep --exp_name=few --sleep_us=[1000,2000] --iterations=3 --status_interval=600";
  auto f = test::run_command({"script", "-qfec", few, "/dev/null"}, d.path);
  EXPECT_EQ(f.exit_code, 0) << f.out << f.err;
  EXPECT_EQ(f.out.find(" done | "), std::string::npos) << f.out;
  EXPECT_NE(f.out.find("2/2 run(s) COMPLETED"), std::string::npos) << f.out;
}

// Issue 21 item 2: an experiment declares the parameters it uses; its help lists only those (typed, grouped apart
// from the driver's options, with an example), another experiment's parameter is refused by name, and dry-run
// lines show only what it uses.
TEST(Cli, AnExperimentShowsAndTakesOnlyTheParametersItUses) {
  test::TempDir d;
  auto help = fanout_cmd(d, {"throughput_standard", "--help"});
  ASSERT_EQ(help.exit_code, 0) << help.err;
  const auto bench = help.out.find("Benchmark parameters"), driver = help.out.find("Runs: where they go, how many, in which order:"), example = help.out.find("Example:\n  fanout throughput_standard ");
  ASSERT_NE(bench, std::string::npos) << help.out;
  ASSERT_NE(driver, std::string::npos) << help.out;
  ASSERT_NE(example, std::string::npos) << help.out;
  EXPECT_LT(bench, driver);
  EXPECT_NE(help.out.find("--tensor_bytes INT=[1024,"), std::string::npos) << help.out;
  for (const char* other : {"--device", "--batch_size", "--model_dir", "--fs_dir", "--net_type", "--nodes "})
    EXPECT_EQ(help.out.find(other), std::string::npos) << other << " is not throughput_standard's";
  EXPECT_EQ(help.out.find(" in ["), std::string::npos) << "no CLI11 range artefacts";
  auto inference = fanout_cmd(d, {"inference_standard", "--help"});
  EXPECT_NE(inference.out.find("--device TEXT=GPU"), std::string::npos) << inference.out;
  auto refused = fanout_cmd(d, {"throughput_standard", "--device=CPU", "--dry-run"});
  EXPECT_EQ(refused.exit_code, 2);
  EXPECT_NE(refused.err.find("fanout: error: --device: throughput_standard does not use this parameter (inference_standard, inference_colocated do); "
                             "its parameters: db_nodes, db_cpus, client_nodes,"), std::string::npos) << refused.err;
  auto dry = fanout_cmd(d, {"throughput_standard", "--client_nodes=1", "--clients_per_node=2", "--tensor_bytes=1024", "--db_nodes=1", "--dry-run"});
  ASSERT_EQ(dry.exit_code, 0) << dry.err;
  const std::string first = dry.out.substr(dry.out.find("[1/"), dry.out.find('\n', dry.out.find("[1/")) - dry.out.find("[1/"));
  EXPECT_NE(first.find(" tensor_bytes=1024"), std::string::npos) << first;
  EXPECT_EQ(first.find("device="), std::string::npos) << first;
  // A plugin that declares nothing (parameter_serving) keeps every parameter; calibration's experiments each
  // take their own size parameter only.
  EXPECT_NE(fanout_cmd(d, {"parameter_serving", "--help"}).out.find("--mcast_rate"), std::string::npos);
  EXPECT_EQ(fanout_cmd(d, {"calibration_sleep", "--help"}).out.find("--copy_bytes"), std::string::npos);
  // An experiment file meets the same check, through the same code, naming where it gave the parameter.
  std::ofstream(d.path / "unused.toml") << "[experiment]\nname = \"u\"\nplugin = \"calibration\"\ntemplate = \"calibration_copy\"\n"
                                           "[parameters]\nsleep_us = 5\n";
  auto filed = fanout_cmd(d, {"run", (d.path / "unused.toml").string(), "--dry-run"});
  EXPECT_EQ(filed.exit_code, 2);
  EXPECT_NE(filed.err.find("unused.toml:6"), std::string::npos) << filed.err;
  EXPECT_NE(filed.err.find("calibration_copy does not use this parameter (calibration_sleep, calibration_sweep do)"), std::string::npos)
      << filed.err;
  auto copy = fanout_cmd(d, {"calibration_copy", "--sleep_us=5", "--dry-run"});
  EXPECT_EQ(copy.exit_code, 2);
  EXPECT_NE(copy.err.find("--sleep_us: calibration_copy does not use this parameter (calibration_sleep, calibration_sweep do)"),
            std::string::npos) << copy.err;
  // What is stored and exported holds its parameters only: the CSV columns and run.toml of a calibration_copy sweep.
  ASSERT_EQ(fanout_cmd(d, {"calibration_copy", "--exp_name=cols", "--iterations=2", "--copy_bytes=[1024,2048]"}).exit_code, 0);
  for (const char* csv : {"runs.csv", "samples.csv", "statistics.csv"}) {
    const std::string text = read_file(d.path / "results" / "cols" / "csv" / csv);
    const std::string header = text.substr(0, text.find('\n'));
    EXPECT_NE(header.find(",copy_bytes,"), std::string::npos) << csv << ": " << header;
    EXPECT_EQ(header.find("sleep_us"), std::string::npos) << csv << ": " << header;
  }
}

// Issue 40: resume counts repeats: a sweep repeated twice, then asked for three with --resume, runs only the
// third repeat of each permutation; each run's provenance says which repeat it is.
TEST(Cli, ResumeWithRepeatsRunsOnlyTheMissingPairs) {
  test::TempDir d;
  ASSERT_EQ(fanout_cmd(d, {"calibration_sleep", "--exp_name=rep", "--sleep_us=[1000,2000]", "--iterations=3", "--repeat=2"}).exit_code, 0);
  EXPECT_EQ(query(db_of(d, "rep"), "SELECT count(*) FROM runs WHERE status='COMPLETED'")[0][0], "4");
  auto r = fanout_cmd(d, {"calibration_sleep", "--exp_name=rep", "--sleep_us=[1000,2000]", "--iterations=3", "--repeat=3", "--resume"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("4 of 6 permutation(s) already COMPLETED; running 2"), std::string::npos) << r.err;
  EXPECT_EQ(query(db_of(d, "rep"), "SELECT count(*) FROM runs WHERE status='COMPLETED'")[0][0], "6");
  EXPECT_EQ(query(db_of(d, "rep"), "SELECT count(DISTINCT param_hash) FROM runs")[0][0], "6");
  EXPECT_EQ(query(db_of(d, "rep"), "SELECT group_concat(value, ' ') FROM (SELECT value FROM provenance WHERE key='repeat' ORDER BY run_id)")[0][0],
            "1/2 1/2 2/2 2/2 3/3 3/3");
  // Repeats are not parameters: the statistics' parameters are the sweep's, and across_runs.csv rests on 3 runs each.
  const std::string across = read_file(d.path / "results/rep/csv/across_runs.csv");
  EXPECT_EQ(across.substr(0, across.find('\n')).find("repeat"), std::string::npos) << across;
  EXPECT_NE(across.find(",sleep,sleep,us,3,9,"), std::string::npos) << across;
  // The report says it too: a table of the figures across each permutation's runs.
  ASSERT_EQ(fanout_cmd(d, {"process_scaling_results", "results/rep"}).exit_code, 0);
  const std::string report = read_file(d.path / "results/rep/processed/report.html");
  EXPECT_NE(report.find("<h2 id=\"across-runs\">Across runs</h2>"), std::string::npos);
  EXPECT_NE(report.find("<td>3</td><td>9</td></tr>"), std::string::npos) << "3 runs and 9 samples of a sleep figure";
}

TEST(Cli, ResumeAfterTheDriverIsKilledRunsEachMissingPermutationOnce) {
  test::TempDir d;
  // Six runs of about half a second each, one at a time; the driver is SIGKILLed (no chance to clean up) once
  // two have completed.
  pid_t pid = test::spawn_fanout(d.path, {"calibration_sleep", "--exp_name=kill", "--sleep_us=[20000,20001,20002,20003,20004,20005]",
                                          "--iterations=20"},
                                 d.path / "err.txt");
  ASSERT_GT(pid, 0);
  ASSERT_TRUE(test::wait_for(
      [&] {
        auto rows = test::sql_rows_while_polling(db_of(d, "kill"), "SELECT count(*) FROM runs WHERE status='COMPLETED'");
        return !rows.empty() && std::stoi(rows[0][0]) >= 2;
      },
      60));
  kill(pid, SIGKILL);
  int st = 0;
  waitpid(pid, &st, 0);
  auto before = std::stoi(query(db_of(d, "kill"), "SELECT count(*) FROM runs WHERE status='COMPLETED'")[0][0]);
  ASSERT_LT(before, 6) << "the driver was killed mid-sweep";

  auto r = fanout_cmd(d, {"resume", "results/kill"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("fanout: resume: " + std::to_string(before)), std::string::npos) << r.err;
  // Every permutation exactly once COMPLETED, with exactly its samples: 20 measured + 3 warmup + 1 rendezvous, and the
  // rank's 8 resource.* figures.
  auto per_hash = query(db_of(d, "kill"), "SELECT param_hash, count(*) FROM runs WHERE status='COMPLETED' GROUP BY param_hash");
  ASSERT_EQ(per_hash.size(), 6u);
  for (auto& row : per_hash) EXPECT_EQ(row[1], "1") << row[0];
  EXPECT_EQ(query(db_of(d, "kill"), "SELECT count(*) FROM samples s JOIN runs r ON r.id=s.run_id WHERE r.status='COMPLETED'")[0][0],
            std::to_string(6 * (24 + 8)));
  // Nothing left to do: a second resume runs nothing.
  auto again = fanout_cmd(d, {"resume", "results/kill"});
  ASSERT_EQ(again.exit_code, 0) << again.err;
  EXPECT_NE(again.err.find("6 of 6 permutation(s) already COMPLETED; running 0"), std::string::npos) << again.err;
  auto bad = fanout_cmd(d, {"resume", "results/nope"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("no command.toml"), std::string::npos) << bad.err;
}

TEST(Cli, StallTimeoutStopsARunWhoseRanksStopRecordingAndSparesOneThatProgresses) {
  test::TempDir d;
  // hang_rank=0: the rank records its rendezvous, then waits forever; hang_rank=-1 records every 100 ms for
  // about 12 s, longer than the stall timeout, and must complete. 8 s leaves a loaded machine room to start a
  // rank and flush its samples (at least every second) without looking stalled.
  auto r = fanout_cmd(d, {"calibration_sleep", "--exp_name=stall", "--hang_rank=[0,-1]", "--sleep_us=100000", "--iterations=120",
                          "--warmup=0", "--stall_timeout=8", "--walltime=600"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  auto rows = query(db_of(d, "stall"), "SELECT p.value, r.status, r.reason, r.ended_at - r.started_at FROM runs r JOIN parameters p "
                                       "ON p.run_id=r.id AND p.name='hang_rank' ORDER BY p.value");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0][0], "-1");
  EXPECT_EQ(rows[0][1], "COMPLETED") << rows[0][2];
  EXPECT_EQ(rows[1][1], "TIMEOUT");
  EXPECT_NE(rows[1][2].find("no rank recorded a sample for 8 s (--stall_timeout)"), std::string::npos) << rows[1][2];
  EXPECT_LT(std::stod(rows[1][3]), 60) << "stopped by the stall timeout, long before the 600 s wall time";
  const auto left = test::processes_left((d.path / "results" / "stall").string(), 60);
  EXPECT_TRUE(left.empty()) << "left behind: " << (left.empty() ? "" : left.front());
}

TEST(Cli, TwoDriversWritingOneExperimentNeverSeeALockedDatabase) {
  test::TempDir d;
  const std::vector<std::string> common = {"calibration_sleep", "--exp_name=both", "--iterations=5", "--warmup=0"};
  auto args_with = [&](const std::string& list) {
    auto a = common;
    a.push_back("--sleep_us=" + list);
    return a;
  };
  pid_t a = test::spawn_fanout(d.path, args_with("[100,101,102,103,104,105]"), d.path / "a.txt");
  pid_t b = test::spawn_fanout(d.path, args_with("[200,201,202,203,204,205]"), d.path / "b.txt");
  ASSERT_GT(a, 0);
  ASSERT_GT(b, 0);
  int sa = 0, sb = 0;
  bool a_done = false, b_done = false;  // a status of 0 cannot say "reaped"
  ASSERT_TRUE(test::wait_for([&] {
    a_done = a_done || waitpid(a, &sa, WNOHANG) == a;
    b_done = b_done || waitpid(b, &sb, WNOHANG) == b;
    return a_done && b_done;
  }, 120));
  const std::string ea = read_file(d.path / "a.txt"), eb = read_file(d.path / "b.txt");
  EXPECT_EQ(test::exit_status(sa), 0) << ea;
  EXPECT_EQ(test::exit_status(sb), 0) << eb;
  EXPECT_EQ((ea + eb).find("locked"), std::string::npos) << ea << eb;
  EXPECT_EQ(query(db_of(d, "both"), "SELECT count(*), count(DISTINCT param_hash) FROM runs WHERE status='COMPLETED'")[0],
            (std::vector<std::string>{"12", "12"}));
  // Each driver has its own run folder, even when both start within the same second.
  std::set<std::string> roots;
  for (auto& row : query(db_of(d, "both"), "SELECT path FROM runs")) roots.insert(fs::path(row[0]).parent_path().string());
  EXPECT_EQ(roots.size(), 2u);
  EXPECT_EQ(query(db_of(d, "both"), "SELECT count(*) FROM samples")[0][0], std::to_string(12 * (6 + 8))) << "5 iterations + 1 rendezvous + 8 resource figures each";
}

// `fanout ls`: every experiment under a results folder with its runs by status, newest last; a folder that is not
// there is a usage error, an unreadable database an error naming it (exit 1) while the others are still listed.
TEST(Cli, LsListsExperimentsWithTheirRunsByStatus) {
  test::TempDir d;
  ASSERT_EQ(fanout_cmd(d, {"calibration_sleep", "--exp_name=good", "--iterations=2", "--sleep_us=[10,20]"}).exit_code, 0);
  ASSERT_EQ(fanout_cmd(d, {"calibration_sleep", "--exp_name=mixed", "--iterations=2", "--ranks_per_node=2", "--fail_rank=[-1,1]"}).exit_code, 1);
  // A retried attempt is superseded (issue 52): counted apart, not as a failure still to run.
  ASSERT_EQ(fanout_cmd(d, {"calibration_sleep", "--exp_name=retried", "--iterations=2", "--ranks_per_node=2", "--fail_rank=[-1,1]",
                           "--max_retries=1"}).exit_code, 1);
  auto r = fanout_cmd(d, {"ls"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::istringstream lines(r.out);
  std::vector<std::vector<std::string>> rows;
  for (std::string line; std::getline(lines, line);) {
    std::istringstream words(line);
    std::vector<std::string> w;
    for (std::string x; words >> x;) w.push_back(x);
    rows.push_back(w);
  }
  ASSERT_EQ(rows.size(), 4u) << r.out;  // header + three experiments, the latest last
  EXPECT_EQ(rows[0], (std::vector<std::string>{"EXPERIMENT", "RUNS", "COMPLETED", "FAILED", "OTHER", "SUPERSEDED", "LAST", "END", "(UTC)", "REPORT"}));
  EXPECT_EQ(std::vector<std::string>(rows[1].begin(), rows[1].begin() + 6), (std::vector<std::string>{"good", "2", "2", "0", "0", "0"})) << r.out;
  EXPECT_EQ(std::vector<std::string>(rows[2].begin(), rows[2].begin() + 6), (std::vector<std::string>{"mixed", "2", "1", "1", "0", "0"})) << r.out;
  EXPECT_EQ(std::vector<std::string>(rows[3].begin(), rows[3].begin() + 6), (std::vector<std::string>{"retried", "3", "1", "1", "0", "1"})) << r.out;
  EXPECT_NE(rows[2][6].find('T'), std::string::npos) << "an ISO time of the last end: " << r.out;

  fs::create_directories(d.path / "results" / "broken");
  std::ofstream(d.path / "results" / "broken" / "fanout.sqlite") << "not a database";
  auto bad = fanout_cmd(d, {"ls", "results"});
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.err.find("broken/fanout.sqlite"), std::string::npos) << bad.err;
  EXPECT_NE(bad.out.find("mixed"), std::string::npos) << "the readable ones are still listed";
  auto none = fanout_cmd(d, {"ls", "no-such-folder"});
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_NE(none.err.find("no-such-folder: not a folder"), std::string::npos) << none.err;
}

// The local launcher starts processes on this host: allocation options it cannot honour are refused, one test per
// flag, before anything is written (a run without them would not be what was asked).
TEST(Cli, AllocationOptionsTheLocalLauncherCannotHonourAreRefused) {
  test::TempDir d;
  for (const std::string flag : {"--partition=debug", "--account=proj", "--constraint=bigmem", "--exclusive", "--batch_args=qos=high"}) {
    auto r = fanout_cmd(d, {"calibration_sleep", "--exp_name=loc", "--iterations=1", flag});
    EXPECT_EQ(r.exit_code, 2) << flag;
    EXPECT_NE(r.err.find("fanout: error: " + flag.substr(0, flag.find('=')) + ": the local launcher cannot honour it"), std::string::npos)
        << flag << ": " << r.err;
    EXPECT_FALSE(fs::exists(d.path / "results" / "loc")) << flag;
  }
  // A dry run refuses the same, though it contacts no scheduler.
  auto dry = fanout_cmd(d, {"calibration_sleep", "--exclusive", "--dry-run"});
  EXPECT_EQ(dry.exit_code, 2);
  EXPECT_NE(dry.err.find("--exclusive: the local launcher cannot honour it"), std::string::npos) << dry.err;
  auto pbs = fanout_cmd(d, {"calibration_sleep", "--launcher=pbs", "--constraint=bigmem", "--dry-run"});
  EXPECT_EQ(pbs.exit_code, 2);
  EXPECT_NE(pbs.err.find("--constraint: the pbs launcher cannot honour it"), std::string::npos) << pbs.err;
}

// rank_resources: what every rank got to run on, as it saw it (its CPU affinity, its GPUs from the environment
// a launcher sets), one row per rank.
TEST(Cli, EachRanksCpusAndGpusAreRecorded) {
  test::TempDir d;
  auto r = test::run_command({test::fanout_exe().string(), "calibration_sleep", "--exp_name=res", "--ranks_per_node=2", "--iterations=2"},
                             d.path, {{"CUDA_VISIBLE_DEVICES", "3,5"}}, 120);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  cpu_set_t set;
  ASSERT_EQ(sched_getaffinity(0, sizeof set, &set), 0);
  std::vector<int> mine;
  for (int c = 0; c < CPU_SETSIZE; ++c)
    if (CPU_ISSET(c, &set)) mine.push_back(c);
  ASSERT_FALSE(mine.empty());
  // This process's CPUs are what the ranks inherit here (no binding): as ranges.
  std::string expect;
  for (size_t i = 0; i < mine.size();) {
    size_t j = i;
    while (j + 1 < mine.size() && mine[j + 1] == mine[j] + 1) ++j;
    expect += (expect.empty() ? "" : ",") + std::to_string(mine[i]) + (j > i ? "-" + std::to_string(mine[j]) : "");
    i = j + 1;
  }
  auto rows = test::sql_rows(d.path / "results" / "res" / "fanout.sqlite", "SELECT role, rank, cpus, gpus FROM rank_resources ORDER BY rank");
  ASSERT_EQ(rows.size(), 2u);
  for (size_t k = 0; k < rows.size(); ++k) {
    EXPECT_EQ(rows[k][0], "sleep");
    EXPECT_EQ(rows[k][1], std::to_string(k));
    EXPECT_EQ(rows[k][2], expect);
    EXPECT_EQ(rows[k][3], "3,5");
  }
}

// Per-step resources (ABI 4.3; [[steps]] keys in experiment files). The local launcher hands each rank its share of
// this host's GPUs (CUDA_VISIBLE_DEVICES) and refuses what it cannot give; a Slurm dry run shows each in the job
// script; bad values name the file and line.
TEST(Cli, StepResourcesAreGivenOrRefused) {
  test::TempDir d;
  auto file = [&](const std::string& name, const std::string& keys) {
    write_file_atomic(d.path / (name + ".toml"), "[experiment]\nplugin = \"calibration\"\n[parameters]\niterations = 1\n"
                                                 "[[steps]]\nrole = \"sleep\"\nnodes = 1\ntasks_per_node = 2\n" + keys);
    return (d.path / (name + ".toml")).string();
  };
  auto with_gpus = [&](const std::string& gpus, std::vector<std::string> args) {
    args.insert(args.begin(), test::fanout_exe().string());
    return test::run_command(args, d.path, {{"CUDA_VISIBLE_DEVICES", gpus}}, 120);
  };
  auto r = with_gpus("3,5,7,9", {"run", file("gpus", "gpus_per_task = 2\n")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto rows = query(db_of(d, "gpus"), "SELECT rank, gpus FROM rank_resources ORDER BY rank");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0], (std::vector<std::string>{"0", "3,5"}));
  EXPECT_EQ(rows[1], (std::vector<std::string>{"1", "7,9"}));
  write_file_atomic(d.path / "two.toml", "[experiment]\nplugin = \"calibration\"\n[parameters]\niterations = 1\n"
                                         "[[steps]]\nrole = \"sleep\"\nnodes = 2\ntasks_per_node = 1\ngpus_per_task = 1\n");
  auto two = with_gpus("3,5", {"run", (d.path / "two.toml").string()});
  EXPECT_EQ(two.exit_code, 2);
  EXPECT_NE(two.err.find("more than one step or node asks GPUs on this host, and the local launcher hands out none"), std::string::npos) << two.err;
  auto few = with_gpus("3", {"run", file("few", "gpus_per_task = 2\n")});
  EXPECT_EQ(few.exit_code, 2);
  EXPECT_NE(few.err.find("its steps ask 4 GPU(s) on a node and this host shows 1"), std::string::npos) << few.err;
  EXPECT_FALSE(fs::exists(d.path / "results" / "few"));
  const std::pair<std::string, std::string> refused[] = {{"memory_mb = 100\n", "asks 100 MB per node"},
                                                         {"binding = \"cores\"\n", "asks binding cores"},
                                                         {"exclusive = true\n", "asks CPUs of its own (exclusive)"}};
  for (auto& [keys, says] : refused) {
    auto x = fanout_cmd(d, {"run", file("refused", keys)});
    EXPECT_EQ(x.exit_code, 2) << keys;
    EXPECT_NE(x.err.find("step 'sleep' " + says + ", which the local launcher cannot give it"), std::string::npos) << x.err;
    EXPECT_FALSE(fs::exists(d.path / "results" / "refused")) << keys;
  }
  EXPECT_EQ(fanout_cmd(d, {"run", file("none", "binding = \"none\"\n")}).exit_code, 0) << "no binding is what local gives";
  const std::pair<std::string, std::string> bad[] = {
      {"binding = \"sideways\"\n", "bad.toml:9: binding 'sideways' is not cores, none or map:<cpu>,<cpu>,..."},
      {"gpus_per_task = -1\n", "bad.toml:9: expected an integer >= 0"},
      {"memory_mb = \"{n} if\"\n", "bad.toml:9: expected an integer >= 0"},
      {"exclusive = 1\n", "bad.toml:9: exclusive must be true or false"},
      {"gpu_per_task = 1\n", "bad.toml:9: unknown step key 'gpu_per_task'"}};
  for (auto& [keys, says] : bad) {
    auto x = fanout_cmd(d, {"run", file("bad", keys), "--dry-run"});
    EXPECT_EQ(x.exit_code, 2) << keys;
    EXPECT_NE(x.err.find(says), std::string::npos) << x.err;
  }
  // For Slurm: the job asks the node's sum (--gres, --mem) and each step its own; --binding fills in for steps that
  // say nothing.
  auto slurm = fanout_cmd(d, {"run", file("slurm", "gpus_per_task = 2\nmemory_mb = 500\nbinding = \"map:0,1\"\nexclusive = true\n"),
                              "--launcher=slurm", "--dry-run"});
  ASSERT_EQ(slurm.exit_code, 0) << slurm.err;
  for (const char* line : {"#SBATCH --gres=gpu:4\n", "#SBATCH --mem=500\n", "'--gpus-per-task=2'", "'--mem=500'", "'--cpu-bind=map_cpu:0,1'", "'--exclusive'"})
    EXPECT_NE(slurm.out.find(line), std::string::npos) << line << "\n" << slurm.out;
  EXPECT_EQ(slurm.out.find("'--overlap'"), std::string::npos);
  auto bound = fanout_cmd(d, {"run", file("plain", ""), "--launcher=slurm", "--binding=cores", "--dry-run"});
  ASSERT_EQ(bound.exit_code, 0) << bound.err;
  EXPECT_NE(bound.out.find("'--cpu-bind=cores'"), std::string::npos) << bound.out;
  // --mpi shapes mpirun's command line: where steps start otherwise it is refused (a site's default is not).
  auto mpi = fanout_cmd(d, {"run", file("plain", ""), "--launcher=slurm", "--mpi=mpich", "--dry-run"});
  EXPECT_EQ(mpi.exit_code, 2);
  EXPECT_NE(mpi.err.find("--mpi: the slurm launcher starts steps with srun, not with mpirun: nothing would take it"), std::string::npos) << mpi.err;
  write_file_atomic(d.path / "pals.toml", "[settings]\nmpi = \"pals\"\n");
  EXPECT_EQ(fanout_cmd(d, {"run", file("plain", ""), "--launcher=slurm", "--site=" + (d.path / "pals.toml").string(), "--dry-run"}).exit_code, 0);
  auto wrong = fanout_cmd(d, {"run", file("plain", ""), "--binding=sideways", "--dry-run"});
  EXPECT_EQ(wrong.exit_code, 2);
  EXPECT_NE(wrong.err.find("--binding: 'sideways' is not cores, none"), std::string::npos) << wrong.err;
}

// A site profile's [settings] and [parameters] fill in what the experiment file and command line leave open; the
// command line wins; keys that are not settings are refused with file:line.
TEST(Cli, ASiteProfileGivesDefaultsTheCommandLineOverrides) {
  test::TempDir d;
  write_file_atomic(d.path / "site.toml", "[settings]\nlauncher = \"slurm\"\npartition = \"gpu\"\nbatch_args = [\"qos=normal\"]\n"
                                          "binding = \"cores\"\n[parameters]\nnet_ifname = \"lo\"\nsleep_us = 123\n");
  const std::string site = "--site=" + (d.path / "site.toml").string();
  auto dry = fanout_cmd(d, {"throughput_standard", "--db_nodes=1", "--client_nodes=1", "--tensor_bytes=1024", site, "--dry-run"});
  ASSERT_EQ(dry.exit_code, 0) << dry.err;
  for (const char* line : {"launcher slurm", "#SBATCH --partition=gpu\n", "#SBATCH --qos=normal\n", "'--cpu-bind=cores'", "net_ifname=lo"})
    EXPECT_NE(dry.out.find(line), std::string::npos) << line << "\n" << dry.out;
  auto over = fanout_cmd(d, {"throughput_standard", "--db_nodes=1", "--client_nodes=1", "--tensor_bytes=1024", "--partition=debug",
                             "--net_ifname=eth9", site, "--dry-run"});
  ASSERT_EQ(over.exit_code, 0) << over.err;
  EXPECT_NE(over.out.find("#SBATCH --partition=debug\n"), std::string::npos) << over.out;
  EXPECT_EQ(over.out.find("--partition=gpu"), std::string::npos) << over.out;
  EXPECT_NE(over.out.find("net_ifname=eth9"), std::string::npos) << over.out;
  auto show = fanout_cmd(d, {"site", "show", site});
  ASSERT_EQ(show.exit_code, 0) << show.err;
  EXPECT_NE(show.out.find("partition = gpu\n"), std::string::npos) << show.out;
  EXPECT_NE(show.out.find("net_ifname = lo\n"), std::string::npos) << show.out;
  write_file_atomic(d.path / "bad.toml", "[settings]\nlaunchr = \"slurm\"\n");
  auto bad = fanout_cmd(d, {"site", "show", "--site=" + (d.path / "bad.toml").string()});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("bad.toml:2: settings.launchr: not a setting a site gives"), std::string::npos) << bad.err;
}

// SmartSim-Scaling gives its database job and its application apart: db_hosts, db_node_feature (a dict), node_feature
// and wall_time (the database's). Here: --service_hosts/--service_args/--node_feature/--service_walltime, with those
// names as aliases, for the shared step's service job and the runs' jobs respectively. Refused where nothing takes them.
TEST(Cli, TheServiceJobAndTheRunsJobsTakeOptionsApart) {
  test::TempDir d;
  auto dry = fanout_cmd(d, {"throughput_standard", "--launcher=slurm", "--db_nodes=1", "--client_nodes=1", "--tensor_bytes=1024",
                            "--db_hosts=n3", "--db_node_feature={\"constraint\": \"vnode\", \"qos\": \"high\"}",
                            "--node_feature=constraint=fast", "--wall_time=00:30:00", "--dry-run"});
  ASSERT_EQ(dry.exit_code, 0) << dry.err;
  const size_t service = dry.out.find("# ---- job script for service "), run = dry.out.find("# ---- job script for throughput");
  ASSERT_NE(service, std::string::npos) << dry.out;
  ASSERT_NE(run, std::string::npos) << dry.out;
  const std::string db_script = dry.out.substr(service, run - service), run_script = dry.out.substr(run);
  for (const char* line : {"#SBATCH --nodelist=n3\n", "#SBATCH --constraint=vnode\n", "#SBATCH --qos=high\n", "#SBATCH --time=30\n"})
    EXPECT_NE(db_script.find(line), std::string::npos) << line << "\n" << db_script;
  EXPECT_NE(run_script.find("#SBATCH --constraint=fast\n"), std::string::npos) << run_script;
  EXPECT_EQ(run_script.find("--nodelist"), std::string::npos) << run_script;
  EXPECT_EQ(run_script.find("--qos"), std::string::npos) << run_script;
  // The same from an experiment file, under SmartSim-Scaling's key.
  write_file_atomic(d.path / "svc.toml", "[experiment]\nplugin = \"smartsim\"\ntemplate = \"throughput_standard\"\nlauncher = \"slurm\"\n"
                                         "db_hosts = \"n4\"\n[parameters]\ndb_nodes = 1\nclient_nodes = 1\ntensor_bytes = 1024\n");
  auto filed = fanout_cmd(d, {"run", (d.path / "svc.toml").string(), "--dry-run"});
  ASSERT_EQ(filed.exit_code, 0) << filed.err;
  EXPECT_NE(filed.out.find("#SBATCH --nodelist=n4\n"), std::string::npos) << filed.out;
  // Nothing takes them: an experiment without a service job, a launcher that cannot place jobs, a bad dict.
  auto none = fanout_cmd(d, {"inference_standard", "--launcher=slurm", "--device=CPU", "--db_hosts=n3", "--dry-run"});
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_NE(none.err.find("--service_hosts (--db_hosts): this experiment starts no service job"), std::string::npos) << none.err;
  auto local = fanout_cmd(d, {"throughput_standard", "--db_nodes=1", "--client_nodes=1", "--db_hosts=n3", "--dry-run"});
  EXPECT_EQ(local.exit_code, 2);
  EXPECT_NE(local.err.find("--service_hosts (--db_hosts): the local launcher cannot place a job on given nodes"), std::string::npos) << local.err;
  auto runs_local = fanout_cmd(d, {"calibration_sleep", "--node_feature=constraint=fast", "--dry-run"});
  EXPECT_EQ(runs_local.exit_code, 2);
  EXPECT_NE(runs_local.err.find("--constraint: the local launcher cannot honour it"), std::string::npos) << runs_local.err;
  auto bad = fanout_cmd(d, {"throughput_standard", "--launcher=slurm", "--db_node_feature={\"constraint\": [1]}", "--dry-run"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--service_args (--db_node_feature): option 'constraint' needs a string or integer value"), std::string::npos) << bad.err;
}

// Issue 38, first contact. The local launcher starts every rank on this host: a sweep that would start more than
// --max_local_ranks (default 8 per usable CPU) at once is refused before anything is written, dry run included,
// naming the run and the limit; the limit can be raised.
TEST(FirstContact, LocalRunsOfMoreRanksThanTheHostTakesAreRefused) {
  test::TempDir d;
  cpu_set_t set;
  CPU_ZERO(&set);
  ASSERT_EQ(sched_getaffinity(0, sizeof set, &set), 0);
  const int over = 8 * CPU_COUNT(&set) + 1;  // one rank per node: one more than the default allows
  for (bool dry : {true, false}) {
    std::vector<std::string> args = {"calibration_sleep", "--exp_name=big", "--nodes=" + std::to_string(over), "--iterations=1"};
    if (dry) args.push_back("--dry-run");
    auto r = fanout_cmd(d, args);
    EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
    EXPECT_NE(r.err.find(std::to_string(over) + " ranks on this host (the default --launcher=local)"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("more than --max_local_ranks=" + std::to_string(over - 1)), std::string::npos) << r.err;
    EXPECT_LT(r.out.size(), 10u) << "a refused dry run prints no runs";
    EXPECT_FALSE(fs::exists(d.path / "results" / "big"));
  }
  auto raised = fanout_cmd(d, {"calibration_sleep", "--nodes=" + std::to_string(over), "--max_local_ranks=" + std::to_string(over), "--dry-run"});
  EXPECT_EQ(raised.exit_code, 0) << raised.err;
  // Runs that go together count together: two runs of 3 ranks at once against a limit of 5.
  auto together = fanout_cmd(d, {"calibration_sleep", "--ranks_per_node=3", "--sleep_us=[1,2]", "--max_parallel=2", "--max_local_ranks=5", "--dry-run"});
  EXPECT_EQ(together.exit_code, 2);
  EXPECT_NE(together.err.find("6 ranks on this host"), std::string::npos) << together.err;
  EXPECT_NE(together.err.find("2 runs at once (--max_parallel)"), std::string::npos) << together.err;
}

// Inside a batch allocation (SLURM_JOB_ID set, as sbatch sets it) a sweep whose launcher nobody chose runs in it,
// and says so before anything starts; an explicit --launcher=local is kept. A dry run contacts nothing.
TEST(FirstContact, InsideAnAllocationTheDefaultLauncherIsTheAllocation) {
  test::TempDir d;
  const std::vector<std::pair<std::string, std::string>> inside = {{"SLURM_JOB_ID", "4242"}};
  auto r = test::run_command({test::fanout_exe().string(), "calibration_sleep", "--nodes=2", "--dry-run"}, d.path, inside, 60);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("inside slurm job 4242: runs start as steps of that allocation"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("launcher slurm"), std::string::npos) << r.out.substr(0, 300);
  EXPECT_NE(r.out.find("srun"), std::string::npos) << "steps start with srun in the allocation";
  auto local = test::run_command({test::fanout_exe().string(), "calibration_sleep", "--launcher=local", "--dry-run"}, d.path, inside, 60);
  ASSERT_EQ(local.exit_code, 0) << local.err;
  EXPECT_EQ(local.err.find("inside slurm job"), std::string::npos) << local.err;
  EXPECT_NE(local.out.find("launcher local"), std::string::npos);
  // SmartSim-Scaling's own batch line (128 client nodes x 32) is no longer 2,880 processes on the batch host.
  auto big = test::run_command({test::fanout_exe().string(), "throughput_standard", "--client_nodes=128", "--tensor_bytes=1024", "--dry-run"}, d.path,
                               inside, 60);
  EXPECT_EQ(big.exit_code, 0) << big.err;
}

// A file-valued (path) parameter is resolved against the user's working directory when the sweep is planned
// (ranks start in their run folder), and a missing file is refused then, naming the flag: not 5 s later in a rank.
TEST(FirstContact, PathParametersResolveAgainstTheWorkingDirectoryAtPlanTime) {
  test::TempDir d;
  write_file_atomic(d.path / "w.csv", "arch,depth,batch,workers,output_folder,master,port,arrival_time,cuda_device,start_iter,start_epoch,end_iter,end_epoch,node_size\n"
                                       "vgg, 1, 8, 1, \"t\", n1, 1, 0, [], 0, 1, 3, 1, 1\n");
  auto dry = fanout_cmd(d, {"torchloader", "--workload=w.csv", "--mode=1", "--nodes=1", "--dry-run"});
  ASSERT_EQ(dry.exit_code, 0) << dry.err;
  EXPECT_NE(dry.out.find("workload=" + (d.path / "w.csv").string()), std::string::npos) << dry.out.substr(0, 400);
  auto missing = fanout_cmd(d, {"torchloader", "--exp_name=miss", "--workload=nope.csv", "--mode=1", "--nodes=1"});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.err.find("--workload: " + (d.path / "nope.csv").string() + ": no such file (resolved against " + d.path.string() + ")"),
            std::string::npos) << missing.err;
  EXPECT_FALSE(fs::exists(d.path / "results" / "miss"));
  auto help = fanout_cmd(d, {"torchloader", "--help"});
  EXPECT_NE(help.out.find("--workload PATH"), std::string::npos) << help.out;
  EXPECT_NE(help.out.find("path, an existing file, or seed"), std::string::npos) << help.out;
  // In an experiment file a relative file is found beside the file, as its plugin = "..." is.
  fs::create_directories(d.path / "sweeps");
  fs::copy_file(d.path / "w.csv", d.path / "sweeps" / "mine.csv");
  write_file_atomic(d.path / "sweeps" / "x.toml", "[experiment]\nplugin = \"torchloader\"\ntemplate = \"torchloader\"\n"
                                                  "[parameters]\nworkload = \"mine.csv\"\nmode = 1\nnodes = 1\n");
  auto file = fanout_cmd(d, {"run", "sweeps/x.toml", "--dry-run"});
  ASSERT_EQ(file.exit_code, 0) << file.err;
  EXPECT_NE(file.out.find("workload=" + (d.path / "sweeps" / "mine.csv").string()), std::string::npos) << file.out.substr(0, 400);
  // An --exclude names the file as typed; it is resolved as the axis is, so it still matches.
  fs::copy_file(d.path / "w.csv", d.path / "w2.csv");
  auto excl = fanout_cmd(d, {"torchloader", "--workload=[w.csv,w2.csv]", "--exclude=workload=w2.csv", "--mode=1", "--nodes=1", "--dry-run"});
  ASSERT_EQ(excl.exit_code, 0) << excl.err;
  EXPECT_NE(excl.out.find("# dry run: 1 run(s)"), std::string::npos) << excl.out.substr(0, 300);
  // The word the parameter takes instead of a file is kept as it is.
  auto seed = fanout_cmd(d, {"torchloader", "--workload=seed", "--mode=1", "--dry-run"});
  ASSERT_EQ(seed.exit_code, 0) << seed.err;
  EXPECT_NE(seed.out.find("workload=seed "), std::string::npos);
  // The sweep itself runs with the relative file (the TPM profiled first, one application of 3 iterations).
  auto run = fanout_cmd(d, {"torchloader", "--exp_name=rel", "--workload=w.csv", "--mode=1", "--nodes=1", "--cores=2", "--cost=1",
                            "--profile_iterations=1", "--tpm=tpm.json"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_TRUE(fs::exists(d.path / "tpm.json")) << "an output path resolves against the working directory too";
  EXPECT_EQ(query(db_of(d, "rel"), "SELECT count(*) FROM samples WHERE metric='finished_iteration' AND value=3")[0][0], "1");
}

// A misspelled subcommand gets the closest names; a positional folder works for process_scaling_results; a list
// written as python-fire's tuple (4,8) is answered with the list form.
TEST(FirstContact, MistakesGetTheAnswerAUserNeeds) {
  test::TempDir d;
  auto typo = fanout_cmd(d, {"calibration_slep"});
  EXPECT_EQ(typo.exit_code, 2);
  EXPECT_NE(typo.err.find("unknown subcommand 'calibration_slep' (did you mean calibration_sleep"), std::string::npos) << typo.err;
  auto tuple = fanout_cmd(d, {"calibration_sleep", "--nodes=4,8", "--dry-run"});
  EXPECT_EQ(tuple.exit_code, 2);
  EXPECT_NE(tuple.err.find("to sweep it, write [4,8]"), std::string::npos) << tuple.err;
  auto run = fanout_cmd(d, {"calibration_sleep", "--exp_name=pos", "--iterations=3", "--sleep_us=[10,20]"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_NE(run.err.find("fanout: next:    fanout process_scaling_results "), std::string::npos) << run.err;
  EXPECT_EQ(run.err.find("peak memory"), std::string::npos) << "the driver's own cost is for --verbose";
  auto proc = fanout_cmd(d, {"process_scaling_results", "results/pos"});
  EXPECT_EQ(proc.exit_code, 0) << proc.err;
  EXPECT_TRUE(fs::exists(d.path / "results" / "pos" / "processed" / "report.html"));
  // db_hosts in SmartSim-Scaling's list form is a Slurm node list.
  auto hosts = fanout_cmd(d, {"throughput_standard", "--launcher=slurm", "--db_hosts=[n3,n4]", "--db_nodes=2", "--client_nodes=1", "--tensor_bytes=1024", "--dry-run"});
  ASSERT_EQ(hosts.exit_code, 0) << hosts.err;
  EXPECT_NE(hosts.out.find("#SBATCH --nodelist=n3,n4\n"), std::string::npos) << hosts.out.substr(0, 2000);
}

// A value that came from a file is named by its file and line, not by a flag the user never typed.
TEST(FirstContact, ValuesFromFilesAreNamedByFileAndLine) {
  test::TempDir d;
  write_file_atomic(d.path / "sweep.toml", "[experiment]\nplugin = \"calibration\"\ntemplate = \"calibration_sleep\"\nlauncher = \"local\"\n"
                                           "batch_args = [\"qos=high\"]\n[parameters]\niterations = 1\n");
  auto file = fanout_cmd(d, {"run", "sweep.toml", "--dry-run"});
  EXPECT_EQ(file.exit_code, 2);
  EXPECT_NE(file.err.find("sweep.toml:5"), std::string::npos) << file.err;
  EXPECT_NE(file.err.find("--batch_args is given, but the local launcher cannot honour it"), std::string::npos) << file.err;
  write_file_atomic(d.path / "site.toml", "[settings]\npartition = \"gpu\"\n");
  auto site = fanout_cmd(d, {"calibration_sleep", "--launcher=local", "--site=" + (d.path / "site.toml").string(), "--dry-run"});
  EXPECT_EQ(site.exit_code, 2);
  EXPECT_NE(site.err.find("site.toml:2"), std::string::npos) << site.err;
  EXPECT_NE(site.err.find("--partition is given, but the local launcher"), std::string::npos) << site.err;
}

// After a sweep whose run did not complete and its resume, the statistics, plots and compare read the attempt that
// counts (the COMPLETED one); runs.csv and the database keep every attempt. The first attempt is stopped by its
// wall time (6 s) while it sleeps 12,000 x 1 ms (at least 12 s on any machine); ranks write samples out every second,
// so a rank that took a loaded machine's seconds to start has still written some by then.
// samples.csv's header names every column once: calibration's `warmup` parameter is param.warmup beside the flag.
TEST(FirstContact, AResumedSweepsStatisticsHoldTheAttemptThatCounts) {
  test::TempDir d;
  const std::vector<std::string> sweep = {"calibration_sleep", "--exp_name=res", "--iterations=12000", "--sleep_us=1000", "--warmup=2"};
  auto args = sweep;
  args.push_back("--walltime=6");
  auto first = fanout_cmd(d, args);
  EXPECT_EQ(first.exit_code, 1) << first.err;
  EXPECT_NE(first.err.find("fanout: next:    fanout resume "), std::string::npos) << first.err;
  const fs::path db = db_of(d, "res");
  ASSERT_EQ(query(db, "SELECT status FROM runs")[0][0], "TIMEOUT");
  const auto left = test::processes_left((d.path / "results" / "res").string(), 60);
  EXPECT_TRUE(left.empty()) << "left behind: " << (left.empty() ? "" : left.front());
  ASSERT_NE(query(db, "SELECT count(*) FROM samples WHERE warmup=0")[0][0], "0") << "the first attempt recorded measured samples";
  args = sweep;
  args.push_back("--resume");
  auto second = fanout_cmd(d, args);
  ASSERT_EQ(second.exit_code, 0) << second.err;
  EXPECT_EQ(query(db, "SELECT group_concat(status) FROM (SELECT status FROM runs ORDER BY id)")[0][0], "TIMEOUT,COMPLETED");
  const std::string stats = read_file(d.path / "results" / "res" / "csv" / "statistics.csv");
  EXPECT_EQ(stats.find("TIMEOUT"), std::string::npos) << stats;
  EXPECT_NE(stats.find("COMPLETED"), std::string::npos) << stats;
  const std::string runs = read_file(d.path / "results" / "res" / "csv" / "runs.csv");
  EXPECT_NE(runs.find("TIMEOUT"), std::string::npos) << "runs.csv lists every attempt";
  auto proc = fanout_cmd(d, {"process_scaling_results", "--scaling_dir=results/res"});
  ASSERT_EQ(proc.exit_code, 0) << proc.err;
  EXPECT_NE(read_file(d.path / "results" / "res" / "processed" / "report.html").find("1 attempt(s) that did not complete"), std::string::npos);
  std::istringstream csv(read_file(d.path / "results" / "res" / "csv" / "samples.csv"));
  std::string header;
  std::getline(csv, header);
  std::vector<std::string> columns;
  std::set<std::string> unique;
  for (std::stringstream cols(header); std::getline(cols, header, ',');) columns.push_back(header), unique.insert(header);
  EXPECT_EQ(unique.size(), columns.size()) << "every column named once";
  EXPECT_TRUE(unique.count("param.warmup") && unique.count("warmup"));
}

// Issue 52: `fanout exec --help` leads with exec's own options, then the driver's by topic, every line under 100
// characters; its two examples run as printed. Every experiment's help has the same layout.
TEST(Cli, ExecHelpLeadsWithItsOwnOptionsAndItsExamplesRun) {
  test::TempDir d;
  for (const std::string sub : {"exec", "calibration_sleep", "throughput_standard"}) {
    auto help = fanout_cmd(d, {sub, "--help"});
    ASSERT_EQ(help.exit_code, 0) << help.err;
    std::istringstream lines(help.out);
    for (std::string line; std::getline(lines, line);) EXPECT_LT(line.size(), 100u) << sub << ": " << line;
    const auto own = help.out.find("Benchmark parameters"), runs = help.out.find("Runs: where they go, how many, in which order:"),
               failures = help.out.find("Failures, time and progress:"), clusters = help.out.find("Clusters (slurm, pbs, sge):");
    ASSERT_NE(own, std::string::npos) << help.out;
    EXPECT_LT(own, runs) << help.out;
    EXPECT_LT(runs, failures) << help.out;
    EXPECT_LT(failures, clusters) << help.out;
  }
  auto help = fanout_cmd(d, {"exec", "--help"});
  const auto examples = help.out.find("Examples:\n");
  ASSERT_NE(examples, std::string::npos) << help.out;
  // The example commands: lines starting "  fanout exec", with their "\" continuations.
  std::vector<std::string> commands;
  std::istringstream lines(help.out.substr(examples));
  for (std::string line, cmd; std::getline(lines, line);) {
    if (line.rfind("  fanout exec ", 0) == 0) cmd = line.substr(2);
    else if (!cmd.empty() && line.rfind("      --", 0) == 0) cmd += " " + line.substr(6);
    else continue;
    if (!cmd.empty() && cmd.back() == '\\') cmd.pop_back();
    else commands.push_back(cmd), cmd.clear();
  }
  ASSERT_EQ(commands.size(), 2u) << help.out;
  for (auto& c : commands) {
    const std::string shell = (test::build_dir() / "fanout").string() + c.substr(std::string("fanout").size());
    auto r = test::run_command({"/bin/sh", "-c", shell}, d.path, {}, 300);
    EXPECT_EQ(r.exit_code, 0) << c << "\n" << r.err;
  }
  EXPECT_EQ(test::sql_one(d.path / "results" / "exec" / "fanout.sqlite", "SELECT count(*) FROM runs WHERE status='COMPLETED'"), "7")
      << "1 run of the first example, 2 sizes x 3 repeats of the second";
}
