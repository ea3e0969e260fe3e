// The SmartSim-Scaling inference benchmark's model and preprocessing script, made without Python: a TorchScript
// ResNet-50 with seeded random weights (the benchmark times inference, so trained weights are not needed), and
// the TorchScript source of its image preprocessing. Used by fanout-build-model and the Redis module's tests.
#pragma once

#include <cstdint>
#include <string>

namespace smartsim_model {

// Writes a TorchScript ResNet-50 (torchvision's resnet50 architecture: Bottleneck blocks [3,4,6,3], stride on the
// 3x3 conv, 1000 classes) with weights drawn from a seeded generator, to `path` (written to path + ".tmp" then
// renamed). The same seed gives the same weights, on either device.
// device: "CPU" or "GPU" (GPU: parameters moved to CUDA; throws std::runtime_error when torch has no CUDA);
// anything else throws std::invalid_argument.
// Returns the number of parameters (25,557,032: conv weights, batch-norm weight+bias, fc weight+bias;
// batch-norm running mean/var are buffers, not parameters).
// The module's forward(x) takes N x 3 x 224 x 224 float and returns N x 1000 logits; it loads with torch::jit::load
// from the file or from an in-memory stream of its bytes.
int64_t write_resnet50(const std::string& path, const std::string& device, uint64_t seed);

// TorchScript source of SmartSim-Scaling's preprocessing script: function pre_process_3ch taking
// (tensors: List[Tensor], keys: List[str], args: List[str]) (RedisAI 1.2's AI.SCRIPTEXECUTE convention):
// tensors[0] is a float or uint8 image batch N x 224 x 224 x 3 (NHWC, values 0..255) or 224 x 224 x 3 (a batch
// of 1); returns ((img/255 - mean) / std) as a contiguous N x 3 x 224 x 224 float tensor (ImageNet mean
// 0.485,0.456,0.406 / std 0.229,0.224,0.225).
std::string preprocessing_script();

}  // namespace smartsim_model
