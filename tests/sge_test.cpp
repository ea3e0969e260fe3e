// Grid Engine: script rendering, qstat -xml and qacct parsing on fixtures printed by the real SGE 8.1.9 tools
// (tests/fixtures/sge/, captured from the test cell), and the real submission path on the cell that
// scripts/sge-cluster.sh brings up (sge_qmaster + sge_execd on this host, parallel environment `fanout`).
#include <gtest/gtest.h>

#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include <fstream>
#include <set>

#include "common/error.h"
#include "common/files.h"
#include "common/text.h"
#include "schedulers/sge.h"
#include "tests/test_util.h"

using namespace fanout;
namespace fs = std::filesystem;

namespace {

fs::path fixture(const std::string& name) { return fs::path(FANOUT_SOURCE_DIR) / "tests" / "fixtures" / "sge" / name; }

StepSpec step(const std::string& role, int nodes, int tasks_per_node, int cpus_per_task) {
  StepSpec s;
  s.role = role;
  s.nodes = nodes;
  s.tasks_per_node = tasks_per_node;
  s.cpus_per_task = cpus_per_task;
  return s;
}

JobSpec two_step_job() {
  JobSpec j;
  j.name = "infer-sess-N2-abc123";
  j.run_dir = "/scratch/exp/run-1/infer-sess-N2-abc123";
  j.rank_exe = "/opt/fanout/bin/fanout-rank";
  j.plugin_path = "/opt/fanout/lib/fanout_smartsim.so";
  j.walltime_s = 5400;
  j.steps = {step("db", 1, 1, 4), step("client", 2, 2, 2)};
  j.options.partition = "long.q";
  j.options.account = "ml-bench";
  j.options.batch_args = {{"pe", "mpi"}};
  return j;
}

std::vector<std::string> directives(const std::string& script) {
  std::vector<std::string> out;
  for (auto& l : split(script, '\n'))
    if (starts_with(l, "#$ ")) out.push_back(l);
  return out;
}

}  // namespace

// What qsub reads: the name, bash, the run folder as working directory and output, h_rt, the PE with the job's
// slots (3 nodes of the busiest node's 4 CPUs), queue, project. Grid Engine's words, never PBS's.
TEST(SgeScript, DirectivesAreGridEnginesForTheJob) {
  const std::string s = sge_job_script(two_step_job());
  const std::vector<std::string> want = {"#$ -N infer-sess-N2-abc123",
                                         "#$ -S /bin/bash",
                                         "#$ -wd /scratch/exp/run-1/infer-sess-N2-abc123",
                                         "#$ -o /scratch/exp/run-1/infer-sess-N2-abc123/sge.out",
                                         "#$ -j y",
                                         "#$ -l h_rt=01:30:00",
                                         "#$ -pe mpi 12",
                                         "#$ -q long.q",
                                         "#$ -P ml-bench"};
  EXPECT_EQ(directives(s), want) << s;
  EXPECT_EQ(s.find("#PBS"), std::string::npos);
  // Each node is its next 4 slots of $PE_HOSTFILE; each step's mpirun host file is cut from those nodes.
  EXPECT_NE(s.find("awk -v n=4 '(NR - 1) % n == 0' > hosts.all"), std::string::npos) << s;
  EXPECT_NE(s.find("sed -n '1,1{s/$/ slots=1/;p}' hosts.all > 'hosts.db'"), std::string::npos) << s;
  EXPECT_NE(s.find("sed -n '2,3{s/$/ slots=2/;p}' hosts.all > 'hosts.client'"), std::string::npos) << s;
  EXPECT_NE(s.find("'mpirun' '--allow-run-as-root' '-np' '4' '--map-by' 'ppr:2:node:pe=2' '--hostfile' 'hosts.client'"), std::string::npos) << s;
  // One slot: no parallel environment asked.
  JobSpec one = two_step_job();
  one.steps = {step("run", 1, 1, 1)};
  one.options.batch_args.clear();
  EXPECT_EQ(sge_job_script(one).find("#$ -pe"), std::string::npos);
}

TEST(SgeScript, ValuesThatWouldStartOtherOptionsAreRefusedNamingTheFlag) {
  auto refused = [](JobSpec j, const std::string& want) {
    try {
      sge_job_script(j);
      ADD_FAILURE() << "accepted; wanted: " << want;
    } catch (const UserError& e) {
      EXPECT_NE(std::string(e.what()).find(want), std::string::npos) << e.what();
    }
  };
  JobSpec j = two_step_job();
  j.options.partition = "all.q -v LD_PRELOAD=/tmp/x.so";
  refused(j, "--partition: 'all.q -v LD_PRELOAD=/tmp/x.so' cannot go on a #$ -q line");
  j = two_step_job();
  j.options.batch_args = {{"qos", "high"}};
  refused(j, "--batch_args qos=high: the sge launcher takes pe=NAME (the parallel environment) only");
  j = two_step_job();
  j.run_dir = "/scratch/a:b/run";
  refused(j, "--results_dir: '/scratch/a:b/run' has a ':'");
}

// A real `qstat -xml` of the test cell: a PE job running, an array with task 1 running and 3-9:2 pending (the
// range form), a held job. Every task of the array is its own entry.
TEST(SgeQstat, ParsesRunningPendingRangesAndHeldJobs) {
  const auto jobs = parse_qstat_xml(read_file(fixture("qstat_xml_running_pending_held.xml")));
  const std::map<std::string, std::string> want = {{"11", "r"},   {"12.1", "r"},  {"12.3", "qw"}, {"12.5", "qw"},
                                                   {"12.7", "qw"}, {"12.9", "qw"}, {"13", "hqw"}};
  EXPECT_EQ(jobs, want);
  EXPECT_TRUE(parse_qstat_xml("<?xml version='1.0'?>\n<job_info>\n  <queue_info>\n  </queue_info>\n</job_info>").empty());
  EXPECT_THROW(parse_qstat_xml("error: commlib error: got select error (Connection refused)"), UserError);
}

// Real `qacct -j` records of the test cell: an h_rt kill (failed 37), a qdel (failed 100, SIGKILL before its
// wall time), a job exiting 3, an array of three tasks.
TEST(SgeQacct, RecordsMapToTheirStates) {
  test::TempDir d;
  JobSpec job = test::trivial_job(d.path, "acct");
  job.walltime_s = 4;
  auto one = [](const std::string& file) {
    auto r = parse_qacct(read_file(fixture(file)));
    EXPECT_EQ(r.size(), 1u) << file;
    return r.empty() ? QacctRecord{} : r.front();
  };
  const QacctRecord hrt = one("qacct_h_rt_kill.txt");
  EXPECT_EQ(hrt.failed, 37);
  EXPECT_EQ(hrt.failed_text, "qmaster enforced h_rt, h_cpu, or h_vmem limit");
  EXPECT_EQ(hrt.exit_status, 137);
  JobStatus s = sge_status("4", hrt, job);
  EXPECT_EQ(s.state, JobState::Timeout);
  EXPECT_NE(s.reason.find("killed at its wall time of 00:00:04 (h_rt"), std::string::npos) << s.reason;

  job.walltime_s = 3600;
  s = sge_status("6", one("qacct_qdel.txt"), job);
  EXPECT_EQ(s.state, JobState::Failed) << "killed long before its wall time";
  EXPECT_EQ(s.signal, 9);
  EXPECT_NE(s.reason.find("failed 100 (assumedly after job), exit status 137 (signal 9, SIGKILL)"), std::string::npos) << s.reason;

  s = sge_status("7", one("qacct_exit_3.txt"), job);
  EXPECT_EQ(s.state, JobState::Failed);
  EXPECT_EQ(s.exit_code, 3);

  const auto tasks = parse_qacct(read_file(fixture("qacct_array_of_3.txt")));
  ASSERT_EQ(tasks.size(), 3u);
  for (int k = 0; k < 3; ++k) {
    EXPECT_EQ(tasks[k].job, "5");
    EXPECT_EQ(tasks[k].task, k + 1);
    EXPECT_EQ(sge_status("5." + std::to_string(k + 1), tasks[k], job).state, JobState::Completed);
  }
  // A lost execd (ESSTATE_EXECD_LOST_RUNNING, 22): no fixture, since killing the only execd of the shared test
  // cell would fail every other test's jobs; the record is made as qacct prints it.
  QacctRecord lost = parse_qacct("==============================================================\njobnumber    9\ntaskid       undefined\n"
                                 "failed       22  : execd lost running job\nexit_status  0\n")
                         .front();
  EXPECT_EQ(sge_status("9", lost, job).state, JobState::NodeFail);
}

// What a qacct record measured (issue 54), as qacct 8.1.9 prints it (the real records above): cpu and the
// shepherd's rusage of the job script; ru_maxrss is Linux's KiB printed as if bytes ("20.094KB" is 20.094 MiB);
// maxvmem, io and iow are 0 where the execd's collector measured nothing (this cell): no figures then.
TEST(SgeQacct, ARecordsUsageIsItsCpuAndPeak) {
  const std::string text = "==============================================================\njobnumber    12\ntaskid       undefined\n"
                           "failed       0    \nexit_status  0                   \nru_wallclock 1s\nru_utime     0.095s\nru_stime     0.086s\n"
                           "ru_maxrss    20.094KB\nru_inblock   72                  \ncpu          0.181s\nmem          0.000Bs\n"
                           "io           0.000B\niow          0.000s\nmaxvmem      0.000B\n";
  auto figures = [](const QacctRecord& r) {
    std::map<std::string, double> out;
    for (auto& f : r.usage) out[f.name + " " + f.unit] = f.value;
    return out;
  };
  const QacctRecord r = parse_qacct(text).front();
  const std::map<std::string, double> want = {{"cpu s", 0.181}, {"user_cpu s", 0.095}, {"system_cpu s", 0.086}, {"max_rss B", 20.094 * 1024 * 1024}};
  EXPECT_EQ(figures(r), want);
  std::string measured = text;
  measured.replace(measured.find("maxvmem      0.000B"), 19, "maxvmem      1.500G");
  measured.replace(measured.find("io           0.000B"), 19, "io           12.000K");
  measured.replace(measured.find("iow          0.000s"), 19, "iow          0.250s");
  // A size without its B is not one qacct prints: not read (io), rather than guessed.
  auto m = figures(parse_qacct(measured).front());
  EXPECT_EQ(m.count("max_vmem B"), 0u) << "1.500G lacks the B qacct always prints";
  measured.replace(measured.find("maxvmem      1.500G"), 19, "maxvmem      1.500GB");
  m = figures(parse_qacct(measured).front());
  EXPECT_EQ(m["max_vmem B"], 1.5 * 1024 * 1024 * 1024);
  EXPECT_EQ(m["io_wait s"], 0.25);
  EXPECT_EQ(m.count("io B"), 0u);
  JobSpec job;
  JobStatus s = sge_status("12", r, job);
  ASSERT_EQ(s.usage.size(), 1u);
  EXPECT_EQ(s.usage[0].step, "") << "Grid Engine accounts the whole job";
}

// --- the real cell ---

class SgeCell : public ::testing::Test {
 protected:
  void SetUp() override {
    auto r = test::run_command({"/usr/bin/qstat", "-f"}, "/", {}, 30);
    ASSERT_EQ(r.exit_code, 0) << "the Grid Engine test cell is not up: scripts/sge-cluster.sh up (scripts/test.sh does)\n" << r.err;
    ASSERT_NE(r.out.find("all.q@"), std::string::npos) << r.out;
  }
  test::TempDir d;
  test::CommandResult fanout(std::vector<std::string> args, double timeout_s = 300) { return test::run_fanout(d.path, args, timeout_s); }
  std::string one(const std::string& exp, const std::string& sql) { return test::sql_one(d.path / "results" / exp / "fanout.sqlite", sql); }
  std::vector<std::vector<std::string>> query(const std::string& exp, const std::string& sql) {
    return test::sql_rows(d.path / "results" / exp / "fanout.sqlite", sql);
  }
  // True once qstat no longer lists the job (a number, or "<number>.<task>").
  static bool gone_from_qstat(const std::string& id, double timeout_s) {
    return test::wait_for([&] {
      auto r = test::run_command({"/usr/bin/qstat", "-xml"}, "/", {}, 30);
      return r.exit_code == 0 && !parse_qstat_xml(r.out).count(id);
    }, timeout_s);
  }
  // A qstat on PATH ahead of the real one that counts its invocations.
  std::vector<std::pair<std::string, std::string>> counting_qstat_env() {
    fs::create_directories(d.path / "shim");
    std::ofstream(d.path / "shim" / "qstat") << "#!/bin/sh\necho \"$*\" >> " << shell_quote((d.path / "qstat.calls").string())
                                               << "\nexec /usr/bin/qstat \"$@\"\n";
    ::chmod((d.path / "shim" / "qstat").c_str(), 0755);
    return {{"PATH", (d.path / "shim").string() + ":" + std::getenv("PATH")}};
  }
};

// A sweep of one and two ranks: qsub with #$ directives, the two-rank run through the cell's PE, ranks started by
// Open MPI's mpirun on host files cut from $PE_HOSTFILE.
TEST_F(SgeCell, SweepRunsThroughQsubWithMpirunOnThePeHosts) {
  auto r = fanout({"calibration_sleep", "--launcher=sge", "--exp_name=sge", "--ranks_per_node=[1,2]", "--iterations=5"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(one("sge", "SELECT count(*) FROM runs WHERE status='COMPLETED' AND launcher='sge'"), "2");
  const auto per_run = query("sge", "SELECT count(*) FROM samples s JOIN parameters p ON p.run_id=s.run_id AND p.name='ranks_per_node' "
                                    "WHERE s.rank >= 0 GROUP BY p.value ORDER BY p.value");  // the ranks' own, not the job's accounting
  ASSERT_EQ(per_run.size(), 2u);
  EXPECT_GT(std::stoi(per_run[0][0]), 0);
  EXPECT_EQ(std::stoi(per_run[1][0]), 2 * std::stoi(per_run[0][0])) << "both ranks of the two-rank run measured";
  const fs::path two = one("sge", "SELECT r.path FROM runs r JOIN parameters p ON p.run_id=r.id AND p.name='ranks_per_node' AND p.value='2'");
  const std::string script = read_file(two / "job.sh");
  EXPECT_NE(script.find("#$ -pe fanout 2\n"), std::string::npos) << "the cell's one PE, found with qconf -spl:\n" << script;
  EXPECT_NE(read_file(two / "hosts.sleep").find(" slots=2"), std::string::npos);
  EXPECT_TRUE(fs::exists(two / "sge.out"));
}

// Two steps on disjoint nodes (each node is slots of the same host here) and the rendezvous service between them.
TEST_F(SgeCell, TwoStepsOfOneNodeEachMeetAndComplete) {
  write_file_atomic(d.path / "two.toml",
                    "[experiment]\nname = \"two\"\nplugin = \"calibration\"\nlauncher = \"sge\"\n"
                    "[[steps]]\nrole = \"sleep\"\nnodes = 1\ntasks_per_node = 1\n"
                    "[[steps]]\nrole = \"copy\"\nnodes = 1\ntasks_per_node = 2\n"
                    "[parameters]\niterations = 5\n");
  auto r = fanout({"run", "two.toml"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(one("two", "SELECT status FROM runs"), "COMPLETED");
  EXPECT_EQ(one("two", "SELECT count(DISTINCT role) || ' ' || count(*) FROM rank_nodes"), "2 3");
}

// The cell's accounting of each job (qacct: cpu, the shepherd's rusage) is stored as the run's usage, role "job",
// beside the program's own figures: the job's CPU holds the program's spun 300 ms and little more, what the job
// around it costs (the job script and fanout-rank), measured by a job around a program that spins for nothing (a
// fixed second failed on a machine where that cost 1.08 s); --resources=off stores none.
TEST_F(SgeCell, EachJobsAccountingIsStoredAsItsUsage) {
  const std::string probe = (test::build_dir() / "tests" / "resource_probe").string();
  auto job_and_program = [&](const std::string& exp, int spin_ms) {
    auto r = fanout({"exec", "--launcher=sge", "--exp_name=" + exp, "--command=" + probe + " cpu " + std::to_string(spin_ms)});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    const double program = std::stod(one(exp, "SELECT sum(value) FROM samples WHERE metric IN ('resource.user_cpu', 'resource.system_cpu') AND rank = 0"));
    const auto job = query(exp, "SELECT role, rank, value, unit FROM samples WHERE metric = 'resource.scheduler.cpu'");
    EXPECT_EQ(job.size(), 1u) << r.err;
    if (job.size() == 1) {
      EXPECT_EQ(job[0][0] + " " + job[0][1] + " " + job[0][3], "job -1 s");
    }
    return std::make_pair(job.size() == 1 ? std::stod(job[0][2]) : -1.0, program);
  };
  const auto [empty_job, empty_program] = job_and_program("around", 0);
  const double around = std::max(0.0, empty_job - empty_program);
  const auto [job_cpu, program] = job_and_program("acct", 300);
  EXPECT_GE(job_cpu, program - 0.01);
  EXPECT_LE(job_cpu, program + 2 * around + 0.05) << "a job around a program costs " << around << " s here";
  EXPECT_GT(std::stod(one("acct", "SELECT value FROM samples WHERE metric = 'resource.scheduler.max_rss'")), 1 << 20);
  EXPECT_EQ(one("acct", "SELECT better FROM metric_declarations WHERE metric = 'resource.scheduler.cpu'"), "lower");
  auto r = fanout({"exec", "--launcher=sge", "--exp_name=off", "--resources=off", "--command=" + probe + " cpu 10"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(one("off", "SELECT count(*) FROM samples WHERE metric LIKE 'resource.%'"), "0");
}

TEST_F(SgeCell, PollingAnyNumberOfJobsCostsOneQstat) {
  auto env = counting_qstat_env();
  setenv("PATH", env[0].second.c_str(), 1);
  SgeScheduler sge;
  std::vector<std::string> ids;
  for (int i = 0; i < 6; ++i) ids.push_back(sge.submit(test::trivial_job(d.path, "sq" + std::to_string(i))));
  const int before = std::stoi(test::line_count_summary(read_file(d.path / "qstat.calls")));
  int polls = 0;
  const bool done = test::wait_for([&] {
    ++polls;
    for (auto& s : sge.poll(ids))
      if (!job_state_final(s.state)) return false;
    return true;
  }, 120);
  const int after = std::stoi(test::line_count_summary(read_file(d.path / "qstat.calls")));
  EXPECT_TRUE(done);
  EXPECT_EQ(after - before, polls) << "each poll of 6 jobs runs qstat exactly once";
  EXPECT_EQ(sge.queries(), uint64_t(polls));
  for (auto& s : sge.poll(ids)) EXPECT_EQ(s.state, JobState::Completed) << s.job_id << " " << s.reason;
}

// A job Grid Engine cannot start (its working directory is gone when it is dispatched) waits in Eqw for an
// administrator for ever: recorded FAILED with qstat's state and deleted, not polled without end.
TEST_F(SgeCell, AJobInErrorStateIsFailedAndDeleted) {
  SgeScheduler sge;
  JobSpec job = test::trivial_job(d.path, "eqw");
  job.options.hold = true;  // submitted held, so that its folder is gone before it is dispatched
  const std::string id = sge.submit(job);
  fs::rename(job.run_dir, d.path / "moved");
  ASSERT_EQ(test::run_command({"/usr/bin/qrls", id}, "/", {}, 30).exit_code, 0);
  JobStatus s;
  ASSERT_TRUE(test::wait_for([&] {
    s = sge.poll({id}).front();
    return job_state_final(s.state);
  }, 120)) << "still " << job_state_name(s.state);
  EXPECT_EQ(s.state, JobState::Failed);
  EXPECT_NE(s.reason.find("Grid Engine holds the job in error state (Eqw"), std::string::npos) << s.reason;
  EXPECT_TRUE(gone_from_qstat(id, 60)) << "job " << id << " was not deleted";
}

// An array qsub refuses (a queue the cell does not have) takes only its own runs with it: the other shape's array,
// submitted before or after it, keeps its ids and is followed; the refused array's script is not kept.
TEST_F(SgeCell, AnArrayQsubRefusesTakesOnlyItsOwnRunsWithIt) {
  SgeScheduler sge;
  const std::vector<JobSpec> jobs = test::two_shapes_one_refused(d.path, "no_such.q");
  const std::vector<Scheduler::Submitted> got = sge.submit_array(jobs, 2);
  const std::set<std::string> arrays = test::arrays_of_accepted_runs(got, '.', "qsub refused an array of 3 runs");
  ASSERT_EQ(arrays.size(), 1u) << "the accepted runs are one array";
  const auto polled = sge.poll({got[0].id});
  ASSERT_EQ(polled.size(), 1u);
  EXPECT_EQ(polled[0].state, JobState::Pending) << "the accepted array is followed (held: hqw): " << job_state_name(polled[0].state);
  EXPECT_EQ(test::files_named_from(d.path / "two", "sge-array-"), 1u) << "the refused array's script is not kept";
  sge.cancel({got[0].id, got[2].id, got[4].id});
  for (size_t i : {0, 2, 4}) EXPECT_TRUE(gone_from_qstat(got[i].id, 60)) << got[i].id << " is still queued";
}

// --array: one qsub -t per resource shape, throttled with -tc; each run a task "<job>.<k>".
TEST_F(SgeCell, ArraySweepIsOneArrayPerShapeThrottledByTc) {
  auto r = fanout({"calibration_copy", "--launcher=sge", "--array", "--max_parallel=2", "--exp_name=arr", "--copy_bytes=[1024,2048,4096]",
                   "--ranks_per_node=[1,2]", "--iterations=3"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto rows = query("arr", "SELECT job_id, status FROM runs");
  ASSERT_EQ(rows.size(), 6u);
  std::set<std::string> arrays;
  for (auto& row : rows) {
    EXPECT_EQ(row[1], "COMPLETED") << row[0];
    const auto dot = row[0].find('.');
    ASSERT_NE(dot, std::string::npos) << row[0] << " is not an array task id";
    arrays.insert(row[0].substr(0, dot));
  }
  EXPECT_EQ(arrays.size(), 2u) << "one array per resource shape (1 slot, 2 slots)";
  const fs::path root = fs::path(one("arr", "SELECT path FROM runs LIMIT 1")).parent_path();
  const std::string a = read_file(root / "sge-array-1.sh") + read_file(root / "sge-array-2.sh");
  EXPECT_NE(a.find("#$ -t 1-3\n#$ -tc 2\n"), std::string::npos) << a;
}

TEST_F(SgeCell, FailingRankIsFailedWithItsExitCode) {
  auto r = fanout({"calibration_sleep", "--launcher=sge", "--exp_name=fail", "--fail_rank=0", "--iterations=2"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(one("fail", "SELECT status FROM runs"), "FAILED");
  const std::string reason = one("fail", "SELECT reason FROM runs");
  EXPECT_NE(reason.find("step 'sleep' exited with status 3"), std::string::npos) << reason;
}

// h_rt is enforced to the second: a run that hangs past --walltime=5 is killed and recorded TIMEOUT from qacct.
TEST_F(SgeCell, JobOverItsWallTimeGivesTimeoutFromTheAccounting) {
  auto r = fanout({"calibration_sleep", "--launcher=sge", "--exp_name=tl", "--hang_rank=0", "--walltime=5"}, 400);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(one("tl", "SELECT status FROM runs"), "TIMEOUT");
  const std::string reason = one("tl", "SELECT reason FROM runs");
  EXPECT_NE(reason.find("killed at its wall time of 00:00:05 (h_rt"), std::string::npos) << reason;
  // Grid Engine SIGKILLs the job script's process group; the rank, in a group of its own under mpirun, stops once
  // its launcher is gone (fanout-rank's orphan watch: the hanging role is ended 15 s later). Nothing is left.
  const auto left = test::processes_left((d.path / "results" / "tl").string(), 120);
  EXPECT_TRUE(left.empty()) << "left behind: " << (left.empty() ? "" : left.front());
}

TEST_F(SgeCell, InterruptCancelsTheJobThroughQdel) {
  pid_t pid = test::spawn_fanout(d.path, {"calibration_sleep", "--launcher=sge", "--exp_name=cx", "--hang_rank=0"}, d.path / "err.txt");
  ASSERT_GT(pid, 0);
  ASSERT_TRUE(test::wait_for_a_running_rank(d.path / "results", 240)) << read_file(d.path / "err.txt");
  kill(pid, SIGINT);
  int st = 0;
  ASSERT_TRUE(test::wait_for([&] { return waitpid(pid, &st, WNOHANG) == pid; }, 60));
  EXPECT_EQ(test::exit_status(st), 130) << read_file(d.path / "err.txt");
  auto rows = query("cx", "SELECT status, job_id FROM runs");
  ASSERT_EQ(rows.size(), 1u);
  EXPECT_EQ(rows[0][0], "CANCELLED");
  EXPECT_TRUE(gone_from_qstat(rows[0][1], 60)) << "job " << rows[0][1] << " is still listed";
  const auto left = test::processes_left((d.path / "results" / "cx").string(), 120);
  EXPECT_TRUE(left.empty()) << "left behind: " << (left.empty() ? "" : left.front());
}

// The driver dies (SIGKILL) with its jobs in the cell; `fanout resume` follows them by id instead of submitting
// them again, and every run completes once.
TEST_F(SgeCell, ResumeAfterTheDriverIsKilledFollowsItsJobs) {
  pid_t pid = test::spawn_fanout(d.path, {"calibration_sleep", "--launcher=sge", "--exp_name=kd", "--sleep_us=[100000,100001,100002]",
                                          "--iterations=30", "--warmup=0"},
                                 d.path / "err.txt");
  ASSERT_GT(pid, 0);
  auto job_ids = [&] { return test::submitted_job_ids(d.path / "results" / "kd"); };
  ASSERT_TRUE(test::wait_for([&] { return job_ids().size() == 3; }, 120)) << read_file(d.path / "err.txt");
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  const std::set<std::string> first = job_ids();

  auto r = fanout({"resume", "results/kd"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("3 still in the sge queue followed again; running 0"), std::string::npos) << r.err;
  auto rows = query("kd", "SELECT status, job_id FROM runs");
  ASSERT_EQ(rows.size(), 3u) << "nothing submitted twice";
  std::set<std::string> ids;
  for (auto& row : rows) {
    EXPECT_EQ(row[0], "COMPLETED");
    ids.insert(row[1]);
  }
  EXPECT_EQ(ids, first);
  EXPECT_EQ(one("kd", "SELECT count(*) FROM samples WHERE rank >= 0"), std::to_string(3 * (31 + 8))) << "30 iterations + 1 rendezvous + 8 resource figures per run, stored once";
}

// What Grid Engine has no common name for is refused before anything is submitted, naming the flag.
TEST_F(SgeCell, OptionsSgeCannotHonourAreRefusedBeforeSubmission) {
  for (const std::string flag : {"--constraint=bigmem", "--exclusive"}) {
    auto r = fanout({"calibration_sleep", "--launcher=sge", "--exp_name=refused", flag}, 60);
    EXPECT_EQ(r.exit_code, 2) << flag << "\n" << r.err;
    EXPECT_NE(r.err.find(flag.substr(0, flag.find('=')) + ": the sge launcher cannot honour it"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(d.path / "results" / "refused")) << flag << ": nothing was written";
  }
  // What a step asks: GPUs and memory are site-defined complexes in Grid Engine.
  for (const std::string key : {"gpus_per_task = 1", "memory_mb = 1000"}) {
    write_file_atomic(d.path / "steps.toml", "[experiment]\nname = \"refused\"\nplugin = \"calibration\"\nlauncher = \"sge\"\n"
                                             "[[steps]]\nrole = \"sleep\"\n" + key + "\n");
    auto r = fanout({"run", "steps.toml"}, 60);
    EXPECT_EQ(r.exit_code, 2) << key << "\n" << r.err;
    EXPECT_NE(r.err.find("step 'sleep' asks"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("which the sge launcher cannot give it"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(d.path / "results" / "refused")) << key << ": nothing was written";
  }
  auto r = fanout({"calibration_sleep", "--launcher=sge", "--exp_name=refused", "--batch_args=qos=high"}, 60);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--batch_args qos=high: the sge launcher takes pe=NAME"), std::string::npos) << r.err;
}

// Same command names, different dialects: PBS never drives Grid Engine's qstat, and `auto` on a host with a cell
// (SGE_ROOT set) and no Slurm means sge.
TEST_F(SgeCell, PbsAndGridEngineAreNeverConfused) {
  auto pbs = fanout({"calibration_sleep", "--launcher=pbs", "--exp_name=p"}, 60);
  EXPECT_NE(pbs.exit_code, 0);
  EXPECT_NE(pbs.err.find("--launcher=pbs: the qstat on PATH is Grid Engine's (SGE 8.1.9): use --launcher=sge"), std::string::npos) << pbs.err;
  const std::vector<std::pair<std::string, std::string>> env = {{"SGE_ROOT", "/var/lib/gridengine"},
                                                                {"SLURM_CONF", (d.path / "no-slurm.conf").string()}};
  auto dry = test::run_command({test::fanout_exe().string(), "calibration_sleep", "--launcher=auto", "--dry-run"}, d.path, env, 60);
  ASSERT_EQ(dry.exit_code, 0) << dry.err;
  EXPECT_NE(dry.out.find("#$ -N "), std::string::npos) << dry.out;
  EXPECT_EQ(dry.out.find("#PBS"), std::string::npos) << dry.out;
  auto run = test::run_command({test::fanout_exe().string(), "calibration_sleep", "--launcher=auto", "--exp_name=auto", "--iterations=2"},
                               d.path, env, 300);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(one("auto", "SELECT launcher FROM runs"), "sge");
}
