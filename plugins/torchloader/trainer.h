// torchloader (A-Dloader) training application: small CPU-friendly image models on libtorch, a synthetic image
// dataset whose per-sample loading cost is real CPU work, a multi-threaded in-order data loader, and a training loop
// that can pause (checkpoint at the current iteration) and resume with a different number of loader workers.
#pragma once

#include <torch/torch.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <list>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "loader_contention.h"

namespace torchloader {

// ---------------------------------------------------------------------------------------------------------------
// Models (input: N x 3 x 32 x 32 float; output: N x classes logits).
// ---------------------------------------------------------------------------------------------------------------

// Every model make_model builds derives from ImageModel, so that forward() is callable through the base pointer.
struct ImageModel : torch::nn::Module {
  virtual torch::Tensor forward(torch::Tensor x) = 0;
};

// arch: "resnet" (depth basic residual blocks), "vgg" (depth conv3x3+BN+ReLU layers, 2x2 max-pool after every 2),
// "googlenet" (depth inception blocks: 1x1 / 1x1-3x3 / 1x1-3x3-3x3 / pool-1x1 branches). depth >= 1, classes >= 2.
// Throws std::invalid_argument on a bad arch/depth/classes. Weights come from torch's default generator
// (call torch::manual_seed first for a reproducible model).
std::shared_ptr<torch::nn::Module> make_model(const std::string& arch, int depth, int classes);

// Runs a model built by make_model (throws std::invalid_argument for any other module).
torch::Tensor forward(const std::shared_ptr<torch::nn::Module>& model, const torch::Tensor& x);

// Approximate multiply-adds of one forward pass of one 3x32x32 sample, counted over the convolutions and linear
// layers actually executed (one traced forward in eval mode; the model's train/eval mode is restored).
double flops_per_sample(const std::shared_ptr<torch::nn::Module>& model);

// Number of trainable parameter elements.
int64_t parameter_count(const std::shared_ptr<torch::nn::Module>& model);

bool is_known_arch(const std::string& arch);

// ---------------------------------------------------------------------------------------------------------------
// Synthetic dataset.
// ---------------------------------------------------------------------------------------------------------------

// Sample number g (a "global" index that keeps counting across epochs) shows image i = g % size: raw 40x40x3 uint8
// "decoded" bytes generated from an RNG seeded by (seed, i), with label i % classes (the class sets a colour and a
// stripe pattern, so a model can learn it). Augmentation draws from an RNG seeded by (seed, g): a random 32x32
// crop, a horizontal flip, then `cost` passes of a 3x3 Gaussian blur (kBlurPassesPerCost passes per cost unit),
// then normalisation to float CHW. Loading is a pure function of (seed, g): no shared state, thread-safe.
// With kBlurPassesPerCost = 1, `cost` is the number of blur passes (raise the constant to make a cost unit heavier).
class SyntheticImageDataset {
 public:
  static constexpr int kRaw = 40;
  static constexpr int kCrop = 32;
  static constexpr int kChannels = 3;
  static constexpr int kBlurPassesPerCost = 1;

  SyntheticImageDataset(int64_t size, int classes, int cost, uint64_t seed);

  int64_t size() const { return size_; }
  int classes() const { return classes_; }
  int64_t label(int64_t global_index) const { return (global_index % size_) % classes_; }

  // Fills raw (kRaw*kRaw*kChannels bytes, HWC) with image `global_index % size`.
  void decode(int64_t global_index, uint8_t* raw) const;
  // Decodes and augments sample `global_index` into out (kChannels*kCrop*kCrop floats, CHW); returns its label.
  int64_t load(int64_t global_index, float* out) const;
  // The samples of iteration k: global indices k*batch .. (k+1)*batch-1. data: batch x 3 x 32 x 32, labels: int64.
  std::pair<torch::Tensor, torch::Tensor> make_batch(int64_t iteration, int64_t batch) const;

 private:
  int64_t size_;
  int classes_;
  int cost_;
  uint64_t seed_;
};

struct Batch {
  int64_t iteration = 0;
  torch::Tensor data;
  torch::Tensor labels;
  std::chrono::steady_clock::time_point ready_at;  // when its worker finished it (not when it was taken)
};

// An emulated loader (a simulation, for nodes of a shape this machine does not have): each worker delivers a batch
// after the time its real counterpart takes by the TPM's loader model (seconds per sample = a / workers + b over
// all workers, so one worker's batch takes batch x (a + b x workers)), waiting on a timer instead of loading; the
// batch is zeros. a = b = 0: the real loader. noise > 0: each batch's time times a lognormal factor of mean 1 and
// that coefficient of variation, drawn by (seed, iteration): loaders that do not keep the model's pace exactly.
// contention > 0: each batch is also slowed by the workers loading on the node (loader_contention.h), counted in
// contention_file across the node's processes, of contention_cores loader cores.
struct EmulatedLoader {
  double a = 0, b = 0;
  double noise = 0;
  uint64_t seed = 0;
  double contention = 0;
  std::string contention_file = {};
  int contention_cores = 0;
  bool on() const { return a > 0 || b > 0; }
  double batch_seconds(int64_t batch, int workers) const { return double(batch) * (a + b * workers); }
  double noise_factor(int64_t iteration) const;  // 1 without noise
};

// `workers` threads build the batches of iterations [start_iter, end_iter) and hand them out strictly in iteration
// order. At most 2 * workers batches are claimed but not yet taken (PyTorch's prefetch_factor = 2; right after a
// shrink, until the retiring threads deliver what they hold, a few more). The batch of iteration k does not depend
// on the worker count, which resize() changes while batches are being taken.
class DataLoader {
 public:
  // shard_rank of shard_world: iteration k loads the samples of virtual iteration k * shard_world + shard_rank, so
  // data-parallel processes see disjoint parts of the data.
  DataLoader(const SyntheticImageDataset& dataset, int64_t batch, int workers, int64_t start_iter, int64_t end_iter,
             int shard_rank = 0, int shard_world = 1, EmulatedLoader emulated = {});
  ~DataLoader();
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  // The next batch in order, waiting for it if needed; std::nullopt after end_iter. Rethrows a worker's exception.
  std::optional<Batch> next();
  int workers() const;  // the count asked for (constructor or last resize)
  int running() const;  // threads not yet stopped: retiring ones finish the batch they hold first
  // Live resizing (fanout's alternative to the seed's pause and restart): new threads start claiming at once;
  // surplus ones finish the batch they hold and stop. Batches already claimed keep their order. workers >= 1.
  void resize(int workers);

 private:
  struct Worker {
    std::thread thread;
    bool retire = false, ended = false;  // guarded by mu_
  };
  void run(Worker* self);
  void start_worker();  // mu_ held
  int asked() const;     // mu_ held: the workers not retiring

  const SyntheticImageDataset& dataset_;
  const int64_t batch_;
  const int64_t end_iter_;
  const int shard_rank_, shard_world_;
  const EmulatedLoader emulated_;
  std::pair<torch::Tensor, torch::Tensor> zeros_;  // the emulated loader's batch, shared
  mutable std::mutex mu_;
  std::condition_variable work_cv_;
  std::condition_variable ready_cv_;
  std::unique_ptr<LoaderContention> contention_;  // emulated loaders slowed by the node's other workers
  double emulated_batch_s_ = 0;   // one worker's time per batch when emulated (depends on the count)
  int64_t capacity_ = 0;          // 2 x the count asked for
  int64_t next_claim_;
  int64_t next_take_;
  std::map<int64_t, Batch> ready_;
  bool stop_ = false;
  std::exception_ptr error_;
  std::list<Worker> workers_;  // stable addresses: each thread holds its own entry
};

// ---------------------------------------------------------------------------------------------------------------
// Training.
// ---------------------------------------------------------------------------------------------------------------

// Where forward and backward run. auto: CUDA when libtorch has it, else CPU; cuda: refused when it has not;
// emulated: a simulated accelerator whose iteration takes launch + 6 x multiply-adds x batch / (tflops x 10^12)
// seconds (forward 2 FLOP per multiply-add, backward twice the forward) on a timer, using no CPU core; the
// gradients it "computes" are zeros (weight decay still moves the parameters), so the exchange between replicas,
// the optimizer step, checkpoints and heartbeats are real. No loss is computed (last_loss: log(classes)).
struct DeviceOptions {
  std::string kind = "auto";  // auto, cpu, cuda, emulated
  double tflops = 10;         // emulated: sustained 10^12 FLOP/s
  double launch_us = 200;     // emulated: fixed cost of an iteration (kernel launches, synchronisation)
  // emulated: the node's shared-device file and this process's device ids in it (shared_device.h); empty: a
  // device of its own.
  std::string share_file;
  std::vector<int> ids;
};
// The emulated device's seconds for one iteration of `batch` samples of a model of `macs_per_sample` multiply-adds.
double emulated_iteration_seconds(const DeviceOptions& d, double macs_per_sample, int64_t batch);

struct TrainOptions {
  std::string arch;
  DeviceOptions device;
  EmulatedLoader emulated_loader;
  int depth = 1, batch = 32, workers = 1, classes = 10;
  int64_t start_iter = 0, end_iter = 0;
  int cost = 4;
  int threads = 1;  // torch intra-op threads (torch::set_num_threads)
  uint64_t seed = 0;
  std::string checkpoint;  // written on pause and on finish (when non-empty); read on resume
  bool resume = false;
  double heartbeat_s = 0.5;  // <= 0: no heartbeats
  int64_t dataset_size = 50000;
  // Data parallelism (an application spanning node_size nodes): this process is dp_rank of dp_world; each trains
  // on its shard of every iteration's samples and the gradients are averaged (gradient_exchange.h). Process 0
  // listens on dp_address (an IP; on_listening gets the port), the others connect to dp_address (ip:port).
  int dp_rank = 0, dp_world = 1;
  std::string dp_address;
  std::string dp_token;  // the job's channel token, presented to process 0 (from FANOUT_TORCHLOADER_TOKEN)
  std::function<void(int port)> on_listening;
  // Polled after every iteration: a worker count > 0 resizes the loader in place (DataLoader::resize); 0 keeps it.
  std::function<int()> loader_workers_wanted;
};

struct TrainResult {
  int64_t iterations_done = 0;  // iterations run by this call
  bool paused = false;
  double seconds = 0;  // wall time of the training loop (monotonic clock)
  double last_loss = 0;
  int64_t next_iter = 0;  // absolute iteration the next run starts at (the checkpoint's)
};

struct Heartbeat {
  int64_t iteration;            // absolute number of iterations completed (= the next iteration to run)
  double samples_per_second;    // over the interval since the previous heartbeat (monotonic clock)
  double iteration_seconds;     // mean wall time per iteration in that interval (loader wait included)
  double loader_wait_seconds;   // total time the training loop waited for the loader in that interval
  int workers;                  // the loader's worker count at the heartbeat (as last asked: DataLoader::workers)
  double wall_ns;               // system_clock time of the heartbeat, ns since the epoch
};

// Trains opts.arch with SGD (lr 0.01, momentum 0.9, weight decay 5e-4) and cross-entropy over iterations
// [start_iter, end_iter) (resume: [checkpoint's next iteration, end_iter)). should_pause is polled after every
// iteration; once it returns true (and iterations remain) the checkpoint is saved and paused=true returned.
// Resume requires the checkpoint's arch/depth/classes/batch to match opts and adopts its seed.
// Throws std::invalid_argument for bad options, std::runtime_error for checkpoint problems.
TrainResult train(const TrainOptions& opts, const std::function<bool()>& should_pause,
                  const std::function<void(const Heartbeat&)>& on_heartbeat);

struct CheckpointInfo {
  std::string arch;
  int depth = 0, classes = 0, batch = 0;
  int64_t next_iter = 0;
  uint64_t seed = 0;
};
CheckpointInfo read_checkpoint_info(const std::string& path);
// The model stored in a checkpoint (parameters and buffers), on the CPU.
std::shared_ptr<torch::nn::Module> load_checkpoint_model(const std::string& path);

struct ProfileResult {
  double compute_seconds_per_iteration;  // forward+backward+step on a pre-loaded batch (no loader)
  double loader_samples_per_second;      // opts.workers loader threads alone (no training)
};
// Both measured after one warmup iteration: compute over `iterations` iterations (>= 1), the loader over at least
// `iterations` batches (rounded up to a multiple of workers) and at least 0.25 s of its workers' production, the
// best of 3 such windows in a row. With dp_world > 1 the compute
// iterations average their gradients with the other replicas (as training does) and the loader is not measured (0).
ProfileResult profile(const TrainOptions& opts, int iterations);

}  // namespace torchloader
