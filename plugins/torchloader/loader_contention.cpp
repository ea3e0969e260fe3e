#include "loader_contention.h"

#include <algorithm>
#include <stdexcept>

namespace torchloader {

namespace {

// Checked before the node's file is created or mapped.
int checked_cores(int cores, double contention) {
  if (cores < 1) throw std::invalid_argument("torchloader: loader contention needs the node's loader cores (>= 1)");
  if (!(contention >= 0 && contention <= LoaderContention::kMaxContention))
    throw std::invalid_argument("torchloader: loader contention must be within 0..10");
  return cores;
}

}  // namespace

LoaderContention::LoaderContention(const std::string& path, int cores, double contention)
    : cores_(checked_cores(cores, contention)), contention_(contention), count_(path, 1, "loader-contention") {}

double LoaderContention::slowdown(int loading, int cores, double contention) {
  cores = std::max(1, cores);
  if (loading <= 1) return 1;
  if (loading > cores) return (1 + contention) * double(loading) / double(cores);  // every core busy, and time-sliced
  return 1 + contention * double(loading - 1) / double(cores - 1);
}

int LoaderContention::loading() const { return count_.get(0); }

void LoaderContention::run_batch(double seconds) {
  const int64_t started = steady_now_ns();
  count_.add(0, 1);
  struct Leave {  // the worker stops counting however the batch ends
    NodeCounters& c;
    ~Leave() { c.add(0, -1); }
  } leave{count_};
  // 50 ms slices: a worker's batch takes about a second here (batch 512 at ~300 samples/s), and 96 workers waking
  // every 2 ms would themselves load the 2 cores the emulation runs on.
  progress_until_done(seconds, started, [this] { return slowdown(loading(), cores_, contention_); }, 0.05);
}

}  // namespace torchloader
