#include "torch_backend.h"

#include <torch/script.h>
#include <torch/torch.h>
#include <c10/core/CPUAllocator.h>

#include <atomic>
#include <cstdlib>
#include <sstream>

#include "redisai_args.h"

namespace redisai {
namespace {

// kTypes order: FLOAT DOUBLE INT8 INT16 INT32 INT64 UINT8 UINT16 BOOL STRING (libtorch 1.13 has no uint16; RedisAI
// 1.2.7's libtorch backend takes no STRING tensors either).
torch::Dtype torch_type(int dtype) {
  static const torch::Dtype map[] = {torch::kFloat, torch::kDouble, torch::kChar, torch::kShort, torch::kInt,
                                     torch::kLong,  torch::kByte,   torch::kFloat, torch::kBool,  torch::kFloat};
  if (dtype == 7 || dtype == 9) throw BackendError(std::string("ERR unsupported tensor type ") + (dtype == 7 ? "UINT16" : "STRING") + " for the TORCH backend");
  return map[dtype];
}

int dtype_of(torch::Dtype t) {
  switch (t) {
    case torch::kFloat: return 0;
    case torch::kDouble: return 1;
    case torch::kChar: return 2;
    case torch::kShort: return 3;
    case torch::kInt: return 4;
    case torch::kLong: return 5;
    case torch::kByte: return 6;
    case torch::kBool: return 8;  // BOOL, as RedisAI 1.2.7 returns it
    default: throw BackendError(std::string("ERR unsupported output tensor type ") + c10::toString(t));
  }
}

torch::Device torch_device(const std::string& device) {
  if (device.rfind("GPU", 0) != 0) return torch::kCPU;
  const int index = device.size() > 4 ? std::stoi(device.substr(4)) : 0;
  return torch::Device(torch::kCUDA, static_cast<c10::DeviceIndex>(index));
}

void require_device(const std::string& device) {
  if (std::string why = device_refusal(device); !why.empty()) throw BackendError(why);
}

// The value as a torch tensor of its own: a model or script may change its inputs in place, and the bytes belong
// to a key the main thread may be reading. One copy (0.6 MB for an image) is small beside a forward.
torch::Tensor to_torch(const TensorValue& v, torch::Device device) {
  std::vector<int64_t> dims(v.dims.begin(), v.dims.end());
  torch::Tensor t = torch::from_blob(const_cast<char*>(v.data), dims, torch::TensorOptions().dtype(torch_type(v.dtype)));
  return device.is_cpu() ? t.clone() : t.to(device);
}

// The result as a value that owns its bytes (through the torch tensor it keeps). An output that is an input (a
// model that returns its argument) is safe too: inputs are torch's own copies (to_torch).
TensorValue from_torch(torch::Tensor t) {
  t = t.to(torch::kCPU);
  t = t.contiguous();
  TensorValue v;
  v.dtype = dtype_of(t.scalar_type());
  for (int64_t d : t.sizes()) v.dims.push_back(d);
  if (v.dims.empty()) v.dims.push_back(1);  // RedisAI tensors have at least one dimension
  v.bytes = size_t(t.numel()) * t.element_size();
  // An output becomes a key, and a key must load again from the RDB it is saved in: what AI.TENSORSET refuses
  // (and loading would), an output may not be either.
  if (v.dims.size() > kMaxTensorDims)
    throw BackendError("ERR an output tensor has " + std::to_string(v.dims.size()) + " dimensions (at most " + std::to_string(kMaxTensorDims) + ")");
  if (t.numel() == 0) throw BackendError("ERR an output tensor is empty (a dimension of size 0)");
  if (v.bytes > size_t(kMaxTensorBytes)) throw BackendError("ERR an output tensor is larger than " + std::to_string(kMaxTensorBytes) + " bytes");
  auto owner = std::make_shared<torch::Tensor>(t);
  v.data = static_cast<const char*>(owner->data_ptr());
  v.keep = owner;
  return v;
}

// A forward/function result: a tensor, or a tuple/list of them.
std::vector<torch::Tensor> tensors_of(const c10::IValue& out) {
  std::vector<torch::Tensor> r;
  if (out.isTensor()) r.push_back(out.toTensor());
  else if (out.isTuple())
    for (const auto& e : out.toTupleRef().elements()) r.push_back(e.toTensor());
  else if (out.isTensorList())
    for (const auto& t : out.toTensorVector()) r.push_back(t);
  else if (out.isList())
    for (const auto& e : out.toListRef()) r.push_back(e.toTensor());
  else throw BackendError("ERR the model returned something that is not a tensor, a tuple or a list of tensors");
  return r;
}

// torch's messages carry a backtrace or a TorchScript traceback over many lines: a Redis error is one line, the
// cause (the interpreter's "RuntimeError: ..." when there is one, else the first line).
std::string first_line(const std::string& what) {
  size_t at = what.rfind("RuntimeError: ");
  std::string line = at == std::string::npos ? what : what.substr(at + 14);
  line.erase(0, line.find_first_not_of(" \n"));  // the compiler's messages start on a line of their own
  line = line.substr(0, line.find('\n'));
  if (line.rfind("ERR ", 0) == 0) line = line.substr(4);  // our own error (the memory cap) inside torch's
  return line.empty() ? "torch failed without a message" : line;
}

template <typename F>
auto guarded(F&& f) -> decltype(f()) {
  try {
    return f();
  } catch (const BackendError&) {
    throw;
  } catch (const std::exception& e) {
    throw BackendError("ERR " + first_line(e.what()));
  }
}

// The op of a graph that reaches memory without the checks ordinary ops make, or "": libtorch runs such ops as
// told, and a crafted index then writes past a buffer without faulting (a sparse tensor built by
// _sparse_coo_tensor_unsafe, or given a sparse layout, and made dense), leaving the executor's heap broken for
// the runs after it. Any op of sparse tensors and any "_unsafe" one but _unsafe_view (a view whose size is
// checked; traced models have it) is refused, as is a layout other than strided (dense) where an op takes one.
std::string unchecked_op(const torch::jit::Node& node) {
  const std::string name = node.kind().toQualString();
  if (name.rfind("aten::", 0) != 0) return "";
  if (name.find("sparse") != std::string::npos || (name.find("_unsafe") != std::string::npos && name != "aten::_unsafe_view"))
    return name;
  if (const c10::FunctionSchema* schema = node.maybeSchema()) {
    const auto& args = schema->arguments();
    for (size_t i = 0; i < args.size() && i < node.inputs().size(); ++i) {
      if (args[i].name() != "layout") continue;
      const c10::optional<c10::IValue> layout = torch::jit::toIValue(node.inputs()[i]);
      const bool dense = layout && (layout->isNone() || (layout->isInt() && layout->toInt() == int64_t(c10::kStrided)));
      if (!dense) return name + " with a layout other than strided";
    }
  }
  return "";
}

std::string unchecked_op(const torch::jit::Block& block) {
  for (const torch::jit::Node* node : block.nodes()) {
    if (std::string op = unchecked_op(*node); !op.empty()) return op;
    for (const torch::jit::Block* inner : node->blocks())
      if (std::string op = unchecked_op(*inner); !op.empty()) return op;
  }
  return "";
}

// Every function of a script, or every method of a model and its submodules, checked before any can run.
void refuse_unchecked_ops(const torch::jit::CompilationUnit& unit, const std::string& what) {
  for (torch::jit::Function* fn : unit.get_functions()) {
    if (!fn->isGraphFunction()) continue;
    if (std::string op = unchecked_op(*torch::jit::toGraphFunction(*fn).graph()->block()); !op.empty())
      throw BackendError("ERR " + what + ": " + fn->name() + " calls " + op +
                         ", which can write outside its tensors' memory; such ops are refused");
  }
}

// Torch's CPU allocator with a ceiling: every CPU tensor's bytes pass through here. Blocks carry their size in a
// 64-byte header (torch's alignment) so that a raw deleter can give it back.
class CappedAllocator final : public c10::Allocator {
 public:
  static constexpr size_t kHeader = 64;
  explicit CappedAllocator(size_t cap) : cap_(cap) {}
  c10::DataPtr allocate(size_t n) const override {
    size_t now = used_.fetch_add(n) + n;
    if (now > cap_ || now < n) {
      used_.fetch_sub(n);
      throw BackendError("ERR the run needs more than the module's memory cap of " + std::to_string(cap_ >> 20) + " MiB (MEMORY_CAP; " +
                         std::to_string(n >> 20) + " MiB asked with " + std::to_string((now - n) >> 20) + " MiB in use)");
    }
    void* block = nullptr;
    if (posix_memalign(&block, kHeader, n + kHeader) != 0) {
      used_.fetch_sub(n);
      throw BackendError("ERR out of memory allocating " + std::to_string(n) + " bytes");
    }
    *static_cast<size_t*>(block) = n;
    void* data = static_cast<char*>(block) + kHeader;
    return {data, data, &release, c10::Device(c10::DeviceType::CPU)};
  }
  c10::DeleterFnPtr raw_deleter() const override { return &release; }
  size_t in_use() const { return used_.load(); }

 private:
  static void release(void* data);
  size_t cap_;
  mutable std::atomic<size_t> used_{0};
};

CappedAllocator* g_capped = nullptr;

void CappedAllocator::release(void* data) {
  if (!data) return;
  void* block = static_cast<char*>(data) - kHeader;
  g_capped->used_.fetch_sub(*static_cast<size_t*>(block));
  std::free(block);
}

}  // namespace

void install_memory_cap(size_t bytes) {
  if (bytes == 0 || g_capped) return;
  g_capped = new CappedAllocator(bytes);  // lives as long as the process: tensors may outlive everything else
  c10::SetCPUAllocator(g_capped, /*priority=*/200);
}

size_t memory_in_use() { return g_capped ? g_capped->in_use() : 0; }

void set_torch_threads(int intra_op, int inter_op) {
  if (intra_op > 0) torch::set_num_threads(intra_op);
  if (inter_op > 0) {
    try {
      torch::set_num_interop_threads(inter_op);
    } catch (const std::exception&) {
      // Only settable before the first inter-op work; a second module load keeps the first setting.
    }
  }
}

std::string device_refusal(const std::string& device) {
  return device_available(device) ? "" : "ERR GPU requested but Torch couldn't find CUDA (device " + device + ")";
}

bool device_available(const std::string& device) {
  if (device.rfind("GPU", 0) != 0) return true;
  if (!torch::cuda::is_available()) return false;
  const int index = device.size() > 4 ? std::stoi(device.substr(4)) : 0;
  return index < int(torch::cuda::device_count());
}

struct TorchModel::Impl {
  torch::jit::Module module;
  torch::Device device = torch::kCPU;
};

TorchModel::TorchModel(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
TorchModel::~TorchModel() = default;

std::shared_ptr<TorchModel> TorchModel::load(std::string_view blob, const std::string& device) {
  require_device(device);
  return guarded([&] {
    auto impl = std::make_unique<Impl>();
    impl->device = torch_device(device);
    std::istringstream in{std::string(blob)};
    try {
      impl->module = torch::jit::load(in, impl->device);
    } catch (const std::exception& e) {
      throw BackendError("ERR could not load the TORCH model: " + first_line(e.what()));
    }
    refuse_unchecked_ops(*impl->module._ivalue()->compilation_unit(), "could not load the TORCH model");
    impl->module.eval();
    return std::shared_ptr<TorchModel>(new TorchModel(std::move(impl)));
  });
}

std::vector<std::vector<TensorValue>> TorchModel::run(const std::vector<const std::vector<TensorValue>*>& requests) {
  return guarded([&] {
    torch::InferenceMode inference;
    const size_t n_inputs = requests.front()->size();
    std::vector<torch::Tensor> inputs;
    std::vector<int64_t> firsts;  // each request's share of dimension 0
    for (const auto* r : requests) {
      if (r->size() != n_inputs) throw BackendError("ERR batched requests have different numbers of inputs");
      firsts.push_back(r->front().dims.empty() ? 1 : r->front().dims[0]);
    }
    for (size_t i = 0; i < n_inputs; ++i) {
      if (requests.size() == 1) {
        inputs.push_back(to_torch((*requests[0])[i], impl_->device));
        continue;
      }
      std::vector<torch::Tensor> parts;
      for (const auto* r : requests) parts.push_back(to_torch((*r)[i], impl_->device));
      inputs.push_back(torch::cat(parts, 0));
    }
    std::vector<c10::IValue> args(inputs.begin(), inputs.end());
    std::vector<torch::Tensor> outputs = tensors_of(impl_->module.forward(args));
    std::vector<std::vector<TensorValue>> result(requests.size());
    int64_t total = 0;
    for (int64_t f : firsts) total += f;
    for (const auto& out : outputs) {
      if (requests.size() > 1 && (out.dim() == 0 || out.size(0) != total))
        throw BackendError("ERR model did not generate the expected batch size");
      int64_t at = 0;
      for (size_t r = 0; r < requests.size(); ++r) {
        torch::Tensor part = requests.size() == 1 ? out : out.narrow(0, at, firsts[r]);
        at += firsts[r];
        result[r].push_back(from_torch(part));
      }
    }
    return result;
  });
}

struct TorchScript::Impl {
  std::shared_ptr<torch::jit::CompilationUnit> unit;
  torch::Device device = torch::kCPU;
};

TorchScript::TorchScript(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
TorchScript::~TorchScript() = default;

std::shared_ptr<TorchScript> TorchScript::compile(std::string_view source, const std::string& device,
                                                  const std::vector<std::string>& entry_points) {
  require_device(device);
  auto impl = std::make_unique<Impl>();
  impl->device = torch_device(device);
  try {
    impl->unit = torch::jit::compile(std::string(source));
  } catch (const std::exception& e) {
    throw BackendError("ERR could not compile the TorchScript source: " + first_line(e.what()));
  }
  refuse_unchecked_ops(*impl->unit, "could not compile the TorchScript source");
  std::shared_ptr<TorchScript> script(new TorchScript(std::move(impl)));
  for (const auto& fn : entry_points)
    if (!script->has_function(fn)) throw BackendError("ERR entry point " + fn + " is not a function of the script");
  return script;
}

bool TorchScript::has_function(const std::string& name) const { return impl_->unit->find_function(name) != nullptr; }

std::vector<TensorValue> TorchScript::run(const std::string& function, const std::vector<TensorValue>& inputs,
                                          const std::vector<std::string>& keys, const std::vector<std::string>& args) {
  return guarded([&] {
    torch::jit::Function* fn = impl_->unit->find_function(function);
    if (!fn) throw BackendError("ERR function " + function + " does not exist in the script");
    torch::InferenceMode inference;
    std::vector<torch::Tensor> tensors;
    for (const auto& v : inputs) tensors.push_back(to_torch(v, impl_->device));
    const auto& schema = fn->getSchema();
    std::vector<c10::IValue> call;
    const bool lists = !schema.arguments().empty() && schema.arguments()[0].type()->kind() == c10::TypeKind::ListType;
    if (lists) {
      call.emplace_back(c10::List<torch::Tensor>(tensors));
      if (schema.arguments().size() > 1) call.emplace_back(c10::List<std::string>(keys));
      if (schema.arguments().size() > 2) call.emplace_back(c10::List<std::string>(args));
    } else {
      call.assign(tensors.begin(), tensors.end());
    }
    std::vector<TensorValue> result;
    for (const auto& t : tensors_of((*fn)(call))) result.push_back(from_torch(t));
    return result;
  });
}

}  // namespace redisai
