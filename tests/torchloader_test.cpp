// torchloader: the Master's scheduling decisions on hand-made cases, and whole workloads through fanout (Master,
// node agents, real fanout-torchloader-train processes paused and resumed) on the local launcher.
#include <gtest/gtest.h>

#include <algorithm>

#include <fstream>
#include <future>
#include <chrono>
#include <cmath>
#include <map>
#include <thread>

#include "plugins/torchloader/agent_message.h"
#include "plugins/torchloader/gradient_exchange.h"
#include "plugins/torchloader/line_channel.h"
#include "plugins/torchloader/scheduler.h"
#include "plugins/sdk/fanout_sdk.hpp"
#include "common/files.h"

#include <nlohmann/json.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>
#include "tests/test_util.h"

using namespace torchloader;
namespace fs = std::filesystem;
namespace test = fanout::test;

namespace {

AppSpec app(const std::string& arch, double arrival, int node_size, int workers = 8) {
  AppSpec a;
  a.arch = arch, a.depth = 1, a.batch = 32, a.workers = workers, a.arrival_time = arrival, a.node_size = node_size;
  a.start_iter = 0, a.start_epoch = 1, a.end_iter = 10, a.end_epoch = 1;
  return a;
}

Demand demand(int d, double overload, double throughput) { return {double(d - 2) + overload, d, overload, throughput}; }

int count(const std::vector<Command>& cs, Command::Kind k) {
  int n = 0;
  for (const auto& c : cs) n += c.kind == k;
  return n;
}

}  // namespace

TEST(Scheduler, ModeOneSplitsTheCoresEvenlyAndNeverPauses) {
  Scheduler s({app("resnet", 1, 2, 16), app("vgg", 1, 2, 16), app("googlenet", 1, 2, 16)},
              {demand(6, .5, 100), demand(5, .2, 80), demand(4, .9, 60)}, Mode::EvenSplit, 2, 24);
  EXPECT_TRUE(s.arrive(0.5).empty()) << "nothing has arrived yet";
  auto launches = s.arrive(1.0);
  ASSERT_EQ(launches.size(), 6u) << "3 applications x 2 processes";
  std::map<int, int> per_node;
  for (const auto& c : launches) {
    EXPECT_EQ(c.kind, Command::Kind::Launch);
    EXPECT_EQ(c.workers, 8) << "2 nodes x 24 cores over 6 processes";
    ++per_node[c.node];
  }
  EXPECT_EQ(per_node[0], 3) << "each application spans both nodes";
  EXPECT_EQ(per_node[1], 3);
  for (int a = 0; a < 3; ++a)
    for (int p = 0; p < 2; ++p) EXPECT_TRUE(s.finished(a, p, 10.0 + a).empty());
  EXPECT_TRUE(s.all_finished());
  EXPECT_DOUBLE_EQ(s.completed_at(2), 12.0);
}

TEST(Scheduler, ModeTwoReallocatesOnArrivalModeThreeAlsoOnCompletion) {
  for (Mode mode : {Mode::OnArrival, Mode::OnArrivalAndCompletion}) {
    Scheduler s({app("resnet", 0, 1), app("vgg", 5, 1)}, {demand(6, .5, 100), demand(6, .5, 100)}, mode, 1, 8);
    auto first = s.arrive(0);
    ASSERT_EQ(first.size(), 1u);
    EXPECT_EQ(first[0].workers, 8) << "alone on the node: its demand (6) and the leftover cores";
    auto second = s.arrive(5);
    ASSERT_EQ(count(second, Command::Kind::Launch), 1);
    ASSERT_EQ(count(second, Command::Kind::Pause), 1) << "the running application gives workers to the new one";
    int launched = 0, target = 0;
    for (const auto& c : second) (c.kind == Command::Kind::Launch ? launched : target) = c.workers;
    EXPECT_LE(launched + target, 8) << "never more workers than cores";
    auto resumed = s.paused(0, 0);
    ASSERT_EQ(resumed.size(), 1u);
    EXPECT_EQ(resumed[0].kind, Command::Kind::Resume);
    EXPECT_EQ(resumed[0].workers, target);
    auto after = s.finished(1, 0, 9);
    if (mode == Mode::OnArrival) {
      EXPECT_TRUE(after.empty()) << "mode 2 ignores completions";
    } else {
      ASSERT_EQ(after.size(), 1u) << "mode 3 gives the freed cores back";
      EXPECT_EQ(after[0].kind, Command::Kind::Pause);
      EXPECT_EQ(s.paused(0, 0)[0].workers, 8);
    }
    EXPECT_FALSE(s.all_finished());
    s.finished(0, 0, 12);
    EXPECT_TRUE(s.all_finished());
  }
}

// Mode 3 on a completion: an application that already has its demand is not paused to get more workers (it would
// not run faster, and the pause costs a checkpoint and a restart; seen in bench/torchloader_emulated_bench.sh).
TEST(Scheduler, ModeThreeDoesNotPauseAnApplicationWhoseDemandIsMet) {
  Scheduler s({app("resnet", 0, 1), app("vgg", 5, 1)}, {demand(3, .5, 100), demand(3, .5, 100)}, Mode::OnArrivalAndCompletion, 1, 8);
  ASSERT_EQ(s.arrive(0).size(), 1u);
  auto second = s.arrive(5);
  ASSERT_EQ(count(second, Command::Kind::Pause), 1) << "workers are taken away for the newcomer";
  auto resumed = s.paused(0, 0);
  ASSERT_EQ(resumed.size(), 1u);
  ASSERT_GE(resumed[0].workers, 3) << "both demands (3) fit in 8 cores";
  EXPECT_TRUE(s.finished(1, 0, 9).empty()) << "resnet has its demand: the freed cores are not worth a pause";
  s.finished(0, 0, 12);
  EXPECT_TRUE(s.all_finished());
}

// Shared devices (the seed's cuda_device: each GPU serves two applications): a demand is divided by the
// applications in the system sharing the application's busiest device, at every event. When vgg's partners
// complete, its demand doubles: mode 3 pauses it to give it the freed cores; mode 2 does not look.
TEST(Scheduler, SharedDevicesDivideTheDemandAndACompletionRaisesIt) {
  EXPECT_EQ(shared_demand(demand(12, .4, 600), 2).demand, 2 + 5) << "10.4 workers alone, 5.2 shared by two";
  EXPECT_NEAR(shared_demand(demand(12, .4, 600), 2).overload, 0.2, 1e-12);
  EXPECT_DOUBLE_EQ(shared_demand(demand(12, .4, 600), 2).compute_samples_per_second, 300);
  std::vector<AppSpec> apps = {app("resnet", 0, 1), app("vgg", 0, 1), app("googlenet", 0, 1)};
  apps[0].cuda_device = {{0, 1}}, apps[1].cuda_device = {{1, 2}}, apps[2].cuda_device = {{0, 2}};
  EXPECT_EQ(apps_sharing_busiest_device(apps, 1, {true, true, true}), 2);
  EXPECT_EQ(apps_sharing_busiest_device(apps, 1, {false, true, false}), 1);
  for (Mode mode : {Mode::OnArrival, Mode::OnArrivalAndCompletion}) {
    // Alone on a device: resnet and vgg need 4.4 workers (shared: 2.2 -> demand 4), googlenet 30 (shared: 15 -> 17).
    // 26 cores: shares proportional to the shared demands (4, 4, 17), the leftover core to googlenet.
    Scheduler s(apps, {demand(6, .4, 100), demand(6, .4, 100), demand(32, 0, 900)}, mode, 1, 26, true);
    auto launches = s.arrive(0);
    ASSERT_EQ(launches.size(), 3u);
    EXPECT_GE(s.workers(2, 0), 17) << "googlenet gets its shared demand";
    EXPECT_EQ(s.workers(1, 0), 4) << "vgg gets its shared demand";
    EXPECT_TRUE(s.finished(2, 0, 5).empty()) << "vgg still shares device 1 with resnet: its demand is unchanged";
    auto after = s.finished(0, 0, 8);
    if (mode == Mode::OnArrival) {
      EXPECT_TRUE(after.empty());
    } else {
      ASSERT_EQ(count(after, Command::Kind::Pause), 1) << "alone on its devices vgg needs 6, has 4";
      EXPECT_EQ(s.paused(1, 0).at(0).workers, 26);
    }
  }
}

// resize=live: a running application's new count is applied in place (Resize, never Pause), for every change the
// WAA makes, since it costs no restart: mode 3 hands the cores freed by a completion to the others even where their
// demand is met, so that they already have them when a later completion raises it.
TEST(Scheduler, LiveResizingAppliesEveryChangeInPlace) {
  std::vector<AppSpec> apps = {app("resnet", 0, 2), app("vgg", 0, 2), app("googlenet", 0, 2)};
  apps[0].cuda_device = {{0, 1}, {0, 1}}, apps[1].cuda_device = {{1, 2}, {1, 2}}, apps[2].cuda_device = {{0, 2}, {0, 2}};
  for (Mode mode : {Mode::OnArrival, Mode::OnArrivalAndCompletion}) {
    Scheduler s(apps, {demand(6, .4, 100), demand(6, .4, 100), demand(32, 0, 900)}, mode, 2, 26, true, Resizing::Live);
    ASSERT_EQ(count(s.arrive(0), Command::Kind::Launch), 6);
    const int vgg_before = s.workers(1, 0) + s.workers(1, 1);
    auto freed = s.finished(2, 0, 5);
    EXPECT_TRUE(freed.empty()) << "googlenet's other process still runs";
    freed = s.finished(2, 1, 5);
    if (mode == Mode::OnArrival) {
      EXPECT_TRUE(freed.empty()) << "mode 2 does not look at completions";
      continue;
    }
    EXPECT_EQ(count(freed, Command::Kind::Pause), 0);
    ASSERT_EQ(count(freed, Command::Kind::Resize), 4) << "both processes of resnet and of vgg grow";
    for (const auto& c : freed) EXPECT_EQ(c.workers, s.workers(c.app, c.process)) << "the scheduler's count is the command's";
    EXPECT_EQ(s.workers(0, 0) + s.workers(1, 0), 26) << "node 0's cores go to the two applications left on it";
    EXPECT_GT(s.workers(1, 0) + s.workers(1, 1), vgg_before);
    EXPECT_TRUE(s.paused(1, 0).empty()) << "nothing was paused, so nothing resumes";
    for (int p = 0; p < 2; ++p) s.finished(0, p, 8);
    for (int p = 0; p < 2; ++p) s.finished(1, p, 9);
    EXPECT_TRUE(s.all_finished());
  }
}

TEST(Scheduler, ShortOfCoresEveryApplicationStillGetsAWorkerPerProcess) {
  Scheduler s({app("resnet", 0, 1), app("vgg", 0, 1), app("googlenet", 0, 1)}, {demand(9, .1, 1), demand(9, .9, 1), demand(9, .5, 1)},
              Mode::OnArrival, 1, 4);
  auto launches = s.arrive(0);
  ASSERT_EQ(launches.size(), 3u);
  int total = 0;
  for (const auto& c : launches) {
    EXPECT_GE(c.workers, 1);
    total += c.workers;
  }
  EXPECT_LE(total, 4);
}

// A 2-node application trains as one (its processes average gradients): when only its process on node 0 must
// give workers to a newcomer there, both of its processes pause, and they resume together once both stopped.
TEST(Scheduler, AMultiNodeApplicationPausesAndResumesAllItsProcesses) {
  Scheduler s({app("resnet", 0, 2), app("vgg", 5, 1)}, {demand(6, .5, 100), demand(6, .5, 100)}, Mode::OnArrival, 2, 8);
  ASSERT_EQ(s.arrive(0).size(), 2u);
  auto second = s.arrive(5);
  EXPECT_EQ(count(second, Command::Kind::Launch), 1);
  ASSERT_EQ(count(second, Command::Kind::Pause), 2) << "both processes of the 2-node application";
  EXPECT_TRUE(s.paused(0, 0).empty()) << "its other process has not stopped yet";
  auto resumed = s.paused(0, 1);
  ASSERT_EQ(resumed.size(), 2u);
  EXPECT_EQ(count(resumed, Command::Kind::Resume), 2);
  EXPECT_LT(s.workers(0, 0), s.workers(0, 1)) << "node 0 is shared now, node 1 is not";
}

namespace {

// Two applications on one node: a long one (`long_iterations`), and a short one arriving while it runs.
fs::path staggered_workload(const fs::path& dir, int long_iterations = 60) {
  fs::path p = dir / ("workload" + std::to_string(long_iterations) + ".csv");
  std::ofstream(p) << "arch,depth,batch,workers,output_folder,master,port,arrival_time,cuda_device,start_iter,start_epoch,end_iter,end_epoch,node_size\n"
                      "resnet, 1, 16, 2, \"t\", n1, 1, 0, [], 0, 1, " << long_iterations << ", 1, 1\n"
                      "vgg, 1, 16, 2, \"t\", n1, 1, 1, [], 0, 1, 10, 1, 1\n";
  return p;
}

}  // namespace

// The whole cluster on the local launcher: a TPM profiling step, then modes 1 and 2 on a staggered workload.
// Mode 2 pauses the running application when the second arrives (a real checkpoint and a real restart with a
// new worker count), and both still complete every iteration.
TEST(TorchloaderRun, ProfileThenModesOneAndTwoOnTheLocalLauncher) {
  test::TempDir d;
  const fs::path tpm = d.path / "tpm.json";
  auto p = test::run_fanout(d.path, {"torchloader_profile", "--exp_name=prof", "--workload=" + staggered_workload(d.path).string(), "--cost=2",
                                     "--tpm=" + tpm.string(), "--profile_iterations=2"},
                            600);
  ASSERT_EQ(p.exit_code, 0) << p.err;
  ASSERT_TRUE(fs::exists(tpm));
  // The premise of every run below is that the long application still runs when the short one arrives (t = 1 s)
  // and after it completes. How long that takes depends on the machine, so it is measured here: a mode 1 run
  // gives the short application's arrival-to-completion time (process start included), the profile gives the
  // long one's compute time per iteration (a lower bound of its iteration time). The long application gets
  // enough iterations to run six times longer than the short one's arrival plus completion.
  auto calibration = test::run_fanout(d.path, {"torchloader", "--exp_name=cal", "--workload=" + staggered_workload(d.path).string(), "--mode=1",
                                               "--nodes=1", "--cores=4", "--cost=2", "--tpm=" + tpm.string()},
                                      600);
  ASSERT_EQ(calibration.exit_code, 0) << calibration.err;
  const double short_s = std::stod(test::sql_one(d.path / "results" / "cal" / "fanout.sqlite", "SELECT value FROM samples WHERE metric='completion_s.app1'"));
  const double long_iteration_s = nlohmann::json::parse(fanout::read_file(tpm))["apps"]["resnet-1-16"]["compute_s"].get<double>();
  ASSERT_GT(long_iteration_s, 0);
  const int long_iterations = std::max(60, int(std::ceil(6 * (1.0 + short_s) / long_iteration_s)));
  const fs::path workload = staggered_workload(d.path, long_iterations);
  const std::string long_end = std::to_string(long_iterations);
  auto r = test::run_fanout(d.path, {"torchloader", "--exp_name=tl", "--workload=" + workload.string(), "--mode=[1,2]", "--nodes=1",
                                     "--cores=4", "--cost=2", "--tpm=" + tpm.string()},
                            900);
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  const fs::path db = d.path / "results" / "tl" / "fanout.sqlite";
  EXPECT_EQ(test::sql_one(db, "SELECT count(*) FROM runs WHERE status='COMPLETED'"), "2");
  auto per_mode = [&](const std::string& metric) {
    std::map<std::string, std::string> m;
    for (auto& row : test::sql_rows(db, "SELECT p.value, s.value FROM samples s JOIN parameters p ON p.run_id=s.run_id AND p.name='mode' "
                                        "WHERE s.metric='" + metric + "'"))
      m[row[0]] = row[1];
    return m;
  };
  auto pauses = per_mode("pauses");
  EXPECT_EQ(std::stod(pauses["1"]), 0) << "mode 1 never reallocates";
  EXPECT_GE(std::stod(pauses["2"]), 1) << "mode 2 reallocated when the second application arrived";
  for (auto& [mode, makespan] : per_mode("makespan")) EXPECT_GT(std::stod(makespan), 0) << "mode " << mode;
  EXPECT_EQ(test::sql_one(db, "SELECT count(*) FROM samples WHERE metric LIKE 'completion_s.app%'"), "4");
  EXPECT_NE(test::sql_one(db, "SELECT count(*) FROM samples WHERE metric LIKE 'samples_per_s.app%'"), "0") << "heartbeats recorded";
  // Every process reported FINISHED at its last iteration: the resumed one too.
  EXPECT_EQ(test::sql_one(db, "SELECT count(*) FROM samples WHERE metric='finished_iteration' AND value NOT IN (" + long_end + ", 10)"), "0");
  EXPECT_EQ(test::sql_one(db, "SELECT count(*) FROM samples WHERE metric='finished_iteration'"), "4");

  // resize=live, mode 3: the long application's loader shrinks in place when the short one arrives and grows back
  // when it completes; nothing pauses, and its heartbeats show the counts its loader ran.
  auto live = test::run_fanout(d.path, {"torchloader", "--exp_name=live", "--workload=" + workload.string(), "--mode=3", "--resize=live",
                                        "--nodes=1", "--cores=4", "--cost=2", "--tpm=" + tpm.string()},
                               900);
  ASSERT_EQ(live.exit_code, 0) << live.err << live.out;
  const fs::path live_db = d.path / "results" / "live" / "fanout.sqlite";
  EXPECT_EQ(std::stod(test::sql_one(live_db, "SELECT value FROM samples WHERE metric='pauses'")), 0);
  EXPECT_GE(std::stod(test::sql_one(live_db, "SELECT value FROM samples WHERE metric='resizes'")), 2) << "a shrink and a growth";
  EXPECT_EQ(test::sql_one(live_db, "SELECT count(*) FROM samples WHERE metric='finished_iteration' AND value IN (" + long_end + ", 10)"), "2");
  const auto asked = test::sql_rows(live_db, "SELECT value FROM samples WHERE metric='workers.app0' ORDER BY iteration");
  ASSERT_GE(asked.size(), 3u) << "launched, shrunk, grown";
  EXPECT_LT(std::stod(asked[1][0]), std::stod(asked[0][0]));
  EXPECT_GT(std::stod(asked[2][0]), std::stod(asked[1][0]));
  EXPECT_EQ(test::sql_one(live_db, "SELECT count(DISTINCT value) > 1 FROM samples WHERE metric='loader_workers.app0.p0'"), "1")
      << "the trainer's own heartbeats report the resized loader";
}

// The seed's workload as written in torchloader's README (3 applications of 2 nodes each, arriving together),
// capped to a few iterations, mode 3, two node agents on the local launcher.
TEST(TorchloaderRun, SeedWorkloadEndToEnd) {
  test::TempDir d;
  auto r = test::run_fanout(d.path, {"torchloader", "--exp_name=seed", "--workload=seed", "--mode=3", "--nodes=2", "--max_iterations=8",
                                     "--max_batch=16", "--cost=2", "--profile_iterations=1"},
                            900);
  ASSERT_EQ(r.exit_code, 0) << r.err << r.out;
  const fs::path db = d.path / "results" / "seed" / "fanout.sqlite";
  EXPECT_EQ(test::sql_one(db, "SELECT status FROM runs"), "COMPLETED");
  EXPECT_EQ(test::sql_one(db, "SELECT count(*) FROM samples WHERE metric='finished_iteration' AND value=8"), "6");
  EXPECT_TRUE(fs::exists(d.path / "results" / "seed" / "tpm.json")) << "profiled first, since no TPM file existed";
  // Each launch records the application's workers, and so does each resume (a paused process that finished
  // its last iteration before the signal arrived is not resumed).
  const int changes = std::stoi(test::sql_one(db, "SELECT count(*) FROM samples WHERE metric LIKE 'workers.app%'"));
  const int pauses = int(std::stod(test::sql_one(db, "SELECT value FROM samples WHERE metric='pauses'")));
  EXPECT_GE(changes, 6);
  EXPECT_LE(changes, 6 + pauses);
}

// A simulated cluster (issue 24): emulated devices, so the TPM's profiling on 1 and 2 devices fits the full compute
// model, whose per-work coefficient is the emulated device's own (6 FLOP per multiply-add at 0.05 TFLOP/s), with
// each application's fit error in tpm.json and the results; then a run of emulated devices and loaders on 2 nodes
// of 48 loader cores.
TEST(TorchloaderRun, EmulatedClusterFitsTheFullComputeModelAndRuns) {
  test::TempDir d;
  const fs::path tpm = d.path / "tpm.json";
  const std::vector<std::string> device = {"--device=emulated", "--device_tflops=0.05", "--cost=2", "--tpm=" + tpm.string()};
  std::vector<std::string> profile = {"torchloader_profile", "--exp_name=prof", "--workload=seed", "--profile_iterations=2"};
  profile.insert(profile.end(), device.begin(), device.end());
  auto p = test::run_fanout(d.path, profile, 600);
  ASSERT_EQ(p.exit_code, 0) << p.err;
  const auto j = nlohmann::json::parse(fanout::read_file(tpm));
  ASSERT_TRUE(j.contains("compute_model")) << j.dump(2);
  EXPECT_FALSE(j.contains("compute_model_error")) << j.dump(2);
  // The optimizer steps and exchanges (real CPU work) add noise when another test shares the 2 cores (alone:
  // 0.02 %; under ctest -j2: 6 % seen). The tolerance is what this profile's own fits show of that noise: twice
  // its worst fit error, at least 15 % and at most 50 % (a model off by 2x still fails).
  double worst_fit = 0;
  for (auto& [key, app] : j["apps"].items()) worst_fit = std::max(worst_fit, app.value("fit_error", 0.0));
  const double tolerance = std::min(0.5, std::max(0.15, 2 * worst_fit));
  EXPECT_NEAR(j["compute_model"]["compute"]["c_work"].get<double>() / (6.0 / 0.05e12), 1.0, tolerance) << j.dump(2);
  ASSERT_EQ(j["apps"].size(), 3u);
  for (auto& [key, app] : j["apps"].items()) {
    EXPECT_NE(key.find("@emulated-0.05tf-200us"), std::string::npos) << key;
    ASSERT_TRUE(app.contains("fit_error")) << key;
    // Bounded by the same cap as the tolerance above: CI under ctest -j2 has seen 0.30 from the noise it describes.
    EXPECT_GE(app["fit_error"].get<double>(), 0.0) << key;
    EXPECT_LT(app["fit_error"].get<double>(), 0.5) << key;
    EXPECT_GT(app["compute_s_2dev"].get<double>(), 0) << key;
  }
  EXPECT_EQ(test::sql_one(d.path / "results" / "prof" / "fanout.sqlite", "SELECT count(*) FROM samples WHERE metric LIKE 'tpm_fit_error.%'"), "3");
  std::vector<std::string> run = {"torchloader", "--exp_name=emu", "--workload=seed", "--max_iterations=5", "--mode=2",
                                  "--nodes=2", "--cores=48", "--loader=emulated", "--loader_contention=[0,0.5]"};
  run.insert(run.end(), device.begin(), device.end());
  auto r = test::run_fanout(d.path, run, 600);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const fs::path db = d.path / "results" / "emu" / "fanout.sqlite";
  // Two runs: the loaders alone (contention 0) and contending for their node (0.5).
  EXPECT_EQ(test::sql_one(db, "SELECT count(*) FROM samples WHERE metric='finished_iteration' AND value=5"), "12");
  EXPECT_EQ(test::sql_one(db, "SELECT count(*) FROM samples WHERE metric LIKE 'demand.app%'"), "6");
  EXPECT_EQ(test::sql_one(db, "SELECT value FROM parameters WHERE name='device'"), "emulated") << "the device is part of every run";
  // Issue 51: the report leads with each figure against what was swept (loader_contention).
  const auto plots = test::headline_plots(d.path, db.parent_path());
  EXPECT_NE(std::find(plots.begin(), plots.end(), "median makespan (master) by loader_contention"), plots.end()) << "median makespan (master) by loader_contention";
  EXPECT_NE(std::find(plots.begin(), plots.end(), "median aggregate_throughput (master) by loader_contention"), plots.end()) << "median aggregate_throughput (master) by loader_contention";
  ASSERT_FALSE(plots.empty());
  EXPECT_EQ(plots.front().rfind("median ", 0), 0u) << "first: " << plots.front();
  // The seed's cuda_device puts two applications on each GPU: every node's processes shared one device file, and
  // no step is left holding a device.
  int device_files = 0;
  for (auto& e : fs::recursive_directory_iterator(d.path / "results" / "emu"))
    if (e.path().filename().string().rfind("emulated_devices.node", 0) == 0) {
      ++device_files;
      const std::string counters = fanout::read_file(e.path());
      EXPECT_EQ(counters, std::string(256, '\0')) << e.path();
    }
  EXPECT_EQ(device_files, 4);
  // Issue 42: with --loader_contention every node's loader workers counted themselves in one file per node (a
  // 4-byte counter), and none is left counted.
  int loader_files = 0;
  for (auto& e : fs::recursive_directory_iterator(d.path / "results" / "emu"))
    if (e.path().filename().string().rfind("emulated_loaders.node", 0) == 0) {
      ++loader_files;
      EXPECT_EQ(fanout::read_file(e.path()), std::string(4, '\0')) << e.path();
    }
  EXPECT_EQ(loader_files, 2) << "one per node of the contending run only: its trainers were given the node's file";
  EXPECT_EQ(test::sql_one(db, "SELECT group_concat(value, ' ') FROM (SELECT value FROM parameters WHERE name='loader_contention' ORDER BY value)"), "0 0.5");
}

namespace {
// A raw TCP peer of the master: connects, sends `bytes`, and closes.
void stranger(int port, const std::string& bytes) { close(test::connect_and_send(port, bytes)); }
}  // namespace

// Issue 19: a zero-byte connection failed a torchloader run, "HB x 0 1 2" gave "ERROR stoi". The master's port
// now hears only peers that present the job's token; the rest are refused without a word reaching the master.
TEST(MasterChannel, StrangersAreRefusedAndOnlyThePeersLinesArrive) {
  const std::string token = fanout_sdk::channel_token();
  torchloader::LineServer server("127.0.0.1", token);
  stranger(server.port(), "");                          // connects and leaves
  stranger(server.port(), "HB x 0 1 2\n");               // a message without the token
  stranger(server.port(), "AUTH " + std::string(32, 'a') + "\nREGISTER 0 4 1.2.3.4\n");  // a wrong token
  torchloader::LineClient peer("127.0.0.1:" + std::to_string(server.port()), token, 5000);
  ASSERT_TRUE(peer.send("REGISTER 0 4 127.0.0.1"));
  std::vector<torchloader::Line> got;
  for (const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30); ((got.empty() || server.refused() < 3)) && std::chrono::steady_clock::now() < until;)
    for (auto& l : server.poll(100)) got.push_back(l);
  ASSERT_EQ(got.size(), 1u) << "only the peer's line, no CLOSED for a stranger: " << (got.empty() ? "" : got[0].text);
  EXPECT_EQ(got[0].text, "REGISTER 0 4 127.0.0.1");
  EXPECT_EQ(server.refused(), 3u);
  EXPECT_TRUE(server.send(got[0].conn, "EXIT"));
  std::vector<std::string> back;
  bool master_gone = false;
  for (const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30); (back.empty()) && std::chrono::steady_clock::now() < until;) back = peer.poll(100, master_gone);
  ASSERT_EQ(back.size(), 1u);
  EXPECT_EQ(back[0], "EXIT");
  EXPECT_FALSE(master_gone);
}

// A connection's end is out of band (Line::closed): a peer's line reading "CLOSED" is a line like any other (the
// long fuzz run found the in-band marker: such a line ended the harness's wait and was taken for the agent leaving).
TEST(MasterChannel, APeersLineReadingClosedIsNotItsEnd) {
  const std::string token = fanout_sdk::channel_token();
  torchloader::LineServer server("127.0.0.1", token);
  std::vector<torchloader::Line> got;
  {
    torchloader::LineClient peer("127.0.0.1:" + std::to_string(server.port()), token, 5000);
    ASSERT_TRUE(peer.send("CLOSED"));
    for (const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30); (got.empty()) && std::chrono::steady_clock::now() < until;)
      for (auto& l : server.poll(100)) got.push_back(l);
    ASSERT_EQ(got.size(), 1u);
    EXPECT_EQ(got[0].text, "CLOSED");
    EXPECT_FALSE(got[0].closed);
  }  // the peer leaves
  for (const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(30); (got.size() < 2) && std::chrono::steady_clock::now() < until;)
    for (auto& l : server.poll(100)) got.push_back(l);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_TRUE(got[1].closed);
  EXPECT_EQ(got[1].conn, got[0].conn);
}

// Issue 19: the data-parallel gradient exchange was the one torchloader port without the job's token. Process 0
// now drops a stranger with a wrong token, a peer claiming a rank outside the world, and one that stays silent
// (after the handshake deadline), and still forms the exchange with the real peer.
TEST(GradientExchange, StrangersAreDroppedAndTheRealPeerJoins) {
  const std::string token = fanout_sdk::channel_token();
  std::promise<int> port;
  auto listening = port.get_future();
  std::vector<float> zero = {0, 2, 4};
  int refused = -1;
  bool paused0 = false;
  std::thread p0([&] {
    torchloader::GradientExchange ex(0, 2, "127.0.0.1", token, [&](int p) { port.set_value(p); }, 30000);
    refused = ex.refused();
    paused0 = ex.average(zero.data(), zero.size(), false);
  });
  const int p = listening.get();
  const int32_t one = 1, five = 5;
  auto hello = [](const std::string& t, int32_t r) { return t + std::string(reinterpret_cast<const char*>(&r), sizeof r); };
  int wrong = test::connect_and_send(p, hello(std::string(token.size(), 'a'), one));
  int bad_rank = test::connect_and_send(p, hello(token, five));
  int silent = test::connect_and_send(p, "");
  torchloader::GradientExchange ex1(1, 2, "127.0.0.1:" + std::to_string(p), token, nullptr, 30000);
  std::vector<float> mine = {2, 2, 2};
  EXPECT_TRUE(ex1.average(mine.data(), mine.size(), true)) << "process 1's pause reaches everyone";
  p0.join();
  close(wrong), close(bad_rank), close(silent);
  EXPECT_EQ(refused, 3);
  EXPECT_TRUE(paused0);
  EXPECT_EQ(mine, (std::vector<float>{1, 2, 3}));
  EXPECT_EQ(zero, mine);
}

// Issue 41 item 8 (found by reading): process 0 read each connection's hello in turn, 5 s each, so 40 silent
// connections made before the real peer's kept it out for 200 s. Hellos are read together now: the exchange
// forms inside a 30 s limit that reading in turn (40 x 5 s) could not meet, and every stranger is counted.
TEST(GradientExchange, SilentStrangersDoNotDelayThePeerBehindThem) {
  const std::string token = fanout_sdk::channel_token();
  std::promise<int> port;
  auto listening = port.get_future();
  int refused = -1;
  std::string error;
  std::thread p0([&] {
    try {
      torchloader::GradientExchange ex(0, 2, "127.0.0.1", token, [&](int p) { port.set_value(p); }, 30000);
      refused = ex.refused();
    } catch (const std::exception& e) {
      error = e.what();
    }
  });
  const int p = listening.get();
  std::vector<int> strangers;
  for (int i = 0; i < 40; ++i) strangers.push_back(test::connect_and_send(p, ""));
  std::string peer_error;
  try {
    torchloader::GradientExchange ex1(1, 2, "127.0.0.1:" + std::to_string(p), token, nullptr, 30000);
  } catch (const std::exception& e) {
    peer_error = e.what();
  }
  p0.join();
  for (int fd : strangers) close(fd);
  EXPECT_EQ(error, "");
  EXPECT_EQ(peer_error, "");
  EXPECT_EQ(refused, 40);
}

// The master's reading of its node agents' lines: each kind as NodeAgent writes it, and what a peer with the
// token could still send wrong (issue 19's "HB x 0 1 2" threw from stoi): refused, never thrown.
TEST(AgentMessage, EachKindParsesAndMalformedLinesAreRefused) {
  using K = torchloader::AgentMessage::Kind;
  auto m = torchloader::parse_agent_message("HB 1 0 12 340.500000 0.100000 0.020000");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->kind, K::Heartbeat);
  EXPECT_EQ(m->app, 1);
  EXPECT_EQ(m->iteration, 12);
  EXPECT_DOUBLE_EQ(m->samples_per_s, 340.5);
  EXPECT_EQ(m->loader_workers, 0) << "a heartbeat without the loader's count";
  EXPECT_EQ(torchloader::parse_agent_message("HB 1 0 12 340.500000 0.100000 0.020000 6")->loader_workers, 6);
  m = torchloader::parse_agent_message("LISTENING 2 0 40123");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->kind, K::Listening);
  EXPECT_EQ(m->port, 40123);
  m = torchloader::parse_agent_message("FINISHED 0 1 500 31.250000");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->kind, K::Finished);
  EXPECT_EQ(m->process, 1);
  EXPECT_EQ(m->iteration, 500);
  m = torchloader::parse_agent_message("FAILED 0 0 exit 3 (see the node's log)");
  ASSERT_TRUE(m);
  EXPECT_EQ(m->why, "exit 3 (see the node's log)");
  EXPECT_EQ(torchloader::parse_agent_message("PAUSED 3 2 42")->kind, K::Paused);
  for (const char* bad : {"HB x 0 1 2", "HB 0 0 1 nan 0 0", "HB 0 0 1 -5 0 0", "LISTENING 0 0 70000", "LISTENING 0 0 0", "FINISHED 0 0",
                          "PAUSED 0 0 12x", "PAUSED -1 0 3", "PAUSED 0 99999999999 3", "HELLO 0 0 1", "", "HB 0",
                          "HB 0 0 1 5 0 0 0", "HB 0 0 1 5 0 0 2.5", "HB 0 0 1 5 0 0 3 4"})
    EXPECT_FALSE(torchloader::parse_agent_message(bad)) << bad;
}
