// Loader workers that slow each other down: on a real node, every worker of every training process shares the
// node's memory bandwidth, caches and power budget, so a worker loads more slowly the more of the node's loader
// cores are busy. The emulated loaders (trainer.h, EmulatedLoader) follow the TPM's per-process model, which has no
// such term; with contention on, each emulated batch also progresses at 1 / slowdown(workers loading on the node
// now), counted across processes in a node file (fluid_sharing.h). WAA still plans without it: a model error of
// another kind than loader_error's (issue 42).
#pragma once

#include <string>

#include "fluid_sharing.h"

namespace torchloader {

class LoaderContention {
 public:
  static constexpr double kMaxContention = 10;

  // `contention`: how much slower a worker loads when all `cores` loader cores of the node are busy (a batch takes
  // 1 + contention times its time alone), linear in between; past `cores` the workers also time-slice the cores.
  // Throws std::invalid_argument (cores < 1, contention outside 0..10) before touching the file, and
  // std::runtime_error naming the file. A worker killed inside a batch stays counted until the node agent next
  // starts (it removes the file), as a step does in the shared-device file.
  LoaderContention(const std::string& path, int cores, double contention);

  // One batch of `seconds` (its time alone), started now; returns when done.
  void run_batch(double seconds);

  int loading() const;  // the workers of this node in a batch now

  static double slowdown(int loading, int cores, double contention);

 private:
  int cores_;
  double contention_;
  NodeCounters count_;
};

}  // namespace torchloader
