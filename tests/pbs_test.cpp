// PBS: script rendering against golden PBS Pro / Torque scripts, qstat parsing, and the real submission path
// through Slurm's PBS-compatible qsub/qstat/qdel (slurm-wlm-torque) on the test cluster. No PBS Pro server
// exists in Debian: what a real PBS Pro server would answer is covered only by the parsing tests.
#include <gtest/gtest.h>

#include <sqlite3.h>
#include <sys/stat.h>

#include <fstream>

#include "common/error.h"
#include "common/files.h"
#include "common/text.h"
#include "launchers/batch_script.h"
#include "launchers/pbs.h"
#include "tests/test_util.h"

using namespace fanout;
namespace fs = std::filesystem;

namespace {

JobSpec two_step_job() {
  JobSpec j;
  j.name = "infer-sess-N2-abc123";
  j.run_dir = "/scratch/results/exp/run-1/infer-sess-N2-abc123";
  j.rank_exe = "/opt/fanout/bin/fanout-rank";
  j.plugin_path = "/opt/fanout/lib/fanout/plugins/fanout_calibration.so";
  j.steps = {StepSpec{"db", 2, 1, 1, "disjoint"}, StepSpec{"client", 2, 4, 1, "disjoint"}};
  j.walltime_s = 5400;
  j.options.partition = "workq";
  j.options.account = "proj42";
  j.options.exclusive = true;
  return j;
}

// FANOUT_UPDATE_GOLDEN=1 rewrites the golden file from the renderer (then read the diff by hand).
std::string golden(const std::string& name, const std::string& rendered) {
  fs::path file = fs::path(FANOUT_SOURCE_DIR) / "tests" / "golden" / name;
  if (std::getenv("FANOUT_UPDATE_GOLDEN")) write_file_atomic(file, rendered);
  return read_file(file);
}

}  // namespace

TEST(PbsScript, MatchesGoldenPbsProScript) {
  std::string rendered = pbs_job_script(two_step_job(), PbsFlavor::Pro);
  EXPECT_EQ(rendered, golden("pbs_pro_two_steps.sh", rendered))
      << "regenerate only after checking the diff by hand";
}

TEST(PbsScript, MatchesGoldenTorqueScriptWithSrunSteps) {
  JobSpec j = two_step_job();
  j.options.step_launcher = "srun";
  std::string rendered = pbs_job_script(j, PbsFlavor::Torque);
  EXPECT_EQ(rendered, golden("pbs_torque_srun.sh", rendered));
}

TEST(PbsScript, ValuesAreQuotedNeverInterpreted) {
  JobSpec j = two_step_job();
  j.env = {{"MESSAGE", "$(touch x); `id`"}};
  std::string s = pbs_job_script(j, PbsFlavor::Pro);
  EXPECT_NE(s.find("export MESSAGE='$(touch x); `id`'"), std::string::npos) << s;
}

TEST(Qstat, ParsesProJsonAndMapsStates) {
  const std::string json = R"({"timestamp":1700000000,"pbs_version":"2022.1.1","pbs_server":"srv",
    "Jobs":{"10.srv":{"Job_Name":"a","job_state":"F","Exit_status":0,"exec_host":"c1/0*4+c2/0*4"},
            "11.srv":{"job_state":"F","Exit_status":271,"comment":"Job run at ... and finished"},
            "12.srv":{"job_state":"F","Exit_status":-29,"comment":"job killed: walltime 65 exceeded limit 60"},
            "13.srv":{"job_state":"Q"},"14.srv":{"job_state":"R","exec_host":"c3/0"}}})";
  auto jobs = parse_qstat_json(json);
  ASSERT_EQ(jobs.size(), 5u);
  JobSpec j = two_step_job();
  j.run_dir = "/nonexistent";
  auto done = pbs_status("10.srv", jobs["10.srv"], j);
  EXPECT_EQ(done.state, JobState::Completed);
  EXPECT_EQ(done.node_list, "c1,c2");
  auto killed = pbs_status("11.srv", jobs["11.srv"], j);
  EXPECT_EQ(killed.state, JobState::Failed);
  EXPECT_EQ(killed.signal, 15);
  EXPECT_EQ(pbs_status("12.srv", jobs["12.srv"], j).state, JobState::Timeout);
  EXPECT_EQ(pbs_status("13.srv", jobs["13.srv"], j).state, JobState::Pending);
  EXPECT_EQ(pbs_status("14.srv", jobs["14.srv"], j).state, JobState::Running);
  EXPECT_THROW(parse_qstat_json("{not json"), UserError);
}

TEST(Qstat, ParsesTextBlocksAndResolvesFinishedJobsFromMarkers) {
  const std::string text = "Job Id:\t77\n\tJob_Name = x\n\tjob_state = C\n\texec_host = n1/0+n2/0\n\n"
                           "Job Id: 78.srv\n    job_state = F\n    Exit_status = 3\n";
  auto jobs = parse_qstat_text(text);
  ASSERT_EQ(jobs.size(), 2u);
  test::TempDir d;
  JobSpec j = two_step_job();
  j.run_dir = d.path;
  // Torque-style "C" carries no exit status: the run's markers decide.
  write_file_atomic(d.path / kJobExitMarker, "0\n");
  auto s = pbs_status("77", jobs["77"], j);
  EXPECT_EQ(s.state, JobState::Completed);
  EXPECT_EQ(s.node_list, "n1,n2");
  write_file_atomic(d.path / kJobExitMarker, "3\n");
  write_file_atomic(d.path / kStepExitMarker, "db 0\nclient 3\n");
  s = pbs_status("77", jobs["77"], j);
  EXPECT_EQ(s.state, JobState::Failed);
  EXPECT_NE(s.reason.find("step 'client' exited with status 3"), std::string::npos) << s.reason;
  EXPECT_EQ(pbs_status("78.srv", jobs["78.srv"], j).exit_code, 3);
}

// --- the real submission path: Slurm's qsub/qstat/qdel wrappers on the test cluster ---

class PbsOnSlurm : public ::testing::Test {
 protected:
  void SetUp() override {
    auto r = test::run_command({"/usr/bin/scontrol", "ping"}, "/", {}, 20);
    ASSERT_NE(r.out.find("is UP"), std::string::npos) << "the Slurm test cluster is not up: scripts/slurm-cluster.sh up";
    ASSERT_TRUE(fs::exists("/usr/bin/qsub")) << "slurm-wlm-torque is not installed (scripts/slurm-cluster.sh installs it)";
  }
  test::TempDir d;
  std::string one(const std::string& exp, const std::string& sql) {
    return test::sql_one(d.path / "results" / exp / "fanout.sqlite", sql);
  }
  // A qstat on PATH ahead of the real one that counts its invocations.
  std::vector<std::pair<std::string, std::string>> counting_qstat_env() {
    fs::create_directories(d.path / "shim");
    std::ofstream(d.path / "shim" / "qstat") << "#!/bin/sh\necho x >> " << shell_quote((d.path / "qstat.calls").string())
                                               << "\nexec /usr/bin/qstat \"$@\"\n";
    ::chmod((d.path / "shim" / "qstat").c_str(), 0755);
    return {{"PATH", (d.path / "shim").string() + ":" + std::getenv("PATH")}};
  }
};

TEST_F(PbsOnSlurm, SweepRunsThroughQsubAndOneQstatPerPollCycle) {
  auto env = counting_qstat_env();
  auto r = test::run_command({test::fanout_exe().string(), "calibration_sleep", "--launcher=pbs", "--step_launcher=srun",
                              "--exp_name=pbs", "--nodes=[1,2]", "--ranks_per_node=[1,2]", "--iterations=5"},
                             d.path, env, 300);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(one("pbs", "SELECT count(*) FROM runs WHERE status='COMPLETED' AND launcher='pbs'"), "4");
  EXPECT_EQ(one("pbs", "SELECT count(DISTINCT node) FROM rank_nodes r JOIN parameters p ON p.run_id=r.run_id "
                       "AND p.name='nodes' AND p.value='2'"), "2");
  auto path = one("pbs", "SELECT path FROM runs LIMIT 1");
  EXPECT_NE(read_file(fs::path(path) / "job.sh").find("#PBS -l "), std::string::npos);
  // The driver printed one progress line per finished run; the qstat shim counted every query.
  int calls = std::stoi(test::line_count_summary(read_file(d.path / "qstat.calls")));
  EXPECT_GE(calls, 2);  // one for the flavor (qstat --version) and at least one poll
  SUCCEED() << calls << " qstat calls for 4 jobs";
}

TEST_F(PbsOnSlurm, PollingAnyNumberOfJobsCostsOneQstat) {
  auto env = counting_qstat_env();
  setenv("PATH", env[0].second.c_str(), 1);
  PbsScheduler pbs;
  std::vector<std::string> ids;
  for (int i = 0; i < 6; ++i) {
    JobSpec j = test::trivial_job(d.path, "pq" + std::to_string(i));
    j.options.step_launcher = "srun";
    ids.push_back(pbs.submit(j));
  }
  int before = std::stoi(test::line_count_summary(read_file(d.path / "qstat.calls")));
  int polls = 0;
  bool done = test::wait_for([&] {
    ++polls;
    for (auto& s : pbs.poll(ids))
      if (!job_state_final(s.state)) return false;
    return true;
  }, 120);
  int after = std::stoi(test::line_count_summary(read_file(d.path / "qstat.calls")));
  EXPECT_TRUE(done);
  EXPECT_EQ(after - before, polls) << "each poll of 6 jobs must run qstat exactly once";
  EXPECT_EQ(pbs.queries(), uint64_t(polls));
  for (auto& s : pbs.poll(ids)) EXPECT_EQ(s.state, JobState::Completed) << s.job_id << " " << s.reason;
}

TEST_F(PbsOnSlurm, FailingRankIsFailedWithItsExitCode) {
  auto r = test::run_command({test::fanout_exe().string(), "calibration_sleep", "--launcher=pbs", "--step_launcher=srun",
                              "--exp_name=pf", "--fail_rank=0", "--iterations=2"},
                             d.path, {}, 300);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(one("pf", "SELECT status FROM runs"), "FAILED");
  EXPECT_NE(one("pf", "SELECT reason FROM runs").find("step 'sleep' exited with status 3"), std::string::npos)
      << one("pf", "SELECT reason FROM runs");
}

TEST_F(PbsOnSlurm, BatchScriptRunsTheSweepInsideItsAllocation) {
  fs::path script = fs::path(FANOUT_SOURCE_DIR) / "batch_scripts" / "pbs_sweep.sh";
  auto sub = test::run_command({"/usr/bin/qsub", script.string()}, d.path,
                               {{"FANOUT", test::fanout_exe().string()}, {"RESULTS_DIR", (d.path / "results").string()},
                                {"STEP_LAUNCHER", "srun"}},
                               60);
  ASSERT_EQ(sub.exit_code, 0) << sub.out << sub.err;
  std::string job = trim(sub.out);
  ASSERT_TRUE(test::wait_for_slurm_job_end(job, 240)) << "allocation job " << job << " did not finish";
  EXPECT_EQ(one("pbs-sweep", "SELECT count(*) FROM runs WHERE status='COMPLETED' AND launcher='pbs'"), "6");
  EXPECT_EQ(one("pbs-sweep", "SELECT count(DISTINCT node) FROM rank_nodes"), "4") << "the #PBS select reached the server";
  EXPECT_TRUE(starts_with(one("pbs-sweep", "SELECT job_id FROM runs"), "local-")) << "runs are steps of the one job";
}

TEST_F(PbsOnSlurm, ArraySweepGoesAsOneArrayPerShape) {
  auto r = test::run_command({test::fanout_exe().string(), "calibration_copy", "--launcher=pbs", "--step_launcher=srun", "--array",
                              "--exp_name=pa", "--copy_bytes=[1024,2048,4096]", "--nodes=[1,2]", "--iterations=3"},
                             d.path, {}, 300);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(one("pa", "SELECT count(*) FROM runs WHERE status='COMPLETED'"), "6");
  EXPECT_EQ(one("pa", "SELECT count(DISTINCT substr(job_id, 1, instr(job_id, '#') - 1)) FROM runs"), "2") << "one array per shape";
  std::string array_script = read_file(d.path / "results" / "pa" /
                                       fs::path(one("pa", "SELECT path FROM runs LIMIT 1")).parent_path().filename() / "pbs-array-1.sh");
  EXPECT_NE(array_script.find("#PBS -t 0-2"), std::string::npos) << array_script;  // Torque syntax: the wrapper's flavor
}
