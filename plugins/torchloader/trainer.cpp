#include "trainer.h"

#include "shared_device.h"

#include "fanout_files.hpp"
#include "gradient_exchange.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <limits>
#include <random>
#include <stdexcept>
#include <thread>

namespace torchloader {
namespace {

namespace nn = torch::nn;

// ------------------------------------------------------------------------------------------------ flop counting
// flops_per_sample traces one forward with this counter set; every conv/linear goes through run_conv/run_linear.
thread_local double* g_macs = nullptr;

torch::Tensor run_conv(nn::Conv2d& conv, const torch::Tensor& x) {
  torch::Tensor y = conv->forward(x);
  if (g_macs) {
    const auto& o = conv->options;
    const auto& k = *o.kernel_size();
    *g_macs += static_cast<double>(y.numel() / y.size(0)) * static_cast<double>(o.in_channels() / o.groups()) *
               static_cast<double>(k[0] * k[1]);
  }
  return y;
}

torch::Tensor run_linear(nn::Linear& fc, const torch::Tensor& x) {
  torch::Tensor y = fc->forward(x);
  if (g_macs) *g_macs += static_cast<double>(fc->options.in_features() * fc->options.out_features());
  return y;
}

// ------------------------------------------------------------------------------------------------ building blocks
struct ConvBN : nn::Module {
  ConvBN(int64_t in, int64_t out, int64_t k, int64_t stride, bool relu) : relu_(relu) {
    conv = register_module("conv", nn::Conv2d(nn::Conv2dOptions(in, out, k).stride(stride).padding(k / 2).bias(false)));
    bn = register_module("bn", nn::BatchNorm2d(out));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    torch::Tensor y = bn->forward(run_conv(conv, x));
    return relu_ ? torch::relu(y) : y;
  }
  nn::Conv2d conv{nullptr};
  nn::BatchNorm2d bn{nullptr};
  bool relu_;
};

struct BasicBlock : nn::Module {
  BasicBlock(int64_t in, int64_t out, int64_t stride) {
    c1 = register_module("c1", std::make_shared<ConvBN>(in, out, 3, stride, true));
    c2 = register_module("c2", std::make_shared<ConvBN>(out, out, 3, 1, false));
    if (stride != 1 || in != out) shortcut = register_module("shortcut", std::make_shared<ConvBN>(in, out, 1, stride, false));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    torch::Tensor s = shortcut ? shortcut->forward(x) : x;
    return torch::relu(c2->forward(c1->forward(x)) + s);
  }
  std::shared_ptr<ConvBN> c1, c2, shortcut;
};

// Classifier head shared by all three: global average pool + linear.
struct Head : nn::Module {
  Head(int64_t in, int64_t classes) { fc = register_module("fc", nn::Linear(in, classes)); }
  torch::Tensor forward(const torch::Tensor& x) {
    return run_linear(fc, torch::adaptive_avg_pool2d(x, {1, 1}).flatten(1));
  }
  nn::Linear fc{nullptr};
};

// ResNet (CIFAR style, narrow): stem 3->16 conv, `depth` basic blocks spread over three stages of width 16/32/64,
// the first block of stages 2 and 3 strided.
struct ResNet : ImageModel {
  ResNet(int depth, int classes) {
    stem = register_module("stem", std::make_shared<ConvBN>(3, 16, 3, 1, true));
    int64_t in = 16;
    int prev_stage = 0;
    for (int i = 0; i < depth; ++i) {
      int stage = i * 3 / depth;
      int64_t out = int64_t{16} << stage;
      int64_t stride = stage != prev_stage ? 2 : 1;
      // A single stage-0 stack (depth < 3 puts nothing in stage 2): still stride the first block to keep it cheap.
      if (i == 0) stride = 2;
      blocks.push_back(register_module("block" + std::to_string(i), std::make_shared<BasicBlock>(in, out, stride)));
      in = out;
      prev_stage = stage;
    }
    head = register_module("head", std::make_shared<Head>(in, classes));
  }
  torch::Tensor forward(torch::Tensor x) override {
    x = stem->forward(x);
    for (auto& b : blocks) x = b->forward(x);
    return head->forward(x);
  }
  std::shared_ptr<ConvBN> stem;
  std::vector<std::shared_ptr<BasicBlock>> blocks;
  std::shared_ptr<Head> head;
};

// VGG: `depth` conv3x3+BN+ReLU layers; width 16 doubling after every pool up to 128; 2x2 max-pool after every
// second layer while the feature map is larger than 2x2.
struct VGG : ImageModel {
  VGG(int depth, int classes) {
    int64_t in = 3, width = 16, spatial = 32;
    for (int i = 0; i < depth; ++i) {
      layers.push_back(register_module("conv" + std::to_string(i), std::make_shared<ConvBN>(in, width, 3, 1, true)));
      in = width;
      bool pool = i % 2 == 1 && spatial > 2;
      pools.push_back(pool);
      if (pool) {
        spatial /= 2;
        width = std::min<int64_t>(width * 2, 128);
      }
    }
    head = register_module("head", std::make_shared<Head>(in, classes));
  }
  torch::Tensor forward(torch::Tensor x) override {
    for (size_t i = 0; i < layers.size(); ++i) {
      x = layers[i]->forward(x);
      if (pools[i]) x = torch::max_pool2d(x, {2, 2});
    }
    return head->forward(x);
  }
  std::vector<std::shared_ptr<ConvBN>> layers;
  std::vector<bool> pools;
  std::shared_ptr<Head> head;
};

// GoogLeNet-like inception block: 1x1 | 1x1 -> 3x3 | 1x1 -> 3x3 -> 3x3 (the 5x5 as two 3x3) | 3x3 max-pool -> 1x1.
struct Inception : nn::Module {
  Inception(int64_t in, int64_t c1, int64_t r3, int64_t c3, int64_t r5, int64_t c5, int64_t cp) {
    b1 = register_module("b1", std::make_shared<ConvBN>(in, c1, 1, 1, true));
    b3a = register_module("b3a", std::make_shared<ConvBN>(in, r3, 1, 1, true));
    b3b = register_module("b3b", std::make_shared<ConvBN>(r3, c3, 3, 1, true));
    b5a = register_module("b5a", std::make_shared<ConvBN>(in, r5, 1, 1, true));
    b5b = register_module("b5b", std::make_shared<ConvBN>(r5, c5, 3, 1, true));
    b5c = register_module("b5c", std::make_shared<ConvBN>(c5, c5, 3, 1, true));
    bp = register_module("bp", std::make_shared<ConvBN>(in, cp, 1, 1, true));
  }
  torch::Tensor forward(const torch::Tensor& x) {
    return torch::cat({b1->forward(x), b3b->forward(b3a->forward(x)), b5c->forward(b5b->forward(b5a->forward(x))),
                       bp->forward(torch::max_pool2d(x, {3, 3}, {1, 1}, {1, 1}))},
                      1);
  }
  std::shared_ptr<ConvBN> b1, b3a, b3b, b5a, b5b, b5c, bp;
};

// GoogLeNet: stem 3->16 conv + 2x2 max-pool (16x16), then `depth` inception blocks (width growing by 1.5x per
// block); a 2x2 max-pool after every second block while the map is larger than 4x4.
struct GoogLeNet : ImageModel {
  GoogLeNet(int depth, int classes) {
    stem = register_module("stem", std::make_shared<ConvBN>(3, 16, 3, 1, true));
    int64_t in = 16, spatial = 16;
    double scale = 1.0;
    for (int i = 0; i < depth; ++i) {
      auto w = [&](int64_t base) { return std::max<int64_t>(4, static_cast<int64_t>(std::lround(base * scale))); };
      auto block = std::make_shared<Inception>(in, w(8), w(8), w(16), w(4), w(8), w(8));
      blocks.push_back(register_module("inception" + std::to_string(i), block));
      in = w(8) + w(16) + w(8) + w(8);
      bool pool = i % 2 == 1 && spatial > 4;
      pools.push_back(pool);
      if (pool) spatial /= 2;
      scale *= 1.5;
    }
    head = register_module("head", std::make_shared<Head>(in, classes));
  }
  torch::Tensor forward(torch::Tensor x) override {
    x = torch::max_pool2d(stem->forward(x), {2, 2});
    for (size_t i = 0; i < blocks.size(); ++i) {
      x = blocks[i]->forward(x);
      if (pools[i]) x = torch::max_pool2d(x, {2, 2});
    }
    return head->forward(x);
  }
  std::shared_ptr<ConvBN> stem;
  std::vector<std::shared_ptr<Inception>> blocks;
  std::vector<bool> pools;
  std::shared_ptr<Head> head;
};

ImageModel& as_image_model(const std::shared_ptr<nn::Module>& model) {
  auto* m = dynamic_cast<ImageModel*>(model.get());
  if (!m) throw std::invalid_argument("torchloader: not a model built by make_model");
  return *m;
}

// ------------------------------------------------------------------------------------------------ RNG
uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

// xoshiro256** seeded through splitmix64.
struct Rng {
  Rng(uint64_t seed, uint64_t stream, uint64_t index) {
    uint64_t st = seed ^ (stream * 0xd1b54a32d192ed03ULL) ^ (index * 0x9e3779b97f4a7c15ULL);
    for (auto& x : s) x = splitmix64(st);
  }
  static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t operator()() {
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
  }
  uint64_t s[4];
};

using Clock = std::chrono::steady_clock;
double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

void validate(const TrainOptions& o) {
  if (!is_known_arch(o.arch)) throw std::invalid_argument("torchloader: unknown arch '" + o.arch + "'");
  if (o.depth < 1) throw std::invalid_argument("torchloader: depth must be >= 1");
  if (o.batch < 1) throw std::invalid_argument("torchloader: batch must be >= 1");
  if (o.workers < 1) throw std::invalid_argument("torchloader: workers must be >= 1");
  if (o.classes < 2) throw std::invalid_argument("torchloader: classes must be >= 2");
  if (o.cost < 0) throw std::invalid_argument("torchloader: cost must be >= 0");
  if (o.threads < 1) throw std::invalid_argument("torchloader: threads must be >= 1");
  if (o.dataset_size < 1) throw std::invalid_argument("torchloader: dataset_size must be >= 1");
  if (o.start_iter < 0) throw std::invalid_argument("torchloader: start_iter must be >= 0");
  if (o.resume && o.checkpoint.empty()) throw std::invalid_argument("torchloader: resume needs a checkpoint path");
  if (o.device.kind != "auto" && o.device.kind != "cpu" && o.device.kind != "cuda" && o.device.kind != "emulated")
    throw std::invalid_argument("torchloader: device must be auto, cpu, cuda or emulated, not " + o.device.kind);
  if (o.device.kind == "emulated" && (!(o.device.tflops > 0) || !(o.device.launch_us >= 0)))
    throw std::invalid_argument("torchloader: the emulated device needs tflops > 0 and launch_us >= 0");
  if (!o.device.share_file.empty() && (o.device.kind != "emulated" || o.device.ids.empty()))
    throw std::invalid_argument("torchloader: a shared-device file needs the emulated device and its device ids");
  if (o.emulated_loader.a < 0 || o.emulated_loader.b < 0) throw std::invalid_argument("torchloader: the emulated loader's a and b must be >= 0");
  const EmulatedLoader& l = o.emulated_loader;
  if (!(l.contention >= 0 && l.contention <= LoaderContention::kMaxContention))
    throw std::invalid_argument("torchloader: --loader_contention must be within 0..10");
  if (l.contention > 0 && (!l.on() || l.contention_file.empty() || l.contention_cores < 1))
    throw std::invalid_argument("torchloader: --loader_contention needs the emulated loader (--loader_a, --loader_b), --loader_share (the node's file) and --loader_cores (>= 1)");
  if (l.contention == 0 && (!l.contention_file.empty() || l.contention_cores != 0))
    throw std::invalid_argument("torchloader: --loader_share and --loader_cores go with --loader_contention > 0");
}

// The torch device the model lives on: an emulated accelerator keeps it on the CPU (only time is simulated).
torch::Device pick_device(const DeviceOptions& d) {
  if (d.kind == "cuda" && !torch::cuda::is_available())
    throw std::invalid_argument("torchloader: device cuda asked, but this libtorch has no usable CUDA");
  if (d.kind == "cuda" || (d.kind == "auto" && torch::cuda::is_available())) return torch::Device(torch::kCUDA);
  return torch::Device(torch::kCPU);
}

// One emulated iteration's forward + backward + update: the device's time on a timer (no CPU core), shared with the
// node's other processes on the same devices when `shared` is given. The gradients are zeros allocated once (the
// gradient exchange still moves them); the update is the device's work, so the CPU skips it (parameters and
// optimizer state stay as they are). Gradient allocation runs inside the device time (a deadline, not a sleep
// after it), so its CPU time is not added to the device's.
void emulated_step(torch::nn::Module& model, double seconds, SharedDevices* shared) {
  const auto started = std::chrono::steady_clock::now();
  for (auto& p : model.parameters())
    if (!p.grad().defined()) p.mutable_grad() = torch::zeros_like(p);
  if (shared) {
    shared->run_step(seconds, std::chrono::duration_cast<std::chrono::nanoseconds>(started.time_since_epoch()).count());
  } else {
    std::this_thread::sleep_until(started + std::chrono::duration_cast<std::chrono::steady_clock::duration>(std::chrono::duration<double>(seconds)));
  }
}

const double kLearningRate = 0.01, kMomentum = 0.9, kWeightDecay = 5e-4;

void save_checkpoint(const std::string& path, const TrainOptions& o, uint64_t seed, int64_t next_iter,
                     nn::Module& model, torch::optim::Optimizer& optimizer) {
  torch::serialize::OutputArchive ar;
  ar.write("arch", c10::IValue(o.arch));
  ar.write("depth", c10::IValue(static_cast<int64_t>(o.depth)));
  ar.write("classes", c10::IValue(static_cast<int64_t>(o.classes)));
  ar.write("batch", c10::IValue(static_cast<int64_t>(o.batch)));
  ar.write("next_iter", c10::IValue(next_iter));
  ar.write("seed", c10::IValue(static_cast<int64_t>(seed)));  // bit pattern of the uint64
  torch::serialize::OutputArchive model_ar, optim_ar;
  model.save(model_ar);
  optimizer.save(optim_ar);
  ar.write("model", model_ar);
  ar.write("optimizer", optim_ar);
  std::error_code ec;
  const std::filesystem::path parent = std::filesystem::path(path).parent_path();
  if (!parent.empty()) std::filesystem::create_directories(parent, ec);  // a failure shows up in save_to
  // A temporary name per process and thread: a fixed "<path>.tmp" was shared by every trainer saving there.
  fanout_sdk::replace_file_atomic(path, [&](const std::string& tmp) { ar.save_to(tmp); });
}

CheckpointInfo read_info(torch::serialize::InputArchive& ar) {
  CheckpointInfo info;
  c10::IValue v;
  ar.read("arch", v);
  info.arch = v.toStringRef();
  ar.read("depth", v);
  info.depth = static_cast<int>(v.toInt());
  ar.read("classes", v);
  info.classes = static_cast<int>(v.toInt());
  ar.read("batch", v);
  info.batch = static_cast<int>(v.toInt());
  ar.read("next_iter", v);
  info.next_iter = v.toInt();
  ar.read("seed", v);
  info.seed = static_cast<uint64_t>(v.toInt());
  return info;
}

torch::serialize::InputArchive open_checkpoint(const std::string& path, torch::Device device) {
  if (!std::filesystem::exists(path)) throw std::runtime_error("torchloader: no checkpoint at " + path);
  torch::serialize::InputArchive ar;
  try {
    ar.load_from(path, device);
  } catch (const c10::Error& e) {
    throw std::runtime_error("torchloader: cannot read checkpoint " + path + ": " + e.what_without_backtrace());
  }
  return ar;
}

}  // namespace

// ================================================================================================ models
bool is_known_arch(const std::string& arch) { return arch == "resnet" || arch == "vgg" || arch == "googlenet"; }

std::shared_ptr<torch::nn::Module> make_model(const std::string& arch, int depth, int classes) {
  if (depth < 1) throw std::invalid_argument("torchloader: depth must be >= 1");
  if (classes < 2) throw std::invalid_argument("torchloader: classes must be >= 2");
  if (arch == "resnet") return std::make_shared<ResNet>(depth, classes);
  if (arch == "vgg") return std::make_shared<VGG>(depth, classes);
  if (arch == "googlenet") return std::make_shared<GoogLeNet>(depth, classes);
  throw std::invalid_argument("torchloader: unknown arch '" + arch + "' (resnet, vgg, googlenet)");
}

torch::Tensor forward(const std::shared_ptr<torch::nn::Module>& model, const torch::Tensor& x) {
  return as_image_model(model).forward(x);
}

double emulated_iteration_seconds(const DeviceOptions& d, double macs_per_sample, int64_t batch) {
  return d.launch_us * 1e-6 + 6.0 * macs_per_sample * double(batch) / (d.tflops * 1e12);
}

double flops_per_sample(const std::shared_ptr<torch::nn::Module>& model) {
  ImageModel& m = as_image_model(model);
  bool was_training = m.is_training();
  torch::Device device = torch::kCPU;
  for (const auto& p : m.parameters()) {
    device = p.device();
    break;
  }
  double macs = 0;
  m.eval();
  {
    torch::NoGradGuard no_grad;
    g_macs = &macs;
    try {
      m.forward(torch::zeros({1, SyntheticImageDataset::kChannels, SyntheticImageDataset::kCrop,
                              SyntheticImageDataset::kCrop}, torch::TensorOptions().device(device)));
    } catch (...) {
      g_macs = nullptr;
      m.train(was_training);
      throw;
    }
    g_macs = nullptr;
  }
  m.train(was_training);
  return macs;
}

int64_t parameter_count(const std::shared_ptr<torch::nn::Module>& model) {
  int64_t n = 0;
  for (const auto& p : model->parameters()) n += p.numel();
  return n;
}

// ================================================================================================ dataset
SyntheticImageDataset::SyntheticImageDataset(int64_t size, int classes, int cost, uint64_t seed)
    : size_(size), classes_(classes), cost_(cost), seed_(seed) {
  if (size < 1 || classes < 1 || cost < 0) throw std::invalid_argument("torchloader: bad dataset parameters");
}

void SyntheticImageDataset::decode(int64_t global_index, uint8_t* raw) const {
  const int64_t image = global_index % size_;
  const int64_t lbl = image % classes_;
  Rng rng(seed_, 1, static_cast<uint64_t>(image));
  int mean[kChannels];
  for (int c = 0; c < kChannels; ++c) mean[c] = 40 + static_cast<int>((lbl * 53 + c * 97) % 160);
  const int period = 3 + static_cast<int>(lbl % 7);
  for (int y = 0; y < kRaw; ++y)
    for (int x = 0; x < kRaw; ++x) {
      uint64_t r = rng();
      int stripe = ((x + (lbl % 2 ? y : 0)) / period) % 2 ? 24 : -24;
      for (int c = 0; c < kChannels; ++c) {
        int noise = static_cast<int>((r >> (16 * c)) & 63) - 32;
        raw[(y * kRaw + x) * kChannels + c] = static_cast<uint8_t>(std::clamp(mean[c] + stripe + noise, 0, 255));
      }
    }
}

int64_t SyntheticImageDataset::load(int64_t global_index, float* out) const {
  uint8_t raw[kRaw * kRaw * kChannels];
  decode(global_index, raw);
  Rng rng(seed_, 2, static_cast<uint64_t>(global_index));
  const uint64_t r = rng();
  const int ox = static_cast<int>(r % (kRaw - kCrop + 1));
  const int oy = static_cast<int>((r >> 8) % (kRaw - kCrop + 1));
  const bool flip = (r >> 16) & 1;
  constexpr int kPlane = kCrop * kCrop;
  float a[kChannels * kPlane], b[kChannels * kPlane];
  for (int c = 0; c < kChannels; ++c)
    for (int y = 0; y < kCrop; ++y)
      for (int x = 0; x < kCrop; ++x) {
        int sx = ox + (flip ? kCrop - 1 - x : x);
        a[c * kPlane + y * kCrop + x] = raw[((oy + y) * kRaw + sx) * kChannels + c];
      }
  // 3x3 Gaussian blur ([1 2 1]^T [1 2 1] / 16), edges clamped; kBlurPassesPerCost passes per cost unit.
  float* src = a;
  float* dst = b;
  const int passes = cost_ * kBlurPassesPerCost;
  for (int p = 0; p < passes; ++p) {
    for (int c = 0; c < kChannels; ++c) {
      const float* s = src + c * kPlane;
      float* d = dst + c * kPlane;
      for (int y = 0; y < kCrop; ++y) {
        const float* up = s + std::max(y - 1, 0) * kCrop;
        const float* mid = s + y * kCrop;
        const float* dn = s + std::min(y + 1, kCrop - 1) * kCrop;
        for (int x = 0; x < kCrop; ++x) {
          int xl = std::max(x - 1, 0), xr = std::min(x + 1, kCrop - 1);
          float v = up[xl] + 2 * up[x] + up[xr] + 2 * (mid[xl] + 2 * mid[x] + mid[xr]) + dn[xl] + 2 * dn[x] + dn[xr];
          d[y * kCrop + x] = v * (1.0f / 16);
        }
      }
    }
    std::swap(src, dst);
  }
  for (int i = 0; i < kChannels * kPlane; ++i) out[i] = (src[i] * (1.0f / 255) - 0.5f) * 4.0f;
  return label(global_index);
}

std::pair<torch::Tensor, torch::Tensor> SyntheticImageDataset::make_batch(int64_t iteration, int64_t batch) const {
  torch::Tensor data = torch::empty({batch, kChannels, kCrop, kCrop}, torch::kFloat32);
  torch::Tensor labels = torch::empty({batch}, torch::kInt64);
  float* d = data.data_ptr<float>();
  int64_t* l = labels.data_ptr<int64_t>();
  for (int64_t j = 0; j < batch; ++j) l[j] = load(iteration * batch + j, d + j * kChannels * kCrop * kCrop);
  return {data, labels};
}

// ================================================================================================ loader
DataLoader::DataLoader(const SyntheticImageDataset& dataset, int64_t batch, int workers, int64_t start_iter,
                       int64_t end_iter, int shard_rank, int shard_world, EmulatedLoader emulated)
    : dataset_(dataset), batch_(batch), end_iter_(end_iter), shard_rank_(shard_rank), shard_world_(std::max(1, shard_world)),
      emulated_(emulated), next_claim_(start_iter), next_take_(start_iter) {
  if (workers < 1 || batch < 1) throw std::invalid_argument("torchloader: loader needs workers >= 1 and batch >= 1");
  if (emulated_.on() && emulated_.contention > 0)
    contention_ = std::make_unique<LoaderContention>(emulated_.contention_file, emulated_.contention_cores, emulated_.contention);
  if (emulated_.on())
    zeros_ = {torch::zeros({batch, SyntheticImageDataset::kChannels, SyntheticImageDataset::kCrop, SyntheticImageDataset::kCrop}),
              torch::zeros({batch}, torch::kLong)};
  resize(workers);
}

DataLoader::~DataLoader() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  for (auto& w : workers_)
    if (w.thread.joinable()) w.thread.join();
}

int DataLoader::asked() const {
  return int(std::count_if(workers_.begin(), workers_.end(), [](const Worker& w) { return !w.retire; }));
}

int DataLoader::workers() const {
  std::lock_guard<std::mutex> lock(mu_);
  return asked();
}

void DataLoader::start_worker() {
  workers_.emplace_back();
  Worker* w = &workers_.back();
  try {
    w->thread = std::thread([this, w] { run(w); });
  } catch (...) {  // no thread (EAGAIN): no entry either, so that nothing waits for it
    workers_.pop_back();
    throw;
  }
}

int DataLoader::running() const {
  std::lock_guard<std::mutex> lock(mu_);
  return int(std::count_if(workers_.begin(), workers_.end(), [](const Worker& w) { return !w.ended; }));
}

void DataLoader::resize(int workers) {
  if (workers < 1) throw std::invalid_argument("torchloader: loader needs workers >= 1");
  std::vector<std::thread> ended;
  {
    std::lock_guard<std::mutex> lock(mu_);
    // Threads that have stopped since the last resize are joined (outside the lock) and forgotten; one that stopped
    // unasked (the data ran out, or an error) no longer counts.
    for (auto it = workers_.begin(); it != workers_.end();)
      if (it->ended) {
        ended.push_back(std::move(it->thread));
        it = workers_.erase(it);
      } else {
        ++it;
      }
    int now = asked();
    for (auto it = workers_.rbegin(); now > workers && it != workers_.rend(); ++it)
      if (!it->retire) it->retire = true, --now;
    for (; now < workers; ++now) start_worker();
    capacity_ = 2 * static_cast<int64_t>(workers);
    emulated_batch_s_ = emulated_.batch_seconds(batch_, workers);
  }
  work_cv_.notify_all();
  for (auto& t : ended) t.join();
}

double EmulatedLoader::noise_factor(int64_t iteration) const {
  if (noise <= 0) return 1;
  const double sigma = std::sqrt(std::log1p(noise * noise));  // lognormal with mean 1 and CV `noise`
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ull + uint64_t(iteration));
  return std::exp(std::normal_distribution<double>(-sigma * sigma / 2, sigma)(rng));
}

void DataLoader::run(Worker* self) {
  for (;;) {
    int64_t k;
    double emulated_s;
    {
      std::unique_lock<std::mutex> lock(mu_);
      work_cv_.wait(lock, [&] { return stop_ || self->retire || next_claim_ >= end_iter_ || next_claim_ < next_take_ + capacity_; });
      if (stop_ || self->retire || next_claim_ >= end_iter_) {
        self->ended = true;
        return;
      }
      k = next_claim_++;
      emulated_s = emulated_batch_s_ * emulated_.noise_factor(k);
    }
    Batch b;
    b.iteration = k;
    try {
      if (emulated_.on()) {  // the profiled time on a timer; the training side does not read the values
        if (contention_)
          contention_->run_batch(emulated_s);
        else
          std::this_thread::sleep_for(std::chrono::duration<double>(emulated_s));
        std::tie(b.data, b.labels) = zeros_;
      } else {
        std::tie(b.data, b.labels) = dataset_.make_batch(k * shard_world_ + shard_rank_, batch_);
      }
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu_);
      if (!error_) error_ = std::current_exception();
      self->ended = true;
      ready_cv_.notify_all();
      return;
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      b.ready_at = Clock::now();
      ready_.emplace(k, std::move(b));
    }
    ready_cv_.notify_all();
  }
}

std::optional<Batch> DataLoader::next() {
  std::unique_lock<std::mutex> lock(mu_);
  if (next_take_ >= end_iter_) return std::nullopt;
  ready_cv_.wait(lock, [&] { return error_ || ready_.count(next_take_) > 0; });
  if (error_) std::rethrow_exception(error_);
  auto it = ready_.find(next_take_);
  Batch b = std::move(it->second);
  ready_.erase(it);
  ++next_take_;
  lock.unlock();
  work_cv_.notify_all();
  return b;
}

// ================================================================================================ checkpoints
CheckpointInfo read_checkpoint_info(const std::string& path) {
  auto ar = open_checkpoint(path, torch::kCPU);
  return read_info(ar);
}

std::shared_ptr<torch::nn::Module> load_checkpoint_model(const std::string& path) {
  auto ar = open_checkpoint(path, torch::kCPU);
  CheckpointInfo info = read_info(ar);
  auto model = make_model(info.arch, info.depth, info.classes);
  torch::serialize::InputArchive model_ar;
  ar.read("model", model_ar);
  model->load(model_ar);
  return model;
}

// ================================================================================================ training
namespace {

// Replaces every gradient with its mean over the replicas (one flat buffer per exchange); returns the common
// pause decision.
bool average_gradients(torch::nn::Module& model, GradientExchange& replicas, bool want_pause) {
  std::vector<torch::Tensor> grads;
  for (auto& p : model.parameters())
    if (p.grad().defined()) grads.push_back(p.grad());
  std::vector<torch::Tensor> flat_parts;
  for (auto& g : grads) flat_parts.push_back(g.detach().to(torch::kCPU, torch::kFloat).flatten());
  torch::Tensor flat = torch::cat(flat_parts).contiguous();
  const bool pause = replicas.average(flat.data_ptr<float>(), size_t(flat.numel()), want_pause);
  int64_t at = 0;
  for (auto& g : grads) {
    g.copy_(flat.slice(0, at, at + g.numel()).view_as(g));
    at += g.numel();
  }
  return pause;
}

}  // namespace

TrainResult train(const TrainOptions& opts, const std::function<bool()>& should_pause,
                  const std::function<void(const Heartbeat&)>& on_heartbeat) {
  validate(opts);
  torch::set_num_threads(opts.threads);
  const torch::Device device = pick_device(opts.device);
  const bool emulated = opts.device.kind == "emulated";

  uint64_t seed = opts.seed;
  int64_t start = opts.start_iter;
  std::optional<torch::serialize::InputArchive> ckpt;
  if (opts.resume) {
    ckpt = open_checkpoint(opts.checkpoint, device);
    CheckpointInfo info = read_info(*ckpt);
    if (info.arch != opts.arch || info.depth != opts.depth || info.classes != opts.classes || info.batch != opts.batch)
      throw std::invalid_argument("torchloader: checkpoint " + opts.checkpoint + " is for " + info.arch + " depth " +
                                  std::to_string(info.depth) + " classes " + std::to_string(info.classes) +
                                  " batch " + std::to_string(info.batch) + ", not the options given");
    seed = info.seed;
    start = info.next_iter;
  }
  if (opts.end_iter < start)
    throw std::invalid_argument("torchloader: end_iter " + std::to_string(opts.end_iter) + " is before the start " +
                                std::to_string(start));

  torch::manual_seed(seed);
  auto model = make_model(opts.arch, opts.depth, opts.classes);
  model->to(device);
  model->train();
  torch::optim::SGD optimizer(model->parameters(),
                              torch::optim::SGDOptions(kLearningRate).momentum(kMomentum).weight_decay(kWeightDecay));
  if (ckpt) {
    torch::serialize::InputArchive model_ar, optim_ar;
    ckpt->read("model", model_ar);
    model->load(model_ar);
    ckpt->read("optimizer", optim_ar);
    optimizer.load(optim_ar);
    ckpt.reset();
  }
  ImageModel& net = as_image_model(model);
  const double device_s = emulated ? emulated_iteration_seconds(opts.device, flops_per_sample(model), opts.batch) : 0;
  std::unique_ptr<SharedDevices> shared;
  if (emulated && !opts.device.share_file.empty()) shared = std::make_unique<SharedDevices>(opts.device.share_file, opts.device.ids);

  SyntheticImageDataset dataset(opts.dataset_size, opts.classes, opts.cost, seed);
  EmulatedLoader loader_model = opts.emulated_loader;
  loader_model.seed = seed * 131 + uint64_t(opts.dp_rank);  // each process of an application its own draws, the same after a restart
  DataLoader loader(dataset, opts.batch, opts.workers, start, opts.end_iter, opts.dp_rank, opts.dp_world, loader_model);
  std::unique_ptr<GradientExchange> replicas;
  if (opts.dp_world > 1) replicas = std::make_unique<GradientExchange>(opts.dp_rank, opts.dp_world, opts.dp_address, opts.dp_token, opts.on_listening);

  TrainResult result;
  const auto t0 = Clock::now();
  auto hb_start = t0;
  int64_t hb_iters = 0;
  double hb_wait = 0;
  int hb_workers = -1;  // the loader's workers as the last heartbeat reported them (-1: none sent yet)
  for (int64_t it = start; it < opts.end_iter; ++it) {
    const auto w0 = Clock::now();
    std::optional<Batch> b = loader.next();
    hb_wait += seconds_since(w0);
    if (!b) break;  // cannot happen: the loader covers [start, end_iter)
    torch::Tensor loss;
    if (emulated) {
      emulated_step(*model, device_s, shared.get());
    } else {
      optimizer.zero_grad();
      torch::Tensor x = b->data.to(device), y = b->labels.to(device);
      loss = torch::nn::functional::cross_entropy(net.forward(x), y);
      loss.backward();
    }
    // Asked before the step, so that data-parallel replicas agree on it through the exchange.
    bool pause_now = it + 1 < opts.end_iter && should_pause && should_pause();
    if (replicas) pause_now = average_gradients(*model, *replicas, pause_now);
    if (!emulated) optimizer.step();
    if (opts.loader_workers_wanted)
      if (const int wanted = opts.loader_workers_wanted(); wanted > 0) loader.resize(wanted);
    result.last_loss = emulated ? std::log(double(opts.classes)) : loss.item<double>();
    ++result.iterations_done;
    ++hb_iters;

    const double since_hb = seconds_since(hb_start);
    // A loader that was resized is reported at once, not at the next period: a shrink shorter than the period
    // (while a short application runs) would otherwise never be seen by the master.
    const bool resized = hb_workers >= 0 && loader.workers() != hb_workers;
    if (opts.heartbeat_s > 0 && (since_hb >= opts.heartbeat_s || resized) && on_heartbeat) {
      Heartbeat hb;
      hb.iteration = it + 1;
      hb.samples_per_second = static_cast<double>(hb_iters * opts.batch) / since_hb;
      hb.iteration_seconds = since_hb / static_cast<double>(hb_iters);
      hb.loader_wait_seconds = hb_wait;
      hb.workers = loader.workers();
      hb_workers = hb.workers;
      hb.wall_ns = static_cast<double>(
          std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch())
              .count());
      on_heartbeat(hb);
      hb_start = Clock::now();
      hb_iters = 0;
      hb_wait = 0;
    }
    if (it + 1 < opts.end_iter && pause_now) {
      if (!opts.checkpoint.empty()) save_checkpoint(opts.checkpoint, opts, seed, it + 1, *model, optimizer);
      result.paused = true;
      result.next_iter = it + 1;
      result.seconds = seconds_since(t0);
      return result;
    }
  }
  result.next_iter = opts.end_iter;
  result.seconds = seconds_since(t0);
  if (!opts.checkpoint.empty()) save_checkpoint(opts.checkpoint, opts, seed, opts.end_iter, *model, optimizer);
  return result;
}

ProfileResult profile(const TrainOptions& opts, int iterations) {
  validate(opts);
  if (iterations < 1) throw std::invalid_argument("torchloader: profile needs iterations >= 1");
  torch::set_num_threads(opts.threads);
  const torch::Device device = pick_device(opts.device);
  ProfileResult r{};
  SyntheticImageDataset dataset(opts.dataset_size, opts.classes, opts.cost, opts.seed);

  // Compute alone, on one pre-loaded batch.
  {
    torch::manual_seed(opts.seed);
    auto model = make_model(opts.arch, opts.depth, opts.classes);
    model->to(device);
    model->train();
    ImageModel& net = as_image_model(model);
    torch::optim::SGD optimizer(model->parameters(),
                                torch::optim::SGDOptions(kLearningRate).momentum(kMomentum).weight_decay(kWeightDecay));
    auto [data, labels] = dataset.make_batch(0, opts.batch);
    torch::Tensor x = data.to(device), y = labels.to(device);
    const double device_s = opts.device.kind == "emulated" ? emulated_iteration_seconds(opts.device, flops_per_sample(model), opts.batch) : 0;
    // A data-parallel profile (dp_world > 1) averages the gradients as training does: the TPM's (devices-1) x
    // params term is that exchange's cost.
    std::unique_ptr<GradientExchange> replicas;
    if (opts.dp_world > 1) replicas = std::make_unique<GradientExchange>(opts.dp_rank, opts.dp_world, opts.dp_address, opts.dp_token, opts.on_listening);
    auto step = [&] {
      torch::Tensor loss;
      if (opts.device.kind == "emulated") {
        emulated_step(*model, device_s, nullptr);  // the device alone: the TPM divides by the sharing
      } else {
        optimizer.zero_grad();
        loss = torch::nn::functional::cross_entropy(net.forward(x), y);
        loss.backward();
      }
      if (replicas) average_gradients(*model, *replicas, false);
      if (opts.device.kind != "emulated") optimizer.step();
      if (loss.defined()) (void)loss.item<double>();  // synchronise (CUDA)
    };
    step();  // warmup
    const auto t = Clock::now();
    for (int i = 0; i < iterations; ++i) step();
    r.compute_seconds_per_iteration = seconds_since(t) / iterations;
  }
  if (opts.dp_world > 1) return r;  // the loader alone is profiled by single-process runs

  // Loader alone. All workers start together, so batches 1..workers-1 are ready right after batch 0: from batch 0
  // being ready to batch k*workers being ready, exactly k*workers batches of steady-state production. At least
  // `iterations` batches and at least kMinLoaderSeconds (cheap batches would otherwise be timed over a few ms).
  // Timed by when the workers finished the batches, not when they were taken: a batch left waiting while this
  // thread was descheduled would otherwise count in the next window for free. The best of kLoaderWindows windows in
  // a row: the machine's other work only ever slows a window down, and the TPM extrapolates this to many workers
  // (a 5 % dip at 2 workers reads as a serial part that caps 48).
  {
    constexpr double kMinLoaderSeconds = 0.25;
    constexpr int kLoaderWindows = 3;
    const int64_t w = opts.workers;
    const int64_t at_least = std::max<int64_t>(1, (iterations + w - 1) / w) * w;
    DataLoader loader(dataset, opts.batch, opts.workers, 0, std::numeric_limits<int64_t>::max(), 0, 1, opts.emulated_loader);
    auto since = loader.next()->ready_at;  // warmup
    for (int window = 0; window < kLoaderWindows; ++window) {
      int64_t taken = 0;
      double elapsed = 0;
      Clock::time_point last = since;
      while (taken < at_least || elapsed < kMinLoaderSeconds) {
        for (int64_t i = 0; i < w; ++i) last = loader.next()->ready_at;
        taken += w;
        elapsed = std::chrono::duration<double>(last - since).count();
      }
      if (elapsed > 0) r.loader_samples_per_second = std::max(r.loader_samples_per_second, static_cast<double>(taken * opts.batch) / elapsed);
      since = last;
    }
  }
  return r;
}

}  // namespace torchloader
