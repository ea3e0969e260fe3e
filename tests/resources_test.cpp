// What a run cost (issue 54): the resource.* figures of every rank, checked against programs of known cost
// (tests/clients/resource_probe.c) where the kernel counts exactly: pages touched, CPU spun, bytes written.
#include <gtest/gtest.h>
#include <linux/magic.h>
#include <spawn.h>
#include <sys/statfs.h>
#include <sys/wait.h>

#include <algorithm>
#include <chrono>
#include <map>
#include <string>
#include <vector>

#include "common/files.h"
#include "plugins/sdk/fanout_counters.hpp"
#include "tests/test_util.h"

extern char** environ;
namespace fs = std::filesystem;
using fanout::test::run_fanout;
using fanout::test::sql_one;
using fanout::test::sql_rows;

namespace {

constexpr double kMiB = 1048576.0;

struct Resources : ::testing::Test {
  fanout::test::TempDir d;
  static std::string probe() { return (fanout::test::build_dir() / "tests" / "resource_probe").string(); }
  fs::path db(const std::string& exp) { return d.path / "results" / exp / "fanout.sqlite"; }
  fanout::test::CommandResult exec(const std::string& exp, std::vector<std::string> args) {
    args.insert(args.begin(), {"exec", "--exp_name=" + exp});
    return run_fanout(d.path, args);
  }
  // A figure of every run, by the value of one parameter (measured invocations only).
  std::map<std::string, std::vector<double>> by(const std::string& exp, const std::string& metric, const std::string& param) {
    std::map<std::string, std::vector<double>> out;
    for (auto& row : sql_rows(db(exp), "SELECT p.value, s.value FROM samples s JOIN parameters p ON p.run_id = s.run_id AND p.name = '" +
                                           param + "' WHERE s.metric = '" + metric + "' AND s.warmup = 0"))
      out[row[0]].push_back(std::stod(row[1]));
    return out;
  }
};

// Peak RSS of a program that touches N MiB is N MiB and what the program itself holds (its code, libc: a few MiB);
// a child's pages count with the parent that waited for it.
TEST_F(Resources, PeakMemoryOfAProgramAndOfTheChildItWaitedFor) {
  auto r = exec("mem", {"--command=" + probe() + " {mode} {mib}", "--param", "mib=[1,64,256]", "--param", "mode=[mem,child]"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // 1 MiB stays under fanout-rank's own peak, where a started program's figure begins (Linux folds the parent's
  // peak in at exec): not recorded, and the rank's log says why, rather than the rank's memory as the program's.
  for (auto& row : sql_rows(db("mem"), "SELECT r.path FROM runs r JOIN parameters p ON p.run_id = r.id AND p.name = 'mib' WHERE p.value = '1'")) {
    EXPECT_EQ(sql_one(db("mem"), "SELECT count(*) FROM samples s JOIN runs r ON r.id = s.run_id WHERE r.path = '" + row[0] +
                                     "' AND s.metric = 'resource.peak_rss'"), "0");
    EXPECT_NE(fanout::read_file(fs::path(row[0]) / "run.err").find("resource.peak_rss not recorded"), std::string::npos) << row[0];
  }
  for (const std::string mode : {"mem", "child"}) {
    auto rows = sql_rows(db("mem"), "SELECT p.value, s.value, s.unit FROM samples s JOIN parameters p ON p.run_id = s.run_id AND p.name = 'mib' "
                                    "JOIN parameters m ON m.run_id = s.run_id AND m.name = 'mode' WHERE s.metric = 'resource.peak_rss' AND m.value = '" +
                                        mode + "' AND p.value != '1'");
    ASSERT_EQ(rows.size(), 2u) << mode;
    for (auto& row : rows) {
      const double n = std::stod(row[0]) * kMiB, rss = std::stod(row[1]);
      EXPECT_EQ(row[2], "B");
      EXPECT_GE(rss, n) << mode << " " << row[0] << " MiB";
      EXPECT_LE(rss, n + 16 * kMiB) << mode << " " << row[0] << " MiB";
    }
  }
  // Declared, so compare and references judge them without a guess: costs lower-is-better, what explains them none.
  EXPECT_EQ(sql_one(db("mem"), "SELECT group_concat(metric || '=' || better, ' ') FROM (SELECT DISTINCT metric, better FROM metric_declarations "
                               "WHERE metric LIKE 'resource.%' ORDER BY metric)"),
            "resource.involuntary_switches=none resource.major_faults=none resource.peak_rss=lower resource.read_bytes=lower "
            "resource.system_cpu=lower resource.user_cpu=lower resource.voluntary_switches=none resource.write_bytes=lower");
  EXPECT_EQ(sql_one(db("mem"), "SELECT count(DISTINCT metric) FROM samples WHERE metric LIKE 'resource.%'"), "8");
}

// User CPU of a program that spins for a known CPU time is that time (within 10 % of the program's own clock);
// a program that sleeps uses next to none: under a twentieth of the spinning one's (a fixed 5 ms failed on a machine
// where starting the program alone cost 5.7 ms).
TEST_F(Resources, CpuTimeOfASpinningAndOfASleepingProgram) {
  auto spin = exec("spin", {"--command=" + probe() + " cpu 300", "--parse", "regex:cpu_s=(?<value>\\S+)", "--metric=own_cpu", "--unit=s"});
  ASSERT_EQ(spin.exit_code, 0) << spin.err;
  const double own = std::stod(sql_one(db("spin"), "SELECT value FROM samples WHERE metric = 'own_cpu'"));
  const double user = std::stod(sql_one(db("spin"), "SELECT value FROM samples WHERE metric = 'resource.user_cpu'"));
  const double system = std::stod(sql_one(db("spin"), "SELECT value FROM samples WHERE metric = 'resource.system_cpu'"));
  ASSERT_GE(own, 0.3);
  // The program's own figure is user + system time (a loaded host puts a tenth of a spin in the kernel: user alone
  // fell 10.4 % short once).
  EXPECT_NEAR(user + system, own, 0.1 * own) << "user " << user << " s + system " << system << " s against the program's own " << own << " s";
  EXPECT_GT(user, system) << "a spin is user time";
  auto nap = exec("nap", {"--command=" + probe() + " sleep 200"});
  ASSERT_EQ(nap.exit_code, 0) << nap.err;
  EXPECT_LT(std::stod(sql_one(db("nap"), "SELECT value FROM samples WHERE metric = 'resource.user_cpu'")), own / 20);
  EXPECT_GE(std::stod(sql_one(db("nap"), "SELECT value FROM samples WHERE metric = 'wall_time'")), 0.2);
}

// Bytes written to storage: at least what the program wrote and fsynced. tmpfs has no storage to count: there the
// test cannot say anything and says so.
TEST_F(Resources, BytesAProgramWroteAndSynced) {
  struct statfs fs_info {};
  ASSERT_EQ(statfs(d.path.c_str(), &fs_info), 0);
  if (fs_info.f_type == TMPFS_MAGIC) GTEST_SKIP() << d.path << " is on tmpfs, where the kernel counts no storage bytes";
  auto r = exec("io", {"--command=" + probe() + " write {mib} out.bin", "--param", "mib=[8,32]"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto written = by("io", "resource.write_bytes", "mib");
  ASSERT_EQ(written.size(), 2u);
  for (auto& [mib, values] : written) {
    ASSERT_EQ(values.size(), 1u);
    EXPECT_GE(values[0], std::stod(mib) * kMiB) << mib << " MiB";
  }
}

// Each invocation is measured on its own, warmup ones labelled as the time is; the rank's own figures are not added
// beside the program's (one set per invocation).
TEST_F(Resources, EveryInvocationHasItsFiguresAndWarmupIsLabelled) {
  auto r = exec("inv", {"--command=" + probe() + " mem 16", "--warmup=1", "--repeat_command=3", "--ranks_per_node=2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(sql_one(db("inv"), "SELECT count(*) FROM samples WHERE metric = 'resource.peak_rss' AND warmup = 1"), "2");
  EXPECT_EQ(sql_one(db("inv"), "SELECT count(*) FROM samples WHERE metric = 'resource.peak_rss' AND warmup = 0"), "6");
  EXPECT_EQ(sql_one(db("inv"), "SELECT group_concat(DISTINCT iteration) FROM samples WHERE metric = 'resource.user_cpu' AND warmup = 0"), "0,1,2");
}

// A plugin's rank records its own process's figures after its role; --resources=off records none, for plugins and
// exec alike.
TEST_F(Resources, APluginsRanksRecordTheirOwnAndOffRecordsNothing) {
  auto r = run_fanout(d.path, {"calibration_copy", "--exp_name=cal", "--ranks_per_node=2", "--iterations=20", "--copy_bytes=8388608"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(sql_one(db("cal"), "SELECT count(*) FROM samples WHERE metric = 'resource.peak_rss' AND role = 'copy'"), "2");
  // Two 8 MiB buffers per rank: the peak holds them.
  EXPECT_EQ(sql_one(db("cal"), "SELECT count(*) FROM samples WHERE metric = 'resource.peak_rss' AND value >= 16 * 1048576"), "2");
  // CPU time, user and system together: the kernel may charge a copy's page faults to either.
  EXPECT_EQ(sql_one(db("cal"), "SELECT count(*) FROM (SELECT rank, sum(value) AS cpu FROM samples WHERE metric IN ('resource.user_cpu', "
                               "'resource.system_cpu') GROUP BY run_id, rank) WHERE cpu > 0"), "2");
  // The rank's own peak since its exec (not the driver's, where ru_maxrss would start): a 64 MiB copy's two buffers
  // are 112 MiB more than an 8 MiB copy's (100 MiB of it asked: allocators round), and the small one stays far under
  // what a 128 MiB driver would have made it.
  auto big = run_fanout(d.path, {"calibration_copy", "--exp_name=big", "--iterations=3", "--copy_bytes=67108864"});
  ASSERT_EQ(big.exit_code, 0) << big.err;
  const double small_peak = std::stod(sql_one(db("cal"), "SELECT min(value) FROM samples WHERE metric = 'resource.peak_rss'"));
  const double big_peak = std::stod(sql_one(db("big"), "SELECT value FROM samples WHERE metric = 'resource.peak_rss'"));
  EXPECT_GE(big_peak - small_peak, 100 * kMiB) << small_peak << " vs " << big_peak;
  EXPECT_LT(small_peak, 16 * kMiB + 64 * kMiB) << "an 8 MiB copy's rank: two buffers and the rank itself";
  auto off = run_fanout(d.path, {"calibration_copy", "--exp_name=off", "--iterations=5", "--resources=off"});
  ASSERT_EQ(off.exit_code, 0) << off.err;
  EXPECT_EQ(sql_one(db("off"), "SELECT count(*) FROM samples WHERE metric LIKE 'resource.%'"), "0");
  EXPECT_NE(sql_one(db("off"), "SELECT count(*) FROM samples WHERE metric = 'copy'"), "0");
  auto exec_off = exec("exec_off", {"--command=" + probe() + " mem 1", "--resources=off"});
  ASSERT_EQ(exec_off.exit_code, 0) << exec_off.err;
  EXPECT_EQ(sql_one(db("exec_off"), "SELECT count(*) FROM samples WHERE metric LIKE 'resource.%'"), "0");
  EXPECT_EQ(sql_one(db("exec_off"), "SELECT count(*) FROM samples WHERE metric = 'wall_time'"), "1");
  auto bad = run_fanout(d.path, {"calibration_copy", "--exp_name=bad", "--resources=maybe"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("resources"), std::string::npos) << bad.err;
}

// compare judges memory like any figure: a program whose memory doubled at equal time is a regression (exit 1); one
// whose memory did not change passes.
// GPU memory and energy through NVML (dlopen of libnvidia-ml.so.1) for a rank given GPUs. This machine has no
// NVIDIA driver: the library is a stand-in (tests/clients/nvml_standin.c) answering known figures, device i holding
// (i + 1) GiB and each energy reading adding 2.5 J. Ranks of GPUs 3,5 and 7,9: memory 4 + 6 and 8 + 10 GiB, energy
// 2.5 J a GPU (GPU 9 has no energy counter: that rank gets none). Without the library the run completes, said once.
TEST_F(Resources, GpuMemoryAndEnergyThroughNvmlWhereTheNodeHasIt) {
  fanout::write_file_atomic(d.path / "gpus.toml", "[experiment]\nplugin = \"calibration\"\nname = \"gpus\"\n[parameters]\niterations = 1\n"
                                          "[[steps]]\nrole = \"sleep\"\nnodes = 1\ntasks_per_node = 2\ngpus_per_task = 2\n");
  const std::string nvml_dir = (fanout::test::build_dir() / "tests" / "nvml").string();
  auto r = fanout::test::run_command({fanout::test::fanout_exe().string(), "run", "gpus.toml"}, d.path,
                                     {{"CUDA_VISIBLE_DEVICES", "3,5,7,9"}, {"LD_LIBRARY_PATH", nvml_dir}}, 120);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const double kGiB = 1024.0 * 1024 * 1024;
  EXPECT_EQ(sql_rows(db("gpus"), "SELECT rank, metric, value, unit FROM samples WHERE metric LIKE 'resource.gpu%' ORDER BY rank, metric"),
            (std::vector<std::vector<std::string>>{{"0", "resource.gpu_energy", "5.0", "J"},
                                                   {"0", "resource.gpu_memory", std::to_string(10 * kGiB).substr(0, 11) + ".0", "B"},
                                                   {"1", "resource.gpu_memory", std::to_string(18 * kGiB).substr(0, 11) + ".0", "B"}}));
  EXPECT_EQ(sql_one(db("gpus"), "SELECT group_concat(DISTINCT better) FROM metric_declarations WHERE metric LIKE 'resource.gpu%'"), "lower");
  auto absent = fanout::test::run_command({fanout::test::fanout_exe().string(), "run", "gpus.toml", "--exp_name=absent"}, d.path,
                                          {{"CUDA_VISIBLE_DEVICES", "3,5,7,9"}}, 120);
  ASSERT_EQ(absent.exit_code, 0) << absent.err;
  EXPECT_EQ(sql_one(db("absent"), "SELECT count(*) FROM samples WHERE metric LIKE 'resource.gpu%'"), "0");
  std::string logs;
  for (auto& e : fs::recursive_directory_iterator(d.path / "results" / "absent"))
    if (e.path().extension() == ".err" || e.path().extension() == ".out") logs += fanout::read_file(e.path());
  size_t said = 0;
  for (size_t at = 0; (at = logs.find("GPU memory and energy not recorded: NVML (libnvidia-ml.so.1", at)) != std::string::npos; ++at) ++said;
  EXPECT_EQ(said, 1u) << "once for the step, by its rank 0:\n" << logs;
}

TEST_F(Resources, CompareFlagsMemoryThatDoubledAtEqualTime) {
  for (auto& [exp, mib] : std::vector<std::pair<std::string, std::string>>{{"a", "64"}, {"same", "64"}, {"double", "128"}}) {
    auto r = exec(exp, {"--command=" + probe() + " mem {mib}", "--param", "mib=" + mib, "--repeat=5"});
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  auto doubled = run_fanout(d.path, {"results", "compare", "results/a", "results/double", "--metric=resource.peak_rss", "--ignore=mib"});
  EXPECT_EQ(doubled.exit_code, 1) << doubled.out << doubled.err;
  EXPECT_NE(doubled.out.find("resource.peak_rss"), std::string::npos) << doubled.out;
  EXPECT_NE(doubled.out.find("regression"), std::string::npos) << doubled.out;
  auto same = run_fanout(d.path, {"results", "compare", "results/a", "results/same", "--metric=resource.peak_rss", "--ignore=mib"});
  EXPECT_EQ(same.exit_code, 0) << same.out << same.err;
}

// Found by bench/resources_bench.sh: exec's wall time of a quick program was its run plus up to 50 ms, the period at
// which it looked for the program's exit once the pipes had closed. The exit now wakes it (a pidfd). Judged against
// what this test measures of the same program started and reaped directly, so a slow machine is slow for both.
TEST_F(Resources, AQuickProgramsWallTimeIsItsRunNotAPollingPeriod) {
  // posix_spawn and a blocking waitpid: the program's run, no polling; sorted.
  auto started_directly = [] {
    std::vector<double> direct;
    for (int i = 0; i < 21; ++i) {
      char* argv[] = {const_cast<char*>("/bin/true"), nullptr};
      const auto t0 = std::chrono::steady_clock::now();
      pid_t pid = 0;
      EXPECT_EQ(posix_spawn(&pid, "/bin/true", nullptr, nullptr, argv, environ), 0);
      int st = 0;
      EXPECT_EQ(waitpid(pid, &st, 0), pid);
      direct.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    std::sort(direct.begin(), direct.end());
    return direct;
  };
  const auto before = started_directly();
  auto r = exec("quick", {"--command=/bin/true", "--repeat_command=21"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const auto after = started_directly();
  auto times = sql_rows(db("quick"), "SELECT value FROM samples WHERE metric = 'wall_time' ORDER BY value");
  ASSERT_EQ(times.size(), 21u);
  const double median = std::stod(times[10][0]);
  // The old delay was up to 50 ms a run. The direct runs, measured before and after exec's, are what this machine
  // takes now, so a slow or loaded machine is slow for both: the slower median of the two, plus 20 ms, or three
  // times the spread the direct runs showed when the load changes under them, never 40 ms or more.
  const double direct = std::max(before[10], after[10]);
  const double spread = std::max(before[15] - before[5], after[15] - after[5]);
  EXPECT_LT(median, direct + std::min(0.04, std::max(0.02, 3 * spread))) << "exec's median " << median << " s, started directly " << direct << " s";
}

// --counters: what this node can count is counted (the program's own task-clock matches its own CPU clock), what it
// cannot is refused before anything runs with the reason; the test asks the node itself which it is, so it says
// something on a machine with hardware counters and on one without (this one: no cpu PMU).
TEST_F(Resources, CountersAreCountedOrTheRunIsRefusedWithTheReason) {
  const auto* ins = fanout_sdk::counter_named("PAPI_TOT_INS");
  ASSERT_NE(ins, nullptr);
  const std::string why = fanout_sdk::counter_unavailable(*ins);
  auto hw = exec("hw", {"--command=" + probe() + " cpu 50", "--counters=PAPI_TOT_INS"});
  if (why.empty()) {
    ASSERT_EQ(hw.exit_code, 0) << hw.err;
    EXPECT_GT(std::stod(sql_one(db("hw"), "SELECT value FROM samples WHERE metric = 'resource.counter.PAPI_TOT_INS'")), 1e6);
  } else {
    EXPECT_EQ(hw.exit_code, 2) << hw.err;
    EXPECT_NE(hw.err.find("--counters " + why), std::string::npos) << hw.err;
    EXPECT_FALSE(fs::exists(d.path / "results" / "hw")) << "refused before anything was written";
  }
  const auto* clock = fanout_sdk::counter_named("task-clock");
  if (!fanout_sdk::counter_unavailable(*clock).empty()) GTEST_SKIP() << "no software counters here: " << fanout_sdk::counter_unavailable(*clock);
  auto sw = exec("sw", {"--command=" + probe() + " cpu 300", "--parse", "regex:cpu_s=(?<value>\\S+)", "--metric=own_cpu", "--unit=s",
                        "--counters=task-clock,page-faults", "--warmup=1"});
  ASSERT_EQ(sw.exit_code, 0) << sw.err;
  const double own = std::stod(sql_one(db("sw"), "SELECT value FROM samples WHERE metric = 'own_cpu' AND warmup = 0"));
  const double counted = std::stod(sql_one(db("sw"), "SELECT value FROM samples WHERE metric = 'resource.counter.task-clock' AND warmup = 0"));
  EXPECT_NEAR(counted, own, 0.1 * own) << "task-clock " << counted << " s against the program's own " << own << " s";
  EXPECT_EQ(sql_one(db("sw"), "SELECT count(*) FROM samples WHERE metric = 'resource.counter.task-clock' AND warmup = 1"), "1") << "labelled";
  EXPECT_EQ(sql_one(db("sw"), "SELECT count(*) FROM samples WHERE metric = 'resource.counter.task-clock' AND warmup = 0"), "1")
      << "one set per invocation: the rank's own are stopped, not recorded beside";
  EXPECT_GT(std::stod(sql_one(db("sw"), "SELECT value FROM samples WHERE metric = 'resource.counter.page-faults' AND warmup = 0")), 0);
  EXPECT_EQ(sql_one(db("sw"), "SELECT DISTINCT better FROM metric_declarations WHERE metric LIKE 'resource.counter.%'"), "none");
  // A plugin's ranks count their role's work, also with --resources=off (counters are asked for by name).
  auto cal = run_fanout(d.path, {"calibration_copy", "--exp_name=calc", "--ranks_per_node=2", "--iterations=20", "--counters=task-clock",
                                 "--resources=off"});
  ASSERT_EQ(cal.exit_code, 0) << cal.err;
  EXPECT_EQ(sql_one(db("calc"), "SELECT count(*) FROM samples WHERE metric = 'resource.counter.task-clock' AND role = 'copy' AND value > 0"), "2");
  EXPECT_EQ(sql_one(db("calc"), "SELECT count(*) FROM samples WHERE metric = 'resource.peak_rss'"), "0");
  // A name no node has.
  auto bogus = exec("bogus", {"--command=/bin/true", "--counters=PAPI_BOGUS,context-switches"});
  EXPECT_EQ(bogus.exit_code, 2);
  EXPECT_NE(bogus.err.find("no counter 'PAPI_BOGUS' (known: instructions, cycles"), std::string::npos) << bogus.err;
}

}  // namespace
