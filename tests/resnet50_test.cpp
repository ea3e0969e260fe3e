// The C++-built ResNet-50 and preprocessing script (plugins/smartsim/resnet50.h): the saved module loads back
// (from a file and from memory, as the Redis module loads it), has torchvision's parameter count and output
// shapes, is reproducible from its seed, and the script normalises images as SmartSim-Scaling's does.
// Self-contained (no fanout_core): only libtorch and GoogleTest.
#include <ATen/CPUGeneratorImpl.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <torch/cuda.h>
#include <torch/jit.h>
#include <torch/script.h>
#include <torch/utils.h>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>

#include "plugins/smartsim/resnet50.h"
#include "tests/expect_throw.h"

namespace fs = std::filesystem;

namespace {

constexpr int64_t kResNet50Parameters = 25557032;  // torchvision.models.resnet50(): sum of p.numel()

fs::path make_temp_dir() {
  std::string tmpl = (fs::temp_directory_path() / "resnet50_test.XXXXXX").string();
  if (!mkdtemp(tmpl.data())) throw std::runtime_error("mkdtemp failed");
  return tmpl;
}

std::string read_bytes(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}

at::Tensor forward(torch::jit::Module& m, const at::Tensor& x) {
  torch::NoGradGuard no_grad;
  return m.forward({x}).toTensor();
}

// Models are ~100 MB and take a second or two to build: seed 0 is built once for the whole suite.
class ResNet50 : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    torch::set_num_threads(2);  // libtorch defaults to 1 thread here
    dir_ = new fs::path(make_temp_dir());
    params_ = smartsim_model::write_resnet50((*dir_ / "seed0.pt").string(), "CPU", 0);
    model_ = new torch::jit::Module(torch::jit::load((*dir_ / "seed0.pt").string()));
  }
  static void TearDownTestSuite() {
    delete model_;
    std::error_code ignored;
    fs::remove_all(*dir_, ignored);
    delete dir_;
  }
  static at::Tensor input(int64_t batch) {
    at::Generator g = at::detail::createCPUGenerator(1234);
    return at::randn({batch, 3, 224, 224}, g);
  }
  static fs::path* dir_;
  static int64_t params_;
  static torch::jit::Module* model_;
};
fs::path* ResNet50::dir_ = nullptr;
int64_t ResNet50::params_ = 0;
torch::jit::Module* ResNet50::model_ = nullptr;

TEST_F(ResNet50, HasTorchvisionsParameterCountAndBuffersAreNotParameters) {
  EXPECT_EQ(params_, kResNet50Parameters);
  int64_t n = 0;
  for (const at::Tensor& p : model_->parameters()) n += p.numel();
  EXPECT_EQ(n, kResNet50Parameters);
  // 53 batch norms, each with running mean and var.
  EXPECT_EQ(model_->buffers().size(), 106u);
  EXPECT_FALSE(fs::exists(*dir_ / "seed0.pt.tmp"));
}

TEST_F(ResNet50, ForwardGivesOneRowOfLogitsPerImage) {
  for (int64_t batch : {1, 4}) {
    const at::Tensor y = forward(*model_, input(batch));
    EXPECT_EQ(y.sizes(), (std::vector<int64_t>{batch, 1000})) << "batch " << batch;
    EXPECT_EQ(y.scalar_type(), at::kFloat);
    EXPECT_TRUE(y.isfinite().all().item<bool>());
  }
}

TEST_F(ResNet50, SameSeedGivesTheSameOutputsAndAnotherSeedDoesNot) {
  smartsim_model::write_resnet50((*dir_ / "seed0_again.pt").string(), "CPU", 0);
  smartsim_model::write_resnet50((*dir_ / "seed1.pt").string(), "CPU", 1);
  torch::jit::Module again = torch::jit::load((*dir_ / "seed0_again.pt").string());
  torch::jit::Module other = torch::jit::load((*dir_ / "seed1.pt").string());
  const at::Tensor x = input(1);
  const at::Tensor y0 = forward(*model_, x);
  EXPECT_TRUE(at::equal(y0, forward(again, x)));
  EXPECT_FALSE(at::allclose(y0, forward(other, x)));
}

TEST_F(ResNet50, LoadsFromAnInMemoryBlobAsTheRedisModuleDoes) {
  std::istringstream blob(read_bytes(*dir_ / "seed0.pt"));
  torch::jit::Module m = torch::jit::load(blob);
  const at::Tensor x = input(1);
  EXPECT_TRUE(at::equal(forward(m, x), forward(*model_, x)));
}

TEST_F(ResNet50, EvalWorksOnTheLoadedModule) {
  // Callers may call eval() and check is_training(); both need the module's "training" attribute.
  torch::jit::Module m = torch::jit::load((*dir_ / "seed0.pt").string());
  EXPECT_FALSE(m.is_training());  // saved in eval mode
  m.train();
  EXPECT_TRUE(m.is_training());
  m.eval();
  EXPECT_FALSE(m.is_training());
}

TEST(ResNet50Device, UnknownDeviceThrows) {
  const fs::path dir = make_temp_dir();
  EXPECT_THROW_WITH(smartsim_model::write_resnet50((dir / "m.pt").string(), "TPU", 0), std::invalid_argument,
                    "write_resnet50: device must be CPU or GPU, got 'TPU'");
  EXPECT_FALSE(fs::exists(dir / "m.pt"));
  fs::remove_all(dir);
}

TEST(ResNet50Device, GpuNeedsCudaAndOtherwiseLeavesParametersOnIt) {
  const fs::path dir = make_temp_dir();
  const std::string path = (dir / "m.pt").string();
  if (!torch::cuda::is_available()) {
    try {
      smartsim_model::write_resnet50(path, "GPU", 0);
      ADD_FAILURE() << "no exception without CUDA";
    } catch (const std::runtime_error& e) {
      EXPECT_NE(std::string(e.what()).find("CUDA"), std::string::npos) << e.what();
    }
    EXPECT_FALSE(fs::exists(path));
  } else {
    EXPECT_EQ(smartsim_model::write_resnet50(path, "GPU", 0), kResNet50Parameters);
    for (const at::Tensor& p : torch::jit::load(path).parameters()) EXPECT_TRUE(p.is_cuda());
  }
  fs::remove_all(dir);
}

TEST(PreprocessingScript, CompilesAndNormalisesAnNhwcImageToNchw) {
  const std::shared_ptr<torch::jit::CompilationUnit> cu = torch::jit::compile(smartsim_model::preprocessing_script());
  const float mean[3] = {0.485f, 0.456f, 0.406f};
  const float stdev[3] = {0.229f, 0.224f, 0.225f};
  for (at::ScalarType dtype : {at::kFloat, at::kByte}) {
    const at::Tensor img = at::full({1, 224, 224, 3}, 255, at::TensorOptions().dtype(dtype));
    c10::List<at::Tensor> tensors({img});
    c10::List<std::string> none;
    const at::Tensor out = cu->run_method("pre_process_3ch", tensors, none, none).toTensor();
    ASSERT_EQ(out.sizes(), (std::vector<int64_t>{1, 3, 224, 224}));
    EXPECT_EQ(out.scalar_type(), at::kFloat);
    EXPECT_TRUE(out.is_contiguous());
    for (int c = 0; c < 3; ++c)
      EXPECT_TRUE(at::allclose(out[0][c], at::full({224, 224}, (1.0f - mean[c]) / stdev[c]))) << "channel " << c;
  }
}

TEST(PreprocessingScript, AnUnbatchedImageBecomesABatchOfOneWithChannelsInOrder) {
  const std::shared_ptr<torch::jit::CompilationUnit> cu = torch::jit::compile(smartsim_model::preprocessing_script());
  // Channel c holds value c * 100, so the NHWC -> NCHW permutation is visible.
  const at::Tensor img = at::arange(3, at::kFloat).mul(100).expand({224, 224, 3}).contiguous();
  c10::List<std::string> none;
  const at::Tensor out = cu->run_method("pre_process_3ch", c10::List<at::Tensor>({img}), none, none).toTensor();
  ASSERT_EQ(out.sizes(), (std::vector<int64_t>{1, 3, 224, 224}));
  EXPECT_NEAR(out[0][1][10][20].item<float>(), (100.0f / 255.0f - 0.456f) / 0.224f, 1e-5);
  EXPECT_NEAR(out[0][2][223][0].item<float>(), (200.0f / 255.0f - 0.406f) / 0.225f, 1e-5);
}

TEST(PreprocessingScript, RejectsAnImageWithoutThreeChannelsLast) {
  const std::shared_ptr<torch::jit::CompilationUnit> cu = torch::jit::compile(smartsim_model::preprocessing_script());
  c10::List<std::string> none;
  const c10::List<at::Tensor> nchw({at::zeros({1, 3, 224, 224})});
  // A failed TorchScript assert surfaces as torch::jit::JITException (a std::runtime_error), not c10::Error.
  try {
    cu->run_method("pre_process_3ch", nchw, none, none);
    ADD_FAILURE() << "no exception";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("expected an N x H x W x 3"), std::string::npos) << e.what();
  }
}

}  // namespace
