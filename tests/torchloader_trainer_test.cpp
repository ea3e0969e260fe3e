// The torchloader training application: models, the synthetic dataset and loader, pause/resume with a different
// worker count, profiling, and the fanout-torchloader-train executable under SIGUSR1.
#include <gtest/gtest.h>

#include <future>

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <limits>
#include <string>
#include <thread>
#include <vector>

#include "plugins/torchloader/loader_contention.h"
#include "plugins/torchloader/shared_device.h"
#include "plugins/torchloader/trainer.h"
#include "tests/expect_throw.h"
#include "tests/timer_slack.h"

#ifndef TORCHLOADER_TRAIN_EXE
#error "TORCHLOADER_TRAIN_EXE must name the fanout-torchloader-train executable"
#endif

extern char** environ;

namespace fs = std::filesystem;
using namespace torchloader;

namespace {

fs::path scratch_dir() {
  fs::path d = fs::temp_directory_path() / ("torchloader_test_" + std::to_string(::getpid()));
  fs::create_directories(d);
  return d;
}

TrainOptions small_options(const std::string& arch) {
  TrainOptions o;
  o.arch = arch;
  o.depth = 2;
  o.batch = 8;
  o.workers = 1;
  o.cost = 1;
  o.threads = 1;
  o.seed = 7;
  o.heartbeat_s = 0;
  return o;
}

// Parameters and buffers of a module, by name.
std::vector<std::pair<std::string, torch::Tensor>> state_of(const std::shared_ptr<torch::nn::Module>& m) {
  std::vector<std::pair<std::string, torch::Tensor>> s;
  for (const auto& p : m->named_parameters()) s.emplace_back(p.key(), p.value());
  for (const auto& b : m->named_buffers()) s.emplace_back(b.key(), b.value());
  return s;
}

const char* const kArchs[] = {"resnet", "vgg", "googlenet"};

}  // namespace

TEST(TorchloaderModel, EachArchBuildsAndOneIterationRuns) {
  torch::set_num_threads(1);
  SyntheticImageDataset ds(1000, 10, 1, 3);
  auto [x, y] = ds.make_batch(0, 4);
  for (const char* arch : kArchs) {
    for (int depth : {1, 2, 5}) {
      SCOPED_TRACE(std::string(arch) + " depth " + std::to_string(depth));
      torch::manual_seed(0);
      auto model = make_model(arch, depth, 10);
      model->train();
      torch::optim::SGD opt(model->parameters(), torch::optim::SGDOptions(0.01).momentum(0.9));
      torch::Tensor out = forward(model, x);
      ASSERT_EQ(out.sizes(), (std::vector<int64_t>{4, 10}));
      torch::Tensor loss = torch::nn::functional::cross_entropy(out, y);
      loss.backward();
      opt.step();
      EXPECT_TRUE(std::isfinite(loss.item<double>()));
      EXPECT_GT(flops_per_sample(model), 1e5);
      EXPECT_GT(parameter_count(model), 500);
      EXPECT_TRUE(model->is_training());  // flops_per_sample restores the mode
    }
    // Through train() too.
    TrainOptions o = small_options(arch);
    o.end_iter = 1;
    TrainResult r = train(o, nullptr, nullptr);
    EXPECT_EQ(r.iterations_done, 1);
    EXPECT_FALSE(r.paused);
    EXPECT_TRUE(std::isfinite(r.last_loss));
  }
  EXPECT_THROW_WITH(make_model("alexnet", 2, 10), std::invalid_argument, "torchloader: unknown arch 'alexnet' (resnet, vgg, googlenet)");
  EXPECT_THROW_WITH(make_model("resnet", 0, 10), std::invalid_argument, "torchloader: depth must be >= 1");
}

TEST(TorchloaderModel, DeeperModelsCountMoreFlopsAndParameters) {
  for (const char* arch : kArchs) {
    auto a = make_model(arch, 1, 10), b = make_model(arch, 4, 10);
    EXPECT_LT(flops_per_sample(a), flops_per_sample(b)) << arch;
    EXPECT_LT(parameter_count(a), parameter_count(b)) << arch;
    std::printf("%s: depth 1 %.3g MACs %lld params, depth 4 %.3g MACs %lld params\n", arch, flops_per_sample(a),
                static_cast<long long>(parameter_count(a)), flops_per_sample(b),
                static_cast<long long>(parameter_count(b)));
  }
}

// Issue 42: an emulated loader's per-batch noise is a lognormal factor of mean 1 and the asked coefficient of
// variation, drawn by (seed, iteration); none without noise.
TEST(TorchloaderData, EmulatedLoaderNoiseHasMeanOneAndTheAskedSpread) {
  EmulatedLoader quiet{0.01, 0.001};
  EXPECT_EQ(quiet.noise_factor(5), 1.0);
  for (double cv : {0.1, 0.3}) {
    EmulatedLoader noisy{0.01, 0.001, cv, 42};
    const int n = 100000;
    double sum = 0, sum2 = 0;
    for (int k = 0; k < n; ++k) {
      const double f = noisy.noise_factor(k);
      ASSERT_GT(f, 0);
      sum += f, sum2 += f * f;
    }
    const double mean = sum / n, sd = std::sqrt(sum2 / n - mean * mean);
    EXPECT_NEAR(mean, 1.0, 0.01) << "cv " << cv;
    EXPECT_NEAR(sd / mean, cv, cv * 0.05) << "cv " << cv;
    EXPECT_EQ(noisy.noise_factor(17), noisy.noise_factor(17)) << "reproducible";
  }
}

TEST(TorchloaderData, SamplesAreDeterministicAndLabelled) {
  SyntheticImageDataset a(100, 10, 2, 5), b(100, 10, 2, 5), c(100, 10, 2, 6);
  torch::Tensor x(torch::empty({3, 32, 32})), y(torch::empty({3, 32, 32}));
  EXPECT_EQ(a.load(123, x.data_ptr<float>()), 3);  // image 23, label 23 % 10
  b.load(123, y.data_ptr<float>());
  EXPECT_TRUE(torch::equal(x, y));
  c.load(123, y.data_ptr<float>());
  EXPECT_FALSE(torch::equal(x, y));
  // Same image, another epoch: same raw bytes, a different augmentation draw is allowed.
  std::vector<uint8_t> r1(40 * 40 * 3), r2(40 * 40 * 3);
  a.decode(23, r1.data());
  a.decode(123, r2.data());
  EXPECT_EQ(r1, r2);
}

TEST(TorchloaderData, IterationDataDoesNotDependOnWorkers) {
  SyntheticImageDataset ds(50, 10, 1, 11);  // small dataset: the iterations wrap around it
  const int64_t batch = 16, start = 5, end = 17;
  std::vector<Batch> one, three;
  {
    DataLoader l(ds, batch, 1, start, end);
    while (auto b = l.next()) one.push_back(*b);
  }
  {
    DataLoader l(ds, batch, 3, start, end);
    EXPECT_EQ(l.workers(), 3);
    while (auto b = l.next()) three.push_back(*b);
  }
  ASSERT_EQ(one.size(), static_cast<size_t>(end - start));
  ASSERT_EQ(three.size(), one.size());
  for (size_t i = 0; i < one.size(); ++i) {
    EXPECT_EQ(one[i].iteration, start + static_cast<int64_t>(i));
    EXPECT_EQ(three[i].iteration, one[i].iteration);
    EXPECT_TRUE(torch::equal(one[i].data, three[i].data)) << "iteration " << one[i].iteration;
    EXPECT_TRUE(torch::equal(one[i].labels, three[i].labels));
    for (int64_t j = 0; j < batch; ++j)
      EXPECT_EQ(one[i].labels[j].item<int64_t>(), ((one[i].iteration * batch + j) % 50) % 10);
  }
  // The loader's batch is the dataset's batch for that iteration.
  auto [x, y] = ds.make_batch(start + 3, batch);
  EXPECT_TRUE(torch::equal(x, three[3].data));
  // Abandoning a loader mid-way joins its workers.
  {
    DataLoader l(ds, batch, 2, 0, 1000);
    l.next();
  }
}

// Live resizing (resize=live): the loader grows and shrinks while batches are taken; every iteration's batch is
// still the dataset's, in order, and the worker count follows.
TEST(TorchloaderData, ResizingTheLoaderInPlaceKeepsTheBatchesAndTheirOrder) {
  SyntheticImageDataset ds(50, 10, 1, 11);
  const int64_t batch = 8, end = 40;
  DataLoader l(ds, batch, 1, 0, end);
  int64_t expect = 0;
  auto take = [&](int n) {
    for (int i = 0; i < n; ++i) {
      auto b = l.next();
      ASSERT_TRUE(b.has_value()) << "iteration " << expect;
      ASSERT_EQ(b->iteration, expect);
      auto [x, y] = ds.make_batch(expect, batch);
      EXPECT_TRUE(torch::equal(x, b->data)) << "iteration " << expect;
      EXPECT_TRUE(torch::equal(y, b->labels)) << "iteration " << expect;
      ++expect;
    }
  };
  take(5);
  l.resize(4);
  EXPECT_EQ(l.workers(), 4);
  take(10);
  l.resize(2);
  EXPECT_EQ(l.workers(), 2);
  // The two retired threads stop once they have delivered what they held (the batches taken next).
  take(10);
  for (auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
       l.running() > 2 && std::chrono::steady_clock::now() < deadline;)
    std::this_thread::yield();
  EXPECT_EQ(l.running(), 2) << "the surplus threads stopped";
  l.resize(3);  // grows again after a shrink: the stopped threads are joined, not counted
  EXPECT_EQ(l.workers(), 3);
  EXPECT_EQ(l.running(), 3);
  take(int(end - expect));
  EXPECT_FALSE(l.next().has_value()) << "nothing after end_iter";
  EXPECT_THROW(l.resize(0), std::invalid_argument);
}

// An emulated loader resized in place delivers at the model's rate for the new count (a / workers + b seconds per
// sample over all workers), measured after the new workers' first batches.
TEST(TorchloaderEmulated, AResizedLoaderFollowsTheModelForItsNewCount) {
  SyntheticImageDataset ds(50, 10, 1, 11);
  const EmulatedLoader model{2e-3, 2e-4};
  const int64_t batch = 16;
  const int n = 40;
  auto rate = [&](DataLoader& l) {
    for (int i = 0; i < 8; ++i) l.next();  // the pipeline of the (new) workers fills
    const auto t = std::chrono::steady_clock::now();
    for (int i = 0; i < n; ++i) l.next();
    return double(n * batch) / std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
  };
  // The rate the loader would have had, had it not grown: one worker, measured now, under the same load.
  DataLoader one(ds, batch, 1, 0, std::numeric_limits<int64_t>::max(), 0, 1, model);
  const double one_worker = rate(one);
  DataLoader l(ds, batch, 1, 0, std::numeric_limits<int64_t>::max(), 0, 1, model);
  l.next();
  l.resize(4);
  const double got = rate(l);
  const double expect = 1.0 / (model.a / 4 + model.b);  // 1,429 samples/s; one worker: 455
  // A timer only wakes late, so faster than the model only by a batch that woke late before the timed window and
  // whose worker then caught up on its schedule: what a batch's sleep overshoots on this machine now (three times its
  // p90) against the window (as LoaderThroughputFollowsTheModel bounds it), plus 1 %, never above 10 %. Grown: the
  // model says 3.1x one worker; at least 2x of the one-worker rate measured beside it, whatever the load does to both.
  const double batch_s = batch * (model.a + model.b * 4), window_s = n * batch / expect;
  const double ceiling = std::min(1.1, 1.01 + 3 * fanout::test::sleep_overshoot_s(batch_s, 5) / window_s);
  EXPECT_LE(got / expect, ceiling) << got << " samples/s, the model for 4 workers says " << expect;
  EXPECT_GE(got / one_worker, 2.0) << got << " samples/s with 4 workers, " << one_worker << " with one";
}

TEST(TorchloaderTrain, PauseThenResumeWithOtherWorkersMatchesUninterruptedRun) {
  fs::path dir = scratch_dir();
  for (const char* arch : kArchs) {
    SCOPED_TRACE(arch);
    const int64_t total = 7, pause_after = 3;
    TrainOptions full = small_options(arch);
    full.end_iter = total;
    full.workers = 2;
    full.checkpoint = (dir / (std::string(arch) + "_full.ckpt")).string();
    TrainResult rf = train(full, [] { return false; }, nullptr);
    EXPECT_FALSE(rf.paused);
    EXPECT_EQ(rf.iterations_done, total);
    EXPECT_EQ(read_checkpoint_info(full.checkpoint).next_iter, total);

    TrainOptions part = full;
    part.workers = 1;
    part.checkpoint = (dir / (std::string(arch) + "_part.ckpt")).string();
    int polls = 0;
    TrainResult r1 = train(part, [&] { return ++polls >= pause_after; }, nullptr);
    EXPECT_TRUE(r1.paused);
    EXPECT_EQ(r1.iterations_done, pause_after);
    EXPECT_EQ(r1.next_iter, pause_after);
    CheckpointInfo info = read_checkpoint_info(part.checkpoint);
    EXPECT_EQ(info.next_iter, pause_after);
    EXPECT_EQ(info.arch, arch);
    EXPECT_EQ(info.seed, 7u);
    EXPECT_FALSE(fs::exists(part.checkpoint + ".tmp"));

    part.resume = true;
    part.workers = 3;
    part.seed = 999;  // ignored on resume: the checkpoint's seed wins
    TrainResult r2 = train(part, [] { return false; }, nullptr);
    EXPECT_FALSE(r2.paused);
    EXPECT_EQ(r2.iterations_done, total - pause_after);
    EXPECT_EQ(read_checkpoint_info(part.checkpoint).next_iter, total);

    auto a = state_of(load_checkpoint_model(full.checkpoint));
    auto b = state_of(load_checkpoint_model(part.checkpoint));
    ASSERT_EQ(a.size(), b.size());
    double max_diff = 0;
    for (size_t i = 0; i < a.size(); ++i) {
      ASSERT_EQ(a[i].first, b[i].first);
      max_diff = std::max(max_diff, (a[i].second.to(torch::kDouble) - b[i].second.to(torch::kDouble)).abs().max().item<double>());
    }
    std::printf("%s: max |full - paused/resumed| over parameters and buffers = %g\n", arch, max_diff);
    EXPECT_LE(max_diff, 1e-6);

    // A run that never paused differs from the initial model (training happened).
    torch::manual_seed(7);
    auto init = state_of(make_model(arch, 2, 10));
    EXPECT_FALSE(torch::equal(init[0].second, a[0].second));
  }
  // Resuming with mismatched options is refused.
  TrainOptions bad = small_options("vgg");
  bad.end_iter = 10;
  bad.resume = true;
  bad.checkpoint = (dir / "resnet_part.ckpt").string();
  EXPECT_THROW_WITH(train(bad, nullptr, nullptr), std::invalid_argument, "is for resnet depth 2 classes 10 batch 8, not the options given");
  bad.checkpoint = (dir / "missing.ckpt").string();
  bad.arch = "resnet";
  EXPECT_THROW_WITH(train(bad, nullptr, nullptr), std::runtime_error, "torchloader: no checkpoint at ");
  fs::remove_all(dir);
}

// Data parallelism: two replicas (threads here, processes in fanout) average gradients every iteration, so their
// parameters stay identical though each trains on its own shard; a pause asked of one replica stops both after
// the same iteration, and both resume from it with other worker counts.
TEST(TorchloaderTrain, DataParallelReplicasStayEqualAndPauseTogether) {
  fs::path dir = scratch_dir();
  auto run_pair = [&](bool resume, int pause_after_polls_of_rank1, std::vector<TrainResult>& results) {
    std::promise<int> port;
    auto port_ready = port.get_future();
    results.assign(2, TrainResult{});
    std::vector<std::thread> ranks;
    std::vector<std::string> errors(2);
    for (int r = 0; r < 2; ++r)
      ranks.emplace_back([&, r] {
        try {
          TrainOptions o = small_options("resnet");
          o.end_iter = 6;
          o.workers = 1 + r + (resume ? 1 : 0);
          o.resume = resume;
          o.checkpoint = (dir / ("dp" + std::to_string(r) + ".ckpt")).string();
          o.dp_rank = r, o.dp_world = 2;
          o.dp_token = "0123456789abcdef0123456789abcdef";
          if (r == 0) {
            o.dp_address = "127.0.0.1";
            o.on_listening = [&](int p) { port.set_value(p); };
          } else {
            o.dp_address = "127.0.0.1:" + std::to_string(port_ready.get());
          }
          int polls = 0;
          results[size_t(r)] = train(o, [&] { return r == 1 && pause_after_polls_of_rank1 > 0 && ++polls >= pause_after_polls_of_rank1; }, nullptr);
        } catch (const std::exception& e) {
          errors[size_t(r)] = e.what();
        }
      });
    for (auto& t : ranks) t.join();
    EXPECT_EQ(errors[0] + errors[1], "");
  };
  std::vector<TrainResult> first, second;
  run_pair(false, 2, first);
  EXPECT_TRUE(first[0].paused) << "rank 0 was not asked, yet pauses with rank 1";
  EXPECT_TRUE(first[1].paused);
  EXPECT_EQ(first[0].next_iter, 2);
  EXPECT_EQ(first[1].next_iter, 2);
  run_pair(true, 0, second);
  EXPECT_FALSE(second[0].paused);
  EXPECT_EQ(second[0].next_iter, 6);
  EXPECT_EQ(second[1].next_iter, 6);
  auto a = load_checkpoint_model((dir / "dp0.ckpt").string()), b = load_checkpoint_model((dir / "dp1.ckpt").string());
  auto pa = a->named_parameters(), pb = b->named_parameters();
  ASSERT_EQ(pa.size(), pb.size());
  for (size_t i = 0; i < pa.size(); ++i) EXPECT_TRUE(torch::equal(pa[i].value(), pb[i].value())) << pa[i].key();
  torch::manual_seed(7);
  auto init = make_model("resnet", 2, 10);
  EXPECT_FALSE(torch::equal(init->parameters()[0], a->parameters()[0])) << "training happened";
  fs::remove_all(dir);
}

// A heartbeat after every iteration (heartbeat_s below any iteration's time): whatever the machine's speed, 40
// iterations give heartbeats (at 0.05 s, a fast machine finished all 40 inside the first interval).
TEST(TorchloaderTrain, HeartbeatsReportThroughput) {
  TrainOptions o = small_options("vgg");
  o.end_iter = 40;
  o.heartbeat_s = 1e-9;
  std::vector<Heartbeat> hbs;
  train(o, nullptr, [&](const Heartbeat& hb) { hbs.push_back(hb); });
  ASSERT_FALSE(hbs.empty());
  for (size_t i = 0; i < hbs.size(); ++i) {
    EXPECT_GT(hbs[i].samples_per_second, 0);
    EXPECT_GT(hbs[i].iteration_seconds, 0);
    EXPECT_GE(hbs[i].loader_wait_seconds, 0);
    EXPECT_GT(hbs[i].wall_ns, 1e18);
    if (i > 0) {
      EXPECT_GT(hbs[i].iteration, hbs[i - 1].iteration);
    }
  }
  EXPECT_LE(hbs.back().iteration, 40);
}

// Real loaders' scaling depends on free cores (none to spare under a parallel test run): here only that profiling
// measures something; the scaling rule itself is checked on the emulated loader below, which runs on timers.
TEST(TorchloaderProfile, PositiveOnRealCompute) {
  TrainOptions o = small_options("resnet");
  o.batch = 32;
  o.cost = 64;
  for (int workers : {1, 2}) {
    o.workers = workers;
    ProfileResult p = profile(o, 8);
    std::printf("profile resnet-2 batch 32 cost 64, %d worker(s): compute %.4f s/iter; loader %.0f samples/s\n", workers,
                p.compute_seconds_per_iteration, p.loader_samples_per_second);
    EXPECT_GT(p.compute_seconds_per_iteration, 0);
    EXPECT_GT(p.loader_samples_per_second, 0);
  }
}

// The emulated loader delivers what the TPM's loader model says: 1 / (a / workers + b) samples per second.
TEST(TorchloaderEmulated, LoaderThroughputFollowsTheModel) {
  TrainOptions o = small_options("resnet");
  o.batch = 32;
  o.emulated_loader = {2e-3, 5e-4};  // 1 worker: 400 samples/s; 2: 667; 4: 1000
  for (int workers : {1, 2, 4}) {
    o.workers = workers;
    const double expect = 1.0 / (o.emulated_loader.a / workers + o.emulated_loader.b);
    const double got = profile(o, 4).loader_samples_per_second;
    // A timer can only wake late: slower than the model by at most what a batch's sleep overshoots on this machine
    // now (three times its p90, at least 15 %), which still tells a wrong a or b (2x, or 1 worker's speed for 4) from
    // a right one. Faster only by a late batch at a window's start whose workers then catch up on their schedule:
    // that overshoot against the shortest window the profile times (0.25 s), plus 1 %.
    const double batch_s = o.batch * (o.emulated_loader.a + o.emulated_loader.b * workers);  // one worker's batch
    const double overshoot = fanout::test::sleep_overshoot_s(batch_s, 5);
    // Never below 0.5 nor above 1.1: a wrong model (2x, or one worker's speed for 4) must still fail, however loaded.
    const double floor = std::max(0.5, std::min(0.85, 1.0 / (1.0 + 3 * overshoot / batch_s)));
    const double ceiling = std::min(1.1, 1.01 + 3 * overshoot / 0.25);
    EXPECT_LE(got / expect, ceiling) << workers << " worker(s): " << got << " samples/s, the model says " << expect;
    EXPECT_GE(got / expect, floor) << workers << " worker(s): " << got << " samples/s, the model says " << expect;
  }
}

// The emulated device: an iteration takes launch + 6 x MACs x batch / tflops (the median within 5 %, never less), spent on a timer (the
// training thread's CPU time stays a small part of the wall time); pause and resume work as on a real device.
TEST(TorchloaderEmulated, DeviceIterationsFollowTheModelWithoutCpu) {
  TrainOptions o = small_options("resnet");
  o.batch = 64;
  o.emulated_loader = {1e-6, 0};  // the loader is never the bottleneck
  o.device.kind = "emulated";
  auto model = make_model(o.arch, o.depth, o.classes);
  const double macs = flops_per_sample(model);
  o.device.launch_us = 10000;                                   // 10 ms
  o.device.tflops = 6.0 * macs * double(o.batch) / (0.04 * 1e12);  // + 40 ms of compute
  const double per_iteration = emulated_iteration_seconds(o.device, macs, o.batch);
  EXPECT_NEAR(per_iteration, 0.05, 1e-9);
  o.end_iter = 20;
  o.heartbeat_s = 1e-9;  // a heartbeat after every iteration: its wall time
  std::vector<double> iteration_s;
  timespec c0{}, c1{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c0);
  TrainResult r = train(o, nullptr, [&](const Heartbeat& hb) { iteration_s.push_back(hb.iteration_seconds); });
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c1);
  const double cpu = double(c1.tv_sec - c0.tv_sec) + double(c1.tv_nsec - c0.tv_nsec) * 1e-9;
  ASSERT_EQ(r.iterations_done, 20);
  ASSERT_EQ(iteration_s.size(), 20u);
  // The median iteration: within 5 % of the model, and never faster (a timer does not wake early). The median,
  // not the mean: on a loaded machine a few iterations wake late (CI saw the mean 5.6 % over under ctest -j2).
  std::sort(iteration_s.begin(), iteration_s.end());
  const double median_s = iteration_s[iteration_s.size() / 2];
  // Late by at most 5 %, or by what a sleep of one iteration overshoots on this machine now (p90, twice).
  const double late = std::min(0.5, std::max(0.05, 2 * fanout::test::sleep_overshoot_s(per_iteration, 5) / per_iteration));
  EXPECT_GE(median_s / per_iteration, 0.99) << median_s << " s per iteration";
  EXPECT_LE(median_s / per_iteration, 1 + late) << median_s << " s per iteration";
  // The mean also holds the iterations that woke late: 25 %, or three times the lateness measured now (at most 75 %:
  // a device modelled 2x too slow still fails).
  EXPECT_LE(r.seconds / 20 / per_iteration, 1 + std::min(0.75, std::max(0.25, 3 * late))) << r.seconds / 20 << " s per iteration on average";
  EXPECT_LT(cpu, 0.25 * r.seconds) << "the training thread used " << cpu << " s of CPU in " << r.seconds << " s";
  // Pause after 5 iterations, resume to the end: the checkpoint carries the iteration, as with a real device.
  const fs::path dir = fs::temp_directory_path() / ("torchloader_emulated_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  o.checkpoint = (dir / "emulated.pt").string();
  int asked = 0;
  TrainResult first = train(o, [&] { return ++asked == 5; }, nullptr);
  EXPECT_TRUE(first.paused);
  EXPECT_EQ(first.next_iter, 5);
  o.resume = true;
  TrainResult rest = train(o, nullptr, nullptr);
  EXPECT_FALSE(rest.paused);
  EXPECT_EQ(rest.iterations_done, 15);
  fs::remove_all(dir);
}

// Shared emulated devices (shared_device.h) time-slice in the fluid approximation: two steps of 0.1 s on one
// device, the second starting 0.05 s later, end at 0.15 s and 0.2 s; a step on another device is not slowed;
// the counters are back to 0 afterwards. A timer never wakes early, but the sharing is read once per 2 ms slice
// and each step starts when its thread wakes: the expected ends are computed from the wake times each thread
// measured (first_end = 0.2 - w2 + 2 w1, second_end = 0.2 + w1), the upper bounds stretched by how late a 2 ms
// sleep wakes on this machine now.
TEST(TorchloaderEmulated, SharedDevicesTimeSliceAsAFluid) {
  const fs::path file = fs::temp_directory_path() / ("torchloader_devices_" + std::to_string(::getpid()));
  fs::remove(file);
  const double stretch = 1.0 + fanout::test::sleep_overshoot_s(0.002) / 0.002;  // slices run late by this factor
  using SteadyClock = std::chrono::steady_clock;
  auto ns = [](SteadyClock::time_point t) { return int64_t(std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count()); };
  const auto t0 = SteadyClock::now();
  struct Ends {
    double woke, end;
  };
  auto step_at = [&](std::vector<int> ids, double start_s) {
    return std::async(std::launch::async, [&, ids, start_s] {
      SharedDevices device(file.string(), ids);
      const auto start = t0 + std::chrono::duration_cast<SteadyClock::duration>(std::chrono::duration<double>(start_s));
      std::this_thread::sleep_until(start);
      const auto now = SteadyClock::now();
      const double woke = std::chrono::duration<double>(now - t0).count();
      device.run_step(0.1, ns(now));  // the step starts when its thread woke: the model and the test agree
      return Ends{woke, std::chrono::duration<double>(SteadyClock::now() - t0).count()};
    });
  };
  auto first_f = step_at({1}, 0.0), second_f = step_at({1}, 0.05), other_f = step_at({2}, 0.0);
  const Ends first = first_f.get(), second = second_f.get(), other = other_f.get();
  const double first_expect = 0.2 - second.woke + 2 * first.woke, second_expect = 0.2 + first.woke;
  EXPECT_GE(first.end, first_expect - 0.005) << "alone until the second woke (" << second.woke << " s), then at half speed";
  EXPECT_LE(first.end, first_expect * stretch + 0.05) << "stretch " << stretch;
  EXPECT_GE(second.end, second_expect - 0.004) << "at half speed until the first ended, then alone";
  EXPECT_LE(second.end, second_expect * stretch + 0.07) << "stretch " << stretch;
  EXPECT_GE(other.end, other.woke + 0.099) << "device 2 is its own";
  EXPECT_LE(other.end, (other.woke + 0.1) * stretch + 0.04) << "stretch " << stretch;
  SharedDevices view(file.string(), {1, 2});
  EXPECT_EQ(view.sharing(), 0);
  EXPECT_THROW_WITH(SharedDevices(file.string(), {64}), std::runtime_error, "device id 64 is outside 0..63");
  EXPECT_THROW_WITH(SharedDevices("/nonexistent/dir/devices", {0}), std::runtime_error, "/nonexistent/dir/devices");
  fs::remove(file);
}

// Issue 42: loader workers contend for their node (loader_contention.h): a batch takes 1 + c times its time alone
// when every loader core of the node is busy, linearly less with fewer, and past the cores they also time-slice.
TEST(TorchloaderEmulated, LoaderContentionGrowsWithTheWorkersLoadingOnTheNode) {
  EXPECT_DOUBLE_EQ(LoaderContention::slowdown(1, 48, 0.3), 1.0) << "alone: its time alone";
  EXPECT_DOUBLE_EQ(LoaderContention::slowdown(48, 48, 0.3), 1.3) << "a full node";
  EXPECT_DOUBLE_EQ(LoaderContention::slowdown(25, 48, 0.3), 1.0 + 0.3 * 24 / 47);
  EXPECT_DOUBLE_EQ(LoaderContention::slowdown(96, 48, 0.3), 2.6) << "twice the cores: time-sliced too";
  EXPECT_DOUBLE_EQ(LoaderContention::slowdown(3, 1, 0.0), 3.0) << "one core, three workers";
  EXPECT_DOUBLE_EQ(LoaderContention::slowdown(40, 48, 0.0), 1.0) << "no contention asked";
}

// A batch of 0.1 s with 3 other workers loading on a node of 8 cores at contention 1: 4 loading, 1 + 3 / 7 = 10/7
// of its time alone, so at least 0.1429 s (a timer never wakes early; without the others 0.1 s, not counting
// itself 1 + 2 / 7). The upper bounds allow for how late a 50 ms sleep (a slice) wakes on this machine now. The
// batch's own count is given back when it ends; the others' stays. Bad arguments are refused before the file is
// touched; a missing folder is named.
TEST(TorchloaderEmulated, ABatchIsSlowedByTheWorkersLoadingOnItsNode) {
  const fs::path file = fs::temp_directory_path() / ("torchloader_loaders_" + std::to_string(::getpid()));
  fs::remove(file);
  const double stretch = 1.0 + fanout::test::sleep_overshoot_s(0.05) / 0.05;
  NodeCounters others(file.string(), 1, "test");
  others.add(0, 3);
  LoaderContention node(file.string(), 8, 1.0);
  EXPECT_EQ(node.loading(), 3);
  auto timed = [&](double seconds) {
    const auto t0 = std::chrono::steady_clock::now();
    node.run_batch(seconds);
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  const double slowed = timed(0.1);
  EXPECT_GE(slowed, 0.1 * 10 / 7 - 0.0005) << "4 of 8 cores loading";
  EXPECT_LE(slowed, 0.1 * 10 / 7 * stretch + 0.05) << "stretch " << stretch;
  EXPECT_EQ(node.loading(), 3) << "its own count given back";
  others.add(0, -3);
  const double alone = timed(0.05);
  EXPECT_GE(alone, 0.0499) << "alone: its time alone";
  EXPECT_LE(alone, 0.05 * stretch + 0.04) << "alone: not slowed (stretch " << stretch << ")";
  const fs::path untouched = fs::temp_directory_path() / ("torchloader_loaders_bad_" + std::to_string(::getpid()));
  EXPECT_THROW_WITH(LoaderContention(untouched.string(), 0, 1.0), std::invalid_argument, "loader cores");
  EXPECT_THROW_WITH(LoaderContention(untouched.string(), 8, -0.1), std::invalid_argument, "within 0..10");
  EXPECT_THROW_WITH(LoaderContention(untouched.string(), 8, std::nan("")), std::invalid_argument, "within 0..10");
  EXPECT_FALSE(fs::exists(untouched)) << "refused before the file was made";
  EXPECT_THROW_WITH(LoaderContention("/nonexistent/dir/loaders", 4, 1.0), std::runtime_error, "/nonexistent/dir/loaders");
  fs::remove(file);
}

// ------------------------------------------------------------------------------------------------ the executable
namespace {

struct Child {
  pid_t pid = -1;
  FILE* out = nullptr;
};

Child spawn(const std::vector<std::string>& args) {
  int fds[2];
  if (pipe(fds) != 0) return {};
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_adddup2(&fa, fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_addclose(&fa, fds[0]);
  posix_spawn_file_actions_addclose(&fa, fds[1]);
  std::vector<std::string> all{TORCHLOADER_TRAIN_EXE};
  all.insert(all.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (auto& a : all) argv.push_back(a.data());
  argv.push_back(nullptr);
  Child c;
  int rc = posix_spawn(&c.pid, argv[0], &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  close(fds[1]);
  if (rc != 0) {
    close(fds[0]);
    c.pid = -1;
    return c;
  }
  c.out = fdopen(fds[0], "r");
  return c;
}

// Reads lines until one starts with prefix (returned) or EOF (""); all lines read are appended to log.
std::string read_until(Child& c, const std::string& prefix, std::string& log) {
  char buf[512];
  while (std::fgets(buf, sizeof buf, c.out)) {
    std::string line(buf);
    log += line;
    if (line.rfind(prefix, 0) == 0) return line;
  }
  return "";
}

int finish(Child& c, std::string& log) {
  char buf[512];
  while (std::fgets(buf, sizeof buf, c.out)) log += buf;
  std::fclose(c.out);
  int status = 0;
  waitpid(c.pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

int64_t iter_of(const std::string& line) {
  auto p = line.find("iter=");
  return p == std::string::npos ? -1 : std::stoll(line.substr(p + 5));
}

}  // namespace

TEST(TorchloaderExecutable, SigusrPausesAndResumeFinishes) {
  fs::path dir = scratch_dir();
  const std::string ckpt = (dir / "exe.ckpt").string();
  std::vector<std::string> common{"--arch", "resnet", "--depth", "1", "--batch", "8", "--cost", "1", "--threads", "1",
                                  "--seed", "3", "--checkpoint", ckpt, "--heartbeat", "0.05"};
  std::vector<std::string> first = common;
  first.insert(first.end(), {"--workers", "1", "--end_iter", "1000000"});
  Child c = spawn(first);
  ASSERT_GT(c.pid, 0);
  std::string log;
  std::string hb = read_until(c, "HEARTBEAT iter=", log);
  ASSERT_FALSE(hb.empty()) << log;
  EXPECT_NE(hb.find("samples_per_s="), std::string::npos);
  EXPECT_NE(hb.find("loader_wait_s="), std::string::npos);
  ASSERT_EQ(kill(c.pid, SIGUSR1), 0);
  std::string paused = read_until(c, "PAUSED iter=", log);
  int status = finish(c, log);
  ASSERT_FALSE(paused.empty()) << log;
  EXPECT_EQ(status, 75) << log;
  const int64_t next = iter_of(paused);
  EXPECT_GE(next, iter_of(hb));
  EXPECT_EQ(read_checkpoint_info(ckpt).next_iter, next);

  std::vector<std::string> second = common;
  second.insert(second.end(), {"--workers", "2", "--resume", "--end_iter", std::to_string(next + 5)});
  Child r = spawn(second);
  ASSERT_GT(r.pid, 0);
  std::string log2;
  std::string fin = read_until(r, "FINISHED iter=", log2);
  status = finish(r, log2);
  EXPECT_EQ(status, 0) << log2;
  EXPECT_EQ(iter_of(fin), next + 5) << log2;
  EXPECT_NE(fin.find("seconds="), std::string::npos);
  fs::remove_all(dir);
}

// SIGRTMIN+1 queued with a worker count resizes the loader in place: later heartbeats report the new count, the
// process neither pauses nor restarts, and SIGUSR1 still pauses it.
TEST(TorchloaderExecutable, QueuedSignalResizesTheLoaderInPlace) {
  fs::path dir = scratch_dir();
  Child c = spawn({"--arch", "resnet", "--depth", "1", "--batch", "8", "--cost", "1", "--threads", "1", "--seed", "3",
                   "--checkpoint", (dir / "resize.ckpt").string(), "--heartbeat", "0.05", "--workers", "1", "--end_iter", "1000000"});
  ASSERT_GT(c.pid, 0);
  std::string log;
  std::string hb = read_until(c, "HEARTBEAT iter=", log);
  ASSERT_NE(hb.find("workers=1"), std::string::npos) << log;
  union sigval v {};
  v.sival_int = 3;
  ASSERT_EQ(sigqueue(c.pid, SIGRTMIN + 1, v), 0);
  std::string resized;
  while (resized.empty()) {
    std::string line = read_until(c, "HEARTBEAT iter=", log);
    ASSERT_FALSE(line.empty()) << "the trainer ended: " << log;
    if (line.find("workers=3") != std::string::npos) resized = line;
  }
  EXPECT_GT(iter_of(resized), iter_of(hb)) << "it kept training";
  ASSERT_EQ(kill(c.pid, SIGUSR1), 0);
  EXPECT_FALSE(read_until(c, "PAUSED iter=", log).empty()) << log;
  EXPECT_EQ(finish(c, log), 75) << log;
  fs::remove_all(dir);
}

TEST(TorchloaderExecutable, ProfileAndBadFlags) {
  Child c = spawn({"--arch", "vgg", "--depth", "2", "--batch", "8", "--profile", "2"});
  ASSERT_GT(c.pid, 0);
  std::string log;
  std::string line = read_until(c, "PROFILE ", log);
  EXPECT_EQ(finish(c, log), 0) << log;
  for (const char* key : {"compute_s=", "loader_samples_per_s=", "flops=", "params="})
    EXPECT_NE(line.find(key), std::string::npos) << line;

  // Bad flags exit 2 and name the flag (on stderr, which the child inherits; only the status is checked here,
  // the message through a shell redirect).
  auto status_of = [](const std::string& args) {
    std::string cmd = std::string(TORCHLOADER_TRAIN_EXE) + " " + args + " 2>&1";
    FILE* p = popen(cmd.c_str(), "r");
    std::string out;
    char buf[512];
    while (std::fgets(buf, sizeof buf, p)) out += buf;
    int st = pclose(p);
    return std::make_pair(WIFEXITED(st) ? WEXITSTATUS(st) : -1, out);
  };
  auto [s1, o1] = status_of("--arch alexnet --end_iter 3");
  EXPECT_EQ(s1, 2);
  EXPECT_NE(o1.find("--arch"), std::string::npos) << o1;
  auto [s2, o2] = status_of("--workers 0 --end_iter 3");
  EXPECT_EQ(s2, 2);
  EXPECT_NE(o2.find("--workers"), std::string::npos) << o2;
  auto [s3, o3] = status_of("--bogus 1 --end_iter 3");
  EXPECT_EQ(s3, 2);
  EXPECT_NE(o3.find("--bogus"), std::string::npos) << o3;
  auto [s4, o4] = status_of("--arch resnet");
  EXPECT_EQ(s4, 2);
  EXPECT_NE(o4.find("--end_iter"), std::string::npos) << o4;
}
