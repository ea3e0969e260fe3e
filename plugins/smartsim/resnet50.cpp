// ResNet-50 as a TorchScript module built from C++: every weight is a named parameter of one flat module, and
// forward() is TorchScript source generated from the same loop that registers the weights, so the two cannot
// disagree. A flat module (no submodules) keeps the generated source simple; the names follow torchvision's
// state_dict with dots replaced by underscores (attribute names cannot contain dots).
#include "resnet50.h"

#include <unistd.h>

#include <ATen/CPUGeneratorImpl.h>
#include <torch/cuda.h>
#include <torch/script.h>

#include <cmath>
#include <filesystem>
#include <stdexcept>

#include "fanout_files.hpp"

namespace smartsim_model {

namespace {

// torchvision's resnet50: Bottleneck blocks (expansion 4), this many per stage, 64/128/256/512 wide.
constexpr int kBlocks[4] = {3, 4, 6, 3};
constexpr int kWidths[4] = {64, 128, 256, 512};
constexpr int kExpansion = 4;
constexpr int kClasses = 1000;

// Conv followed by inference-mode batch norm, defined once as a method so forward() stays short.
// torch.batch_norm(..., training=False, momentum, eps, cudnn_enabled) always uses the running statistics, as eval()
// would: the benchmark only infers, so the "training" attribute does not change the arithmetic.
constexpr const char* kConvBnSource = R"(
def conv_bn(self, x: Tensor, w: Tensor, g: Tensor, b: Tensor, rm: Tensor, rv: Tensor, stride: int, padding: int) -> Tensor:
    x = torch.conv2d(x, w, None, [stride, stride], [padding, padding])
    return torch.batch_norm(x, g, b, rm, rv, False, 0.1, 1e-5, True)
)";

// Registers weights (drawn in a fixed order from one seeded generator, so a seed fixes every value) and emits
// the forward() lines that use them.
class Builder {
 public:
  explicit Builder(uint64_t seed) : gen_(at::detail::createCPUGenerator(seed)) {
    // Scripted Python modules carry a "training" attribute; without one, libtorch 1.13's Module::eval() silently does
    // nothing and is_training() keeps answering true, which would mislead callers that check it.
    module_.register_attribute("training", c10::BoolType::get(), false);
  }

  // Registers a k x k conv (no bias, as in torchvision) and the batch norm after it; returns the TorchScript
  // expression applying both to `input`.
  std::string conv_bn(const std::string& input, const std::string& conv, const std::string& bn, int64_t in,
                      int64_t out, int64_t k, int stride, int padding) {
    // Kaiming normal, mode fan_out, relu gain: std = sqrt(2 / (out * k * k)), as torchvision initialises convs.
    const double std_dev = std::sqrt(2.0 / double(out * k * k));
    parameter(conv + "_weight", torch::empty({out, in, k, k}).normal_(0.0, std_dev, gen_));
    // Batch norm starts as the identity: weight 1, bias 0, running mean 0, running var 1.
    parameter(bn + "_weight", torch::ones({out}));
    parameter(bn + "_bias", torch::zeros({out}));
    module_.register_buffer(bn + "_running_mean", torch::zeros({out}));
    module_.register_buffer(bn + "_running_var", torch::ones({out}));
    return "self.conv_bn(" + input + ", self." + conv + "_weight, self." + bn + "_weight, self." + bn + "_bias, self." +
           bn + "_running_mean, self." + bn + "_running_var, " + std::to_string(stride) + ", " +
           std::to_string(padding) + ")";
  }

  // Registers the classifier; uniform(-1/sqrt(fan_in), 1/sqrt(fan_in)) for weight and bias is nn.Linear's default.
  void fc(int64_t in, int64_t out) {
    const double bound = 1.0 / std::sqrt(double(in));
    parameter("fc_weight", torch::empty({out, in}).uniform_(-bound, bound, gen_));
    parameter("fc_bias", torch::empty({out}).uniform_(-bound, bound, gen_));
  }

  void line(const std::string& s) { body_ += "    " + s + "\n"; }

  // Compiles forward() from the emitted lines; the module is complete after this.
  torch::jit::Module finish() {
    module_.define(kConvBnSource);
    module_.define("def forward(self, x: Tensor) -> Tensor:\n" + body_);
    return module_;
  }

 private:
  void parameter(const std::string& name, const at::Tensor& t) { module_.register_parameter(name, t, /*is_buffer=*/false); }

  torch::jit::Module module_{"ResNet50"};
  at::Generator gen_;
  std::string body_;
};

// One Bottleneck block: 1x1 reduce, 3x3 (carrying the stride, torchvision's "ResNet v1.5"), 1x1 expand, plus a
// projected shortcut when the shape changes (first block of each stage).
void bottleneck(Builder& b, const std::string& name, int64_t in, int64_t width, int stride) {
  const int64_t out = width * kExpansion;
  b.line("y = torch.relu(" + b.conv_bn("x", name + "_conv1", name + "_bn1", in, width, 1, 1, 0) + ")");
  b.line("y = torch.relu(" + b.conv_bn("y", name + "_conv2", name + "_bn2", width, width, 3, stride, 1) + ")");
  b.line("y = " + b.conv_bn("y", name + "_conv3", name + "_bn3", width, out, 1, 1, 0));
  if (stride != 1 || in != out)
    b.line("x = torch.relu(y + " + b.conv_bn("x", name + "_downsample_0", name + "_downsample_1", in, out, 1, stride, 0) + ")");
  else
    b.line("x = torch.relu(y + x)");
}

torch::jit::Module build(uint64_t seed) {
  Builder b(seed);
  // Stem: 7x7/2 conv, batch norm, relu, 3x3/2 max pool.
  b.line("x = torch.relu(" + b.conv_bn("x", "conv1", "bn1", 3, 64, 7, 2, 3) + ")");
  b.line("x = torch.max_pool2d(x, [3, 3], [2, 2], [1, 1])");
  int64_t in = 64;
  for (int stage = 0; stage < 4; ++stage) {
    for (int block = 0; block < kBlocks[stage]; ++block) {
      const int stride = (stage > 0 && block == 0) ? 2 : 1;
      bottleneck(b, "layer" + std::to_string(stage + 1) + "_" + std::to_string(block), in, kWidths[stage], stride);
      in = kWidths[stage] * kExpansion;
    }
  }
  b.fc(in, kClasses);
  b.line("x = torch.flatten(torch.adaptive_avg_pool2d(x, [1, 1]), 1)");
  b.line("return torch.addmm(self.fc_bias, x, self.fc_weight.t())");
  return b.finish();
}

int64_t parameter_count(const torch::jit::Module& m) {
  int64_t n = 0;
  for (const at::Tensor& p : m.parameters()) n += p.numel();
  return n;
}

}  // namespace

int64_t write_resnet50(const std::string& path, const std::string& device, uint64_t seed) {
  if (device != "CPU" && device != "GPU") throw std::invalid_argument("write_resnet50: device must be CPU or GPU, got '" + device + "'");
  if (device == "GPU" && !torch::cuda::is_available())
    throw std::runtime_error("write_resnet50: device GPU requested but this libtorch has no usable CUDA "
                             "(torch::cuda::is_available() is false); build the model for CPU");
  // Weights are always drawn on the CPU so that a seed gives the same model on either device.
  torch::jit::Module m = build(seed);
  if (device == "GPU") m.to(torch::kCUDA);
  m.eval();
  // Write-then-rename: a reader (or a crashed run) never sees a half-written model under the real name.
  // The temporary name is per process: colocated runs on several nodes may build into one shared folder at once.
  fanout_sdk::replace_file_atomic(path, [&](const std::string& tmp) { m.save(tmp); });
  return parameter_count(m);
}

std::string preprocessing_script() {
  // The same arithmetic as SmartSim-Scaling's data_processing_script, with RedisAI 1.2's script signature.
  // float() accepts uint8 images as sent by clients; the constants follow the image's device so the script
  // also runs on a GPU.
  return R"(def pre_process_3ch(tensors: List[Tensor], keys: List[str], args: List[str]) -> Tensor:
    img = tensors[0].float()
    if img.dim() == 3:
        img = img.unsqueeze(0)
    assert img.dim() == 4 and img.size(3) == 3, "pre_process_3ch: expected an N x H x W x 3 (or H x W x 3) image"
    mean = torch.tensor([0.485, 0.456, 0.406], device=img.device).type_as(img)
    std = torch.tensor([0.229, 0.224, 0.225], device=img.device).type_as(img)
    img = (img / 255.0 - mean) / std
    return img.permute(0, 3, 1, 2).contiguous()
)";
}

}  // namespace smartsim_model
