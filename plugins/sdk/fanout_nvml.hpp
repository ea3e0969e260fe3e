// GPU memory and energy of a rank's GPUs through NVML, loaded at run time (dlopen of libnvidia-ml.so.1, the driver's
// library: nothing to link, nothing needed on a node without NVIDIA's driver). SDK, header-only.
//
// What it measures, per rank, over its role: resource.gpu_energy (J): nvmlDeviceGetTotalEnergyConsumption at the end
// less at the start, summed over the rank's GPUs (Volta and newer; a GPU that does not support it gives none);
// resource.gpu_memory (B): the largest device memory in use (nvmlDeviceGetMemoryInfo's used, summed over the rank's
// GPUs), sampled every 50 ms: the devices' figure, so another process on a shared GPU counts too.
// The rank's GPUs are CUDA_VISIBLE_DEVICES' entries: indices as NVML numbers them (Slurm's GRES indices; with
// CUDA_DEVICE_ORDER=PCI_BUS_ID CUDA's too), or GPU-/MIG- UUIDs.
#pragma once
#include <dlfcn.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "fanout_resources.hpp"

namespace fanout_sdk {

class NvmlMeter {
 public:
  // The meter of these GPUs (a CUDA_VISIBLE_DEVICES list), started; nullptr with *why said when NVML is not on this
  // node or cannot open one of them.
  static std::unique_ptr<NvmlMeter> start(const std::string& gpus, std::string* why) {
    std::unique_ptr<NvmlMeter> m(new NvmlMeter);
    if (!m->load(why) || !m->open(gpus, why)) return nullptr;
    m->energy_start_ = m->energy_mj(&m->has_energy_);
    m->peak_ = m->memory_used();
    m->sampler_ = std::thread([p = m.get()] {
      while (!p->stop_.load()) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        const unsigned long long used = p->memory_used();
        if (used > p->peak_.load()) p->peak_.store(used);
      }
    });
    return m;
  }
  ~NvmlMeter() {
    finish();
    if (shutdown_) shutdown_();
    if (lib_) ::dlclose(lib_);
  }
  // The figures over the time since start().
  std::vector<ResourceFigure> stop() {
    finish();
    std::vector<ResourceFigure> out;
    const unsigned long long used = memory_used();
    if (used > peak_.load()) peak_.store(used);
    out.push_back({"resource.gpu_memory", "B", double(peak_.load()), FANOUT_BETTER_LOWER});
    bool has_energy = has_energy_;
    const unsigned long long end = energy_mj(&has_energy);
    if (has_energy && end >= energy_start_) out.push_back({"resource.gpu_energy", "J", double(end - energy_start_) / 1000.0, FANOUT_BETTER_LOWER});
    return out;
  }

 private:
  using Device = void*;  // nvmlDevice_t
  struct Memory {        // nvmlMemory_t
    unsigned long long total, free, used;
  };
  using InitFn = int (*)();
  using ShutdownFn = int (*)();
  using ErrorFn = const char* (*)(int);
  using ByIndexFn = int (*)(unsigned, Device*);
  using ByUuidFn = int (*)(const char*, Device*);
  using MemoryFn = int (*)(Device, Memory*);
  using EnergyFn = int (*)(Device, unsigned long long*);

  NvmlMeter() = default;

  template <typename F>
  bool symbol(F& f, const char* name, std::string* why) {
    f = reinterpret_cast<F>(::dlsym(lib_, name));
    if (!f && why) *why = std::string("libnvidia-ml.so.1 has no ") + name + " (a driver older than NVML's v2 API)";
    return f != nullptr;
  }
  bool load(std::string* why) {
    lib_ = ::dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!lib_) {
      if (why) *why = "NVML (libnvidia-ml.so.1, NVIDIA's driver) is not on this node";
      return false;
    }
    InitFn init = nullptr;
    if (!symbol(init, "nvmlInit_v2", why) || !symbol(shutdown_, "nvmlShutdown", why) || !symbol(error_, "nvmlErrorString", why) ||
        !symbol(by_index_, "nvmlDeviceGetHandleByIndex_v2", why) || !symbol(by_uuid_, "nvmlDeviceGetHandleByUUID", why) ||
        !symbol(memory_, "nvmlDeviceGetMemoryInfo", why) || !symbol(energy_, "nvmlDeviceGetTotalEnergyConsumption", why))
      return shutdown_ = nullptr, false;
    if (const int rc = init(); rc != 0) {
      if (why) *why = std::string("nvmlInit_v2 failed: ") + error_(rc);
      shutdown_ = nullptr;
      return false;
    }
    return true;
  }
  bool open(const std::string& gpus, std::string* why) {
    size_t at = 0;
    while (at <= gpus.size()) {
      const size_t comma = std::min(gpus.find(',', at), gpus.size());
      const std::string id = gpus.substr(at, comma - at);
      at = comma + 1;
      if (id.empty()) continue;
      Device d = nullptr;
      const bool index = id.find_first_not_of("0123456789") == std::string::npos;
      const int rc = index ? by_index_(unsigned(std::strtoul(id.c_str(), nullptr, 10)), &d) : by_uuid_(id.c_str(), &d);
      if (rc != 0) {
        if (why) *why = "NVML cannot open GPU " + id + ": " + error_(rc);
        return false;
      }
      devices_.push_back(d);
    }
    if (devices_.empty() && why) *why = "no GPU in '" + gpus + "'";
    return !devices_.empty();
  }
  unsigned long long memory_used() const {
    unsigned long long sum = 0;
    for (Device d : devices_) {
      Memory m{};
      if (memory_(d, &m) == 0) sum += m.used;
    }
    return sum;
  }
  unsigned long long energy_mj(bool* supported) const {
    unsigned long long sum = 0;
    for (Device d : devices_) {
      unsigned long long mj = 0;
      if (energy_(d, &mj) != 0) *supported = false;  // NVML_ERROR_NOT_SUPPORTED before Volta: no figure rather than a part
      sum += mj;
    }
    return sum;
  }
  void finish() {
    stop_.store(true);
    if (sampler_.joinable()) sampler_.join();
  }

  void* lib_ = nullptr;
  ShutdownFn shutdown_ = nullptr;
  ErrorFn error_ = nullptr;
  ByIndexFn by_index_ = nullptr;
  ByUuidFn by_uuid_ = nullptr;
  MemoryFn memory_ = nullptr;
  EnergyFn energy_ = nullptr;
  std::vector<Device> devices_;
  unsigned long long energy_start_ = 0;
  bool has_energy_ = true;
  std::atomic<unsigned long long> peak_{0};
  std::atomic<bool> stop_{false};
  std::thread sampler_;
};

}  // namespace fanout_sdk
