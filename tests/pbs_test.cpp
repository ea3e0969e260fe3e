// PBS: script rendering against golden PBS Pro / Torque scripts, qstat parsing, and the real submission path
// through Slurm's PBS-compatible qsub/qstat/qdel (slurm-wlm-torque) on the test cluster. No PBS Pro server
// exists in Debian: what a real OpenPBS server answers is replayed from fixtures made as its qstat makes them.
#include <gtest/gtest.h>

#include <sqlite3.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <fstream>
#include <map>
#include <set>

#include <nlohmann/json.hpp>

#include "common/error.h"
#include "common/files.h"
#include "common/text.h"
#include "schedulers/batch_script.h"
#include "schedulers/pbs.h"
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
  j.steps = {StepSpec{"db", 2, 1, 1, "disjoint", 0, 0, "", false, "", ""}, StepSpec{"client", 2, 4, 1, "disjoint", 0, 0, "", false, "", ""}};
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

// The golden files are the renderer's own output (FANOUT_UPDATE_GOLDEN rewrites them): these lines were written by
// hand from the PBS Pro reference (qsub -l select=<chunks>:ncpus=<n>:mpiprocs=<n>, -l place=scatter:excl for whole
// nodes, -l walltime=hh:mm:ss) and Torque's (-l nodes=<n>:ppn=<n>), for db on 2 nodes x 1 rank and client on 2
// other nodes x 4 ranks, 90 minutes.
TEST(PbsScript, TheResourceRequestIsWhatPbsDocumentsForTheJob) {
  auto lines_of = [](const std::string& script) {
    std::vector<std::string> pbs;
    for (auto& l : split(script, '\n'))
      if (l.rfind("#PBS ", 0) == 0) pbs.push_back(l);
    return pbs;
  };
  const std::vector<std::string> pro = {"#PBS -N infer-sess-N2-abc123", "#PBS -l select=4:ncpus=4:mpiprocs=4", "#PBS -l place=scatter:excl",
                                        "#PBS -l walltime=01:30:00", "#PBS -q workq", "#PBS -A proj42", "#PBS -j oe",
                                        "#PBS -o /scratch/results/exp/run-1/infer-sess-N2-abc123/pbs.out"};
  EXPECT_EQ(lines_of(pbs_job_script(two_step_job(), PbsFlavor::Pro)), pro);
  const std::vector<std::string> torque = {"#PBS -N infer-sess-N2-abc123", "#PBS -l nodes=4:ppn=4", "#PBS -l walltime=01:30:00",
                                           "#PBS -q workq", "#PBS -A proj42", "#PBS -j oe",
                                           "#PBS -o /scratch/results/exp/run-1/infer-sess-N2-abc123/pbs.out"};
  EXPECT_EQ(lines_of(pbs_job_script(two_step_job(), PbsFlavor::Torque)), torque);
  // Host files: the first two hosts of $PBS_NODEFILE for db (1 slot each), the next two for client (4 slots).
  const std::string body = pbs_job_script(two_step_job(), PbsFlavor::Pro);
  EXPECT_NE(body.find("sed -n '1,2{s/$/ slots=1/;p}' hosts.all > 'hosts.db'"), std::string::npos);
  EXPECT_NE(body.find("sed -n '3,4{s/$/ slots=4/;p}' hosts.all > 'hosts.client'"), std::string::npos);
  EXPECT_NE(body.find("'mpirun' '--allow-run-as-root' '-np' '8' '--map-by' 'ppr:4:node' '--hostfile' 'hosts.client'"), std::string::npos) << body;
}

// What steps ask (ABI 4.3) in PBS's words: each chunk carries the busiest node's CPUs, MPI processes, GPUs and
// memory; the step's binding goes to the MPI's own launcher, whichever the site has (--mpi).
TEST(PbsScript, StepResourcesGoIntoTheChunkAndBindingIntoEachMpisLauncher) {
  JobSpec j = two_step_job();
  j.steps[0].cpus_per_task = 4, j.steps[0].gpus_per_task = 2, j.steps[0].memory_mb = 8000, j.steps[0].binding = "cores";
  j.steps[1].binding = "map:0,2,4,6";
  const std::string pro = pbs_job_script(j, PbsFlavor::Pro);
  EXPECT_NE(pro.find("#PBS -l select=4:ncpus=4:mpiprocs=4:ngpus=2:mem=8000mb\n"), std::string::npos) << pro;
  EXPECT_NE(pro.find("'mpirun' '--allow-run-as-root' '-np' '2' '--map-by' 'ppr:1:node:pe=4' '--hostfile' 'hosts.db' '--bind-to' 'core'"),
            std::string::npos) << pro;
  EXPECT_NE(pro.find("'--hostfile' 'hosts.client' '--cpu-set' '0,2,4,6' '--bind-to' 'cpu-list:ordered'"), std::string::npos) << pro;
  const std::string torque = pbs_job_script(j, PbsFlavor::Torque);
  EXPECT_NE(torque.find("#PBS -l nodes=4:ppn=4:gpus=2\n#PBS -l mem=32000mb\n"), std::string::npos) << torque;
  j.options.mpi = "mpich";
  const std::string hydra = pbs_job_script(j, PbsFlavor::Pro);
  EXPECT_NE(hydra.find("'mpiexec' '-n' '2' '-ppn' '1' '-f' 'hosts.db' '-bind-to' 'core:4'"), std::string::npos) << hydra;
  EXPECT_NE(hydra.find("'mpiexec' '-n' '8' '-ppn' '4' '-f' 'hosts.client' '-bind-to' 'user:0,2,4,6'"), std::string::npos) << hydra;
  EXPECT_NE(hydra.find("sed -n '3,4{s/$/:4/;p}' hosts.all > 'hosts.client'"), std::string::npos) << "Hydra's host:N form\n" << hydra;
  j.options.mpi = "pals";
  const std::string pals = pbs_job_script(j, PbsFlavor::Pro);
  EXPECT_NE(pals.find("'mpiexec' '-n' '2' '--ppn' '1' '--hostfile' 'hosts.db' '--cpu-bind' 'depth' '--depth' '4'"), std::string::npos) << pals;
  EXPECT_NE(pals.find("'--hostfile' 'hosts.client' '--cpu-bind' 'list:0:2:4:6'"), std::string::npos) << pals;
  EXPECT_NE(pals.find("sed -n '3,4{p}' hosts.all > 'hosts.client'"), std::string::npos) << "PALS's plain host names\n" << pals;
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

// --- a PBS server's answers, replayed: no PBS server exists in Debian, so a qstat on PATH prints what OpenPBS
// prints (tests/fixtures/pbs/, written by make_qstat_fixtures.py as a port of qstat.c and pbs_json.c) and
// records its arguments; the scheduler under test is the real PbsScheduler. ---

namespace {

class ReplayedPbs : public ::testing::Test {
 protected:
  test::TempDir d;
  std::string old_path = std::getenv("PATH");
  void SetUp() override {
    fs::create_directories(d.path / "shim");
    // The json it prints is chosen per test; ids the server does not know get OpenPBS's error and exit 153.
    std::ofstream(d.path / "shim" / "qstat")
        << "#!/bin/sh\nd=" << shell_quote(d.path.string()) << "\n"
        << "echo \"$*\" >> \"$d/calls\"\n"
        << "if [ \"$1\" = --version ]; then echo 'pbs_version = 23.06.06'; exit 0; fi\n"
        << "case \"$*\" in *'-F json'*) cat \"$d/answer.json\" ;; *) cat \"$d/answer.txt\" ;; esac\n"
        << "rc=0\nfor id; do case \"$id\" in 104.pbs01|1102.pbs01) echo \"qstat: Unknown Job Id $id\" >&2; rc=153 ;; esac; done\nexit $rc\n";
    std::ofstream(d.path / "shim" / "qsub") << "#!/bin/sh\nexit 1\n";
    ::chmod((d.path / "shim" / "qstat").c_str(), 0755);
    ::chmod((d.path / "shim" / "qsub").c_str(), 0755);
    ::setenv("PATH", ((d.path / "shim").string() + ":" + old_path).c_str(), 1);
    fs::copy_file(fixture("openpbs_qstat_x_f.txt"), d.path / "answer.txt");
  }
  void TearDown() override { ::setenv("PATH", old_path.c_str(), 1); }
  static fs::path fixture(const std::string& name) { return fs::path(FANOUT_SOURCE_DIR) / "tests" / "fixtures" / "pbs" / name; }
  std::vector<std::string> calls() {
    std::vector<std::string> c;
    std::ifstream in(d.path / "calls");
    for (std::string l; std::getline(in, l);) c.push_back(l);
    return c;
  }
  // Jobs 101-103 are in the fixtures; 104 finished and left the server's history, its exit marker says 0.
  std::map<std::string, JobStatus> poll_our_four(PbsScheduler& pbs) {
    std::vector<std::string> ids = {"101.pbs01", "102.pbs01", "103.pbs01", "104.pbs01"};
    for (auto& id : ids) {
      JobSpec j = two_step_job();
      j.run_dir = d.path / id;
      fs::create_directories(j.run_dir);
      pbs.adopt(id, j);
    }
    write_file_atomic(d.path / "104.pbs01" / kJobExitMarker, "0\n");
    std::map<std::string, JobStatus> by_id;
    for (auto& s : pbs.poll(ids)) by_id[s.job_id] = s;
    return by_id;
  }
  void expect_the_fixtures_states(std::map<std::string, JobStatus>& s) {
    EXPECT_EQ(s["101.pbs01"].state, JobState::Timeout) << s["101.pbs01"].reason;
    EXPECT_NE(s["101.pbs01"].reason.find("JOB_EXEC_KILL_WALLTIME"), std::string::npos) << s["101.pbs01"].reason;
    EXPECT_EQ(s["102.pbs01"].state, JobState::Completed);
    EXPECT_EQ(s["102.pbs01"].node_list, "node02,node03");
    EXPECT_EQ(s["103.pbs01"].state, JobState::Running);
    EXPECT_EQ(s["104.pbs01"].state, JobState::Completed) << "unknown to the server: its exit marker decides";
  }
};

}  // namespace

// qstat -f wraps long values at 78 columns onto lines that start with a tab (qstat.c prt_attr): the parser
// joins them back, byte for byte.
TEST(Qstat, TextJoinsWrappedValuesAsOpenPbsPrintsThem) {
  auto jobs = parse_qstat_text(read_file(fs::path(FANOUT_SOURCE_DIR) / "tests/fixtures/pbs/openpbs_qstat_x_f.txt"));
  ASSERT_EQ(jobs.size(), 3u);
  EXPECT_EQ(jobs["101.pbs01"]["comment"], "Job run at Thu Apr 10 at 09:56 on (node01:ncpus=1) and exceeded resource walltime");
  EXPECT_EQ(jobs["101.pbs01"]["Variable_List"],
            "PBS_O_HOME=/home/alice,PBS_O_LANG=en_US.UTF-8,PBS_O_LOGNAME=alice,"
            "PBS_O_PATH=/usr/local/bin:/usr/bin:/bin:/usr/local/sbin:/usr/sbin:/opt/pbs/bin:/home/alice/.local/bin,"
            "PBS_O_MAIL=/var/spool/mail/alice,PBS_O_SHELL=/bin/bash,PBS_O_WORKDIR=/home/alice/work,"
            "PBS_O_SYSTEM=Linux,PBS_O_QUEUE=workq,PBS_O_HOST=login01");
  EXPECT_EQ(jobs["101.pbs01"]["substate"], "93") << "the attribute after a wrapped one is its own";
  EXPECT_EQ(jobs["102.pbs01"]["comment"], "Job run at Thu Apr 10 at 09:57 on (node02:ncpus=4)+(node03:ncpus=4) and finished");
  EXPECT_EQ(jobs["103.pbs01"]["exec_host"], "node04/0*8");
}

// Before OpenPBS 22.05 a walltime kill reads 271 (the shell's SIGTERM); MoM's line in the job's output tells.
TEST(Qstat, OldServersWalltimeKillIsFoundInTheJobsOutput) {
  test::TempDir d;
  JobSpec j = two_step_job();
  j.run_dir = d.path;
  const std::map<std::string, std::string> attrs = {{"job_state", "F"}, {"Exit_status", "271"},
                                                    {"comment", "Job run at Thu Apr 10 at 09:56 on (node01:ncpus=1) and failed"}};
  EXPECT_EQ(pbs_status("9.srv", attrs, j).state, JobState::Failed);
  write_file_atomic(d.path / "pbs.out", "fanout: step db\n=>> PBS: job killed: walltime 65 exceeded limit 60\n");
  EXPECT_EQ(pbs_status("9.srv", attrs, j).state, JobState::Timeout);
  EXPECT_EQ(pbs_status("9.srv", {{"job_state", "F"}, {"Exit_status", "-27"}}, j).state, JobState::OutOfMemory);
  EXPECT_NE(pbs_status("9.srv", {{"job_state", "F"}, {"Exit_status", "-10"}}, j).reason.find("JOB_EXEC_FAILUID"), std::string::npos);
  // Torque's codes differ from -8 on: -10 memory, -11 walltime.
  EXPECT_EQ(pbs_status("9", {{"job_state", "C"}, {"exit_status", "-10"}}, j, PbsFlavor::Torque).state, JobState::OutOfMemory);
  EXPECT_EQ(pbs_status("9", {{"job_state", "C"}, {"exit_status", "-11"}}, j, PbsFlavor::Torque).state, JobState::Timeout);
  EXPECT_EQ(pbs_status("9", {{"job_state", "C"}, {"exit_status", "-29"}}, j, PbsFlavor::Torque).state, JobState::Failed);
}

// A finished job's resources_used (issue 54) is its usage, read alike from qstat -f's text and -F json's nested
// object (the fixtures are written as OpenPBS prints them: make_qstat_fixtures.py): cput 00:01:05, mem 524288kb,
// vmem 1048576kb. Torque's energy_used is joules where Cray's RUR measured it, 0 (not a figure) elsewhere.
TEST_F(ReplayedPbs, AFinishedJobsResourcesUsedAreItsUsage) {
  auto figures = [](const JobStatus& s) {
    std::map<std::string, double> out;
    for (auto& step : s.usage)
      for (auto& f : step.figures) out[f.name + " " + f.unit] = f.value;
    return out;
  };
  const std::map<std::string, double> want = {{"cpu s", 65}, {"max_rss B", 524288.0 * 1024}, {"max_vmem B", 1048576.0 * 1024}};
  fs::copy_file(fixture("openpbs_qstat_x_f.json"), d.path / "answer.json");
  PbsScheduler pbs;
  auto s = poll_our_four(pbs);
  EXPECT_EQ(figures(s["102.pbs01"]), want) << "from -F json";
  EXPECT_TRUE(s["101.pbs01"].usage.empty()) << "a job the fixture gives no resources_used has none";
  auto text = parse_qstat_text(read_file(fixture("openpbs_qstat_x_f.txt")));
  JobSpec j = two_step_job();
  j.run_dir = d.path / "102.pbs01";
  EXPECT_EQ(figures(pbs_status("102.pbs01", text["102.pbs01"], j)), want) << "from the text";
  auto torque = parse_qstat_text("Job Id: 7.torque01\n    job_state = C\n    exit_status = 0\n    resources_used.cput = 100:00:01\n"
                                 "    resources_used.energy_used = 5400\n    resources_used.mem = 2gb\n    resources_used.vmem = 3w\n"
                                 "    resources_used.walltime = 00:00:42\n");
  const std::map<std::string, double> torque_want = {{"cpu s", 360001}, {"energy J", 5400}, {"max_rss B", 2.0 * 1024 * 1024 * 1024}, {"max_vmem B", 24}};
  EXPECT_EQ(figures(pbs_status("7.torque01", torque["7.torque01"], j, PbsFlavor::Torque)), torque_want);
  torque["7.torque01"]["resources_used.energy_used"] = "0";
  EXPECT_EQ(figures(pbs_status("7.torque01", torque["7.torque01"], j, PbsFlavor::Torque)).count("energy J"), 0u);
}

TEST_F(ReplayedPbs, OnePollAsksForOurJobsOnlyAndReadsTheJson) {
  fs::copy_file(fixture("openpbs_qstat_x_f.json"), d.path / "answer.json");
  PbsScheduler pbs;
  ASSERT_EQ(pbs.flavor(), PbsFlavor::Pro);
  auto s = poll_our_four(pbs);
  expect_the_fixtures_states(s);
  auto c = calls();
  ASSERT_EQ(c.size(), 2u) << "qstat --version, then one query";
  EXPECT_EQ(c[1], "-x -f -F json 101.pbs01 102.pbs01 103.pbs01 104.pbs01") << "never every job on the server";
}

// openpbs#1255: released servers print numeric-looking values bare (SEED=-05 -> "SEED":-05), invalid JSON. The
// same ids are asked again in the text form instead of failing the sweep.
TEST_F(ReplayedPbs, InvalidJsonFallsBackToTheTextFormOfTheSameQuery) {
  fs::copy_file(fixture("openpbs_qstat_x_f_issue1255.json"), d.path / "answer.json");
  EXPECT_THROW(parse_qstat_json(read_file(d.path / "answer.json")), UserError) << "the fixture must be invalid";
  PbsScheduler pbs;
  auto s = poll_our_four(pbs);
  expect_the_fixtures_states(s);
  auto c = calls();
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(c[2], "-x -f 101.pbs01 102.pbs01 103.pbs01 104.pbs01");
}

// openpbs#2672 (main branch): with several ids only the first one's job is printed. The missing ids that the
// server did not call unknown are asked again in the text form; none is taken for vanished.
TEST_F(ReplayedPbs, IdsTheJsonLeftOutAreAskedAgain) {
  auto doc = nlohmann::json::parse(read_file(fixture("openpbs_qstat_x_f.json")));
  doc["Jobs"].erase("102.pbs01");
  doc["Jobs"].erase("103.pbs01");
  write_file_atomic(d.path / "answer.json", doc.dump(1, '\t'));
  PbsScheduler pbs;
  auto s = poll_our_four(pbs);
  expect_the_fixtures_states(s);
  auto c = calls();
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(c[2], "-x -f 102.pbs01 103.pbs01") << "104.pbs01 was reported unknown: not asked again";
}

// An id is "reported" only when the server's error names it as a whole word: 1102.pbs01 unknown says nothing of
// 102.pbs01, which the JSON left out and is asked again (a substring test had taken it for reported, then vanished).
TEST_F(ReplayedPbs, AnUnknownIdThatContainsOursDoesNotHideIt) {
  auto doc = nlohmann::json::parse(read_file(fixture("openpbs_qstat_x_f.json")));
  doc["Jobs"].erase("102.pbs01");
  write_file_atomic(d.path / "answer.json", doc.dump(1, '\t'));
  PbsScheduler pbs;
  const std::vector<std::string> ids = {"101.pbs01", "102.pbs01", "1102.pbs01"};
  for (auto& id : ids) {
    JobSpec j = two_step_job();
    j.run_dir = d.path / id;
    fs::create_directories(j.run_dir);
    pbs.adopt(id, j);
  }
  std::map<std::string, JobStatus> s;
  for (auto& st : pbs.poll(ids)) s[st.job_id] = st;
  EXPECT_EQ(s["102.pbs01"].state, JobState::Completed) << "read from the text form asked again: " << s["102.pbs01"].reason;
  auto c = calls();
  ASSERT_EQ(c.size(), 3u);
  EXPECT_EQ(c[1], "-x -f -F json 101.pbs01 102.pbs01 1102.pbs01");
  EXPECT_EQ(c[2], "-x -f 102.pbs01") << "1102.pbs01 was reported unknown, 102.pbs01 was not";
}

// --- PBS's default step launcher for real: mpirun (Open MPI, from Debian) with host files cut from a
// $PBS_NODEFILE. The server is the one-host stand-in of tests/fixtures/pbs/one_host_pbs (qsub runs the script at
// once with a fabricated PBS_NODEFILE; qstat answers Torque's text form): only the server is fake. ---

TEST(PbsWithOpenMpi, MpirunStepsOnAFabricatedNodefileCompleteAndAFailingRankFails) {
  ASSERT_EQ(::access("/usr/bin/mpirun", X_OK), 0) << "Open MPI (openmpi-bin) is installed by scripts/install-deps.sh test";
  test::TempDir d;
  const fs::path shim = fs::path(FANOUT_SOURCE_DIR) / "tests" / "fixtures" / "pbs" / "one_host_pbs";
  const std::vector<std::pair<std::string, std::string>> env = {
      {"PATH", shim.string() + ":" + std::getenv("PATH")}, {"FANOUT_TEST_PBS_STATE", (d.path / "server").string()}};
  auto r = test::run_command({test::fanout_exe().string(), "calibration_sleep", "--launcher=pbs", "--exp_name=mpi",
                              "--ranks_per_node=2", "--iterations=4", "--warmup=1", "--fail_rank=[-1,1]"},
                             d.path, env, 300);
  EXPECT_EQ(r.exit_code, 1) << "one of the two runs fails: " << r.err;
  const fs::path db = d.path / "results" / "mpi" / "fanout.sqlite";
  auto runs = test::sql_rows(db, "SELECT p.value, r.status, COALESCE(r.reason, ''), r.path FROM runs r JOIN parameters p ON p.run_id = r.id "
                                 "WHERE p.name = 'fail_rank' ORDER BY p.value");
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0][0], "-1");
  EXPECT_EQ(runs[0][1], "COMPLETED") << runs[0][2];
  EXPECT_EQ(runs[1][1], "FAILED");
  EXPECT_NE(runs[1][2].find("step 'sleep' exited with status 3"), std::string::npos) << runs[1][2];
  // Both ranks of the good run measured, started by mpirun (their place came from Open MPI's PMIx server), on
  // the host the node file named, through the host file fanout cut from it.
  EXPECT_EQ(test::sql_one(db, "SELECT COUNT(DISTINCT rank) FROM rank_nodes n JOIN runs r ON r.id = n.run_id JOIN parameters p "
                              "ON p.run_id = r.id WHERE p.name = 'fail_rank' AND p.value = '-1'"), "2");
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  EXPECT_EQ(read_file(fs::path(runs[0][3]) / "hosts.sleep"), std::string(host) + " slots=2\n");
  const std::string log = read_file(fs::path(runs[0][3]) / "sleep.err");
  EXPECT_NE(log.find("place from pmix"), std::string::npos) << log;
  EXPECT_NE(read_file(fs::path(runs[0][3]) / "job.sh").find("'mpirun' '--allow-run-as-root' '-np' '2'"), std::string::npos);
}

// A run the server killed over its memory limit (Torque's -10: OUT_OF_MEMORY) is retried, and the retry completes.
TEST(PbsWithOpenMpi, ARunKilledOverItsMemoryLimitIsRetried) {
  test::TempDir d;
  const fs::path shim = fs::path(FANOUT_SOURCE_DIR) / "tests" / "fixtures" / "pbs" / "one_host_pbs";
  auto r = test::run_command({test::fanout_exe().string(), "calibration_sleep", "--launcher=pbs", "--exp_name=oom", "--iterations=2",
                              "--max_retries=1"},
                             d.path, {{"PATH", shim.string() + ":" + std::getenv("PATH")}, {"FANOUT_TEST_PBS_STATE", (d.path / "server").string()},
                                      {"FANOUT_TEST_PBS_EXIT_OF_FIRST", "-10"}}, 300);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("(attempt 2 of 2)"), std::string::npos) << r.err;
  auto rows = test::sql_rows(d.path / "results" / "oom" / "fanout.sqlite", "SELECT status, COALESCE(reason, '') FROM runs ORDER BY id");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0][0], "OUT_OF_MEMORY");
  EXPECT_NE(rows[0][1].find("JOB_EXEC_OVERLIMIT_MEM"), std::string::npos) << rows[0][1];
  EXPECT_EQ(rows[1][0], "COMPLETED");
}

// The driver is SIGKILLed while its PBS jobs run: `fanout resume` follows them by the ids in their run folders
// (qstat, not qsub again), and each permutation ends with one COMPLETED run under the first driver's job id.
TEST(PbsWithOpenMpi, ResumeAfterTheDriverIsKilledFollowsItsPbsJobs) {
  test::TempDir d;
  const fs::path shim = fs::path(FANOUT_SOURCE_DIR) / "tests" / "fixtures" / "pbs" / "one_host_pbs";
  const std::string old_path = std::getenv("PATH");
  ::setenv("PATH", (shim.string() + ":" + old_path).c_str(), 1);  // for the spawned driver and the resume
  ::setenv("FANOUT_TEST_PBS_STATE", (d.path / "server").c_str(), 1);
  struct Restore {
    std::string path;
    ~Restore() {
      ::setenv("PATH", path.c_str(), 1);
      ::unsetenv("FANOUT_TEST_PBS_STATE");
    }
  } restore{old_path};
  // Three runs of about 3 s, all submitted at once (PBS takes every run).
  pid_t pid = test::spawn_fanout(d.path, {"calibration_sleep", "--launcher=pbs", "--exp_name=kd", "--sleep_us=[100000,100001,100002]",
                                          "--iterations=30", "--warmup=0"},
                                 d.path / "err.txt");
  ASSERT_GT(pid, 0);
  auto job_ids = [&] { return test::submitted_job_ids(d.path / "results" / "kd"); };
  ASSERT_TRUE(test::wait_for([&] { return job_ids().size() == 3; }, 60)) << read_file(d.path / "err.txt");
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  const std::set<std::string> first = job_ids();
  ASSERT_EQ(fs::exists(d.path / "server" / "seq") ? trim(read_file(d.path / "server" / "seq")) : "", "3");

  auto r = test::run_command({test::fanout_exe().string(), "resume", "results/kd"}, d.path, {}, 300);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("3 still in the pbs queue followed again; running 0"), std::string::npos) << r.err;
  EXPECT_EQ(trim(read_file(d.path / "server" / "seq")), "3") << "nothing submitted again";
  auto rows = test::sql_rows(d.path / "results" / "kd" / "fanout.sqlite", "SELECT status, job_id FROM runs");
  ASSERT_EQ(rows.size(), 3u);
  std::set<std::string> ids;
  for (auto& row : rows) {
    EXPECT_EQ(row[0], "COMPLETED");
    ids.insert(row[1]);
  }
  EXPECT_EQ(ids, first);
  EXPECT_EQ(test::sql_one(d.path / "results" / "kd" / "fanout.sqlite", "SELECT count(*) FROM samples"), std::to_string(3 * (31 + 8)))
      << "30 iterations + 1 rendezvous + 8 resource figures per run, stored once";
}

// --- the real submission path: Slurm's qsub/qstat/qdel wrappers on the test cluster ---
// They are unpacked apart from /usr/bin (scripts/slurm-cluster.sh): Grid Engine's client owns /usr/bin/qsub there.
const fs::path kPbsOnSlurm = "/opt/fanout/pbs-on-slurm/usr/bin";

class PbsOnSlurm : public ::testing::Test {
 protected:
  void SetUp() override {
    auto r = test::run_command({"/usr/bin/scontrol", "ping"}, "/", {}, 20);
    ASSERT_NE(r.out.find("is UP"), std::string::npos) << "the Slurm test cluster is not up: scripts/slurm-cluster.sh up";
    ASSERT_TRUE(fs::exists(kPbsOnSlurm / "qsub")) << "Slurm's PBS wrappers are not unpacked (scripts/slurm-cluster.sh does)";
  }
  // PATH with Slurm's PBS wrappers first (and `shim` before them, when given).
  static std::string pbs_path(const fs::path& shim = {}) {
    return (shim.empty() ? "" : shim.string() + ":") + kPbsOnSlurm.string() + ":" + std::getenv("PATH");
  }
  std::vector<std::pair<std::string, std::string>> pbs_env() { return {{"PATH", pbs_path()}}; }
  test::TempDir d;
  std::string one(const std::string& exp, const std::string& sql) {
    return test::sql_one(d.path / "results" / exp / "fanout.sqlite", sql);
  }
  // A qstat on PATH ahead of the real one that counts its invocations.
  std::vector<std::pair<std::string, std::string>> counting_qstat_env() {
    fs::create_directories(d.path / "shim");
    std::ofstream(d.path / "shim" / "qstat") << "#!/bin/sh\necho x >> " << shell_quote((d.path / "qstat.calls").string())
                                               << "\nexec " << (kPbsOnSlurm / "qstat").string() << " \"$@\"\n";
    ::chmod((d.path / "shim" / "qstat").c_str(), 0755);
    return {{"PATH", pbs_path(d.path / "shim")}};
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

// Issue 43: a job whose state no query can say was waited on for ever. With every qstat failing (a shim that
// answers only --version), the run is recorded FAILED after --unknown_timeout with the reason, the job is
// cancelled (qdel), and it is not retried even with --max_retries: it might still be running unseen.
TEST_F(PbsOnSlurm, AJobWhoseStateCannotBeQueriedFailsAfterTheLimit) {
  fs::create_directories(d.path / "shim");
  std::ofstream(d.path / "shim" / "qstat") << "#!/bin/sh\n[ \"$1\" = --version ] && exec " << (kPbsOnSlurm / "qstat").string() << " \"$@\"\n"
                                             << "echo 'qstat: cannot connect to server' >&2\nexit 1\n";
  ::chmod((d.path / "shim" / "qstat").c_str(), 0755);
  const std::vector<std::pair<std::string, std::string>> env = {{"PATH", pbs_path(d.path / "shim")}};
  auto r = test::run_command({test::fanout_exe().string(), "calibration_sleep", "--launcher=pbs", "--step_launcher=srun", "--exp_name=lost",
                              "--iterations=600", "--sleep_us=100000", "--unknown_timeout=3", "--max_retries=1"},
                             d.path, env, 300);
  EXPECT_NE(r.exit_code, 0);
  EXPECT_EQ(one("lost", "SELECT count(*) || ' ' || status FROM runs"), "1 FAILED") << "one attempt, not retried";
  const std::string reason = one("lost", "SELECT reason FROM runs");
  EXPECT_NE(reason.find("could not say the state of job"), std::string::npos) << reason;
  EXPECT_NE(reason.find("--unknown_timeout"), std::string::npos) << reason;
  // Cancelled through qdel: Slurm no longer lists it.
  const std::string job = one("lost", "SELECT job_id FROM runs");
  EXPECT_TRUE(test::wait_for([&] { return test::run_command({"/usr/bin/squeue", "-h", "-j", job}, "/", {}, 20).out.empty(); }, 60))
      << "job " << job << " still listed";
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
                             d.path, pbs_env(), 300);
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(one("pf", "SELECT status FROM runs"), "FAILED");
  EXPECT_NE(one("pf", "SELECT reason FROM runs").find("step 'sleep' exited with status 3"), std::string::npos)
      << one("pf", "SELECT reason FROM runs");
}

TEST_F(PbsOnSlurm, BatchScriptRunsTheSweepInsideItsAllocation) {
  fs::path script = fs::path(FANOUT_SOURCE_DIR) / "batch_scripts" / "pbs_sweep.sh";
  auto sub = test::run_command({(kPbsOnSlurm / "qsub").string(), script.string()}, d.path,
                               {{"PATH", pbs_path()}, {"FANOUT", test::fanout_exe().string()}, {"RESULTS_DIR", (d.path / "results").string()},
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
                             d.path, pbs_env(), 300);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(one("pa", "SELECT count(*) FROM runs WHERE status='COMPLETED'"), "6");
  EXPECT_EQ(one("pa", "SELECT count(DISTINCT substr(job_id, 1, instr(job_id, '#') - 1)) FROM runs"), "2") << "one array per shape";
  std::string array_script = read_file(d.path / "results" / "pa" /
                                       fs::path(one("pa", "SELECT path FROM runs LIMIT 1")).parent_path().filename() / "pbs-array-1.sh");
  EXPECT_NE(array_script.find("#PBS -t 0-2"), std::string::npos) << array_script;  // Torque syntax: the wrapper's flavor
}

// `auto` is resolved once, for running and for --dry-run alike: on a host with qsub/qstat and no Slurm, the dry
// run shows the PBS script the sweep would submit (it showed a local script while running would have used PBS).
TEST(PbsWithOpenMpi, AutoOnAPbsHostShowsAndRunsPbs) {
  test::TempDir d;
  const fs::path shim = fs::path(FANOUT_SOURCE_DIR) / "tests" / "fixtures" / "pbs" / "one_host_pbs";
  const std::vector<std::pair<std::string, std::string>> env = {
      {"PATH", shim.string() + ":" + std::getenv("PATH")}, {"FANOUT_TEST_PBS_STATE", (d.path / "server").string()},
      {"SLURM_CONF", (d.path / "no-slurm.conf").string()}};  // no Slurm on this "host"
  auto dry = test::run_command({test::fanout_exe().string(), "calibration_sleep", "--launcher=auto", "--dry-run"}, d.path, env, 60);
  ASSERT_EQ(dry.exit_code, 0) << dry.err;
  EXPECT_NE(dry.out.find("#PBS -N "), std::string::npos) << dry.out;
  EXPECT_EQ(dry.out.find("#SBATCH"), std::string::npos) << dry.out;
  auto run = test::run_command({test::fanout_exe().string(), "calibration_sleep", "--launcher=auto", "--exp_name=auto", "--iterations=2"},
                               d.path, env, 300);
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_EQ(test::sql_one(d.path / "results" / "auto" / "fanout.sqlite", "SELECT launcher FROM runs"), "pbs");
}

// What PBS here cannot express is refused before anything is submitted, naming the flag, rather than dropped:
// node features (--constraint) and Slurm's --batch_args; --partition, --account and --exclusive go into the script.
TEST(PbsWithOpenMpi, OptionsPbsCannotHonourAreRefusedBeforeSubmission) {
  test::TempDir d;
  const fs::path shim = fs::path(FANOUT_SOURCE_DIR) / "tests" / "fixtures" / "pbs" / "one_host_pbs";
  const std::vector<std::pair<std::string, std::string>> env = {
      {"PATH", shim.string() + ":" + std::getenv("PATH")}, {"FANOUT_TEST_PBS_STATE", (d.path / "server").string()}};
  for (const std::string flag : {"--constraint=bigmem", "--batch_args=qos=high"}) {
    auto r = test::run_command({test::fanout_exe().string(), "calibration_sleep", "--launcher=pbs", "--exp_name=refused", flag}, d.path, env, 60);
    EXPECT_EQ(r.exit_code, 2) << flag;
    EXPECT_NE(r.err.find(flag.substr(0, flag.find('=')) + ": the pbs launcher cannot honour it"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("it honours: --partition, --account, --exclusive"), std::string::npos) << r.err;
    EXPECT_FALSE(fs::exists(d.path / "server")) << flag << ": nothing reached the server";
    EXPECT_FALSE(fs::exists(d.path / "results" / "refused")) << flag << ": nothing was written";
  }
}

// Under mpirun, which hands out no GPUs, each rank takes its share of the node's (rank/main.cpp): local rank k of a
// step asking g GPUs per task gets the k-th g of CUDA_VISIBLE_DEVICES. Through the PBS shim with real Open MPI.
// A step asking CPUs of its own is refused: mpirun's steps share the job's CPUs.
TEST(PbsWithOpenMpi, EachMpiRankTakesItsShareOfTheNodesGpus) {
  test::TempDir d;
  const fs::path shim = fs::path(FANOUT_SOURCE_DIR) / "tests" / "fixtures" / "pbs" / "one_host_pbs";
  const std::vector<std::pair<std::string, std::string>> env = {{"PATH", shim.string() + ":" + std::getenv("PATH")},
                                                                {"FANOUT_TEST_PBS_STATE", (d.path / "server").string()},
                                                                {"CUDA_VISIBLE_DEVICES", "4,5,6,7"}};
  auto file = [&](const std::string& name, const std::string& keys) {
    write_file_atomic(d.path / (name + ".toml"), "[experiment]\nplugin = \"calibration\"\nlauncher = \"pbs\"\n[parameters]\niterations = 1\n"
                                                 "[[steps]]\nrole = \"sleep\"\nnodes = 1\ntasks_per_node = 2\n" + keys);
    return (d.path / (name + ".toml")).string();
  };
  auto r = test::run_command({test::fanout_exe().string(), "run", file("gpus", "gpus_per_task = 2\n")}, d.path, env, 300);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const fs::path db = d.path / "results" / "gpus" / "fanout.sqlite";
  auto rows = test::sql_rows(db, "SELECT rank, gpus FROM rank_resources ORDER BY rank");
  ASSERT_EQ(rows.size(), 2u);
  EXPECT_EQ(rows[0], (std::vector<std::string>{"0", "4,5"}));
  EXPECT_EQ(rows[1], (std::vector<std::string>{"1", "6,7"}));
  EXPECT_NE(read_file(fs::path(test::sql_one(db, "SELECT path FROM runs")) / "job.sh").find("#PBS -l nodes=1:ppn=2:gpus=4\n"), std::string::npos) << "the one-host server speaks Torque";
  auto x = test::run_command({test::fanout_exe().string(), "run", file("excl", "exclusive = true\n")}, d.path, env, 60);
  EXPECT_EQ(x.exit_code, 2);
  EXPECT_NE(x.err.find("step 'sleep' asks CPUs of its own (exclusive), which the pbs launcher cannot give it"), std::string::npos) << x.err;
  EXPECT_FALSE(fs::exists(d.path / "results" / "excl")) << "nothing written";
}
