// An emulated accelerator shared by several training processes on one node, as the seed's workload shares its
// GPUs (cuda_device ["0 1" "0 1"], ["1 2" "1 2"], ...): the processes of a node map one small file of per-device
// counters (how many processes are in a device step on each device now) and each step progresses at
// 1 / (the count on its busiest device) of the device's speed: a time-sliced GPU, in the fluid approximation
// (the reference's TPM divides a device's throughput by the applications sharing it the same way). A process
// waiting for its loader holds no device, so the others run at full speed meanwhile.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "fluid_sharing.h"

namespace torchloader {

class SharedDevices {
 public:
  static constexpr int kMaxDevices = 64;

  // Maps `path` (created zeroed, kMaxDevices counters, when missing); ids are the devices this process uses
  // (each in [0, kMaxDevices)). Throws std::runtime_error naming the file or the bad id.
  SharedDevices(const std::string& path, std::vector<int> ids);

  // One device step of `seconds` (its time alone on the devices), started at `started` (steady_clock ns: work the
  // caller did since then counts as progress at the sharing of the moment). Returns when the step's work is done.
  void run_step(double seconds, int64_t started_ns);

  // The processes in a device step on this process's busiest device now (>= 1 while this one is in a step).
  int sharing() const;

 private:
  std::vector<int> ids_;  // sorted, unique; checked before the file is mapped
  NodeCounters counters_;
};

}  // namespace torchloader
