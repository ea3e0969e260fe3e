// The TorchScript backend of the RedisAI module: models (serialized TorchScript) and scripts (TorchScript
// source) run on tensors described by TensorValue. No torch type appears here, so the Redis side of the
// module (and its tests) compile without libtorch's headers; torch_backend.cpp is the one file that has them.
#pragma once
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace redisai {

// A tensor's bytes and description. `keep` owns whatever holds the bytes (a retained Redis string, a
// std::string, a torch tensor); copies share it, so a value survives its key being overwritten while a
// worker reads it.
struct TensorValue {
  int dtype = 0;                 // index into kTypes (redisai_args.h)
  std::vector<long long> dims;
  const char* data = nullptr;
  size_t bytes = 0;
  std::shared_ptr<const void> keep;
};

// Thrown with RedisAI's error text ("ERR ...") by everything below.
struct BackendError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Sets libtorch's intra-op and inter-op thread pools (0 leaves one as it is). Once, before any run.
void set_torch_threads(int intra_op, int inter_op);
// Caps the bytes of all torch CPU tensors alive at once in this process (0: no cap). An allocation past the cap
// fails the model or script run with "ERR ... memory cap ..." instead of growing the server until the kernel
// kills it. Installed once, before any tensor is made.
void install_memory_cap(size_t bytes);
size_t memory_in_use();

// "CPU" always; "GPU[:n]" when libtorch was built with CUDA and the device exists.
bool device_available(const std::string& device);
// RedisAI's error for a device that is not available, or "".
std::string device_refusal(const std::string& device);

class TorchModel {
 public:
  // Loads serialized TorchScript (torch.jit.save / Module::save) onto device.
  static std::shared_ptr<TorchModel> load(std::string_view blob, const std::string& device);
  ~TorchModel();
  // Runs forward once for all requests: with several, each input is concatenated along dimension 0 and every
  // output split back by the requests' first dimensions (RedisAI's batching). Returns each request's outputs.
  std::vector<std::vector<TensorValue>> run(const std::vector<const std::vector<TensorValue>*>& requests);

 private:
  struct Impl;
  explicit TorchModel(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

class TorchScript {
 public:
  // Compiles TorchScript source; entry_points, when given, must all be functions of it.
  static std::shared_ptr<TorchScript> compile(std::string_view source, const std::string& device,
                                              const std::vector<std::string>& entry_points);
  ~TorchScript();
  bool has_function(const std::string& name) const;
  // Calls `function`: with RedisAI 1.2's signature (List[Tensor], List[str], List[str]) it gets the inputs, keys
  // and args as lists; otherwise the inputs positionally (the older AI.SCRIPTRUN convention).
  std::vector<TensorValue> run(const std::string& function, const std::vector<TensorValue>& inputs,
                               const std::vector<std::string>& keys, const std::vector<std::string>& args);

 private:
  struct Impl;
  explicit TorchScript(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace redisai
