// Hostile and careless input to the driver, each a regression test of a defect found by trying it (issue 19):
// job-script injection through paths, '.'/'..' experiment names, permutation counts that would not fit in
// memory, concurrent resumes, moved experiments (SIGHUP: cli_test), out-of-range numbers, usage errors, file modes under
// umask 000 and values that are not UTF-8. Every refusal is exit status 2 with one line naming the flag, and
// nothing written.
#include <gtest/gtest.h>

#include <chrono>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <map>
#include <fstream>
#include <random>
#include <thread>

#include "common/error.h"
#include "common/files.h"
#include "results/csv_export.h"
#include "results/sample_file.h"
#include "schedulers/scheduler.h"
#include "tests/expect_throw.h"
#include "tests/test_util.h"

extern char** environ;

using namespace fanout;
namespace fs = std::filesystem;

namespace {

test::CommandResult fanout_cmd(const test::TempDir& d, std::vector<std::string> args) { return test::run_fanout(d.path, args); }

fs::path db_of(const fs::path& exp_dir) { return exp_dir / "fanout.sqlite"; }

// "[0,1,...,n-1]"
std::string list_of(int n, int offset = 0) {
  std::string s = "[";
  for (int i = 0; i < n; ++i) s += (i ? "," : "") + std::to_string(offset + i);
  return s + "]";
}

// A refusal: exit 2, one line on stderr that holds `expect`, and no results folder.
void expect_refused(const test::TempDir& d, const std::vector<std::string>& args, const std::string& expect) {
  auto r = fanout_cmd(d, args);
  std::string what;
  for (auto& a : args) what += a.substr(0, 60) + " ";
  EXPECT_EQ(r.exit_code, 2) << what << "\n" << r.err;
  EXPECT_NE(r.err.find(expect), std::string::npos) << what << ": expected '" << expect << "' in: " << r.err;
  EXPECT_EQ(test::line_count_summary(r.err), "1") << what << "\n" << r.err;
  EXPECT_EQ(r.err.rfind("fanout: error: ", 0), 0u) << r.err;
  EXPECT_FALSE(fs::exists(d.path / "results")) << what << " wrote results";
}

}  // namespace

TEST(Hardening, ControlCharactersInResultsDirAreRefusedBeforeAnyScriptIsWritten) {
  test::TempDir d;
  for (const std::string launcher : {"local", "slurm", "pbs"}) {
    // A newline would end '#SBATCH --output=<dir>/...' and run the next line in the real job.
    auto r = fanout_cmd(d, {"calibration_sleep", "--launcher=" + launcher, "--dry-run", "--results_dir=r\ntouch " + (d.path / "pwned").string()});
    EXPECT_EQ(r.exit_code, 2) << launcher << r.out << r.err;
    EXPECT_NE(r.err.find("--results_dir: control characters"), std::string::npos) << r.err;
    EXPECT_EQ(r.out.find("touch"), std::string::npos) << "no script was printed";
  }
  // Every other value that becomes a line of a batch script, on both schedulers' dry runs.
  for (const std::string flag : {"--partition", "--account", "--constraint"})
    for (const std::string launcher : {"slurm", "pbs"})
      for (const std::string& bad : {std::string("a\ntouch pwned"), std::string("a\rb"), std::string("a\x1b[2Jb")}) {
        auto r = fanout_cmd(d, {"calibration_sleep", "--launcher=" + launcher, "--dry-run", flag + "=" + bad});
        EXPECT_EQ(r.exit_code, 2) << flag << " " << launcher << r.out << r.err;
        EXPECT_NE(r.err.find(flag + ": control characters"), std::string::npos) << r.err;
        EXPECT_EQ(r.out.find("#SBATCH"), std::string::npos) << "no script was printed";
        EXPECT_EQ(r.out.find("#PBS"), std::string::npos) << "no script was printed";
      }
  std::ofstream(d.path / "exp.toml") << "[experiment]\nplugin = \"calibration\"\ntemplate = \"calibration_sleep\"\n"
                                     << "results_dir = \"r\\ntouch pwned\"\n";
  expect_refused(d, {"run", "exp.toml"}, "--results_dir: control characters");
  EXPECT_FALSE(fs::exists(d.path / "pwned"));
}

TEST(Hardening, AResultsDirWithSpacesAndQuotesWorks) {
  test::TempDir d;
  const std::string dir = "my results/it's \"here\"";
  auto r = fanout_cmd(d, {"calibration_sleep", "--results_dir=" + dir, "--exp_name=sp", "--sleep_us=[100,200]", "--iterations=5"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(test::sql_one(db_of(d.path / dir / "sp"), "SELECT count(*) FROM runs WHERE status='COMPLETED'"), "2");
}

TEST(Hardening, DotAndDotDotAreNotExperimentNames) {
  test::TempDir d;
  fs::create_directories(d.path / "inner");
  for (const std::string name : {".", ".."}) {
    auto r = test::run_fanout(d.path / "inner", {"calibration_sleep", "--exp_name=" + name, "--results_dir=res", "--iterations=2"});
    EXPECT_EQ(r.exit_code, 2) << name << r.err;
    EXPECT_NE(r.err.find("--exp_name: '" + name + "'"), std::string::npos) << r.err;
  }
  std::ofstream(d.path / "dots.toml") << "[experiment]\nname = \"..\"\nplugin = \"calibration\"\ntemplate = \"calibration_sleep\"\n";
  expect_refused(d, {"run", "dots.toml"}, "--exp_name: '..'");
  EXPECT_FALSE(fs::exists(d.path / "inner" / "res"));
  EXPECT_FALSE(fs::exists(d.path / "fanout.sqlite"));
  EXPECT_FALSE(fs::exists(d.path / "inner" / "fanout.sqlite"));
}

TEST(Hardening, PermutationCountsAreCheckedBeforeAnythingIsExpanded) {
  test::TempDir d;
  // 10^9 permutations: refused by their count, in well under the time (and memory) one expansion would take.
  const std::string k = list_of(1000);
  expect_refused(d, {"calibration_sleep", "--sleep_us=" + k, "--iterations=" + k, "--warmup=" + k},
                 "1000000000 permutations (1000 x 1000 x 1000) exceed --max_runs=100000");
  // 256^8 = 2^64 wraps a 64-bit count to 0: it is "more than 2^64", never "every permutation is excluded".
  const std::string b = list_of(256), b1 = list_of(256, 1);  // b1 for the parameters whose minimum is 1
  expect_refused(d, {"calibration_sleep", "--nodes=" + b1, "--ranks_per_node=" + b1, "--iterations=" + b, "--warmup=" + b, "--sleep_us=" + b,
                     "--hang_rank=" + list_of(256, -300), "--fail_rank=" + list_of(256, -300), "--crash_rank=" + list_of(256, -300)},
                 "more than 2^64 permutations");
  expect_refused(d, {"calibration_sleep", "--sleep_us=[1,2,3,4,5,6]", "--max_runs=5"}, "6 permutations (6) exceed --max_runs=5");
  // Exclusions are visited one point at a time: what remains is what counts.
  auto ok = fanout_cmd(d, {"calibration_sleep", "--sleep_us=[1,2,3,4,5,6]", "--max_runs=5", "--exclude=sleep_us=[1,2]", "--dry-run"});
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_NE(ok.out.find("# dry run: 4 run(s)"), std::string::npos) << ok.out;
  expect_refused(d, {"calibration_sleep", "--sleep_us=" + list_of(600), "--max_runs=5", "--exclude=sleep_us=[1,2]"},
                 "600 permutations (600) exceed --max_runs=5 (x 100 before exclusions)");
  expect_refused(d, {"calibration_sleep", "--sleep_us=[1,2,3,4,5,6,7,8]", "--max_runs=5", "--exclude=sleep_us=1"},
                 "more than 5 permutations remain after the exclusions");
  expect_refused(d, {"calibration_sleep", "--max_runs=0"}, "--max_runs: 0 is out of range (1 to 1000000)");
}

TEST(Hardening, OneResumeAtATimeAndNotBesideARunningDriver) {
  test::TempDir d;
  ASSERT_EQ(fanout_cmd(d, {"calibration_sleep", "--exp_name=lock", "--sleep_us=[1,2]", "--iterations=2"}).exit_code, 0);
  // A driver still running its sweep in the same experiment (its rank hangs until cancelled).
  pid_t pid = test::spawn_fanout(d.path, {"calibration_sleep", "--exp_name=lock", "--hang_rank=0", "--sleep_us=[3]"}, d.path / "err.txt");
  ASSERT_GT(pid, 0);
  // Ready once it holds the lock: it writes its pid there after taking it (the first sweep's lock file and sample
  // files exist already, so neither can say so).
  const std::string holder = "pid " + std::to_string(pid) + " on ";
  ASSERT_TRUE(test::wait_for([&] { return read_file(d.path / "results" / "lock" / "driver.lock").rfind(holder, 0) == 0; }, 30));
  auto r = fanout_cmd(d, {"resume", "results/lock"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("another fanout driver is running this experiment (pid " + std::to_string(pid)), std::string::npos) << r.err;
  kill(pid, SIGINT);
  int st = 0;
  ASSERT_TRUE(test::wait_for([&] { return waitpid(pid, &st, WNOHANG) == pid; }, 30));
  const auto left = test::processes_left((d.path / "results" / "lock").string(), 60);
  EXPECT_TRUE(left.empty()) << "left behind: " << (left.empty() ? "" : left.front());
  EXPECT_EQ(test::sql_one(db_of(d.path / "results" / "lock"), "SELECT count(*) FROM runs"), "3") << "the refused resume ran nothing";
  // With the driver gone, the lock is free (flock dies with its holder): a resume of the first sweep runs.
  auto again = fanout_cmd(d, {"calibration_sleep", "--exp_name=lock", "--sleep_us=[1,2]", "--iterations=2", "--resume"});
  EXPECT_EQ(again.exit_code, 0) << again.err;
  EXPECT_NE(again.err.find("2 of 2 permutation(s) already COMPLETED; running 0"), std::string::npos) << again.err;
}

TEST(Hardening, AMovedExperimentResumesWhereItIsNowAndWritesCsv) {
  test::TempDir d;
  ASSERT_EQ(fanout_cmd(d, {"calibration_sleep", "--exp_name=mv", "--sleep_us=[1,2]", "--iterations=2"}).exit_code, 0);
  fs::create_directories(d.path / "archive");
  fs::rename(d.path / "results" / "mv", d.path / "archive" / "moved");
  fs::remove_all(d.path / "archive" / "moved" / "csv");
  auto r = fanout_cmd(d, {"resume", "archive/moved"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("2 of 2 permutation(s) already COMPLETED; running 0"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(d.path / "results" / "mv")) << "nothing written at the old place";
  EXPECT_TRUE(fs::exists(d.path / "archive" / "moved" / "csv" / "samples.csv")) << "csv/ written even when nothing ran";
  EXPECT_EQ(test::line_count_summary(read_file(d.path / "archive" / "moved" / "csv" / "runs.csv")), "3");
  EXPECT_NE(read_file(d.path / "archive" / "moved" / "command.toml").find("fanout resume " + (d.path / "results" / "mv").string()),
            std::string::npos) << "command.toml's hint names the folder as a path";
}

TEST(Hardening, EveryBadNumberAndUsageErrorIsExitTwoNamingTheFlag) {
  test::TempDir d;
  expect_refused(d, {"calibration_sleep", "--walltime=99999999:00:00"}, "--walltime: '99999999:00:00' is longer than");
  expect_refused(d, {"calibration_sleep", "--max_parallel=-1"}, "--max_parallel: -1 is out of range (0 to 100000)");
  expect_refused(d, {"calibration_sleep", "--max_retries=100000"}, "--max_retries: 100000 is out of range (0 to 1000)");
  expect_refused(d, {"calibration_sleep", "--stall_timeout=-5"}, "--stall_timeout: -5 is out of range");
  expect_refused(d, {"calibration_sleep", "--sleep_uss=3"}, "unknown flag '--sleep_uss' (did you mean --sleep_us?)");
  expect_refused(d, {"calibration_sleep", "--iterations=3", "--iterations=4"}, "--iterations");
  expect_refused(d, {"calibration_sleep", "--launcher=nosuch", "--dry-run"}, "--launcher: unknown launcher 'nosuch'");
  // A step launcher the scheduler does not start steps with is refused, never silently replaced by another.
  expect_refused(d, {"calibration_sleep", "--launcher=slurm", "--step_launcher=mpirun", "--dry-run"},
                 "--step_launcher: a Slurm job starts its steps with srun, not mpirun");
  expect_refused(d, {"calibration_sleep", "--step_launcher=srun"}, "--step_launcher: the local launcher starts every rank itself");
  expect_refused(d, {"calibration_sleep", "--launcher=pbs", "--step_launcher=aprun", "--dry-run"},
                 "--step_launcher: 'aprun' is not one of srun, mpirun");
  // Values a plugin cannot honour are refused at plan time, never run as something else (issue 23's list).
  expect_refused(d, {"throughput_colocated", "--net_type=udp", "--dry-run"}, "--net_type: 'udp' is not one of tcp, uds");
  expect_refused(d, {"inference_standard", "--device=TPU", "--dry-run"}, "--device: 'TPU' is not one of CPU, GPU");
  expect_refused(d, {"throughput_standard", "--languages=[cpp,julia]", "--dry-run"}, "'julia' is not one of cpp, c, fortran, python");
  expect_refused(d, {"inference_standard", "--languages=fortran", "--dry-run"}, "--languages: inference_standard does not use this parameter");
  expect_refused(d, {"calibration_sleep", "--sleep_us=-5"}, "sleep_us");
  expect_refused(d, {"calibration_sleep", "--ranks_per_node=1000000"}, "ranks_per_node");
  expect_refused(d, {}, "a subcommand is required");
  // An empty value is refused as the flag's own value; it never swallows the next flag as its value.
  expect_refused(d, {"template_hello", "--message=", "--iterations=2"}, "--message: malformed list '': empty value");
  expect_refused(d, {"template_hello", std::string("--message=caf\xe9")}, "--message: the value is not valid UTF-8");
}

namespace {

// A sweep run by fanout under `mask` (this process's umask, restored however the run ends: the next tests use it).
test::CommandResult fanout_under_umask(const test::TempDir& d, mode_t mask, std::vector<std::string> args) {
  struct Restore {
    mode_t old;
    ~Restore() { ::umask(old); }
  } restore{::umask(mask)};
  return fanout_cmd(d, std::move(args));
}

}  // namespace

TEST(Hardening, NothingIsGroupOrWorldWritableUnderUmaskZero) {
  test::TempDir d;
  auto r = fanout_under_umask(d, 0, {"calibration_sleep", "--exp_name=um", "--sleep_us=[1,2]", "--iterations=2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  int checked = 0;
  for (auto& e : fs::recursive_directory_iterator(d.path / "results")) {
    struct stat st {};
    ASSERT_EQ(::lstat(e.path().c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 022, 0u) << e.path() << " mode " << std::oct << (st.st_mode & 07777);
    ++checked;
  }
  EXPECT_GT(checked, 10) << "samples/, sample files, csv/ and the database were all looked at";
}

// A run's folder is 0755 whatever the umask (common/files.h make_private_dirs): made by one mkdir, chmodded only when
// the umask took bits of 0755 away, as 077 does.
TEST(Hardening, RunFoldersAre0755UnderAStrictUmask) {
  test::TempDir d;
  auto r = fanout_under_umask(d, 077, {"calibration_sleep", "--exp_name=strict", "--sleep_us=[1,2]", "--iterations=1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  int runs = 0;
  for (auto& e : fs::recursive_directory_iterator(d.path / "results" / "strict")) {
    if (!fs::exists(e.path() / "run.toml")) continue;
    struct stat st {};
    ASSERT_EQ(::stat(e.path().c_str(), &st), 0);
    EXPECT_EQ(st.st_mode & 07777, 0755u) << e.path() << " mode " << std::oct << (st.st_mode & 07777);
    ++runs;
  }
  EXPECT_EQ(runs, 2);
}

// Job scripts of run folders whose paths hold any byte but control characters (quotes, $, backquotes,
// backslashes, spaces, UTF-8): each script parses (bash -n) and has exactly the lines of one with a plain path,
// so no path ever ends a line or starts a command.
TEST(Hardening, JobScriptsOfArbitraryPathsParseWithTheSameLines) {
  test::TempDir d;
  std::mt19937 rng(20261123);
  const std::string alphabet = std::string("aZ09 _-./'\"$`\\!*?;&|<>(){}[]#~%^=+,:@") + "\xc3\xa9\xe2\x82\xac";
  auto line_count = [](const std::string& s) { return std::count(s.begin(), s.end(), '\n'); };
  for (const std::string launcher : {"local", "slurm", "pbs"}) {
    JobSpec plain = test::trivial_job(d.path, "plain");
    const auto expected = line_count(render_job_script(launcher, plain));
    for (int i = 0; i < 100; ++i) {
      std::string name;
      const int len = 1 + int(rng() % 24);
      for (int k = 0; k < len; ++k) name += alphabet[rng() % alphabet.size()];
      JobSpec job = plain;
      job.run_dir = d.path / ("r" + std::to_string(i)) / name;
      // PBS takes the run folder on a #PBS -o line, which qsub splits into words (issue 41 item 13): a path
      // with a blank, a quote, '#' or a backslash is refused there, naming the flag; any other is one word.
      const bool splits = name.find_first_of(" \"'#\\") != std::string::npos;
      if (launcher == "pbs" && splits) {
        EXPECT_THROW_WITH(render_job_script(launcher, job), UserError, "--results_dir: ");
        continue;
      }
      const std::string script = render_job_script(launcher, job);
      if (launcher == "pbs") {
        EXPECT_NE(script.find("#PBS -o " + (job.run_dir / "pbs.out").string() + "\n"), std::string::npos) << script;
      }
      EXPECT_EQ(line_count(script), expected) << launcher << " " << job.run_dir;
      const fs::path file = d.path / "job.sh";
      write_file_atomic(file, script);
      auto r = test::run_command({"/bin/bash", "-n", file.string()}, d.path);
      EXPECT_EQ(r.exit_code, 0) << launcher << " " << job.run_dir << ": " << r.err;
    }
  }
}

// A read-only database (made immutable with chattr +i: root ignores file modes) and a full disk (a file size limit,
// EFBIG, with SIGXFSZ ignored as a shell's trap leaves it): one error naming the place, exit 2, never SQLite's
// "cannot rollback - no transaction is active" in place of the real error, and nothing run against a read-only
// database. (No mount: a test in a chroot cannot make its mounts private.)
TEST(Hardening, ReadOnlyAndFullDisksGiveTheRealErrorNamingThePlace) {
  test::TempDir d;
  ASSERT_EQ(fanout_cmd(d, {"calibration_sleep", "--exp_name=ro", "--sleep_us=[1,2]", "--iterations=2"}).exit_code, 0);
  const fs::path exp = d.path / "results" / "ro";
  struct Immutable {  // undone whatever happens, or the temporary folder could not be removed
    std::vector<std::string> paths;
    ~Immutable() {
      for (auto& p : paths) test::run_command({"/usr/bin/chattr", "-i", p}, "/");
    }
  } guard;
  for (const fs::path& p : {exp / "fanout.sqlite", exp}) {
    auto r = test::run_command({"/usr/bin/chattr", "+i", p.string()}, "/");
    ASSERT_EQ(r.exit_code, 0) << "chattr +i " << p << ": " << r.err;
    guard.paths.push_back(p.string());
  }
  auto ro = fanout_cmd(d, {"calibration_sleep", "--exp_name=ro", "--sleep_us=[3]", "--iterations=2"});
  EXPECT_EQ(ro.exit_code, 2) << ro.err;
  EXPECT_NE(ro.err.find((exp / "fanout.sqlite").string()), std::string::npos) << "names the database: " << ro.err;
  EXPECT_TRUE(ro.err.find("read-only") != std::string::npos || ro.err.find("readonly") != std::string::npos ||
              ro.err.find("unable to open") != std::string::npos) << ro.err;
  for (auto& p : guard.paths) test::run_command({"/usr/bin/chattr", "-i", p}, "/");
  guard.paths.clear();
  EXPECT_EQ(test::sql_one(db_of(exp), "SELECT count(*) FROM runs"), "2") << "nothing ran";

  const std::string driver = test::fanout_exe().string();
  auto full = test::run_command({"/bin/sh", "-c",
                                 "trap '' XFSZ; ulimit -f 200; exec \"$0\" calibration_copy --exp_name=full "
                                 "--copy_bytes=[4096,8192,16384,32768] --iterations=2000",
                                 driver},
                                d.path);
  EXPECT_EQ(full.exit_code, 2) << full.err;
  EXPECT_EQ(full.err.find("no transaction is active"), std::string::npos) << full.err;
  EXPECT_NE(full.err.find("fanout: error: results database " + (d.path / "results" / "full" / "fanout.sqlite").string() + ": disk I/O error"),
            std::string::npos) << full.err;
}

// Issue 41, round 3 (LOW items). 17: `fanout ... | head` closes the driver's output early: the sweep goes on,
// every run is recorded, and the exit status is the sweep's (it was 141, SIGPIPE, with the ranks killed).
TEST(Hardening3, AClosedOutputPipeDoesNotStopTheSweep) {
  test::TempDir d;
  // The reader is gone before the driver starts (as after `head` exits): its first write already meets EPIPE.
  int fds[2];
  ASSERT_EQ(pipe2(fds, O_CLOEXEC), 0);
  close(fds[0]);
  const std::vector<std::string> args = {test::fanout_exe().string(), "calibration_sleep", "--exp_name=pipe", "--sleep_us=[1,2,3]", "--iterations=50"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addchdir_np(&fa, d.path.c_str());
  posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
  posix_spawn_file_actions_adddup2(&fa, fds[1], 2);
  pid_t pid = -1;
  ASSERT_EQ(posix_spawn(&pid, argv[0], &fa, nullptr, argv.data(), environ), 0);
  posix_spawn_file_actions_destroy(&fa);
  close(fds[1]);
  int st = 0;
  ASSERT_TRUE(test::wait_for([&] { return waitpid(pid, &st, WNOHANG) == pid; }, 120));
  EXPECT_EQ(test::exit_status(st), 0) << "141 is death by SIGPIPE";
  EXPECT_EQ(test::sql_one(d.path / "results" / "pipe" / "fanout.sqlite", "SELECT count(*) FROM runs WHERE status='COMPLETED'"), "3");
  EXPECT_TRUE(fs::exists(d.path / "results" / "pipe" / "csv" / "statistics.csv"));
}

// 16: a CSV cell a spreadsheet would run as a formula (=, +, -, @ first) gets a leading apostrophe, unless it is a
// number (-1 stays -1).
TEST(Hardening3, CsvCellsAreNeverFormulas) {
  EXPECT_EQ(csv_field("=1+1"), "'=1+1");
  EXPECT_EQ(csv_field("@SUM(A1)"), "'@SUM(A1)");
  EXPECT_EQ(csv_field("-cmd|' /C calc'!A0"), "'-cmd|' /C calc'!A0");
  EXPECT_EQ(csv_field("+x,y"), "\"'+x,y\"");
  EXPECT_EQ(csv_field("-1"), "-1");
  EXPECT_EQ(csv_field("+2.5e3"), "+2.5e3");
  EXPECT_EQ(csv_field("plain"), "plain");
}

// 15: names and reasons with control characters reach the terminal escaped (an ESC would recolour or move it),
// and a `fanout ls` row of any length is one whole line.
TEST(Hardening3, ControlCharactersAreEscapedAndLongRowsStayWhole) {
  test::TempDir d;
  // fanout names its own experiments safely; folders renamed by hand (or copied from elsewhere) are not.
  const std::string odd = std::string("esc\x1b[31mred");
  const std::string longname(250, 'x');  // with its report path, a row of over 600 bytes
  for (const std::string& name : {std::string("a"), std::string("b")})
    ASSERT_EQ(fanout_cmd(d, {"calibration_sleep", "--exp_name=" + name, "--iterations=1"}).exit_code, 0);
  ASSERT_EQ(fanout_cmd(d, {"process_scaling_results", "results/b"}).exit_code, 0);
  fs::rename(d.path / "results" / "a", d.path / "results" / odd);
  fs::rename(d.path / "results" / "b", d.path / "results" / longname);
  auto ls = fanout_cmd(d, {"ls"});
  ASSERT_EQ(ls.exit_code, 0) << ls.err;
  EXPECT_EQ(ls.out.find('\x1b'), std::string::npos) << "a raw ESC reached the terminal";
  EXPECT_NE(ls.out.find("esc\\x1b[31mred"), std::string::npos) << ls.out;
  size_t rows = 0;
  for (size_t at = 0; (at = ls.out.find('\n', at)) != std::string::npos; ++at) ++rows;
  EXPECT_EQ(rows, 3u) << "the header and two whole rows";
  EXPECT_NE(ls.out.find(longname + " "), std::string::npos) << "the 600-byte name is not cut";
  auto typo = fanout_cmd(d, {"calibration_sleep", "--exp_name=x", "--iterations=\x1b[2J"});
  EXPECT_EQ(typo.exit_code, 2);
  EXPECT_EQ(typo.err.find('\x1b'), std::string::npos) << "an echoed value's ESC is not run";
}

// 13: a #PBS -q/-A value with a blank or a quote injected qsub options (-v LD_PRELOAD=...); now refused before
// anything is written, naming the flag, as the dry run shows.
TEST(Hardening3, PbsDirectivesTakeNoValueThatQsubWouldSplit) {
  test::TempDir d;
  expect_refused(d, {"calibration_sleep", "--launcher=pbs", "--partition=work -v LD_PRELOAD=/tmp/x.so", "--dry-run"}, "--partition: 'work -v LD_PRELOAD=/tmp/x.so' cannot go on a #PBS -q line");
  expect_refused(d, {"calibration_sleep", "--launcher=pbs", "--account=a\"b", "--dry-run"}, "--account: ");
  expect_refused(d, {"calibration_sleep", "--launcher=pbs", "--results_dir=my results", "--dry-run"}, "--results_dir: ");
  // Issue 53 LOW: a value that begins with '-' is qsub's next option.
  expect_refused(d, {"calibration_sleep", "--launcher=pbs", "--partition=-p", "--dry-run"}, "--partition: '-p' begins with '-', which qsub would read as another option");
  expect_refused(d, {"calibration_sleep", "--launcher=sge", "--account=-l", "--dry-run"}, "--account: '-l' begins with '-'");
  auto ok = fanout_cmd(d, {"calibration_sleep", "--launcher=pbs", "--partition=workq", "--account=proj-1", "--dry-run"});
  EXPECT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_NE(ok.out.find("#PBS -q workq\n#PBS -A proj-1\n"), std::string::npos) << ok.out;
}

// Issue 53 LOW: an #SBATCH line kept a value's blanks, so job.sh resubmitted by hand (`sbatch job.sh`; fanout submits
// through libslurm) split it into other options. A value with a blank or a quote is double-quoted, its own double
// quotes and backslashes escaped, as sbatch's _get_argument reads a directive's words back.
TEST(Hardening3, SbatchDirectivesQuoteWhatSbatchWouldSplit) {
  test::TempDir d;
  auto ok = fanout_cmd(d, {"calibration_sleep", "--launcher=slurm", "--partition=debug", "--results_dir=my results", "--dry-run"});
  ASSERT_EQ(ok.exit_code, 0) << ok.err;
  EXPECT_NE(ok.out.find("#SBATCH --output=\"" + (d.path / "my results").string()), std::string::npos) << ok.out;
  EXPECT_EQ(ok.out.find("#SBATCH --output=" + (d.path / "my results").string()), std::string::npos) << ok.out;
  auto quote = fanout_cmd(d, {"calibration_sleep", "--launcher=slurm", "--partition=debug", "--constraint=a\"b c", "--dry-run"});
  ASSERT_EQ(quote.exit_code, 0) << quote.err;
  EXPECT_NE(quote.out.find("#SBATCH --constraint=\"a\\\"b c\"\n"), std::string::npos) << quote.out;
  // What the real sbatch reads back from such a script (held, then cancelled): the run folder with its blank and
  // its quote, whole, as the job's output path.
  JobSpec job = test::trivial_job(d.path, "quoted");
  job.run_dir = d.path / "r a\"b";
  fs::create_directories(job.run_dir);
  const fs::path script = d.path / "job.sh";
  write_file_atomic(script, render_job_script("slurm", job));
  auto held = test::run_command({"/usr/bin/sbatch", "-H", "--parsable", "--partition=debug", script.string()}, d.path);
  ASSERT_EQ(held.exit_code, 0) << held.err;
  const std::string id = held.out.substr(0, held.out.find_first_of(";\n"));
  auto shown = test::run_command({"/usr/bin/scontrol", "show", "job", id}, d.path);
  test::run_command({"/usr/bin/scancel", id}, d.path);
  EXPECT_NE(shown.out.find("StdOut=" + job.run_dir.string() + "/"), std::string::npos) << shown.out;
}

// 10 and 11: inputs that hung, exhausted memory or overflowed the stack. A run.toml that is a FIFO, a 2 GB sparse
// file, or holds a dotted key of 60,000 parts; a samples "file" that is a FIFO. `fanout results ingest` reports
// each bad run folder and skips it, ingests the rest, says how many, and exits 1; nothing hangs.
TEST(Hardening3, IngestSkipsRunsItCannotReadAndNeverHangs) {
  test::TempDir d;
  ASSERT_EQ(fanout_cmd(d, {"calibration_sleep", "--exp_name=ing", "--sleep_us=[1,2,3,4,5]", "--iterations=3"}).exit_code, 0);
  std::vector<fs::path> runs;
  for (auto& e : fs::recursive_directory_iterator(d.path / "results" / "ing"))
    if (e.path().filename() == "run.toml") runs.push_back(e.path().parent_path());
  std::sort(runs.begin(), runs.end());
  ASSERT_EQ(runs.size(), 5u);
  fs::remove(runs[0] / "run.toml");
  ASSERT_EQ(mkfifo((runs[0] / "run.toml").c_str(), 0600), 0);
  fs::remove(runs[1] / "run.toml");
  std::ofstream(runs[1] / "run.toml").close();
  fs::resize_file(runs[1] / "run.toml", uintmax_t(2) << 30);  // sparse: no disk used
  std::string deep = "a";
  for (int i = 0; i < 60000; ++i) deep += ".a";
  write_file_atomic(runs[2] / "run.toml", deep + " = 1\n");
  fs::path samples;
  for (auto& e : fs::directory_iterator(runs[3] / "samples")) samples = e.path();
  ASSERT_FALSE(samples.empty());
  fs::remove(samples);
  ASSERT_EQ(mkfifo(samples.c_str(), 0600), 0);
  // Into the sweep's own database: the runs it now skips lose the rows their earlier ingest left there.
  auto r = test::run_command({test::fanout_exe().string(), "results", "ingest", "results/ing"}, d.path, {}, 60);
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_NE(r.out.find("2 run(s) ingested into"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("3 skipped"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("run.toml: not a regular file"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("2147483648 bytes, more than the"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("run.toml:1: a dotted key of more than 128 parts"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("not a regular file, not read"), std::string::npos) << "the FIFO of samples is a warning of its run";
  EXPECT_EQ(test::sql_one(d.path / "results" / "ing" / "fanout.sqlite", "SELECT count(*) FROM runs"), "2");
  EXPECT_NE(r.err.find("its rows from an earlier ingest were removed"), std::string::npos) << r.err;
  // The same key in an experiment file is a clear error, not a crash.
  write_file_atomic(d.path / "deep.toml", "[experiment]\nplugin = \"calibration\"\n" + deep + " = 1\n");
  auto run = fanout_cmd(d, {"run", "deep.toml", "--dry-run"});
  EXPECT_EQ(run.exit_code, 2) << run.err;
  EXPECT_NE(run.err.find("deep.toml:3: a dotted key of more than 128 parts"), std::string::npos) << run.err;
  // A multi-line string that ends in extra quotes ("""a"""" is a") does not hide the key after it.
  write_file_atomic(d.path / "deep2.toml", "[experiment]\nplugin = \"calibration\"\nnote = \"\"\"a\"\"\"\"\n" + deep + " = 1\n");
  auto quoted = fanout_cmd(d, {"run", "deep2.toml", "--dry-run"});
  EXPECT_EQ(quoted.exit_code, 2) << quoted.err;
  EXPECT_NE(quoted.err.find("deep2.toml:4: a dotted key of more than 128 parts"), std::string::npos) << quoted.err;
}

// Issue 53 HIGH 2 and 6: names from a folder are data. A session name crafted in the database or a run.toml
// (an absolute path, "..") places no export write outside --out; a step may not take the name of a folder
// fanout reads in the run (a step "samples" would write ranks' sample files).
TEST(Hardening4, NamesFromFoldersPlaceNoWriteAndForgeNoSamples) {
  test::TempDir d;
  ASSERT_EQ(fanout_cmd(d, {"calibration_sleep", "--exp_name=ex", "--iterations=2"}).exit_code, 0);
  const fs::path db = d.path / "results" / "ex" / "fanout.sqlite";
  for (const std::string& crafted : {(d.path / "outside").string(), std::string("../../escaped"), std::string("..")}) {
    ASSERT_EQ(test::run_command({"/usr/bin/sqlite3", db.string(), "UPDATE runs SET session = '" + crafted + "'"}, d.path).exit_code, 0);
    auto r = test::run_command({test::fanout_exe().string(), "results", "export-smartsim", "results/ex", "--out=" + (d.path / "tree").string()},
                               d.path, {}, 60);
    EXPECT_NE(r.exit_code, 0) << crafted;
    EXPECT_NE(r.err.find("is not a plain folder name"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(d.path / "outside")) << crafted;
    EXPECT_FALSE(fs::exists(d.path / "escaped")) << crafted;
    EXPECT_FALSE(fs::exists(d.path / "tree")) << crafted;
  }
  // The same name in a run.toml is refused on ingest, naming the file.
  fs::path run_toml;
  for (auto& e : fs::recursive_directory_iterator(d.path / "results" / "ex"))
    if (e.path().filename() == "run.toml") run_toml = e.path();
  std::string text = read_file(run_toml);
  const size_t at = text.find("\nsession = ");  // the line, whichever quotes it was written with
  ASSERT_NE(at, std::string::npos) << text;
  text.replace(at + 1, text.find('\n', at + 1) - at - 1, "session = '../../escaped'");
  write_file_atomic(run_toml, text);
  auto ingest = test::run_command({test::fanout_exe().string(), "results", "ingest", "results/ex"}, d.path, {}, 60);
  EXPECT_NE(ingest.exit_code, 0);
  EXPECT_NE(ingest.err.find("run.toml: session '../../escaped' is not a plain folder name"), std::string::npos) << ingest.err;
  // A step named like a folder fanout reads: refused before anything runs.
  write_file_atomic(d.path / "forge.toml", "[experiment]\nplugin = \"exec\"\n[[steps]]\nname = \"samples\"\ncommand = \"true\"\n");
  auto forge = fanout_cmd(d, {"run", "forge.toml"});
  EXPECT_EQ(forge.exit_code, 2) << forge.err;
  EXPECT_NE(forge.err.find("a step may not be named 'samples'"), std::string::npos) << forge.err;
  EXPECT_FALSE(fs::exists(d.path / "results" / "forge"));
  // A folder fanout did not make is not written into (its csv/ and processed/ would be replaced).
  fs::create_directories(d.path / "results" / "theirs" / "csv");
  write_file_atomic(d.path / "results" / "theirs" / "csv" / "samples.csv", "their data\n");
  auto theirs = fanout_cmd(d, {"calibration_sleep", "--exp_name=theirs", "--iterations=1"});
  EXPECT_EQ(theirs.exit_code, 2) << theirs.err;
  EXPECT_NE(theirs.err.find("theirs exists and is no fanout experiment (it has no fanout.sqlite)"), std::string::npos) << theirs.err;
  EXPECT_EQ(read_file(d.path / "results" / "theirs" / "csv" / "samples.csv"), "their data\n");
}

// Issue 53: a crafted fanout.sqlite whose `runs` is an endless view (or that carries a trigger) is refused on
// opening, by `fanout ls`, csv and compare alike, instead of hanging them.
// Issue 53 LOW: compare, check, csv --out and export-smartsim --out opened the database to write it, so a colleague's
// results (or a read-only mount) could not be read. Run as another user (nobody) on experiments this test's user
// made (folders 755, files 644), each reads them; only its own --out is written. As root only: it takes another user.
TEST(Hardening4, CommandsThatOnlyReadNeedNoWriteAccessToWhatTheyRead) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to run a command as another user";
  test::TempDir d;
  fs::permissions(d.path, fs::perms::owner_all | fs::perms::group_read | fs::perms::group_exec | fs::perms::others_read | fs::perms::others_exec);
  for (const char* exp : {"a", "b"})
    ASSERT_EQ(fanout_cmd(d, {"calibration_sleep", std::string("--exp_name=") + exp, "--iterations=3", "--repeat=3"}).exit_code, 0);
  ASSERT_EQ(fanout_cmd(d, {"results", "check", "results/a", "--write-reference=ref.toml"}).exit_code, 0);
  const fs::path out = d.path / "out";
  fs::create_directories(out);
  ASSERT_EQ(::chown(out.c_str(), 65534, 65534), 0);
  auto listing = [&] {
    std::map<std::string, fs::file_time_type> files;
    for (auto& e : fs::recursive_directory_iterator(d.path / "results")) files[e.path().string()] = fs::last_write_time(e.path());
    return files;
  };
  const auto before = listing();
  auto as_nobody = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {"/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", test::fanout_exe().string()});
    return test::run_command(args, d.path, {{"HOME", out.string()}}, 120);
  };
  auto compare = as_nobody({"results", "compare", "results/a", "results/b"});
  EXPECT_NE(compare.exit_code, 2) << compare.err;
  EXPECT_NE(compare.out.find("comparisons:"), std::string::npos) << compare.out << compare.err;
  auto check = as_nobody({"results", "check", "results/b", "--reference=ref.toml"});
  EXPECT_NE(check.exit_code, 2) << check.err;
  EXPECT_NE(check.out.find("reference(s):"), std::string::npos) << check.out << check.err;
  auto csv = as_nobody({"results", "csv", "results/a", "--out", (out / "csv").string()});
  EXPECT_EQ(csv.exit_code, 0) << csv.err;
  EXPECT_TRUE(fs::exists(out / "csv" / "runs.csv"));
  auto exported = as_nobody({"results", "export-smartsim", "results/a", "--out", (out / "ss").string()});
  EXPECT_EQ(exported.exit_code, 0) << exported.err;
  EXPECT_TRUE(listing() == before) << "nothing made or changed where they read";
  // Once the last writer closed its connection there is no WAL index (-shm) beside the database, and a reader who may
  // not write the folder cannot make one: the database is then read as immutable.
  for (const char* exp : {"a", "b"})
    ASSERT_EQ(test::run_command({"/usr/bin/sqlite3", (d.path / "results" / exp / "fanout.sqlite").string(), "PRAGMA wal_checkpoint(TRUNCATE);"}, d.path).exit_code, 0);
  ASSERT_FALSE(fs::exists(d.path / "results" / "a" / "fanout.sqlite-shm")) << "the last connection's close removes the WAL index";
  auto again = as_nobody({"results", "compare", "results/a", "results/b"});
  EXPECT_NE(again.exit_code, 2) << again.err;
  EXPECT_NE(again.out.find("comparisons:"), std::string::npos) << again.out << again.err;
  EXPECT_FALSE(fs::exists(d.path / "results" / "a" / "fanout.sqlite-shm")) << "no WAL index made where it may not write";
  auto writer = as_nobody({"results", "ingest", "results/a"});
  EXPECT_EQ(writer.exit_code, 2) << "a command that writes is refused, naming why: " << writer.out;
}

// Issue 53 LOW: invalid UTF-8 in a program's CSV header became a metric that --write-reference wrote and check
// refused (and compare --format=json threw on); a NUL cut a name where the host reads it as a C string, merging two
// metrics. A name or unit that is not UTF-8 text, or holds a control character or a NUL, fails its run naming it.
TEST(Hardening4, MetricNamesAreUtf8TextWithoutControlCharacters) {
  test::TempDir d;
  struct Case {
    std::string printed, parse, expect;
  } cases[] = {
      {"a\\377,b\\n1,2\\n", "csv", "metric name 'a\\xff' is not valid UTF-8 text"},
      {"a\\033b 1\\n", "regex:(?<metric>\\S+) (?<value>\\S+)", "metric name 'a\\x1bb' holds a control character"},
      {"a\\000x 1\\na\\000y 2\\n", "regex:(?<metric>\\S+) (?<value>\\S+)", "read a metric name or unit holding a NUL byte"},
  };
  int k = 0;
  for (auto& c : cases) {
    const std::string exp = "names" + std::to_string(k++);
    auto r = fanout_cmd(d, {"exec", "--exp_name=" + exp, "--shell=true", "--command=printf '" + c.printed + "'", "--parse=" + c.parse,
                            "--unit=ms", "--resources=off"});
    EXPECT_EQ(r.exit_code, 1) << c.printed << "\n" << r.err;
    EXPECT_NE(r.err.find(c.expect), std::string::npos) << c.printed << ": expected '" << c.expect << "' in\n" << r.err;
    EXPECT_EQ(test::sql_one(d.path / "results" / exp / "fanout.sqlite", "SELECT count(*) FROM samples WHERE warmup=0"), "0") << c.printed;
  }
}

// Issue 53 MEDIUM: `results ingest` read a sample file whole (a 6 GiB file: 6.3 GB) and packed a run's samples in
// memory before storing them (the driver at 2.0 GB for a run of 30 M). A file is now read 4 MiB at a time, and a run
// of more than 64 MiB of files is stored a block at a time: ingesting a run of 10 M samples (a 270 MiB file) peaks
// below the file's own size, and stores every sample.
TEST(Hardening4, IngestingARunOfAnySizeHoldsChunksNotItsSamples) {
  test::TempDir d;
  ASSERT_EQ(fanout_cmd(d, {"calibration_sleep", "--exp_name=big", "--iterations=2", "--resources=off"}).exit_code, 0);
  fs::path file;
  for (auto& e : fs::recursive_directory_iterator(d.path / "results" / "big"))
    if (e.path().extension() == ".samples") file = e.path();
  ASSERT_FALSE(file.empty());
  constexpr int64_t kSamples = 10'000'000;
  {
    fanout::SampleWriter w(file, 0, "sleep", "node", 1'000'000'000, 1'700'000'000'000'000'000);
    for (int64_t i = 0; i < kSamples; ++i) ASSERT_TRUE(w.record(i % 2 ? "even" : "odd", "s", i, 1'000'000'000 + i, double(i), false));
  }
  const uintmax_t file_bytes = fs::file_size(file);
  ASSERT_GT(file_bytes, uintmax_t(250) << 20);
  // Run as a child, its peak resident memory from the kernel (wait4).
  const std::string exe = test::fanout_exe().string(), exp = (d.path / "results" / "big").string();
  std::vector<char*> argv = {const_cast<char*>(exe.c_str()), const_cast<char*>("results"), const_cast<char*>("ingest"),
                             const_cast<char*>(exp.c_str()), nullptr};
  pid_t pid = 0;
  ASSERT_EQ(posix_spawn(&pid, exe.c_str(), nullptr, nullptr, argv.data(), environ), 0);
  int status = 0;
  rusage ru{};
  ASSERT_EQ(wait4(pid, &status, 0, &ru), pid);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  const uintmax_t peak_bytes = uintmax_t(ru.ru_maxrss) * 1024;
  EXPECT_LT(peak_bytes, file_bytes) << "peak " << (peak_bytes >> 20) << " MiB for a file of " << (file_bytes >> 20) << " MiB";
  EXPECT_EQ(test::sql_one(d.path / "results" / "big" / "fanout.sqlite", "SELECT sum(count) FROM sample_blocks"), std::to_string(kSamples));
  EXPECT_EQ(test::sql_one(d.path / "results" / "big" / "fanout.sqlite",
                          "SELECT sum(count) FROM sample_blocks b JOIN metrics m ON m.id = b.metric_id WHERE m.name = 'even'"),
            std::to_string(kSamples / 2));
}

TEST(Hardening4, ACraftedDatabaseIsRefusedNotRun) {
  test::TempDir d;
  ASSERT_EQ(fanout_cmd(d, {"calibration_sleep", "--exp_name=good", "--iterations=1"}).exit_code, 0);
  fs::create_directories(d.path / "results" / "endless");
  const std::string endless = (d.path / "results" / "endless" / "fanout.sqlite").string();
  ASSERT_EQ(test::run_command({"/usr/bin/sqlite3", endless,
                               "CREATE TABLE schema_info(version INTEGER NOT NULL); INSERT INTO schema_info VALUES(2); "
                               "CREATE VIEW runs AS WITH RECURSIVE n(i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n) "
                               "SELECT i AS id, 's' AS session, 'COMPLETED' AS status, 0.0 AS ended_at, 'h' AS param_hash FROM n;"},
                              d.path).exit_code, 0);
  const auto t0 = std::chrono::steady_clock::now();
  auto ls = test::run_command({test::fanout_exe().string(), "ls"}, d.path, {}, 60);
  EXPECT_EQ(ls.exit_code, 1) << ls.out << ls.err;
  EXPECT_NE(ls.err.find("is not a fanout results database as fanout makes them: its view 'runs' is not fanout's; nothing read"), std::string::npos) << ls.err;
  EXPECT_NE(ls.out.find("good"), std::string::npos) << "the other experiments are still listed: " << ls.out;
  auto csv = test::run_command({test::fanout_exe().string(), "results", "csv", "results/endless"}, d.path, {}, 60);
  EXPECT_NE(csv.exit_code, 0);
  EXPECT_NE(csv.err.find("its view 'runs' is not fanout's"), std::string::npos) << csv.err;
  auto cmp = test::run_command({test::fanout_exe().string(), "results", "compare", "results/good", "results/endless"}, d.path, {}, 60);
  EXPECT_NE(cmp.exit_code, 0);
  EXPECT_NE(cmp.err.find("its view 'runs' is not fanout's"), std::string::npos) << cmp.err;
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(50)) << "refused, not run";
  // A trigger fanout never makes.
  const std::string trig = (d.path / "results" / "good" / "fanout.sqlite").string();
  ASSERT_EQ(test::run_command({"/usr/bin/sqlite3", trig, "CREATE TRIGGER t AFTER INSERT ON runs BEGIN SELECT 1; END;"}, d.path).exit_code, 0);
  auto again = fanout_cmd(d, {"calibration_sleep", "--exp_name=good", "--iterations=1"});
  EXPECT_NE(again.exit_code, 0);
  EXPECT_NE(again.err.find("it has a trigger, 't', that fanout never makes"), std::string::npos) << again.err;
}

// Issue 53 MEDIUM: a program that ignores SIGTERM (and a daemon that left with setsid) outlived a run's TIMEOUT: exec
// puts each program in a process group of its own, and the launcher killed the rank before exec's grace ran out.
// Now the launcher also kills whatever still carries the job's token in its environment once the ranks are gone.
// The programs are sleeps with a number no other process has (this test's pid), found in /proc by their command line.
TEST(Hardening, AProgramThatIgnoresTermAndASetsidDaemonDieWithTheirRun) {
  test::TempDir d;
  const std::string stubborn = "600." + std::to_string(getpid()) + "1", daemon = "600." + std::to_string(getpid()) + "2";
  // The run ends by its wall time while both sleep: the shell waits for the stubborn one, which ignores TERM.
  auto r = fanout_cmd(d, {"exec", "--exp_name=orphans", "--walltime=2", "--shell=true",
                          "--command=setsid sleep " + daemon + " & trap '' TERM; sleep " + stubborn + " & wait"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("TIMEOUT"), std::string::npos) << r.err;
  // SIGKILL is delivered at once but a process leaves /proc when it is reaped: look until it is gone, bounded.
  for (const std::string& program : {stubborn, daemon}) {
    const auto still = test::processes_left(program, 10);
    EXPECT_TRUE(still.empty()) << "left behind: " << (still.empty() ? "" : still.front());
  }
}
