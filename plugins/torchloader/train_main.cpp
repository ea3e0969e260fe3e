// fanout-torchloader-train: one torchloader (A-Dloader) training application. SIGUSR1 pauses it: it finishes the
// current iteration, checkpoints, prints "PAUSED iter=<next>" and exits 75 (EX_TEMPFAIL); --resume continues from
// the checkpoint, possibly with another --workers. SIGRTMIN+1 sent with sigqueue() and an int value resizes the
// loader to that many workers in place, after the current iteration (fanout's live resizing; no pause).
#include <CLI/CLI.hpp>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <limits>
#include <string>

#include "gradient_exchange.h"
#include "trainer.h"

namespace {

volatile std::sig_atomic_t g_pause = 0;

extern "C" void on_sigusr1(int) { g_pause = 1; }

// A lock-free atomic is async-signal-safe; the training loop exchanges it for 0, so a count is taken once.
std::atomic<int> g_resize{0};
static_assert(std::atomic<int>::is_always_lock_free);

extern "C" void on_resize(int, siginfo_t* info, void*) {
  if (info->si_code == SI_QUEUE && info->si_value.sival_int > 0) g_resize.store(info->si_value.sival_int);
}

constexpr int kExitPaused = 75;
constexpr int kExitUsage = 2;
constexpr int kIntMax = std::numeric_limits<int>::max();
constexpr int64_t kI64Max = std::numeric_limits<int64_t>::max();

}  // namespace

int main(int argc, char** argv) {
  struct sigaction sa {};
  sa.sa_handler = on_sigusr1;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = SA_RESTART;
  sigaction(SIGUSR1, &sa, nullptr);
  struct sigaction rs {};
  rs.sa_sigaction = on_resize;
  sigemptyset(&rs.sa_mask);
  rs.sa_flags = SA_RESTART | SA_SIGINFO;
  sigaction(SIGRTMIN + 1, &rs, nullptr);
  std::setvbuf(stdout, nullptr, _IOLBF, 0);

  torchloader::TrainOptions o;
  o.arch = "resnet";
  o.depth = 2;
  o.end_iter = -1;
  o.checkpoint = "torchloader.ckpt";
  int profile_iters = 0;

  CLI::App app{"torchloader training application (synthetic 32x32 images, SGD; SIGUSR1 pauses; SIGRTMIN+1 with a value resizes the loader)"};
  app.add_option("--arch", o.arch, "model: resnet, vgg, googlenet")
      ->check(CLI::IsMember({"resnet", "vgg", "googlenet"}))
      ->capture_default_str();
  app.add_option("--depth", o.depth, "blocks (resnet, googlenet) or conv layers (vgg)")
      ->check(CLI::Range(1, kIntMax))
      ->capture_default_str();
  app.add_option("--batch", o.batch, "samples per iteration")->check(CLI::Range(1, kIntMax))->capture_default_str();
  app.add_option("--workers", o.workers, "data-loading worker threads")->check(CLI::Range(1, kIntMax))->capture_default_str();
  app.add_option("--start_iter", o.start_iter, "first iteration (ignored with --resume)")
      ->check(CLI::Range(int64_t{0}, kI64Max))
      ->capture_default_str();
  auto* end_opt = app.add_option("--end_iter", o.end_iter, "iteration to stop at (exclusive)")->check(CLI::Range(int64_t{0}, kI64Max));
  app.add_option("--cost", o.cost, "3x3 blur passes per sample: the loader's CPU cost")
      ->check(CLI::Range(0, kIntMax))
      ->capture_default_str();
  app.add_option("--threads", o.threads, "torch intra-op threads")->check(CLI::Range(1, kIntMax))->capture_default_str();
  app.add_option("--seed", o.seed, "model and data seed")->capture_default_str();
  app.add_option("--checkpoint", o.checkpoint, "checkpoint file (written on pause and finish)")->capture_default_str();
  app.add_flag("--resume", o.resume, "continue from --checkpoint");
  app.add_option("--heartbeat", o.heartbeat_s, "seconds between HEARTBEAT lines (0: none)")
      ->check(CLI::Range(0.0, 86400.0))
      ->capture_default_str();
  app.add_option("--dp_rank", o.dp_rank, "data parallel: this process's rank")->check(CLI::Range(0, kIntMax))->capture_default_str();
  app.add_option("--dp_world", o.dp_world, "data parallel: processes of the application")->check(CLI::Range(1, kIntMax))->capture_default_str();
  app.add_option("--dp_address", o.dp_address, "data parallel: rank 0 listens on this IP (prints LISTENING port=N); others connect to ip:port");
  app.add_option("--device", o.device.kind, "where forward/backward run: auto (CUDA if any, else CPU), cpu, cuda, emulated (a simulated accelerator: time on a timer)")
      ->check(CLI::IsMember({"auto", "cpu", "cuda", "emulated"}))
      ->capture_default_str();
  app.add_option("--device_tflops", o.device.tflops, "emulated device: sustained 10^12 FLOP/s")->check(CLI::PositiveNumber)->capture_default_str();
  app.add_option("--device_launch_us", o.device.launch_us, "emulated device: fixed microseconds per iteration")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  app.add_option("--device_share", o.device.share_file, "emulated device: the node's shared-device file (time-sliced with the processes using the same --device_ids)");
  app.add_option("--device_ids", o.device.ids, "emulated device: the device indexes this process uses (the workload's cuda_device on its node)")
      ->delimiter(',')
      ->check(CLI::Range(0, 63));
  app.add_option("--loader_a", o.emulated_loader.a, "emulated loader (with --loader_b; 0 and 0: real): seconds per sample = a / workers + b")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--loader_b", o.emulated_loader.b, "emulated loader: see --loader_a")->check(CLI::NonNegativeNumber);
  app.add_option("--loader_noise", o.emulated_loader.noise, "emulated loader: coefficient of variation of each batch's time (lognormal, mean 1)")
      ->check(CLI::Range(0.0, 2.0));
  app.add_option("--loader_contention", o.emulated_loader.contention,
                 "emulated loader: how much slower a worker loads when every loader core of its node is busy (1 + this, linear in between)")
      ->check(CLI::Range(0.0, 10.0));
  app.add_option("--loader_share", o.emulated_loader.contention_file, "emulated loader: the node's file counting the workers loading now (with --loader_contention)");
  app.add_option("--loader_cores", o.emulated_loader.contention_cores, "emulated loader: the node's loader cores (with --loader_contention)")
      ->check(CLI::Range(1, kIntMax));
  app.add_option("--profile", profile_iters, "measure compute and loader throughput over N iterations, then exit")
      ->check(CLI::Range(1, kIntMax));

  try {
    app.parse(argc, argv);
    if (profile_iters == 0 && end_opt->count() == 0) throw CLI::RequiredError("--end_iter");
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::fprintf(stderr, "fanout-torchloader-train: %s\n", e.what());
    return kExitUsage;
  }

  try {
    if (const char* token = std::getenv(torchloader::kTokenVariable)) o.dp_token = token;
    if (o.dp_world > 1 && o.dp_token.empty()) {
      std::fprintf(stderr, "fanout-torchloader-train: --dp_world %d needs the job's token in %s\n", o.dp_world, torchloader::kTokenVariable);
      return kExitUsage;
    }
    o.on_listening = [](int port) {  // data parallel, process 0: where the others connect
      std::printf("LISTENING port=%d\n", port);
      std::fflush(stdout);
    };
    if (profile_iters > 0) {
      torchloader::ProfileResult p = torchloader::profile(o, profile_iters);
      auto model = torchloader::make_model(o.arch, o.depth, o.classes);
      std::printf("PROFILE compute_s=%.6f loader_samples_per_s=%.1f flops=%.0f params=%lld\n",
                  p.compute_seconds_per_iteration, p.loader_samples_per_second, torchloader::flops_per_sample(model),
                  static_cast<long long>(torchloader::parameter_count(model)));
      std::fflush(stdout);
      return 0;
    }
    o.loader_workers_wanted = [] { return g_resize.exchange(0); };
    torchloader::TrainResult r = torchloader::train(
        o, [] { return g_pause != 0; },
        [](const torchloader::Heartbeat& hb) {
          std::printf("HEARTBEAT iter=%lld samples_per_s=%.1f iter_s=%.6f loader_wait_s=%.6f workers=%d\n",
                      static_cast<long long>(hb.iteration), hb.samples_per_second, hb.iteration_seconds,
                      hb.loader_wait_seconds, hb.workers);
          std::fflush(stdout);
        });
    if (r.paused) {
      std::printf("PAUSED iter=%lld\n", static_cast<long long>(r.next_iter));
      std::fflush(stdout);
      return kExitPaused;
    }
    std::printf("FINISHED iter=%lld seconds=%.3f\n", static_cast<long long>(r.next_iter), r.seconds);
    std::fflush(stdout);
    return 0;
  } catch (const std::invalid_argument& e) {
    std::fprintf(stderr, "fanout-torchloader-train: %s\n", e.what());
    return kExitUsage;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "fanout-torchloader-train: %s\n", e.what());
    return 1;
  }
}
